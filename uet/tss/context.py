"""Seal and open secured UET packets for one FEP (behaviour.md §5.5–§5.8, wire-format.md §3).

:class:`TssContext` is the sans-I/O TSS core: bytes, addresses and time in, bytes out, no clock
reads, no sockets. The PDS hands :meth:`TssContext.seal` the packet from the PDS header on (PDS ‖
SES ‖ payload) and gets back ``security header ‖ ciphertext ‖ ICV``; on receive it hands
:meth:`TssContext.open` the bytes after UDP (or after the entropy header) and gets the plaintext
or None.

Sealing (§5.5, §5.6): take the next TSC of the SD's active association (every frame, each
retransmission included, gets a fresh TSC; the caller re-seals a retransmission), build the
header, derive the key per mode, IV = source id ‖ epoch ‖ TSC (⊕ KDF mask), AAD = src ‖ dst ‖
entropy header ‖ security header (see :mod:`uet.tss.nonce` for the UDP choice), AES-256-GCM with a
16-byte tag appended.

Opening follows §5.8; a failing packet is dropped silently, never raises, produces no output and
increments exactly one counter in :attr:`TssContext.drops` (a :class:`DropReason`):

=================  ====================================================  ========================
reason             when                                                  spec counter (§5.8)
=================  ====================================================  ========================
``truncated``      shorter than security header + 16-byte ICV            (malformed)
``trimmed``        the caller saw the trimmed DSCP: the tag is gone      (inference, §3.5)
``not_secure``     not a security header and security is required        "encryption bypass" [1]
``wrong_domain``   SDI ≠ the SDI the caller expects, or a CLIENT gets a  (inference)
                   packet carrying another client's SSI
``unknown_sdi``    SDI not in the table                                  ``in_errored``
``sd_disabled``    SD provisioned but disabled                           ``in_invalid_sa``
``sd_dropping``    SD latched after too many authentication failures     ``in_invalid``
``bad_header``     SP differs from the SD's SSI use; IPv6 without SSI    ``in_invalid``
                   outside cluster mode
``no_key``         the AN selects an empty key slot                      (inference)
``retired_key``    the AN selects a key whose grace period is over       (inference, §5.7)
``bad_epoch``      epoch older than the slot's by > max_epoch_lifetime   ``in_late_pkts``
``replay``         TSC already seen in the replay window                 (inference, §5.6)
``stale``          TSC behind the replay window                          (inference, §5.6)
``bad_tag``        tag verification failed                               ``in_auth_fail_pkts``
=================  ====================================================  ========================

[1] The reference passes a non-security packet through; we drop it unless
:attr:`TssConfig.require_security` is False (then it is returned as is and counted as ``bypass``).
Successful opens count ``in_auth_pkts`` in :attr:`TssContext.stats`; seals count ``out_pkts``.

Trimmed packets (behaviour.md §3.5, gap): trimming cuts the ICV, so a trimmed secure packet can
never authenticate, and its PDS header is ciphertext, so no NACK can be built from it. The caller
(link/PDS layer) that sees the trimmed DSCP passes ``trimmed=True``: the packet is dropped as
``trimmed`` without a decryption attempt and does not count toward the authentication-failure
latch — otherwise ordinary congestion would latch busy secure domains. The loss is repaired by the
PDS retransmission timer.

Authentication-failure latch (§5.8 step 6): more than ``auth_fail_threshold`` tag failures in one
``auth_fail_window_ns`` (1 s) latch the SD into dropping for one such window, after which it recovers
by itself (or earlier, :meth:`SecureDomain.reset_dropping`); the reference's latch holds until the
SDME clears it (``auth_fail_window_ns=None``), so one flood shut a domain for good (issue 29 item
15). The reference latches at 1000; here the
latch is **off by default** (``auth_fail_threshold=None``) — the trade: the SDI travels in clear,
so with the latch on anyone who can reach the FEP shuts the secure domain for every honest peer
with ~1000 forged packets (and ordinary corruption on a lossy link reaches the count by itself:
ROD at 5 % corruption drew 2,099 bad tags in one run, issue 15 item 12). Off, a forged or corrupt
packet costs one failed tag check and is counted (``in_auth_fail_pkts``); the alarm is the
counter, which a monitor can watch. Set a threshold to get the reference's fail-closed latch where
an SDME is there to clear it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from uet.enums import StrEnum
from uet.tss.channel import RxChannel, TxChannel, aad_prefix
from uet.tss.domain import DerivedKey, DerivedKeyInputs, KeySlot, SdMode, SecureDomain, SecureDomainTable, SlotState
from uet.tss.errors import CounterExhaustedError, DomainStateError, TssError, UnknownDomainError, UnknownPeerError
from uet.tss.kdf import KEY_LEN, kdf, kdf_context
from uet.tss.nonce import aad as build_aad
from uet.tss.nonce import iv as build_iv
from uet.tss.nonce import iv_source_id
from uet.tss.replay import DEFAULT_WINDOW, ReplayWindow
from uet.tss.secret import SecretBytes
from uet.wire.net import as_address
from uet.wire.tss import ICV_LEN, TSS, TSS_SSI, TSS_TYPE

__all__ = ["DropReason", "Opened", "TssConfig", "TssContext", "TxChannel", "as_address"]

_TSS_FIRST_MASK = 0xF8
_TSS_FIRST = TSS_TYPE << 3
_SP = 0x04


class DropReason(StrEnum):
    """Why :meth:`TssContext.open` dropped a packet (table in the module docstring)."""

    TRUNCATED = "truncated"
    TRIMMED = "trimmed"
    NOT_SECURE = "not_secure"
    WRONG_DOMAIN = "wrong_domain"
    UNKNOWN_SDI = "unknown_sdi"
    SD_DISABLED = "sd_disabled"
    SD_DROPPING = "sd_dropping"
    BAD_HEADER = "bad_header"
    NO_KEY = "no_key"
    RETIRED_KEY = "retired_key"
    BAD_EPOCH = "bad_epoch"
    REPLAY = "replay"
    STALE = "stale"
    BAD_TAG = "bad_tag"


@dataclass(frozen=True)
class TssConfig:
    """TSS receive/transmit policy of one FEP (one dataclass per layer, conventions.md).

    Attributes:
        replay_window: receive replay window per (SDI, AN, sender), in TSC values; 0 disables it
            (the reference's behaviour, §5.6). Default 4096, see :mod:`uet.tss.replay`.
        max_epoch_lifetime: reject packets whose epoch is older than the slot's by more than this
            (16-bit serial comparison; reference ``rx_max_epoch_lifetime`` 16, §5.6).
        key_grace_ns: how long the previous association stays accepted after the sender switched
            AN (§5.7; the reference test stand-in uses a 2 s guard window).
        auth_fail_threshold: tag failures per SD before it latches into dropping (reference 1000,
            §5.8 step 6); None (the default) disables the latch: see the module docstring for the
            trade (forged packets carrying the cleartext SDI would shut the SD for everyone).
        auth_fail_window_ns: with a threshold: failures are counted per window of this length
            and a latched SD drops for one window, then recovers by itself (a rate limit: a flood
            of forged packets shuts the SD for a window at a time, never for good); None keeps
            the reference's latch, lifted only by the SDME (:meth:`SecureDomain.reset_dropping`).
        require_security: drop packets that do not start with a security header (§5.8 step 1,
            inference); False passes them through as the reference does.
        derived_key_cache: derived keys kept per key slot (cluster/server modes, §5.4 inference).
    """

    replay_window: int = DEFAULT_WINDOW
    max_epoch_lifetime: int = 16
    key_grace_ns: int = 2_000_000_000
    auth_fail_threshold: int | None = None
    auth_fail_window_ns: int | None = 1_000_000_000
    require_security: bool = True
    derived_key_cache: int = 1024


@dataclass(frozen=True, slots=True)
class Opened:
    """An authenticated, decrypted packet: the plaintext (PDS ‖ SES ‖ payload) and its security fields.

    ``sdi`` is None for a packet passed through without security (``require_security=False``).
    """

    plaintext: bytes
    sdi: int | None
    an: int = 0
    ssi: int | None = None
    epoch: int = 0
    tsc: int = 0


_Derived = DerivedKey
_CacheKey = DerivedKeyInputs
#: :meth:`TssContext.open_fast` channel key: (security header word(s), source, entropy, expected SDI).
_ChannelKey = tuple[bytes, bytes, int, int | None]


class TssContext:
    """The TSS sublayer of one FEP: seal, open, key rotation and counters (module docstring).

    Args:
        table: the FEP's secure-domain table (shared, mutable: rotation updates it).
        local_fa: the FEP's Fabric Address (its IP address), the default ``src`` of :meth:`seal`
            and ``dst`` of :meth:`open`.
        config: policy; defaults per :class:`TssConfig`.
    """

    def __init__(self, table: SecureDomainTable, local_fa: bytes | str, config: TssConfig | None = None) -> None:
        self.table = table
        self.local_fa = as_address(local_fa)
        self.config = config or TssConfig()
        #: Drops by reason (:class:`DropReason`).
        self.drops: Counter[DropReason] = Counter()
        #: ``in_auth_pkts``, ``out_pkts``, ``out_invoke_fail``, ``bypass``.
        self.stats: Counter[str] = Counter()
        #: The reason of the most recent drop (for the caller's event log).
        self.last_drop: DropReason | None = None
        #: :meth:`open_fast` channels by (header word(s), source, entropy, expected SDI).
        self._rx: dict[_ChannelKey, RxChannel] = {}
        #: The channel that opened the last packet :meth:`open_fast` accepted (None: none did).
        self.last_channel: RxChannel | None = None
        #: the latest time (ns) the owner gave (:meth:`handle_timer`, ``open(now_ns=)``, the
        #: stage's batches): when a tag failure happened, for the latch's window
        self.now_ns = 0

    @property
    def dropped(self) -> int:
        """Total packets dropped by :meth:`open`."""
        return sum(self.drops.values())

    # -- transmit ----------------------------------------------------------------------------------

    def seal(
        self,
        plaintext: bytes,
        *,
        sdi: int,
        entropy: int,
        dst: bytes | str,
        src: bytes | str | None = None,
        client_ssi: int | None = None,
    ) -> bytes:
        """Secure ``plaintext`` (PDS header onward) for secure domain ``sdi``; returns TSS ‖ ct ‖ ICV.

        ``entropy`` is the packet's entropy value (UDP source port or entropy header). In SERVER
        mode with SSIs the header carries the client's SSI and the key is that client's:
        ``client_ssi`` — the PDS passes the SSI its PDC peer authenticated with
        (:attr:`Opened.ssi`) — or else the SSI the key file lists for ``dst``. The server never
        learns address → SSI bindings from traffic: a client could claim another client's address
        and have that client's replies sealed under its own key.

        Raises :class:`UnknownDomainError`, :class:`DomainStateError`, :class:`UnknownPeerError`
        or :class:`CounterExhaustedError` (counted as ``out_invoke_fail``); never sends twice
        with one TSC.
        """
        src_b = self.local_fa if src is None else as_address(src)
        dst_b = as_address(dst)
        sd, slot, ssi = self._tx_target(sdi, src_b, dst_b, client_ssi)
        mode = sd.mode
        tsc = slot.next_tsc
        if tsc >= sd.tsc_limit:
            self.stats["out_invoke_fail"] += 1
            raise CounterExhaustedError(f"SD {sdi} AN {sd.tx_an}: TSC exhausted; rotate the key")
        slot.next_tsc = tsc + 1
        epoch = slot.epoch
        if ssi is None:
            header = TSS.encode((TSS_TYPE, 0, sd.tx_an, sdi, epoch, tsc))
        else:
            header = TSS_SSI.encode((TSS_TYPE, 1, sd.tx_an, sdi, ssi, epoch, tsc))
        # Cluster: the sender's own identity; server: the client's (the destination).
        peer = dst_b if mode is SdMode.SERVER else src_b
        aead, mask, ctx = self._packet_key(sd, slot, ssi, peer, epoch, tsc)
        if ctx is not None:
            self._remember(slot, ctx, (aead, mask))
        nonce = build_iv(iv_source_id(ssi, src_b, sdi), epoch, tsc, mask)
        ct = aead.encrypt(nonce, plaintext, build_aad(src_b, dst_b, entropy, header))
        self.stats["out_pkts"] += 1
        return header + ct

    def _tx_target(
        self, sdi: int, src: bytes, dst: bytes, client_ssi: int | None
    ) -> tuple[SecureDomain, KeySlot, int | None]:
        """The SD, its active key slot and the SSI (None: no SSI) a packet from ``src`` to ``dst``
        is sealed under (behaviour.md §5.1, §5.5; :meth:`seal` on ``client_ssi``). Raises when the
        SD cannot send to ``dst``: :class:`UnknownDomainError`, :class:`DomainStateError`,
        :class:`UnknownPeerError`, :class:`TssError` (IPv6 without SSI outside cluster mode) or
        ValueError (address families differ)."""
        sd = self.table.get(sdi)
        if sd is None:
            raise UnknownDomainError(f"no secure domain {sdi}")
        if sd.dropping:
            raise DomainStateError(f"SD {sdi} is latched into dropping")
        if len(src) != len(dst):
            raise ValueError("source and destination addresses are of different families")
        slot = sd.tx_slot()
        mode = sd.mode
        ssi: int | None = None
        if sd.use_ssi:
            if mode is SdMode.SERVER:
                ssi = client_ssi if client_ssi is not None else sd.clients.get(dst)
                if ssi is None:
                    raise UnknownPeerError(f"SD {sdi}: no SSI known for the client at this address")
            else:
                ssi = sd.ssi
        elif len(src) == 16 and mode is not SdMode.CLUSTER:
            raise TssError(f"SD {sdi}: IPv6 without SSI is only possible in cluster mode (behaviour.md §5.1)")
        return sd, slot, ssi

    def tx_channel(
        self,
        *,
        sdi: int,
        dst: bytes | str,
        entropy: int,
        src: bytes | str | None = None,
        client_ssi: int | None = None,
    ) -> TxChannel:
        """A :class:`TxChannel`: :meth:`seal` with its per-destination work done once."""
        return TxChannel(
            self, sdi, as_address(dst), entropy, self.local_fa if src is None else as_address(src), client_ssi
        )

    # -- receive -----------------------------------------------------------------------------------

    def open(
        self,
        datagram: bytes,
        *,
        entropy: int,
        src: bytes | str,
        dst: bytes | str | None = None,
        now_ns: int | None = None,
        expected_sdi: int | None = None,
        trimmed: bool = False,
    ) -> bytes | None:
        """The plaintext (PDS header onward) of a secured packet, or None (dropped and counted).

        ``now_ns`` (optional) first retires keys whose grace period is over, like
        :meth:`handle_timer`; ``expected_sdi`` drops packets of any other SD as ``wrong_domain``
        (all packets of a PDC belong to one SDI, §5.1); ``trimmed`` marks a packet the fabric
        trimmed (module docstring).
        """
        got = self.unseal(
            datagram, entropy=entropy, src=src, dst=dst, now_ns=now_ns, expected_sdi=expected_sdi, trimmed=trimmed
        )
        return None if got is None else got.plaintext

    def open_fast(self, datagram: bytes, entropy: int, src: bytes, expected_sdi: int | None = None) -> bytes | None:
        """:meth:`open` for the data path: same result, same counters, less work per packet.

        ``src`` must be the packed source address. After a packet from a sender authenticated
        through :meth:`open`'s full processing, the fixed part of that processing is kept in an
        :class:`~uet.tss.channel.RxChannel` keyed by the security header's first word(s) (type, SP,
        AN, SDI and SSI), the source, the entropy and ``expected_sdi``. A later packet the channel
        can open (:meth:`RxChannel.open <uet.tss.channel.RxChannel.open>`) is opened there; anything
        else — a new sender or association, an epoch change, a replay, a failed tag, a latched or
        disabled domain, a retired key — goes through :meth:`open`, which decides and counts
        exactly as it always does (a failed tag is verified again there). :attr:`last_channel` is
        the channel that opened the packet (None when it was dropped or has no channel).
        """
        if datagram:
            hw = datagram[:8] if datagram[0] & _SP else datagram[:4]
            ch = self._rx.get((hw, src, entropy, expected_sdi))
            if ch is not None:
                pt = ch.open(datagram)
                if pt is not None:
                    self.stats["in_auth_pkts"] += 1
                    self.last_channel = ch
                    return pt
        self.last_channel = None
        got = self.unseal(datagram, entropy=entropy, src=src, expected_sdi=expected_sdi)
        if got is None:
            return None
        if got.sdi is not None:
            self.last_channel = self._learn(datagram, got, src, entropy, expected_sdi)
        return got.plaintext

    def _learn(
        self, datagram: bytes, got: Opened, src: bytes, entropy: int, expected_sdi: int | None
    ) -> RxChannel | None:
        """Make the :meth:`open_fast` channel for the sender and association of ``got``."""
        sd = self.table.get(got.sdi)  # type: ignore[arg-type]
        if sd is None or (sd.mode is SdMode.CLUSTER and sd.rekey_mask):
            return None  # per-packet keys: nothing fixed to keep
        slot = sd.slots[got.an]
        if slot is None or slot.key is None:
            return None
        aead, mask, _ = self._packet_key(sd, slot, got.ssi, src, got.epoch, got.tsc)
        hlen = TSS_SSI.size if got.ssi is not None else TSS.size
        sid = got.ssi if got.ssi is not None else (int.from_bytes(src, "big") if len(src) == 4 else sd.sdi)
        window = slot.windows.get((got.ssi, src)) if self.config.replay_window else None
        aad = aad_prefix(src, self.local_fa, entropy)
        ch = RxChannel(sd, slot, got.an, aead, mask, sid, aad, datagram[: hlen - 6], window)
        rx = self._rx
        if len(rx) >= self.config.derived_key_cache:
            rx.pop(next(iter(rx)))
        rx[(datagram[: hlen - 8], src, entropy, expected_sdi)] = ch
        return ch

    def unseal(
        self,
        datagram: bytes,
        *,
        entropy: int,
        src: bytes | str,
        dst: bytes | str | None = None,
        now_ns: int | None = None,
        expected_sdi: int | None = None,
        trimmed: bool = False,
    ) -> Opened | None:
        """Like :meth:`open`, returning the security fields with the plaintext."""
        if now_ns is not None:
            self.handle_timer(now_ns)
        if trimmed:
            self.drops[DropReason.TRIMMED] += 1
            self.last_drop = DropReason.TRIMMED
            return None
        src_b = as_address(src)
        dst_b = self.local_fa if dst is None else as_address(dst)
        got = _open(self, datagram, src_b, dst_b, entropy, expected_sdi, commit=True)
        if isinstance(got, DropReason):
            self.drops[got] += 1
            self.last_drop = got
            return None
        if got.sdi is None:
            self.stats["bypass"] += 1
        else:
            self.stats["in_auth_pkts"] += 1
        return got

    # -- keys --------------------------------------------------------------------------------------

    def _packet_key(
        self, sd: SecureDomain, slot: KeySlot, ssi: int | None, peer: bytes, epoch: int, tsc: int
    ) -> tuple[AESGCM, bytes | None, _CacheKey | None]:
        """(cipher, IV mask, cache key to remember or None) for one packet (behaviour.md §5.4).

        ``peer`` is the address identifying the key's owner when no SSI is used: the sender in
        cluster mode, the client in server mode.
        """
        mode = sd.mode
        if mode is SdMode.DIRECT:
            return slot.aead(), None, None
        if mode is SdMode.CLIENT:
            return slot.aead(), slot.client_mask(), None
        if mode is SdMode.CLUSTER:
            rekey = (tsc & sd.rekey_mask) >> sd.rekey_shift if sd.rekey_mask else 0
            label = sd.label_cluster
        else:
            rekey = 0
            label = sd.label_server
        # Cache key: the KDF context's inputs (the context bytes are built only on a miss).
        ck = (epoch, rekey, ssi, peer if ssi is None else None)
        hit = slot.derived.get(ck)
        if hit is not None:
            return hit[0], hit[1], None
        key = slot.key
        if key is None:
            raise DomainStateError(f"SD {sd.sdi}: key slot is empty")
        out = kdf(key.reveal(), label, kdf_context(epoch, rekey, ssi, peer))
        return AESGCM(out[:KEY_LEN]), out[KEY_LEN:], ck

    def _remember(self, slot: KeySlot, ctx: _CacheKey, value: _Derived) -> None:
        cache = slot.derived
        if len(cache) >= self.config.derived_key_cache:
            cache.pop(next(iter(cache)))
        cache[ctx] = value

    # -- rotation and timers (§5.7) ----------------------------------------------------------------

    def install_key(self, sdi: int, an: int, key: bytes | SecretBytes, *, epoch: int = 0) -> None:
        """SDME: put the next association's key in slot ``an`` of SD ``sdi`` (accepted at once)."""
        self._sd(sdi).install(an, key, epoch=epoch)

    def activate(self, sdi: int, an: int, now_ns: int) -> None:
        """Switch the sender of SD ``sdi`` to slot ``an``; the old key retires after the grace period."""
        self._sd(sdi).activate(an, now_ns, self.config.key_grace_ns)

    def rotate(self, sdi: int, key: bytes | SecretBytes, now_ns: int) -> int:
        """Install ``key`` in the inactive slot and switch to it at once; returns the new AN."""
        sd = self._sd(sdi)
        an = sd.tx_an ^ 1
        sd.install(an, key)
        sd.activate(an, now_ns, self.config.key_grace_ns)
        return an

    def get_timer(self) -> int | None:
        """The next time (ns) a key's grace period ends, or None (sans-I/O timer contract)."""
        times = [t for sd in self.table if (t := sd.next_deadline()) is not None]
        return min(times) if times else None

    def handle_timer(self, now_ns: int) -> None:
        """Retire the keys whose grace period ended at or before ``now_ns``; lift the latches
        whose hold time is over."""
        self.now_ns = now_ns
        for sd in self.table:
            if sd.next_deadline() is not None:
                sd.expire(now_ns)

    def _sd(self, sdi: int) -> SecureDomain:
        sd = self.table.get(sdi)
        if sd is None:
            raise UnknownDomainError(f"no secure domain {sdi}")
        return sd


