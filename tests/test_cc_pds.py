"""The CC seam wired through the PDS (spec/behaviour.md §4.1, §4.2, §4.5; wire-format.md §5.2,
§5.4, §5.8), shown with the in-memory pair harness and exact packets: the target fills the
ACK_CC state and the initiator's CCC uses it, the pacing deadline reaches ``get_timer``, RCCC's
credit control packets flow, trims and SACK losses are their own signals, and every packet an
ACK covers feeds the path selector."""

from __future__ import annotations

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, control, hdr, request, ses_small

from uet.cc import Ccc, CcConfig, CreditScheduler, CreditSender, Nscc
from uet.cc.entropy import Reps
from uet.pds import Mode, PdsConfig, PdsCore
from uet.pds.pdc import InitiatorPdc
from uet.wire import pds as w


def nscc_of(g: Ccc) -> Nscc:
    n = g.get(Nscc)
    assert n is not None
    return n


def credit_of(g: Ccc) -> CreditSender:
    c = g.get(CreditSender)
    assert c is not None
    return c


NSCC_ACK = w.ACK_CC[(False, "nscc")]


def submit(core: PdsCore, n: int, size: int, now: int, peer: str = B_ADDR, mode: Mode = Mode.RUD) -> None:
    for i in range(n):
        core.submit(peer, mode, SES_NH, ses_small(size), b"x" * size, token=i, som=True, eom=True, now=now)


def gate_of(core: PdsCore, peer: str = B_ADDR) -> Ccc:
    g = core.gates[(peer, 0)][0]
    assert isinstance(g, Ccc)
    return g


def test_config_names_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown cc"):
        PdsConfig(cc="cubic")
    with pytest.raises(ValueError, match="unknown lb"):
        PdsConfig(lb="ecmp")
    core = PdsCore(A_ADDR, PdsConfig())
    assert core.credit_scheduler is None  # the default keeps the fixed window


def test_target_fills_the_ack_cc_state() -> None:
    p = Pair(PdsConfig(start_psn=1000))
    b = p.b
    req = request(1000, 5, syn_offset=0, flags=0x08)  # SYN + AR: ACKed at once
    p.inject(b, req, A_ADDR)
    (ack,) = p.take(b)
    h = hdr(ack[0])
    assert h.type == w.PdsType.ACK_CC and h.cc_type == 0
    # nominal size = UDP length + 40 = PDS bytes + 48, reported in 256-byte units rounded up
    assert h.rcvd_bytes == (len(req) + 48 + 255) >> 8
    assert (h.service_time, h.ooo_count, h.rcv_cwnd_pend, h.rc) == (0, 0, 0, 0)
    lp = h.spdcid
    # a hole: PSN 1002 arrives before 1001 → one out-of-order PSN held
    p.inject(b, request(1002, 5, lp, flags=0x08), A_ADDR)
    (ack,) = p.take(b)
    h = hdr(ack[0])
    assert h.ooo_count == 1 and h.rcvd_bytes == (2 * (len(req) + 48) + 255) >> 8
    # the hole fills: CACK passes the AR'd PSN 1002, so that is ACKed at once (uet.pds.target)
    p.inject(b, request(1001, 5, lp), A_ADDR)
    (ack,) = p.take(b)
    assert hdr(ack[0]).ooo_count == 0
    # a coalesced ACK flushed by the ACK timer reports how long the request waited (µs)
    p.inject(b, request(1003, 5, lp), A_ADDR)
    assert p.take(b) == []
    p.now += 100_000
    b.core.handle_timer(p.now)
    (ack,) = p.take(b)
    assert hdr(ack[0]).service_time == 100


