"""``uet-sweep``: many ``uet-sim`` runs from one sweep file, on local processes or a Dask cluster.

The sweep file (format: :mod:`uet.experiments.sweep`) names a scenario, the parameters to vary
and the seeds; every combination and seed is one ``uet-sim`` run. The table has one row per
combination with each metric's mean and, over the seeds, its min–max; ``--json`` prints every
run and every row, ``--csv FILE`` writes one line per run, ``--plot FILE`` draws a metric
against a varied parameter (one line per value of the others, bars from min to max).

Executors: local processes (default, ``--jobs N`` at once) or Dask distributed (``--cluster
tcp://scheduler:8786`` joins a running cluster whose workers have this package installed;
``--cluster local:N`` starts a LocalCluster of N worker processes here). Per-run figures are the
same on either. A run that fails (crash, time limit, no JSON) is retried once, then listed and
the exit status is 1; a run that completed but was not intact counts in ``intact``.

Exit status: 0 every run completed and intact, 1 otherwise, 2 a usage or sweep-file error, 130
Ctrl-C (after the rows of the runs that had finished).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from uet.tools.cli import ArgumentParser, UsageError, float_arg, int_arg, run_main, table_console

from uet.experiments.sweep import (
    RUN_TIMEOUT_S,
    DaskExecutor,
    LocalExecutor,
    RunResult,
    SweepError,
    SweepSpec,
    aggregate,
    execute,
    expand,
    load_sweep,
    metric,
)

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="uet-sweep",
        description="Run a sweep of uet-sim scenarios (parameters x seeds) and aggregate the results.",
    )
    p.add_argument("sweep", help="sweep file (TOML: [sweep], [vary], [plot])")
    p.add_argument("--cluster", metavar="ADDR", help="Dask scheduler (tcp://host:8786) or local:N (a LocalCluster)")
    p.add_argument("--jobs", "-j", type=int_arg(1, 256), help="local runs at once (default: the CPU count)")
    p.add_argument("--timeout", type=float_arg(0, open_lo=True), default=RUN_TIMEOUT_S, help="seconds per run (3600)")
    p.add_argument("--json", action="store_true", help="print one JSON object: every run and every row")
    p.add_argument("--csv", metavar="FILE", help="write one line per run")
    p.add_argument("--plot", metavar="FILE", help="write a PNG of [plot] y against [plot] x")
    p.add_argument("--dry-run", action="store_true", help="list the runs' uet-sim command lines and stop")
    p.add_argument("--progress", action="store_true", help="a line per finished run on stderr even when not a terminal")
    return p


def _check_output(path: str, option: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: no such folder {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {path}: folder not writable")


def _fmt(v: float) -> str:
    a = abs(v)
    if v == int(v) and a < 1e15:
        return f"{int(v):,}"
    if a >= 100:
        return f"{v:,.1f}"
    if a >= 0.01:
        return f"{v:.3g}"
    return f"{v:.3g}"


def _metric_label(m: str) -> tuple[str, float]:
    """A column title and a scale: seconds are shown in µs."""
    if m.endswith("_s"):
        return m[:-2] + " (µs)", 1e6
    return m, 1.0


def _cell(agg: dict[str, Any] | None, scale: float, seeds: int) -> str:
    if agg is None:
        return "–"
    mean = _fmt(agg["mean"] * scale)
    if seeds > 1 and agg["n"] > 1:
        return f"{mean} ({_fmt(agg['min'] * scale)}–{_fmt(agg['max'] * scale)})"
    return mean


def render(spec: SweepSpec, rows: list[dict[str, Any]], results: list[RunResult], where: str) -> None:
    from rich.table import Table

    con = table_console(160)
    seeds = len(spec.seeds)
    t = Table(title=f"uet-sweep: {len(results):,} runs ({seeds} seed{'s' if seeds > 1 else ''} each) on {where}")
    for key, _ in spec.vary:
        t.add_column(key.lstrip("-"), justify="right")
    t.add_column("intact", justify="right")
    for m in spec.metrics:
        t.add_column(_metric_label(m)[0] + (" mean (min–max)" if seeds > 1 else ""), justify="right")
    for row in rows:
        cells = [str(row["params"][k]) for k, _ in spec.vary]
        cells.append(f"{row['intact']}/{row['runs']}" + (f", {row['failed']} failed" if row["failed"] else ""))
        cells += [_cell(row[m], _metric_label(m)[1], seeds) for m in spec.metrics]
        t.add_row(*cells)
    con.print(t)
    for rr in results:
        if rr.error is not None:
            con.print(f"[red]failed[/] ({rr.run.label()}) after {rr.attempts} attempts: {rr.error}")


def write_csv(path: str, spec: SweepSpec, results: list[RunResult]) -> None:
    keys = [k for k, _ in spec.vary]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["run", *keys, "seed", "ok", "error", *spec.metrics])
        for rr in results:
            params = dict(rr.run.params)
            vals = [metric(rr.result, m) if rr.result is not None else None for m in spec.metrics]
            ok = rr.result.get("ok") if rr.result is not None else None
            w.writerow(
                [
                    rr.run.index,
                    *(params[k] for k in keys),
                    rr.run.seed,
                    ok,
                    rr.error or "",
                    *("" if v is None else v for v in vals),
                ]
            )


def write_plot(path: str, spec: SweepSpec, rows: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k, _ in spec.vary]
    x = spec.plot.get("x") or next(
        (k for k, vals in spec.vary if all(isinstance(v, int | float) and not isinstance(v, bool) for v in vals)),
        keys[0] if keys else None,
    )
    if x is None:
        raise UsageError("--plot needs a [vary] parameter to put on the x axis")
    y = spec.plot.get("y", spec.metrics[0])
    label, scale = _metric_label(y)
    others = [k for k in keys if k != x]
    series: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        series.setdefault(tuple(row["params"][k] for k in others), []).append(row)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, pts in series.items():
        pts = [p for p in pts if p[y] is not None]
        pts.sort(key=lambda p: p["params"][x])
        xs = [p["params"][x] for p in pts]
        mean = [p[y]["mean"] * scale for p in pts]
        lo = [(p[y]["mean"] - p[y]["min"]) * scale for p in pts]
        hi = [(p[y]["max"] - p[y]["mean"]) * scale for p in pts]
        text = ", ".join(f"{k.lstrip('-')}={v}" for k, v in zip(others, name, strict=True)) or y
        ax.errorbar(xs, mean, yerr=[lo, hi], marker="o", capsize=3, label=text)
    ax.set_xlabel(x.lstrip("-"))
    ax.set_ylabel(label)
    ax.set_ylim(bottom=0)
    ax.set_title(f"{label} against {x.lstrip('-')} (mean, min–max over {len(spec.seeds)} seeds)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _body(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        spec = load_sweep(args.sweep)
    except SweepError as e:
        raise UsageError(str(e)) from None
    if args.cluster and args.jobs:
        raise UsageError("--jobs is for local runs; a cluster's size is its workers")
    for path, option in ((args.csv, "--csv"), (args.plot, "--plot")):
        if path:
            _check_output(path, option)
    if args.plot:
        from uet.tools.fabric import require_matplotlib

        require_matplotlib()
    runs = expand(spec)
    if args.dry_run:
        for r in runs:
            scen = [spec.scenario_name] if spec.scenario_name else []
            sys.stdout.write(" ".join(["uet-sim", *scen, *r.argv]) + "\n")
        return 0
    try:
        executor: LocalExecutor | DaskExecutor = (
            DaskExecutor(args.cluster) if args.cluster else LocalExecutor(args.jobs)
        )
    except SweepError as e:
        raise UsageError(str(e)) from None
    done: list[RunResult] = []
    chatty = args.progress or sys.stderr.isatty()

    def said(rr: RunResult) -> None:
        done.append(rr)
        if chatty:
            state = (
                "failed: " + rr.error if rr.error else ("intact" if rr.result and rr.result.get("ok") else "NOT intact")
            )
            sys.stderr.write(f"uet-sweep: [{len(done)}/{len(runs)}] {rr.run.label()}: {state}\n")

    try:
        where = executor.describe()
        try:
            results = execute(runs, executor, timeout_s=args.timeout, on_result=said)
        except KeyboardInterrupt:
            if done and not args.json:
                order = sorted(done, key=lambda rr: rr.run.index)
                render(spec, aggregate(order, spec.metrics), order, where + ", interrupted")
            raise
    finally:
        executor.close()
    rows = aggregate(results, spec.metrics)
    if args.csv:
        write_csv(args.csv, spec, results)
    if args.plot:
        write_plot(args.plot, spec, rows)
    failed = [rr for rr in results if rr.error is not None]
    ok = not failed and all(rr.result is not None and rr.result.get("ok") is True for rr in results)
    if args.json:
        out = {
            "ok": ok,
            "executor": where,
            "metrics": list(spec.metrics),
            "vary": {k: list(v) for k, v in spec.vary},
            "seeds": list(spec.seeds),
            "rows": rows,
            "runs": [
                {
                    "run": rr.run.index,
                    "params": dict(rr.run.params),
                    "seed": rr.run.seed,
                    "attempts": rr.attempts,
                    "error": rr.error,
                    "ok": None if rr.result is None else rr.result.get("ok"),
                    "metrics": {m: metric(rr.result, m) if rr.result is not None else None for m in spec.metrics},
                }
                for rr in results
            ],
        }
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    else:
        render(spec, rows, results, where)
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``uet-sweep``: 0 all intact, 1 not, 2 usage error, 130 Ctrl-C."""
    return run_main("uet-sweep", _body, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
