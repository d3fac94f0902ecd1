"""Run a scenario in simulation: a workload on a topology, the same results as ``uet-run``.

:func:`simulate` takes what ``uet-run`` takes — run settings (workload, endpoints, message size and
count, seed, profile, link rate), the ``[topology]`` table and the ``[endpoint]`` table — builds
the fabric model, one :class:`~uet.fep.FepCore` per endpoint (endpoint i on host i, Fabric
Address = the host's IPv4 address, as ``uet-run`` places them), runs every rank of the workload
object on the virtual-time loop and returns ``uet-run``'s result shape plus what only a
simulation knows: virtual time, the ideal completion time of each flow and the slowdown, fabric
counters and per-port statistics, CPU time and speed.

**Settings**: the run table over the simulator's defaults, the topology and every endpoint and
queue-pair default come from the scenario model (:class:`uet.scenario.Scenario`,
:func:`uet.scenario.derive`), as for every engine; the endpoint table given here is laid over the
derived defaults, and the result's ``derived`` records what the run used.

**Ideal completion time** of a flow (its sender alone on an idle fabric, fixed window large
enough): the serialisation of the flow's data frames at the host link rate — the frames our stack
puts on the wire: per packet the payload + SES standard header (44) + PDS request (12) + UDP (8) +
IPv4 (20) + Ethernet (14), plus 24 bytes of FCS, preamble and gap — then the last frame's store-
and-forward over the remaining links and its propagation over every link of the path, and the
ACK's way back (propagation plus a minimum-size frame per link). Path: 2 links under one leaf, 4
through a spine, 6 through a 3-tier core. RoCEv2 flows count their own frames: PMTU-sized
payloads (plus the 24-byte provider header once per message) + BTH (12) + ICRC (4) + UDP + IPv4 +
Ethernet + 24.

**Per-link load** (``links``): the flows and distinct data bytes each directed link carried, the
histogram of flows per link and the route bound, a lower bound on the tail FCT
(:mod:`uet.fabric.model.linkload`); absent when the switches re-parse every frame.

**Speed**: packet-hops are frames that crossed one link (every switch and NIC port's transmitted
frames summed); the speed is packet-hops per CPU second of the process (``time.process_time``,
the one clock read here, outside the simulated system). CPU figures go under ``timing``, the only
part of the result that differs between two runs of one seed.

**Secure endpoints** (``tss``): every FEP core runs its TSS stage (uet.tss.stage), the same
one live endpoints use, in one cluster-mode secure domain (:func:`secure_domain`): every UET
datagram on the simulated wire is sealed (AES-GCM) and opened. A trimmed secure packet cannot
be authenticated (behaviour.md §3.5) and is dropped and counted: its RTO recovers it.

**Ctrl-C** (``KeyboardInterrupt``) stops the run where it is: the result is what finished so
far — flows without a completion time are marked ``unfinished`` — with ``interrupted`` true and
``ok`` false (``uet-sim`` prints it and exits 130, as ``uet-run`` does).

**Time limit** (``timeout_s`` in ``[run]``; **decision**): the live engine's wall-clock limit is
honoured here as a limit on *virtual* time — the run stops when the simulated clock reaches
``timeout_s`` seconds, exactly as a live run stops at its limit, and the same seed stops at the
same instant on any machine (a CPU-time limit would not). The result says ``timed_out`` true
with ``timeout_s`` and ``ok`` false, names the limit under ``errors``, and marks the flows
without a completion time ``unfinished`` as Ctrl-C does. Without the key the run has no limit.

**Endpoint seed** (``endpoint_seed`` in the settings; default the run seed): what each endpoint
core draws for itself — its PDCs' Start_PSNs, its entropy rotation, a queue pair's PSNs — comes
from this seed, while the workload, the fabric and RoCEv2's connection parameters keep the run
seed. A live run's endpoint processes draw those values on their own, so the simulator's runs of
one run seed over several endpoint seeds are the spread a live run of that seed may land in
(``uet-bench differential``, :mod:`uet.experiments.differential`).

**Stalls**: when every rank waits and nothing is left to happen (a message failed and its
receiver waits for ever), the run stops, the ranks' partial reports are summarised (the flows
concerned are not intact) and ``stalled`` says when.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uet.fabric.counters import fabric_counters
from uet.fabric.model import Fabric, Telemetry
from uet.fabric.model.faults import FaultConfig
from uet.fabric.model.flowmeter import FlowMeter
from uet.fabric.model.port import Port
from uet.fep import FepCore
from uet.lazy import lazy_names
from uet.scenario.derive import DATA_OVERHEAD, MIN_WIRE, ROCE_DATA_OVERHEAD, derive, scale_up_qps, scale_up_windows
from uet.scenario.model import Scenario, run_defaults
from uet.sim.endpoint import SimEndpoint
from uet.sim.engine import Engine, SimulationError
from uet.sim.gcpolicy import collector_for_run
from uet.sim.tasks import SimLoop
from uet.wire.net import ip_bytes, ip_str
from uet.workloads import Flow, RankReport, RxReport, Workload, make
from uet.workloads.report import credit_moved_bytes, payload_received, summarize

if TYPE_CHECKING:  # pragma: no cover
    from uet.sim.progress import Progress
    from uet.tss import SecureDomain

__all__ = ["OWN_LOOP", "Progress", "ideal_seconds", "secure_domain", "simulate", "virtual_bound_ns"]

#: :class:`~uet.sim.progress.Progress`, what ``on_progress`` is told, offered here on first use (a
#: NamedTuple class whose creation compiles its annotations' texts: only for a run that reports it)
__getattr__, __dir__ = lazy_names(__name__, {"Progress": "uet.sim.progress"})

#: run the plain traffic patterns on the simulator's own coroutine runner (uet.sim.tasks), not on
#: asyncio's loop: the same results (tests/test_sim_tasks.py compares the two), without asyncio
OWN_LOOP = True


def secure_domain(seed: int) -> SecureDomain:
    """``tss``: the run's one secure domain (SDI 1, cluster mode, behaviour.md §5.1), every
    endpoint a member. Its key is derived from the run seed (SHA-256), not drawn at random, so a
    secure run is as reproducible as any other; a simulation protects nothing, it measures."""
    import hashlib  # here: only a secure run needs it (OpenSSL's library loads with it)

    from uet.tss.domain import SdMode, SecureDomain

    key = hashlib.sha256(b"uet-sim secure domain/%d" % seed).digest()
    return SecureDomain.with_key(1, SdMode.CLUSTER, key)


def _links(fabric: Fabric, a: int, b: int) -> int:
    """Links of the path from host a to host b: 2 under one leaf, inside one server's scale-up
    domain, or on ``rail_only`` (the destination's rail leaf, after a scale-up hop whose few
    hundred ns the ideal leaves out); 4 through a spine; 6 through a 3-tier core."""
    ha, hb = fabric.hosts[a], fabric.hosts[b]
    sa, sb = ha.switch, hb.switch
    if sa == sb or (ha.scale_up is not None and ha.scale_up[0] == (hb.scale_up or ("",))[0]):
        return 2
    if fabric.topology.kind == "rail_only":
        return 2
    if sa.startswith("pod") and sa.split("-")[0] != sb.split("-")[0]:
        return 6
    return 4


def _frames(flow: Flow, payload: int, roce: bool) -> list[int]:
    """The wire size of each data frame of ``flow`` (module docstring, "Ideal completion time")."""
    overhead = ROCE_DATA_OVERHEAD if roce else DATA_OVERHEAD
    extra = 0
    if roce:  # RoCEv2's modules load only for a RoCEv2 run
        from uet.roce.core import PROVIDER_HEADER

        extra = PROVIDER_HEADER.size
    frames = []
    for _ in range(flow.messages):
        left = flow.nbytes + extra
        while left > 0:
            p = min(payload, left)
            frames.append(max(p + overhead, MIN_WIRE))
            left -= p
    return frames


def _first_port(fabric: Fabric, src: int, dst: int) -> tuple[Port, int]:
    """(the port a flow from host ``src`` to host ``dst`` leaves by, the links of its path):
    between two GPUs of one server with a scale-up domain, its scale-up port and two links."""
    nic = fabric.nics[src]
    links = _links(fabric, src, dst)
    if links == 2 and fabric.hosts[src].switch != fabric.hosts[dst].switch:
        return nic.ports[-1], links  # the scale-up port (GpuNic: its last)
    return nic.port, links


def ideal_seconds(
    fabric: Fabric, flow: Flow, payload: int, *, roce: bool = False, hosts: list[int] | None = None
) -> float:
    """The ideal completion time of ``flow`` (module docstring); ``roce``: with RoCEv2 frames
    (``payload`` is then the PMTU; each message carries the 24-byte provider header). ``hosts``:
    each rank's host (None: rank i on host i). Between two GPUs of one server with a scale-up
    domain the path is its two scale-up links, at their rate and delay."""
    src, dst = (flow.src, flow.dst) if hosts is None else (hosts[flow.src], hosts[flow.dst])
    host, links = _first_port(fabric, src, dst)
    rate = host.rate_bps
    delay = host.delay_ns
    frames = _frames(flow, payload, roce)
    ser = sum(frames) * 8e9 / rate
    last = frames[-1] * 8e9 / rate
    ack = MIN_WIRE * 8e9 / rate
    return (ser + (links - 1) * last + 2 * links * delay + links * ack) / 1e9


def virtual_bound_ns(
    fabric: Fabric, flows: list[Flow], payload: int, *, roce: bool = False, hosts: list[int] | None = None
) -> int:
    """A lower bound on the virtual time a run of ``flows`` needs (the progress display's
    estimate): the busiest host port's data frames (every frame a host sends, or every frame it
    receives, through one port at its rate), or the longest flow's ideal completion time if that
    is longer. ``hosts`` as for :func:`ideal_seconds`."""
    load: dict[tuple[str, int], float] = {}  # (tx/rx, port) -> ns of frames
    longest = 0.0
    for f in flows:
        src, dst = (f.src, f.dst) if hosts is None else (hosts[f.src], hosts[f.dst])
        wire = sum(_frames(f, payload, roce)) * 8e9
        for key, port in (("tx", _first_port(fabric, src, dst)[0]), ("rx", _first_port(fabric, dst, src)[0])):
            load[key, id(port)] = load.get((key, id(port)), 0.0) + wire / port.rate_bps
        longest = max(longest, ideal_seconds(fabric, f, payload, roce=roce, hosts=hosts))
    return round(max(max(load.values(), default=0.0), longest * 1e9))


def simulate(
    settings: dict[str, Any],
    topology: dict[str, Any] | None = None,
    endpoint: dict[str, Any] | None = None,
    *,
    workload: Workload | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    timeline: bool = False,
    faults: FaultConfig | None = None,
    taps: Any = None,
    event_log: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the scenario (module docstring) and return its result dict.

    ``taps``: a :class:`~uet.fabric.telemetry_io.PcapTaps` the fabric's links are captured to
    (virtual timestamps). ``event_log``: every core's JSON-lines records (``t`` in virtual ns), each
    with ``host`` (the index) and ``fep`` (the address) added.

    ``on_progress(Progress(...))`` is called as the run goes (every 16 instants of the engine);
    ``timeline`` keeps queue-depth, port-byte and NIC-byte samples (``result["timeline"]``) and the
    switches' ECN/PFC thresholds (``result["thresholds"]``) for plots. ``faults``: the fault
    schedule the fabric applies (uet.fabric.model.faults); its events and losses go under
    ``result["faults"]``.
    """
    s = {**run_defaults("sim"), **settings}
    scn = Scenario("sim", s, topology or {}, endpoint or {})
    topo = scn.fabric_topology()
    derived = derive(scn, topo)
    seed = int(s["seed"])
    core_seed = int(s.get("endpoint_seed", seed))
    wl = workload or make(
        s["workload"],
        int(s["endpoints"]),
        message_bytes=int(s["message_bytes"]),
        messages=int(s["messages"]),
        seed=seed,
        params=s.get("workload_params"),
    )
    tel = Telemetry({"queue_depth", "port_bytes", "nic_bytes"} if timeline else set(), enabled=timeline)
    cpu0 = time.process_time()
    fabric = Fabric(
        topo,
        seed=seed,
        telemetry=tel,
        link_load=not (topo.switch.latency_ns or topo.switch.trust_pcp),
        faults=faults,
    )
    if faults:
        fabric.flow_meter = FlowMeter()
    if taps is not None:
        from uet.fabric.telemetry_io import install_taps

        install_taps(fabric, taps)
    engine = Engine(fabric, udp_checksums=taps is not None)  # only a capture sees them
    cfg = derived.fep_config()
    n = wl.n
    eps = []
    transport = s.get("transport", "uet")
    if transport not in ("uet", "roce"):
        raise SimulationError(f"transport {transport!r}: one of uet, roce")
    roce_cfg = derived.qp if transport == "roce" else None
    cc_records: list[dict[str, Any]] = []  # ``timeline`` with CC on: cwnd / credit per sender
    domain = secure_domain(seed) if s.get("tss") else None
    if domain is not None and roce_cfg is not None:
        raise SimulationError("tss: secure endpoints are UET endpoints (transport uet)")
    placed = scn.hosts(topo, n)  # rank i runs on host placed[i]
    wl.place(topo.rank_servers(placed))
    ips = [fabric.hosts[h].ip for h in placed]
    cm = None
    if roce_cfg is not None:  # it loads hashlib: RoCEv2 runs only
        # RoCE: connection parameters derived from the run seed (uet.roce.cm.StaticCm), as the live
        # engine's endpoints derive them from the secret uet-bench differential hands them (the seed;
        # uet.live.runs.live_runs): the same QPNs, so the same UDP source ports and ECMP paths
        from uet.roce.cm import StaticCm

        cm = StaticCm(seed)
    # towards a GPU of the same server: the scale-up path's QP rate or PDC window (uet.scenario.derive)
    peer_qp = scale_up_qps(topo, placed, ips, roce_cfg) if roce_cfg else {}
    path_window = scale_up_windows(topo, placed, ips, derived) if roce_cfg is None else {}
    for i, h in enumerate(placed):
        core: Any
        ip = fabric.hosts[h].ip
        if roce_cfg is not None:
            from uet.roce.core import RoceCore

            core = RoceCore(
                ip,
                config=roce_cfg,
                seed=(core_seed << 20) + i,
                cm=cm,
                log=_host_log(event_log, None, h, ip),
                peer_config=peer_qp.get(ip),
            )
        else:
            sec = None
            if domain is not None:  # TSS (and cryptography) load only for a secure run
                from uet.tss.domain import SecureDomainTable
                from uet.tss.stage import SecurityConfig

                sec = SecurityConfig(SecureDomainTable([domain.provision()]))
            log = _cc_logger(cc_records, h) if timeline and cfg.pds.cc != "none" else None
            log = _host_log(event_log, log, h, ip)
            core = FepCore(
                ip,
                job=0,
                pid=0,
                config=cfg,
                security=sec,
                seed=(core_seed << 20) + i,
                event_log=log,
                path_window=path_window.get(ip),
            )
        eps.append(SimEndpoint(engine, engine.attach(h, core)))
    addresses = [ep.address for ep in eps]
    got = [0, 0]  # messages and payload bytes received whole so far (the progress display)

    def count(r: Any) -> None:
        if type(r) is RxReport:
            got[0] += 1
            got[1] += r.bytes

    reports = [RankReport(listener=count if on_progress is not None else None) for _ in range(n)]
    expected = sum(wl.expected(r) for r in range(n))
    payload = roce_cfg.pmtu if roce_cfg is not None else min(cfg.payload_size, 16383)
    stalled: int | None = None
    error: str | None = None
    limit: float | None = None if s.get("timeout_s") is None else float(s["timeout_s"])
    timed_out = False

    # The plain traffic patterns without a time limit run on the simulator's own coroutine runner
    # (uet.sim.tasks: no asyncio), everything else on asyncio's loop: the same order either way.
    own = OWN_LOOP and limit is None and type(wl).run is Workload.run
    loop: Any
    if own:
        loop = SimLoop(engine)
        spawn, gather, all_tasks = loop.create_task, loop.gather, loop.all_tasks
    else:
        import asyncio

        from uet.sim.loop import VirtualTimeLoop

        loop = VirtualTimeLoop(engine)
        spawn, gather = asyncio.ensure_future, asyncio.gather
        all_tasks = lambda: asyncio.all_tasks(loop)  # noqa: E731

    async def main() -> None:
        nonlocal timed_out
        tasks = [spawn(wl.run(i, ep, addresses, reports[i])) for i, ep in enumerate(eps)]
        if on_progress is not None:
            total = wl.total_bytes()
            bound = virtual_bound_ns(fabric, wl.flows(), payload, roce=roce_cfg is not None, hosts=placed)
            from uet.sim.progress import Progress  # the progress record only for a run that reports it

            engine.on_progress = lambda now: on_progress(Progress(now, got[0], expected, got[1], total, bound))
        try:
            if limit is None:
                await gather(*tasks)
            else:  # the loop's clock is the engine's: this is virtual time (module docstring)
                try:
                    await asyncio.wait_for(gather(*tasks), limit)
                except TimeoutError:
                    timed_out = True
        finally:
            for t in tasks:
                t.cancel()

    interrupted = False
    try:
        with collector_for_run():
            loop.run_until_complete(main())
    except SimulationError as e:
        stalled = engine.now
        error = str(e)
    except KeyboardInterrupt:
        interrupted = True  # Ctrl-C: what finished so far is the result (module docstring)
    finally:
        pending = all_tasks()
        for t in pending:
            t.cancel()
        if pending:  # let the cancelled ranks unwind (each wakes at once, no time passes)
            loop.run_until_complete(gather(*pending, return_exceptions=True))
        loop.close()
    end_ns = engine.now
    cpu = time.process_time() - cpu0
    res = summarize(
        wl,
        addresses,
        reports,
        ideal_s=lambda f: ideal_seconds(fabric, f, payload, roce=roce_cfg is not None, hosts=placed),
    )
    hops = sum(p.tx_frames for sw in fabric.switches.values() for p in sw.ports) + sum(
        nic.port.tx_frames for nic in fabric.nics
    )
    counters: dict[str, int] = {}
    per_host = [ep.counters for ep in eps]
    counters_of = {ep.address: c for ep, c in zip(eps, per_host, strict=True)}
    for c in per_host:
        for k, v in c.items():
            if isinstance(v, int) and v:
                counters[k] = counters.get(k, 0) + v
    res.update(
        engine="sim",
        transport=transport,
        ok=res["ok"] and stalled is None,
        seed=seed,
        topology={"kind": topo.kind, "hosts": len(fabric.hosts), "switches": len(fabric.switches)},
        link_rate_bps=fabric.nics[0].port.rate_bps,
        window=cfg.max_inflight,
        derived=derived.record(),
        virtual_s=round(end_ns / 1e9, 9),
        stalled_at_ns=stalled,
        fabric=fabric_counters(fabric),
        endpoint_counters=dict(sorted(counters.items())),
        sim={"packet_hops": hops, "frames_injected": engine.frames_in, "instants": engine.instants},
        timing={"cpu_s": round(cpu, 3), "packet_hops_per_cpu_s": round(hops / cpu) if cpu > 0 else None},
    )
    if fabric.link_load is not None:
        fcts: dict[tuple[str, str], float] = {}
        for f in res["flows"]:
            if "completion_s" in f:
                pair = (f["src"], f["dst"])
                fcts[pair] = max(fcts.get(pair, 0.0), f["completion_s"])
        res["links"] = fabric.link_load.summary(fcts)
    if fabric.failover is not None:
        res["faults"] = fault_report(fabric, res)
    if error is not None:
        res["errors"] = [*res["errors"], error]
    if timed_out:
        res["errors"] = [*res["errors"], f"timeout_s: stopped at {limit:g} s of virtual time"]
        res.update(ok=False, timed_out=True, timeout_s=limit)
    if interrupted or timed_out:
        for f in res["flows"]:
            if "completion_s" not in f:
                # the sender's retransmissions so far (uet.workloads.base: the flow's own count)
                f.update(
                    error="unfinished",
                    unfinished=True,
                    retransmits=counters_of[f["src"]].get("retransmits_to:" + f["dst"], 0),
                )
        credit_moved_bytes(wl, res["flows"], {i: payload_received(c) for i, c in enumerate(per_host)})
        res.update(
            ok=False,
            interrupted=interrupted,
            flows_finished=sum(1 for f in res["flows"] if not f.get("unfinished")),
            received_messages=sum(len(r.rx) for r in reports),
            # counted per packet, as the live engine counts it (never below the messages received whole)
            received_bytes=min(
                wl.total_bytes(),
                max(sum(m.bytes for r in reports for m in r.rx), sum(payload_received(c) for c in per_host)),
            ),
        )
    if timeline:
        from uet.fabric.telemetry_io import switch_thresholds  # it loads the pcap writers: plots only

        if fabric.failover is not None:
            res["fault_series"] = fault_series(fabric)
        res["timeline"] = [r.as_dict() for r in tel.records]
        res["thresholds"] = switch_thresholds(topo.switch)
        if cc_records:
            res["cc_timeline"] = cc_records
            res["cc"] = cfg.pds.cc
    return res


