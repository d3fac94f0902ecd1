"""``uet-run``: run a workload over UET through the software fabric, one process per endpoint.

Starts one ``uet-fabric`` process (every switch of the topology) and N endpoint processes
(uet/live/worker.py), endpoint *i* on host *i* of the topology: its Fabric Address is that host's
IPv4 address (10.0.l.(h+1), §8.8) and its NIC is a :class:`~uet.link.fabric.FabricLink` on the
host's switch-port socket, both told to it by the launcher. When the topology has fewer hosts
than endpoints, ``hosts_per_leaf`` grows until they fit (**decision**: ``--endpoints 9`` on the
default 2-leaf fabric gives 5 hosts per leaf).

Workloads (``--workload``) are the objects of :mod:`uet.workloads`, each flow sending
``--messages`` messages of ``--message-bytes`` random bytes:

* ``incast``: endpoints 1..N−1 all send to endpoint 0 (N−1 : 1);
* ``pairs``: endpoint i sends to endpoint i + N/2 (N even), so with hosts numbered leaf by leaf
  the pairs cross the spines;
* ``permutation``: a random derangement (seeded), one flow per endpoint;
* ``all_to_all``: every endpoint sends to every other;
* ``incast_victim``: an incast on endpoint 0 plus a victim flow 1 → N−1;
* ``allreduce``: ring all-reduce of a ``--message-bytes`` vector (reduce-scatter, all-gather).

``--transport`` (or ``transport`` in ``[run]``): ``uet`` (default), ``roce`` — every endpoint a
:class:`~uet.roce_endpoint.RoceEndpoint` (RC queue pairs with DCQCN; its frames on the fabric's
lossless PFC class, never sprayed) — or ``both``: the scenario runs over UET, then over RoCEv2
(a fresh fabric process each), and one table puts the two side by side (tools/compare.py, the
§9.1 metrics); with ``--json`` one object ``{"ok", "transport": "both", "comparison", "runs"}``.
Ctrl-C prints what ran: the finished flows with their figures and the others ``unfinished``; with
``both`` the completed UET run beside the interrupted RoCEv2 one (its column marked, or RoCEv2
named as not run), ``"interrupted": true`` in the JSON; exit status 130.

**Time dilation** (``--dilation``, :mod:`uet.clock`, :mod:`uet.live.dilation`): the launcher
takes one start instant and one time-dilation factor TDF per run and hands both to the switch
process and every endpoint; each maps real time to virtual time (virtual = start + (real − start)
/ TDF), so link rates, delays, protocol timers and the reported times (completion times,
``elapsed_s``) are virtual, and the CPU has to keep up only with the packet rate ÷ TDF. ``auto``
(the default) chooses TDF from the scenario's packet rate and the machine's cores, measured when
the run starts; ``--dilation 1`` is real time. The result's ``dilation`` says the factor, its
basis and whether the CPU kept up; the tables say so above them and mark a run that did not.
With ``--transport both`` the simulator's figures of the same scenario are printed beside the
live ones, with the live/sim bar's verdict (uet/experiments/differential.py: the live figures against the
simulator's range over a few endpoint seeds). ``--timeout`` (``timeout_s``)
is virtual time on both engines, as every other time of the run: a dilated live run waits TDF
times longer in real time before it gives up (before, a run dilated ×1,500 gave up after 80 ms of
virtual time and reported the slower flows of a 16-host permutation as failed).

``--engine sim`` runs the same scenario — settings, topology, endpoint configuration, workload
objects, result shape — in one process in virtual time instead (:mod:`uet.sim`): it is exactly
``uet-sim`` with the same arguments (the same defaults, the simulator's: the ``datacenter``
profile on a fat tree, :mod:`uet.scenario.model`); ``elapsed_s`` is then virtual time. Options
of one engine only: ``--pcap``, ``--telemetry``, ``--interval``, ``--hosts``
(live); ``uet-sim``'s ``--tss``, ``--timing`` and ``--suite``.

A scenario TOML holds the same settings: ``[run]`` (``workload``, ``endpoints``,
``message_bytes``, ``messages``, ``seed``, ``timeout_s``, ``profile``, ``rate_bps``),
``[topology]`` (as for ``uet-fabric``) and ``[endpoint]`` (fields of
:class:`~uet.endpoint.EndpointConfig`, ``[endpoint.pds]`` for the PDS core). Command-line options
override the file. Built-in default: ``incast``, 9 endpoints, 4 × 64 KiB per flow.

Endpoint, queue-pair and congestion-control defaults are derived from the scenario's physics by
:func:`uet.scenario.derive` for both engines (``[endpoint]`` keys win); on the live engine's
``realtime`` profile the Python processes, not the links, set the timing: 1024-byte payloads, 16
packets in flight per lane, an adaptive RTO with a 200 ms floor and PDCs reclaimed after 10 s
(the measured reasons: :data:`uet.scenario.derive.REALTIME_HOSTS`). A congestion control named in
``pds.cc`` gets the host link rate, the base RTT and the payload size as its ``pds.cc_params``.
The result's ``derived`` records what the run used.

Output: a ``rich`` table of flows (bytes, completion time, goodput, retransmits, intact) and the
fabric counters (ECN marks, trims, drops, pauses), or with ``--json`` one JSON object
``{"ok", "workload", "flows": [{..., "intact"}], "fabric": {"ecn_marks", "trims", "drops",
"pauses", ...}, "endpoints": [...], "pacing": {...}}``. ``--pcap DIR`` / ``--plot DIR`` /
``--telemetry FILE`` are passed to the fabric. A progress bar on stderr (when it is a terminal,
or with ``--progress``) follows the bytes received (``--engine sim``: virtual time, the estimate
of what the run needs, the speed and an ETA, as ``uet-sim`` shows them).

Every child runs in its own process group; on completion, on error and on Ctrl-C / SIGTERM the
launcher stops them all (SIGTERM to each group, SIGKILL after a grace period), and the children
also ask the kernel to SIGTERM them if the launcher dies. Exit status: 0 when every message
arrived intact, 1 when an endpoint failed or a message was lost or corrupted, 2 on a usage
error, 130 on interrupt (after the partial results: the flows finished so far, the others marked
``unfinished`` with the bytes their receivers got so far where they can be told apart, and the
fabric's counters; with ``--json`` one object with ``"interrupted": true``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from uet.fabric.profiles import (
    PROFILES,
    REALTIME_RATE_BPS,
    merge,
)
from uet.tools.capture_options import add_capture_options
from uet.tools.cli import (
    ArgumentParser,
    RunFailed,
    UsageError,
    float_arg,
    format_bytes,
    format_cell,
    format_number,
    format_rate,
    format_seconds,
    int_arg,
    rate_arg,
    run_main,
    size_arg,
    table_console,
    transport_label,
    warn_low_rate,
    yes_no,
)
from uet.tools.fault_options import add_fault_options, fault_argv, faults_from, render_faults
from uet.tools.link_options import add_link_options, check_link_options
from uet.tools.run_settings import (
    WORST_FLOWS,
    add_placement_options,
    add_summary_option,
    add_workload_option,
    load_scenario,
    read_settings,
    usage_errors,
)

from uet.live.dilation import TIMER_GRAIN_NS, Dilation, short_of_cpu
from uet.live.result import settings_record
from uet.live.runs import dilation_for, finish_live, sim_cm_secret, transports
from uet.scenario.derive import fairness_note
from uet.scenario.read import TRANSPORTS  # --transport: uet, roce or both, side by side (tools/compare.py)
from uet.workloads import WORKLOADS as _WORKLOADS

__all__ = ["build_parser", "main"]

WORKLOADS = tuple(_WORKLOADS)
#: most endpoint processes a live run starts (**decision**): each is a Python process of ≈ 40 MB
#: whose start alone costs about a CPU second; past this a 2-core machine spends the run's timeout
#: starting them (``-n 200 --topology fat_tree`` never got going). README "Scale limits".
LIVE_MAX_ENDPOINTS = 128

#: the options that set ``[run]`` keys
RUN_OPTIONS = (
    "workload",
    "endpoints",
    "message_bytes",
    "messages",
    "seed",
    "timeout_s",
    "profile",
    "rate_bps",
    "transport",
)


def interval_line(rec: dict[str, Any], total: int) -> str:
    """An interval record as iperf3 prints one: the period, the bytes in it, the rate, the sum."""
    return (
        f"[{rec['start_s']:7.2f}-{rec['end_s']:7.2f} s] {format_bytes(rec['bytes']):>10} "
        f"{format_rate(int(rec['goodput_gbps'] * 1e9)):>12}   received {rec['received_bytes']:,} of {total:,} bytes"
    )


def _print_interval(rec: dict[str, Any], total: int, whole_run: bool) -> None:
    """``--interval``: each period's line on stderr as it ends; after the run a rule and the sum."""
    if whole_run:
        sys.stderr.write("- " * 30 + "\n" + interval_line(rec, total) + "  sum\n")
    else:
        sys.stderr.write(interval_line(rec, total) + "\n")


