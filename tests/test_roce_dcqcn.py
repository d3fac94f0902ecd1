"""DCQCN against numbers worked out by hand from spec/rocev2-and-fabric.md §5.2, §7."""

from __future__ import annotations

from dataclasses import replace

import pytest

from uet.roce.dcqcn import DcqcnConfig, NotificationPoint, ReactionPoint

G = 1e9
M = 1e6
US = 1_000
D = 255 / 256  # 1 - g


def approx(x: float) -> object:
    return pytest.approx(x, rel=1e-12)


def run_timers(rp: ReactionPoint, until: int) -> None:
    while (t := rp.get_timer()) is not None and t <= until:
        rp.handle_timer(t)


def test_paper_constants_scale_with_line_rate() -> None:
    c = DcqcnConfig.paper(40 * G)
    assert (c.r_ai, c.r_hai, c.r_min) == (40 * M, 200 * M, 100 * M)
    assert (c.g, c.stages, c.alpha_period_ns, c.increase_period_ns, c.cnp_holdoff_ns) == (
        1 / 256,
        5,
        55 * US,
        55 * US,
        50 * US,
    )
    c100 = DcqcnConfig.paper(100 * G)
    assert (c100.r_ai, c100.r_hai, c100.r_min) == (approx(100 * M), approx(500 * M), approx(250 * M))
    s = c.scaled(5)
    assert (s.alpha_period_ns, s.increase_period_ns, s.cnp_holdoff_ns, s.byte_counter) == (
        275 * US,
        275 * US,
        250 * US,
        5 * c.byte_counter,
    )
    n = DcqcnConfig.nvidia(100 * G)
    assert (n.r_ai, n.r_hai, n.r_min, n.stages, n.byte_counter) == (20 * M, 200 * M, 1 * M, 1, 0)
    with pytest.raises(ValueError):
        DcqcnConfig(profile="other")


def test_paper_cut_fast_recovery_and_additive_increase() -> None:
    rp = ReactionPoint(DcqcnConfig.paper(40 * G))
    assert rp.rate == 40 * G and rp.get_timer() is None
    rp.on_cnp(0)  # first CNP: alpha = 1, Rt = 40G, Rc = 40G * (1 - 1/2)
    assert (rp.alpha, rp.target, rp.rate) == (1.0, 40 * G, 20 * G)
    rp.on_cnp(10 * US)  # alpha = (1-g)*1 + g = 1; Rt = 20G, Rc = 10G
    assert (rp.alpha, rp.target, rp.rate) == (1.0, 20 * G, 10 * G)
    assert rp.get_timer() == 65 * US  # the increase timer restarted
    expect = [15 * G, 17.5 * G, 18.75 * G, 19.375 * G]  # fast recovery: Rc = (Rt + Rc) / 2
    for k, want in enumerate(expect, 1):
        rp.handle_timer(10 * US + k * 55 * US)
        assert rp.rate == approx(want) and rp.target == 20 * G and rp.time_stage == k
    rp.handle_timer(285 * US)  # stage 5 = F: additive increase Rt += 40M
    assert rp.target == approx(20.04 * G) and rp.rate == approx((20.04 + 19.375) / 2 * G)
    rp.handle_timer(340 * US)  # stage 6, byte stage 0 < F: still additive
    assert rp.target == approx(20.08 * G) and rp.rate == approx((20.08 + (20.04 + 19.375) / 2) / 2 * G)


def test_paper_alpha_decays_every_k_without_cnp() -> None:
    rp = ReactionPoint(DcqcnConfig.paper(40 * G))
    rp.on_cnp(0)
    assert rp.current_alpha(54 * US) == 1.0
    assert rp.current_alpha(55 * US) == approx(D)
    assert rp.current_alpha(3 * 55 * US + 1) == approx(D**3)
    run_timers(rp, 115 * US)  # increases at 55 and 110: Rc 30G, 35G
    assert rp.rate == approx(35 * G)
    rp.on_cnp(115 * US)  # two decays, then alpha = (1-g) alpha + g; Rt = Rc = 35G
    a = D * D**2 + 1 / 256
    assert rp.alpha == approx(a) and rp.target == approx(35 * G) and rp.rate == approx(35 * G * (1 - a / 2))
    assert rp.current_alpha(115 * US + 55 * US) == approx(a * D)  # the alpha timer restarted at the CNP


