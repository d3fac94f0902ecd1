"""The four §9.2 experiments, UET against RoCEv2 in virtual time, with their expected outcomes
checked point by point (rocev2-and-fabric.md §9.2, §9.3; issue 12).

Run: ``python -m uet.tools.roce_experiments`` (``--json`` for one object). Each experiment is a
committed scenario file in ``scenarios/roce/`` (100 Gb/s, the datacenter profile, a 4-leaf ×
8-spine leaf/spine with 32 hosts; UET as a UET NIC would run there — NSCC with the fabric's base
RTT, REPS over 256 entropies —, RoCE with DCQCN on the lossless class), run by ``uet-run
--engine sim`` (:func:`uet.sim.runs.simulate_runs`), reduced to the §9.1 metrics
(:mod:`uet.experiments.compare`) and checked against what §9.2/§9.3 lead one to expect
(:mod:`uet.experiments.roce`). A check that does not hold is reported as a **surprise**, not an
error: the table is a measurement, and every surprise is explained in the issue note. Exit status
0 when every message of every run arrived intact, 1 otherwise, 2 on a usage error.

``--only NAME,...`` runs a subset; ``--size`` and ``--messages`` shrink every run (the tests do).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from uet.tools.cli import ArgumentParser, UsageError, int_arg, run_main, size_arg, table_console

from uet.experiments.roce import EXPERIMENTS
from uet.experiments.roce import run_experiments as experiments
from uet.scenario.read import Given

__all__ = ["default_dir", "main", "run_experiments"]


def default_dir() -> str:
    """``scenarios/roce`` of the source tree this module runs from."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios", "roce")


def run_experiments(names: Sequence[str], folder: str, given: Given, *, progress: bool = False) -> dict[str, Any]:
    """The named experiments (:func:`uet.experiments.roce.run_experiments`) on ``uet-run --engine
    sim``'s runs (``progress``: its progress line on stderr). A mistake is a :class:`UsageError`."""
    from uet.tools.run_settings import usage_errors
    from uet.tools.sim_progress import progress_lines

    with usage_errors():
        return experiments(names, folder, given, progress=progress_lines("uet-run", progress))


#: the metrics the table shows per experiment
_SHOWN = (
    ("fct_p99_s", "FCT p99"),
    ("slowdown_p99", "slowdown p99"),
    ("goodput_gbps", "goodput (Gbit/s)"),
    ("busbw_gbps", "busbw (Gbit/s)"),
    ("victim_slowdown", "victim slowdown"),
    ("bisection_share", "goodput / bisection"),
    ("uplink_imbalance", "uplink max / mean"),
    ("pause_frames", "pause frames"),
    ("paused_s", "time paused"),
    ("pause_switches", "switches paused"),
    ("paused_hosts", "hosts paused"),
    ("trims", "trims"),
    ("cnps", "CNPs"),
    ("naks", "RC NAKs"),
    ("retx_over_goodput", "retx / goodput"),
)


def render(res: dict[str, Any]) -> None:
    from rich.table import Table
    from uet.tools.compare import fmt

    con = table_console(140)
    t = Table(title="§9.2 experiments at 100 Gb/s, 32-host leaf/spine (virtual time): UET | RoCEv2")
    t.add_column("metric")
    names = list(res["experiments"])
    for n in names:
        t.add_column(n, justify="right")
    for key, label in _SHOWN:
        cells = []
        for n in names:
            m = res["experiments"][n]["metrics"]
            cells.append(" | ".join(fmt(m[tr].get(key), key) for tr in ("uet", "roce") if tr in m))
        if any(c.strip("–- |") for c in cells):
            t.add_row(label, *cells)
    con.print(t)
    c = Table(title="expected outcomes (§9.2, §9.3)")
    for col in ("experiment", "expected", "observed"):
        c.add_column(col)
    for ck in res["checks"]:
        c.add_row(ck["experiment"], ck["expected"], "[green]as expected[/]" if ck["held"] else "[yellow]SURPRISE[/]")
    con.print(c)
    con.print("[green]every message intact[/]" if res["ok"] else "[red]FAILED: a run lost or corrupted a message[/]")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m uet.tools.roce_experiments", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", metavar="NAME,...", help=f"a subset of: {', '.join(EXPERIMENTS)}")
    p.add_argument("--dir", default=None, help="folder of the scenario files (default: scenarios/roce)")
    p.add_argument("--size", type=size_arg(1, 1 << 30), help="bytes per message, every run (the files' own)")
    p.add_argument("--messages", type=int_arg(1), help="messages per flow, every run (the files' own)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    p.add_argument("--progress", action="store_true", help="progress bars on stderr")
    return p


def _body(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    names = list(EXPERIMENTS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        bad = [n for n in names if n not in EXPERIMENTS]
        if bad:
            raise UsageError(f"--only: unknown experiment {bad[0]!r}; one of {', '.join(EXPERIMENTS)}")
    given = Given(run={"message_bytes": args.size, "messages": args.messages})
    res = run_experiments(names, args.dir or default_dir(), given, progress=args.progress)
    if args.json:
        sys.stdout.write(json.dumps(res) + "\n")
    else:
        render(res)
    return 0 if res["ok"] else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: 0 when every run was intact, 1 when not, 2 for a usage error."""
    return run_main("roce-experiments", _body, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
