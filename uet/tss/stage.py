"""TSS as a stage of the FEP core: seal what the core sends, open what it receives (behaviour.md §5).

:class:`TssStage` is sans-I/O: the core (:class:`uet.fep.core.FepCore`) gives it every datagram
with ``now``, and its key-grace deadline (§5.7) is part of the core's ``get_timer()``. It works
over every link because the AAD's entropy (the UDP source port, :mod:`uet.tss.nonce`) is either a
fixed port — the direct link's case, below — or the datagram's own: the :class:`Transmit`
entropy on transmit and the :class:`Datagram` ``source_port`` on receive (a fabric link or a
simulated one, where the entropy value really is the UDP source port).

* **Transmit.** Every datagram (PDS header onward; requests, ACKs, NACKs and control packets
  alike, §5.5) is sealed under the FEP's secure domain with a fresh TSC — a retransmission is a
  new call, so it gets a new TSC and is encrypted again (§5.6) — through a per-destination
  :class:`~uet.tss.context.TxChannel`. A datagram that cannot be sealed (no active key, TSC
  exhausted, SD latched) is counted in ``tss_tx_errors`` and not sent.
* **Receive.** A packet that fails — bad tag, replay, another secure domain, unknown SDI, not
  secured, truncated, trimmed (§5.8, :class:`~uet.tss.context.DropReason`) — is dropped
  *silently*: it never reaches the PDS core, so no ACK or NACK can answer it. Each drop is
  counted per reason (``tss_drop_<reason>``) and logged as an ``{"ev": "tss_drop"}`` record.
* **Secure PDC establishment** (§2.3.2). :meth:`TssStage.attach` gives the PDS core the FEP's
  Start_PSN policy: ``EXPECTED_0RTT_START`` or ``RANDOM_1RTT_START``, per FEP
  (:attr:`SecurityConfig.method`); they interoperate because an initiator follows a NACK
  ``NEW_START_PSN`` whichever method the target uses.

**AAD entropy on the direct link** (decision). Over the host stack the UDP source port of every
datagram is the sender's bound port, not the PDS entropy value (:mod:`uet.link.direct`), so that
is what goes into the AAD: ``tx_port`` (the link's own port) on transmit and ``rx_port`` (where
peers are bound) on receive. The AAD then matches what a capture shows, and ``uet-decode
--keys`` decrypts a capture of the direct link.

**Which secure domain** (§5.1: all packets of a PDC belong to one SDI; the reference uses a fixed
SDI). A FEP sends under one SD, :attr:`SecurityConfig.sdi` (default: the table's only SD), and by
default accepts only that SD (``wrong_domain`` otherwise); ``accept_any_sdi`` accepts every SD.

**Test and bench instruments** (not protocol): :class:`Tamper` flips one random bit in a fraction
of the *sealed* datagrams — an attacker on the wire — and can remember them; ``record_arrivals``
keeps a fingerprint of every datagram received (:func:`tampered_arrivals`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from uet.tss.channel import RxChannel, TxChannel
from uet.tss.context import TssConfig, TssContext, as_address
from uet.tss.domain import SecureDomainTable
from uet.tss.errors import TssError
from uet.tss.establish import InitiatorStartPsn, StartPsnMethod, StartPsnPolicy, start_psn_policy
from uet.wire.frame import MARK_TRIMMED

if TYPE_CHECKING:
    from uet.pds.core import PdsCore

__all__ = ["FINGERPRINT_LEN", "SecurityConfig", "Tamper", "TssStage", "tampered_arrivals"]

#: Bytes of a datagram kept as its fingerprint: the security header (its TSC is unique per
#: transmission) plus the first ciphertext bytes.
FINGERPRINT_LEN = 32
#: ``ecn`` bit of the links' packed form for a packet a switch trimmed (uet.fep.core.ECN_TRIMMED).
_ECN_TRIMMED = MARK_TRIMMED
_tnew = tuple.__new__


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


def tampered_arrivals(tamper: Tamper, arrivals: set[bytes]) -> int:
    """How many datagrams ``tamper`` changed reached a receiver that recorded ``arrivals``."""
    return sum(1 for fp in tamper.fingerprints if fp in arrivals)


@dataclass
class SecurityConfig:
    """TSS configuration of one FEP: the ``security=`` argument of :class:`uet.Endpoint` and
    :class:`uet.fep.FepCore`.

    Attributes:
        table: the FEP's secure-domain table (:func:`uet.keyfile.load_key_file`, or
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
        rng: random source of RANDOM_1RTT_START Start_PSNs (None: the FEP core's seeded
            generator when it has a seed, else :mod:`secrets`).
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


