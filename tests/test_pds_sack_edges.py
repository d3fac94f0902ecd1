"""The SACK walk at its edges (uet.pds.scoreboard, uet.pds.ackbuilder; issue 30 item 9): a SACK base
at or below CACK, as a foreign peer may send; the target's window slide at 64/65 PSNs beyond CACK;
the 16-bit offsets at −32768; CACK and MPR only from newer ACKs; RTT validity; late holes teaching
the reordering window. Exact PSNs, exact times, real ``TxPkt`` objects on a PDC whose fields are
the ones :class:`uet.pds.scoreboard.ScoredPdc` declares."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import cast

import pytest
from pds_harness import SES_NH, hdr

from uet.errors import EncodeError
from uet.pds import Mode, PdsCore
from uet.pds.ackbuilder import AckBuilder, sack_window
from uet.pds.config import PdsConfig
from uet.pds.events import Acked, AckedRun, Event
from uet.pds.pdc import InitiatorPdc, TargetPdc, TxPkt
from uet.pds.scoreboard import AckInfo, AckTally, SackScoreboard, parse_ack, sack_walk
from uet.pds.states import InitiatorState
from uet.wire import pds as w
from uet.wire.pds import AckFlag, PdsType, offset16, psns_to_sack, sack_to_psns

M32 = 0xFFFFFFFF


@dataclass
class Pdc:
    """An initiator PDC's window as the scoreboard sees it."""

    outstanding: dict[int, TxPkt] = field(default_factory=dict)
    next_psn: int = 0
    tx_base: int = 0
    max_cack: int = 0
    peer_mp: int = 0
    srtt: int = 0
    min_rtt: int = 0


def sent(first: int, n: int, *, token: object = None, at: int = 0, nbytes: int = 100) -> Pdc:
    """A PDC that sent PSNs ``first`` .. ``first + n - 1`` at ``at`` (entropy = 1000 + index)."""
    pdc = Pdc(next_psn=(first + n) & M32, tx_base=first, max_cack=(first - 1) & M32)
    for i in range(n):
        p = TxPkt(i if token is None else token, SES_NH, b"", b"x" * nbytes, True, True)
        p.psn, p.sends, p.tx_time, p.entropy = (first + i) & M32, 1, at, 1000 + i
        pdc.outstanding[p.psn] = p
    return pdc


def ack(cack: int, *, off: int = 0, sack_off: int = 0, bitmap: int = 0, mpr: int = 0, flags: int = 0) -> AckInfo:
    a = AckInfo(int(PdsType.ACK_CC), flags, 16, off, cack, 1, 2)
    a.mpr, a.sack_off, a.bitmap = mpr, sack_off, bitmap
    return a


def apply(board: SackScoreboard, pdc: Pdc, a: AckInfo, now: int = 1000, runs: bool = False) -> tuple[AckTally, list]:
    events: deque[Event] = deque()
    t = AckTally()
    board.window(pdc, a, events, runs, t, now)
    return t, list(events)


def holes(pdc: Pdc) -> list[int]:
    return sorted(p for p, pkt in pdc.outstanding.items() if pkt.sack_hole)


def received(pdc: Pdc) -> list[int]:
    return sorted(p for p, pkt in pdc.outstanding.items() if pkt.dst_received)


# -- the SACK bitmap and CACK -----------------------------------------------------------------------------


def test_holes_lie_between_cack_and_the_newest_set_bit_only() -> None:
    pdc = sent(100, 10)
    board = SackScoreboard(99)
    t, ev = apply(board, pdc, ack(101, sack_off=1, bitmap=0b1010), now=500)  # base 102: 103 and 105 received
    assert [e.token for e in ev] == [0, 1] and t.npk == 2 and t.nby == 200
    assert received(pdc) == [103, 105] and holes(pdc) == [102, 104]
    assert pdc.outstanding[102].hole_at == 500 and not pdc.outstanding[106].sack_hole  # above the newest bit
    assert t.ents == [1000, 1001, 1003, 1005] and board.high_sack == 105 and pdc.tx_base == 102
    # the same holes reported again keep their first report time
    apply(board, pdc, ack(101, sack_off=1, bitmap=0b1010), now=900)
    assert pdc.outstanding[102].hole_at == 500


