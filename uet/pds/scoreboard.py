"""The sender's window and SACK scoreboard of one initiator PDC (spec/behaviour.md §2.4, §2.7,
§2.8 "Sender processing of an ACK"): what an ACK says about the packets in flight.

aioquic keeps its loss recovery (``recovery.py``) apart from the connection that parses frames;
here :func:`parse_ack` reads an ACK / ACK_CC / ACK_CCX header into an :class:`AckInfo`, and a
:class:`SackScoreboard` (one per :class:`uet.pds.pdc.InitiatorPdc`, ``pdc.board``) applies it to
the PDC's outstanding packets and answers with an :class:`AckTally` — the packets and bytes it
acknowledged for the first time, the RTT sample, the entropies it covered — which the PDS then
hands to the congestion gate (uet.pds.feedback). The scoreboard owns the state only the ACK path
keeps: the newest PSN known received (``high_sack``), the CACK of the last MPR applied, and the
reordering window learnt from late arrivals (``reo_wnd``).

Both walks over a SACK bitmap (its holes and its set bits) go through :func:`sack_walk`, which
visits set bits lowest first (``bitmap & -bitmap``): a fast copy of ``uet.wire.pds.sack_to_psns``
that ``tests/test_pds_scoreboard.py`` proves equal to it.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final, Protocol

from uet.pds._aliases import _A_EPSN, _A_M, _A_P, _A_RETX, _M32
from uet.pds.events import Acked, AckedRun, Event
from uet.pds.txpkt import TxPkt
from uet.wire.pds import ACK, ACK_CC, ACK_CCX, ACK_EPSN, PdsType
from uet.wire.pds import psn_diff as _diff
from uet.wire.pdsfast import unpack_ack_cc_raw

_ACK: Final = int(PdsType.ACK)
_ACK_CC: Final = int(PdsType.ACK_CC)
_RAW_CC: Final = ACK_CC[(False, "raw")]
#: header lengths (the layouts' own sizes): ACK, ACK with EPSN, ACK_CC, ACK_CCX
_ACK_LEN: Final = ACK.size
_ACK_EPSN_LEN: Final = ACK_EPSN.size
_ACK_CC_LEN: Final = _RAW_CC.size
_ACK_CCX_LEN: Final = ACK_CCX[(False, "raw")].size
_tnew: Final = tuple.__new__  # (Final: a C static in the compiled build, not a globals look-up)
#: the event classes (of interpreted uet.pds.events) as C statics of this module, likewise
_ACKED: Final = Acked
_ACKED_RUN: Final = AckedRun


class ScoredPdc(Protocol):
    """What the scoreboard reads and moves on its PDC (``uet.pds.pdc.InitiatorPdc``, which owns
    it: declared here so the two modules do not import each other). Its packets are
    :class:`uet.pds.txpkt.TxPkt` by name, not a protocol: the compiled build reads and marks the
    fields of a named class natively, where a protocol's are generic attribute look-ups (about
    ten per SACK bit; issue 28)."""

    #: packets in flight by PSN
    outstanding: dict[int, TxPkt]
    next_psn: int
    tx_base: int
    max_cack: int
    peer_mp: int
    srtt: int
    min_rtt: int


class AckInfo:
    """The fields of one ACK the sender uses (wire-format.md §5.3–§5.5)."""

    __slots__ = ("t", "flags", "hl", "off", "cack", "spdcid", "dpdcid", "mpr", "sack_off", "bitmap", "ccw", "ccx")

    def __init__(self, t: int, flags: int, hl: int, off: int, cack: int, spdcid: int, dpdcid: int) -> None:
        self.t = t
        self.flags = flags
        #: header length: the SES response (if any) follows
        self.hl = hl
        #: ACK_PSN offset from CACK, or the PROBE's opaque value (flag P)
        self.off = off
        self.cack = cack
        self.spdcid = spdcid
        self.dpdcid = dpdcid
        self.mpr = 0
        self.sack_off = 0
        self.bitmap = 0
        #: ACK_CC state word (-1: none), cc_type 0 NSCC / 1 credit in bit 64 (wire §5.4)
        self.ccw = -1
        #: ACK_CCX type 0: the extended state word (ECN-marked bytes, uet.pds.target); -1: none
        self.ccx = -1


def parse_ack(data: bytes, t: int, flags: int) -> AckInfo | None:
    """The :class:`AckInfo` of an ACK (``t``: its PDS type), or None when it is too short. An
    ACK_CCX of a CCX type the notes do not define keeps ``ccw`` -1 (its state is opaque, wire
    §5.5, Δ11)."""
    if t == _ACK:
        hl = _ACK_EPSN_LEN if flags & _A_EPSN else _ACK_LEN
        if len(data) < hl:
            return None
        _t, _nh, _f, off, cack, spdcid, dpdcid = ACK.unpack(data)
        return AckInfo(t, flags, hl, off, cack, spdcid, dpdcid)
    hl = _ACK_CC_LEN if t == _ACK_CC else _ACK_CCX_LEN
    if len(data) < hl:
        return None
    if t == _ACK_CC and not flags & _A_P:
        return ack_cc_info(unpack_ack_cc_raw(data), flags)
    # (with P, bytes 2-3 are the probe's opaque value, unsigned: the probe layout differs from
    # the other in that field's sign only, so its raw header is the compiled copy's with the
    # field read back unsigned; the layout's generic codec, compiled on first use, cost about
    # 1 M instructions in a run that gets one base-RTT probe answered, issue 28)
    v = unpack_ack_cc_raw(data)
    a = AckInfo(t, flags, hl, v[3] & 0xFFFF if flags & _A_P else v[3], v[4], v[5], v[6])
    a.mpr, a.sack_off, a.bitmap = v[9], v[10], v[11]
    if t == _ACK_CC:
        a.ccw = v[12] | (v[7] << 64)
    elif v[7] == 0:  # ACK_CCX of CCX type 0: NSCC state, then the ECN-marked bytes
        a.ccw = v[12]
        a.ccx = int.from_bytes(data[_ACK_CC_LEN:_ACK_CCX_LEN], "big")
    return a


def ack_cc_info(v: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int], flags: int) -> AckInfo:
    """:func:`parse_ack` of an ACK_CC without P (flags ``flags``) from its header as
    :func:`uet.wire.pdsfast.unpack_ack_cc_raw` read it: the sender's ACK path, which reads the
    header once for its fast path (uet.pds.feedback), builds the record from the same values."""
    a = AckInfo(_ACK_CC, flags, _ACK_CC_LEN, v[3], v[4], v[5], v[6])
    a.mpr, a.sack_off, a.bitmap = v[9], v[10], v[11]
    a.ccw = v[12] | (v[7] << 64)
    return a


class AckTally:
    """What one ACK newly told the sender (the scoreboard's answer)."""

    __slots__ = ("npk", "nby", "rtt", "ent", "fresh", "ecn_bytes", "ents")

    def __init__(self) -> None:
        #: packets and bytes acknowledged for the first time
        self.npk = 0
        self.nby = 0
        #: a valid RTT sample (§2.9), or None
        self.rtt: int | None = None
        #: the named packet's entropy (path feedback ``ack``/``ecn``), or None
        self.ent: int | None = None
        #: 1 when this ACK is the first news of the named packet's arrival
        self.fresh = 0
        #: the named packet's bytes when the ACK's ``m`` flag is set
        self.ecn_bytes = 0
        #: entropies of every other packet this ACK covers for the first time (§4.6)
        self.ents: list[int] = []


class SackScoreboard:
    """One initiator PDC's view of what its target received (module docstring)."""

    __slots__ = ("high_sack", "mpr_cack", "reo_wnd")

    def __init__(self, cack: int) -> None:
        #: the newest PSN known received (ACK_PSN, CACK or a SACK bit)
        self.high_sack = cack
        #: CACK of the last ACK whose MPR was applied (§2.4: only a newer CACK's MPR counts)
        self.mpr_cack = cack
        #: SACK fast retransmit's reordering window (ns): how long a hole must have been reported
        #: before it counts as lost; the longest a reported hole was seen to arrive late
        #: (:meth:`late`; uet.pds.feedback ``_fast_retransmit``); 0 until one was seen:
        #: ``min_rtt`` / 4 applies
        self.reo_wnd = 0

    def shift(self, delta: int) -> None:
        """The PDC's PSNs moved by ``delta`` (NEW_START_PSN, §2.2)."""
        self.high_sack = (self.high_sack + delta) & _M32
        self.mpr_cack = (self.mpr_cack + delta) & _M32

    def late(self, pdc: ScoredPdc, pkt: TxPkt, now: int, original: bool) -> None:
        """A packet an ACK had reported missing turns out received. When its first copy is the
        one that arrived (``original``: the ACK names it without RETX, or it was sent once, or
        the acknowledgement came sooner after its resend than ``min_rtt``), it was reordered,
        not lost, and arrived this long after the report: the reordering window grows to that
        lateness, so SACK fast retransmit waits it out before resending a hole (issue 29 item 6:
        5 % reordering and no loss resent ~0.9 packets per reordered packet). Inference: RACK's
        time-based reordering window (RFC 8985 §6.2), learnt from late arrivals instead of
        DSACK, with a quarter SRTT of headroom; capped at the RTO where it is used."""
        if not original and now - pkt.tx_time < pdc.min_rtt:
            # acknowledged sooner after its resend than any round trip took: the earlier copy
            # arrived (RFC 8985 §6.2 step 2), so the resend was spurious and the hole was a
            # reordering; without this a PDC whose first reordering drew a resend never learnt one
            original = True
        late = now - pkt.hole_at + (pdc.srtt >> 2)  # (with RACK's srtt/4 of headroom)
        if original and late > self.reo_wnd:
            self.reo_wnd = late
        pkt.hole_at = 0

    def claims_unsent(self, pdc: ScoredPdc, a: AckInfo, mp_range: int) -> bool:
        """Does the ACK acknowledge a PSN this PDC never sent, or a CACK behind its window? A
        target acknowledges only what it received, so such an ACK is forged (or corrupt) and is
        dropped whole: none of it is applied (issue 29 item 5). In plaintext this is all a
        sender can check — an ACK from the peer's address, with the PDC's IDs, for PSNs in
        flight is indistinguishable from the target's; only TSS authenticates it (README "What
        protects what")."""
        last = (pdc.next_psn - 1) & _M32
        cack = a.cack
        if _diff(cack, last) > 0 or _diff((cack + a.off) & _M32, last) > 0:
            return True
        if _diff(cack, pdc.tx_base) < -mp_range - 1:
            return True
        bm = a.bitmap
        return bool(bm) and _diff((cack + a.sack_off + bm.bit_length() - 1) & _M32, last) > 0

    def window(self, pdc: ScoredPdc, a: AckInfo, events: deque[Event], runs: bool, t: AckTally, now: int) -> None:
        """Apply the rest of an ACK after its named packet (:meth:`named`, or a PROBE's answer):
        MPR, CACK, the SACK bitmap, then slide ``tx_base``; ``Acked`` events (``AckedRun``
        with ``runs``) go to ``events``."""
        if a.mpr and _diff(a.cack, self.mpr_cack) > 0:  # MPR: only from a newer CACK (§2.4)
            pdc.peer_mp = a.mpr * 128
            self.mpr_cack = a.cack
        if _diff(a.cack, pdc.max_cack) > 0:
            pdc.max_cack = a.cack
            npk, nby = self.cumulative(
                pdc, pdc.outstanding, pdc.tx_base, pdc.next_psn, a.cack, events, runs, t.ents, now
            )
            t.npk += npk
            t.nby += nby
        if a.bitmap:
            self._sack(pdc, a, t, now)
        self.slide(pdc)

    def named(
        self, pdc: ScoredPdc, a: AckInfo, data: bytes, nh: int, events: deque[Event], t: AckTally, now: int
    ) -> bool:
        """The packet the ACK names (ACK_PSN = CACK + offset); False when it is not outstanding."""
        apsn = (a.cack + a.off) & _M32
        out = pdc.outstanding
        pkt = out.get(apsn)  # (get and del: the compiled build has no native dict.pop)
        if pkt is None:
            return False
        del out[apsn]
        flags = a.flags
        t.npk = 1
        t.nby = pkt.nbytes
        t.ent = pkt.entropy
        if not pkt.dst_received:
            t.fresh = 1
            if pkt.hole_at:
                self.late(pdc, pkt, now, not flags & _A_RETX)
        if flags & _A_M:
            t.ecn_bytes = pkt.nbytes
        # §2.9 validity; a packet marked lost and not yet resent has no valid sample (its RTO
        # re-armed ``tx_time`` while it waited for the gate), nor one whose RTO re-armed it
        # without sending (``rearmed``)
        if (pkt.sends == 1 or (pkt.sends == 2 and flags & _A_RETX)) and not (pkt.rtx_wait or pkt.rearmed):
            t.rtt = now - pkt.tx_time
        if pkt.ctl is None:
            events.append(_tnew(Acked, (pkt.token, nh, data[a.hl :] if nh else b"")))
        if _diff(apsn, self.high_sack) > 0:
            self.high_sack = apsn
        return True

    def cumulative(
        self,
        pdc: ScoredPdc,
        out: dict[int, TxPkt],
        p: int,
        nxt: int,
        cack: int,
        events: deque[Event],
        runs: bool,
        ents: list[int],
        now: int,
    ) -> tuple[int, int]:
        """A newer CACK (the caller has made it ``pdc.max_cack``): everything up to it is
        acknowledged, implicitly successful (§2.7). Answers the packets and bytes it acknowledged
        for the first time; the entropies of those not known received go to ``ents``. The PDC's
        fields it reads come as arguments, ``out`` its outstanding packets, ``p`` its
        ``tx_base``, ``nxt`` its ``next_psn``: the ACK fast path (uet.pds.feedback) reads them
        natively from the PDC's class, where this module's reads of the :class:`ScoredPdc`
        protocol are generic look-ups in the compiled build (issue 28)."""
        end = (cack + 1) & _M32
        append = events.append
        # tx_base may already be past CACK (packets acked one by one): never walk beyond CACK.
        # Checked once: walking forward from a tx_base at or before CACK meets ``end`` first.
        if _diff(cack, p) < 0:
            p = end
        tok: Any = None
        run = 0
        npk = nby = 0
        while p != end and p != nxt:
            pkt = out.get(p)  # (get and del: the compiled build has no native dict.pop)
            if pkt is not None:
                del out[p]
                npk += 1
                nby += pkt.nbytes
                if not pkt.dst_received:
                    ents.append(pkt.entropy)
                    if pkt.hole_at:
                        self.late(pdc, pkt, now, pkt.sends == 1)
                if pkt.ctl is None:
                    if not runs:  # (owner opt-in: one AckedRun per run of the same token)
                        append(_tnew(_ACKED, (pkt.token, 0, b"")))
                    elif pkt.token is tok:
                        run += 1
                    else:
                        if run:
                            append(_tnew(_ACKED_RUN, (tok, run)))
                        tok = pkt.token
                        run = 1
            p = (p + 1) & _M32
        if run:
            append(_tnew(_ACKED_RUN, (tok, run)))
        if _diff(cack, self.high_sack) > 0:
            self.high_sack = cack
        return npk, nby

    def _sack(self, pdc: ScoredPdc, a: AckInfo, t: AckTally, now: int) -> None:
        """The SACK bitmap: its 0 bits above CACK and below its newest set bit are holes (the
        only PSNs SACK fast retransmit may resend, §2.8; uet.pds.feedback docstring), its set
        bits packets known received."""
        bitmap = a.bitmap
        cack = a.cack
        base = (cack + a.sack_off) & _M32
        out = pdc.outstanding
        holes = ~bitmap & ((1 << bitmap.bit_length()) - 1)
        d = _diff(cack, base)
        if d >= 0:
            holes = holes >> (d + 1) << (d + 1) if d < 63 else 0
        for p in sack_walk(base, holes):
            pkt = out.get(p)
            if pkt is not None and not pkt.dst_received:
                pkt.sack_hole = True
                if not pkt.hole_at:
                    pkt.hole_at = now
        hi = self.high_sack
        ents = t.ents
        for p in sack_walk(base, bitmap):
            pkt = out.get(p)
            if pkt is not None:
                if not pkt.dst_received:
                    ents.append(pkt.entropy)
                    if pkt.hole_at:
                        self.late(pdc, pkt, now, pkt.sends == 1)
                pkt.dst_received = True
                if _diff(p, hi) > 0:
                    hi = p
        self.high_sack = hi

    @staticmethod
    def slide(pdc: ScoredPdc) -> None:
        """Slide ``tx_base`` over the leading acknowledged run."""
        b = pdc.tx_base
        nxt = pdc.next_psn
        out = pdc.outstanding
        while b != nxt and b not in out:
            b = (b + 1) & _M32
        pdc.tx_base = b


def sack_walk(base: int, bitmap: int) -> list[int]:
    """The PSNs of the set bits of ``bitmap`` (bit 0 = ``base``), lowest first: the scoreboard's
    fast copy of ``uet.wire.pds.sack_to_psns`` (it visits set bits only; a property test proves
    the two equal). It walks the bitmap in 32-bit halves: the compiled build keeps an int below
    2^62 unboxed, and a 64-bit bitmap's top bit — set whenever the target's window ends at its
    newest PSN (uet.pds.ackbuilder) — made every step of a whole-bitmap walk a Python long
    operation."""
    out = []
    half = bitmap & 0xFFFFFFFF
    while half:
        low = half & -half
        out.append((base + low.bit_length() - 1) & _M32)
        half ^= low
    half = bitmap >> 32
    base += 32
    while half:
        low = half & -half
        out.append((base + low.bit_length() - 1) & _M32)
        half ^= low
    return out
