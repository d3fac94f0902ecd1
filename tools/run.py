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
live ones, with the live/sim bar's verdict (tools/differential.py: the live figures against the
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
import asyncio
import contextlib
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

from uet.fabric.profiles import (
    PROFILES,
    REALTIME_RATE_BPS,
    load_topology,
    merge,
    override_args,
    overrides_to_dict,
)
from uet.tools.capture_options import add_capture_options, open_captures
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
    transport_label,
    warn_low_rate,
    yes_no,
)
from uet.tools.fault_options import add_fault_options, check_fault_names, fault_argv, faults_from, render_faults
from uet.tools.link_options import add_link_options, check_link_options
from uet.tools.run_settings import add_placement_options, add_workload_option, load_scenario, read_settings

from uet.clock import DilatedClock
from uet.live.dilation import TIMER_GRAIN_NS, Dilation, choose, short_of_cpu
from uet.live.dilation import verdict as dilation_verdict
from uet.scenario import Scenario, Settings, derive
from uet.scenario.derive import fairness_note
from uet.scenario.model import sizing_overrides
from uet.workloads import WORKLOADS as _WORKLOADS
from uet.workloads import Workload, make
from uet.workloads.report import credit_moved_bytes, summarize

__all__ = ["Launcher", "build_flows", "build_parser", "main"]

WORKLOADS = tuple(_WORKLOADS)
#: ``--transport``: UET, RoCEv2 (RC queue pairs with DCQCN, rocev2-and-fabric.md §6–§7), or both
#: one after the other on the same scenario, with the side-by-side table (tools/compare.py)
TRANSPORTS = ("uet", "roce", "both")
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


class RunError(Exception):
    """The run could not be set up or a child misbehaved."""


def build_workload(s: dict[str, Any]) -> Workload:
    """The workload object of run settings ``s`` (RunError for a bad name, size or parameter)."""
    try:
        return make(
            s["workload"],
            int(s["endpoints"]),
            message_bytes=int(s["message_bytes"]),
            messages=int(s["messages"]),
            seed=int(s["seed"]),
            params=s.get("workload_params"),
        )
    except ValueError as e:
        raise RunError(str(e)) from None


def build_flows(workload: str, n: int, seed: int) -> list[tuple[int, int]]:
    """``(source, destination)`` endpoint indices of ``workload`` over ``n`` endpoints."""
    w = build_workload({"workload": workload, "endpoints": n, "message_bytes": 1 << 16, "messages": 1, "seed": seed})
    return [(f.src, f.dst) for f in w.flows()]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["UET_RUN_PARENT"] = str(os.getpid())
    return env