@pytest.mark.parametrize("sack_off", [0, -1, -5, -62, -63, -64, -32768])
def test_a_sack_base_at_or_below_cack_marks_no_hole_at_or_below_cack(sack_off: int) -> None:
    """A foreign target may place bit 0 at CACK or below (the offset is signed): bits at or below
    CACK say nothing (CACK covers them), holes start at CACK + 1, set bits above CACK count."""
    pdc = sent(100, 12)
    board = SackScoreboard(99)
    cack = 103
    base = cack + sack_off
    above = [cack + 2, cack + 4]  # received: 105 and 107; holes at 104 and 106
    bitmap = sum(1 << (p - base) for p in above if 0 <= p - base < 64)
    t, ev = apply(board, pdc, ack(cack, sack_off=sack_off, bitmap=bitmap))
    assert [e.token for e in ev] == [0, 1, 2, 3] and pdc.tx_base == 104
    if bitmap:
        assert received(pdc) == above and holes(pdc) == [104, 106]
        assert board.high_sack == 107
    else:  # the 64 bits end at or below CACK: nothing above it is described
        assert received(pdc) == [] and holes(pdc) == [] and board.high_sack == cack


def test_a_sack_base_below_cack_with_a_zero_bit_at_cack_is_no_hole() -> None:
    """Bit 0 at CACK − 2 (offset −2), bits for CACK − 2 .. CACK clear and CACK + 1 set: no hole
    at all (the clear bits are covered by CACK); direct check of the walk over the holes."""
    pdc = sent(100, 8)
    board = SackScoreboard(99)
    t, _ = apply(board, pdc, ack(102, sack_off=-2, bitmap=1 << 3))
    assert received(pdc) == [103] and holes(pdc) == [] and t.ents == [1000, 1001, 1002, 1003]


def test_cack_acks_everything_up_to_it_once_and_never_beyond_the_sent() -> None:
    pdc = sent(M32 - 2, 6)  # PSNs wrap: 2^32-3 .. 2
    board = SackScoreboard(M32 - 3)
    t, ev = apply(board, pdc, ack(0))
    assert [e.token for e in ev] == [0, 1, 2, 3] and (t.npk, t.nby) == (4, 400)
    assert pdc.max_cack == 0 and pdc.tx_base == 1 and board.high_sack == 0
    t, ev = apply(board, pdc, ack(0))  # the same CACK again: nothing new
    assert ev == [] and t.npk == 0
    t, ev = apply(board, pdc, ack(M32))  # an older CACK: ignored
    assert ev == [] and pdc.max_cack == 0
    t, ev = apply(board, pdc, ack(2))
    assert [e.token for e in ev] == [4, 5] and pdc.tx_base == 3 == pdc.next_psn and not pdc.outstanding


def test_cack_walk_starts_at_tx_base_or_stops_at_next_psn() -> None:
    pdc = sent(100, 5)
    board = SackScoreboard(99)
    del pdc.outstanding[100], pdc.outstanding[101]  # acknowledged one by one before
    pdc.tx_base = 102
    t, ev = apply(board, pdc, ack(101))  # CACK behind tx_base: nothing to walk
    assert ev == [] and t.npk == 0 and pdc.max_cack == 101
    t, ev = apply(board, pdc, ack(103))
    assert [e.token for e in ev] == [2, 3] and pdc.tx_base == 104


def test_cack_runs_of_one_token_become_one_acked_run() -> None:
    pdc = sent(100, 5, token="m")
    pdc.outstanding[103].token = "n"
    pdc.outstanding[104].token = "n"
    pdc.outstanding[102].ctl = 1  # a control packet: no event
    board = SackScoreboard(99)
    _, ev = apply(board, pdc, ack(104), runs=True)
    assert ev == [AckedRun("m", 2), AckedRun("n", 2)]


def test_mpr_counts_only_from_a_newer_cack() -> None:
    pdc = sent(100, 5)
    board = SackScoreboard(99)
    apply(board, pdc, ack(100, mpr=3))
    assert pdc.peer_mp == 3 * 128 and board.mpr_cack == 100
    apply(board, pdc, ack(100, mpr=1))  # the same CACK: its MPR is not newer
    assert pdc.peer_mp == 3 * 128
    apply(board, pdc, ack(101, mpr=0))  # no MPR
    assert pdc.peer_mp == 3 * 128 and board.mpr_cack == 100
    apply(board, pdc, ack(102, mpr=2))
    assert pdc.peer_mp == 2 * 128 and board.mpr_cack == 102


