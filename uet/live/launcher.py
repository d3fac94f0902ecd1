"""One live run: the switch process, one endpoint process per rank, the result.

:class:`Launcher` starts one ``uet-fabric`` process (every switch of the topology) and N endpoint
processes (:mod:`uet.live.worker`), endpoint *i* on host *i* of the topology (or the host the
scenario's ``placement`` gives it): its Fabric Address is that host's IPv4 address and its NIC a
:class:`~uet.link.fabric.FabricLink` on the host's switch-port socket, both told to it in its spec.
When the topology has fewer hosts than endpoints, ``hosts_per_leaf`` grows until they fit
(:func:`uet.scenario.model.sizing_overrides`). Every process runs on one
:class:`~uet.clock.DilatedClock` (the run's start instant and time-dilation factor,
:mod:`uet.live.dilation`), so the times the result reports are virtual.

The launcher hands out work and collects the ranks' JSON-line reports (the flows each sent, the
messages it received, the bytes so far, its event loop's lateness), then stops everything and
builds the result with :func:`uet.workloads.report.summarize`. It prints nothing: a caller follows
the run through :attr:`Launcher.on_progress` and :attr:`Launcher.on_interval`. Every child runs in
its own process group; :meth:`Launcher.shutdown` stops them all (SIGTERM to each group, SIGKILL
after a grace period).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from uet.clock import DilatedClock
from uet.fabric.model.config import FabricError
from uet.fabric.profiles import load_topology, merge, override_args, overrides_to_dict
from uet.live.dilation import Dilation
from uet.live.process import Child, FaultsError, RunError, spawn
from uet.live.result import endpoint_lag, written
from uet.scenario import Scenario, Settings, derive
from uet.scenario.derive import scale_up_paths
from uet.scenario.model import sizing_overrides
from uet.transport import transport_label
from uet.workloads import Workload, make
from uet.workloads.report import credit_moved_bytes, summarize

__all__ = ["CaptureSpec", "Launcher", "build_flows", "build_workload", "empty_report", "interval_record"]


@dataclass(frozen=True)
class CaptureSpec:
    """What a run captures beside its result (``uet-run``'s ``--pcap-per``, ``--capture-max`` and
    ``--eventlog``): the switch process's captures one per ``pcap_per`` (``port`` when None), each
    file at most ``capture_max`` bytes; with ``eventlog`` every endpoint process writes its own
    event log, the file's name with ``-rank<N>`` (and the transport, ``per_transport``) before
    its suffix."""

    pcap_per: str | None
    capture_max: int
    eventlog: str | None = None
    per_transport: bool = False


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


class Launcher:
    """One run: settings in, :meth:`run` → the result dict (see the module docstring)."""

    def __init__(self, settings: dict[str, Any], topology: dict[str, Any], endpoint: dict[str, Any]) -> None:
        self.s = settings
        self.topology_table = topology
        self.endpoint = endpoint
        self.children: list[Child] = []
        self.fabric: Child | None = None
        self.workers: list[Child] = []
        #: called with the payload bytes received so far (:attr:`moved_bytes`) as the ranks report
        #: them (a progress bar)
        self.on_progress: Callable[[int], None] | None = None
        self.workload: Workload | None = None
        self.interval: float | None = None  # --interval: report period (s)
        #: called with each ``interval`` record (:func:`interval_record`) and the workload's bytes
        #: as the period ends, then once more after the run with the record of the whole run
        #: (``True``), as iperf3 ends its interval report
        self.on_interval: Callable[[dict[str, Any], int, bool], None] | None = None
        #: fault options handed to the uet-fabric process (as its command-line words), and the
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
        #: the switch process's capture files and the endpoints' event logs
        self.capture: CaptureSpec | None = None
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
            from uet.fabric.model.failover import resolve

            try:
                resolve(self.faults, sized.plan())
            except FabricError as e:
                raise FaultsError(str(e)) from None
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

    def worker_paths(self, placed: list[int], ips: list[str]) -> dict[str, dict[str, Any]]:
        """Per address (``ips``: the ranks' hosts ``placed``), the settings of its path towards the
        GPUs of its own server that its worker is handed (``paths``): the same the simulator's
        endpoints get (:func:`uet.scenario.derive.scale_up_paths`); empty without a scale-up domain."""
        assert self.derived is not None  # fabric_args derived the run's settings
        return scale_up_paths(self.model_topology, placed, ips, self.derived, str(self.s.get("transport", "uet")))

    async def run(self) -> dict[str, Any]:
        s = self.s
        n = int(s["endpoints"])
        wl = self.workload = build_workload(s)
        timeout = float(s["timeout_s"])
        self.clock = DilatedClock(self.dilation.factor)  # the run's start instant, shared by every process
        self.fabric = await spawn("fabric", *self.fabric_args(n), stdin=False)
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
        paths = self.worker_paths(self.placed, fa)
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
                "paths": paths.get(fa[i]),
                **self._eventlog_spec(i),
            }
            # the bytes received, counted per packet, every period: for --interval, the progress bar
            # and the per-flow bytes of a run interrupted by Ctrl-C (partial_result)
            spec["progress_s"] = min(0.25, self.interval / 5) if self.interval else 0.25
            w = await spawn(f"endpoint {i} ({fa[i]})", "-m", "uet.live.worker", json.dumps(spec))
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
        self.reports = [empty_report() for _ in self.workers]
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
                if self.on_progress is not None:
                    self.on_progress(self.moved_bytes)
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
        reports = self.reports or [empty_report() for _ in range(n)]
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
        if self.on_interval is not None:
            self.on_interval(rec, total, False)

    def _interval_end(self, elapsed: float, total: int) -> None:
        """After the run: the last, partial interval (when anything is left to say), then the sum
        over the whole run, as iperf3 ends its interval report."""
        last = self.intervals[-1] if self.intervals else None
        if last is None or elapsed - float(last["end_s"]) > 1e-3 or self.moved_bytes != last["received_bytes"]:
            self._interval(max(elapsed, float(last["end_s"]) if last else 0.0), total)
        b = self.moved_bytes
        rec = interval_record(0.0, elapsed, b, b, self.rx_messages)
        if self.on_interval is not None:
            self.on_interval(rec, total, True)

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
            "pcaps": written(self.s.get("pcap"), ".pcap"),
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
        tr = f"-{self.s['transport']}" if c.per_transport else ""
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


def empty_report() -> dict[str, Any]:
    """A rank's report before it reported anything."""
    return {"flows": [], "rx": [], "error": None, "check": None}
