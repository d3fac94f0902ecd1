"""NSCC (spec/behaviour.md §4.3, §4.4) at the edges of its rules: every comparison at its boundary,
the state a rule resets, the defaults a caller may leave out, a network other than the reference
one. Exact ACK sequences and times; the numbers are computed by hand from the constants of
``tests/test_cc_nscc.py`` (reference network, target_qdelay 9 µs, alpha·(target − delay) = 8192
per byte at a delay of 3 µs, eta 614.4, MaxWnd 225 000, adjust_bytes 32 768, qa gate
225 000 >> 3 = 28 125 bytes). Each test was written against a mutant of ``uet/cc/nscc.py`` that
the older tests let through (``python -m uet.tools.mutate uet.cc.nscc``).
"""

from __future__ import annotations

import pytest
from test_cc_nscc import CFG, fresh

from uet.cc import CcConfig, Nscc

#: alpha · (target 9000 − delay 3000): the proportional increase per byte at rtt 15 µs
PROP_3US = 8_192
ETA = 614.4


def test_scaling_factors_of_another_network() -> None:
    """§4.3.1 scales alpha, fi, fi_scale and eta by BDP / 150 000: at 400 Gb/s and 12 µs the BDP is
    600 000 bytes, scaling_a 4 (scaling_b stays 9000 / 12000 = 0.75)."""
    n = Nscc(CcConfig(link_bps=400e9, qa_threshold_ns=36_000))
    assert n.max_wnd == pytest.approx(900_000)
    assert n.alpha == pytest.approx(4 * 4_096 * 4 * 0.75 / 9_000)
    assert (n.fi, n.fi_scale, n.eta) == pytest.approx((81_920, 1.0, 2_457.6))


def test_constructor_time_defaults_to_zero() -> None:
    """``Nscc(cfg)`` starts its adjustment clock at 0: an ACK at exactly one base RTT adds eta."""
    n = Nscc(CFG)
    n.cwnd, n.inflight = 100_000, 100_000
    n.on_ack(4_096, False, 15_000, 12_000)
    assert n.cwnd == pytest.approx(100_000 + PROP_3US * 4_096 / 100_000 + ETA)
    assert n.last_adjust_time == 12_000


def test_fast_increase_needs_a_delay_under_one_microsecond() -> None:
    n = fresh()
    n.fi_count = 100_000
    n.on_ack(4_096, False, 13_000, 1_000)  # delay exactly 1 µs: not "about zero"
    assert n.fi_count == 0 and n.stats["fast"] == 0 and n.cwnd == 100_000
    assert n.inc_bytes == pytest.approx(12_288 / 9_000 * 4_096 * 8_000)
    n = fresh()
    n.fi_count = 100_000
    n.on_ack(4_096, False, 12_999, 1_000)  # 999 ns: fast increase, cwnd += 4096 · 0.25
    assert n.stats["fast"] == 1 and n.cwnd == pytest.approx(101_024)


def test_fast_increase_needs_more_than_one_window_of_low_delay_bytes() -> None:
    """A new NSCC is not in increase mode and counts from 0: ``fi_count > cwnd``, not ``>=``."""
    n = Nscc(CFG)
    n.cwnd, n.inflight = 4_096, 8_192
    n.on_ack(4_096, False, 12_000, 1_000)  # delay 0, fi_count 4096 == cwnd: proportional
    assert n.fi_count == 4_096 and not n.increase_mode and n.stats["fast"] == 0
    assert n.inc_bytes == pytest.approx(12_288 / 9_000 * 4_096 * 9_000)


def test_a_decrease_ends_increase_mode_and_restarts_the_count() -> None:
    n = fresh()
    n.fi_count = 100_000
    n.on_ack(4_096, False, 12_000, 1_000)  # fast: increase mode, fi_count 104 096
    assert n.increase_mode and n.stats["fast"] == 1
    n.avg_delay = 18_000
    n.on_ack(4_096, True, 32_000, 13_000)  # marked, delay 20 µs: multiplicative decrease
    assert n.stats["md"] == 1 and not n.increase_mode and n.fi_count == 0
    n.on_ack(4_096, False, 12_000, 14_000)  # delay 0 again: counts from 0, proportional
    assert n.fi_count == 4_096 and n.stats["fast"] == 1 and not n.increase_mode