def test_slide_passes_the_leading_acknowledged_run_only() -> None:
    pdc = sent(10, 6)
    for p in (10, 11, 13):
        del pdc.outstanding[p]
    SackScoreboard.slide(pdc)
    assert pdc.tx_base == 12
    pdc.outstanding.clear()
    SackScoreboard.slide(pdc)
    assert pdc.tx_base == 16 == pdc.next_psn


def test_shift_moves_the_scoreboard_with_a_new_start_psn() -> None:
    board = SackScoreboard(M32)
    board.shift(5)
    assert (board.high_sack, board.mpr_cack) == (4, 4)


# -- the named packet -----------------------------------------------------------------------------------


def test_the_named_packet_gives_rtt_entropy_ecn_bytes_and_its_response() -> None:
    pdc = sent(100, 3, at=1000, nbytes=300)
    board = SackScoreboard(99)
    events: deque[Event] = deque()
    t = AckTally()
    a = ack(99, off=3, flags=int(AckFlag.M))
    a.hl = 4
    assert board.named(pdc, a, b"HDR!resp", 5, events, t, 4000)
    assert (t.npk, t.nby, t.ent, t.fresh, t.ecn_bytes, t.rtt) == (1, 300, 1002, 1, 300, 3000)
    assert list(events) == [Acked(2, 5, b"resp")] and board.high_sack == 102
    assert not board.named(pdc, a, b"", 0, events, AckTally(), 5000)  # no longer outstanding
    t = AckTally()
    pdc.outstanding[100].dst_received = True  # a SACK bit told of it before
    assert board.named(pdc, ack(99, off=1), b"", 0, events, t, 6000)
    assert t.fresh == 0 and t.ecn_bytes == 0 and events[-1] == Acked(0, 0, b"") and board.high_sack == 102


@pytest.mark.parametrize(
    ("sends", "retx_flag", "rtx_wait", "rearmed", "sample"),
    [
        (1, False, False, False, True),
        (2, True, False, False, True),  # the ACK names the resend
        (2, False, False, False, False),  # which copy arrived is unknown
        (3, True, False, False, False),
        (1, False, True, False, False),  # marked lost, waiting for the gate
        (1, False, False, True, False),  # re-armed without sending
    ],
)
def test_rtt_samples_only_where_the_copy_is_known(
    sends: int, retx_flag: bool, rtx_wait: bool, rearmed: bool, sample: bool
) -> None:
    pdc = sent(100, 1, at=1000)
    pkt = pdc.outstanding[100]
    pkt.sends, pkt.rtx_wait, pkt.rearmed = sends, rtx_wait, rearmed
    t = AckTally()
    flags = int(AckFlag.RETX) if retx_flag else 0
    assert SackScoreboard(99).named(pdc, ack(99, off=1, flags=flags), b"", 0, deque(), t, 2500)
    assert t.rtt == (1500 if sample else None)


def test_a_reported_hole_that_arrives_late_teaches_the_reordering_window() -> None:
    pdc = sent(100, 4, at=0)
    pdc.srtt, pdc.min_rtt = 4000, 1000
    board = SackScoreboard(99)
    apply(board, pdc, ack(99, sack_off=1, bitmap=0b10), now=2000)  # 101 received, 100 a hole
    assert pdc.outstanding[100].hole_at == 2000
    apply(board, pdc, ack(100), now=5000)  # 100 was reordered: 3,000 late, + srtt/4
    assert board.reo_wnd == 3000 + 1000
    pkt = pdc.outstanding[102]
    pkt.hole_at, pkt.sends, pkt.tx_time = 5500, 2, 5600  # resent; acknowledged 100 ns after: early copy
    apply(board, pdc, ack(100, sack_off=2, bitmap=0b1), now=5700)
    assert board.reo_wnd == 4000  # 200 + 1000 late is less than what it knew
    pkt = pdc.outstanding[103]
    pkt.hole_at, pkt.sends, pkt.tx_time = 1000, 2, 5000  # resent long ago: this copy arrived
    apply(board, pdc, ack(103), now=9000)
    assert board.reo_wnd == 4000 and pkt.hole_at == 0