#: per-flow CSV columns (``--csv``)
CSV_COLUMNS = (
    "flow",
    "src",
    "dst",
    "bytes",
    "messages",
    "delivered",
    "completion_s",
    "goodput_gbps",
    "slowdown",
    "retransmits",
    "intact",
    "error",
)


def write_csv(result: dict[str, Any], path: str) -> None:
    """The per-flow results as CSV (``intact`` as true/false, as in the JSON)."""
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for fl in result["flows"]:
            w.writerow(
                [
                    ("true" if fl.get(c) else "false") if c == "intact" else ("" if fl.get(c) is None else fl.get(c))
                    for c in CSV_COLUMNS
                ]
            )


#: flows from which the table suggests ``--summary`` (which then shows :data:`WORST_FLOWS` flows)
SUMMARY_FROM = 100


def worst_flows(flows: list[dict[str, Any]], n: int = WORST_FLOWS) -> list[dict[str, Any]]:
    """The ``n`` flows a reader of a large run looks at first: those not intact (unfinished ones
    among them), then the slowest by slowdown (by completion time when no ideal is known)."""

    def badness(f: dict[str, Any]) -> tuple[int, float, float]:
        return (0 if f.get("intact") else 1, float(f.get("slowdown") or 0), float(f.get("completion_s") or 0))

    return sorted(flows, key=badness, reverse=True)[:n]