def test_initiator_uses_rcvd_bytes_and_removes_the_service_time() -> None:
    cfg = PdsConfig(cc="nscc", start_psn=500)
    core = PdsCore(A_ADDR, cfg)
    submit(core, 1, 1000, 0)
    (pkt,) = core.datagrams_to_send(0)
    g = gate_of(core)
    nominal = len(pkt[0]) + 48
    assert nscc_of(g).inflight == nominal
    lp = (pkt[0][8] << 8) | pkt[0][9]
    # ACK_CC 30 µs later naming PSN 500: 10 µs of service time, 1024 bytes received so far
    ack = NSCC_ACK.encode((8, 0, 0, 0, 500, 77, lp, 0, 0, 1, 1, 0, 10, 0, 0, 4, 0))
    core.receive_datagram(ack, 30_000, source=B_ADDR)
    n = nscc_of(g)
    assert n.inflight == nominal - 1024
    # RTT 30 µs − 10 µs service = 20 µs; delay 20 − 12 = 8 µs < target 9 µs enters the filter
    # as is: avg = 0.0125 × 8000 (without the subtraction it would be replaced by 0.25 × 12 µs)
    assert n.avg_delay == pytest.approx(100)
    assert g.counters["acks"] == 1 and g.inflight_pkts == 0


def test_ecn_marked_bytes_and_trim_nack_signals() -> None:
    core = PdsCore(A_ADDR, PdsConfig(cc="nscc", start_psn=500))
    submit(core, 3, 1000, 0)
    pkts = core.datagrams_to_send(0)
    lp = (pkts[0][0][8] << 8) | pkts[0][0][9]
    g = gate_of(core)
    ack = NSCC_ACK.encode((8, 0, int(w.AckFlag.M), 0, 500, 77, lp, 0, 0, 1, 1, 0, 0, 0, 0, 5, 0))
    core.receive_datagram(ack, 20_000, source=B_ADDR)
    assert g.counters["ecn_acks"] == 1 and g.counters["ecn_bytes"] == len(pkts[0][0]) + 48
    cw = nscc_of(g).cwnd
    nack = w.NACK.encode((10, 0, 0, int(w.NackCode.TRIMMED), 0, 501, 77, lp, 0))
    core.receive_datagram(nack, 21_000, source=B_ADDR)
    assert g.counters["trims"] == 1
    assert nscc_of(g).cwnd == pytest.approx(cw - (len(pkts[1][0]) + 48))  # shrunk by the packet
    assert core.datagrams_to_send(21_000)[0][0][4:8] == (501).to_bytes(4, "big")  # resent


def test_pacing_deadline_goes_into_get_timer() -> None:
    core = PdsCore(A_ADDR, PdsConfig(cc="nscc", cc_params=CcConfig(pacing=True), start_psn=500))
    submit(core, 3, 1000, 0)
    first = core.datagrams_to_send(0)
    assert len(first) == 1
    gap = int((len(first[0][0]) + 48) * 12_000 / CcConfig().max_wnd)
    assert core.get_timer() == gap
    core.handle_timer(gap)
    assert len(core.datagrams_to_send(gap)) == 1


def test_sub_packet_window_deadline_goes_into_get_timer() -> None:
    """``CcConfig.min_cwnd`` below the MTU: with nothing in flight a window of a quarter packet
    lets the next packet go ``mtu × base_rtt / cwnd`` = 4 base RTTs after the previous one."""
    cc = CcConfig(min_cwnd=1_024, base_rtt_probe=False)
    core = PdsCore(A_ADDR, PdsConfig(cc="nscc", cc_params=cc, start_psn=500))
    submit(core, 1, 1000, 0)
    assert len(core.datagrams_to_send(0)) == 1
    n = nscc_of(gate_of(core))
    assert n is not None
    n.cwnd = 1_024.0
    n.inflight = 0  # as if its ACK had come
    submit(core, 2, 1000, 1_000)
    assert core.datagrams_to_send(1_000) == []
    assert core.get_timer() == 4 * 12_000
    core.handle_timer(48_000)
    assert len(core.datagrams_to_send(48_000)) == 1  # one, then the window is full again
    assert core.datagrams_to_send(48_000) == []