def test_late_by_its_original_grows_the_window_and_a_resend_does_not() -> None:
    pdc = Pdc(srtt=0, min_rtt=100)
    board = SackScoreboard(0)
    pkt = TxPkt(0, SES_NH, b"", b"", True, True)
    pkt.hole_at, pkt.tx_time, pkt.sends = 1000, 0, 2
    board.late(pdc, pkt, 6000, False)  # the resend arrived (sent 6,000 ago > min_rtt)
    assert board.reo_wnd == 0 and pkt.hole_at == 0
    pkt.hole_at, pkt.tx_time = 1000, 5950
    board.late(pdc, pkt, 6000, False)  # acknowledged 50 ns after its resend: the original arrived
    assert board.reo_wnd == 5000
    pkt.hole_at, pkt.tx_time = 1000, 5900
    board.late(pdc, pkt, 6000, False)  # exactly min_rtt after its resend: that copy may be it
    assert board.reo_wnd == 5000
    pkt.hole_at = 500
    board.late(pdc, pkt, 6000, True)
    assert board.reo_wnd == 5500


# -- forged ACKs --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cack", "off", "sack_off", "bitmap", "forged"),
    [
        (104, 0, 1, 0, False),  # the newest sent PSN: fine
        (105, 0, 1, 0, True),  # CACK of an unsent PSN
        (103, 1, 1, 0, False),
        (103, 2, 1, 0, True),  # ACK_PSN unsent
        (102, 0, 1, 0b11, False),  # SACK up to 104
        (102, 0, 1, 0b111, True),  # SACK bit for 105
        (102, 0, 3, 0b1, True),
        (100 - 1 - 1024, 0, 1, 0, False),  # CACK right at the window's lower edge
        (100 - 2 - 1024, 0, 1, 0, True),  # behind it
    ],
)
def test_an_ack_claiming_unsent_psns_or_a_cack_behind_the_window_is_forged(
    cack: int, off: int, sack_off: int, bitmap: int, forged: bool
) -> None:
    pdc = sent(100, 5)
    a = ack(cack & M32, off=off, sack_off=sack_off, bitmap=bitmap)
    assert SackScoreboard(99).claims_unsent(pdc, a, 1024) is forged


# -- the walk, the target's window and the offsets ------------------------------------------------------------


@pytest.mark.parametrize("base", [0, 7, M32, M32 - 62])
def test_the_walk_visits_every_set_bit_lowest_first_across_the_wrap(base: int) -> None:
    bm = 1 | 1 << 5 | 1 << 63
    assert sack_walk(base, bm) == [base, (base + 5) & M32, (base + 63) & M32] == sack_to_psns(base, bm)
    assert sack_walk(base, 0) == []


@pytest.mark.parametrize(
    ("ahead", "soff"),
    [(1, 1), (63, 1), (64, 1), (65, 2), (66, 3), (200, 137)],
)
def test_the_target_window_slides_past_64_beyond_cack(ahead: int, soff: int) -> None:
    """Bit 0 is CACK + 1 while the newest PSN is at most 64 beyond CACK; from 65 on the window is
    the 64 PSNs ending at it (behaviour.md §2.8)."""
    cack = M32 - 10  # across the wrap
    hi = (cack + ahead) & M32
    got = sack_window({hi, (cack + 1) & M32}, cack, hi)
    assert got[0] == soff
    base = (cack + soff) & M32
    assert got[1] == psns_to_sack(base, {hi, (cack + 1) & M32}) and got[1] >> 63 == (ahead >= 64)
    assert got[1] & 1 == (soff == 1)


def test_the_target_window_is_empty_without_received_psns() -> None:
    assert sack_window(set(), 5, 500) == (1, 0)


@pytest.mark.parametrize(("d", "ok"), [(-32768, True), (-32769, False), (32767, True), (32768, False), (0, True)])
def test_offset16_at_its_bounds(d: int, ok: bool) -> None:
    for base in (0, 5, M32 - 3, 0x8000_0000):
        target = (base + d) & M32
        if ok:
            assert offset16(target, base) == d
        else:
            with pytest.raises(ValueError, match="beyond a 16-bit offset"):
                offset16(target, base)


