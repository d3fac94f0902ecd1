"""Time dilation of the live engine (uet/clock.py, uet/live/dilation.py): the one real → virtual
mapping, how each adapter uses it (endpoint timer, fabric link PFC pause, switch process timer and
model time), the factor's choice and the kept-up verdict, and the live/sim bar's judgement.
Every test runs on a fake real clock: exact instants, no wall-clock bound."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from uet.clock import DilatedClock
from uet.experiments.differential import judge
from uet.live.dilation import choose, packet_rate, verdict


class FakeReal:
    """A real clock that moves only when told (integer ns)."""

    def __init__(self, t: int = 5_000_000_000) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


class RecordingLoop:
    """A loop stand-in that records the real delays timers are asked for."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.delays: list[float] = []

    def call_later(self, delay: float, cb: Any, *args: Any) -> asyncio.TimerHandle:
        self.delays.append(delay)
        return self.loop.call_later(3600, cb, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loop, name)


def test_virtual_time_runs_factor_times_slower_from_the_shared_start():
    real = FakeReal()
    c = DilatedClock(10, start_ns=real.t, real=real)
    assert c() == real.t  # at the start instant both agree
    real.t += 1_000_000_000  # one real second later...
    assert c() == c.start_ns + 100_000_000  # ...0.1 virtual seconds have passed
    assert c.seconds() == pytest.approx((c.start_ns + 100_000_000) / 1e9)
    # a virtual deadline 5 µs ahead fires 50 µs of real time ahead
    assert c.real_at(c() + 5_000) == real.t + 50_000
    assert c.real_delay(5_000) == pytest.approx(50e-6)
    assert c.virtual_seconds(2.0) == pytest.approx(0.2)
    # every process of a run builds the same clock from the launcher's spec
    twin = DilatedClock.from_spec(c.spec())
    assert (twin.factor, twin.start_ns) == (10.0, c.start_ns)


def test_factor_one_is_real_time_and_a_bad_factor_is_refused():
    real = FakeReal()
    c = DilatedClock(1, start_ns=123, real=real)
    assert c() == real.t and c.real_at(real.t + 7) == real.t + 7 and c.real_delay(1e9) == 1.0
    with pytest.raises(ValueError):
        DilatedClock(0)


async def test_endpoint_timer_waits_the_real_time_of_the_virtual_deadline():
    """CoreDriver arms the core's deadline (virtual ns) as a real delay × the factor."""
    from uet.adapter import CoreDriver

    real = FakeReal()

    class Driver(CoreDriver):
        def __init__(self) -> None:
            self.loop = RecordingLoop(asyncio.get_running_loop())  # type: ignore[assignment]
            self.clock = DilatedClock(25, start_ns=real.t, real=real)
            self._init_driver(object())

    d = Driver()
    now = d.clock()
    d._arm(now + 40_000, now)  # the core wants to run 40 µs (virtual) from now
    assert d.loop.delays == [pytest.approx(40_000 * 25 / 1e9)]  # type: ignore[attr-defined]
    d._timer.cancel()  # type: ignore[union-attr]


async def test_fabric_link_pause_quanta_are_virtual_bit_times():
    """A PFC pause of q quanta lasts q × 512 bit times of the (virtual) link rate: virtual on the
    link's clock, × the factor in real time."""
    from uet.link.fabric import FabricLink
    from uet.wire.build import build_pfc_frame

    real = FakeReal()
    clock = DilatedClock(8, start_ns=real.t, real=real)
    link = FabricLink("10.0.0.1", ("127.0.0.1", 9), rate_bps=1_000_000, clock=clock)
    rec = RecordingLoop(link.loop)
    link.loop = rec  # type: ignore[assignment]
    try:
        real.t += 3_000  # the pause arrives 3 µs (real) after the start
        assert link.parse(build_pfc_frame({0: 10}, src_mac=b"\x02" * 6)) is None
        dur = 10 * 512 * 1000  # 10 quanta at 1 Mb/s: 5.12 ms of virtual time
        assert link.paused_until[0] == clock() + dur
        link.send(b"held", "10.0.1.2", entropy=1, dscp=0)
        # the held frame's release is armed at the pause's end: × the factor in real time
        assert link.held == 1 and rec.delays == [pytest.approx(dur * 8 / 1e9)]
        real.t += dur * 8  # the pause ends in virtual time: the next frame is not held
        link.send(b"next", "10.0.1.2", entropy=1, dscp=0)
        assert link.held == 0 and link.paused_until[0] == 0
    finally:
        link.close()