def test_fast_retransmit_is_a_loss_not_a_timeout() -> None:
    p = Pair(PdsConfig(cc="nscc", ack_per_pkt=True))
    dropped: list[bytes] = []
    first: list[int] = []  # the PDC's start PSN, once it has one

    def drop_second(data: bytes, src: str, dst: str) -> list[bytes]:
        if src == A_ADDR and data[0] >> 3 == 2 and not dropped and data[4:8] == (first[0] + 1).to_bytes(4, "big"):
            dropped.append(data)
            return []
        return [data]

    submit(p.a.core, 8, 1000, 0)
    first.append(next(iter(p.a.core.pdcs.values())).start_psn)
    p.filter = drop_second
    assert p.run_until(lambda: len(p.a.acked()) == 8)
    g = gate_of(p.a.core)
    assert dropped and g.counters["losses"] == 1 and g.counters["timeouts"] == 0
    assert p.a.core.counters.get("rto", 0) == 0
    assert abs(nscc_of(g).inflight) < 256 and g.inflight_pkts == 0


def test_entropy_feedback_for_every_packet_an_ack_covers() -> None:
    core = PdsCore(A_ADDR, PdsConfig(cc="nscc", lb="reps", start_psn=500))
    submit(core, 4, 100, 0)
    pkts = core.datagrams_to_send(0)
    lp = (pkts[0][0][8] << 8) | pkts[0][0][9]
    reps = gate_of(core).entropy
    assert isinstance(reps, Reps) and sum(reps.valid) == 0
    # one coalesced ACK: CACK 503 naming 503 covers all four packets
    ack = NSCC_ACK.encode((8, 0, 0, 0, 503, 77, lp, 0, 0, 1, 1, 0, 0, 0, 0, 4, 0))
    core.receive_datagram(ack, 20_000, source=B_ADDR)
    assert sorted(v for v, ok in zip(reps.values, reps.valid, strict=True) if ok) == sorted(e for _d, _a, e in pkts)


def test_nscc_pair_delivers_and_balances_inflight() -> None:
    p = Pair(PdsConfig(cc="nscc", lb="reps"), seed=3, loss=0.02)
    submit(p.a.core, 200, 4000, 0)
    assert p.run_until(lambda: len(p.a.acked()) == 200)
    g = gate_of(p.a.core)
    assert len(p.b.deliveries) >= 200
    assert abs(nscc_of(g).inflight) < 256 * 4 and g.inflight_pkts == 0
    assert nscc_of(g).base_rtt == 12_000  # the config value: the 20 µs link RTT is never smaller


def test_rccc_credit_packets_and_paced_grants() -> None:
    cfg = PdsConfig(cc="rccc")
    p = Pair(cfg, delay_ns=2_000)
    submit(p.a.core, 120, 4000, 0)  # 480 kB, about twice the speculative MaxWnd
    assert p.run_until(lambda: len(p.a.acked()) == 120)
    reqs = [d for _t, s, _d, d in p.wire if s == A_ADDR and d[0] >> 3 == 2 + 11]
    assert len(reqs) >= 120  # data went as RUD CC requests (type 13) with credit targets
    assert max(hdr(d).credit_target for d in reqs) > 0
    ctl = [(t, d) for t, s, _d, d in p.wire if s == B_ADDR and d[0] >> 3 == 11]
    credits = [(t, d) for t, d in ctl if hdr(d).ctl_type == w.ControlType.CREDIT]
    assert credits, "the receiver granted credit"
    times = [t for t, _d in credits]
    grants = [hdr(d).payload for _t, d in credits]
    assert grants == sorted(grants)  # cumulative
    interval = int(4 * 4096 / (100e9 * 0.99 / 8e9))
    assert all(b - a >= interval for a, b in zip(times, times[1:], strict=False))
    assert not any(k.startswith("nack_tx") for k in p.b.core.counters)
    g = gate_of(p.a.core)
    assert not credit_of(g).speculating and credit_of(g).granted_bytes > 0
    # the pacer counts every data byte it received from the sender as service (nominal sizes)
    cs = p.b.core.credit_scheduler
    assert isinstance(cs, CreditScheduler) and cs.peers[(A_ADDR, 0)].rx == sum(len(d) + 48 for d in reqs)