def test_an_ack_with_sack_offset_minus_32768_round_trips_and_describes_nothing_above_cack() -> None:
    lay = w.ACK_CC[(False, "nscc")]
    data = lay.encode(lay.make(ack_psn_offset=0, cack_psn=1000, spdcid=1, dpdcid=2, mpr=1, sack_psn_offset=-32768,
                               sack_bitmap=(1 << 64) - 1))  # fmt: skip
    a = parse_ack(data, int(PdsType.ACK_CC), 0)
    assert a is not None and a.sack_off == -32768 and a.bitmap == (1 << 64) - 1
    pdc = sent(1001, 3)
    board = SackScoreboard(1000)
    pdc.max_cack = 1000
    t, ev = apply(board, pdc, a)
    assert ev == [] and received(pdc) == [] and holes(pdc) == [] and t.ents == []


# -- the builder --------------------------------------------------------------------------------------------


class _Tp:
    """The target PDC fields the ACK builder reads."""

    lpdcid, rpdcid = 7, 9

    def __init__(self, rcvd: set[int], rcvd_bytes: int, ecn_bytes: int) -> None:
        self.rcvd, self.rcvd_bytes, self.ecn_bytes = rcvd, rcvd_bytes, ecn_bytes


def target(tp: _Tp) -> TargetPdc:
    """``tp`` where the builder wants a target PDC: it reads only the fields ``_Tp`` has."""
    return cast(TargetPdc, tp)


@pytest.mark.parametrize("ccx", [False, True])
def test_the_ack_builder_encodes_what_the_scoreboard_reads(ccx: bool) -> None:
    b = AckBuilder(PdsConfig(ack_on_ecn=not ccx, mp_range=1024))
    assert b.mpr == 8 and b.ccx is ccx and not b.plain
    tp = _Tp({1003, 1005}, 4097, 513)
    data = b.build(target(tp), 0, 0, 2, 1000, False, 1005, 70_000)
    t = int(PdsType.ACK_CCX if ccx else PdsType.ACK_CC)
    assert data[0] >> 3 == t
    a = parse_ack(data, t, 0)
    assert a is not None and (a.cack, a.off, a.spdcid, a.dpdcid, a.mpr) == (1000, 2, 7, 9, 8)
    assert (a.sack_off, a.bitmap) == (1, 0b10100)
    h = hdr(data)
    assert h.service_time == 0xFFFF and h.rcvd_bytes == 17 and h.ooo_count == 2
    if ccx:
        assert a.ccx >> 40 == 3  # 513 bytes in 256-byte units, rounded up
    tp.rcvd_bytes = (1 << 32) + 1  # the 24-bit count wraps
    assert hdr(b.build(target(tp), 0, 0, 0, 1000, False, 1000, 5)).rcvd_bytes == 1


def test_the_ack_builder_mpr_is_clamped_and_plain_acks_carry_no_sack() -> None:
    assert AckBuilder(PdsConfig(mp_range=64, max_outstanding=64)).mpr == 1
    assert AckBuilder(PdsConfig(mp_range=4096)).mpr == 32
    b = AckBuilder(PdsConfig(ack_format="ack"))
    data = b.build(target(_Tp({5}, 0, 0)), int(AckFlag.P), 3, 44, 4, True, 5, 0)
    assert len(data) == w.ACK_PROBE.size and data[0] >> 3 == PdsType.ACK
    a = parse_ack(data, int(PdsType.ACK), int(AckFlag.P))
    assert a is not None and (a.off, a.cack) == (44, 4)


