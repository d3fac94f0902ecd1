"""Every NACK the target generates (exact packets) and the initiator's reaction (spec/behaviour.md
§2.6, §2.10, §2.11; wire-format.md §7.1 NACK_ACTION)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pds_harness import (
    A_ADDR,
    B_ADDR,
    SES_NH,
    Pair,
    control,
    hdr,
    nack,
    only_initiator,
    only_target,
    request,
    ses_small,
    state,
)

from uet.pds import Failed, InitiatorState, Mode, NackReceived, PdsConfig, SesNack, TargetState
from uet.pds.startpsn import PeerStartPsn
from uet.wire.pds import ControlType, NackCode, NackFlag, NextHeader, PdsType, ReqFlag

START = 0x40000000
CFG = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None)


def setup(mode: Mode = Mode.RUD, cfg: PdsConfig = CFG) -> tuple:
    pair = Pair(cfg)
    pair.a.core.submit(B_ADDR, mode, SES_NH, ses_small(), b"first", token="first", som=True, eom=True, now=0)
    assert pair.run_until(lambda: len(pair.a.acked()) == 1)
    ip = only_initiator(pair.a.core)
    tp = only_target(pair.b.core)
    return pair, ip, tp


def one_nack(pair: Pair, code: NackCode) -> Any:
    out = pair.take(pair.b)
    assert len(out) == 1, out
    data, dst, _e = out[0]
    h = hdr(data)
    assert dst == A_ADDR and h.type == PdsType.NACK and h.nack_code == code and len(data) == 16
    return h


def pending_packet(pair: Pair, tok: str = "p") -> bytes:
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"pp", token=tok, som=True, eom=True, now=pair.now)
    (data, _d, _e), = pair.take(pair.a)  # fmt: skip
    return data


# -- generation ------------------------------------------------------------------------------------


def test_psn_oor_window() -> None:
    pair, ip, tp = setup()
    psn = START + 1 + CFG.mp_range
    pair.inject(pair.b, request(psn, ip.lpdcid, tp.lpdcid), A_ADDR)
    h = one_nack(pair, NackCode.PSN_OOR_WINDOW)
    assert h.nack_psn == psn and h.spdcid == tp.lpdcid and h.dpdcid == ip.lpdcid
    assert not pair.b.deliveries[1:]


def test_rod_ooo() -> None:
    pair, ip, tp = setup(Mode.ROD, replace(CFG, rod_buffer=False))  # go-back-N: discard + NACK
    pair.inject(pair.b, request(START + 2, ip.lpdcid, tp.lpdcid, t=3), A_ADDR)
    h = one_nack(pair, NackCode.ROD_OOO)
    assert h.nack_psn == START + 2 and h.payload == START + 1  # the expected PSN
    assert len(pair.b.deliveries) == 1


def test_no_pdc_avail_when_max_pdcs_reached() -> None:
    pair, ip, tp = setup(cfg=PdsConfig(start_psn=START, max_pdcs=1, close_idle_ns=None, target_idle_ns=None))
    pair.inject(pair.b, request(99, 555, syn_offset=0), A_ADDR)
    h = one_nack(pair, NackCode.NO_PDC_AVAIL)
    assert h.spdcid == 0 and h.dpdcid == 555 and h.nack_psn == 99


def test_inv_dpdcid() -> None:
    pair, ip, tp = setup()
    pair.inject(pair.b, request(START + 1, ip.lpdcid, tp.lpdcid ^ 0x8000), A_ADDR)
    h = one_nack(pair, NackCode.INV_DPDCID)
    assert h.spdcid == 0 and h.dpdcid == ip.lpdcid


def test_pdc_hdr_mismatch() -> None:
    pair, ip, tp = setup()
    pair.inject(pair.b, request(START + 1, ip.lpdcid ^ 1, tp.lpdcid), A_ADDR)  # wrong SPDCID
    assert one_nack(pair, NackCode.PDC_HDR_MISMATCH).spdcid == tp.lpdcid
    pair.inject(pair.b, request(7, 4242, syn_offset=0, nh=4), A_ADDR)  # SYN carrying a response header
    assert one_nack(pair, NackCode.PDC_HDR_MISMATCH).spdcid == 0
    pair.inject(pair.b, request(START + 1, ip.lpdcid, tp.lpdcid), "10.0.0.99")  # wrong source FA
    assert hdr(pair.take(pair.b)[0][0]).nack_code == NackCode.PDC_HDR_MISMATCH


def test_pdc_mode_mismatch() -> None:
    pair, ip, tp = setup()
    pair.inject(pair.b, request(START + 1, ip.lpdcid, tp.lpdcid, t=3), A_ADDR)  # ROD on a RUD PDC
    assert one_nack(pair, NackCode.PDC_MODE_MISMATCH).nack_psn == START + 1


def test_closing() -> None:
    pair, ip, tp = setup()
    pair.a.core.request_close(ip.lpdcid, pair.now)
    (cp, _d, _e), = pair.take(pair.a)  # fmt: skip
    pair.inject(pair.b, cp, A_ADDR)
    pair.take(pair.b)
    assert tp.state is TargetState.CLOSING
    pair.inject(pair.b, request(START + 2, ip.lpdcid, tp.lpdcid), A_ADDR)
    assert one_nack(pair, NackCode.CLOSING).nack_psn == START + 2


def test_invalid_syn() -> None:
    pair, ip, tp = setup()
    pair.inject(pair.b, request(START + 7, ip.lpdcid, syn_offset=3), A_ADDR)  # different Start_PSN
    assert one_nack(pair, NackCode.INVALID_SYN).nack_psn == START + 7
    far = START + 1 + 4 * CFG.mp_range
    pair.inject(pair.b, request(far, ip.lpdcid, syn_offset=far - START), A_ADDR)  # same start, out of window
    assert one_nack(pair, NackCode.INVALID_SYN).nack_psn == far


def test_pkt_not_rcvd_and_ack_req_answers() -> None:
    pair, ip, tp = setup()
    pair.inject(pair.b, control(ControlType.ACK_REQ, START + 1, ip.lpdcid, tp.lpdcid), A_ADDR)
    assert one_nack(pair, NackCode.PKT_NOT_RCVD).nack_psn == START + 1
    pair.inject(pair.b, control(ControlType.ACK_REQ, START, ip.lpdcid, tp.lpdcid), A_ADDR)
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(ack).type == PdsType.ACK_CC and hdr(ack).cack_psn == START


def test_unexp_event_for_unsupported_cp() -> None:
    pair, ip, tp = setup()
    for ctl in (ControlType.CREDIT_REQ, ControlType.NEGOTIATION, ControlType.REQ_CLOSE, 12):
        pair.inject(pair.b, control(ctl, 0, ip.lpdcid, tp.lpdcid), A_ADDR)
        one_nack(pair, NackCode.UNEXP_EVENT)


def test_trimmed_and_lasthop() -> None:
    pair, ip, tp = setup()
    data = request(START + 1, ip.lpdcid, tp.lpdcid)
    pair.inject(pair.b, data[:20], A_ADDR, trimmed=True, ecn=3)
    h = one_nack(pair, NackCode.TRIMMED)
    assert h.flags & NackFlag.M and h.nack_psn == START + 1
    pair.inject(pair.b, data[:20], A_ADDR, trimmed=True, last_hop=True)
    assert not one_nack(pair, NackCode.TRIMMED_LASTHOP).flags & NackFlag.M
    assert len(pair.b.deliveries) == 1  # never delivered, PSN not marked
    pair.inject(pair.b, data, A_ADDR)
    assert len(pair.b.deliveries) == 2
    pair.take(pair.b)
    pair.inject(pair.b, data[:20], A_ADDR, trimmed=True)  # duplicate of a received PSN: ACK
    assert hdr(pair.take(pair.b)[0][0]).type == PdsType.ACK_CC


def test_new_start_psn_via_policy_hook() -> None:
    pair = Pair(CFG)
    demanded = 0x7000_0000
    pair.b.core.start_psn_policy = PeerStartPsn(lambda peer, start: demanded)
    for i in range(2):
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), bytes([i]), token=i, som=i == 0, eom=i == 1, now=0)
    out = pair.take(pair.a)
    pair.inject(pair.b, out[0][0], A_ADDR)
    h = one_nack(pair, NackCode.NEW_START_PSN)
    tp = only_target(pair.b.core)
    assert h.payload == demanded and tp.state is TargetState.PENDING and not pair.b.deliveries
    pair.inject(pair.b, out[1][0], A_ADDR)  # the second SYN still offers the old start: re-NACK
    assert one_nack(pair, NackCode.NEW_START_PSN).payload == demanded
    # initiator reaction: shift PSNs by the same delta, re-stamp and resend all, stay SYN_SENT
    ip = only_initiator(pair.a.core)
    pair.inject(pair.a, nack(NackCode.NEW_START_PSN, START, tp.lpdcid, ip.lpdcid, payload=demanded), B_ADDR)
    assert ip.state is InitiatorState.SYN_SENT and ip.start_psn == demanded
    re = pair.take(pair.a)
    hs = [hdr(d) for d, _x, _y in re]
    assert [(x.psn, x.psn_offset) for x in hs] == [(demanded, 0), (demanded + 1, 1)]
    assert all(x.flags & ReqFlag.SYN and x.flags & ReqFlag.RETX for x in hs)
    for d, _x, _y in re:
        pair.inject(pair.b, d, A_ADDR)
    assert state(tp) is TargetState.ESTABLISHED and [d.psn for d in pair.b.deliveries] == [demanded, demanded + 1]
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert state(ip) is InitiatorState.ESTABLISHED and len(pair.a.acked()) == 2


def test_pending_pdc_freed_after_new_pdc_time() -> None:
    pair = Pair(CFG)
    pair.b.core.start_psn_policy = PeerStartPsn(lambda peer, start: 5)
    pair.inject(pair.b, request(100, 321, syn_offset=0), A_ADDR)
    one_nack(pair, NackCode.NEW_START_PSN)
    assert pair.b.core.get_timer() == CFG.new_pdc_ns
    pair.now = CFG.new_pdc_ns
    pair.b.core.handle_timer(pair.now)
    assert not pair.b.core.pdcs and not pair.b.core.target_by_peer and not pair.b.closed()


def test_no_ses_msg_avail_then_retransmission_accepted() -> None:
    pair, ip, tp = setup()
    calls = []

    def respond(d):
        calls.append(d.psn)
        if len(calls) == 1:
            raise SesNack("no buffer")

    pair.b.respond = respond
    data = pending_packet(pair)
    pair.inject(pair.b, data, A_ADDR)
    assert one_nack(pair, NackCode.NO_SES_MSG_AVAIL).nack_psn == START + 1
    assert START + 1 not in tp.rcvd
    assert pair.run_until(lambda: len(pair.a.acked()) == 2)
    assert calls == [START + 1, START + 1]


# -- initiator reactions ---------------------------------------------------------------------------


def test_retransmit_class_nacks_resend_at_once() -> None:
    for code in (NackCode.TRIMMED, NackCode.TRIMMED_LASTHOP, NackCode.TRIMMED_ACK, NackCode.PSN_OOR_WINDOW,
                 NackCode.PKT_NOT_RCVD, NackCode.ACK_WITH_DATA, NackCode.RCVR_INFER_LOSS, NackCode.EXP_NACK_NORMAL,
                 NackCode.EXP_NACK_ERR):  # fmt: skip
        pair, ip, tp = setup()
        data = pending_packet(pair)
        pair.inject(pair.a, nack(code, START + 1, tp.lpdcid, ip.lpdcid), B_ADDR)
        (re, _d, _e), = pair.take(pair.a)  # fmt: skip
        h = hdr(re)
        assert h.psn == START + 1 and h.flags & ReqFlag.RETX and h.flags & ReqFlag.AR, code
        assert re[12:] == data[12:]
        assert any(isinstance(e, NackReceived) and e.code == code for e in pair.a.events)


SHORTAGE = (NackCode.NO_PKT_BUFFER, NackCode.NO_GTD_DEL_AVAIL, NackCode.NO_SES_MSG_AVAIL, NackCode.NO_RESOURCE)


def test_resource_shortage_nacks_resend_after_a_doubling_delay() -> None:
    """NO_PKT_BUFFER .. NO_RESOURCE: no resend at once; a resend after NACK_Retx_Time (= RTO),
    doubled per NACK, not counted as an RTO, until Max_NACK_Retx_Cnt is spent (§2.10, §2.6 step 7)."""
    rto = CFG.rto_ns
    for code in SHORTAGE:
        pair, ip, tp = setup()
        data = pending_packet(pair)
        for k in range(CFG.max_nack_retx):
            t0 = pair.now
            pair.inject(pair.a, nack(code, START + 1, tp.lpdcid, ip.lpdcid), B_ADDR)
            pair.inject(pair.a, nack(code, START + 1, tp.lpdcid, ip.lpdcid), B_ADDR)  # older copy's: ignored
            assert pair.take(pair.a) == [], code
            due = t0 + (rto << k)
            assert pair.a.core.get_timer() == due
            pair.now = due - 1
            pair.a.core.handle_timer(pair.now)
            assert pair.take(pair.a) == []
            pair.now = due
            pair.a.core.handle_timer(pair.now)
            (re, _d, _e), = pair.take(pair.a)  # fmt: skip
            h = hdr(re)
            assert h.psn == START + 1 and h.flags & ReqFlag.RETX and re[12:] == data[12:]
        c = pair.a.core.counters
        assert c["nack_resends"] == CFG.max_nack_retx and c.get("rto", 0) == 0 and not pair.a.failed()
        assert c["nack_while_parked"] == CFG.max_nack_retx
        pair.inject(pair.a, nack(code, START + 1, tp.lpdcid, ip.lpdcid), B_ADDR)
        (f,) = pair.a.failed()
        assert f.reason == "nack retry exhausted" and f.nack_code == code


def test_parked_packet_delivers_and_does_not_hold_up_other_rtos() -> None:
    """While one packet waits out a shortage (a long delay), a later packet that is lost still
    gets its RTO on time, and the parked one is delivered and acknowledged after its delay."""
    cfg = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None, nack_retx_ns=10 * CFG.rto_ns)
    pair, ip, tp = setup(cfg=cfg)
    pending_packet(pair, "parked")
    pair.inject(pair.a, nack(NackCode.NO_SES_MSG_AVAIL, START + 1, tp.lpdcid, ip.lpdcid), B_ADDR)
    t0 = pair.now
    pending_packet(pair, "lost")  # sent, never arrives
    assert pair.a.core.get_timer() == t0 + cfg.rto_ns
    pair.now = t0 + cfg.rto_ns
    pair.a.core.handle_timer(pair.now)
    ((re, _d, _e),) = pair.take(pair.a)
    assert hdr(re).psn == START + 2 and hdr(re).flags & ReqFlag.RETX
    assert pair.a.core.counters["rto"] == 1
    assert START + 1 in ip.outstanding and ip.parked
    assert pair.run_until(lambda: len(pair.a.acked()) == 3)
    assert pair.now >= t0 + cfg.nack_retx_ns and not pair.a.failed()
    assert {a.token for a in pair.a.acked()} == {"first", "parked", "lost"}


def test_no_pdc_avail_retries_after_rto() -> None:
    """NO_PDC_AVAIL, NO_CCC_AVAIL and NO_BITMAP (no PDC was created, spdcid 0): the SYN is sent
    again after NACK_Retx_Time, still as a SYN (§2.10)."""
    for code in (NackCode.NO_PDC_AVAIL, NackCode.NO_CCC_AVAIL, NackCode.NO_BITMAP):
        _no_pdc_retry(code)


def _no_pdc_retry(code: NackCode) -> None:
    pair = Pair(CFG)
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x", token="x", som=True, eom=True, now=0)
    pair.take(pair.a)
    ip = only_initiator(pair.a.core)
    pair.now = 1000
    pair.inject(pair.a, nack(code, START, 0, ip.lpdcid), B_ADDR)
    assert pair.take(pair.a) == []
    assert pair.a.core.get_timer() == 1000 + CFG.rto_ns
    pair.now = 1000 + CFG.rto_ns
    pair.a.core.handle_timer(pair.now)
    assert hdr(pair.take(pair.a)[0][0]).flags & ReqFlag.SYN


def test_fatal_nacks_close_pdc_and_fail_outstanding() -> None:
    fatal = (NackCode.INV_DPDCID, NackCode.PDC_HDR_MISMATCH, NackCode.CLOSING, NackCode.CLOSING_IN_ERR,
             NackCode.GTD_DEL_RESP_UNAVAIL, NackCode.INVALID_SYN, NackCode.PDC_MODE_MISMATCH,
             NackCode.UNEXP_EVENT, NackCode.EXP_NACK_FATAL)  # fmt: skip
    retry = {NackCode.INV_DPDCID, NackCode.PDC_HDR_MISMATCH, NackCode.CLOSING, NackCode.INVALID_SYN,
             NackCode.PDC_MODE_MISMATCH, NackCode.UNEXP_EVENT}  # fmt: skip
    for code in fatal:
        pair, ip, tp = setup()
        pending_packet(pair, "doomed")
        pair.inject(pair.a, nack(code, START + 1, 0, ip.lpdcid), B_ADDR)
        assert pair.a.closed()[-1].error == f"nack {code.name}" and ip.state is InitiatorState.CLOSED
        if code in retry:
            # "close PDC; retry on a new PDC" (§2.10, uet.pds.closing): the message is resent
            assert not pair.a.failed() and ip.lpdcid not in pair.a.core.pdcs
            assert pair.run_until(lambda pair=pair: bool(pair.a.acked()) and pair.a.acked()[-1].token == "doomed")
        else:
            (f,) = pair.a.failed()
            assert f.token == "doomed" and f.nack_code == code
            assert not pair.a.core.pdcs
        # the next message opens a new PDC and completes
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"n", token="next", som=True, eom=True, now=pair.now)
        assert pair.run_until(lambda pair=pair: pair.a.acked()[-1].token == "next")


def test_ignored_nacks() -> None:
    pair, ip, tp = setup()
    pending_packet(pair)
    for code in (NackCode.RCVD_SES_PROCG, 0x1B):
        pair.inject(pair.a, nack(code, START + 1, tp.lpdcid, ip.lpdcid), B_ADDR)
    pair.inject(pair.a, nack(NackCode.TRIMMED, START + 50, tp.lpdcid, ip.lpdcid), B_ADDR)  # not outstanding
    pair.inject(pair.a, nack(NackCode.TRIMMED, START + 1, tp.lpdcid, 999), B_ADDR)  # unknown PDC
    assert pair.take(pair.a) == [] and START + 1 in ip.outstanding and not pair.a.failed()
    assert pair.a.core.counters["nack_stale"] == 1 and pair.a.core.counters["drop_nack_unknown_pdc"] == 1


def test_nack_retry_exhaustion() -> None:
    pair, ip, tp = setup()
    pending_packet(pair)
    for _ in range(CFG.max_nack_retx + 1):
        pair.inject(pair.a, nack(NackCode.TRIMMED, START + 1, tp.lpdcid, ip.lpdcid), B_ADDR)
        pair.take(pair.a)  # each NACK answers the copy resent after the last (uet.pds.trimwait)
    (f,) = pair.a.failed()
    assert f.reason == "nack retry exhausted" and f.nack_code == NackCode.TRIMMED
    assert pair.a.core.counters["retransmits"] == CFG.max_nack_retx and not pair.a.core.pdcs


def test_rod_go_back_n_reaction() -> None:
    pair, ip, tp = setup(Mode.ROD)
    for i in range(4):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), bytes([i]), token=i, som=True, eom=True, now=0)
    first = pair.take(pair.a)
    assert [hdr(d).psn for d, _x, _y in first] == [START + 1 + i for i in range(4)]
    n = nack(NackCode.ROD_OOO, START + 3, tp.lpdcid, ip.lpdcid, payload=START + 2)
    pair.inject(pair.a, n, B_ADDR)
    re = pair.take(pair.a)
    assert [hdr(d).psn for d, _x, _y in re] == [START + 2, START + 3, START + 4]
    assert all(hdr(d).flags & ReqFlag.RETX for d, _x, _y in re)
    pair.inject(pair.a, nack(NackCode.ROD_OOO, START + 4, tp.lpdcid, ip.lpdcid, payload=START + 2), B_ADDR)
    assert pair.take(pair.a) == []  # stale: same restart point
    assert pair.a.core.counters["go_back_n"] == 1 and pair.a.core.counters["nack_gbn_stale"] == 1


def test_rod_go_back_n_resends_only_the_halved_window_at_once() -> None:
    """A go-back halves the ROD window (8 -> 4) and resends only the 4 packets from the restart
    point that fit in it; the other discarded packets follow one by one as ACKs open the window,
    each resent exactly once, delivered in order (§2.13). Resending the whole old flight at once
    let one reordered copy among it discard the rest again."""
    cfg = PdsConfig(start_psn=START, max_outstanding=8, close_idle_ns=None, target_idle_ns=None)
    pair, ip, tp = setup(Mode.ROD, cfg)
    for i in range(8):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), bytes([i]), token=i, som=True, eom=True, now=0)
    first = pair.take(pair.a)  # all 8 lost
    assert [hdr(d).psn for d, _x, _y in first] == [START + 1 + i for i in range(8)]
    pair.inject(pair.a, nack(NackCode.ROD_OOO, START + 3, tp.lpdcid, ip.lpdcid, payload=START + 1), B_ADDR)
    re = pair.take(pair.a)
    assert [hdr(d).psn for d, _x, _y in re] == [START + 1 + i for i in range(4)]
    assert all(hdr(d).flags & ReqFlag.RETX for d, _x, _y in re)
    for d, _x, _y in re:
        pair.inject(pair.b, d, A_ADDR)
    assert pair.run_until(lambda: len(pair.a.acked()) == 9)
    assert [d.payload for d in pair.b.deliveries[1:]] == [bytes([i]) for i in range(8)]
    c = pair.a.core.counters
    assert c["retransmits"] == 8 and c["go_back_n"] == 1 and not pair.a.failed()


def test_rudi_nack_reaction() -> None:
    pair = Pair(CFG)
    pair.a.core.submit(B_ADDR, Mode.RUDI, SES_NH, ses_small(), b"i", token="i", som=True, eom=True, now=0)
    (req, _d, _e), = pair.take(pair.a)  # fmt: skip
    pid = hdr(req).pkt_id
    pair.inject(pair.a, nack(NackCode.TRIMMED, pid, 0, 0, flags=int(NackFlag.NT)), B_ADDR)
    (re, _d, _e), = pair.take(pair.a)  # fmt: skip
    assert hdr(re).pkt_id == pid and hdr(re).flags & 0x10
    pair.inject(pair.a, nack(NackCode.UNEXP_EVENT, pid, 0, 0, flags=int(NackFlag.NT)), B_ADDR)
    assert [type(e) for e in pair.a.events][-1] is Failed


def test_rudi_shortage_nack_parks_with_doubling_delay() -> None:
    """A RUDI request NACKed NO_SES_MSG_AVAIL is resent after NACK_Retx_Time (= RTO), then after
    twice that; a NACK of an earlier copy while it waits does not count; no RTO is spent."""
    pair = Pair(CFG)
    pair.a.core.submit(B_ADDR, Mode.RUDI, SES_NH, ses_small(), b"i", token="i", som=True, eom=True, now=0)
    (req, _d, _e), = pair.take(pair.a)  # fmt: skip
    pid = hdr(req).pkt_id
    short = nack(NackCode.NO_SES_MSG_AVAIL, pid, 0, 0, flags=int(NackFlag.NT))
    for k in range(2):
        t0 = pair.now
        pair.inject(pair.a, short, B_ADDR)
        pair.inject(pair.a, short, B_ADDR)  # a NACK of an older copy: ignored while parked
        assert pair.take(pair.a) == [] and pair.a.core.get_timer() == t0 + (CFG.rto_ns << k)
        pair.now = t0 + (CFG.rto_ns << k)
        pair.a.core.handle_timer(pair.now)
        (re, _d, _e), = pair.take(pair.a)  # fmt: skip
        assert hdr(re).pkt_id == pid and hdr(re).flags & 0x10
    c = pair.a.core.counters
    assert c["nack_parked"] == 2 and c["nack_while_parked"] == 2 and c["nack_resends"] == 2 and not c.get("rto")
    assert not pair.a.failed()


def test_reassembly_shortage_is_waited_out_end_to_end() -> None:
    """B reassembles one message at a time (``max_partial=1``). A's first message loses a packet,
    so it stays incomplete until that packet's RTO; meanwhile every packet of the second message
    draws NO_SES_MSG_AVAIL. With resends at once (the reference) the second message spends its
    Max_NACK_Retx_Cnt within a few RTTs and fails; with the doubling NACK_Retx_Time it is resent
    after the first completes, and both messages arrive intact (§2.6 step 7, §2.10)."""
    from uet.ses.message import MessageConfig
    from uet.ses.reassembly import Reassembler
    from uet.ses.segmenter import Segmenter

    pair = Pair(CFG)
    r = Reassembler(job_id=1, pid_on_fep=3, config=MessageConfig(payload_size=100, max_partial=1))

    def respond(d):
        r.now = pair.now
        return r.deliver(d.peer, d.mode, d.next_hdr, d.ses, d.payload)

    pair.b.respond = respond
    dropped: list[int] = []

    def drop_one(data: bytes, src: str, dst: str) -> list[bytes]:
        h = hdr(data)
        if src == A_ADDR and h.type == PdsType.RUD_REQ and h.psn == START + 1 and not dropped:
            dropped.append(h.psn)
            return []
        return [data]

    pair.filter = drop_one
    seg = Segmenter(job_id=1, payload_size=100)
    msgs = [bytes([i]) * 350 for i in (1, 2)]
    for mid, m in enumerate(msgs):
        pkts = list(seg.packets(m, mid, pid_on_fep=3))
        for i, (ses, pl, som, eom) in enumerate(pkts):
            pair.a.core.submit(B_ADDR, Mode.RUD, NextHeader.STANDARD, ses, pl, token=(mid, i), som=som, eom=eom, now=0)
    assert pair.run_until(lambda: len(pair.a.acked()) == 8 or bool(pair.a.failed()))
    assert dropped and not pair.a.failed()
    assert sorted(bytes(m.data) for m in r.completed) == msgs
    c = pair.a.core.counters
    assert c["nack_rx_NO_SES_MSG_AVAIL"] >= 1 and c["nack_parked"] >= 1 and c["nack_resends"] >= 1
