"""The four §9.2 experiments, UET against RoCEv2, and their expected outcomes
(rocev2-and-fabric.md §9.2, §9.3; issue 12): which scenario file each experiment runs and the
checks its §9.1 metrics (:mod:`uet.experiments.compare`) are held to, and the run of them
(:func:`run_experiments`: each file's settings from the scenario model, run in virtual time).
``python -m uet.tools.roce_experiments`` runs them and prints the tables.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from uet.experiments.compare import comparison
from uet.scenario.check import ScenarioError
from uet.scenario.read import Given, resolve
from uet.sim.runs import ProgressLine, simulate_runs

__all__ = ["CHECKS", "EXPERIMENTS", "Check", "Metrics", "check_outcomes", "run_experiments"]

#: name → scenario file (under ``scenarios/roce``), in the order of §9.2
EXPERIMENTS: dict[str, str] = {
    "incast_victim": "incast_victim.toml",
    "permutation": "permutation.toml",
    "permutation_roce_sprayed": "permutation_roce_sprayed.toml",
    "all_to_all": "all_to_all.toml",
    "allreduce": "allreduce.toml",
}

Metrics = dict[str, dict[str, Any]]
#: one expectation: (experiment, what is expected, test over {experiment: {transport: metrics}})
Check = tuple[str, str, Callable[[dict[str, Metrics]], bool]]


def _m(res: dict[str, Metrics], exp: str, tr: str, key: str) -> Any:
    return res[exp][tr].get(key)


#: the expected outcomes of §9.2 (and §9.3's "expected qualitative outcome in our model")
CHECKS: tuple[Check, ...] = (
    (
        "incast_victim",
        "RoCE: PFC pauses (XOFF frames sent)",
        lambda r: _m(r, "incast_victim", "roce", "pause_frames") > 0,
    ),
    (
        "incast_victim",
        "RoCE: the pauses spread beyond the receiver's leaf (>1 switch paused) back to the senders",
        lambda r: (
            _m(r, "incast_victim", "roce", "pause_switches") > 1 and _m(r, "incast_victim", "roce", "paused_hosts") > 0
        ),
    ),
    (
        "incast_victim",
        "RoCE: the victim flow slows down more than with UET",
        lambda r: _m(r, "incast_victim", "roce", "victim_slowdown") > _m(r, "incast_victim", "uet", "victim_slowdown"),
    ),
    (
        "incast_victim",
        "RoCE: lossless, no go-back-N resends",
        lambda r: (
            _m(r, "incast_victim", "roce", "drops") == 0 and _m(r, "incast_victim", "roce", "retransmitted_bytes") == 0
        ),
    ),
    (
        "incast_victim",
        "UET: no pauses; trims and NACK-driven resends instead",
        lambda r: _m(r, "incast_victim", "uet", "pause_frames") == 0 and _m(r, "incast_victim", "uet", "trims") > 0,
    ),
    (
        "permutation",
        "RoCE on ECMP: collisions load the busiest uplink at >= 2x the mean",
        lambda r: (_m(r, "permutation", "roce", "uplink_imbalance") or 0) >= 2,
    ),
    (
        "permutation",
        "RoCE on ECMP: below 1 - 1/e (63 %) of bisection",
        lambda r: _m(r, "permutation", "roce", "bisection_share") < 0.632,
    ),
    (
        "permutation",
        "UET spraying: uplinks more even than RoCE's, near-full bisection (>= 75 %)",
        lambda r: (
            _m(r, "permutation", "uet", "uplink_imbalance") < _m(r, "permutation", "roce", "uplink_imbalance")
            and _m(r, "permutation", "uet", "bisection_share") >= 0.75
        ),
    ),
    (
        "permutation_roce_sprayed",
        "RoCE forced to spray: sequence-error NAKs and go-back-N resends",
        lambda r: (
            _m(r, "permutation_roce_sprayed", "roce", "naks") > 0
            and _m(r, "permutation_roce_sprayed", "roce", "retransmitted_bytes") > 0
        ),
    ),
    (
        "permutation_roce_sprayed",
        "RoCE forced to spray: a worse tail (p99 slowdown) than RoCE on ECMP",
        lambda r: (
            "permutation" in r
            and _m(r, "permutation_roce_sprayed", "roce", "slowdown_p99") > _m(r, "permutation", "roce", "slowdown_p99")
        ),
    ),
    (
        "all_to_all",
        "UET: no pauses, and at least RoCE's goodput",
        lambda r: (
            _m(r, "all_to_all", "uet", "pause_frames") == 0
            and _m(r, "all_to_all", "uet", "goodput_gbps") >= _m(r, "all_to_all", "roce", "goodput_gbps")
        ),
    ),
    (
        "allreduce",
        "UET and RoCE: bus bandwidth within 5 % (a ring has one flow per link: nothing to balance)",
        lambda r: (
            abs(_m(r, "allreduce", "uet", "busbw_gbps") - _m(r, "allreduce", "roce", "busbw_gbps"))
            <= 0.05 * _m(r, "allreduce", "roce", "busbw_gbps")
        ),
    ),
)


def check_outcomes(metrics: dict[str, Metrics]) -> list[dict[str, Any]]:
    """``[{"experiment", "expected", "held"}]``: every check of an experiment in ``metrics``
    (``{experiment: {transport: metrics}}``); a check over a metric the runs do not have does not
    hold."""
    checks = []
    for exp, text, test in CHECKS:
        if exp in metrics:
            try:
                held = bool(test(metrics))
            except (KeyError, TypeError):  # a metric the runs do not have
                held = False
            checks.append({"experiment": exp, "expected": text, "held": held})
    return checks


def run_experiments(
    names: Sequence[str], folder: str, given: Given, *, progress: Callable[[], ProgressLine] | None = None
) -> dict[str, Any]:
    """Run the named experiments (their files under ``folder``, ``given`` laid over each: smaller
    messages, say) in virtual time (:func:`uet.sim.runs.simulate_runs`, ``progress`` making each
    run's progress display); ``{"ok", "experiments": {name: comparison}, "checks":
    [{"experiment", "expected", "held"}]}``. A run that Ctrl-C cut short stops the experiments
    (KeyboardInterrupt), instead of going on to the next one; a missing file or a setting the
    scenario model refuses is a :class:`~uet.scenario.check.ScenarioError`."""
    from uet.workloads import WORKLOADS

    out: dict[str, Any] = {}
    metrics: dict[str, Metrics] = {}
    ok = True
    for name in names:
        path = os.path.join(folder, EXPERIMENTS[name])
        if not os.path.exists(path):
            raise ScenarioError(f"{path}: no such scenario file (--dir names the folder)")
        s, topo, ep = resolve("sim", path, given, workloads=WORKLOADS).tables()
        runs = simulate_runs(s, topo, ep, progress=progress)
        if any(r.get("interrupted") for r in runs.values()):
            raise KeyboardInterrupt  # Ctrl-C: the simulator stopped; stop here, not at the next experiment
        cmp = comparison(runs)
        cmp["scenario"] = os.path.join("scenarios", "roce", EXPERIMENTS[name])
        cmp["endpoints"] = s["endpoints"]
        out[name] = cmp
        metrics[name] = cmp["metrics"]
        ok = ok and cmp["ok"]
    return {"ok": ok, "experiments": out, "checks": check_outcomes(metrics)}