def test_paper_byte_counter_and_hyper_increase_with_halving() -> None:
    c = replace(DcqcnConfig.paper(40 * G), stages=1, byte_counter=1000)
    rp = ReactionPoint(c)
    rp.on_cnp(0)  # Rc 20G, Rt 40G
    rp.on_cnp(2)  # alpha 1: Rt 20G... no: Rt = Rc = 20G, Rc = 10G
    assert (rp.target, rp.rate) == (20 * G, 10 * G)
    rp.on_sent(1000, 3)  # byte stage 1 = F, time stage 0: additive
    assert rp.byte_stage == 1 and rp.target == approx(20.04 * G) and rp.rate == approx(15.02 * G)
    rp.handle_timer(2 + 55 * US)  # time stage 1: both at F: hyper, i = 1: Rt += 200M
    assert rp.target == approx(20.24 * G) and rp.rate == approx((20.24 + 15.02) / 2 * G)
    assert rp.get_timer() == 2 + 55 * US + 55 * US // 2  # hyper: T/2
    r = rp.rate
    rp.on_sent(499, 4)
    assert rp.rate == r  # byte threshold halved to 500: not yet
    rp.on_sent(1, 5)  # byte stage 2: hyper with i = min(1, 2) - 1 + 1 = 1
    assert rp.byte_stage == 2 and rp.target == approx(20.44 * G) and rp.rate == approx((20.44 * G + r) / 2)


def test_paper_rt_div8_on_first_increase_after_a_deep_cut() -> None:
    c = replace(DcqcnConfig.paper(40 * G), r_min=1 * G)
    rp = ReactionPoint(c)
    rp.on_cnp(0)
    rp.target = 40 * G
    rp.rate = 3 * G  # Rt > 10 Rc (as after cuts floored at Rmin)
    rp.handle_timer(55 * US)
    assert rp.target == 5 * G and rp.rate == 4 * G  # Rt / 8, then Rc = (Rt + Rc) / 2
    rp.handle_timer(110 * US)
    assert rp.target == 5 * G and rp.rate == 4.5 * G  # only the first increase after a cut


def test_paper_rate_floor_and_recovery_stops_the_timer() -> None:
    c = replace(DcqcnConfig.paper(40 * G), r_min=15 * G)
    rp = ReactionPoint(c)
    rp.on_cnp(0)
    rp.on_cnp(1)
    assert rp.rate == 15 * G  # max(Rmin, 20G / 2)
    run_timers(rp, 10**12)
    assert rp.rate == 40 * G and rp.target == 40 * G and rp.get_timer() is None


def test_rate_limiter_paces_by_frame_bytes() -> None:
    rp = ReactionPoint(DcqcnConfig.paper(40 * G))
    rp.on_cnp(0)  # 20 Gb/s
    assert rp.next_send_time() == 0
    rp.on_sent(1000, 1000)  # 8000 bits at 20 Gb/s = 400 ns
    assert rp.next_send_time() == 1400
    rp.on_sent(1000, 1100)  # sent early (a burst the caller allowed): queued behind the previous
    assert rp.next_send_time() == 1800
    rp.on_sent(1000, 5000)  # idle gathers no credit
    assert rp.next_send_time() == 5400


