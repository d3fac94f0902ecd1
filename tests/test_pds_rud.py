"""RUD with exact packets and a fake clock (spec/behaviour.md §2.3–§2.12)."""

from __future__ import annotations

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, control, hdr, request, ses_small, state

from uet.pds import (
    Acked,
    Failed,
    InitiatorState,
    Mode,
    PdcClosed,
    PdsClosedError,
    PdsConfig,
    PdsError,
    PdsLimitError,
    ProbeAnswered,
    TargetState,
)
from uet.wire.pds import AckFlag, ControlType, PdsType, ReqFlag, psn_add

START = 0x12345678
# exact packet sequences without the anti-amplification proof exchange (uet.pds.validation,
# tested in tests/test_pds_validation.py)
CFG = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None, amp_factor=0)


def submit(pair: Pair, n: int, *, size: int = 100, tag: str = "m", mode: Mode = Mode.RUD, msg: bool = True) -> list:
    """Submit ``n`` packets as one message (``msg``) or as ``n`` single-packet messages."""
    toks = [(tag, i) for i in range(n)]
    for i, tok in enumerate(toks):
        som = i == 0 if msg else True
        eom = i == n - 1 if msg else True
        pair.a.core.submit(B_ADDR, mode, SES_NH, ses_small(), bytes([i % 256]) * size, token=tok, som=som, eom=eom,
                           now=pair.now)  # fmt: skip
    return toks


def a_pdc(pair: Pair):
    (pdc,) = [p for p in pair.a.core.pdcs.values() if p.role == "initiator"]
    return pdc


def b_pdc(pair: Pair):
    (pdc,) = [p for p in pair.b.core.pdcs.values() if p.role == "target"]
    return pdc


def establish(pair: Pair, n: int = 1) -> tuple:
    toks = submit(pair, n, tag="est")
    assert pair.run_until(lambda: len(pair.a.acked()) == n)
    return a_pdc(pair), b_pdc(pair), toks


def test_syn_0rtt_exact_packets() -> None:
    pair = Pair(CFG)
    submit(pair, 3)
    out = pair.take(pair.a)
    assert len(out) == 3
    assert len({e for _d, _x, e in out}) == 3  # RUD sprays over a rotating entropy set
    ipdc = a_pdc(pair)
    assert ipdc.state is InitiatorState.SYN_SENT
    for i, (data, dst, _ent) in enumerate(out):
        h = hdr(data)
        assert dst == B_ADDR
        assert h.type == PdsType.RUD_REQ and h.next_hdr == SES_NH
        assert h.flags & ReqFlag.SYN
        assert bool(h.flags & ReqFlag.AR) == (i == 2)  # AR on EOM
        assert h.psn == START + i and h.psn_offset == i and h.spdcid == ipdc.lpdcid
        assert h.clear_psn_offset == -1 - i  # CLEAR_PSN = tx_base - 1 = Start_PSN - 1
        assert data[12:32] == ses_small() and data[32:] == bytes([i]) * 100
    # 0-RTT: the target delivers at once and ACKs every SYN packet immediately
    acks = []
    for data, _d, _e in out:
        pair.inject(pair.b, data, A_ADDR)
        acks += pair.take(pair.b)
    assert [d.psn for d in pair.b.deliveries] == [START, START + 1, START + 2]
    tp = b_pdc(pair)
    assert tp.state is TargetState.ESTABLISHED and tp.rpdcid == ipdc.lpdcid and tp.start_psn == START
    assert len(acks) == 3
    for i, (data, dst, _e) in enumerate(acks):
        h = hdr(data)
        assert dst == A_ADDR and h.type == PdsType.ACK_CC and len(data) == 32
        assert h.cack_psn == START + i and h.ack_psn_offset == 0 and h.mpr == 1
        assert h.spdcid == tp.lpdcid and h.dpdcid == ipdc.lpdcid
    for data, _d, _e in acks:
        pair.inject(pair.a, data, B_ADDR)
    assert state(ipdc) is InitiatorState.ESTABLISHED and ipdc.rpdcid == tp.lpdcid
    assert [e.token for e in pair.a.acked()] == [("m", 0), ("m", 1), ("m", 2)]
    # later packets carry DPDCID and no SYN
    submit(pair, 1, tag="late")
    (data, _d, _e), = pair.take(pair.a)  # fmt: skip
    h = hdr(data)
    assert not h.flags & ReqFlag.SYN and h.dpdcid == tp.lpdcid and h.psn == START + 3


