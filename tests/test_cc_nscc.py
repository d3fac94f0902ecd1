"""NSCC (spec/behaviour.md §4.3, §4.4) fed exact ACK sequences and times; every expected number
is computed by hand here from the §4.3.1 defaults for the reference network:

100 Gb/s, config_base_rtt 12 µs → BDP 150 000 B, scaling_a 1; trimming → target_qdelay 9 µs,
scaling_b 0.75; MTU 4096 → alpha = 4·4096·0.75/9000 B/ns, fi = 20 480, fi_scale 0.25,
eta = 614.4; MaxWnd 225 000; adjust_bytes 32 768. The spec disables the delay trigger of quick
adapt with trimming; these tests set htsim's qa_threshold, 4 × target = 36 µs, to check it.
"""

from __future__ import annotations

import pytest

from uet.cc import CcConfig, Nscc

CFG = CcConfig(qa_threshold_ns=36_000)


def fresh(cwnd: float = 100_000, inflight: int = 100_000) -> Nscc:
    n = Nscc(CFG, now=0)
    n.cwnd = cwnd
    n.inflight = inflight
    return n


def test_defaults_from_the_table() -> None:
    n = Nscc(CFG)
    assert n.max_wnd == pytest.approx(225_000)
    assert n.cwnd == pytest.approx(225_000)
    assert n.target_qdelay == 9_000
    assert n.alpha == pytest.approx(12_288 / 9_000)
    assert (n.fi, n.fi_scale, n.eta) == pytest.approx((20_480, 0.25, 614.4))
    assert n.qa_threshold == 36_000
    assert n.adjust_bytes == 32_768
    assert Nscc(CcConfig(trimming=False)).target_qdelay == 12_000
    # §4.3.1: 4 × target without trimming; with trimming "very large" (never by delay)
    assert Nscc(CcConfig(trimming=False)).qa_threshold == 48_000
    assert Nscc(CcConfig()).qa_threshold == float("inf")


def test_fair_increase_no_ecn_high_delay() -> None:
    n = fresh()
    # delay = 22 µs - 12 µs = 10 µs >= target 9 µs, no ECN: fair increase fi·n = 20480·40960;
    # received 40960 > 32768 → fulfil: cwnd += 838 860 800 / 100 000
    n.on_ack(40_960, False, 22_000, 1_000)
    assert n.cwnd == pytest.approx(100_000 + 8_388.608)
    assert n.inflight == 100_000 - 40_960
    assert n.stats["fair"] == 1
    # ECN-free high delay enters the filter as 0.25 × base_rtt = 3000: avg = 0.0125·3000
    assert n.avg_delay == pytest.approx(37.5)


def test_proportional_increase_no_ecn_low_delay() -> None:
    n = fresh()
    # delay 3 µs: alpha·n·(9000 − 3000) = (12288/9000)·40960·6000 = 335 544 320
    n.on_ack(40_960, False, 15_000, 1_000)
    assert n.cwnd == pytest.approx(100_000 + 3_355.4432)
    assert n.stats["prop"] == 1 and n.stats["fast"] == 0
    assert n.avg_delay == pytest.approx(0.0125 * 3_000)


def test_fast_increase_when_delay_is_about_zero() -> None:
    n = fresh()
    n.fi_count = 100_000
    # delay 0 < 1 µs: fi_count 104 096 > cwnd → cwnd += 4096 · 0.25, increase mode, no proportional
    n.on_ack(4_096, False, 12_000, 1_000)
    assert n.cwnd == pytest.approx(101_024)
    assert n.increase_mode and n.stats["fast"] == 1
    assert n.inc_bytes == 0
    # a sample with real delay leaves increase mode and resets the count
    n.on_ack(4_096, False, 15_000, 2_000)
    assert not n.increase_mode and n.fi_count == 0


def test_multiplicative_decrease_at_most_once_per_base_rtt() -> None:
    n = fresh()
    n.avg_delay = 18_000
    # ECN, delay 20 µs ≥ target: avg = 0.0125·20000 + 0.9875·18000 = 18 025;
    # now 13 µs − last_dec 0 > base_rtt 12 µs → cwnd ·= 1 − 0.8·(18025 − 9000)/18025; then the
    # periodic adjustment (13 µs since the last one ≥ base_rtt) adds eta = 614.4
    n.on_ack(4_096, True, 32_000, 13_000)
    factor = 1 - 0.8 * 9_025 / 18_025
    cw = 100_000 * factor + 614.4
    assert n.avg_delay == pytest.approx(18_025)
    assert n.cwnd == pytest.approx(cw)
    assert n.last_dec_time == 13_000 and n.stats["md"] == 1
    # a second marked ACK within one base RTT does not cut again
    n.on_ack(4_096, True, 32_000, 20_000)
    assert n.cwnd == pytest.approx(cw)
    assert n.stats["md"] == 1
    # after another base RTT it does (and eta again): avg = 0.0125·20000 + 0.9875·avg
    avg = 0.0125 * 20_000 + 0.9875 * (0.0125 * 20_000 + 0.9875 * 18_025)
    n.on_ack(4_096, True, 32_000, 25_001)
    assert n.cwnd == pytest.approx(cw * (1 - 0.8 * (avg - 9_000) / avg) + 614.4)


