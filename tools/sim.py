"""``uet-sim``: run a ``uet-run`` scenario in virtual time, at fabric scale, in one process.

The same scenario TOML as ``uet-run`` (``[run]``, ``[topology]``, ``[endpoint]``) and the same
workload objects (:mod:`uet.workloads`), run on FEP cores (:class:`uet.fep.FepCore`) and the
fabric model in virtual time (:mod:`uet.sim`): no sockets, no processes, deterministic — one seed
gives byte-identical ``--json`` output.

``uet-sim ARGS`` is ``uet-run --engine sim ARGS``: the same settings (:mod:`uet.scenario`), the
same run, the same JSON (but for the CPU figures, here only with ``--timing``). The simulator's
defaults (:func:`uet.scenario.model.run_defaults`) differ from the live engine's where real time
is the limit (**decision**): the ``datacenter`` profile (100 Gb/s links, 1 µs per link, 1-BDP
buffers with trimming, ECN at 20–80 % of the BDP) on a k-ary fat tree sized from the endpoint
count; a scenario that names its profile, topology or endpoint settings gets exactly those (``-o``
and ``--endpoint-set`` as for ``uet-run``). ``--rate`` sets every link's rate (100M … 800G).
Every endpoint default follows from the fabric's physics (:func:`uet.scenario.derive`): 4 KiB
payloads with jumbo frames, a fixed window of about 1.15 BDP of the longest path plus the ACK
coalescing size, an RTO of 64 base RTTs (1 ms at 100 Gb/s), trimmed packets resent until they get
through, no SACK fast retransmit. ``--transport both`` runs UET, then RoCEv2, and prints them side
by side (``uet-run``'s comparison table, its JSON object with ``--json``).

Output: the ``uet-run`` tables (per flow bytes, completion time, goodput, slowdown against the
ideal, retransmissions, intact; FCT percentiles; fabric counters) plus virtual time, CPU time and
the simulator's speed in packet-hops per CPU second; ``--json`` one object (CPU figures only with
``--timing``: they are the one thing that differs between two runs of a seed); ``--plot DIR``
writes the FCT CDF, queue depth per port over time and throughput per port (needs matplotlib);
on stderr (a terminal, or with ``--progress``) the progress: virtual time so far, an estimate of
the virtual time the run needs, the measured speed and an ETA (tools/sim_progress.py).

Exit status: 0 when every message arrived intact, 1 when not, 2 on a usage error, 130 on Ctrl-C
(after the partial results: the flows finished so far, the others marked ``unfinished`` with the
bytes their receivers got so far, and the fabric counters; with ``--json`` one object with
``"interrupted": true``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from typing import Any

from uet.tools.cli import (
    ArgumentParser,
    UsageError,
    format_seconds,
    int_arg,
    parse_seeds,
    rate_arg,
    run_main,
    size_arg,
    warn_low_rate,
)

# The scenario layer, the fabric model and the workloads are imported where they are used, so that
# `uet-sim --version` (and `import uet.tools.sim`) does not load them.

__all__ = ["build_parser", "main", "settings_from", "simulate_for"]


def build_parser() -> argparse.ArgumentParser:
    from uet.fabric.profiles import PROFILES
    from uet.tools.capture_options import add_capture_options
    from uet.tools.fault_options import add_fault_options
    from uet.tools.run_settings import add_placement_options, add_summary_option, add_workload_option

    from uet.workloads import WORKLOADS

    p = ArgumentParser(prog="uet-sim", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", help="scenario TOML, as for uet-run (default: built-in incast)")
    p.add_argument("--workload", "-w", choices=tuple(WORKLOADS))
    p.add_argument("--endpoints", "-n", type=int_arg(2), help="endpoints (default 9)")
    p.add_argument("--size", type=size_arg(1, 1 << 32), dest="message_bytes", help="bytes per message (64KiB)")
    p.add_argument("--message-bytes", type=size_arg(1, 1 << 32), dest="message_bytes", help=argparse.SUPPRESS)
    p.add_argument("--messages", type=int_arg(1), help="messages per flow (4)")
    p.add_argument("--seed", type=int_arg(0), help="run seed (1): cores, fabric and data")
    p.add_argument("--topology", "-t", help="built-in name or TOML file (default: fat_tree)")
    p.add_argument("--profile", choices=PROFILES, help="fabric parameter profile (datacenter)")
    p.add_argument("--rate", type=rate_arg(1), dest="rate_bps", help="link rate, e.g. 100G, 400G (100G)")
    p.add_argument(
        "--transport",
        choices=("uet", "roce", "both"),
        help="UET (default), RoCEv2 with DCQCN, or both side by side",
    )
    p.add_argument("--tss", action="store_true", default=None, help="secure endpoints: every datagram sealed (TSS)")
    p.add_argument("-o", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--endpoint-set", dest="ep_overrides", action="append", default=[], metavar="KEY=VALUE")
    add_workload_option(p)
    add_placement_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    add_summary_option(p)
    p.add_argument("--timing", action="store_true", help="include CPU time and speed in --json")
    p.add_argument("--plot", metavar="DIR", help="write FCT CDF, queue depth and throughput plots")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when not a terminal")
    add_capture_options(p)
    add_fault_options(p)
    c = p.add_argument_group("comparison of load balancers")
    c.add_argument("--compare-lb", metavar="LBS", help="run once per UET load balancer, e.g. single,oblivious,reps")
    c.add_argument("--seeds", type=parse_seeds, help="with --compare-lb: one run per seed, e.g. 1,2,3")
    c.add_argument("--baseline", action="store_true", help="the same run without the faults too (FCT side by side)")
    g = p.add_argument_group("suites")
    g.add_argument("--suite", help="run every scenario of a suite (cc: NSCC/RCCC against uet-htsim) or folder")
    g.add_argument("--only", help="with --suite: scenarios whose file name contains one of these words (a,b)")
    g.add_argument("--max-hosts", type=int_arg(2), help="with --suite: run rows larger than this scaled down")
    g.add_argument("--jobs", "-j", type=int_arg(1), help="with --suite: rows run at once, one process each (1)")
    return p


#: the options that set ``[run]`` keys
SIM_OPTIONS = ("workload", "endpoints", "message_bytes", "messages", "seed", "profile", "rate_bps", "transport", "tss")


def settings_from(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(run settings, topology table, endpoint table): the simulator's defaults, then the
    scenario file, then the options, checked, every endpoint default derived from the scenario's
    physics by the scenario model (:func:`uet.scenario.read.resolve`) — exactly what ``uet-run
    --engine sim`` reads. Raises :class:`UsageError`."""
    from uet.tools.run_settings import read_settings

    return read_settings(args, "sim", SIM_OPTIONS)


