"""``uet-bench sim``: the simulator's speed in packet-hops per CPU second.

Runs one scenario in virtual time (:func:`uet.sim.scenario.simulate`: FEP cores, the fabric
model, real frames) and reports how much simulated traffic one CPU second buys: packet-hops
(frames that crossed one link) per CPU second of this process, plus frames injected by the hosts
per CPU second and the ratio of simulated to CPU time. Default: a permutation of 256 KiB flows
over a 128-host k = 8 fat tree at 100 Gb/s (a few seconds); ``--hosts 1024 --size 2MiB`` is the
acceptance run of issue 10. The best of ``--repeat`` runs is reported (least disturbed by other
load on a shared machine), with the process's peak resident memory so far (``peak_rss_mb``, from
``getrusage``: the largest of the runs). This is a benchmark, not a test.

``--against-htsim PATH`` runs the CC-suite rows beside uet-htsim built from source instead
(:mod:`uet.tools.bench.htsim`: CPU s, peak RSS and their ratio per row; ``--rows`` chooses rows,
``--rounds`` alternates the two that many times).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from typing import Any

from uet.tools.cli import int_arg, size_arg, table_console

__all__ = ["add_parser", "bench"]


def bench(workload: str, hosts: int, size: int, repeat: int, lb: str) -> dict[str, Any]:
    """Best of ``repeat`` runs (the one with the most packet-hops per CPU second). After Ctrl-C
    (the simulator then returns what finished, ``interrupted``) no further run starts, and the
    interrupted one is the record: its figures cover only the part that ran."""
    from uet.sim.scenario import simulate

    best: dict[str, Any] | None = None
    for _ in range(repeat):
        res = simulate(
            {"workload": workload, "endpoints": hosts, "message_bytes": size, "messages": 1, "seed": 1},
            {"kind": "fat_tree", "switch": {"lb": {"mode": lb}}},
        )
        t = res["timing"]
        rec = {
            "workload": workload,
            "hosts": hosts,
            "bytes_per_flow": size,
            "lb": lb,
            "ok": res["ok"],
            "virtual_s": res["virtual_s"],
            "cpu_s": t["cpu_s"],
            "packet_hops": res["sim"]["packet_hops"],
            "packet_hops_per_cpu_s": t["packet_hops_per_cpu_s"],
            "frames_injected_per_cpu_s": round(res["sim"]["frames_injected"] / t["cpu_s"]) if t["cpu_s"] else None,
            "virtual_over_cpu": res["virtual_s"] / t["cpu_s"] if t["cpu_s"] else None,
            "fct_p99_s": res["fct"].get("p99_s"),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        }
        if res.get("interrupted"):
            return {**rec, "interrupted": True}
        if best is None or (rec["packet_hops_per_cpu_s"] or 0) > (best["packet_hops_per_cpu_s"] or 0):
            best = rec
    assert best is not None
    return best


def add_parser(sub: Any) -> None:
    """The ``uet-bench sim`` subcommand (tools/bench/__init__.py)."""
    from uet.workloads import WORKLOADS

    p = sub.add_parser("sim", help="simulator speed: packet-hops per CPU second", description=__doc__.split("\n\n")[0])
    p.add_argument("--workload", choices=tuple(WORKLOADS), default="permutation")
    p.add_argument("--hosts", type=int_arg(2, 8192), default=128, help="endpoints on a fat tree sized for them")
    p.add_argument("--size", type=size_arg(1, 1 << 32), default=256 << 10, help="bytes per flow (256KiB)")
    p.add_argument("--lb", default="spray_rr", help="switch load balancing (ecmp, spray_rr, ...; default spray_rr)")
    p.add_argument("--repeat", type=int_arg(1), default=1, help="runs; the fastest is reported")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    h = p.add_argument_group("beside uet-htsim")
    h.add_argument("--against-htsim", metavar="PATH", help="uet-htsim checkout built from source: CC rows side by side")
    h.add_argument("--rows", help="with --against-htsim: rows to run, globs, e.g. 'incast15_*,one_flow_*' (all)")
    h.add_argument("--rounds", type=int_arg(1), default=1, help="with --against-htsim: alternating rounds (1)")
    h.add_argument(
        "--compiled",
        action="store_true",
        help="with --against-htsim: also run ours compiled (.ci/build-compiled, UET_COMPILED=1)",
    )
    p.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    if ns.against_htsim is not None:
        return _run_htsim(ns)
    rec = bench(ns.workload, ns.hosts, ns.size, ns.repeat, ns.lb)
    if ns.json:
        sys.stdout.write(json.dumps(rec) + "\n")
    else:
        from rich.table import Table

        t = Table(title=f"uet-bench sim: {rec['workload']} of {rec['bytes_per_flow']} B on {rec['hosts']} hosts")
        t.add_column("figure")
        t.add_column("value", justify="right")
        for k in (
            "packet_hops_per_cpu_s",
            "frames_injected_per_cpu_s",
            "packet_hops",
            "cpu_s",
            "virtual_s",
            "peak_rss_mb",
            "ok",
        ):
            v = rec[k]
            t.add_row(k, f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))
        table_console(100).print(t)
    if rec.get("interrupted"):
        raise KeyboardInterrupt  # after the partial figures: "uet-bench: interrupted", exit 130
    return 0 if rec["ok"] else 1


def _run_htsim(ns: argparse.Namespace) -> int:
    from uet.tools.bench.htsim import render, run_rows, select_rows

    rows = run_rows(ns.against_htsim, select_rows(ns.rows), ns.rounds, compiled=ns.compiled)
    if ns.json:
        sys.stdout.write(json.dumps({"rows": rows}) + "\n")
    else:
        render(rows)
    return 0 if all(r["htsim_ok"] and r["ours_ok"] and r.get("compiled_ok", True) for r in rows) else 1
