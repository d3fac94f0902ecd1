"""Target-initiated close after a stall (spec/behaviour.md §2.12, issue 15): ``Close_REQ_Time``
measures the initiator's silence, so an initiator that keeps delivering its quiescing traffic is
never closed in error; exact packets and a fake clock."""

from __future__ import annotations

from pds_harness import A_ADDR, B_ADDR, Pair, hdr, request
from test_pds_rud import START, establish, submit

from uet.pds import Acked, Failed, PdsConfig, TargetState
from uet.wire.pds import ControlType, NackCode, PdsType

MS = 1_000_000
# exact packet sequences without the anti-amplification proof exchange (uet.pds.validation,
# tested in tests/test_pds_validation.py)
CFG = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=1000 * MS, close_req_ns=100 * MS, amp_factor=0)


def _timers(pair: Pair) -> None:
    for s in (pair.a, pair.b):
        t = s.core.get_timer()
        if t is not None and t <= pair.now:
            s.core.handle_timer(pair.now)
        s.drain_events()


def _kinds(out: list) -> list:
    return [(hdr(d).type, getattr(hdr(d), "ctl_type", None), getattr(hdr(d), "nack_code", None)) for d, _x, _y in out]


def test_close_req_time_restarts_on_initiator_progress() -> None:
    pair = Pair(CFG)
    establish(pair)
    pair.take(pair.a)
    pair.take(pair.b)
    toks = submit(pair, 4, tag="big")  # one 4-packet message, sent at once
    reqs = [d for d, _x, _y in pair.take(pair.a)]
    assert len(reqs) == 4
    pair.inject(pair.b, reqs[0], A_ADDR)
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    # the process stalls 1.5 s: the other three packets wait in a buffer; the target's idle timer
    # runs first and asks for a close
    pair.now += 1500 * MS
    _timers(pair)
    tp = next(p for p in pair.b.core.pdcs.values() if p.role == "target")
    assert tp.state is TargetState.CLOSE_WAIT
    out = pair.take(pair.b)
    assert ControlType.REQ_CLOSE in [k[1] for k in _kinds(out)]
    for d, _x, _y in out:
        pair.inject(pair.a, d, B_ADDR)
    for d, _x, _y in pair.take(pair.a):  # the ACK of the CLOSE_REQ (and RTO resends, lost)
        if hdr(d).type == PdsType.ACK:
            pair.inject(pair.b, d, A_ADDR)
    assert tp.close_req is None
    # the initiator's quiescing traffic trickles in, 60 ms apart (each gap < Close_REQ_Time, their
    # sum > it): the target must not close in error while the initiator makes progress
    for data in reqs[1:]:
        pair.now += 60 * MS
        _timers(pair)
        pair.take(pair.a)  # RTO resends: lost
        pair.inject(pair.b, data, A_ADDR)
        out = pair.take(pair.b)
        assert NackCode.CLOSING_IN_ERR not in [k[2] for k in _kinds(out)]
        assert tp.state is TargetState.CLOSE_WAIT
        for d, _x, _y in out:
            pair.inject(pair.a, d, B_ADDR)
    # every PSN acknowledged: the initiator sends CLOSE and both ends close cleanly
    out = pair.take(pair.a)
    assert [k[1] for k in _kinds(out)] == [ControlType.CLOSE]
    pair.inject(pair.b, out[0][0], A_ADDR)
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert not [e for e in pair.a.events if isinstance(e, Failed)]
    assert {e.token for e in pair.a.events if isinstance(e, Acked)} >= set(toks)
    assert [c.error for c in pair.b.closed()] == [None] and [c.error for c in pair.a.closed()] == [None]


def test_close_req_time_still_closes_a_silent_initiator() -> None:
    pair = Pair(CFG)
    establish(pair)
    pair.take(pair.a)
    pair.take(pair.b)
    pair.now += 1000 * MS
    _timers(pair)
    (cp,) = pair.take(pair.b)
    pair.inject(pair.a, cp[0], B_ADDR)
    for d, _x, _y in pair.take(pair.a):
        if hdr(d).type == PdsType.ACK:  # the CLOSE_REQ is acknowledged, then the initiator is gone
            pair.inject(pair.b, d, A_ADDR)
    pair.now += 100 * MS - 1
    _timers(pair)
    assert not pair.b.closed()
    pair.now += 1
    _timers(pair)
    assert [c.error for c in pair.b.closed()] == ["no CLOSE after CLOSE_REQ"]


def test_a_syn_reusing_the_pdcid_of_a_pdc_in_close_wait_opens_a_new_pdc() -> None:
    """An initiator that forgot a PDC (it restarted, or a tester's earlier run) reuses its PDCID
    with a new Start_PSN while the target waits in CLOSE_WAIT for a CLOSE that will never come:
    the old PDC is closed in error at once and quietly (no CLOSING_IN_ERR naming the reused
    PDCID), and the SYN opens a new PDC that is acknowledged as any other."""
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    pair.take(pair.a)
    pair.take(pair.b)
    pair.now += 1000 * MS
    _timers(pair)
    assert tp.state is TargetState.CLOSE_WAIT
    pair.take(pair.b)  # the CLOSE_REQ: its initiator is gone
    pair.inject(pair.b, request(START + 900, ipdc.lpdcid, syn_offset=0), A_ADDR)
    out = pair.take(pair.b)
    assert [(k[0], k[2]) for k in _kinds(out)] == [(PdsType.ACK_CC, None)]  # an ACK (with CC state)
    (new,) = pair.b.core.pdcs.values()
    assert new is not tp and new.state is TargetState.ESTABLISHED and new.start_psn == START + 900
    assert hdr(out[0][0]).dpdcid == ipdc.lpdcid and hdr(out[0][0]).spdcid == new.lpdcid
    assert [c.error for c in pair.b.closed()] == ["initiator reused its PDCID for a new PDC"]
    # nothing of the old PDC follows (its CLOSE_REQ would be resent within its RTOs); the new
    # one is idle for less than target_idle_ns
    for _ in range(50):
        pair.now += 10 * MS
        _timers(pair)
        assert pair.take(pair.b) == []


def test_a_syn_with_another_start_psn_on_an_established_pdc_is_still_refused() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    pair.take(pair.b)
    pair.inject(pair.b, request(START + 900, ipdc.lpdcid, syn_offset=0), A_ADDR)
    assert [k[2] for k in _kinds(pair.take(pair.b))] == [NackCode.INVALID_SYN]
    assert list(pair.b.core.pdcs.values()) == [tp] and tp.state is TargetState.ESTABLISHED


def test_a_syn_whose_ses_header_cannot_be_read_opens_no_pdc() -> None:
    """A SYN with a cut SES header is dropped and counted as on a PDC, before a PDC is made for
    it: no reply, nothing left for its initiator (who never learns a PDCID) to close. A whole
    SYN from the same PDCID then opens the PDC as usual."""
    pair = Pair(CFG)
    whole = request(START, 0x321, syn_offset=0)
    cut = whole[: len(whole) - len(b"data") - 3]  # the SES header three bytes short
    pair.inject(pair.b, cut, A_ADDR)
    assert pair.take(pair.b) == [] and not pair.b.core.pdcs
    assert pair.b.core.counters["drop_ses_header"] == 1
    pair.inject(pair.b, whole, A_ADDR)
    (tp,) = pair.b.core.pdcs.values()
    assert tp.state is TargetState.ESTABLISHED and [k[0] for k in _kinds(pair.take(pair.b))] == [PdsType.ACK_CC]