@pytest.mark.parametrize("ccx", [False, True])
def test_the_ack_builder_zero_fields_rounding_and_probe_layout(ccx: bool) -> None:
    """cc_type NSCC (0), no CC flags, rc and the window penalty 0; byte counts in 256-byte units
    rounded up (a multiple of 256 is exact); a PROBE's answer carries the unsigned opaque value,
    an ACK a signed offset."""
    b = AckBuilder(PdsConfig(ack_on_ecn=not ccx))
    tp = _Tp({1001}, 4096, 512)
    h = hdr(b.build(target(tp), 0, 0, -3, 1000, False, 1001, 7))
    assert (h.cc_type, h.cc_flags, h.rc, h.rcv_cwnd_pend) == (0, 0, 0, 0)
    assert h.ack_psn_offset == -3 and h.rcvd_bytes == 16 and h.service_time == 7
    if ccx:
        a = parse_ack(b.build(target(tp), 0, 0, 0, 1000, False, 1001, 0), int(PdsType.ACK_CCX), 0)
        assert a is not None and a.ccx >> 40 == 2
    probe = b.build(target(tp), int(AckFlag.P), 0, 0xBEEF, 1000, True, 1001, 0)
    hp = hdr(probe)
    assert hp.probe_opaque == 0xBEEF and hp.rcvd_bytes == 16


def test_cack_behind_a_slid_tx_base_walks_nothing_and_acks_are_plain() -> None:
    pdc = sent(100, 6)
    board = SackScoreboard(99)
    for p in (100, 101, 102):
        del pdc.outstanding[p]
    pdc.tx_base = 103  # acknowledged one by one up to 102
    t, ev = apply(board, pdc, ack(101))
    assert ev == [] and t.npk == 0 and sorted(pdc.outstanding) == [103, 104, 105]
    _, ev = apply(board, pdc, ack(103))
    assert ev == [Acked(3, 0, b"")]


def test_high_sack_moves_by_one_through_cack_and_sack_bits() -> None:
    pdc = sent(100, 6)
    board = SackScoreboard(99)
    apply(board, pdc, ack(100))
    assert board.high_sack == 100
    apply(board, pdc, ack(100, sack_off=1, bitmap=0b1))  # a SACK bit for 101
    assert board.high_sack == 101


def test_a_hole_over_a_packet_already_acknowledged_is_skipped() -> None:
    pdc = sent(100, 5)
    board = SackScoreboard(99)
    assert board.named(pdc, ack(99, off=2), b"", 0, deque(), AckTally(), 10)  # 101 acknowledged alone
    apply(board, pdc, ack(99, sack_off=1, bitmap=0b1000), now=20)  # 100..102 holes, 103 received
    assert holes(pdc) == [100, 102] and received(pdc) == [103]


def test_a_late_hole_reported_received_by_a_sack_bit_grows_the_window() -> None:
    pdc = sent(100, 4, at=0)
    pdc.srtt, pdc.min_rtt = 0, 10
    board = SackScoreboard(99)
    apply(board, pdc, ack(99, sack_off=1, bitmap=0b100), now=1000)  # 100, 101 holes
    apply(board, pdc, ack(99, sack_off=1, bitmap=0b110), now=4000)  # 101 arrived, sent once
    assert board.reo_wnd == 3000
    pkt = pdc.outstanding[100]
    pkt.sends, pkt.tx_time = 2, 4500  # resent; this copy's ACK comes long after min_rtt
    apply(board, pdc, ack(99, sack_off=1, bitmap=0b111), now=9000)
    assert board.reo_wnd == 3000  # a resent packet's arrival says nothing of reordering


def test_the_ack_builder_keeps_the_ack_rules_fields() -> None:
    """The ACK rule's configuration fields, read per accepted request (uet.pds.target ``_accept``)
    from the builder, are the configuration's."""
    cfg = PdsConfig(ack_per_pkt=True, ack_on_ecn=False, ack_gen_trigger=8192, ack_gen_min_pkt_add=512)
    b = AckBuilder(cfg)
    assert (b.per_pkt, b.on_ecn, b.trigger, b.min_add) == (True, False, 8192, 512)
    d = AckBuilder(PdsConfig())
    assert (d.per_pkt, d.on_ecn, d.trigger, d.min_add) == (False, True, 16384, 1024)