def test_random_start_psn_and_pdcid() -> None:
    pair = Pair(PdsConfig(), seed=11)
    submit(pair, 1)
    (data, _d, _e), = pair.take(pair.a)  # fmt: skip
    h = hdr(data)
    assert (1 << 16) <= h.psn < (1 << 31) and h.psn_offset == 0 and h.spdcid != 0


def test_coalesced_ack_sack_and_fast_retransmit() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    base = ipdc.next_psn
    toks = submit(pair, 20, size=1000)
    out = pair.take(pair.a)
    assert len(out) == 20
    flags = [hdr(d).flags for d, _x, _y in out]
    assert [bool(f & ReqFlag.AR) for f in flags] == [False] * 19 + [True]
    acks = []
    for i, (data, _d, _e) in enumerate(out):
        if i == 4:
            continue  # lost
        pair.inject(pair.b, data, A_ADDR)
        acks += pair.take(pair.b)
    # coalescing: 16 × 1024 bytes trigger one ACK, the AR packet another
    assert len(acks) == 2
    h = hdr(acks[1][0])
    assert h.cack_psn == base + 3  # hole at base + 4
    assert h.ack_psn_offset == 19 - 3
    sbase = psn_add(h.cack_psn, h.sack_psn_offset)
    got = {psn_add(sbase, i) for i in range(64) if h.sack_bitmap >> i & 1}
    assert got == {base + i for i in range(5, 20)}  # PSNs at or below CACK are not reported
    assert h.ooo_count == 15
    for data, _d, _e in acks:
        pair.inject(pair.a, data, B_ADDR)
    # the first ACK names PSN 16 (its trigger), the second 19; CACK covers 0..3
    assert sorted(e.token[1] for e in pair.a.acked() if e.token in toks) == [0, 1, 2, 3, 16, 19]
    # fast retransmit of the hole (≥ 3 newer PSNs SACKed), with RETX and AR
    (data, _d, _e), = pair.take(pair.a)  # fmt: skip
    h = hdr(data)
    assert h.psn == base + 4 and h.flags & ReqFlag.RETX and h.flags & ReqFlag.AR
    assert pair.a.core.counters["fast_retransmits"] == 1
    pair.inject(pair.b, data, A_ADDR)
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(ack).cack_psn == base + 19 and hdr(ack).flags & AckFlag.RETX
    pair.inject(pair.a, ack, B_ADDR)
    assert sorted(e.token for e in pair.a.acked() if e.token in toks) == toks
    assert not ipdc.outstanding and ipdc.tx_base == base + 20


def test_ack_timer_flushes_coalesced_ack() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    psn = ipdc.next_psn
    pair.inject(pair.b, request(psn, ipdc.lpdcid, tp.lpdcid), A_ADDR)
    assert pair.take(pair.b) == []
    t = pair.b.core.get_timer()
    assert t == pair.now + CFG.ack_timer_ns
    pair.now = t
    pair.b.core.handle_timer(pair.now)
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(ack).cack_psn == psn and pair.b.core.counters["acks_timer"] == 1