def summary_table(result: dict[str, Any]) -> Any:
    """``--summary``: one table of what the run's flows add up to, instead of a row per flow (the
    FCT and slowdown percentiles follow on their line, as after the full table)."""
    from rich.table import Table

    flows = result["flows"]
    intact = sum(1 for f in flows if f.get("intact"))
    t = Table(title=f"{format_number(len(flows))} flows", show_header=False)
    t.add_column("figure")
    t.add_column("value", justify="right")
    rows = [
        ("intact", f"{format_number(intact)} of {format_number(len(flows))}"),
        ("not intact", format_number(len(flows) - intact)),
        ("unfinished", format_number(sum(1 for f in flows if f.get("unfinished")))),
        ("bytes", format_bytes(sum(int(f.get("bytes") or 0) for f in flows))),
        ("retransmits", format_number(sum(int(f.get("retransmits") or 0) for f in flows))),
    ]
    for row in rows:
        t.add_row(*row)
    return t


#: how a figure of a run whose CPU did not keep up is marked (tables of uet-run)
SHORT_MARK = "*"


def dilation_lines(runs: dict[str, dict[str, Any]]) -> list[str]:
    """What ``uet-run`` prints above a live run's table: the time-dilation factor (and its basis)
    and, per run, whether the CPU kept up; a run that did not is named, with what to do, and its
    figures are marked :data:`SHORT_MARK`. Empty for runs without dilation (the simulator's)."""
    dils = [(t, r["dilation"]) for t, r in runs.items() if r.get("dilation")]
    if not dils:
        return []
    first = dils[0][1]
    b = first.get("basis") or {}
    how = (
        f"auto: ×{b['for_cpu']:g} for the CPU ({b['packet_rate_pps']:,} data packets/s × "
        f"{b['cpu_per_packet_us']:,} µs of CPU each ÷ {b['cores']} cores at {b['utilisation'] * 100:.0f} %), "
        f"×{b['for_timers']:g} for the timers' {b.get('timer_late_ms', 1):g} ms "
        + ("grain" if b.get("timer_late_ms", 1) <= TIMER_GRAIN_NS / 1e6 else f"lateness at load {b['load']:g}")
        if b
        else "--dilation"
    )
    lines = [
        f"time dilation ×{first['factor']:g} ({how}): virtual time runs {first['factor']:g}× slower than real time"
    ]
    for t, d in dils:
        v = d.get("verdict") or {}
        name = transport_label(t)
        if v.get("kept_up"):
            lines.append(
                f"{name}: the CPU kept up (in virtual time, switch timer p99 {v['timer_p99_us']:,.0f} µs late, "
                f"endpoints p99 {v.get('endpoint_lag_p99_us', 0.0):,.0f} µs late; socket queues at most "
                f"{v['socket_queue_max_bytes'] // 1024:,} KiB, no drops)"
            )
        elif v:
            lines.append(
                f"{name}: the CPU did NOT keep up: {'; '.join(v['why'])}. Its figures ({SHORT_MARK}) measure the "
                f"CPU as well as the network: run again with a larger --dilation (e.g. {d['factor'] * 2:g})."
            )
    return lines