def simulate_for(
    args: argparse.Namespace,
    s: dict[str, Any],
    topo: dict[str, Any],
    ep: dict[str, Any],
    *,
    faults: Any,
    prog: str,
) -> dict[str, dict[str, Any]]:
    """The scenario's runs (:func:`uet.sim.runs.simulate_runs`) as ``uet-sim`` and ``uet-run
    --engine sim`` make them: ``prog``'s progress line on stderr (a terminal, or ``--progress``;
    tools/sim_progress.py), ``--plot``, the capture options; what the simulator refuses is a
    :class:`UsageError`."""
    from uet.tools.capture_options import open_captures
    from uet.tools.run_settings import usage_errors

    from uet.sim.runs import simulate_runs

    progress = None
    if args.progress or sys.stderr.isatty():  # the progress line's modules only where it is drawn
        from uet.tools.sim_progress import progress_lines

        progress = progress_lines(prog, True)
    with usage_errors():
        return simulate_runs(
            s,
            topo,
            ep,
            plot=args.plot,
            progress=progress,
            faults=faults,
            captures=lambda transport: open_captures(args, transport=transport),
        )


def render(res: dict[str, Any], *, summary: bool = False) -> None:
    """``uet-run``'s tables (``summary``: the aggregates and the worst flows), then what only a
    simulation has."""
    from rich.console import Console
    from uet.tools.run import render as run_render

    run_render({**res, "elapsed_s": res["virtual_s"]}, summary=summary)
    con = Console(width=None if sys.stdout.isatty() else 120)
    t = res.get("timing", {})
    topo = res["topology"]
    con.print(
        f"simulated {format_seconds(res['virtual_s'])} of a {topo['kind']} fabric ({topo['hosts']:,} hosts, "
        f"{topo['switches']:,} switches, {res['link_rate_bps'] / 1e9:g} Gb/s links): "
        f"{res['sim']['packet_hops']:,} packet-hops in {t.get('cpu_s', 0):.2f} s of CPU "
        f"({t.get('packet_hops_per_cpu_s') or 0:,} packet-hops per CPU second)"
    )
    if res.get("stalled_at_ns") is not None:
        at = format_seconds(res["stalled_at_ns"] / 1e9)
        con.print(f"[red]stalled at {at}[/]: a message failed and its receiver waited for ever")