@pytest.mark.parametrize("fmt", ["ack", "cc", "ccx"])
def test_the_ack_builder_from_fields_is_the_builder_from_a_pdc(fmt: str) -> None:
    """``build_from`` (the target's call: the PDC's fields as arguments, read natively) encodes
    exactly what ``build`` of the PDC encodes, ACKs and PROBE answers, with and without SACK."""
    cfg = PdsConfig(ack_format="ack") if fmt == "ack" else PdsConfig(ack_on_ecn=fmt == "cc")
    b = AckBuilder(cfg)
    for tp in (_Tp(set(), 0, 0), _Tp({1003, 1005, 1070}, 4097, 513), _Tp({1001}, (1 << 32) + 1, 1 << 30)):
        for flags, rnh, off, probe, hi, st in (
            (0, 0, 2, False, 1005, 70_000),
            (int(AckFlag.P), 3, 0xBEEF, True, 1070, 0),
        ):
            fields = (tp.lpdcid, tp.rpdcid, tp.rcvd, tp.rcvd_bytes, tp.ecn_bytes)
            assert b.build_from(*fields, flags, rnh, off, 1000, probe, hi, st) == b.build(
                target(tp), flags, rnh, off, 1000, probe, hi, st
            )


@pytest.mark.parametrize("ccx", [False, True])
@pytest.mark.parametrize("opaque", [0, 1, 0x7FFF, 0x8000, 0xBEEF, 0xFFFF])
def test_a_probe_answer_is_the_probe_layouts_both_ways(ccx: bool, opaque: int) -> None:
    """A PROBE's answer is built and read by the compiled copies of the plain ACK_CC / ACK_CCX
    codec (uet.wire.pdsfast; the probe layout differs only in reading bytes 2-3 unsigned): the
    bytes are the probe layout's own encoding, the opaque value comes back unsigned (the upper
    half of the 16-bit range included), and a value outside the field still raises the layout's
    error."""
    b = AckBuilder(PdsConfig(ack_on_ecn=not ccx))
    layout = (w.ACK_CCX if ccx else w.ACK_CC)[(True, "nscc")]
    raw = (w.ACK_CCX if ccx else w.ACK_CC)[(True, "raw")]
    flags = int(AckFlag.P) | int(AckFlag.M)
    for tp in (_Tp(set(), 0, 0), _Tp({1003, 1005}, 4097, 513)):
        data = b.build(target(tp), flags, 3, opaque, 1000, True, 1005, 70_000)
        soff, bm = sack_window(tp.rcvd, 1000, 1005) if tp.rcvd else (1, 0)
        xs = ((((tp.ecn_bytes + 255) >> 8) & 0xFFFFFF) << 40,) if ccx else ()
        v = (
            b._type,
            3,
            flags,
            opaque,
            1000,
            7,
            9,
            0,
            0,
            b.mpr,
            soff,
            bm,
            0xFFFF,
            0,
            0,
            (tp.rcvd_bytes + 255) >> 8,
            len(tp.rcvd),
        )
        assert data == layout.encode((*v, *xs))
        a = parse_ack(data, b._type, flags)
        assert a is not None and a.off == opaque == raw.unpack(data)[3]
        assert (a.cack, a.spdcid, a.dpdcid, a.sack_off, a.bitmap) == (1000, 7, 9, soff, bm)
    with pytest.raises(EncodeError):
        b.build(target(_Tp(set(), 0, 0)), flags, 3, 0x10000, 1000, True, 1000, 0)


def test_a_probe_cp_is_the_control_layouts() -> None:
    """The PROBE control packet of an established PDC (``send_probe``) is the CONTROL layout's
    encoding of its fields (built by the compiled copy, uet.wire.pdsfast ``control``)."""
    core = PdsCore("10.0.0.1", PdsConfig(), rng=random.Random(5))
    core.submit("10.0.0.2", Mode.RUD, SES_NH, b"h" * 8, b"x", token=0, som=True, eom=True, now=0)
    core.datagrams_to_send(0)
    pdc = next(iter(core.pdcs.values()))
    assert isinstance(pdc, InitiatorPdc)
    pdc.state, pdc.rpdcid = InitiatorState.ESTABLISHED, 77
    for opaque in (0, 0x8001, 0xFFFF):
        assert core.send_probe(pdc.lpdcid, opaque, 10)
        ((data, dst, _e),) = core.datagrams_to_send(10)
        assert dst == "10.0.0.2"
        assert data == w.CONTROL.encode(
            (int(PdsType.CONTROL), int(w.ControlType.PROBE), 0, opaque, pdc.tx_base, pdc.lpdcid, 77, pdc.max_cack + 1)
        )