class TssStage:
    """One FEP's TSS (module docstring). ``tx_port`` / ``rx_port``: fixed AAD entropy on
    transmit / receive (the direct link's ports), None = each datagram's own."""

    def __init__(
        self,
        address: str,
        config: SecurityConfig | SecureDomainTable,
        *,
        tx_port: int | None = None,
        rx_port: int | None = None,
        rng: random.Random | None = None,
        event_log: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if isinstance(config, SecureDomainTable):
            config = SecurityConfig(config)
        self.address = address
        self.config = config
        self.sdi = config.domain()
        self.ctx = TssContext(config.table, address, config.tss)
        self.event_log = event_log
        self.tamper = config.tamper
        self.arrivals: set[bytes] | None = set() if config.record_arrivals else None
        self.policy: StartPsnPolicy | None = None
        self.initiator_start: InitiatorStartPsn | None = None
        self.tx_port = tx_port
        self.rx_port = rx_port
        self._rng = config.rng if config.rng is not None else rng
        self._expected = None if config.accept_any_sdi else self.sdi
        self._tx: dict[Any, TxChannel] = {}
        self._src: dict[str, bytes] = {}
        self._rx: dict[Any, RxChannel] = {}
        self._stats: dict[str, int] = {"tss_tx_errors": 0, "tss_rotations": 0}

    def __repr__(self) -> str:
        return f"TssStage({self.address!r}, sdi={self.sdi})"

    @property
    def counters(self) -> dict[str, int]:
        """``tss_*``: sealed/opened packets, drops per reason, total drops (``tss_dropped``),
        transmit errors, rotations (and ``tss_tampered`` with a :class:`Tamper`)."""
        ctx = self.ctx
        out = dict(self._stats)
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

    def attach(self, core: PdsCore) -> None:
        """Give the PDS core this FEP's secure establishment hooks (behaviour.md §2.3.2).

        ``core.start_psn_policy`` (target side, uet.pds.startpsn) gets a :class:`_CorePolicy`:
        asked ``offer(peer, sdi, offered_start)`` when a SYN would create a target PDC, it returns
        None to accept (0-RTT) or the Start_PSN the target demands (PENDING + NACK
        ``NEW_START_PSN``). The initiator seam ``core.initiator_start_psn`` gets an
        :class:`~uet.tss.establish.InitiatorStartPsn`, used for PDCs submitted with an SDI.
        """
        policy = start_psn_policy(self.config.method, self._rng)
        self.policy = policy
        core.start_psn_policy = _CorePolicy(policy, self.sdi, not self.config.accept_any_sdi)
        self.initiator_start = InitiatorStartPsn(self._rng)
        core.initiator_start_psn = self.initiator_start

    # -- transmit ----------------------------------------------------------------------------------

    def _tx_channel(self, dst: str, entropy: int) -> TxChannel:
        """The channel to ``dst`` (and ``entropy`` unless ``tx_port`` is fixed); raises
        :class:`TssError` when the SD cannot send."""
        port = self.tx_port
        key = dst if port is not None else (dst, entropy)
        ch = self._tx.get(key)
        if ch is None:
            if len(self._tx) >= 4096:  # per-datagram entropy: keep the channel cache bounded
                self._tx.clear()
            ch = self._tx[key] = self.ctx.tx_channel(sdi=self.sdi, dst=dst, entropy=entropy if port is None else port)
        return ch

    def seal(self, datagram: bytes, dst: str, entropy: int, now: int) -> bytes | None:
        """``datagram`` sealed for ``dst`` (new TSC), or None (counted in ``tss_tx_errors``)."""
        return self._seal_one(datagram, dst, entropy, now)

    def _seal_one(self, datagram: bytes, dst: str, entropy: int, now: int) -> bytes | None:
        try:
            sealed = self._tx_channel(dst, entropy).seal(datagram)
        except TssError as e:
            self._stats["tss_tx_errors"] += 1
            self._log({"t": now, "ev": "tss_tx_error", "peer": dst, "error": type(e).__name__})
            return None
        if self.tamper is not None:
            sealed = self.tamper.apply(sealed)
        return sealed

    def seal_packed(self, datagrams: Sequence[tuple[bytes, str, int]], now: int) -> list[tuple[bytes, str, int] | None]:
        """Seal ``(data, destination, entropy)`` datagrams: one ``(sealed, destination, entropy)``
        per datagram, in order, None for one that cannot be sealed (counted as :meth:`seal`).

        Data path: each run of datagrams to one destination (and entropy, unless ``tx_port`` is
        fixed) is sealed by its channel in one :meth:`~uet.tss.channel.TxChannel.seal_run` call;
        a datagram the channel declines, and every one while a :class:`Tamper` is on, takes
        :meth:`seal`."""
        out: list[tuple[bytes, str, int] | None] = []
        by_entropy = self.tx_port is None
        n = len(datagrams)
        i = 0
        while i < n:
            data, dst, entropy = datagrams[i]
            if self.tamper is None:
                try:
                    ch = self._tx_channel(dst, entropy)
                except TssError:
                    pass  # seal() below counts and logs it
                else:
                    j = ch.seal_run(datagrams, i, out, by_entropy)  # type: ignore[arg-type]
                    if j > i:
                        i = j
                        continue
            sealed = self._seal_one(data, dst, entropy, now)
            out.append(None if sealed is None else (sealed, dst, entropy))
            i += 1
        return out

    def seal_batch(self, items: Sequence[tuple[Any, ...]], now: int) -> list[Any]:
        """Seal every ``(data, destination, entropy, ...)`` record, keeping its other fields and
        type; records that cannot be sealed are left out (:meth:`seal_packed`)."""
        sealed = self.seal_packed([(t[0], t[1], t[2]) for t in items], now)
        return [_tnew(type(t), (s[0], *t[1:])) for t, s in zip(items, sealed, strict=True) if s is not None]

    # -- receive -----------------------------------------------------------------------------------

    def _open(self, data: bytes, src: str, sport: int, trimmed: bool, now: int) -> bytes | None:
        ctx = self.ctx
        sb = self._src.get(src)
        if sb is None:
            try:
                sb = self._src[src] = as_address(src)
            except (OSError, ValueError):
                return None
        if trimmed:
            pt = ctx.open(data, entropy=sport, src=sb, trimmed=True)
        else:
            pt = ctx.open_fast(data, sport, sb, self._expected)
        if pt is None and self.event_log is not None:
            reason = ctx.last_drop
            self._log({"t": now, "ev": "tss_drop", "peer": src, "reason": reason.value if reason else None})
        return pt

    def _arrived(self, datagrams: Any) -> dict[Any, RxChannel]:
        """Fingerprint ``datagrams`` (with ``record_arrivals``); the per-sender channels of the
        receive loops."""
        arrivals = self.arrivals
        if arrivals is not None:
            arrivals.update(data[:FINGERPRINT_LEN] for data in datagrams)
        rx = self._rx
        if len(rx) >= 4096:  # per-datagram entropy: keep the cache bounded
            rx.clear()
        return rx

    def open_marked(self, batch: Sequence[tuple[bytes, str, int]], now: int) -> list[tuple[bytes, str, int]]:
        """Open ``(data, source, ecn with trim marks)`` items (the links' packed form; the source
        port is ``rx_port``); the ones that fail are dropped (module docstring).

        Data path: the channel that opened a source's last datagram
        (:class:`~uet.tss.channel.RxChannel`) opens the run of datagrams from that source that
        starts here (:meth:`~uet.tss.channel.RxChannel.open_run`); whatever it declines takes
        :meth:`TssContext.open_fast <uet.tss.context.TssContext.open_fast>`, which decides and
        counts."""
        self._retire(now)
        sport = self.rx_port or 0
        ctx = self.ctx
        chans = self._arrived(item[0] for item in batch)
        out: list[tuple[bytes, str, int]] = []
        fast = 0
        i = 0
        n = len(batch)
        while i < n:
            data, src, ecn = batch[i]
            ch = chans.get(src)
            if ch is not None:
                j = ch.open_run(batch, i, out)
                if j > i:
                    fast += j - i
                    i = j
                    continue
            pt = self._open(data, src, sport, bool(ecn & _ECN_TRIMMED), now)
            if pt is not None:
                out.append((pt, src, ecn))
                if ctx.last_channel is not None:
                    chans[src] = ctx.last_channel
            i += 1
        if fast:
            ctx.stats["in_auth_pkts"] += fast
        return out

    def open_batch(self, items: Sequence[Any], now: int) -> list[Any]:
        """Open :class:`~uet.fep.events.Datagram` records (source port: ``rx_port`` when fixed,
        else each record's own); the ones that fail are dropped. Same data path as
        :meth:`open_marked`, with a channel per source and source port."""
        self._retire(now)
        fixed = self.rx_port
        ctx = self.ctx
        chans = self._arrived(d[0] for d in items)
        out = []
        fast = 0
        for d in items:
            sport = fixed if fixed is not None else d[5]
            key = (d[1], sport)
            ch = chans.get(key)
            if ch is not None and not d[3]:
                pt = ch.open(d[0])
                if pt is not None:
                    fast += 1
                    out.append(_tnew(type(d), (pt, *d[1:])))
                    continue
            pt = self._open(d[0], d[1], sport, d[3], now)
            if pt is not None:
                out.append(_tnew(type(d), (pt, *d[1:])))
                if ctx.last_channel is not None:
                    chans[key] = ctx.last_channel
        if fast:
            ctx.stats["in_auth_pkts"] += fast
        return out

    # -- timers and key rotation (§5.7) ------------------------------------------------------------

    def _retire(self, now: int) -> None:
        ctx = self.ctx
        ctx.now_ns = now  # (the time of any tag failure in this batch: the latch's window)
        if ctx.get_timer() is not None:
            ctx.handle_timer(now)  # retire keys whose grace period ended (§5.7)

    def get_timer(self) -> int | None:
        """When the next key's grace period ends, or None."""
        return self.ctx.get_timer()

    def handle_timer(self, now: int) -> None:
        """Retire the keys whose grace period ended."""
        self._retire(now)

    def install_key(self, an: int, key: bytes, *, epoch: int = 0) -> None:
        """SDME: install the next association's key in slot ``an`` (accepted on receive at once)."""
        self.ctx.install_key(self.sdi, an, key, epoch=epoch)

    def activate(self, an: int, now: int) -> None:
        """Switch this FEP's sender to slot ``an``; the old key is accepted for the grace period."""
        self.ctx.activate(self.sdi, an, now)
        self._stats["tss_rotations"] += 1
        self._log({"t": now, "ev": "tss_rotate", "sdi": self.sdi, "an": an})

    @property
    def tx_an(self) -> int:
        """The AN this FEP's sender uses now."""
        return self.ctx.table[self.sdi].tx_an

    def _log(self, rec: dict[str, Any]) -> None:
        log = self.event_log
        if log is not None:
            log({**rec, "fep": self.address})


class _CorePolicy:
    """A FEP's target Start_PSN policy bound to its SDI: the PDS core's
    :class:`uet.pds.startpsn.StartPsnPolicy`.

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

    def offer(self, peer: str, sdi: int, start_psn: int) -> int | None:
        return self.check_start_psn(sdi, start_psn)

    def check_start_psn(self, sdi: int | None, start_psn: int, minted: int | None = None) -> int | None:
        return self.policy.check_start_psn(self._sdi(sdi), start_psn, minted)

    def on_close(self, sdi: int | None, start_psn: int) -> int | None:
        return self.policy.on_close(self._sdi(sdi), start_psn)