class Child:
    """A child process in its own process group, with its stdout read as JSON lines."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        self.name = name
        self.proc = proc
        self.events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                await self.events.put(None)
                return
            try:
                await self.events.put(json.loads(line))
            except json.JSONDecodeError:
                continue

    async def next(self, timeout: float) -> dict[str, Any]:
        try:
            ev = await asyncio.wait_for(self.events.get(), timeout)
        except TimeoutError:
            raise RunError(f"{self.name}: no report within {timeout:.0f} s") from None
        if ev is None:
            rc = await self.proc.wait()
            raise RunError(f"{self.name} exited (status {rc}) unexpectedly")
        return ev

    async def tell(self, line: str) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(line.encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await self.proc.stdin.drain()

    def signal_group(self, sig: int) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)


async def _spawn(name: str, *args: str, stdin: bool = True) -> Child:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        env=_child_env(),
        start_new_session=True,
    )
    return Child(name, proc)


class Launcher:
    """One run: settings in, :meth:`run` → the result dict (see the module docstring)."""

    def __init__(self, settings: dict[str, Any], topology: dict[str, Any], endpoint: dict[str, Any]) -> None:
        self.s = settings
        self.topology_table = topology
        self.endpoint = endpoint
        self.children: list[Child] = []
        self.fabric: Child | None = None
        self.workers: list[Child] = []
        self.progress: Any = None
        self.workload: Workload | None = None
        self.interval: float | None = None  # --interval: report period (s)
        #: fault options handed to the uet-fabric process (uet.tools.fault_options), and the
        #: schedule they make (checked against the topology before the fabric starts)
        self.fault_argv: list[str] = []
        self.faults: Any = None
        self.intervals: list[dict[str, Any]] = []
        self.rx_bytes = 0  # bytes of the messages received whole
        self.rx_messages = 0
        #: per rank, payload bytes received so far, counted per packet (the workers' "bytes" events)
        self.moved: dict[int, int] = {}
        #: per rank, its event loop's wake-up lateness over the run (uet/live/worker.py's ``lag``)
        self.lags: dict[int, dict[str, Any]] = {}
        self.flows_reported: dict[int, str | None] = {}  # flow id -> its sender's error
        self.finished: set[int] = set()  # ranks that reported done or error
        self.host_rate = 0
        self.host_mtu = 1500
        #: the RoCE connection manager's secret, shared by the run's endpoints only (uet.roce.cm)
        self.cm_secret = secrets.token_hex(16)
        #: every default of the run, derived from its physics (set by :meth:`fabric_args`)
        self.derived: Settings | None = None
        self.addresses: list[str] = []
        self.t_go: float | None = None
        #: per rank, what it reported so far (the flows it finished, the messages it received):
        #: what :meth:`partial_result` shows after Ctrl-C
        self.reports: list[dict[str, Any]] = []
        #: the time-dilation factor of the run (``--dilation``; uet/live/dilation.py) and the clock
        #: every process of the run shares (its start instant is taken when the run starts)
        self.dilation = Dilation(1.0, "given")
        self.clock = DilatedClock()
        #: RoCE: the queue pairs' settings every endpoint takes (the derived ones)
        self.qp: dict[str, Any] | None = None
        #: the topology the switch process models (sized for the endpoints): for the ideal FCTs
        self.model_topology: Any = None
        #: each rank's host (Topology.placement of the run's ``placement``)
        self.placed: list[int] | None = None
        #: --pcap-per, --eventlog, --capture-max (tools/capture_options.py)
        self.capture: argparse.Namespace | None = None
        #: the fabric process's summary after Ctrl-C (:meth:`stop_fabric`)
        self.fabric_summary: dict[str, Any] = {}

    def fabric_args(self, n: int) -> list[str]:
        s = self.s
        topo = load_topology(
            self.topology_table or s["topology"],
            profile=s["profile"],
            rate_bps=int(s["rate_bps"]),
            overrides=overrides_to_dict(s.get("overrides", [])),
        )
        grow = sizing_overrides(topo, n)
        extra = override_args(grow)
        sized = merge(topo, grow) if grow else topo
        self.derived = derive(Scenario("live", s, self.topology_table, self.endpoint), sized)
        self.host_rate = topo.host_link.rate_bps
        self.host_mtu = topo.host_link.mtu
        if s.get("transport") == "roce":  # the derived queue pairs, the simulator's too
            self.qp = asdict(self.derived.qp)
        self.model_topology = sized
        if self.faults is not None:  # a bad link name: one line, before any process starts
            check_fault_names(self.faults, sized)
        args = ["-m", "uet.tools.fabric", "--profile", s["profile"]]
        args += ["--dilation", repr(self.clock.factor), "--start-ns", str(self.clock.start_ns)]
        if s["profile"] == "realtime":  # uet-fabric refuses --rate for the other profiles: their rate is their own
            args += ["--rate", str(int(s["rate_bps"]))]
        spec = s["topology"]
        if self.topology_table:
            path = s.get("scenario")
            if not path:
                raise RunError("an inline topology table needs a scenario file")
            args += ["--topology", path]
        else:
            args += ["--topology", spec]
        for o in s.get("overrides", []):
            args += ["-o", o]
        args += extra
        for opt in ("pcap", "plot", "telemetry"):
            if s.get(opt):
                args += [f"--{opt}", str(s[opt])]
        if s.get("plot"):  # the transport in every title: two runs' figures side by side are told apart
            args += ["--plot-label", transport_label(str(s.get("transport", "uet")))]
        if s.get("pcap") and self.capture is not None:
            args += ["--pcap-per", self.capture.pcap_per or "port", "--capture-max", str(self.capture.capture_max)]
        return args + self.fault_argv

    async def run(self) -> dict[str, Any]:
        s = self.s
        n = int(s["endpoints"])
        wl = self.workload = build_workload(s)
        timeout = float(s["timeout_s"])
        self.clock = DilatedClock(self.dilation.factor)  # the run's start instant, shared by every process
        self.fabric = await _spawn("fabric", *self.fabric_args(n), stdin=False)
        self.children.append(self.fabric)
        ready = await self.fabric.next(30)
        if ready.get("event") != "ready":
            raise RunError(f"fabric: unexpected first report {ready}")
        if len(ready["hosts"]) < n:
            raise RunError(f"the topology has {len(ready['hosts'])} hosts for {n} endpoints")
        scn = Scenario("live", s, self.topology_table, self.endpoint)
        self.placed = scn.hosts(self.model_topology, n)  # rank i on host placed[i]
        hosts = [ready["hosts"][h] for h in self.placed]
        assert self.derived is not None  # fabric_args derived the run's settings
        fa = self.addresses = [h["ip"] for h in hosts]
        wl.place(self.model_topology.rank_servers(self.placed))
        wspec = wl.spec()
        for i in range(n):
            spec = {
                "fa": fa[i],
                "switch": hosts[i]["udp"],
                "rate_bps": self.host_rate,
                "endpoint": self.endpoint,
                "workload": wspec,
                "rank": i,
                "addresses": fa,
                "timeout_s": timeout,
                "transport": s.get("transport", "uet"),
                "rtt_ns": self.derived.roce_rtt_ns,
                "mtu": self.host_mtu,
                "seed": int(s["seed"]),
                "clock": self.clock.spec(),
                "qp": self.qp,
                "cm_secret": self.cm_secret,
                **self._eventlog_spec(i),
            }
            # the bytes received, counted per packet, every period: for --interval, the progress bar
            # and the per-flow bytes of a run interrupted by Ctrl-C (partial_result)
            spec["progress_s"] = min(0.25, self.interval / 5) if self.interval else 0.25
            w = await _spawn(f"endpoint {i} ({fa[i]})", "-m", "uet.live.worker", json.dumps(spec))
            self.workers.append(w)
            self.children.append(w)
        for w in self.workers:
            ev = await w.next(30)
            if ev.get("event") != "ready":
                raise RunError(f"{w.name}: unexpected first report {ev}")
        t_go = self.t_go = time.monotonic()
        for w in self.workers:
            await w.tell("go")
        total = wl.total_bytes()
        reporter = asyncio.ensure_future(self._report(t_go, total)) if self.interval else None
        try:
            results = await self._collect_all(total, self.collect_timeout_s())
        finally:
            if reporter is not None:
                reporter.cancel()
        real_s = time.monotonic() - t_go
        if self.interval:
            self._interval_end(real_s, total)
        elapsed = self.clock.virtual_seconds(real_s)
        for w in self.workers:
            await w.tell("stop")
        closed = await asyncio.gather(*(self._closed(w) for w in self.workers))
        codes = [await w.proc.wait() for w in self.workers]
        self.fabric.signal_group(signal.SIGTERM)
        summary: dict[str, Any] = {}
        while True:
            try:
                ev = await self.fabric.next(30)
            except RunError:
                break
            if ev.get("event") == "summary":
                summary = ev
        await self.fabric.proc.wait()
        return self._result(fa, results, closed, codes, summary, elapsed)

    def collect_timeout_s(self) -> float:
        """Real seconds the launcher waits for every rank's report: the run's ``timeout_s`` of
        virtual time in real time (TDF times longer, as each rank waits), plus 30 s for the ranks
        to report. Before, it waited ``timeout_s`` + 30 real seconds whatever the factor, and a
        run dilated ×800 on a busy machine (uet/live/dilation.py) failed with ``TimeoutError`` after
        150 s although the ranks were still within their limit."""
        return self.clock.real_delay(float(self.s["timeout_s"]) * 1e9) + 30

    async def _collect_all(self, total: int, timeout: float) -> list[dict[str, Any]]:
        """Every worker's reports, or :class:`RunError` as soon as the fabric process exits
        (a run without its switch can only time out; issue 15 item 17: the launcher used to wait
        the whole ``--timeout`` and blame "timeout")."""
        assert self.fabric is not None
        self.reports = [_empty_report() for _ in self.workers]
        inner = asyncio.gather(*(self._collect(w, rep) for w, rep in zip(self.workers, self.reports, strict=True)))
        inner.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved when cancelled
        gather = asyncio.ensure_future(asyncio.wait_for(inner, timeout))
        fabric_exit = asyncio.ensure_future(self.fabric.proc.wait())
        try:
            await asyncio.wait({gather, fabric_exit}, return_when=asyncio.FIRST_COMPLETED)
            if not gather.done():
                raise RunError(f"the fabric process exited (status {fabric_exit.result()}) during the run")
            return gather.result()
        finally:
            for f in (gather, fabric_exit):
                if not f.done():
                    f.cancel()
            await asyncio.gather(gather, fabric_exit, return_exceptions=True)

    async def _collect(self, w: Child, rep: dict[str, Any]) -> dict[str, Any]:
        flows, rx = rep["flows"], rep["rx"]
        rank = self.workers.index(w)
        while True:
            ev = await w.next(self.clock.real_delay(float(self.s["timeout_s"]) * 1e9) + 30)
            kind = ev.get("event")
            if kind == "flow":
                flows.append(ev)
                self.flows_reported[ev["flow"]] = ev.get("error")
                await self._abort_if_hopeless()
            elif kind == "rx":
                rx.append(ev)
                self.rx_bytes += ev["bytes"]
                self.rx_messages += 1
            elif kind == "bytes":
                self.moved[rank] = int(ev["rx"])
                if self.progress is not None:
                    self.progress[0].update(self.progress[1], completed=self.moved_bytes)
            elif kind == "lag":
                self.lags[rank] = ev
            elif kind == "error":
                rep["error"] = ev.get("error")
                break
            elif kind == "done":
                rep["check"] = ev.get("check")
                break
        self.finished.add(rank)
        return rep

    @property
    def moved_bytes(self) -> int:
        """Payload bytes received so far by every rank, counted per packet (never below the bytes
        of the messages received whole; never above the workload's bytes: a packet placed twice
        after a resend counts once)."""
        moved = max(sum(self.moved.values()), self.rx_bytes)
        return min(moved, self.workload.total_bytes()) if self.workload is not None else moved

    async def _abort_if_hopeless(self) -> None:
        """Once every flow's sender has reported and some flow failed, the ranks still running
        wait for messages that cannot come (``--rate 100``: every flow UNDELIVERABLE, the
        receiver waited out the whole ``--timeout``): tell them to stop (``abort``), so the run
        ends with the per-flow failures at once."""
        assert self.workload is not None
        if len(self.flows_reported) < len(self.workload.flows()):
            return
        if all(e is None for e in self.flows_reported.values()):
            return
        flows = self.workload.flows()
        starved = {f.dst for f in flows if self.flows_reported.get(f.id) is not None}
        for i, w in enumerate(self.workers):
            # waiting for a failed flow's messages, its own flows all reported: it waits in vain
            if (
                i in starved
                and i not in self.finished
                and all(f.id in self.flows_reported for f in flows if f.src == i)
            ):
                await w.tell("abort")

    async def stop_fabric(self, grace: float = 5.0) -> None:
        """After Ctrl-C, before the rest stops: ask the fabric process for its summary (SIGTERM,
        as at the end of a run) so the partial results show the fabric's counters too."""
        fab = self.fabric
        if fab is None or fab.proc.returncode is not None:
            return
        fab.signal_group(signal.SIGTERM)
        with contextlib.suppress(RunError):
            while True:
                ev = await fab.next(grace)
                if ev.get("event") == "summary":
                    self.fabric_summary = ev

    def partial_result(self) -> dict[str, Any] | None:
        """After Ctrl-C: the flows finished so far with their figures, every other flow marked
        ``unfinished`` (no completion time; its bytes those its receiver got so far where they can
        be told apart: :func:`uet.workloads.report.credit_moved_bytes`), the fabric's counters
        (:meth:`stop_fabric`); ``ok`` is false and ``interrupted`` true. ``None`` before the
        workload exists."""
        if self.workload is None:
            return None
        n = self.workload.n
        fa = self.addresses or [f"rank {i}" for i in range(n)]
        reports = self.reports or [_empty_report() for _ in range(n)]
        res = summarize(self.workload, fa, reports)
        for f in res["flows"]:
            if "completion_s" not in f:
                f.update(error="unfinished", unfinished=True)
        credit_moved_bytes(self.workload, res["flows"], self.moved)
        done = sum(1 for f in res["flows"] if not f.get("unfinished"))
        elapsed = self.clock.virtual_seconds(time.monotonic() - self.t_go) if self.t_go is not None else 0.0
        return {
            "ok": False,
            "interrupted": True,
            "engine": "live",
            "workload": self.s["workload"],
            "endpoints": n,
            "elapsed_s": round(elapsed, 3),
            "flows": res["flows"],
            "flows_finished": done,
            "fct": res["fct"],
            "fabric": self.fabric_summary.get("fabric", {}),
            "received_bytes": self.moved_bytes,
            "received_messages": self.rx_messages,
            "intervals": self.intervals,
        }

    async def _report(self, t_go: float, total: int) -> None:
        """``--interval``: every period, the payload bytes received in it and so far, counted as
        packets arrive (stderr, and the result's ``intervals``), as iperf3 ``-i`` does."""
        assert self.interval
        while True:
            await asyncio.sleep(self.interval)
            self._interval(time.monotonic() - t_go, total)

    def _interval(self, t: float, total: int) -> None:
        """One interval line, from the end of the last one to ``t`` (s since the start)."""
        last = self.intervals[-1] if self.intervals else {"end_s": 0.0, "received_bytes": 0}
        b = self.moved_bytes
        rec = interval_record(float(last["end_s"]), t, b - int(last["received_bytes"]), b, self.rx_messages)
        self.intervals.append(rec)
        sys.stderr.write(interval_line(rec, total) + "\n")

    def _interval_end(self, elapsed: float, total: int) -> None:
        """After the run: the last, partial interval (when anything is left to say), then the sum
        over the whole run, as iperf3 ends its interval report."""
        last = self.intervals[-1] if self.intervals else None
        if last is None or elapsed - float(last["end_s"]) > 1e-3 or self.moved_bytes != last["received_bytes"]:
            self._interval(max(elapsed, float(last["end_s"]) if last else 0.0), total)
        b = self.moved_bytes
        rec = interval_record(0.0, elapsed, b, b, self.rx_messages)
        sys.stderr.write("- " * 30 + "\n" + interval_line(rec, total) + "  sum\n")

    async def _closed(self, w: Child) -> dict[str, Any]:
        try:
            while True:
                ev = await w.next(30)
                if ev.get("event") == "closed":
                    counters: dict[str, Any] = ev.get("counters", {})
                    return counters
        except RunError:
            return {}

    def _result(
        self,
        fa: list[str],
        results: list[dict[str, Any]],
        closed: list[dict[str, Any]],
        codes: list[int],
        summary: dict[str, Any],
        elapsed: float,
    ) -> dict[str, Any]:
        assert self.workload is not None
        res = summarize(self.workload, fa, results, ideal_s=self._ideal())
        errors = res["errors"]
        ok = res["ok"] and all(c == 0 for c in codes)
        fab = summary.get("fabric", {})
        return {
            "ok": ok,
            "engine": "live",
            "fct": res["fct"],
            "workload": self.s["workload"],
            "endpoints": len(fa),
            "elapsed_s": round(elapsed, 6),
            "dilation": self.dilation.record(),
            "flows": res["flows"],
            "fabric": fab,
            "fabric_io": summary.get("io", {}),
            "pacing": summary.get("pacing", {}),
            "switch_kernel": summary.get("kernel", {}),
            "endpoint_lag": endpoint_lag(self.lags.values(), self.dilation.factor),
            "endpoint_status": codes,
            "endpoint_errors": errors,
            "endpoint_counters": [
                {
                    k: c.get(k, 0)
                    for k in (
                        "retransmits",
                        "retransmitted_bytes",
                        "cnps_sent",
                        "naks_sent",
                        "link_rx_ce",
                        "link_rx_trimmed",
                        "link_tx_held",
                        "link_pfc_rx_xoff",
                        "messages_sent",
                        "messages_received",
                    )
                }
                for c in closed
            ],
            "plots": summary.get("plots", []),
            **({"faults": summary["faults"]} if "faults" in summary else {}),
            **({"collective": res["collective"]} if "collective" in res else {}),
            "pcaps": _written(self.s.get("pcap"), ".pcap"),
            "eventlogs": [e["eventlog"] for e in map(self._eventlog_spec, range(len(self.workers))) if e],
            "telemetry": self.s.get("telemetry"),
            "intervals": self.intervals,
        }

    def _ideal(self) -> Any:
        """A flow's ideal completion time as the simulator defines it (its frames with their
        headers at the host link rate, the path's store-and-forward and propagation and the last
        ACK's way back: :func:`uet.sim.scenario.ideal_seconds`), on this run's topology, so the two
        engines' slowdowns divide by the same figure."""
        if self.model_topology is None:
            return None
        from uet.fabric.model import Fabric

        from uet.sim.scenario import ideal_seconds

        fabric = Fabric(self.model_topology)
        roce = self.qp is not None
        payload = (
            int(self.qp["pmtu"]) if self.qp is not None else min(int(self.endpoint.get("payload_size", 4096)), 16383)
        )
        return lambda f: ideal_seconds(fabric, f, payload, roce=roce, hosts=self.placed)

    def _eventlog_spec(self, rank: int) -> dict[str, Any]:
        """``--eventlog FILE``: each endpoint process writes its own file, FILE with ``-rank<N>``
        (and the transport with ``--transport both``) before the suffix."""
        c = self.capture
        if c is None or not c.eventlog:
            return {}
        root, ext = os.path.splitext(c.eventlog)
        tr = f"-{self.s['transport']}" if getattr(c, "transport_both", False) else ""
        return {"eventlog": f"{root}{tr}-rank{rank}{ext}", "capture_max": c.capture_max}

    def stop_all(self, sig: int = signal.SIGTERM) -> None:
        for c in self.children:
            c.signal_group(sig)

    async def shutdown(self, grace: float = 5.0) -> None:
        """Stop every child that is still running: SIGTERM its group, SIGKILL after ``grace``."""
        live = [c for c in self.children if c.proc.returncode is None]
        for c in live:
            c.signal_group(signal.SIGTERM)
        if live:
            _done, pending = await asyncio.wait([asyncio.ensure_future(c.proc.wait()) for c in live], timeout=grace)
            for c in live:
                if c.proc.returncode is None:
                    c.signal_group(signal.SIGKILL)
            for c in live:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(c.proc.wait(), grace)
        for c in self.children:
            c.reader.cancel()