def test_delay_filter_keeps_a_sample_equal_to_the_target() -> None:
    """Only an ECN-free sample *above* target is replaced by 0.25 × base_rtt."""
    n = fresh()
    n.on_ack(4_096, False, 21_000, 1_000)
    assert n.avg_delay == pytest.approx(0.0125 * 9_000)


def test_decrease_needs_an_average_above_target_and_more_than_one_base_rtt() -> None:
    n = fresh()
    n.avg_delay = 9_000.0
    n.on_ack(4_096, True, 21_000, 13_000)  # avg stays exactly 9000: no decrease
    assert n.avg_delay == 9_000.0 and n.stats["md"] == 0 and n.last_dec_time == 0
    assert n.cwnd == pytest.approx(100_000 + ETA)  # the periodic eta only
    # avg = 0.0125 · 40 000 + 0.9875 · 9000 = 9387.5; 20 µs since the last decrease (at 0)
    n.on_ack(4_096, True, 52_000, 20_000)
    cw = (100_000 + ETA) * (1 - 0.8 * 387.5 / 9_387.5)
    assert n.stats["md"] == 1 and n.last_dec_time == 20_000 and n.cwnd == pytest.approx(cw)
    n.on_ack(4_096, True, 52_000, 32_000)  # exactly one base RTT later: not yet
    assert n.stats["md"] == 1
    n.on_ack(4_096, True, 52_000, 32_001)
    assert n.stats["md"] == 2 and n.last_dec_time == 32_001


def test_adjustment_by_received_bytes_needs_more_than_adjust_bytes() -> None:
    n = fresh()
    n.on_ack(32_768, False, 15_000, 1_000)  # exactly adjust_bytes: no adjustment yet
    assert n.cwnd == 100_000 and n.inc_bytes == PROP_3US * 32_768
    n.on_ack(1, False, 15_000, 2_000)  # one byte more: apply, no eta (2 µs < base RTT)
    cw = 100_000 + PROP_3US * 32_769 / 100_000
    assert n.cwnd == pytest.approx(cw) and n.inc_bytes == 0 and n.received_bytes == 0
    n.on_ack(32_768, False, 15_000, 3_000)  # counts from 0 again: no adjustment
    assert n.cwnd == pytest.approx(cw)
    n.on_ack(4_096, False, 15_000, 4_000)  # 36 864 > 32 768: only this round's increase
    assert n.cwnd == pytest.approx(cw + PROP_3US * 36_864 / cw)


def test_adjustment_time_counts_from_the_last_adjustment() -> None:
    n = fresh()
    n.on_ack(4_096, False, 15_000, 12_000)  # one base RTT: apply and eta
    cw = 100_000 + PROP_3US * 4_096 / 100_000 + ETA
    assert n.cwnd == pytest.approx(cw) and n.last_adjust_time == 12_000
    n.on_ack(4_096, False, 15_000, 13_000)  # 1 µs later, 4096 bytes: nothing due
    assert n.cwnd == pytest.approx(cw)
    n.on_ack(40_960, False, 15_000, 14_000)  # by bytes, 2 µs after the last: no eta
    assert n.cwnd == pytest.approx(cw + PROP_3US * 45_056 / cw)
    assert n.last_adjust_time == 12_000


def test_fulfill_adjustment_caps_at_max_wnd() -> None:
    n = fresh(cwnd=225_000)
    n.inc_bytes = 1e9
    n.fulfill_adjustment(12_000)
    assert n.cwnd == 225_000


def test_window_never_below_one_mtu_when_a_tiny_rtt_shrinks_max_wnd() -> None:
    """An RTT sample of 20 ns makes MaxWnd 1.5 · 12.5 · 20 = 375 bytes, below the minimum window:
    the window still ends at one MTU (fast increase and the adjustment cap it at MaxWnd first)."""
    n = fresh()
    n.on_ack(40_960, False, 20, 1_000)
    assert n.max_wnd == pytest.approx(375) and n.cwnd == 4_096