def fault_report(fabric: Fabric, res: dict[str, Any]) -> dict[str, Any]:
    """``result["faults"]``: the schedule's events and losses (Failover.summary), what the
    transport resent, and the flows' stall and recovery around each link failure
    (FlowMeter.around); each flow also gets ``stall_us``, its longest time without data."""
    assert fabric.failover is not None and fabric.flow_meter is not None
    meter = fabric.flow_meter
    out = fabric.failover.summary()
    out["resent_packets"] = sum(int(f.get("retransmits") or 0) for f in res["flows"])
    for f in res["flows"]:
        key = (ip_bytes(f["src"]), ip_bytes(f["dst"]))
        f["stall_us"] = round(meter.longest_gap(key) / 1e3, 3)
    downs = sorted({e["t_ns"] for e in out["events"] if e["event"] == "down"})
    out["around"] = [meter.around(t) for t in downs[:8]]
    return out


def fault_series(fabric: Fabric) -> dict[str, Any]:
    """``result["fault_series"]`` (with ``timeline``, for uet.sim.fault_plots): throughput over
    time summed over all flows and of the four flows stalled longest by the first link failure."""
    assert fabric.failover is not None and fabric.flow_meter is not None
    meter = fabric.flow_meter
    downs = sorted(t for t, _, e in fabric.failover.log if e == "down")
    keys = meter.stalled_at(downs[0], 4) if downs else []
    return {
        "total": meter.total_series(),
        "flows": {f"{ip_str(a)}>{ip_str(b)}": meter.series((a, b)) for a, b in keys},
    }


def _cc_logger(records: list[dict[str, Any]], host: int) -> Callable[[dict[str, Any]], None]:
    """An event log for host ``host``'s core that keeps only the ``cc`` records (cwnd, credit:
    :mod:`uet.sim.cc_plots`). The PDS then takes its logging paths, which end in the same state."""

    def log(rec: dict[str, Any]) -> None:
        if rec.get("ev") == "cc":
            records.append({**rec, "host": host})

    return log


def _host_log(
    sink: Callable[[dict[str, Any]], None] | None, also: Callable[[dict[str, Any]], None] | None, host: int, ip: str
) -> Callable[[dict[str, Any]], None] | None:
    """Host ``host``'s core log: ``also`` (the CC plots' logger) and ``sink`` with the host's index
    and address added to each record; None when neither is wanted (the core then builds none)."""
    if sink is None:
        return also

    def log(rec: dict[str, Any]) -> None:
        if also is not None:
            also(rec)
        sink({**rec, "host": host, "fep": ip})

    return log