#: switch timer lateness (p99, µs) above which the fabric process is taken to be short of CPU: ten
#: frame times of a 1500-byte frame at the realtime profile's 100 Mb/s
LATE_TIMER_US = 1200.0
#: kernel receive queue of a switch host socket (bytes, largest on the sampling grid) from which
#: the report points out the queueing the model did not see: about 170 1500-byte frames, 20 ms at
#: the realtime profile's 100 Mb/s
_KERNEL_QUEUE_NOTE = 256 * 1024


def interval_record(start: float, end: float, nbytes: int, received: int, messages: int) -> dict[str, Any]:
    """One ``--interval`` record: ``nbytes`` received between ``start`` and ``end`` (s)."""
    return {
        "start_s": round(start, 3),
        "end_s": round(end, 3),
        "bytes": nbytes,
        "goodput_gbps": round(nbytes * 8 / max(end - start, 1e-9) / 1e9, 6),
        "received_bytes": received,
        "messages": messages,
    }


def interval_line(rec: dict[str, Any], total: int) -> str:
    """An interval record as iperf3 prints one: the period, the bytes in it, the rate, the sum."""
    return (
        f"[{rec['start_s']:7.2f}-{rec['end_s']:7.2f} s] {format_bytes(rec['bytes']):>10} "
        f"{format_rate(int(rec['goodput_gbps'] * 1e9)):>12}   received {rec['received_bytes']:,} of {total:,} bytes"
    )