def test_rto_retransmit_then_ack() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    toks = submit(pair, 1, tag="x")
    ((first, _d, _e),) = pair.take(pair.a)  # fmt: skip (dropped)
    assert pair.a.core.get_timer() == pair.now + CFG.rto_ns
    pair.now += CFG.rto_ns
    pair.a.core.handle_timer(pair.now)
    (data, _d, _e), = pair.take(pair.a)  # fmt: skip
    h, h0 = hdr(data), hdr(first)
    assert h.psn == h0.psn and h.flags == h0.flags | ReqFlag.RETX | ReqFlag.AR
    assert data[12:] == first[12:]
    pair.inject(pair.b, data, A_ADDR)
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    pair.inject(pair.a, ack, B_ADDR)
    assert toks[0] in [e.token for e in pair.a.acked()]
    assert pair.a.core.counters["rto"] == 1 and pair.a.core.counters["retransmits"] == 1


def test_retry_exhaustion_fails_and_next_message_uses_new_pdc() -> None:
    pair = Pair(CFG)
    toks = submit(pair, 3)
    pair.filter = lambda data, src, dst: []  # black hole
    assert pair.run_until(lambda: len(pair.a.failed()) == 3)
    assert {e.token for e in pair.a.failed()} == set(toks)
    assert all(e.reason == "retry exhausted" and e.nack_code is None for e in pair.a.failed())
    (closed,) = pair.a.closed()
    assert closed.role == "initiator" and closed.error == "retry exhausted"
    # backed-off RTOs 2, 4, ... 64 ms then 100 ms until both budgets are spent (uet.pds.backoff):
    # 6 doublings (2+4+...+64 = 126 ms) + 18 capped (1.8 s) = 24 retransmissions each; the
    # timer at 2.026 s finds both budgets spent
    assert pair.a.core.counters["retransmits"] == 3 * 24
    assert pair.now >= CFG.retry_time_ns
    assert not pair.a.core.pdcs and not pair.a.core.usable and not pair.a.core.gates
    assert not pair.a.acked()
    pair.filter = None
    toks2 = submit(pair, 2, tag="again")
    assert pair.run_until(lambda: len(pair.a.acked()) == 2)
    assert [e.token for e in pair.a.acked()] == toks2
    assert len(pair.a.opened()) == 2 and pair.a.opened()[1].pdc != closed.pdc


def test_ack_req_for_sacked_packet() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    p0 = ipdc.next_psn
    submit(pair, 2, tag="s")
    out = pair.take(pair.a)
    for data, _d, _e in out:
        pair.inject(pair.b, data, A_ADDR)
    pair.take(pair.b)  # the real ACK is lost
    # a forged ACK_CC names p0+1 and SACKs p0 but keeps CACK below p0: p0 is dst_received
    from uet.wire.pds import ACK_CC

    ack = ACK_CC[(False, "nscc")].encode(
        ACK_CC[(False, "nscc")].make(
            cack_psn=p0 - 1, ack_psn_offset=2, spdcid=tp.lpdcid, dpdcid=ipdc.lpdcid, sack_psn_offset=1, sack_bitmap=0b11
        )  # fmt: skip
    )
    pair.inject(pair.a, ack, B_ADDR)
    assert ipdc.outstanding[p0].dst_received
    pair.now += CFG.rto_ns
    pair.a.core.handle_timer(pair.now)
    (cp, _d, _e), = pair.take(pair.a)  # fmt: skip
    h = hdr(cp)
    assert h.type == PdsType.CONTROL and h.ctl_type == ControlType.ACK_REQ and h.psn == p0
    assert h.spdcid == ipdc.lpdcid and h.dpdcid == tp.lpdcid
    pair.inject(pair.b, cp, A_ADDR)
    (ack2, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert psn_add(hdr(ack2).cack_psn, hdr(ack2).ack_psn_offset) == p0
    pair.inject(pair.a, ack2, B_ADDR)
    assert not ipdc.outstanding


def test_psn_wraparound() -> None:
    cfg = PdsConfig(start_psn=0xFFFFFFFB, close_idle_ns=None, target_idle_ns=None)
    pair = Pair(cfg, loss=0.1, seed=4)
    toks = submit(pair, 30, msg=False)
    assert pair.run_until(lambda: len(pair.a.acked()) == 30)
    assert sorted(e.token for e in pair.a.acked()) == toks
    psns = sorted({d.psn for d in pair.b.deliveries})
    assert psns == sorted([(0xFFFFFFFB + i) & 0xFFFFFFFF for i in range(30)])
    assert a_pdc(pair).tx_base == 25 and b_pdc(pair).rx_base == 25


def test_close_handshake_from_initiator_reclaims_everything() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair, 2)
    pair.a.core.close(pair.now)
    assert ipdc.state is InitiatorState.CLOSE_ACK_WAIT
    (cp, _d, _e), = pair.take(pair.a)  # fmt: skip
    h = hdr(cp)
    assert h.ctl_type == ControlType.CLOSE and h.flags & ReqFlag.AR and h.psn == START + 2
    with pytest.raises(PdsClosedError):
        submit(pair, 1)
    pair.inject(pair.b, cp, A_ADDR)
    assert tp.state is TargetState.CLOSING
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(ack).cack_psn == START + 2
    pair.inject(pair.a, ack, B_ADDR)
    assert state(ipdc) is InitiatorState.CLOSED and pair.a.core.idle()
    assert not pair.a.core.pdcs and not pair.a.core.usable and not pair.a.core.gates
    assert [c.error for c in pair.a.closed()] == [None] and [c.error for c in pair.b.closed()] == [None]
    # a retransmitted CLOSE is re-ACKed while the target lingers; newer PSNs get NACK CLOSING
    pair.inject(pair.b, cp, A_ADDR)
    assert hdr(pair.take(pair.b)[0][0]).type == PdsType.ACK_CC
    pair.run_idle()
    assert not pair.b.core.pdcs and not pair.b.core.target_by_peer
    assert pair.a.core.get_timer() is None and pair.b.core.get_timer() is None