def test_credit_req_answered_only_when_rccc_runs() -> None:
    for cc, unexpected in (("none", True), ("rccc", False)):
        p = Pair(PdsConfig(cc=cc, start_psn=1000))
        p.inject(p.b, request(1000, 5, syn_offset=0, flags=0x08), A_ADDR)
        (ack,) = p.take(p.b)
        lp = hdr(ack[0]).spdcid
        p.inject(p.b, control(int(w.ControlType.CREDIT_REQ), 0, 5, lp, payload=40), A_ADDR)
        out = p.take(p.b)
        assert bool(out) == unexpected
        if not unexpected:
            cs = p.b.core.credit_scheduler
            assert isinstance(cs, CreditScheduler) and cs.peers[(A_ADDR, 0)].target == 40
            assert p.b.core.get_timer() == p.now


def test_nacked_retransmission_waits_for_the_ccc() -> None:
    """§4.1: a NACKed packet is marked for retransmission and goes when the CCC allows (it
    spends window like new data), not at once past a closed window."""
    core = PdsCore(A_ADDR, PdsConfig(cc="nscc", cc_params=CcConfig(base_rtt_probe=False), start_psn=500))
    submit(core, 2, 3000, 0)
    g = gate_of(core)
    pkts = core.datagrams_to_send(0)
    size = len(pkts[0][0]) + 48
    nscc_of(g).cwnd = 2 * size  # exactly the two packets in flight
    lp = (pkts[0][0][8] << 8) | pkts[0][0][9]
    core.receive_datagram(w.NACK.encode((10, 0, 0, int(w.NackCode.TRIMMED), 0, 500, 77, lp, 0)), 20_000, source=B_ADDR)
    # trim: inflight − size, cwnd − size (floor: one MTU, 4096) with one packet still in flight:
    # the resend would exceed the window, so it waits
    assert nscc_of(g).inflight == size and nscc_of(g).cwnd == 4096
    assert core.datagrams_to_send(20_000) == []
    # the ACK for PSN 501 (rcvd_bytes covers it, not 500) empties the flight: the resend goes,
    # and a SACK gap behind the NACKed packet is not a second loss
    ack = NSCC_ACK.encode((8, 0, 0, 2, 499, 77, lp, 0, 0, 1, 2, 1, 0, 0, 0, (size + 255) >> 8, 1))
    core.receive_datagram(ack, 21_000, source=B_ADDR)
    (rtx,) = core.datagrams_to_send(21_000)
    assert rtx[0][4:8] == (500).to_bytes(4, "big") and rtx[0][1] & 0x10  # RETX
    assert g.counters["losses"] == 0


def test_credit_overtaking_the_first_ack_is_used_not_refused() -> None:
    """A grant may arrive while the PDC is still SYN_SENT (no peer PDCID yet): the initiator
    applies it instead of answering PDC_HDR_MISMATCH (which would close the target's PDC)."""
    core = PdsCore(A_ADDR, PdsConfig(cc="rccc", start_psn=500))
    submit(core, 1, 1000, 0)
    (pkt,) = core.datagrams_to_send(0)
    assert pkt[0][0] >> 3 == 13  # RUD CC request (SYN)
    lp = (pkt[0][8] << 8) | pkt[0][9]
    core.receive_datagram(control(int(w.ControlType.CREDIT), 0, 77, lp, payload=64), 5_000, source=B_ADDR)
    assert core.datagrams_to_send(5_000) == []  # no NACK
    g = gate_of(core)
    assert credit_of(g).pull == 64 and not credit_of(g).speculating
    assert core.counters["ctl_rx_CREDIT_before_ack"] == 1