def _empty_report() -> dict[str, Any]:
    return {"flows": [], "rx": [], "error": None, "check": None}


def cpu_starvation(result: dict[str, Any]) -> str | None:
    """On the live engine, say when the run was short of CPU rather than of network: the
    endpoints retransmitted although the fabric lost nothing (no drop, no trim: the timeouts were
    spurious, the receivers too slow to acknowledge in time), or the switch process's departure
    timer ran late (its p99 lateness above :data:`LATE_TIMER_US`), or frames waited in (or were
    dropped from) the kernel receive queues of the switch process's host sockets, the one buffer
    the model does not see (fabric/kernel_queues.py; from :data:`_KERNEL_QUEUE_NOTE`). None when
    none holds."""
    fab = result.get("fabric") or {}
    kq = result.get("switch_kernel") or {}
    kdrops = int(kq.get("rx_drops", 0) or 0)
    loss = int(fab.get("drops", 0) or 0) + int(fab.get("trims", 0) or 0) + kdrops
    retx = sum(int(f.get("retransmits") or 0) for f in result.get("flows", []))
    late = float((result.get("pacing") or {}).get("p99_us") or 0.0)
    why = []
    if retx and not loss:
        why.append(f"{retx} retransmissions with no loss in the fabric (0 drops, 0 trims): spurious timeouts")
    if late > LATE_TIMER_US:
        why.append(f"the switch timer ran late (p99 {late:.0f} µs)")
    kmax = int(kq.get("rx_queue_max_bytes", 0) or 0)
    if kdrops or kmax >= _KERNEL_QUEUE_NOTE:
        why.append(
            f"frames waited up to {kmax // 1024} KiB deep in the switch process's socket queues "
            f"and {kdrops} were dropped there, outside the model"
        )
    if not why:
        return None
    return (
        "CPU starvation: "
        + "; ".join(why)
        + ". The processes were short of CPU, not the network short of capacity: a larger --dilation, fewer "
        "endpoints, a lower --rate or --engine sim (virtual time) give figures of the protocol instead."
    )