def test_close_request_from_target() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    pair.b.core.request_close(tp.lpdcid, pair.now)
    assert tp.state is TargetState.CLOSE_WAIT
    (cp, _d, _e), = pair.take(pair.b)  # fmt: skip
    h = hdr(cp)
    assert h.ctl_type == ControlType.REQ_CLOSE and h.flags & ReqFlag.AR and h.psn == START
    pair.inject(pair.a, cp, B_ADDR)
    out = pair.take(pair.a)
    kinds = [(hdr(d).type, getattr(hdr(d), "ctl_type", None)) for d, _x, _y in out]
    assert kinds == [(PdsType.ACK, None), (PdsType.CONTROL, ControlType.CLOSE)]
    assert hdr(out[0][0]).cack_psn == START
    for d, _x, _y in out:
        pair.inject(pair.b, d, A_ADDR)
    assert tp.close_req is None and state(tp) is TargetState.CLOSING
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert not pair.a.core.pdcs
    pair.run_idle()
    assert not pair.b.core.pdcs and not pair.b.core.target_by_peer


def test_target_close_req_timeout_closes_in_error() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    pair.filter = lambda data, src, dst: [] if src == B_ADDR else [data]
    pair.b.core.request_close(tp.lpdcid, pair.now)
    pair.filter = lambda data, src, dst: []
    assert pair.run_until(lambda: bool(pair.b.closed()))
    (c,) = pair.b.closed()
    # the backed-off CLOSE_REQ resends have every packet's budget (count and retry_time_ns, uet.pds.
    # control), so close_req_ns (1 s) of silence ends first; either way the target closes in error
    assert c.error in ("CLOSE_REQ not acknowledged", "no CLOSE after CLOSE_REQ") and not pair.b.core.pdcs
    assert pair.b.core.counters["nack_tx_CLOSING_IN_ERR"] == 1
    n = pair.b.core.counters["ctl_tx_REQ_CLOSE"]
    assert 1 + CFG.max_rto_retx <= n <= 1 + CFG.max_rto_retx + CFG.close_req_ns // CFG.rto_max_ns