def test_a_nack_with_a_smaller_rtt_lowers_base_rtt_and_the_window() -> None:
    n = Nscc(CFG, now=0)  # cwnd = MaxWnd 225 000
    n.inflight = 8_192
    n.on_nack(4_096, 10_000, False, False, False, 1_000)  # a plain NACK carrying an RTT sample
    assert n.base_rtt == 10_000 and n.max_wnd == pytest.approx(187_500)
    assert n.cwnd == pytest.approx(187_500)


# -- quick adapt (§4.3.5) ---------------------------------------------------------------------------


def _armed(inflight: int = 200_000, cfg: CcConfig = CFG) -> Nscc:
    """cwnd 100 000; a first ACK at 1 µs (4096 bytes, delay 3 µs) arms qa_endtime = 22 µs."""
    n = Nscc(cfg, now=0)
    n.cwnd, n.inflight = 100_000, inflight
    n.on_ack(4_096, False, 15_000, 1_000)
    return n


@pytest.mark.parametrize(("achieved", "qa"), [(28_124, True), (28_125, False)])
def test_quick_adapt_gate_is_an_eighth_of_max_wnd(achieved: int, qa: bool) -> None:
    recs: list[dict] = []
    n = _armed()
    n._log = recs.append
    n.on_ack(achieved - 4_096, False, 15_000, 5_000)
    n.on_ack(4_096, True, 52_000, 22_000)  # 40 µs of delay > 36 µs
    if qa:
        assert n.stats["qa"] == 1 and n.cwnd == achieved
        assert recs[-1] == {
            "t": 22_000,
            "ev": "cc",
            "algo": "nscc",
            "cwnd": achieved,
            "inflight": 200_000 - 4_096 - achieved,
            "base_rtt": 12_000,
            "avg_delay": 573,
        }
    else:
        # no quick adapt: the marked ACK with average 573.6 < target holds, the adjustment at 22
        # µs applies both proportional increases (4096 + 24 029 bytes) and eta
        assert n.stats["qa"] == 0
        assert n.cwnd == pytest.approx(100_000 + PROP_3US * 28_125 / 100_000 + ETA)


def test_quick_adapt_needs_a_trigger_not_only_few_bytes() -> None:
    """After qa_endtime, 4096 bytes achieved is far under the gate, but without a trim, a loss or
    a delay above qa_threshold nothing collapses."""
    n = _armed()
    n.on_ack(4_096, False, 15_000, 22_000)
    assert n.stats["qa"] == 0
    assert n.cwnd == pytest.approx(100_000 + PROP_3US * 8_192 / 100_000 + ETA)


@pytest.mark.parametrize(("rtt", "qa"), [(48_000, False), (48_001, True)])
def test_quick_adapt_delay_must_exceed_the_threshold(rtt: int, qa: bool) -> None:
    n = _armed()
    n.on_ack(4_096, True, rtt, 22_000)  # delay 36 000 (== qa_threshold) or 36 001
    assert n.stats["qa"] == int(qa)
    assert n.cwnd == (4_096 if qa else pytest.approx(100_000 + PROP_3US * 4_096 / 100_000 + ETA))


def test_disabled_quick_adapt_never_collapses() -> None:
    n = _armed(cfg=CcConfig(qa_threshold_ns=36_000, disable_quick_adapt=True))
    n.on_ack(4_096, True, 52_000, 22_000)  # would collapse to 4096 (see above)
    n.on_nack(4_096, None, True, False, False, 23_000)  # a trim: cut by the packet only
    assert n.stats["qa"] == 0 and n.qa_endtime == 0
    assert n.cwnd == pytest.approx(100_000 + PROP_3US * 4_096 / 100_000 + ETA - 4_096)