def _written(folder: str | None, suffix: str) -> list[str]:
    if not folder or not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(suffix))


def settings_record(s: dict[str, Any], endpoint: dict[str, Any]) -> dict[str, Any]:
    """The run's settings as the result echoes them (``settings``): what was run, reproducibly."""
    keys = ("workload", "endpoints", "message_bytes", "messages", "seed", "timeout_s", "profile", "rate_bps")
    out = {k: s[k] for k in (*keys, "transport") if k in s}
    out["topology"] = s.get("scenario") or s.get("topology")
    out["overrides"] = list(s.get("overrides", []))
    if s.get("workload_params"):
        out["workload_params"] = s["workload_params"]
    out["endpoint"] = endpoint
    return out


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


#: flows from which the table suggests ``--summary``, and the worst flows it then shows
SUMMARY_FROM = 100
WORST_FLOWS = 10


def add_summary_option(p: argparse.ArgumentParser) -> None:
    """``--summary`` (uet-run and uet-sim)."""
    p.add_argument(
        "--summary",
        action="store_true",
        help=f"the flows' aggregates and the {WORST_FLOWS} worst flows instead of a row per flow (large runs)",
    )


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
    from rich.console import Console
    from rich.table import Table

    con = Console(width=None if sys.stdout.isatty() else 120)  # no 80-column wrap when piped
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
    s, topo, ep = settings
    runs: dict[str, dict[str, Any]] = {}
    args.transport_both = s.get("transport") == "both"
    with _CtrlC() as ctrl_c:
        for tr in _transports(s):
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
        _emit_both(args, s, ep, runs, not_run=[t for t in _transports(s) if t not in runs])
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
    s, topo, ep = settings
    launcher = Launcher(s, topo, ep)
    launcher.dilation = dilation
    if beside:
        launcher.cm_secret = sim_cm_secret(s)
    launcher.interval = args.interval
    launcher.capture = args
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
        launcher.progress = (prog, prog.add_task(f"{s['workload']} received", total=total))
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