def test_idle_close_by_initiator_and_target() -> None:
    pair = Pair(PdsConfig(start_psn=START, close_idle_ns=1_000_000, target_idle_ns=None))
    establish(pair)
    assert pair.run_until(lambda: not pair.a.core.pdcs and not pair.b.core.pdcs)
    assert pair.a.core.counters["pdc_close_initiator"] == 1
    pair2 = Pair(PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=3_000_000))
    establish(pair2)
    assert pair2.run_until(lambda: not pair2.a.core.pdcs and not pair2.b.core.pdcs)
    assert pair2.b.core.counters["target_idle_close"] == 1


def test_guaranteed_response_kept_until_cleared() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    err = bytes([0x01, 0x05]) + b"\x00" * 10  # SES RESPONSE, rc NO_MATCH: guaranteed delivery
    pair.b.respond = lambda d: (4, err)
    toks = submit(pair, 1, tag="g")
    (req, _d, _e), = pair.take(pair.a)  # fmt: skip
    pair.inject(pair.b, req, A_ADDR)
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    h = hdr(ack)
    psn = hdr(req).psn
    assert h.flags & AckFlag.REQ_CLEAR and h.next_hdr == 4 and ack[32:] == err
    assert h.cack_psn == psn - 1 and tp.gtd == {psn: (4, err)}  # CACK held below the uncleared PSN
    # a duplicate before the clear gets the stored response again
    pair.inject(pair.b, req, A_ADDR)
    (dup, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert dup[32:] == err and pair.b.core.counters["duplicates"] == 1
    pair.inject(pair.a, ack, B_ADDR)
    (ev,) = [e for e in pair.a.acked() if e.token == toks[0]]
    assert ev.response_next_hdr == 4 and ev.response == err
    (clr, _d, _e), = pair.take(pair.a)  # fmt: skip
    hc = hdr(clr)
    assert hc.ctl_type == ControlType.CLEAR and hc.payload == psn and hc.psn == 0
    pair.inject(pair.b, clr, A_ADDR)
    assert tp.gtd == {} and tp.rx_base == psn + 1
    pair.inject(pair.a, dup, B_ADDR)  # duplicate ACK: no second Acked
    assert len([e for e in pair.a.acked() if e.token == toks[0]]) == 1


def test_clear_that_releases_a_held_cack_is_acked_at_once() -> None:
    """A guaranteed response holds CACK below its PSN while later packets keep arriving; the
    initiator's CLEAR CP (sent because the held CACK fills its window) releases them, and the
    target reports the new CACK at once instead of leaving the initiator to its RTO."""
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    err = bytes([0x01, 0x05]) + b"\x00" * 10  # SES RESPONSE, rc NO_MATCH: guaranteed delivery
    pair.b.respond = lambda d: (4, err) if d.payload[:1] == b"\x00" else None
    submit(pair, 3, tag="g", msg=False)
    reqs = pair.take(pair.a)
    psn = hdr(reqs[0][0]).psn
    for req, _d, _e in reqs:
        pair.inject(pair.b, req, A_ADDR)
    acks = pair.take(pair.b)
    assert all(hdr(a).cack_psn == psn - 1 for a, _d, _e in acks)  # held below the uncleared PSN
    assert tp.rcvd == {psn, psn + 1, psn + 2} and list(tp.gtd) == [psn]
    for a, _d, _e in acks:
        pair.inject(pair.a, a, B_ADDR)
    clr = [c for c, _d, _e in pair.take(pair.a) if hdr(c).type == PdsType.CONTROL]
    assert [hdr(c).ctl_type for c in clr] == [ControlType.CLEAR] and hdr(clr[0]).payload == psn
    pair.inject(pair.b, clr[0], A_ADDR)
    assert tp.gtd == {} and not tp.rcvd and tp.rx_base == psn + 3
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(ack).type == PdsType.ACK_CC and hdr(ack).cack_psn == psn + 2
    pair.inject(pair.a, ack, B_ADDR)
    assert ipdc.max_cack == psn + 2 and not ipdc.outstanding
    pair.inject(pair.b, clr[0], A_ADDR)  # a repeated CLEAR releases nothing: no ACK
    assert pair.take(pair.b) == []


def test_window_held_by_a_lost_cack_is_reopened_by_a_probe() -> None:
    """A guaranteed response holds CACK; the initiator sends up to the peer's window (CACK + MPR)
    and every packet is acknowledged one by one, so nothing is outstanding while two more wait.
    The ACK that reports the CACK released by the CLEAR is lost: no RTO would ever ask again, so
    after an RTO the initiator sends a PROBE, and the target's answer reopens the window."""
    cfg = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None, ack_per_pkt=True)
    pair = Pair(cfg)
    ipdc, tp, _ = establish(pair)
    err = bytes([0x01, 0x05]) + b"\x00" * 10  # SES RESPONSE, rc NO_MATCH: guaranteed delivery
    pair.b.respond = lambda d: (4, err) if d.psn == START + 1 else None
    toks = submit(pair, 130, tag="w", msg=False)
    reqs = pair.take(pair.a)
    assert len(reqs) == 128 and hdr(reqs[-1][0]).psn == START + 128  # CACK + MPR
    for req, _d, _e in reqs:
        pair.inject(pair.b, req, A_ADDR)
    acks = pair.take(pair.b)
    assert len(acks) == 128 and {hdr(a).cack_psn for a, _d, _e in acks} == {START}  # held
    for a, _d, _e in acks:
        pair.inject(pair.a, a, B_ADDR)
    assert not ipdc.outstanding and len(ipdc.pending) == 2 and ipdc.max_cack == START
    (clr, _d, _e), = pair.take(pair.a)  # fmt: skip
    assert hdr(clr).ctl_type == ControlType.CLEAR
    pair.inject(pair.b, clr, A_ADDR)
    (lost, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(lost).cack_psn == START + 128  # the release, reported... and lost on the way
    assert pair.a.core.get_timer() == pair.now + cfg.rto_ns
    pair.now += cfg.rto_ns
    pair.a.core.handle_timer(pair.now)
    (probe, _d, _e), = pair.take(pair.a)  # fmt: skip
    assert hdr(probe).ctl_type == ControlType.PROBE and pair.a.core.counters["window_probes"] == 1
    pair.inject(pair.b, probe, A_ADDR)
    (answer, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(answer).flags & AckFlag.P and hdr(answer).cack_psn == START + 128
    pair.inject(pair.a, answer, B_ADDR)
    assert ipdc.max_cack == START + 128
    rest = pair.take(pair.a)
    assert [hdr(r).psn for r, _d, _e in rest] == [START + 129, START + 130]
    assert pair.run_until(lambda: len([e for e in pair.a.acked() if e.token in toks]) == 130)


def test_clear_req_when_clear_lost() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    pair.b.respond = lambda d: (5, b"\x02\x01" + b"\x00" * 18 + b"readdata")
    submit(pair, 1, tag="r")
    pair.filter = lambda data, src, dst: [] if hdr(data).type == PdsType.CONTROL and src == A_ADDR else [data]
    assert pair.run_until(lambda: bool(pair.a.acked()) and len(pair.a.acked()) == 2)
    assert pair.a.acked()[1].response.endswith(b"readdata")
    pair.filter = None
    assert pair.run_until(lambda: not tp.gtd)
    assert pair.b.core.counters["ctl_tx_REQ_CLEAR"] >= 1 and pair.a.core.counters["ctl_tx_CLEAR"] >= 2


def test_probe_answered_with_p_flag() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    assert pair.a.core.send_probe(ipdc.lpdcid, 0xBEEF, pair.now)
    (cp, _d, _e), = pair.take(pair.a)  # fmt: skip
    assert hdr(cp).ctl_type == ControlType.PROBE and hdr(cp).probe_opaque == 0xBEEF
    pair.now += 5000
    pair.inject(pair.b, cp, A_ADDR)
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    h = hdr(ack)
    assert h.flags & AckFlag.P and h.probe_opaque == 0xBEEF and h.cack_psn == START
    pair.now += 5000
    pair.inject(pair.a, ack, B_ADDR)
    (ev,) = [e for e in pair.a.events if isinstance(e, ProbeAnswered)]
    assert ev.opaque == 0xBEEF and ev.rtt_ns == 10000 and ev.cack_psn == START


def test_plain_ack_format() -> None:
    pair = Pair(PdsConfig(start_psn=START, ack_format="ack", close_idle_ns=None, target_idle_ns=None))
    submit(pair, 1)
    (req, _d, _e), = pair.take(pair.a)  # fmt: skip
    pair.inject(pair.b, req, A_ADDR)
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(ack).type == PdsType.ACK and len(ack) == 12 and hdr(ack).cack_psn == START
    pair.inject(pair.a, ack, B_ADDR)
    assert isinstance(pair.a.events[-1], Acked)


def test_limits_and_misuse_raise() -> None:
    pair = Pair(PdsConfig(max_pdcs=1, max_queued=2))
    submit(pair, 1)
    with pytest.raises(PdsLimitError):
        pair.a.core.submit("10.9.9.9", Mode.RUD, SES_NH, ses_small(), b"", token=0, som=True, eom=True, now=0)
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"", token=1, som=True, eom=True, now=0)
    with pytest.raises(PdsLimitError):
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"", token=2, som=True, eom=True, now=0)
    with pytest.raises(PdsError):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), b"", token=3, som=False, eom=True, now=0)
    with pytest.raises(PdsError):
        pair.a.core.submit(B_ADDR, Mode.UUD, SES_NH, ses_small(), b"", token=4, som=True, eom=False, now=0)