def render(result: dict[str, Any], *, summary: bool = False) -> None:
    """The results table (stdout). ``summary``: the aggregates and the :data:`WORST_FLOWS` worst
    flows instead of a row per flow (``--summary``, for runs of hundreds of flows)."""
    from rich.table import Table

    con = table_console(120)
    for line in dilation_lines({str(result.get("transport", "uet")): result}):  # above the table
        con.print(line, highlight=False, markup=False)
    mark = f" {SHORT_MARK} CPU short" if short_of_cpu(result) else ""
    flows = result["flows"]
    shown = worst_flows(flows) if summary else flows
    title = (
        f"uet-run {result['workload']} ({transport_label(str(result.get('transport', 'uet')))}): "
        f"{format_number(result['endpoints'])} endpoints, {format_seconds(result['elapsed_s'])}{mark}"
    )
    if summary:
        con.print(summary_table(result))
        title += f": the {len(shown)} worst of {format_number(len(flows))} flows"
    t = Table(title=title)
    cols = ("flow", "src → dst", "bytes", "completion", "goodput (Gbit/s)", "slowdown", "retransmits", "intact")
    for col in cols:
        t.add_column(col, justify="left" if col == "src → dst" else "right")
    for f in shown:
        t.add_row(
            str(f["flow"]),
            f"{f['src']} → {f['dst']}",
            format_cell(f.get("bytes", 0)),
            format_seconds(f.get("completion_s")),
            format_cell(f.get("goodput_gbps")),
            format_cell(f.get("slowdown")),
            format_cell(f.get("retransmits")),
            f"[green]{yes_no(True)}[/]" if f["intact"] else f"[red]{yes_no(False)}[/] {f.get('error') or ''}",
        )
    if result.get("collective"):  # one row per size instead of one per (size, rank, peer) flow
        from uet.tools.collective_table import collective_table

        t = collective_table(result)
    con.print(t)
    if not summary and len(flows) >= SUMMARY_FROM and not result.get("collective"):
        con.print(f"{format_number(len(flows))} flows: --summary shows the aggregates and the {WORST_FLOWS} worst")
    if result.get("training"):
        from uet.tools.collective_table import training_lines

        for line in training_lines(result):
            con.print(line, highlight=False)
    fct = result.get("fct") or {}
    if fct.get("flows"):
        con.print(
            f"flow completion time: mean {format_seconds(fct['mean_s'])}, p50 {format_seconds(fct['p50_s'])}, "
            f"p90 {format_seconds(fct['p90_s'])}, p99 {format_seconds(fct['p99_s'])}, "
            f"max {format_seconds(fct['max_s'])}; slowdown p50 {format_cell(fct.get('slowdown_p50'))}, "
            f"p99 {format_cell(fct.get('slowdown_p99'))}, max {format_cell(fct.get('slowdown_max'))}"
        )
    fab = result["fabric"]
    if fab:  # empty after Ctrl-C: the fabric's summary never came
        ft = Table(title="fabric")
        for col in ("ecn_marks", "trims", "drops", "pauses", "pfc_xon", "watchdog"):
            ft.add_column(col, justify="right")
        ft.add_row(*(format_cell(fab.get(k)) for k in ("ecn_marks", "trims", "drops", "pauses", "pfc_xon", "watchdog")))
        con.print(ft)
    marks = fab.get("marks_by_port") or {}
    if marks:
        ports = sorted(marks.items())
        if summary and len(ports) > WORST_FLOWS:  # the ports that marked most
            ports = sorted(sorted(ports, key=lambda kv: -kv[1])[:WORST_FLOWS])
            con.print(f"ECN marks by port (the {WORST_FLOWS} of {len(marks):,} that marked most): ", end="")
        else:
            con.print("ECN marks by port: ", end="")
        con.print(", ".join(f"{k}={format_cell(v)}" for k, v in ports))
    p = result.get("pacing") or {}
    if p.get("firings"):
        con.print(
            f"switch timer ({p['timer']}): {format_cell(p['firings'])} firings, lateness p50 "
            f"{format_cell(p['p50_us'])} µs, p99 {format_cell(p['p99_us'])} µs, max {format_cell(p['max_us'])} µs"
        )
    render_faults(result)
    for label, paths in (("plots", result.get("plots")), ("pcaps", result.get("pcaps"))):
        if paths:
            con.print(f"{label} written: " + ", ".join(paths))
    for label in ("telemetry", "csv"):
        if result.get(label):
            con.print(f"{label} written: {result[label]}")
    if result.get("interrupted"):
        con.print(
            f"[yellow]interrupted: {result['flows_finished']:,} of {len(result['flows']):,} flows finished, "
            f"{result['received_messages']:,} messages ({result['received_bytes']:,} bytes) received[/]"
        )
        return
    con.print(
        "[green]all messages intact[/]" if result["ok"] else "[red]FAILED: a message was lost or an endpoint failed[/]"
    )


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="uet-run", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", help="scenario TOML (default: the built-in incast)")
    add_fault_options(p)
    p.add_argument("--workload", "-w", choices=WORKLOADS)
    p.add_argument(
        "--endpoints",
        "-n",
        type=int_arg(2),
        help="endpoint processes (default 9; 8 for pairs: it needs an even number)",
    )
    p.add_argument("--size", type=size_arg(1, 1 << 30), dest="message_bytes", help="bytes per message (64KiB)")
    p.add_argument("--message-bytes", type=size_arg(1, 1 << 30), dest="message_bytes", help=argparse.SUPPRESS)
    p.add_argument("--messages", type=int_arg(1), help="messages per flow (4)")
    p.add_argument("--seed", type=int_arg(0))
    p.add_argument(
        "--timeout",
        type=float_arg(0.0, open_lo=True),
        dest="timeout_s",
        help="seconds of virtual time (120); a dilated live run waits TDF times longer in real time",
    )
    p.add_argument("--topology", "-t", help="built-in name or TOML file for the fabric")
    p.add_argument("--profile", choices=PROFILES, help="fabric parameter profile (realtime)")
    p.add_argument(
        "--rate",
        type=rate_arg(1),
        dest="rate_bps",
        help=f"link rate of the realtime profile: 100M, 1G, 25Gbit (default {format_rate(REALTIME_RATE_BPS)})",
    )
    p.add_argument(
        "--transport",
        choices=TRANSPORTS,
        help="uet (default), roce (RoCEv2 RC with DCQCN on the lossless class) or both, side by side",
    )
    p.add_argument("-o", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--endpoint-set", dest="ep_overrides", action="append", default=[], metavar="KEY=VALUE")
    add_workload_option(p)
    add_placement_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    add_summary_option(p)
    p.add_argument("--csv", metavar="FILE", help="also write the per-flow results as CSV")
    p.add_argument(
        "--interval",
        type=float_arg(0.0, open_lo=True),
        metavar="S",
        help="report the bytes received every S seconds during the run (stderr), like iperf3 -i",
    )
    p.add_argument("--pcap", metavar="DIR")
    p.add_argument("--plot", metavar="DIR")
    p.add_argument("--telemetry", metavar="FILE")
    p.add_argument("--progress", action="store_true", help="progress bar on stderr even when not a terminal")
    p.add_argument(
        "--dilation",
        type=_dilation_arg,
        default="auto",
        metavar="TDF",
        help="live engine: time-dilation factor, virtual time runs TDF times slower than real time so the "
        "CPU keeps up with the links (auto: chosen from the packet rate and the cores; 1: real time)",
    )
    p.add_argument(
        "--engine",
        choices=("live", "sim"),
        default="live",
        help="live: endpoint processes through uet-fabric (default); sim: the same scenario in virtual time",
    )
    p.add_argument(
        "--hosts", metavar="A0,A1,...",
        help="endpoints on these addresses, over the real network, no software switch",
    )  # fmt: skip
    p.add_argument("--rank", type=int_arg(0), default=None, help="with --hosts: run only this rank, here")
    add_link_options(p)
    p.add_argument(
        "--keys", metavar="FILE",
        help="with --hosts --data-protect tss: the secure domain's key file (the format uet-peer --keys reads)",
    )  # fmt: skip
    add_capture_options(p, pcap=False)
    return p


def settings_from(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(run settings, inline topology table, endpoint table) from a scenario file and options: the
    scenario model reads, checks and derives them (:func:`uet.scenario.read.resolve`, the same as
    ``uet-sim``'s for ``--engine sim``); this adapter hands it the options
    (:func:`uet.tools.run_settings.read_settings`). A mistake is a :class:`UsageError` (one line,
    exit 2)."""
    return read_settings(args, getattr(args, "engine", "live"), (*RUN_OPTIONS, "pcap", "plot", "telemetry"))


class _CtrlC:
    """Ctrl-C / SIGTERM for the whole live run, every transport of ``both`` included: the first
    signal cancels the running task (each run then stops its processes and keeps its partial
    result); later ones are ignored, so they cannot cancel that shutdown. Installed once for all
    the runs: per run, a signal between two runs or during one's final shutdown fell back to
    Python's KeyboardInterrupt and lost every result."""

    def __init__(self) -> None:
        import asyncio  # here, not at import: uet-sim renders its tables with this module

        self.interrupted = False
        self.task = asyncio.current_task()
        self.loop = asyncio.get_running_loop()

    def __enter__(self) -> _CtrlC:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.loop.add_signal_handler(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.loop.remove_signal_handler(sig)

    def _on_signal(self) -> None:
        if self.interrupted:
            return
        self.interrupted = True
        if self.task is not None:
            self.task.cancel()

    def absorb(self) -> None:
        """After the CancelledError our own cancel caused: take it back, so that asyncio.run
        returns normally once the task does."""
        if self.task is not None and self.task.cancelling():
            self.task.uncancel()


async def _main(
    args: argparse.Namespace,
    settings: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
    dilation: Dilation,
    sim: dict[str, dict[str, Any]] | None = None,
    spread: Sequence[dict[str, dict[str, Any]]] = (),
) -> int:
    """The live engine: one run per transport (``both``: UET, then RoCEv2, each with its own fabric
    process; pcaps and plots then in ``DIR/uet`` and ``DIR/roce``), then the output. After Ctrl-C
    the output is what ran: with ``both``, the runs already complete beside the interrupted one's
    partial results (:func:`_emit_both`), exit 130."""
    import asyncio

    s, topo, ep = settings
    runs: dict[str, dict[str, Any]] = {}
    args.transport_both = s.get("transport") == "both"
    with _CtrlC() as ctrl_c:
        for tr in transports(s):
            st = {**s, "transport": tr}
            if s.get("transport") == "both":
                for opt in ("pcap", "plot"):
                    if st.get(opt):
                        st[opt] = os.path.join(st[opt], tr)
            try:
                code, result = await _live_one(args, (st, topo, ep), ctrl_c, dilation, beside=sim is not None)
            except asyncio.CancelledError:
                if not ctrl_c.interrupted:
                    raise
                ctrl_c.absorb()
                code, result = 130, None
            if result is not None:
                runs[tr] = result
            if code == 130:
                return _emit_interrupted(args, s, ep, runs)
    if len(runs) > 1:
        return _emit_both(args, s, ep, runs, sim=sim, spread=spread)
    result = _emit_one(args, next(iter(runs.values())), render)
    if result["diagnosis"]:
        sys.stderr.write(f"uet-run: note: {result['diagnosis']}\n")
    return 0 if result["ok"] else 1


def _emit_interrupted(
    args: argparse.Namespace, s: dict[str, Any], ep: dict[str, Any], runs: dict[str, dict[str, Any]]
) -> int:
    """After Ctrl-C: the runs so far (the last one partial, ``interrupted``), then one stderr
    line; exit status 130. With ``both`` the side-by-side table (or object) shows them, and a
    transport whose run never started is named as not run."""
    if s.get("transport") == "both" and runs:
        _emit_both(args, s, ep, runs, not_run=[t for t in transports(s) if t not in runs])
    elif runs:
        partial = next(iter(runs.values()))
        if args.json:
            sys.stdout.write(json.dumps(partial) + "\n")
        else:
            render(partial, summary=args.summary)
    sys.stdout.flush()
    sys.stderr.write("uet-run: interrupted; every process stopped\n")
    return 130


async def _live_one(
    args: argparse.Namespace,
    settings: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
    ctrl_c: _CtrlC,
    dilation: Dilation,
    *,
    beside: bool = False,
) -> tuple[int, dict[str, Any] | None]:
    """One live run: ``(0, result)``, or ``(130, result or partial)`` after Ctrl-C (``partial``:
    the launcher's :meth:`Launcher.partial_result`, None when the workload did not exist yet; the
    caller prints it); a failure raises :class:`RunFailed`. ``beside``: the simulator's figures
    are printed beside this run's, so its RoCE endpoints take the simulator's seed-derived
    connection secret (the same QPNs, UDP source ports and ECMP paths; a run on its own keeps a
    random one)."""
    import asyncio

    from uet.live.launcher import CaptureSpec, Launcher, build_workload  # the live engine: only for a live run
    from uet.live.process import FaultsError, RunError

    s, topo, ep = settings
    launcher = Launcher(s, topo, ep)
    launcher.dilation = dilation
    if beside:
        launcher.cm_secret = sim_cm_secret(s)
    launcher.interval = args.interval
    launcher.on_interval = _print_interval
    launcher.capture = CaptureSpec(
        getattr(args, "pcap_per", None), args.capture_max, args.eventlog, getattr(args, "transport_both", False)
    )
    launcher.fault_argv = fault_argv(args) + (["--faults", s["scenario"]] if _fault_table(s) else [])
    launcher.faults = faults_from(args, _fault_table(s), int(s["seed"]))
    progress_cm: Any = contextlib.nullcontext()
    if args.progress or sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeElapsedColumn

        prog = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TimeElapsedColumn(),
            console=Console(stderr=True, force_terminal=True if args.progress else None),
            transient=True,
        )
        total = build_workload(s).total_bytes()
        task = prog.add_task(f"{s['workload']} received", total=total)
        launcher.on_progress = lambda moved: prog.update(task, completed=moved)
        progress_cm = prog
    try:
        with progress_cm:
            result = await launcher.run()
            if ctrl_c.interrupted:  # the run absorbed the cancel (it finished as the signal came)
                raise asyncio.CancelledError
    except asyncio.CancelledError:
        if not ctrl_c.interrupted:
            raise
        ctrl_c.absorb()
        await launcher.stop_fabric()
        await launcher.shutdown()
        partial = launcher.partial_result()
        if partial is not None:
            partial["transport"] = s.get("transport", "uet")
        return 130, partial
    except FaultsError as e:  # a bad link name: one line, before any process started
        await launcher.shutdown()
        raise UsageError(str(e)) from None
    except (RunError, TimeoutError, OSError, ValueError) as e:
        await launcher.shutdown()
        msg = str(e) or type(e).__name__
        if args.json:  # a JSON consumer gets an error object too (issue 15 item 17)
            sys.stdout.write(json.dumps({"ok": False, "error": msg, "workload": s["workload"]}) + "\n")
            sys.stdout.flush()
        raise RunFailed(msg) from None
    try:
        await launcher.shutdown()
    except asyncio.CancelledError:  # Ctrl-C after the run finished: it stays a complete result
        if not ctrl_c.interrupted:
            raise
        ctrl_c.absorb()
        await launcher.shutdown()
    finish_live(result, launcher)
    if s.get("plot"):  # the fabric process drew the queues and ports; the flows are the launcher's
        from uet.sim.plots import fct_cdf

        cdf = fct_cdf(result, s["plot"])
        if cdf:
            result["plots"] = [*result["plots"], cdf]
    return (130 if ctrl_c.interrupted else 0), result


def _dilation_arg(text: str) -> float | str:
    """``--dilation``: ``auto`` or a factor of at least 1."""
    if text == "auto":
        return text
    return float_arg(1.0)(text)


def _body(argv: Sequence[str] | None) -> int:
    import asyncio

    args = build_parser().parse_args(argv)
    if args.hosts:
        return _on_hosts(args, list(sys.argv[1:] if argv is None else argv))
    if args.rank is not None or args.link != "direct" or args.data_protect or args.udp_checksum != "auto" or args.keys:
        raise UsageError("--rank, --link, --data-protect, --keys and --udp-checksum go with --hosts (the fabric "
                         "engine builds its own frames)")  # fmt: skip
    settings = settings_from(args)
    from uet.tools.fabric import check_outputs

    check_outputs(args)
    if args.rate_bps is not None:
        warn_low_rate("uet-run", "--rate", args.rate_bps)
    if args.engine == "live" and int(settings[0]["endpoints"]) > LIVE_MAX_ENDPOINTS:
        n = settings[0]["endpoints"]
        raise UsageError(
            f"--endpoints {n}: the live engine runs one process per endpoint, at most {LIVE_MAX_ENDPOINTS}; "
            f"give -n {LIVE_MAX_ENDPOINTS} or fewer (or [run] endpoints in the scenario file), or add "
            f"--engine sim to run {n} endpoints in virtual time"
        )
    if args.engine == "sim":
        return _simulate(args, settings)
    # one factor for every transport of the run, and with both transports the simulator's figures
    # of the same scenario to print beside the live ones (uet.experiments.differential): both before the
    # event loop runs (each simulation runs on a loop of its own)
    dilation = dilation_for(args.dilation, *settings)
    s = settings[0]
    faults = faults_from(args, _fault_table(s), int(s["seed"]))
    sim = None
    spread: list[dict[str, dict[str, Any]]] = []
    if len(transports(s)) > 1:
        from uet.experiments.differential import spread_runs
        from uet.sim.runs import simulate_runs

        def cut(parts: Iterable[dict[str, dict[str, Any]]]) -> bool:
            return any(r.get("interrupted") for part in parts for r in part.values())

        with usage_errors():
            sim = simulate_runs(*settings, faults=faults)
            if not cut([sim]):
                spread = spread_runs(*settings, faults=faults)  # the simulator's range (uet.experiments.differential)
        if cut([sim, *spread]):
            raise KeyboardInterrupt  # Ctrl-C during the simulation: nothing ran live yet
    return asyncio.run(_main(args, settings, dilation, sim, spread))


def _on_hosts(args: argparse.Namespace, argv: list[str]) -> int:
    """``--hosts``: the scenario's endpoints on real addresses (:mod:`uet.live.hosts`)."""
    if args.engine != "live":
        raise UsageError("--hosts runs live endpoints; drop --engine sim")
    for opt in ("pcap", "plot", "telemetry", "interval", "csv"):
        if getattr(args, opt, None):
            raise UsageError(f"--{opt} needs the software fabric; it does not go with --hosts")
    given = args.endpoints is not None
    names = [h for h in args.hosts.split(",") if h.strip()]
    if not given:
        args.endpoints = max(2, len(names))
    settings = settings_from(args)
    hosts = _check_hosts(args.hosts, given, settings[0])
    check_link_options(args, keys=args.keys)
    if args.keys:
        if args.data_protect != "tss":
            raise UsageError("--keys goes with --data-protect tss")
        _host_security(args.keys, wall_ns=0)  # a missing or bad key file stops the run before any rank starts
    return _run_hosts(args, settings, hosts, argv)


def _check_hosts(text: str, endpoints_given: bool, settings: dict[str, Any]) -> list[str]:
    """The ``--hosts`` list (one address per endpoint; ``endpoints`` follows it)."""
    import ipaddress

    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if len(hosts) < 2:
        raise UsageError("--hosts needs at least two addresses (one per endpoint)")
    for h in hosts:
        try:
            ipaddress.ip_address(h)
        except ValueError:
            raise UsageError(f"--hosts: {h!r} is not an IP address") from None
    if len(set(hosts)) != len(hosts):
        raise UsageError("--hosts: every endpoint needs its own address")
    if endpoints_given and int(settings["endpoints"]) != len(hosts):
        raise UsageError(f"--endpoints {settings['endpoints']} but --hosts names {len(hosts)} addresses")
    return hosts


def _check_local(hosts: list[str]) -> None:
    """Without ``--rank`` every rank runs on this machine: each address must be one of its own
    (a rank that cannot bind its address used to leave rank 0 waiting out its timeout)."""
    import socket

    for h in hosts:
        with socket.socket(socket.AF_INET6 if ":" in h else socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind((h, 0))
            except OSError:
                raise UsageError(
                    f"--hosts: {h} is not an address of this machine; without --rank every rank runs here "
                    "(on several machines, run the same command on each with its own --rank)"
                ) from None


def _host_security(path: str, *, wall_ns: int) -> Any:
    """``--keys FILE`` read (:func:`uet.live.hosts.host_security`); a file that cannot be read or
    used is a :class:`UsageError`."""
    from uet.live.hosts import host_security
    from uet.tss.errors import KeyFileError, TssError

    try:
        return host_security(path, wall_ns=wall_ns)
    except (KeyFileError, TssError) as e:
        raise UsageError(f"--keys: {e}") from None


def _run_hosts(
    args: argparse.Namespace,
    settings: tuple[dict[str, Any], dict[str, Any], dict[str, Any]],
    hosts: list[str],
    argv: list[str],
) -> int:
    """``uet-run --hosts``: one rank (``--rank``) or all of them here (each a child running this
    very command line with its ``--rank``)."""
    import asyncio

    from uet.tools.link_options import link_config

    from uet.endpoint import EndpointConfig
    from uet.errors import UetError
    from uet.live.hosts import launch_local, run_rank
    from uet.live.process import RunError
    from uet.tss.errors import KeyFileError, TssError

    s, _topo, ep = settings
    if args.rank is None:
        _check_local(hosts)
        try:
            return launch_local([sys.executable, "-m", "uet.tools.run", *argv], hosts, float(s["timeout_s"]))
        except RunError as e:
            raise RunFailed(str(e)) from None
    if not 0 <= args.rank < len(hosts):
        raise UsageError(f"--rank {args.rank}: ranks are 0..{len(hosts) - 1}")
    cfg = link_config(args, merge(EndpointConfig(), ep))
    rank = run_rank(args.rank, hosts, s, cfg, link_mode=args.link, ip_proto=args.ip_proto, keys=args.keys)
    try:
        out = asyncio.run(rank)
    except (KeyFileError, TssError) as e:
        raise UsageError(f"--keys: {e}") from None
    except (RunError, UetError, OSError, TimeoutError) as e:
        raise RunFailed(str(e) or type(e).__name__) from None
    if args.json or args.rank != 0:
        sys.stdout.write(json.dumps(out) + "\n")
    else:
        render(out)
    return 0 if out.get("ok", not out.get("error")) else 1


def _simulate(args: argparse.Namespace, settings: tuple[dict[str, Any], dict[str, Any], dict[str, Any]]) -> int:
    """``--engine sim``: the same settings, workload objects and result shape, in virtual time
    (:func:`uet.sim.scenario.simulate`): the same run as ``uet-sim`` with these arguments.
    ``--transport both`` runs UET, then RoCEv2, on the same scenario (plots in ``DIR/uet`` and
    ``DIR/roce``) and prints the side-by-side table."""
    from uet.tools.sim import render as sim_render
    from uet.tools.sim import simulate_for

    s, topo, ep = settings
    for opt in ("telemetry", "interval"):
        if getattr(args, opt):
            raise UsageError(f"--{opt} works with the live engine only (the simulator has --plot)")
    faults = faults_from(args, _fault_table(s), int(s["seed"]))
    runs = simulate_for(args, s, topo, ep, faults=faults, prog="uet-run")
    interrupted = any(r.get("interrupted") for r in runs.values())
    if len(transports(s)) > 1:
        _emit_both(args, s, ep, runs, not_run=[t for t in transports(s) if t not in runs])
        ok = all(r["ok"] for r in runs.values())
    else:
        ok = _emit_one(args, runs[s["transport"]], sim_render)["ok"]
    if interrupted:  # Ctrl-C: the simulator returned what finished; it is printed above
        raise KeyboardInterrupt
    return 0 if ok else 1


def _emit_one(args: argparse.Namespace, result: dict[str, Any], show: Any) -> dict[str, Any]:
    """One run's output: ``--csv``, then ``--json`` or the tables ``show`` draws."""
    if args.csv:
        write_csv(result, args.csv)
        result["csv"] = args.csv
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        show(result, summary=args.summary)
    return result


def _fault_table(s: dict[str, Any]) -> dict[str, Any] | None:
    """The scenario file's ``[faults]`` table, if it has one."""
    return load_scenario(s["scenario"]).get("faults") if s.get("scenario") else None


def _emit_both(
    args: argparse.Namespace,
    s: dict[str, Any],
    ep: dict[str, Any],
    runs: dict[str, dict[str, Any]],
    not_run: Sequence[str] = (),
    sim: dict[str, dict[str, Any]] | None = None,
    spread: Sequence[dict[str, dict[str, Any]]] = (),
) -> int:
    """``--transport both``: one object ``{"ok", "transport": "both", "comparison", "runs"}``
    (``--json``), or the side-by-side table (tools/compare.py) then each run's one-line verdict.
    ``sim``: the same scenario in the simulator beside live runs (the columns ``UET live``, ``UET
    sim``...; ``sim`` and the live/sim ``differential`` in the object, uet/experiments/differential.py), the
    time-dilation factor and whether the CPU kept up above the table.
    After Ctrl-C (a run marked ``interrupted``, or transports in ``not_run``): the same, the
    interrupted run's column and verdict saying so, ``"interrupted": true`` and ``not_run`` in the
    object, exit status 130."""
    from uet.tools.compare import render_comparison

    from uet.experiments.compare import comparison

    cmp = comparison(runs)
    interrupted = bool(cmp["interrupted"] or not_run)
    first = next(iter(runs.values()))
    out = {
        "ok": cmp["ok"] and not interrupted,
        "transport": "both",
        "engine": first.get("engine"),
        "workload": s["workload"],
        "endpoints": first.get("endpoints"),
        "comparison": cmp,
        "runs": runs,
        "settings": settings_record(s, ep),
    }
    if interrupted:
        out.update(interrupted=True, not_run=list(not_run))
    bar: dict[str, Any] | None = None
    if sim:
        from uet.tools.differential import beside

        from uet.experiments.differential import judge

        bar = judge(runs, sim, spread)
        out.update(sim=sim, differential=bar)
    done = 130 if interrupted else 0 if out["ok"] else 1
    note = fairness_note(first.get("derived", {}).get("tuned", []))
    if note:
        out["note"] = note
    if getattr(args, "csv", None):
        for tr, res in runs.items():
            root, ext = os.path.splitext(args.csv)
            write_csv(res, f"{root}-{tr}{ext or '.csv'}")
    if args.json:
        sys.stdout.write(json.dumps(out) + "\n")
        return done
    engine = "virtual time" if first.get("engine") == "sim" else "live processes"
    if note:
        sys.stdout.write(note + "\n")
    lines = dilation_lines(runs)
    for line in lines:
        sys.stdout.write(line + "\n")
    if sim and bar is not None:
        from uet.tools.differential import render_verdict

        shown = beside({tr: r for tr, r in runs.items()}, sim)
        render_comparison(
            comparison(shown),
            f"{s['workload']}, {first.get('endpoints')} endpoints: UET against RoCEv2, live "
            f"(time-dilated) and in the simulator",
        )
        render_verdict(bar)
    else:
        render_comparison(cmp, f"{s['workload']}, {first.get('endpoints')} endpoints: UET against RoCEv2 ({engine})")
    for tr, res in runs.items():
        bad = [f for f in res.get("flows", []) if not f.get("intact")]
        if res.get("interrupted"):
            verdict = f"interrupted: {res.get('flows_finished', 0)} of {len(res.get('flows', []))} flows finished"
        else:
            verdict = "all messages intact" if res.get("ok") else f"FAILED: {len(bad)} flows not intact"
        sys.stdout.write(f"{tr}: {verdict}\n")
    for tr in not_run:
        sys.stdout.write(f"{tr}: not run (interrupted before it started)\n")
    for tr, res in runs.items():
        if res.get("diagnosis"):
            sys.stderr.write(f"uet-run: note ({tr}): {res['diagnosis']}\n")
    return done


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``uet-run``: 0, 1 for a failed run, 2 for a usage error, 130 on Ctrl-C."""
    return run_main("uet-run", _body, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