def test_multiplicative_decrease_never_below_half() -> None:
    n = fresh()
    n.avg_delay = 1_000_000  # factor 1 − 0.8·(991000/1000000) < 0.5 → max_md_jump 0.5
    n.on_ack(4_096, True, 1_012_000, 13_000)
    assert n.cwnd == pytest.approx(50_000 + 614.4)  # halved, then eta


def test_ecn_with_low_delay_holds() -> None:
    n = fresh()
    n.on_ack(4_096, True, 14_000, 1_000)
    assert n.cwnd == 100_000
    assert n.stats["hold"] == 1


def test_quick_adapt_sets_cwnd_to_achieved_bytes() -> None:
    n = fresh(inflight=60_000)
    n.on_ack(4_096, False, 15_000, 1_000)  # first call only arms: qa_endtime = 1000 + 12000 + 9000
    assert n.qa_endtime == 22_000 and n.achieved_bytes == 0
    n.on_ack(4_096, False, 15_000, 5_000)
    n.on_ack(4_096, False, 15_000, 9_000)
    # at 22 µs a delay of 40 µs > qa_threshold 36 µs, achieved 8192 + 4096 < 225000 >> 3
    n.on_ack(4_096, True, 52_000, 22_000)
    assert n.cwnd == 12_288
    assert n.bytes_to_ignore == 60_000 - 4 * 4_096 and n.bytes_ignored == 0
    assert n.stats["qa"] == 1 and n.qa_endtime == 22_000 + 21_000
    # while the backlog from before QA drains, marked ACKs are ignored (no decrease)
    n.on_ack(4_096, True, 52_000, 40_000)
    assert n.cwnd == 12_288 and n.stats["md"] == 0


def test_quick_adapt_not_when_enough_was_achieved() -> None:
    n = fresh(inflight=200_000)
    n.on_ack(4_096, False, 15_000, 1_000)
    n.on_ack(30_000, False, 15_000, 5_000)  # achieved 30 000 ≥ 28 125
    cw = n.cwnd
    n.on_ack(4_096, False, 52_000, 22_000)  # no ECN: delay replaced, high delay → fair
    assert n.stats["qa"] == 0 and n.cwnd >= cw


def test_trim_nack_triggers_quick_adapt_or_shrinks() -> None:
    n = fresh()
    n.on_ack(4_096, False, 15_000, 1_000)  # arms qa_endtime = 22 000
    # a trim before qa_endtime: delay sample config_base_rtt, cwnd − size, trigger_qa pending
    n.on_nack(4_096, None, True, False, False, 2_000)
    assert n.cwnd == pytest.approx(100_000 - 4_096)
    assert n.trigger_qa and n.inflight == 100_000 - 8_192
    assert n.avg_delay == pytest.approx(0.9875 * 37.5 + 0.0125 * 12_000)
    # the next trim after qa_endtime runs quick adapt (achieved 0 → MTU) and does not shrink
    n.on_nack(4_096, None, True, False, False, 22_000)
    assert n.cwnd == 4_096 and n.stats["qa"] == 1 and not n.trigger_qa


def test_lasthop_trim_shrinks_only_without_rccc() -> None:
    a, b = fresh(), fresh()
    a.on_nack(4_096, None, True, True, True, 2_000)
    b.on_nack(4_096, None, True, True, False, 2_000)
    assert a.cwnd == 100_000
    assert b.cwnd == pytest.approx(100_000 - 4_096)


def test_inferred_loss_and_base_rtt() -> None:
    n = fresh()
    n.on_inferred_loss(4_096, 1_000)
    assert n.cwnd == pytest.approx(95_904) and n.inflight == 95_904
    n.on_ack(4_096, False, 10_000, 2_000)  # smaller RTT: base 10 µs, max_wnd 1.5·12.5·10000
    assert n.base_rtt == 10_000 and n.max_wnd == pytest.approx(187_500)


def test_periodic_adjustment_adds_eta_once_per_base_rtt() -> None:
    n = fresh()
    # delay 10 µs (fair): inc = 20480·4096; at 12 µs since last adjust → fulfil with eta
    n.on_ack(4_096, False, 22_000, 12_000)
    assert n.cwnd == pytest.approx(100_000 + 20_480 * 4_096 / 100_000 + 614.4)
    assert n.last_adjust_time == 12_000