def test_quick_adapt_discards_the_pending_increase() -> None:
    n = _armed()  # inc 8192 · 4096 pending
    n.on_ack(4_096, False, 15_000, 13_000)  # one base RTT: applied, inc and received reset
    cw = 100_000 + PROP_3US * 8_192 / 100_000 + ETA
    assert n.cwnd == pytest.approx(cw) and n.last_adjust_time == 13_000
    n.on_ack(16_000, False, 15_000, 20_000)  # pending again: inc 8192 · 16 000, received 16 000
    n.on_ack(4_096, True, 52_000, 22_000)  # achieved 4096 + 16 000 + 4096 = 24 192: collapse
    assert n.stats["qa"] == 1 and n.cwnd == 24_192
    assert n.inc_bytes == 0 and n.received_bytes == 0
    n.on_ack(32_768, False, 15_000, 23_000)  # exactly adjust_bytes since the collapse: nothing
    assert n.cwnd == 24_192
    n.on_ack(4_096, False, 15_000, 25_000)  # one base RTT after 13 µs: only what came after
    assert n.cwnd == pytest.approx(24_192 + PROP_3US * 36_864 / 24_192 + ETA)


def _collapsed() -> Nscc:
    """tests/test_cc_nscc.py's quick adapt: cwnd 12 288, the 43 616 bytes in flight ignored."""
    n = fresh(inflight=60_000)
    for t in (1_000, 5_000, 9_000):
        n.on_ack(4_096, False, 15_000, t)
    n.on_ack(4_096, True, 52_000, 22_000)
    assert n.cwnd == 12_288 and n.bytes_to_ignore == 43_616
    return n


def test_a_trim_while_the_old_window_drains_changes_nothing() -> None:
    n = _collapsed()
    n.on_nack(4_096, None, True, False, False, 23_000)
    assert n.cwnd == 12_288 and n.stats["qa"] == 1 and n.bytes_ignored == 4_096


def test_a_trim_that_collapses_the_window_does_not_cut_it_again() -> None:
    n = _armed()
    n.on_ack(12_000, False, 15_000, 5_000)
    n.on_nack(4_096, None, True, False, False, 22_000)  # achieved 12 000: cwnd 12 000, no − 4096
    assert n.stats["qa"] == 1 and n.cwnd == 12_000


def test_marked_acks_count_again_once_the_old_window_has_drained() -> None:
    n = _collapsed()
    n.on_ack(43_616, False, 15_000, 24_000)  # the whole backlog from before the collapse
    assert n.bytes_ignored == 43_616
    n.avg_delay = 18_000
    cw = n.cwnd
    n.on_ack(4_096, True, 32_000, 25_000)  # marked, delay 20 µs: a decrease, not ignored
    assert n.stats["md"] == 1 and n.cwnd == pytest.approx(cw * (1 - 0.8 * 9_025 / 18_025))


def test_sub_packet_quick_adapt_at_exactly_one_mtu_takes_the_achieved_bytes() -> None:
    n = Nscc(CcConfig(qa_threshold_ns=36_000, min_cwnd=1_024), now=0)
    n.cwnd = 4_096.0
    n.qa_endtime = 1
    n.achieved_bytes = 6_000
    assert n.quick_adapt(True, True, 0, 10_000)
    assert n.cwnd == 6_000


# -- receiver window penalty (§4.4) -----------------------------------------------------------------


def test_penalty_of_one_128th() -> None:
    """pend = 1 is a penalty: cwnd = min(cwnd, inflight) − (1 · 4096 >> 7 = 32), no increase."""
    n = fresh(cwnd=100_000, inflight=80_000)
    n.on_ack(4_096, False, 15_000, 1_000, pend=1)
    assert n.cwnd == 75_904 - 32 and n.saved_cwnd == 100_000
    assert n.stats["penalty"] == 1 and n.stats["hold"] == 1 and n.stats["prop"] == 0
    assert n.inc_bytes == 0


def test_window_stays_cut_until_the_receiver_restores_it() -> None:
    n = fresh(cwnd=100_000, inflight=80_000)
    n.on_ack(4_096, False, 15_000, 1_000, pend=64)
    cut = 80_000 - 4_096 - 2_048
    n.on_ack(4_096, False, 15_000, 2_000)  # neither penalty nor restore
    assert n.cwnd == cut and n.saved_cwnd == 100_000
    n.on_ack(4_096, False, 15_000, 3_000, restore=True)
    assert n.cwnd == 100_000 and n.saved_cwnd == 0


