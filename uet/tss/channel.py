"""The TSS data path: per-peer channels that seal and open with their fixed work done once.

:class:`~uet.tss.context.TssContext` decides everything about a secured packet (behaviour.md
§5.5–§5.8). Most of that work is the same for every packet between two FEPs in one association:
the secure domain and key slot, the cipher (derived per sender in cluster mode, §5.4), the IV's
source id and mask, the AAD prefix ``src ‖ dst ‖ entropy header`` and the security header's first
word(s). A channel keeps that, so per packet only the TSC-dependent part is left: the 8-byte
``epoch ‖ TSC`` word, the IV, the AAD's security header, the replay window (receive) and the one
AES-GCM call.

* :class:`TxChannel` (one destination and entropy): byte-for-byte what
  :meth:`TssContext.seal <uet.tss.context.TssContext.seal>` returns (tests/test_tss_link.py).
* :class:`RxChannel` (one sender, association, entropy and expected SDI): opens a packet whose
  security header continues the channel's exactly (same type, SP, AN, SDI, SSI and epoch), whose
  TSC the replay window accepts and whose tag verifies; anything else it declines (None) and the
  caller takes the full path of §5.8, which decides and counts as always — so a channel never
  rejects a packet by itself, and never accepts one the full path would reject.

Both re-check, per packet, the state a channel was built from: key rotation (§5.7), an SDME epoch
advance (§5.6), retirement at the end of the grace period and the authentication-failure latch
(§5.8 step 6) all take effect on the next packet. They check the slot's key and epoch (and on
transmit its ACTIVE state) and the SD's enabled and latched flags only: a key slot that leaves
its place (a key installed over it, its SD removed from the table) or retires is always forgotten
first (:meth:`KeySlot.forget <uet.tss.domain.KeySlot.forget>` empties its key), and the sender's
previous slot leaves ACTIVE when another is activated, so those cases need no check of their own
(tests/test_tss_channel.py asks each one).

Two identities save work per packet (both exact): the IV is ``sid ‖ epoch ‖ TSC`` ⊕ mask with the
source id in bits 64–95 and ``epoch ‖ TSC`` in bits 0–63, so it is ``(sid ⊕ mask) ⊕ word``; and the
whole security header is one integer, ``first word(s) << 64 | word``, turned into bytes once.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from uet.tss.domain import DerivedKey, DerivedKeyInputs, KeySlot, SdMode, SecureDomain, SlotState
from uet.tss.errors import TssError
from uet.tss.replay import ReplayWindow
from uet.wire.tss import ICV_LEN, TSS, TSS_SSI, TSS_TYPE

__all__ = ["RxChannel", "SealingContext", "TxChannel", "aad_prefix"]

_ENT = struct.Struct(">HH")
_unpack_q = struct.Struct(">Q").unpack_from
_ACTIVE = SlotState.ACTIVE
#: ``ecn`` bit of the links' packed form for a datagram a switch trimmed (uet.fep.core.ECN_TRIMMED).
_TRIMMED = 0x100
#: Datagrams in the links' packed form: ``(data, address, entropy or ecn)``.
_Packed = Sequence[tuple[bytes, str, int]]


class SealingContext(Protocol):
    """What a :class:`TxChannel` uses of the :class:`~uet.tss.context.TssContext` that made it
    (declared here: the context module imports this one, not the other way round)."""

    stats: Counter[str]

    def seal(
        self,
        plaintext: bytes,
        *,
        sdi: int,
        entropy: int,
        dst: bytes | str,
        src: bytes | str | None = None,
        client_ssi: int | None = None,
    ) -> bytes: ...

    def _tx_target(
        self, sdi: int, src: bytes, dst: bytes, client_ssi: int | None
    ) -> tuple[SecureDomain, KeySlot, int | None]: ...

    def _packet_key(
        self, sd: SecureDomain, slot: KeySlot, ssi: int | None, peer: bytes, epoch: int, tsc: int
    ) -> tuple[AESGCM, bytes | None, DerivedKeyInputs | None]: ...

    def _remember(self, slot: KeySlot, ctx: DerivedKeyInputs, value: DerivedKey) -> None: ...


def aad_prefix(src: bytes, dst: bytes, entropy: int) -> bytes:
    """``src ‖ dst ‖ entropy header`` (the AAD before the security header, :mod:`uet.tss.nonce`)."""
    return b"".join((src, dst, _ENT.pack(entropy & 0xFFFF, 0)))


class TxChannel:
    """The data-path form of :meth:`TssContext.seal` for one (SD, destination, entropy).

    Per packet it takes the next TSC, builds the security header and the IV from it, and encrypts
    (module docstring). The channel re-reads the secure domain whenever the sender's association,
    its epoch, or the SD's enabled/latched state changed (key rotation, §5.7), and falls back to
    :meth:`TssContext.seal` where the key changes per packet (cluster implicit rekey) or the TSC
    reached its limit (which raises, §5.6). TSC values come from the same key slot as
    :meth:`TssContext.seal`'s, so the two may be mixed freely.
    """

    __slots__ = (
        "_ctx",
        "sdi",
        "dst",
        "src",
        "entropy",
        "_client_ssi",
        "_sd",
        "_slot",
        "_epoch",
        "_ebase",
        "_hdr",
        "_hlen",
        "_aead",
        "_ivbase",
        "_aad",
        "_limit",
        "_stats",
    )

    def __init__(
        self, ctx: SealingContext, sdi: int, dst: bytes, entropy: int, src: bytes, client_ssi: int | None = None
    ) -> None:
        self._ctx = ctx
        self.sdi = sdi
        self.dst = dst
        self.src = src
        self.entropy = entropy & 0xFFFF
        self._client_ssi = client_ssi
        self._aad = aad_prefix(src, dst, self.entropy)
        self._sd: SecureDomain | None = None
        self._slot: KeySlot | None = None
        self._stats = ctx.stats

    def _rebuild(self) -> None:
        ctx = self._ctx
        sdi = self.sdi
        sd, slot, ssi = ctx._tx_target(sdi, self.src, self.dst, self._client_ssi)
        mode = sd.mode
        epoch = slot.epoch
        slow = mode is SdMode.CLUSTER and bool(sd.rekey_mask)
        mask = 0
        if not slow:
            peer = self.dst if mode is SdMode.SERVER else self.src
            aead, m, ck = ctx._packet_key(sd, slot, ssi, peer, epoch, slot.next_tsc)
            if ck is not None:
                ctx._remember(slot, ck, (aead, m))
            self._aead = aead
            mask = 0 if m is None else int.from_bytes(m, "big")
        if ssi is None:
            first = TSS.encode((TSS_TYPE, 0, sd.tx_an, sdi, 0, 0))[:4]
            sid = int.from_bytes(self.src, "big") if len(self.src) == 4 else sdi
        else:
            first = TSS_SSI.encode((TSS_TYPE, 1, sd.tx_an, sdi, ssi, 0, 0))[:8]
            sid = ssi
        self._hdr = int.from_bytes(first, "big") << 64
        self._hlen = len(first) + 8
        self._ivbase = ((sid & 0xFFFFFFFF) << 64) ^ mask
        # The slow cases (per-packet key) and the TSC limit both go through TssContext.seal.
        self._limit = -1 if slow else sd.tsc_limit
        self._epoch = epoch
        self._ebase = epoch << 48
        self._sd = sd
        self._slot = slot

    def seal(self, plaintext: bytes) -> bytes:
        """``security header ‖ ciphertext ‖ ICV`` of ``plaintext``; raises as :meth:`TssContext.seal`."""
        out: list[tuple[bytes, str, int]] = []
        if self.seal_run(((plaintext, "", 0),), 0, out):
            return out[0][0]
        self._rebuild()  # raises when the SD cannot send any more
        # per-packet keys (cluster implicit rekey), or the TSC at its limit (raises, §5.6)
        return self._ctx.seal(
            plaintext, sdi=self.sdi, entropy=self.entropy, dst=self.dst, src=self.src, client_ssi=self._client_ssi
        )

    def seal_run(
        self,
        items: Sequence[tuple[bytes, str, int]],
        i: int,
        out: list[tuple[bytes, str, int]],
        by_entropy: bool = False,
    ) -> int:
        """Seal ``items[i]``, ``items[i + 1]``, ... — ``(plaintext, destination, entropy)`` — while
        they go to ``items[i]``'s destination (and, with ``by_entropy``, carry its entropy);
        append ``(sealed, destination, entropy)`` to ``out`` for each. Returns the index of the
        first item not sealed (``i`` when none was: the SD cannot send, the key changes per
        packet, or the TSC reached its limit; :meth:`seal` then raises or takes
        :meth:`TssContext.seal`). The channel's state is checked once per run: nothing between
        two items of a run changes it."""
        slot = self._slot
        sd = self._sd
        if (
            slot is None
            or slot.key is None
            or slot.state is not _ACTIVE
            or slot.epoch != self._epoch
            or not sd.enabled  # type: ignore[union-attr]
            or sd.dropping  # type: ignore[union-attr]
        ):
            try:
                self._rebuild()
            except (TssError, ValueError):
                return i
            slot = self._slot
        start = i
        tsc = slot.next_tsc  # type: ignore[union-attr]
        limit = self._limit
        ebase = self._ebase
        hdr = self._hdr
        hlen = self._hlen
        ivbase = self._ivbase
        aad = self._aad
        encrypt = self._aead.encrypt if limit > 0 else None
        append = out.append
        dst = items[i][1]
        ent = items[i][2]
        n = len(items)
        try:
            while i < n and tsc < limit:
                data, d, e = items[i]
                if d != dst or (by_entropy and e != ent):
                    break
                word = ebase | tsc
                header = (hdr | word).to_bytes(hlen, "big")
                append((header + encrypt((ivbase ^ word).to_bytes(12, "big"), data, aad + header), d, e))  # type: ignore[misc]
                tsc += 1
                i += 1
        finally:
            slot.next_tsc = tsc  # type: ignore[union-attr]  # never reuse a TSC, even if encrypt raised
            self._stats["out_pkts"] += i - start
        return i


class RxChannel:
    """What the receive data path keeps per sender and association (module docstring).

    Made by :class:`~uet.tss.context.TssContext` after a packet from the sender authenticated
    through the full path (:meth:`TssContext.open_fast <uet.tss.context.TssContext.open_fast>`).
    ``prefix`` is the security header up to and including the epoch: a packet that starts with it
    carries the channel's type, SP, AN, SDI, SSI and epoch.
    """

    __slots__ = (
        "sd",
        "slot",
        "an",
        "aead",
        "ivbase",
        "aad",
        "hlen",
        "prefix",
        "min_len",
        "slot_epoch",
        "window",
    )

    def __init__(
        self,
        sd: SecureDomain,
        slot: KeySlot,
        an: int,
        aead: AESGCM,
        mask: bytes | None,
        sid: int,
        aad: bytes,
        prefix: bytes,
        window: ReplayWindow | None,
    ) -> None:
        self.sd = sd
        self.slot = slot
        self.slot_epoch = slot.epoch
        self.an = an
        self.aead = aead
        self.ivbase = ((sid & 0xFFFFFFFF) << 64) ^ (0 if mask is None else int.from_bytes(mask, "big"))
        self.aad = aad
        self.prefix = prefix
        self.hlen = len(prefix) + 6
        self.min_len = self.hlen + ICV_LEN
        self.window = window

    def open(self, data: bytes) -> bytes | None:
        """The plaintext of ``data``, or None when this channel cannot open it (the caller then
        takes the full path, which decides and counts). Counts nothing itself."""
        out: list[tuple[bytes, str, int]] = []
        self.open_run(((data, "", 0),), 0, out)
        return out[0][0] if out else None

    def open_run(self, items: _Packed, i: int, out: list[tuple[bytes, str, int]]) -> int:
        """Open ``items[i]``, ``items[i + 1]``, ... — ``(data, source, ecn with trim marks)``, the
        links' packed form — while they come from ``items[i]``'s source, are not trimmed and this
        channel opens them; append ``(plaintext, source, ecn)`` to ``out`` for each. Returns the
        index of the first item not opened (``i`` when none was): the caller takes the full path
        for it. Counts nothing itself.

        The channel's state is checked once per run: nothing between two items of a run changes
        it (a decline ends the run, and the full path that may then latch or retire runs
        outside it)."""
        slot = self.slot
        sd = self.sd
        if slot.key is None or slot.epoch != self.slot_epoch or not sd.enabled or sd.dropping:
            return i
        prefix = self.prefix
        hlen = self.hlen
        at = hlen - 8
        min_len = self.min_len
        decrypt = self.aead.decrypt
        ivbase = self.ivbase
        aad = self.aad
        w = self.window
        append = out.append
        src = items[i][1]
        n = len(items)
        while i < n:
            item = items[i]
            data, s, ecn = item
            if s != src or ecn & _TRIMMED or len(data) < min_len or not data.startswith(prefix):
                return i
            word = _unpack_q(data, at)[0]
            if w is not None and word <= w.top and w.check(word) is not None:
                return i
            try:
                pt = decrypt((ivbase ^ word).to_bytes(12, "big"), data[hlen:], aad + data[:hlen])
            except InvalidTag:
                return i  # counted (and latched) by the full path
            if w is not None:
                w.update(word)
            append((pt, s, ecn))
            i += 1
        return i
