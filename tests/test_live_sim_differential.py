"""The live/sim differential in small (uet/experiments/differential.py; ``uet-bench differential`` runs the
whole bar): a 3:1 incast of one 64 KiB message per flow, live through the switch process with time
dilation and in the simulator, over UET — every message intact, FCT p50 and p99 within 10 % of the
simulator's. A fixed, generous factor keeps the live figures those of the network on a loaded
machine (the automatic choice is uet/live/dilation.py's, tested with exact numbers in
tests/test_clock_dilation.py, as is the bar's winner rule). RoCEv2 is left to ``uet-bench
differential``: its DCQCN paces every packet on a timer, and flows of 64 packets are too short for
that timer's real-time jitter (a loaded machine wakes a process milliseconds late) to average out
at a factor a test can afford."""

from __future__ import annotations

import asyncio

from uet.tools.run import build_parser, settings_from

from uet.experiments.differential import judge
from uet.live.dilation import Dilation
from uet.live.runs import live_runs
from uet.sim.runs import simulate_runs


def test_a_dilated_live_uet_incast_agrees_with_the_simulator():
    argv = ["-w", "incast", "-n", "4", "--messages", "1", "--size", "64KiB", "--transport", "uet", "--timeout", "60"]
    s, topo, ep = settings_from(build_parser().parse_args(argv))
    live = asyncio.run(live_runs(s, topo, ep, Dilation(100.0, "given")))
    sim = simulate_runs(s, topo, ep)
    bar = judge(live, sim)
    for t, res in live.items():
        assert res["dilation"]["factor"] == 100.0 and "kept_up" in res["dilation"]["verdict"], t
        assert res["elapsed_s"] < 1.0, t  # virtual seconds: about 20 ms of modelled traffic, not 100× that
    assert list(bar["transports"]) == ["uet"] and bar["ok"], bar