def _cut_then_lower_max_wnd() -> Nscc:
    """cwnd = MaxWnd 225 000 cut by a penalty (saved), then an RTT of 10 µs lowers MaxWnd."""
    n = Nscc(CFG, now=0)
    n.inflight = 200_000
    n.on_ack(4_096, False, 15_000, 1_000, pend=64)
    n.on_ack(4_096, False, 10_000, 2_000)
    assert n.saved_cwnd == 225_000 and n.max_wnd == pytest.approx(187_500)
    return n


@pytest.mark.parametrize("rtt", [10_000, None])
def test_restore_never_goes_above_a_lowered_max_wnd(rtt: int | None) -> None:
    """MaxWnd caps every window (§4.3.1), also the one a restore brings back, whether or not the
    restoring ACK carries a valid RTT sample (§2.9)."""
    n = _cut_then_lower_max_wnd()
    n.on_ack(4_096, False, rtt, 3_000, restore=True)
    assert n.saved_cwnd == 0 and n.cwnd == pytest.approx(187_500)


def test_restore_without_a_saved_window_keeps_cwnd() -> None:
    n = fresh()
    n.on_ack(4_096, False, None, 1_000, restore=True)
    assert n.cwnd == 100_000


def test_a_one_byte_saved_window_is_restored_and_forgotten() -> None:
    n = Nscc(CcConfig(min_cwnd=1), now=0)
    n.cwnd, n.inflight = 1.0, 0
    n.on_ack(0, False, None, 1_000, pend=127)  # saves cwnd 1
    n.on_ack(0, False, None, 2_000, restore=True)
    assert n.cwnd == 1 and n.saved_cwnd == 0
    n.cwnd, n.inflight = 5_000.0, 4_000
    n.on_ack(0, False, None, 3_000, pend=127)  # saves 5000, cut to the 4000 in flight
    assert n.cwnd == 4_000
    n.on_ack(0, False, None, 4_000, restore=True)
    assert n.cwnd == 5_000


# -- sending (§4.3.3) ---------------------------------------------------------------------------------


def test_can_send_boundaries() -> None:
    n = fresh(cwnd=10_000, inflight=4_000)
    assert n.can_send(6_000, 0)  # exactly fills the window
    n.cwnd, n.inflight = 4_096, 1
    assert not n.can_send(4_096, 0)  # one byte in flight is in flight


def test_ack_request_default_size_is_zero() -> None:
    n = fresh(cwnd=100_000, inflight=100_000 - 4_096)
    assert not n.ack_request()  # exactly one MTU of room


def test_pacing_lets_the_first_packet_go_at_time_zero() -> None:
    n = Nscc(CcConfig(pacing=True), now=0)
    assert n.can_send(4_000, 0) and n.pacing_deadline(0) is None


def test_sub_packet_window_with_bytes_still_in_flight_waits_for_an_ack() -> None:
    n = Nscc(CcConfig(qa_threshold_ns=36_000, min_cwnd=1_024), now=0)
    n.cwnd = 2_048
    n.on_send(4_200, 1_000)
    n.on_ack(4_199, False, None, 20_000)  # one byte still in flight
    assert n.inflight == 1
    assert n.pacing_deadline(20_000) is None  # not 25 µs: only an ACK opens the window
    assert not n.can_send(4_200, 30_000)


@pytest.mark.parametrize(("pacing", "off"), [(False, False), (True, True)])
def test_the_per_packet_switches_are_the_configurations(pacing: bool, off: bool) -> None:
    """NSCC keeps ``pacing`` and ``disable_quick_adapt`` as its own fields (read per packet) and
    they act as the configuration says: the pacer holds a second packet, quick adapt stays off."""
    n = Nscc(CcConfig(pacing=pacing, disable_quick_adapt=off, qa_threshold_ns=1), now=0)
    assert (n.pacing, n.quick_adapt_off) == (pacing, off)
    n.on_send(4096, 0)
    assert n.can_send(4096, 0) is not pacing
    assert (n.pacing_deadline(0) is not None) is pacing
    n.bytes_to_ignore = 1  # a CE mark while bytes are still being ignored: quick adapt acts
    assert n.quick_adapt(False, True, 0.0, 1) is (not off)