def test_credit_req_for_granted_credit_repeats_the_grant() -> None:
    """A lost CREDIT: the source restates a target already granted; the receiver repeats the
    cumulative grant instead of waiting for demand that will never come."""
    p = Pair(PdsConfig(cc="rccc", start_psn=1000))
    p.inject(p.b, request(1000, 5, syn_offset=0, flags=0x08), A_ADDR)
    lp = hdr(p.take(p.b)[0][0]).spdcid
    cs = p.b.core.credit_scheduler
    assert cs is not None
    p.inject(p.b, control(int(w.ControlType.CREDIT_REQ), 0, 5, lp, payload=40), A_ADDR)
    p.b.core.handle_timer(p.now)
    (grant,) = p.take(p.b)
    assert hdr(grant[0]).payload == 40 and cs.deadline() is not None
    p.now += 10_000
    p.b.core.handle_timer(p.now)  # pacer stops: nothing left to grant
    assert cs.deadline() is None
    p.inject(p.b, control(int(w.ControlType.CREDIT_REQ), 0, 5, lp, payload=40), A_ADDR)
    (again,) = p.take(p.b)
    assert hdr(again[0]).ctl_type == w.ControlType.CREDIT and hdr(again[0]).payload == 40


def test_blocked_credit_never_sets_a_timer_in_the_past() -> None:
    """An RCCC source whose only work is a retransmission waiting for credit re-arms its
    CREDIT_REQ timer one interval ahead (it used to spin at the same instant)."""
    core = PdsCore(A_ADDR, PdsConfig(cc="rccc", start_psn=500))
    submit(core, 2, 3000, 0)
    pkts = core.datagrams_to_send(0)
    lp = (pkts[0][0][8] << 8) | pkts[0][0][9]
    g = gate_of(core)
    ack = NSCC_ACK.encode((8, 0, 0, 1, 499, 77, lp, 0, 0, 1, 1, 0, 0, 0, 0, 12, 0))
    core.receive_datagram(ack, 10_000, source=B_ADDR)  # speculation ends: credit ≤ 0
    assert credit_of(g).credit <= 0
    core.receive_datagram(w.NACK.encode((10, 0, 0, int(w.NackCode.TRIMMED), 0, 501, 77, lp, 0)), 11_000, source=B_ADDR)
    assert core.datagrams_to_send(11_000) == []  # the resend waits for credit
    now = 11_000
    sent = []
    for _ in range(5):
        t = core.get_timer()
        assert t is not None and t >= now
        now = t
        core.handle_timer(now)
        sent += [hdr(d).ctl_type for d, _a, _e in core.datagrams_to_send(now)]
    assert sent.count(w.ControlType.CREDIT_REQ) >= 2
    assert now >= 11_000 + 12_000  # one CREDIT_REQ per credit_req_ns (base RTT), not a spin


def test_rto_of_a_nacked_packet_waiting_for_the_gate_is_no_new_loss() -> None:
    """Regression (issue 11): a trimmed packet waiting behind a closed NSCC window had its RTO
    fire, which counted a second loss (inflight −= size again, drifting negative until the
    window no longer bound: 35,054 trims in a 15→1 incast) and resent it past the gate."""
    core = PdsCore(A_ADDR, PdsConfig(cc="nscc", start_psn=500, rto_ns=100_000))
    submit(core, 1, 4000, 0)
    (p500,) = core.datagrams_to_send(0)
    submit(core, 1, 4000, 50_000)
    (p501,) = core.datagrams_to_send(50_000)
    lp = (p500[0][8] << 8) | p500[0][9]
    g = gate_of(core)
    n = nscc_of(g)
    size = len(p500[0]) + 48
    nack = w.NACK.encode((10, 0, 0, int(w.NackCode.TRIMMED), 0, 500, 77, lp, 0))
    core.receive_datagram(nack, 60_000, source=B_ADDR)
    n.cwnd = float(size)  # a window of one packet: PSN 501 in flight keeps it shut
    assert n.inflight == size
    assert core.datagrams_to_send(60_000) == []  # 500 waits for the gate
    # PSN 500's RTO passes while it waits: no loss counted, nothing sent, inflight unchanged
    core.handle_timer(100_000)
    assert core.datagrams_to_send(100_000) == []
    assert g.counters["timeouts"] == 0 and core.counters["rto_rtx_wait"] == 1
    assert n.inflight == size and n.cwnd == size
    # PSN 501's own RTO: it leaves flight (one loss), and 500 goes first, then 501
    core.handle_timer(150_000)
    out = core.datagrams_to_send(150_000)
    assert g.counters["timeouts"] == 1
    assert [d[0][4:8] for d in out][:1] == [(500).to_bytes(4, "big")]