async def test_switch_model_time_and_timer_expiry_are_dilated():
    from uet.fabric.profiles import load_topology
    from uet.fabric.switch import FabricProcess

    real = FakeReal()
    clock = DilatedClock(20, start_ns=real.t - 2_000_000, real=real)  # the run began 2 ms ago
    fp = FabricProcess(load_topology("default", profile="realtime"), clock=clock)
    await fp.start()
    armed: list[int] = []
    try:
        assert fp.now() == 100_000  # 2 ms of real time = 100 µs of model time
        fp.timer.arm = armed.append
        fp._armed_for = None
        fp.fabric.inject(0, _frame_to_host(fp, 1), fp.now())
        fp._pump(fp.now())
        nxt = fp.fabric.next_deadline()
        assert nxt is not None and armed == [clock.real_at(clock.start_ns + nxt)]
        real.t = armed[0] + 20 * 7_000  # the timer fires 140 µs (real) late: 7 µs in model time
        fp._on_timer()
        assert fp.lateness == [7_000] and fp.pacing()["dilation"] == 20.0
    finally:
        fp.close()


def _frame_to_host(fp: Any, dst: int) -> bytes:
    from uet.wire.build import build_frame

    hosts = fp.fabric.hosts
    return build_frame(b"\x10\x00" + bytes(200), hosts[0].ip, hosts[dst].ip, entropy=7)


def test_the_automatic_factor_follows_the_packet_rate_and_the_cores(monkeypatch):
    import uet.live.dilation as dil

    monkeypatch.setattr(dil, "cores", lambda: 2)
    r = packet_rate(1, 100_000_000, 1024)
    assert r == pytest.approx(100e6 / ((1024 + 122) * 8))
    # for the CPU: R × (LIVE_PER_SIM × 100 µs) ÷ (2 cores × 50 %); for the timers: 1 ms of real
    # time at most 15 % of a 91.7 µs frame time of virtual time; the larger, rounded up to a tenth
    d = choose(1, 100_000_000, 1024, per_packet_s=100e-6, load=0.5)
    assert d.basis["for_cpu"] == pytest.approx(5.5) and d.basis["for_timers"] == pytest.approx(72.7)
    assert d.how == "auto" and d.factor == pytest.approx(72.8) and d.basis["cores"] == 2
    assert choose(16, 100_000_000, 1024, per_packet_s=100e-6, load=0).factor == pytest.approx(87.3)
    assert choose(1, 1_000_000, 1024, per_packet_s=100e-6, load=0).factor == 1.0  # never below real time


def test_the_automatic_factor_grows_with_the_machines_load(monkeypatch):
    """On a busy machine a woken endpoint waits for a CPU about load ÷ cores scheduler slices
    (uet/live/dilation.py, ``G``): at load 15 on 2 cores 9.75 ms, which the factor keeps within 15 %
    of a 91.7 µs frame time of virtual time; below about 1.5 the timers' 1 ms grain is the larger."""
    import uet.live.dilation as dil

    monkeypatch.setattr(dil, "cores", lambda: 2)
    d = choose(1, 100_000_000, 1024, per_packet_s=100e-6, load=15.0)
    assert d.basis["timer_late_ms"] == 9.75 and d.factor == pytest.approx(709.0)
    assert choose(1, 100_000_000, 1024, per_packet_s=100e-6, load=1.5).factor == pytest.approx(72.8)
    monkeypatch.setattr(dil, "load_average", lambda: 8.0)
    assert choose(1, 100_000_000, 1024, per_packet_s=100e-6).basis["timer_late_ms"] == 5.2