def test_messages_do_not_interleave_and_quiesce_moves_queued_messages() -> None:
    pair = Pair(CFG)
    core = pair.a.core

    def sub(tok: str, som: bool, eom: bool, msg: object = None) -> None:
        core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), tok.encode(), token=tok, som=som, eom=eom, now=pair.now,
                    msg_id=msg)  # fmt: skip

    sub("a0", True, False, "a")
    sub("b0", True, True)  # a single-packet message waits behind the open one
    sub("c0", True, False, "c")  # so does a multi-packet one (named by msg_id)
    sub("c1", False, False, "c")
    out = pair.take(pair.a)
    assert [d[12 + 20 :] for d, _x, _y in out] == [b"a0"]
    pair.inject(pair.b, out[0][0], A_ADDR)
    sub("a1", False, True, "a")
    sub("c2", False, True, "c")
    assert pair.run_until(lambda: len(pair.a.acked()) == 6)
    assert [d.payload for d in pair.b.deliveries] == [b"a0", b"a1", b"b0", b"c0", b"c1", b"c2"]
    ipdc = a_pdc(pair)
    # quiesce: the open message finishes on the closing PDC, the waiting one moves to a new PDC
    sub("x0", True, False, "x")
    assert pair.run_until(lambda: len(pair.a.acked()) == 7)
    sub("y0", True, True)
    core.request_close(ipdc.lpdcid, pair.now)
    assert ipdc.state is InitiatorState.QUIESCE
    assert pair.run_until(lambda: len(pair.a.acked()) == 8)
    sub("x1", False, True, "x")
    assert pair.run_until(lambda: len(pair.a.acked()) == 9 and ipdc.lpdcid not in core.pdcs)
    by_pdc: dict[int, list[bytes]] = {}
    for d in pair.b.deliveries:
        by_pdc.setdefault(d.pdc, []).append(d.payload)
    assert sorted(by_pdc.values()) == [[b"a0", b"a1", b"b0", b"c0", b"c1", b"c2", b"x0", b"x1"], [b"y0"]]
    assert [c.error for c in pair.a.closed()] == [None]