def sim_cm_secret(s: dict[str, Any]) -> str:
    """The RoCE connection secret of a live run held to the simulator (``uet-run --transport
    both``, ``uet-bench differential``): the simulator's, the run seed (uet.sim.scenario), not a
    random one, so both engines derive the same QPNs and take the same UDP source ports and ECMP
    paths."""
    return str(int(s["seed"]))


def finish_live(result: dict[str, Any], launcher: Launcher) -> None:
    """What a live run's result adds once its processes ended: its transport and settings, the
    time-dilation verdict (did the CPU keep up, uet/live/dilation.py) and the CPU-starvation note."""
    s, ep = launcher.s, launcher.endpoint
    result["transport"] = s.get("transport", "uet")
    result["settings"] = settings_record(s, ep)
    if launcher.derived is not None:
        result["derived"] = launcher.derived.record()
    result["dilation"]["verdict"] = dilation_verdict(result, launcher.host_rate, int(ep.get("payload_size", 1024)))
    result["diagnosis"] = cpu_starvation(result)


async def live_runs(
    s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any], dil: Dilation
) -> dict[str, dict[str, Any]]:
    """The scenario on the live engine on each transport ``s["transport"]`` names, without output
    (tools/differential.py), with time dilation ``dil`` (:func:`dilation_for`): transport →
    result; a failed run raises :class:`RunFailed`. With the automatic factor, a run whose CPU did
    not keep up (uet/live/dilation.py) runs once more at twice the factor (its result's ``dilation``
    says ``retried_from``): the caller judges figures, which such a run does not give."""
    runs: dict[str, dict[str, Any]] = {}
    for tr in _transports(s):
        result = await _live_quiet({**s, "transport": tr}, topo, ep, dil)
        if dil.how == "auto" and short_of_cpu(result):
            again = Dilation(dil.factor * 2, "auto", dil.basis)
            result = await _live_quiet({**s, "transport": tr}, topo, ep, again)
            result["dilation"]["retried_from"] = dil.factor
        runs[tr] = result
    return runs