def test_rto_resend_waits_for_the_ccc_gate() -> None:
    """§4.1 on_inferred_loss marks the packet for retransmission: with a CCC the RTO resend
    goes when the gate allows, like new data, not past it."""
    core = PdsCore(A_ADDR, PdsConfig(cc="nscc", start_psn=500, rto_ns=100_000))
    submit(core, 2, 4000, 0)
    pkts = core.datagrams_to_send(0)
    g = gate_of(core)
    size = len(pkts[0][0]) + 48
    nscc_of(g).cwnd = float(size)
    nscc_of(g).inflight = 3 * size  # pretend more is out: the shrunken window stays shut
    core.handle_timer(100_000)
    assert core.datagrams_to_send(100_000) == []
    assert g.counters["timeouts"] == 2 and nscc_of(g).inflight == size
    (pdc,) = core.pdcs.values()
    assert isinstance(pdc, InitiatorPdc)
    assert [q.psn for q in pdc.cc_rtx] == [500, 501]  # marked, in order, waiting for the gate


def test_ack_of_a_packet_marked_lost_and_not_yet_resent_is_no_rtt_sample() -> None:
    """Regression (issue 11): the RTO re-arms ``tx_time`` of a packet waiting for the gate; the
    late ACK of its first copy then measured 200 ns, which became the base RTT (and a max_wnd of
    one packet) of a sender in the 15→1 incast."""
    core = PdsCore(A_ADDR, PdsConfig(cc="nscc", start_psn=500, rto_ns=100_000))
    submit(core, 2, 4000, 0)
    pkts = core.datagrams_to_send(0)
    lp = (pkts[0][0][8] << 8) | pkts[0][0][9]
    g = gate_of(core)
    size = len(pkts[0][0]) + 48
    nscc_of(g).cwnd = float(size)
    nscc_of(g).inflight = 3 * size
    core.handle_timer(100_000)  # both time out and wait for the gate
    assert core.datagrams_to_send(100_000) == []
    ack = NSCC_ACK.encode((8, 0, 0, 0, 500, 77, lp, 0, 0, 1, 1, 0, 0, 0, 0, (size + 255) >> 8, 0))
    core.receive_datagram(ack, 100_200, source=B_ADDR)
    assert g.counters["acks"] == 1 and nscc_of(g).base_rtt == CcConfig().base_rtt_ns


def test_base_rtt_probe_after_the_first_ack() -> None:
    """§4.3.6: a new NSCC CCC sends one PROBE CP after its first ACK or NACK; the probe's ACK
    (P set, opaque echoed, no service time) is a base-RTT sample."""
    core, lp, g = _sent(PdsConfig(cc="nscc", start_psn=500), 3)
    ack = NSCC_ACK.encode((8, 0, 0, 0, 500, 77, lp, 0, 0, 1, 1, 0, 0, 0, 0, 5, 0))
    core.receive_datagram(ack, 20_000, source=B_ADDR)
    (probe,) = [d for d in core.datagrams_to_send(20_000) if d[0][0] >> 3 == w.PdsType.CONTROL]
    h = w.CONTROL.decode(probe[0])
    assert h.ctl_type == w.ControlType.PROBE and h.dpdcid == 77 and core.counters["cc_base_rtt_probes"] == 1
    # a second ACK: no second probe
    ack = NSCC_ACK.encode((8, 0, 0, 0, 501, 77, lp, 0, 0, 1, 1, 0, 0, 0, 0, 10, 0))
    core.receive_datagram(ack, 21_000, source=B_ADDR)
    assert [d for d in core.datagrams_to_send(21_000) if d[0][0] >> 3 == w.PdsType.CONTROL] == []
    # the probe's answer 9 µs after it left: base RTT 9 µs (config 12 µs)
    pa = w.ACK_CC[(True, "nscc")].encode(
        (8, 0, int(w.AckFlag.P), h.probe_opaque, 501, 77, lp, 0, 0, 1, 1, 0, 0, 0, 0, 10, 0)
    )
    core.receive_datagram(pa, 29_000, source=B_ADDR)
    assert nscc_of(g).base_rtt == 9_000
    off, lp, _ = _sent(PdsConfig(cc="nscc", cc_params=CcConfig(base_rtt_probe=False), start_psn=500), 1)
    off.receive_datagram(
        NSCC_ACK.encode((8, 0, 0, 0, 500, 77, lp, 0, 0, 1, 1, 0, 0, 0, 0, 5, 0)), 20_000, source=B_ADDR
    )
    assert off.datagrams_to_send(20_000) == [] and "cc_base_rtt_probes" not in off.counters


