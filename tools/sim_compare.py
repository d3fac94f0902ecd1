"""``uet-sim --compare-lb``: one scenario under several UET load balancers and seeds, one table.

What issue 27 asks of a degraded fabric: run the same workload and fault schedule with each path
selection (``single``, ``oblivious``, ``reps``, ``bitmap``: ``pds.lb``, uet.cc.entropy) for each
seed — the seed also draws the ``uplinks:N`` a schedule names, so each seed degrades other links —
and compare the tail FCT. ``--baseline`` adds each row without the faults.
"""

from __future__ import annotations

import argparse
from typing import Any

from uet.tools.cli import parse_seeds, table_console  # parse_seeds: there for every uet-sim run, offered here

__all__ = ["parse_seeds", "render_compare", "run_compare"]


def run_compare(
    args: argparse.Namespace, s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any], table: Any
) -> dict[str, Any]:
    """Every (load balancer, seed) run (:func:`uet.experiments.lb_compare.compare_lb_runs`): rows
    plus the mean tail per load balancer. :class:`UsageError` for a mistake."""
    from uet.tools.fault_options import faults_from
    from uet.tools.run_settings import usage_errors

    from uet.experiments.lb_compare import compare_lb_runs  # here: a plain uet-sim run parses --seeds only

    with usage_errors():
        return compare_lb_runs(
            args.compare_lb,
            args.seeds,
            s,
            topo,
            ep,
            lambda seed: faults_from(args, table, seed),
            baseline=bool(args.baseline),
        )


def render_compare(out: dict[str, Any]) -> None:
    """The comparison as a table (stdout)."""
    from rich.table import Table

    con = table_console(120)
    base = any("baseline_tail_us" in r for r in out["rows"])
    t = Table(title=f"uet-sim {out['workload']}, {out['endpoints']} endpoints: tail FCT by load balancer")
    for col in (
        "lb",
        "seed",
        "tail (µs)",
        "p99 (µs)",
        "p50 (µs)",
        "lost",
        "resent",
        *(["no fault (µs)"] if base else []),
        "ok",
    ):
        t.add_column(col, justify="left" if col == "lb" else "right")
    for r in out["rows"]:
        t.add_row(
            r["lb"],
            str(r["seed"]),
            f"{r['tail_us']:,.1f}",
            f"{r['p99_us']:,.1f}",
            f"{r['p50_us']:,.1f}",
            f"{r['lost_packets']:,}",
            f"{r['resent_packets']:,}",
            *([f"{r['baseline_tail_us']:,.1f}"] if base else []),
            "yes" if r["ok"] else "NO",
        )
    con.print(t)
    con.print("mean tail: " + ", ".join(f"{lb} {v:,.1f} µs" for lb, v in out["mean_tail_us"].items()))