async def _live_quiet(s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any], dil: Dilation) -> dict[str, Any]:
    """One transport's live run for :func:`live_runs`."""
    launcher = Launcher(s, topo, ep)
    launcher.dilation = dil
    launcher.cm_secret = sim_cm_secret(s)
    try:
        result = await launcher.run()
    except (RunError, TimeoutError, OSError, ValueError) as e:
        raise RunFailed(f"{s['transport']}: {e or type(e).__name__}") from None
    finally:
        await launcher.shutdown()
    finish_live(result, launcher)
    return result


def _dilation_arg(text: str) -> float | str:
    """``--dilation``: ``auto`` or a factor of at least 1."""
    if text == "auto":
        return text
    return float_arg(1.0)(text)


def dilation_for(given: float | str, s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any]) -> Dilation:
    """The run's time-dilation factor: ``given`` (``--dilation N``), or for ``auto`` the one
    uet/live/dilation.py chooses from the scenario's packet rate (its receivers' host links, the
    payload size) and the machine's cores."""
    if given != "auto":
        return Dilation(float(given), "given")
    t = load_topology(
        topo or s["topology"],
        profile=s["profile"],
        rate_bps=int(s["rate_bps"]),
        overrides=overrides_to_dict(s.get("overrides", [])),
    )
    receivers = len({f.dst for f in build_workload(s).flows()})
    return choose(receivers, t.host_link.rate_bps, int(ep.get("payload_size", 1024)))


def endpoint_lag(lags: Iterable[dict[str, Any]], factor: float) -> dict[str, Any]:
    """The endpoints' event-loop wake-up lateness over a run (uet/live/worker.py's ``lag``
    events): the worst rank's p99 and max, in real µs and in the run's virtual µs (÷ ``factor``)."""
    got = [g for g in lags if g.get("samples")]
    p99 = max((float(g["p99_us"]) for g in got), default=0.0)
    worst = max((float(g["max_us"]) for g in got), default=0.0)
    return {
        "ranks": len(got),
        "p99_us_real": p99,
        "max_us_real": worst,
        "p99_us": round(p99 / factor, 2),
        "max_us": round(worst / factor, 2),
    }