def _sent(cfg: PdsConfig, n: int) -> tuple[PdsCore, int, Ccc]:
    """A core that sent ``n`` 1000-byte requests at time 0: (core, its PDCID, its CCC)."""
    core = PdsCore(A_ADDR, cfg)
    submit(core, n, 1000, 0)
    pkts = core.datagrams_to_send(0)
    return core, (pkts[0][0][8] << 8) | pkts[0][0][9], gate_of(core)


def test_base_rtt_probe_is_wanted_once_after_the_first_nack_too() -> None:
    """§4.3.6 "after its first ACK or NACK": the CCC asks once; RCCC alone never asks."""
    import random

    cfg = CcConfig()
    g = Ccc(cfg, [Nscc(cfg)], lb="default", rng=random.Random(1))
    assert not g.take_probe()
    g.on_nack_packet(1000, False, None, True, False, 5_000)
    assert g.take_probe() and not g.take_probe()
    g.on_ack(1, 1000, 1000, 0, 12_000, 0, False, 6_000)
    assert not g.take_probe()
    r = Ccc(cfg, [CreditSender(cfg)], lb="default", rng=random.Random(1))
    r.on_ack(1, 1000, 1000, 0, 12_000, 0, False, 6_000)
    assert not r.take_probe()


def test_new_message_without_credit_asks_for_it_at_once() -> None:
    """§4.1 ``on_new_data`` → RCCC, §4.5 (the target goes "in a CREDIT_REQ CP when no data is
    going"): a message queued on a PDC with no credit, whose receiver has granted everything it
    was asked for, is announced in a CREDIT_REQ at once. Before, it waited for the no-credit
    timeout, ``credit_req_ns`` plus twice the smoothed time between grants after the last send:
    here 12 + 2 × 50 µs, the ~100 µs per message the double binary tree paid with ``rccc``."""
    p = Pair(PdsConfig(cc="rccc", start_psn=1000))
    submit(p.a.core, 1, 4000, 0)
    ((d1, _a, _e),) = p.take(p.a)  # speculative, SYN
    g0 = hdr(d1).credit_target
    p.inject(p.b, d1, A_ADDR)
    (ack,) = [d for d, _a, _e in p.take(p.b) if d[0] >> 3 != 11]
    a = p.a.core
    a.receive_datagram(ack, 4_000, source=B_ADDR)  # speculation ends, PDC established
    lp, rp = hdr(d1).spdcid, hdr(ack).spdcid
    for t, g in ((10_000, g0 + 1), (60_000, g0 + 2)):  # two grants of 256 B, 50 µs apart
        a.receive_datagram(control(int(w.ControlType.CREDIT), 0, rp, lp, payload=g), t, source=B_ADDR)
    submit(a, 1, 4000, 60_000)  # goes on 512 B of credit, which it overdraws
    ((d2, _a, _e),) = a.datagrams_to_send(60_000)
    c = credit_of(gate_of(a))
    assert hdr(d2).credit_target == c.pull == g0 + 2 and c.credit < 0  # nothing more to ask for
    submit(a, 1, 4000, 61_000)
    (req,) = [hdr(d) for d, _a, _e in a.datagrams_to_send(61_000)]
    assert req.ctl_type == w.ControlType.CREDIT_REQ
    nominal = 512 - int(c.credit)  # the message's packet, as the overdrawn one
    assert req.payload == g0 + 2 + -(-nominal // 256)
    wake = a.get_timer()
    assert wake is not None and wake >= 61_000 + 12_000  # a repeat only after a grant is overdue