def test_receiver_window_penalty_and_restore() -> None:
    n = fresh(cwnd=100_000, inflight=80_000)
    # pend 64, n 4096: cwnd = min(cwnd, inflight after the ACK) − (64·4096 >> 7)
    n.on_ack(4_096, False, 15_000, 1_000, pend=64)
    assert n.saved_cwnd == 100_000
    assert n.cwnd == 80_000 - 4_096 - 2_048
    assert n.stats["prop"] == 0  # limited: no increase
    n.on_ack(4_096, False, 15_000, 2_000, pend=0, restore=True)
    assert n.cwnd >= 100_000 and n.saved_cwnd == 0


def test_can_send_and_ack_request() -> None:
    n = fresh(cwnd=10_000, inflight=4_000)
    assert n.can_send(4_096, 0)
    assert not n.can_send(6_001, 0)
    n.inflight = 0
    n.cwnd = 4_096
    assert n.can_send(9_000, 0)  # nothing in flight: never blocked
    n.inflight = 7_000
    n.cwnd = 10_000
    assert n.ack_request()  # 3000 < MTU
    n.cwnd = 100_000
    assert not n.ack_request()


def test_pacing_deadline() -> None:
    n = Nscc(CcConfig(pacing=True), now=0)
    n.cwnd = 120_000
    n.on_send(4_000, 1_000)  # gap = 4000 · 12000 / 120000 = 400 ns
    assert n.pacing_deadline(1_000) == 1_400
    assert not n.can_send(4_000, 1_200)
    assert n.can_send(4_000, 1_400)
    assert n.pacing_deadline(1_400) is None


def test_event_log_records_changes() -> None:
    recs: list[dict] = []
    n = Nscc(CFG, now=0, log=recs.append)
    n.cwnd = 100_000
    n.on_ack(40_960, False, 22_000, 1_000)
    assert recs[-1]["ev"] == "cc" and recs[-1]["cwnd"] == 108_388 and recs[-1]["t"] == 1_000


# -- sub-packet windows (CcConfig.min_cwnd below the MTU; uet.cc.nscc module docstring) ---------

SUB = CcConfig(qa_threshold_ns=36_000, min_cwnd=1_024)  # mtu 4096: down to a quarter packet


def test_min_cwnd_defaults_to_the_mtu_and_is_checked() -> None:
    assert Nscc(CFG).min_cwnd == 4_096
    assert Nscc(SUB).min_cwnd == 1_024
    for bad in (0, 4_097):
        with pytest.raises(ValueError):
            CcConfig(min_cwnd=bad)


def test_default_window_never_goes_below_one_mtu() -> None:
    n = fresh(cwnd=5_000, inflight=4_200)
    n.on_nack(4_200, None, False, False, False, 1_000)  # a plain NACK: no change
    n.on_inferred_loss(4_200, 2_000)
    assert n.cwnd == 4_096 and n.inflight == -4_200
    n.inflight = 0
    n.last_tx = 2_000
    assert n.can_send(4_200, 2_001) and n.pacing_deadline(2_001) is None  # no sub-packet pacing


def test_sub_packet_window_sends_one_packet_every_mtu_over_cwnd_base_rtts() -> None:
    n = Nscc(SUB, now=0)
    n.cwnd = 2_048  # half a packet: one packet every two base RTTs (24 µs)
    assert n.can_send(4_200, 0)  # nothing sent yet
    n.on_send(4_200, 1_000)
    assert not n.can_send(4_200, 30_000)  # in flight: only an ACK opens the window
    assert n.pacing_deadline(30_000) is None
    n.on_ack(4_200, False, None, 20_000)  # no valid RTT: only the counters move
    assert n.inflight == 0 and n.cwnd == 2_048
    assert n.sub_packet_time() == 1_000 + 4_096 * 12_000 // 2_048 == 25_000
    assert n.pacing_deadline(20_000) == 25_000
    assert not n.can_send(4_200, 24_999)
    assert n.can_send(4_200, 25_000) and n.pacing_deadline(25_000) is None


def test_sub_packet_decreases_stop_at_min_cwnd() -> None:
    n = Nscc(CcConfig(min_cwnd=1_024, disable_quick_adapt=True), now=0)
    n.cwnd = 3_000
    n.inflight = 8_400
    n.on_nack(4_200, None, True, False, False, 1_000)  # trim: cwnd − size, floored
    assert n.cwnd == 1_024 and n.inflight == 4_200
    n.cwnd = 3_000
    n.on_inferred_loss(4_200, 2_000)
    assert n.cwnd == 1_024 and n.inflight == 0
    n.cwnd = 3_000
    n.inflight = 4_200
    n.on_ack(4_200, False, None, 3_000, pend=127)  # penalty: min(cwnd, inflight 0) − dec, floored
    assert n.cwnd == 1_024