def test_event_log_records() -> None:
    pair = Pair(CFG, log=True, loss=0.3, seed=2)
    submit(pair, 5, msg=False)
    pair.run_until(lambda: len(pair.a.acked()) == 5)
    evs = {r["ev"] for r in pair.records}
    assert {"tx", "rx", "ack", "pdc_open"} <= evs
    assert all(isinstance(r["t"], int) for r in pair.records)


def test_failed_pdc_fails_rest_of_active_message() -> None:
    pair = Pair(CFG)
    core = pair.a.core
    core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x", token="x0", som=True, eom=False, now=0)
    pair.filter = lambda data, src, dst: []
    assert pair.run_until(lambda: bool(pair.a.failed()))
    core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x", token="x1", som=False, eom=True, now=pair.now)
    pair.a.drain_events()
    assert [e.token for e in pair.a.failed()] == ["x0", "x1"]
    assert isinstance(pair.a.events[-1], Failed) and any(isinstance(e, PdcClosed) for e in pair.a.events)


def test_control_for_unknown_pdc_nacked() -> None:
    pair = Pair(CFG)
    pair.inject(pair.b, control(ControlType.ACK_REQ, 5, 77, 999), A_ADDR)
    (n, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(n).type == PdsType.NACK and hdr(n).nack_code == 0x0E and hdr(n).spdcid == 0 and hdr(n).dpdcid == 77


def test_bidirectional_traffic_both_roles_in_one_core() -> None:
    pair = Pair(PdsConfig(close_idle_ns=None, target_idle_ns=None), loss=0.1, seed=8)
    for i in range(20):
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"ab", token=i, som=True, eom=True, now=0)
        pair.b.core.submit(A_ADDR, Mode.RUD, SES_NH, ses_small(), b"ba", token=i, som=True, eom=True, now=0)
    assert pair.run_until(lambda: len(pair.a.acked()) == 20 and len(pair.b.acked()) == 20)
    assert len(pair.a.deliveries) == 20 and len(pair.b.deliveries) == 20
    assert {p.role for p in pair.a.core.pdcs.values()} == {"initiator", "target"}
    pair.a.core.close(pair.now)
    pair.b.core.close(pair.now)
    assert pair.run_until(lambda: pair.a.core.idle() and pair.b.core.idle())
    pair.run_idle()
    assert not pair.a.core.pdcs and not pair.b.core.pdcs