def test_rate_limiter_keeps_its_rate_when_departures_are_late() -> None:
    """Departures each 50 ns late (a live endpoint's timer firing late) keep the rate: each is
    charged from when it was due; one later than a whole gap restarts the schedule."""
    rp = ReactionPoint(DcqcnConfig.paper(40 * G))
    rp.on_cnp(0)  # 20 Gb/s: 400 ns per 1000-byte frame
    rp.on_sent(1000, 10_000)
    for k in range(1, 11):
        due = rp.next_send_time()
        assert due == 10_000 + 400 * k
        rp.on_sent(1000, due + 50)
    assert rp.next_send_time() == 10_000 + 400 * 11  # 10 departures in 4 µs, not in 4.5 µs
    rp.on_sent(1000, rp.next_send_time() + 400)  # a gap late: idle, no credit
    assert rp.next_send_time() == 10_000 + 400 * 11 + 800


def test_nvidia_profile_alpha_periods_and_delayed_cut() -> None:
    c = DcqcnConfig.nvidia(25 * G)  # Pa 1 us, Pd 4 us, T 300 us, F 1, R_AI 5M, R_HAI 50M
    rp = ReactionPoint(c)
    rp.on_cnp(0)
    assert rp.alpha == 1023 / 1024 and rp.rate == 25 * G  # the cut waits for the Pd boundary
    assert rp.get_timer() == 4 * US
    rp.handle_timer(4 * US)
    # four alpha boundaries (1, 2, 3, 4 us): the first with the CNP, then three pure decays
    a = (D * 1023 / 1024 + 1 / 256) * D**3
    assert rp.alpha == approx(a)
    assert rp.target == 25 * G  # time stage 0 and no clamp: Rt kept
    assert rp.rate == approx(25 * G * (1 - a / 2))
    r1 = rp.rate
    assert rp.get_timer() == 304 * US
    rp.handle_timer(304 * US)  # stage 1 = F: Rt + R_AI (capped at line rate)
    assert rp.target == 25 * G and rp.rate == approx((25 * G + r1) / 2)
    # a CNP at 305.5 us: one cut at the next Pd boundary (anchor 0: 308 us), Rt clamped (stage > 0)
    rp.on_cnp(305_500)
    rp.on_cnp(306_000)  # a second CNP in the same period: still one cut
    assert rp.get_timer() == 308 * US
    r2 = rp.rate
    rp.handle_timer(308 * US)
    assert rp.target == approx(r2) and rp.rate < r2 and rp.time_stage == 0
    assert rp.get_timer() == 608 * US


def test_nvidia_hyper_increase_after_f_stages() -> None:
    c = replace(DcqcnConfig.nvidia(25 * G), clamp_tgt_rate=True)
    rp = ReactionPoint(c)
    rp.on_cnp(0)
    rp.handle_timer(4 * US)  # clamp: Rt = 25G before the cut
    r = rp.rate
    rp.target = 20 * G  # make the increases visible
    rp.handle_timer(304 * US)  # stage 1 == F: additive 5M
    assert rp.target == approx(20.005 * G) and rp.rate == approx((20.005 * G + r) / 2)
    r = rp.rate
    rp.handle_timer(604 * US)  # stage 2 > F: hyper 50M
    assert rp.target == approx(20.055 * G) and rp.rate == approx((20.055 * G + r) / 2)


def test_nvidia_min_dec_fac_bounds_one_cut() -> None:
    c = replace(DcqcnConfig.nvidia(25 * G), min_dec_fac=0.8)
    rp = ReactionPoint(c)
    rp.on_cnp(0)
    rp.handle_timer(4 * US)
    assert rp.rate == approx(20 * G)  # alpha ~1 would halve it; the factor keeps 80 %


def test_notification_point_holdoff() -> None:
    np_ = NotificationPoint(50 * US)
    assert np_.on_ce(0) is True
    assert np_.on_ce(49_999) is False
    assert np_.on_ce(50_000) is True
    assert np_.on_ce(50_001) is False
    assert (np_.marked, np_.cnps) == (4, 2)
    zero = NotificationPoint(0)
    assert all(zero.on_ce(t) for t in (5, 5, 6))