def _body(argv: Sequence[str] | None) -> int:
    _asyncio_without_tls()  # before anything may import asyncio (the runs that need its loop)
    from uet.tools.fault_options import faults_from
    from uet.tools.run_settings import load_scenario

    args = build_parser().parse_args(argv)
    if args.suite:
        return _suite(args)
    if args.only or args.max_hosts or args.jobs:
        raise UsageError("--only, --max-hosts and --jobs go with --suite")
    s, topo, ep = settings_from(args)
    if args.rate_bps is not None:
        warn_low_rate("uet-sim", "--rate", args.rate_bps)
    table = load_scenario(args.scenario).get("faults") if args.scenario else None
    if args.compare_lb:
        return _compare(args, s, topo, ep, table)
    if args.seeds:
        raise UsageError("--seeds goes with --compare-lb")
    faults = faults_from(args, table, int(s["seed"]))
    if args.baseline and faults is None:
        raise UsageError("--baseline compares with a run without faults: give a fault (--fail, --degrade, ...)")
    if args.plot:
        from uet.tools.fabric import check_outputs, require_matplotlib

        require_matplotlib()
        check_outputs(args)
    from uet.tools.run_settings import usage_errors

    from uet.scenario.model import transports
    from uet.sim.runs import run_one

    if args.baseline and len(transports(s)) > 1:
        raise UsageError("--baseline compares one transport's run: drop --transport both")
    with usage_errors():
        base = run_one(s, topo, ep) if args.baseline else None
    runs = simulate_for(args, s, topo, ep, faults=faults, prog="uet-sim")
    interrupted = any(r.get("interrupted") for r in runs.values())
    if args.json and not args.timing:  # CPU figures: the one thing that differs between two runs
        for r in runs.values():
            r.pop("timing", None)
    if len(transports(s)) > 1:
        from uet.tools.run import _emit_both

        code = _emit_both(args, s, ep, runs, not_run=[t for t in transports(s) if t not in runs])
        if interrupted:
            sys.stdout.flush()
            raise KeyboardInterrupt
        return code
    res = runs[s["transport"]]
    if base is not None:
        done = sorted(f["completion_s"] for f in base["flows"] if f.get("completion_s") is not None)
        res["baseline"] = {"ok": base["ok"], "fct": base.get("fct"), "completion_s": done}
    if args.json:
        sys.stdout.write(json.dumps(res, sort_keys=True) + "\n")
    else:
        render(res, summary=args.summary)
    if res.get("interrupted"):
        sys.stdout.flush()
        raise KeyboardInterrupt  # after the partial results: "uet-sim: interrupted", exit 130
    return 0 if res["ok"] else 1


def _compare(args: argparse.Namespace, s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any], table: Any) -> int:
    """``--compare-lb``: one table (uet.tools.sim_compare)."""
    from uet.tools.sim_compare import render_compare, run_compare

    if args.plot:
        raise UsageError("--compare-lb draws no plots: drop --plot")
    out = run_compare(args, s, topo, ep, table)
    if args.json:
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    else:
        render_compare(out)
    return 0 if all(r["ok"] for r in out["rows"]) else 1


def _suite(args: argparse.Namespace) -> int:
    """``--suite``: every scenario file of the suite, one table (uet.tools.cc_suite)."""
    from uet.tools.cc_suite import render, run_suite

    if args.scenario or args.plot:
        raise UsageError("--suite runs its own scenario files: give no scenario and no --plot")

    def said(row: dict[str, Any]) -> None:
        sys.stderr.write(f"uet-sim: {row['scenario']}: tail {row['tail_us']:,.1f} µs, {row['cpu_s']} s CPU\n")

    out = run_suite(args, on_row=said if (args.progress or sys.stderr.isatty()) else None)
    if args.json:
        if not args.timing:
            for r in out["rows"]:
                r.pop("cpu_s", None)
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
    else:
        render(out)
    return 0 if out["ok"] else 1


class _AsyncioWithoutTls:
    """Import :mod:`asyncio` without :mod:`ssl` when this process first imports it (**decision**):
    a meta path finder that stands aside for every other module and removes itself then.

    The simulator drives the runs that need asyncio (collectives, training, a time limit:
    uet.sim.tasks) on an asyncio loop but opens no connection, and asyncio imports ``ssl`` (and
    with it OpenSSL's TLS library) only to offer TLS: about 5 % of a short run's instructions.
    asyncio supports an interpreter without ``ssl`` (its modules then hold ``ssl = None``), so its
    import is made with ``ssl`` marked missing for that moment only: asyncio in this process offers
    no TLS, and ``import ssl`` works as usual afterwards. A process that loaded either already (a
    test calling :func:`main`) is left as it is; a plain run never imports asyncio at all."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "asyncio":
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        if "ssl" in sys.modules:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def without_ssl(module: Any) -> None:
            sys.modules["ssl"] = None  # type: ignore[assignment]  # `import ssl` raises ImportError meanwhile
            try:
                exec_module(module)
            finally:
                if sys.modules.get("ssl", 0) is None:
                    del sys.modules["ssl"]

        loader.exec_module = without_ssl  # type: ignore[method-assign]
        return spec


def _asyncio_without_tls() -> None:
    """Install :class:`_AsyncioWithoutTls` unless asyncio or ssl is loaded already."""
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return
    if not any(isinstance(f, _AsyncioWithoutTls) for f in sys.meta_path):
        sys.meta_path.insert(0, _AsyncioWithoutTls())


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``uet-sim``: 0 intact, 1 not, 2 for a usage error, 130 on Ctrl-C."""
    from uet.sim.gcpolicy import collector_for_startup

    with collector_for_startup():
        return run_main("uet-sim", _body, argv, early_version=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
