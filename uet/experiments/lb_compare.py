"""One scenario under several UET load balancers and seeds, reduced to one row per run
(``uet-sim --compare-lb``, tools/sim_compare.py parses its options and prints the table).

What issue 27 asks of a degraded fabric: the same workload and fault schedule with each path
selection (``single``, ``oblivious``, ``reps``, ``bitmap``: ``pds.lb``, uet.cc.entropy) for each
seed, compared on the tail FCT; with ``baseline`` each row also has the run without the faults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from uet.scenario.check import ScenarioError

if TYPE_CHECKING:
    from uet.fabric.model.faults import FaultConfig

__all__ = ["compare_lb_runs", "compare_lbs", "tail_row"]


def tail_row(res: dict[str, Any]) -> dict[str, Any]:
    """A run's row: intact, tail / p99 / p50 FCT in µs, packets the faults lost, packets resent."""
    fct = res.get("fct") or {}
    f = res.get("faults") or {}
    return {
        "ok": res["ok"],
        "tail_us": round(fct.get("max_s", 0.0) * 1e6, 3),
        "p99_us": round(fct.get("p99_s", 0.0) * 1e6, 3),
        "p50_us": round(fct.get("p50_s", 0.0) * 1e6, 3),
        "lost_packets": sum((f.get("lost_packets") or {}).values()),
        "resent_packets": sum(int(fl.get("retransmits") or 0) for fl in res["flows"]),
    }


def compare_lbs(
    lbs: Sequence[str], seeds: Sequence[int], run: Callable[[str, int, bool], dict[str, Any]], *, baseline: bool
) -> dict[str, Any]:
    """``{"seeds", "rows", "mean_tail_us"}``: ``run(lb, seed, faulted)`` (a simulation result)
    for every load balancer and seed, with the faults, and also without them when ``baseline``
    (its tail as ``baseline_tail_us``; the row is intact only if both runs were)."""
    rows = []
    for lb in lbs:
        for seed in seeds:
            row = {"lb": lb, "seed": seed, **tail_row(run(lb, seed, True))}
            if baseline:
                base = tail_row(run(lb, seed, False))
                row["baseline_tail_us"] = base["tail_us"]
                row["ok"] = row["ok"] and base["ok"]
            rows.append(row)
    mean = {lb: round(sum(r["tail_us"] for r in rows if r["lb"] == lb) / len(seeds), 3) for lb in lbs}
    return {"seeds": list(seeds), "rows": rows, "mean_tail_us": mean}


def compare_lb_runs(
    lb_list: str,
    seeds: Sequence[int] | None,
    settings: dict[str, Any],
    topology: dict[str, Any],
    endpoint: dict[str, Any],
    faults: Callable[[int], FaultConfig | None],
    *,
    baseline: bool,
) -> dict[str, Any]:
    """:func:`compare_lbs` over simulator runs of one scenario: ``lb_list`` the comma-separated
    load balancers (each of :data:`uet.cc.registry.LOAD_BALANCERS`, UET transport only), ``seeds``
    (the scenario's seed when None), ``faults(seed)`` a run's fault schedule. Each run is the
    scenario with ``pds.lb`` and ``seed`` set. Adds the workload and endpoint count to the result;
    :class:`ScenarioError` (one line) for a mistake."""
    from uet.cc.registry import LOAD_BALANCERS
    from uet.scenario import deep_update
    from uet.sim.runs import run_one

    lbs = [x.strip() for x in lb_list.split(",") if x.strip()]
    bad = [x for x in lbs if x not in LOAD_BALANCERS]
    if bad or not lbs:
        raise ScenarioError(f"--compare-lb: {bad[0] if bad else '(none)'!r}: one of {', '.join(LOAD_BALANCERS)}")
    if settings.get("transport", "uet") != "uet":
        raise ScenarioError("--compare-lb compares UET load balancers: use --transport uet")

    def run(lb: str, seed: int, faulted: bool) -> dict[str, Any]:
        e = deep_update(endpoint, {"pds": {"lb": lb}})
        st = {**settings, "seed": seed}
        return run_one(st, topology, e, faults=faults(seed) if faulted else None)

    out = compare_lbs(lbs, seeds or [int(settings["seed"])], run, baseline=baseline)
    return {"workload": settings["workload"], "endpoints": settings["endpoints"], **out}