def _open(
    ctx: TssContext,
    data: bytes,
    src: bytes,
    dst: bytes,
    entropy: int,
    expected_sdi: int | None,
    *,
    commit: bool,
) -> Opened | DropReason:
    """Receive processing of §5.8. ``commit=False`` (decoder) changes no state: no replay window,
    latch or cache, and accepts every installed key regardless of grace, epoch age or latch."""
    cfg = ctx.config
    n = len(data)
    if n == 0:
        return DropReason.TRUNCATED
    first = data[0]
    if first & _TSS_FIRST_MASK != _TSS_FIRST:
        if cfg.require_security:
            return DropReason.NOT_SECURE
        return Opened(bytes(data), None)
    sp = first & _SP
    if sp:
        hlen = TSS_SSI.size
        if n < hlen + ICV_LEN:
            return DropReason.TRUNCATED
        _, _, an, sdi, ssi, epoch, tsc = TSS_SSI.unpack(data)
    else:
        hlen = TSS.size
        if n < hlen + ICV_LEN:
            return DropReason.TRUNCATED
        _, _, an, sdi, epoch, tsc = TSS.unpack(data)
        ssi = None
    if expected_sdi is not None and sdi != expected_sdi:
        return DropReason.WRONG_DOMAIN
    sd = ctx.table.get(sdi)
    if sd is None:
        return DropReason.UNKNOWN_SDI
    if commit:
        if not sd.enabled:
            return DropReason.SD_DISABLED
        if sd.dropping:
            return DropReason.SD_DROPPING
    mode = sd.mode
    if bool(sp) != sd.use_ssi or (ssi is None and len(src) == 16 and mode is not SdMode.CLUSTER):
        return DropReason.BAD_HEADER
    if len(src) != len(dst):
        return DropReason.BAD_HEADER
    if mode is SdMode.CLIENT and ssi != sd.ssi:
        return DropReason.WRONG_DOMAIN
    slot = sd.slots[an]
    if slot is None:
        return DropReason.NO_KEY
    if slot.key is None or slot.state is SlotState.RETIRED:
        return DropReason.RETIRED_KEY
    if commit:
        # 16-bit serial comparison against the slot's epoch; newer epochs are fine (the SDME may
        # have advanced the sender first), older ones only within max_epoch_lifetime (§5.6).
        back = (slot.epoch - epoch) & 0xFFFF
        if 0 < back <= 0x8000 and back > cfg.max_epoch_lifetime:
            return DropReason.BAD_EPOCH
    seq = (epoch << 48) | tsc
    source = (ssi, src)
    window = slot.windows.get(source) if commit and cfg.replay_window else None
    if window is not None:
        verdict = window.check(seq)
        if verdict is not None:
            return DropReason(verdict)
    peer = src  # cluster: the sender; server: the client (the source of what it receives)
    aead, mask, kctx = ctx._packet_key(sd, slot, ssi, peer, epoch, tsc)
    sid = ssi if ssi is not None else (int.from_bytes(src, "big") if len(src) == 4 else sdi)
    raw_iv = (sid & 0xFFFFFFFF) << 64 | seq
    if mask is not None:
        raw_iv ^= int.from_bytes(mask, "big")
    try:
        plaintext = aead.decrypt(raw_iv.to_bytes(12, "big"), data[hlen:], aad_prefix(src, dst, entropy) + data[:hlen])
    except InvalidTag:
        if commit:
            limit = cfg.auth_fail_threshold
            if limit is None:
                sd.auth_failures += 1
            else:
                sd.note_auth_failure(ctx.now_ns, limit, cfg.auth_fail_window_ns)
        return DropReason.BAD_TAG
    if commit:
        if kctx is not None:
            ctx._remember(slot, kctx, (aead, mask))
        if cfg.replay_window:
            if window is None:
                window = slot.windows[source] = ReplayWindow(cfg.replay_window)
            window.update(seq)
    return Opened(plaintext, sdi, an, ssi, epoch, tsc)