def test_sub_packet_md_floor() -> None:
    n = Nscc(SUB, now=0)
    n.cwnd = 1_500
    n.avg_delay = 90_000  # factor max(1 − 0.8·81/90, 0.5) = 0.5 → 750, floored at 1024
    n.multiplicative_decrease(13_000)
    assert n.cwnd == 1_024 and n.stats["md"] == 1


def test_sub_packet_eta_per_elapsed_base_rtt() -> None:
    n = Nscc(SUB, now=0)
    n.cwnd = 2_048
    n.fulfill_adjustment(36_000)  # three base RTTs since the last adjustment: 3 × eta
    assert n.cwnd == pytest.approx(2_048 + 3 * 614.4) and n.last_adjust_time == 36_000
    n.cwnd = 2_048
    n.fulfill_adjustment(36_000 + 100 * 12_000)  # a long silence: at most mtu / min_cwnd = 4
    assert n.cwnd == pytest.approx(2_048 + 4 * 614.4)
    n.cwnd = 4_096  # one MTU or more: eta once, as §4.3.5 says
    n.fulfill_adjustment(36_000 + 200 * 12_000)
    assert n.cwnd == pytest.approx(4_096 + 614.4)


def test_quick_adapt_never_raises_a_sub_packet_window() -> None:
    n = Nscc(SUB, now=0)
    n.cwnd = 2_048
    n.qa_endtime = 1
    n.achieved_bytes = 4_200  # one whole packet in the window: more than the window's rate
    assert n.quick_adapt(True, True, 0, 10_000)
    assert n.cwnd == 2_048 and n.stats["qa"] == 1
    n.qa_endtime = 1
    n.achieved_bytes = 0  # nothing got through: down to the floor
    assert n.quick_adapt(True, True, 0, 40_000)
    assert n.cwnd == 1_024
    n.cwnd = 8_000  # at or above one MTU: the achieved bytes, as §4.3.5 says
    n.qa_endtime = 1
    n.achieved_bytes = 6_000
    assert n.quick_adapt(True, True, 0, 80_000)
    assert n.cwnd == 6_000


def test_ack_request_boundaries() -> None:
    n = fresh(cwnd=100_000, inflight=100_000 - 4_096 - 100)
    assert not n.ack_request(100)  # exactly one MTU of room left: no AR
    n.inflight += 1
    assert n.ack_request(100)  # less than one MTU
    n = fresh(cwnd=16_383, inflight=0)
    assert n.ack_request()  # a window under ACK_Gen_Trigger (16384): always AR
    n.cwnd = 16_384
    assert not n.ack_request()


def test_quadrant_boundaries_at_the_target_delay() -> None:
    n = fresh()
    n.on_ack(4_096, False, 12_000 + 9_000, 1_000)  # delay == target, no ECN: fair increase
    assert n.stats["fair"] == 1 and n.stats["prop"] == 0
    n = fresh()
    n.on_ack(4_096, True, 12_000 + 9_000, 1_000)  # delay == target with ECN: the decrease path
    assert n.stats["hold"] == 0
    n.on_ack(4_096, True, 12_000 + 8_999, 2_000)  # just below the target with ECN: hold
    assert n.stats["hold"] == 1


def test_loss_abandon_and_ignored_bytes() -> None:
    n = fresh(cwnd=50_000, inflight=20_000)
    n.on_inferred_loss(4_200, 1_000)
    assert n.bytes_ignored == 4_200 and n.inflight == 15_800 and n.cwnd == 45_800
    n.on_abandon(4_200)  # out of flight, no congestion signal
    assert n.inflight == 11_600 and n.cwnd == 45_800
    n.on_nack(4_200, None, True, True, True, 2_000)  # last-hop trim with RCCC: no cut
    assert n.bytes_ignored == 8_400 and n.inflight == 7_400 and n.cwnd == 45_800


def test_every_signal_that_moves_cwnd_is_logged() -> None:
    recs: list[dict] = []
    n = Nscc(CFG, now=0, log=recs.append)
    n.cwnd = 100_000
    n.inflight = 50_000
    n.on_ack(4_096, False, None, 1_000, pend=64)  # no RTT sample, but the penalty cuts cwnd
    assert recs[-1]["t"] == 1_000 and recs[-1]["cwnd"] == 50_000 - 4_096 - 2_048
    n.on_nack(4_096, None, False, False, False, 2_000)  # inflight changes, cwnd not: no record
    assert len(recs) == 1
    n.on_inferred_loss(4_096, 3_000)
    assert recs[-1]["t"] == 3_000 and recs[-1]["cwnd"] == 50_000 - 4_096 - 2_048 - 4_096
    n.trigger_qa = False
    n.on_nack(4_096, None, True, False, False, 4_000)  # trim: quick adapt or a cut
    assert recs[-1]["t"] == 4_000