def test_the_verdict_names_what_the_cpu_could_not_keep_up_with():
    frame_ns = (1024 + 122) * 8e9 / 100e6  # 91.7 µs
    ok = {"pacing": {"p99_us": 9 * frame_ns / 1000}, "switch_kernel": {"rx_queue_max_bytes": 64 * 1024}}
    v = verdict(ok, 100_000_000, 1024)
    assert v["kept_up"] and v["why"] == []
    late = {"pacing": {"p99_us": 11 * frame_ns / 1000}, "switch_kernel": {"nic_rx_drops": 3}}
    v = verdict(late, 100_000_000, 1024)
    assert not v["kept_up"] and len(v["why"]) == 2 and "3 frames were dropped" in v["why"][1]


def test_endpoints_that_wake_late_did_not_keep_up():
    """An endpoint process waiting for a CPU is late for its sockets and timers alike; past
    LAG_FRAMES frame times (p99, virtual) the run did not keep up."""
    from uet.live.dilation import LAG_FRAMES

    frame_us = (1024 + 122) * 8e6 / 100e6  # 91.7 µs
    below = {"endpoint_lag": {"p99_us": 0.9 * LAG_FRAMES * frame_us}}
    v = verdict(below, 100_000_000, 1024)
    assert v["kept_up"] and v["endpoint_lag_p99_us"] == pytest.approx(0.9 * LAG_FRAMES * frame_us)
    above = {"endpoint_lag": {"p99_us": 1.1 * LAG_FRAMES * frame_us}}
    v = verdict(above, 100_000_000, 1024)
    assert not v["kept_up"] and v["why"] == [
        f"endpoint processes woke {1.1 * LAG_FRAMES * frame_us:,.0f} µs late (p99, virtual; more than "
        f"{LAG_FRAMES:g} frame times)"
    ]


def test_loop_lag_is_summarised_per_rank_and_for_the_run_in_virtual_time():
    from uet.live.result import endpoint_lag
    from uet.live.worker import lag_summary

    one = lag_summary([i * 1000 for i in range(100)])  # 0 … 99 µs
    assert one == {"samples": 100, "p50_us": 50.0, "p99_us": 99.0, "max_us": 99.0}
    assert lag_summary([]) == {"samples": 0, "p50_us": 0.0, "p99_us": 0.0, "max_us": 0.0}
    other = {"samples": 5, "p50_us": 10.0, "p99_us": 400.0, "max_us": 900.0}
    run = endpoint_lag([one, other, lag_summary([])], 100.0)  # the worst rank, ÷ the factor
    assert run == {"ranks": 2, "p99_us_real": 400.0, "max_us_real": 900.0, "p99_us": 4.0, "max_us": 9.0}


def test_a_live_run_short_of_cpu_is_run_again_at_twice_the_automatic_factor(monkeypatch):
    """uet-bench differential judges figures of the network: an automatic-factor run whose CPU did
    not keep up runs once more at twice the factor; a factor the user gave is kept."""
    import uet.live.runs as run
    from uet.live.dilation import Dilation

    factors: list[float] = []

    async def fake(s, topo, ep, dil):
        factors.append(dil.factor)
        kept = dil.factor >= 200
        return {"transport": s["transport"], "dilation": {**dil.record(), "verdict": {"kept_up": kept}}}

    monkeypatch.setattr(run, "_live_quiet", fake)
    runs = asyncio.run(run.live_runs({"transport": "both"}, {}, {}, Dilation(100.0, "auto")))
    assert factors == [100.0, 200.0, 100.0, 200.0]
    assert runs["uet"]["dilation"]["factor"] == 200.0 and runs["uet"]["dilation"]["retried_from"] == 100.0
    factors.clear()
    runs = asyncio.run(run.live_runs({"transport": "uet"}, {}, {}, Dilation(100.0, "given")))
    assert factors == [100.0] and "retried_from" not in runs["uet"]["dilation"]


def _run(ok: bool, p50: float, p99: float) -> dict[str, Any]:
    return {"ok": ok, "fct": {"p50_s": p50, "p99_s": p99}}


