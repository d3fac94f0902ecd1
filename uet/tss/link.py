"""The secure link: TSS between a Fabric Endpoint and its link (behaviour.md §5, §2.3.2).

:class:`SecureLink` wraps any :class:`~uet.link.base.Link` that can tell which UDP source port a
datagram carries on the wire (the direct link today) and puts the Transport Security Sublayer
between the endpoint's PDS core and the wire:

* **Transmit.** Every datagram the core hands out (PDS header onward; requests, ACKs, NACKs and
  control packets alike, §5.5) is sealed under the FEP's secure domain with a fresh TSC — a
  retransmission is a new call, so it gets a new TSC and is encrypted again (§5.6) — through a
  per-destination :class:`~uet.tss.context.TxChannel`.
* **Receive.** Every datagram is opened before the core sees it. A packet that fails — bad tag,
  replay, another secure domain, unknown SDI, not secured, truncated, trimmed (§5.8,
  :class:`~uet.tss.context.DropReason`) — is dropped *silently*: it never reaches the PDS core, so
  no ACK or NACK can answer it. Each drop is counted per reason (``counters["tss_drop_<reason>"]``,
  seen on the endpoint as ``link_tss_drop_<reason>``) and logged as an ``{"ev": "tss_drop"}``
  event-log record with the reason and the claimed source.
* **Secure PDC establishment** (§2.3.2). :meth:`SecureLink.attach` gives the PDS core the FEP's
  Start_PSN policy: ``EXPECTED_0RTT_START`` (:class:`~uet.tss.establish.Expected0RttStart`) or
  ``RANDOM_1RTT_START`` (:class:`~uet.tss.establish.Random1RttStart`), chosen per FEP by
  :attr:`SecurityConfig.method`. The policies interoperate because an initiator follows a NACK
  ``NEW_START_PSN`` whichever method the target uses.

**AAD entropy on the direct link** (decision). The TSS core puts the UDP source port in the AAD as
a 4-byte entropy header (:mod:`uet.tss.nonce`). Over the host stack the UDP source port of every
datagram is the sender's bound port, not the PDS entropy value (:mod:`uet.link.direct`), so that is
what goes into the AAD: the link's own ``port`` on transmit and its ``peer_port`` (where peers are
bound, hence the source port of what they send) on receive. The AAD therefore matches what a
capture shows, and ``uet-decode --keys`` decrypts a capture of the direct link. A link that puts
the entropy itself in the UDP source port (the fabric link) would need to report each received
datagram's source port; its callback does not today, so :class:`SecureLink` refuses links without
``port``/``peer_port`` instead of guessing (:class:`~uet.tss.errors.TssError`).

**Which secure domain** (§5.1: all packets of a PDC belong to one SDI; the reference uses a fixed
SDI). A FEP sends under one SD, :attr:`SecurityConfig.sdi` (default: the table's only SD), and by
default accepts only that SD (``wrong_domain`` otherwise); ``accept_any_sdi`` accepts every SD of
its table.

**Test and bench instruments** (not protocol): :class:`Tamper` flips one random bit in a fraction
of the *sealed* datagrams this FEP transmits — an attacker on the wire — and can remember them;
``record_arrivals`` keeps a fingerprint of every datagram received, so a benchmark can count
exactly how many tampered datagrams reached the receiver (:func:`tampered_arrivals`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from uet.link.base import Link, ReceiveCallback
from uet.tss.context import TssConfig, TssContext, as_address
from uet.tss.domain import SecureDomainTable
from uet.tss.errors import TssError
from uet.tss.establish import InitiatorStartPsn, StartPsnMethod, StartPsnPolicy, start_psn_policy

__all__ = [
    "FINGERPRINT_LEN",
    "SecureLink",
    "SecurityConfig",
    "Tamper",
    "rotate_keys",
    "tampered_arrivals",
]

#: Bytes of a datagram kept as its fingerprint: the security header (its TSC is unique per
#: transmission) plus the first ciphertext bytes.
FINGERPRINT_LEN = 32
#: ``ecn`` bit a link sets on a packet a switch trimmed (:data:`uet.link.fabric.ECN_TRIMMED`).
_ECN_TRIMMED = 0x100


class Tamper:
    """An attacker on the wire: flips one random bit in a fraction ``p`` of the datagrams.

    Seeded and deterministic. ``tampered`` counts the datagrams changed; with ``record`` their
    fingerprints (first :data:`FINGERPRINT_LEN` bytes *after* the flip, as the wire carries them)
    are kept in ``fingerprints``.
    """

    def __init__(self, p: float, *, seed: int = 0, record: bool = False) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"tamper probability must be in [0, 1], got {p}")
        self.p = p
        self.rng = random.Random(seed)
        self.tampered = 0
        self.record = record
        self.fingerprints: list[bytes] = []

    def apply(self, datagram: bytes) -> bytes:
        """``datagram``, or a copy of it with one random bit flipped (probability ``p``)."""
        if not datagram or self.rng.random() >= self.p:
            return datagram
        bit = self.rng.randrange(len(datagram) * 8)
        buf = bytearray(datagram)
        buf[bit >> 3] ^= 0x80 >> (bit & 7)
        out = bytes(buf)
        self.tampered += 1
        if self.record:
            self.fingerprints.append(out[:FINGERPRINT_LEN])
        return out


@dataclass
class SecurityConfig:
    """TSS configuration of one FEP: the ``security=`` argument of :class:`uet.endpoint.Endpoint`.

    Attributes:
        table: the FEP's secure-domain table (:func:`uet.tss.keyfile.load_key_file`, or
            :meth:`~uet.tss.domain.SecureDomain.generate` + ``provision`` per member).
        sdi: the secure domain this FEP's PDCs use (None: the table must hold exactly one SD).
        method: the target's secure establishment method (behaviour.md §2.3.2), per FEP. Default
            RANDOM_1RTT_START (issue 15 item 13): EXPECTED_0RTT_START keeps ``Expected_PSN`` in
            memory only, so a target restarted with the same key file accepts a replay of
            captured sealed SYN packets 0-RTT and delivers a message (or applies an atomic)
            again; with 1-RTT every new PDC starts from a target-minted Start_PSN a replayer
            cannot re-seal. Choose 0-RTT to save the round trip where targets never restart
            with live keys (RUDI/UUD have no replay protection either way, §2.14/§2.15).
        tss: receive/transmit policy of the TSS core (:class:`~uet.tss.context.TssConfig`).
        accept_any_sdi: accept packets of every SD in the table, not only ``sdi``.
        tamper: an attacker flipping bits in this FEP's sealed transmissions (tests, bench).
        record_arrivals: keep a fingerprint of every received datagram (bench accounting).
        rng: random source of RANDOM_1RTT_START Start_PSNs (None: :mod:`secrets`).
    """

    table: SecureDomainTable
    sdi: int | None = None
    method: StartPsnMethod = StartPsnMethod.RANDOM_1RTT_START
    tss: TssConfig = field(default_factory=TssConfig)
    accept_any_sdi: bool = False
    tamper: Tamper | None = None
    record_arrivals: bool = False
    rng: random.Random | None = None

    def domain(self) -> int:
        """The SDI this FEP sends under (``sdi``, or the table's only SD)."""
        if self.sdi is not None:
            if self.sdi not in self.table:
                raise TssError(f"secure domain {self.sdi} is not in the FEP's table")
            return self.sdi
        sds = list(self.table)
        if len(sds) != 1:
            raise TssError(f"the table holds {len(sds)} secure domains: name the FEP's one with SecurityConfig.sdi")
        return sds[0].sdi


class SecureLink(Link):
    """A :class:`Link` that seals what it sends and opens what it receives (module docstring)."""

    def __init__(
        self,
        inner: Link,
        config: SecurityConfig | SecureDomainTable,
        *,
        event_log: Callable[[dict], None] | None = None,
    ) -> None:
        if isinstance(config, SecureDomainTable):
            config = SecurityConfig(config)
        port = getattr(inner, "port", None)
        peer_port = getattr(inner, "peer_port", None)
        if not isinstance(port, int) or not isinstance(peer_port, int):
            raise TssError(
                f"{inner!r} does not report the UDP ports its datagrams carry; TSS needs them for the AAD "
                "(uet.tss.link module docstring)"
            )
        self.inner = inner
        self.config = config
        self.address = inner.address
        self.sdi = config.domain()
        self.ctx = TssContext(config.table, inner.address, config.tss)
        self.event_log = event_log
        self.tamper = config.tamper
        self.arrivals: set[bytes] | None = set() if config.record_arrivals else None
        self.policy: StartPsnPolicy | None = None
        self.initiator_start: InitiatorStartPsn | None = None
        self._tx_sport = port
        self._rx_sport = peer_port
        self._expected = None if config.accept_any_sdi else self.sdi
        self._seal: dict[str, Callable[[bytes], bytes]] = {}
        self._src: dict[str, bytes] = {}
        self._callback: ReceiveCallback | None = None
        self._tss: dict[str, int] = {"tss_tx_errors": 0, "tss_rotations": 0}
        inner.set_receiver(self._on_batch)

    def __repr__(self) -> str:
        return f"SecureLink({self.inner!r}, sdi={self.sdi})"

    # -- pass-through attributes the endpoint and tools read ---------------------------------------

    @property
    def port(self) -> int:
        return self.inner.port  # type: ignore[attr-defined, no-any-return]

    @property
    def peer_port(self) -> int:
        return self.inner.peer_port  # type: ignore[attr-defined, no-any-return]

    @property
    def impairment(self) -> Any:
        return getattr(self.inner, "impairment", None)

    @property
    def counters(self) -> dict[str, int]:  # type: ignore[override]
        """The inner link's counters plus ``tss_*``: sealed/opened packets, drops per reason, total
        drops (``tss_dropped``), transmit errors and rotations."""
        out = dict(self.inner.counters)
        ctx = self.ctx
        out.update(self._tss)
        out["tss_out_pkts"] = ctx.stats["out_pkts"]
        out["tss_in_auth_pkts"] = ctx.stats["in_auth_pkts"]
        out["tss_out_invoke_fail"] = ctx.stats["out_invoke_fail"]
        for reason, n in ctx.drops.items():
            out["tss_drop_" + reason.value] = n
        out["tss_dropped"] = ctx.dropped
        if self.tamper is not None:
            out["tss_tampered"] = self.tamper.tampered
        return out

    # -- PDS hooks ---------------------------------------------------------------------------------

    def attach(self, core: Any) -> None:
        """Give the PDS core this FEP's secure establishment hooks (behaviour.md §2.3.2).

        ``core.start_psn_policy`` (target side) gets a :class:`_CorePolicy`: called as
        ``policy(peer, offered_start)`` when a SYN would create a target PDC, it returns None to
        accept (0-RTT) or the Start_PSN the target demands (PENDING + NACK ``NEW_START_PSN``); a
        re-driven SYN carrying that value establishes the PDC. It also offers the policy's own
        interface with this FEP's SDI (``check_start_psn``, ``on_close`` for the EPSN closing ACK).
        Where the core has the initiator seam ``initiator_start_psn`` (``ini_start_psn`` per SDI,
        adopted from EPSN closing ACKs), it gets an :class:`~uet.tss.establish.InitiatorStartPsn`;
        the core uses it for PDCs submitted with an SDI.
        """
        policy = start_psn_policy(self.config.method, self.config.rng)
        self.policy = policy
        core.start_psn_policy = _CorePolicy(policy, self.sdi, not self.config.accept_any_sdi)
        if hasattr(core, "initiator_start_psn"):
            self.initiator_start = InitiatorStartPsn(self.config.rng)
            core.initiator_start_psn = self.initiator_start

    # -- transmit ----------------------------------------------------------------------------------

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        """Seal ``datagram`` for ``dst`` (new TSC) and send it; a datagram that cannot be sealed
        (no active key, TSC exhausted, SD latched) is counted in ``tss_tx_errors`` and not sent."""
        seal = self._seal.get(dst)
        try:
            if seal is None:
                ch = self.ctx.tx_channel(sdi=self.sdi, dst=dst, entropy=self._tx_sport)
                seal = self._seal[dst] = ch.seal
            sealed = seal(datagram)
        except TssError as e:
            self._tss["tss_tx_errors"] += 1
            self._log({"ev": "tss_tx_error", "peer": dst, "error": type(e).__name__})
            return
        if self.tamper is not None:
            sealed = self.tamper.apply(sealed)
        self.inner.send(sealed, dst, entropy, dscp, ecn)

    # -- receive -----------------------------------------------------------------------------------

    def set_receiver(self, callback: ReceiveCallback) -> None:
        self._callback = callback

    def _on_batch(self, batch: Sequence[tuple[bytes, str, int]]) -> None:
        ctx = self.ctx
        if ctx.get_timer() is not None:
            ctx.handle_timer(time.monotonic_ns())  # retire keys whose grace period ended (§5.7)
        out: list[tuple[bytes, str, int]] = []
        srcs = self._src
        sport = self._rx_sport
        expected = self._expected
        arrivals = self.arrivals
        open_fast = ctx.open_fast
        for data, src, ecn in batch:
            if arrivals is not None:
                arrivals.add(data[:FINGERPRINT_LEN])
            sb = srcs.get(src)
            if sb is None:
                try:
                    sb = srcs[src] = as_address(src)
                except (OSError, ValueError):
                    continue
            if ecn & _ECN_TRIMMED:
                pt = ctx.open(data, entropy=sport, src=sb, trimmed=True)
            else:
                pt = open_fast(data, sport, sb, expected)
            if pt is None:
                if self.event_log is not None:
                    reason = ctx.last_drop
                    self._log({"ev": "tss_drop", "peer": src, "reason": reason.value if reason else None})
                continue
            out.append((pt, src, ecn))
        if out and self._callback is not None:
            self._callback(out)

    # -- key rotation (§5.7) -----------------------------------------------------------------------

    def install_key(self, an: int, key: bytes, *, epoch: int = 0) -> None:
        """SDME: install the next association's key in slot ``an`` (accepted on receive at once)."""
        self.ctx.install_key(self.sdi, an, key, epoch=epoch)

    def activate(self, an: int, now_ns: int | None = None) -> None:
        """Switch this FEP's sender to slot ``an``; the old key is accepted for the grace period."""
        now = time.monotonic_ns() if now_ns is None else now_ns
        self.ctx.activate(self.sdi, an, now)
        self._tss["tss_rotations"] += 1
        self._log({"ev": "tss_rotate", "sdi": self.sdi, "an": an})

    @property
    def tx_an(self) -> int:
        """The AN this FEP's sender uses now."""
        return self.ctx.table[self.sdi].tx_an

    # -- teardown ----------------------------------------------------------------------------------

    def close(self) -> None:
        self.inner.close()

    def _log(self, rec: dict) -> None:
        log = self.event_log
        if log is not None:
            log({"t": time.monotonic_ns(), "fep": self.address, **rec})


class _CorePolicy:
    """A FEP's target Start_PSN policy bound to its SDI, in the forms the PDS core may call.

    The core passes the SDI the TSS layer opened the SYN under, or 0 when its owner did not tell
    it. A FEP that accepts only its own SD (the default) always answers for that SD; with
    ``accept_any_sdi`` the core's SDI is used when it is one (not None/0).
    """

    __slots__ = ("policy", "sdi", "method", "fixed")

    def __init__(self, policy: StartPsnPolicy, sdi: int, fixed: bool) -> None:
        self.policy = policy
        self.sdi = sdi
        self.method = policy.method
        self.fixed = fixed

    def _sdi(self, sdi: int | None) -> int:
        return self.sdi if self.fixed or not sdi else sdi

    def __call__(self, peer: str, offered_start: int) -> int | None:
        return self.policy.check_start_psn(self.sdi, offered_start)

    def check_start_psn(self, sdi: int | None, start_psn: int, minted: int | None = None) -> int | None:
        return self.policy.check_start_psn(self._sdi(sdi), start_psn, minted)

    def on_close(self, sdi: int | None, start_psn: int) -> int | None:
        return self.policy.on_close(self._sdi(sdi), start_psn)


def rotate_keys(links: Sequence[SecureLink], key: bytes | None = None, *, now_ns: int | None = None) -> int:
    """Rotate the key of the links' common secure domain, make-before-break (behaviour.md §5.7).

    The SDME's two steps: first install ``key`` (default: 32 fresh random bytes) in the inactive
    slot of every member, so each accepts the new association before anyone sends with it; then
    switch every member's sender to it. The old association stays accepted for
    ``TssConfig.key_grace_ns`` on each member, so packets in flight under it are not lost.
    Returns the new AN.
    """
    import os

    if not links:
        raise ValueError("no links to rotate")
    new_key = os.urandom(32) if key is None else key
    an = links[0].tx_an ^ 1
    for link in links:
        if link.tx_an ^ 1 != an:
            raise TssError("the members do not use the same AN: rotate them separately")
        link.install_key(an, new_key)
    for link in links:
        link.activate(an, now_ns)
    return an


def tampered_arrivals(tamper: Tamper, arrivals: set[bytes]) -> int:
    """How many datagrams ``tamper`` changed reached a receiver that recorded ``arrivals``."""
    return sum(1 for fp in tamper.fingerprints if fp in arrivals)