def test_close_while_sending_delivers_everything_first() -> None:
    pair = Pair(CFG, loss=0.15, seed=5)
    toks = submit(pair, 40, size=300)
    pair.a.core.close(pair.now)
    assert pair.run_until(lambda: pair.a.core.idle() and not pair.a.core.pdcs)
    assert sorted(e.token for e in pair.a.acked()) == toks and not pair.a.failed()
    assert [c.error for c in pair.a.closed()] == [None]
    assert len({d.psn for d in pair.b.deliveries}) == 40


def test_syn_refused_while_closing_and_lingering_pdcid_reused() -> None:
    pair = Pair(CFG)
    ipdc, tp, _ = establish(pair)
    pair.a.core.close(pair.now)
    pair.run_until(lambda: not pair.a.core.pdcs)
    assert tp.state is TargetState.CLOSING
    # the same initiator PDCID with a new Start_PSN replaces the lingering PDC
    pair.inject(pair.b, request(START + 500, ipdc.lpdcid, syn_offset=0), A_ADDR)
    (new,) = [p for p in pair.b.core.pdcs.values()]
    assert new is not tp and new.state is TargetState.ESTABLISHED and new.start_psn == START + 500
    pair.take(pair.b)
    pair.b.core.close(pair.now)
    pair.inject(pair.b, request(9, 4321, syn_offset=0), A_ADDR)
    (n, _d, _e), = pair.take(pair.b)[-1:]  # fmt: skip
    assert hdr(n).type == PdsType.NACK and hdr(n).nack_code == 0x04