def test_the_bar_holds_within_ten_percent_and_the_same_winner():
    sim = {"uet": _run(True, 0.168, 0.195), "roce": _run(True, 0.137, 0.182)}
    live = {"uet": _run(True, 0.160, 0.196), "roce": _run(True, 0.144, 0.183)}
    bar = judge(live, sim)
    assert bar["ok"] and bar["winner"]["live"] == bar["winner"]["sim"] == "roce"  # p99s 6.6–6.7 % apart
    assert bar["transports"]["uet"]["p50"]["delta"] == pytest.approx(-0.0476, abs=1e-4)
    off = judge({**live, "uet": _run(True, 0.190, 0.196)}, sim)  # UET p50 13 % above the simulator's
    assert not off["ok"] and not off["transports"]["uet"]["ok"] and off["transports"]["roce"]["ok"]
    broken = judge({**live, "roce": _run(False, 0.144, 0.183)}, sim)
    assert not broken["ok"] and not broken["transports"]["roce"]["intact"]
    flipped = judge(
        {"uet": _run(True, 0.1, 0.10), "roce": _run(True, 0.1, 0.2)},
        {"uet": _run(True, 0.1, 0.2), "roce": _run(True, 0.1, 0.1)},
    )
    assert flipped["winner"] == {**flipped["winner"], "live": "uet", "sim": "roce", "ok": False}
    # a tie in one engine (p99s 3 % apart) contradicts no winner of the other
    tied = judge({"uet": _run(True, 0.1, 0.1), "roce": _run(True, 0.1, 0.097)}, sim)
    assert tied["winner"]["live"] == "tie" and tied["winner"]["ok"]


def test_the_bar_judges_against_the_simulators_range_over_endpoint_seeds():
    """UET's incast p50 under the fixed window hangs on the endpoints' own draws (uet/experiments/differential.py):
    a live p50 13 % from the run seed's simulated one is within 10 % of the range the simulator gives
    over endpoint seeds; 10 % beyond the range's end is not."""
    sim = {"uet": _run(True, 0.172, 0.195), "roce": _run(True, 0.137, 0.182)}
    spread = [
        {"uet": _run(True, 0.122, 0.194), "roce": _run(True, 0.137, 0.182)},
        {"uet": _run(True, 0.157, 0.196), "roce": _run(True, 0.137, 0.182)},
    ]
    live = {"uet": _run(True, 0.150, 0.196), "roce": _run(True, 0.144, 0.183)}
    assert not judge(live, sim)["transports"]["uet"]["ok"]  # one sample: 12.8 % off
    bar = judge(live, sim, spread)
    row = bar["transports"]["uet"]["p50"]
    assert bar["ok"] and row["range"] == [0.122, 0.172] and row["outside"] == 0.0
    assert row["delta"] == pytest.approx(-0.1279, abs=1e-4)  # still reported against the run seed's
    low = judge({**live, "uet": _run(True, 0.108, 0.196)}, sim, spread)["transports"]["uet"]
    assert not low["ok"] and low["p50"]["outside"] == pytest.approx(-0.1148, abs=1e-4)
    assert judge({**live, "uet": _run(True, 0.112, 0.196)}, sim, spread)["ok"]
    # RoCEv2's range is a point: the plain 10 % of the run seed's figure
    assert bar["transports"]["roce"]["p50"]["range"] == [0.137, 0.137]
    assert not judge({**live, "roce": _run(True, 0.152, 0.183)}, sim, spread)["transports"]["roce"]["ok"]


def test_the_launcher_waits_the_runs_timeout_dilated():
    """``timeout_s`` is virtual time: the launcher waits TDF times longer for the ranks' reports,
    as the ranks wait for their workload (a run dilated ×800 failed after 150 real seconds)."""
    from uet.live.launcher import Launcher

    launcher = Launcher({"timeout_s": 2.0}, {}, {})
    assert launcher.collect_timeout_s() == pytest.approx(32.0)
    launcher.clock = DilatedClock(100.0, start_ns=0, real=FakeReal())
    assert launcher.collect_timeout_s() == pytest.approx(230.0)