def _body(argv: Sequence[str] | None) -> int:
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
    # of the same scenario to print beside the live ones (tools/differential.py): both before the
    # event loop runs (each simulation runs on a loop of its own)
    dilation = dilation_for(args.dilation, *settings)
    s = settings[0]
    faults = faults_from(args, _fault_table(s), int(s["seed"]))
    sim = simulate_runs(*settings, faults=faults) if len(_transports(s)) > 1 else None
    spread: list[dict[str, dict[str, Any]]] = []
    if sim:
        from uet.tools.differential import spread_runs

        def cut(parts: Iterable[dict[str, dict[str, Any]]]) -> bool:
            return any(r.get("interrupted") for part in parts for r in part.values())

        if not cut([sim]):
            spread = spread_runs(*settings, faults=faults)  # the simulator's range (tools/differential.py)
        if cut([sim, *spread]):
            raise KeyboardInterrupt  # Ctrl-C during the simulation: nothing ran live yet
    return asyncio.run(_main(args, settings, dilation, sim, spread))


def _on_hosts(args: argparse.Namespace, argv: list[str]) -> int:
    """``--hosts``: the scenario's endpoints on real addresses (:mod:`uet.tools.run_hosts`)."""
    from uet.tools.run_hosts import check_hosts, host_security, run_hosts

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
    args.hosts_list = check_hosts(args.hosts, given, settings[0])
    check_link_options(args, keys=args.keys)
    if args.keys:
        if args.data_protect != "tss":
            raise UsageError("--keys goes with --data-protect tss")
        host_security(args.keys, wall_ns=0)  # a missing or bad key file stops the run before any rank starts
    return run_hosts(args, settings, argv)


def _simulate(args: argparse.Namespace, settings: tuple[dict[str, Any], dict[str, Any], dict[str, Any]]) -> int:
    """``--engine sim``: the same settings, workload objects and result shape, in virtual time
    (:func:`uet.sim.scenario.simulate`): the same run as ``uet-sim`` with these arguments.
    ``--transport both`` runs UET, then RoCEv2, on the same scenario (plots in ``DIR/uet`` and
    ``DIR/roce``) and prints the side-by-side table."""
    from uet.tools.sim import render as sim_render

    s, topo, ep = settings
    for opt in ("telemetry", "interval"):
        if getattr(args, opt):
            raise UsageError(f"--{opt} works with the live engine only (the simulator has --plot)")
    faults = faults_from(args, _fault_table(s), int(s["seed"]))
    runs = simulate_runs(
        s, topo, ep, plot=args.plot, progress=args.progress or sys.stderr.isatty(), faults=faults, capture=args
    )
    interrupted = any(r.get("interrupted") for r in runs.values())
    if len(_transports(s)) > 1:
        _emit_both(args, s, ep, runs, not_run=[t for t in _transports(s) if t not in runs])
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


def simulate_runs(
    s: dict[str, Any],
    topo: dict[str, Any],
    ep: dict[str, Any],
    *,
    plot: str | None = None,
    progress: bool = False,
    faults: Any = None,
    capture: argparse.Namespace | None = None,
    prog: str = "uet-run",
) -> dict[str, dict[str, Any]]:
    """The scenario in virtual time on each transport ``s["transport"]`` names (both: UET, then
    RoCEv2; plots then in ``plot/uet`` and ``plot/roce``): transport → ``uet-run``'s result.
    A run cut short by Ctrl-C (``interrupted``) is the last one. ``progress``: ``prog``'s
    progress line on stderr (tools/sim_progress.py)."""
    from uet.tools.sim import run_sim

    runs: dict[str, dict[str, Any]] = {}
    for tr in _transports(s):
        st = {**s, "transport": tr}
        where = os.path.join(plot, tr) if plot and s.get("transport") == "both" else plot
        cap = open_captures(capture, transport=tr if s.get("transport") == "both" else None) if capture else None
        try:
            result = run_sim(
                st,
                topo,
                ep,
                progress=progress,
                prog=prog,
                plot=where,
                faults=faults,
                taps=cap.taps if cap else None,
                event_log=cap.log if cap else None,
            )
        finally:
            if cap is not None:
                cap.close()
        if cap is not None:
            cap.report(result)
        if where:
            from uet.sim.plots import write_plots

            result["plots"] = write_plots(result, where)
        for key in ("timeline", "thresholds", "cc_timeline", "fault_series"):
            result.pop(key, None)
        result["elapsed_s"] = result["virtual_s"]
        result["settings"] = settings_record(st, ep)
        runs[tr] = result
        if result.get("interrupted"):
            break
    return runs


def _fault_table(s: dict[str, Any]) -> dict[str, Any] | None:
    """The scenario file's ``[faults]`` table, if it has one."""
    return load_scenario(s["scenario"]).get("faults") if s.get("scenario") else None


def _transports(s: dict[str, Any]) -> tuple[str, ...]:
    return ("uet", "roce") if s.get("transport") == "both" else (str(s.get("transport", "uet")),)


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
    sim``...; ``sim`` and the live/sim ``differential`` in the object, tools/differential.py), the
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
