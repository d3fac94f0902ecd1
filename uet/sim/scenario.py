"""Run a scenario in simulation: a workload on a topology, the same results as ``uet-run``.

:func:`simulate` takes what ``uet-run`` takes — run settings (workload, endpoints, message size and
count, seed, profile, link rate), the ``[topology]`` table and the ``[endpoint]`` table — builds
the fabric model, one :class:`~uet.fep.FepCore` per endpoint (endpoint i on host i, Fabric
Address = the host's IPv4 address, as ``uet-run`` places them), runs every rank of the workload
object on the virtual-time loop and returns ``uet-run``'s result shape plus what only a
simulation knows: virtual time, the ideal completion time of each flow and the slowdown, fabric
counters and per-port statistics, CPU time and speed.

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

**Stalls**: when every rank waits and nothing is left to happen (a message failed and its
receiver waits for ever), the run stops, the ranks' partial reports are summarised (the flows
concerned are not intact) and ``stalled`` says when.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from uet.fabric.model import Fabric, Telemetry
from uet.fabric.model.faults import FaultConfig
from uet.fabric.model.flowmeter import FlowMeter
from uet.fabric.profiles import REALTIME_RTT_NS, load_topology, merge, overrides_to_dict
from uet.fabric.switch import fabric_counters
from uet.fabric.telemetry_io import switch_thresholds
from uet.fabric.topology import Topology
from uet.fep import FepConfig, FepCore
from uet.roce.config import QpConfig
from uet.roce.core import PROVIDER_HEADER, RoceCore, config_for_link, timeout_for_rtt
from uet.sim.endpoint import SimEndpoint
from uet.sim.engine import Engine, SimulationError
from uet.sim.loop import VirtualTimeLoop
from uet.tss import SdMode, SecureDomain, SecureDomainTable
from uet.tss.stage import SecurityConfig
from uet.wire.net import ip_bytes, ip_str
from uet.workloads import Flow, RankReport, Workload, make
from uet.workloads.report import summarize

__all__ = ["DEFAULT_ENDPOINT", "DEFAULT_RUN", "build_topology", "ideal_seconds", "simulate"]

#: Run settings of ``uet-sim`` when neither the scenario nor the options say otherwise.
DEFAULT_RUN: dict[str, Any] = {
    "workload": "incast",
    "endpoints": 9,
    "message_bytes": 65536,
    "messages": 4,
    "seed": 1,
    "profile": "datacenter",
    "rate_bps": 100_000_000_000,
    "topology": "fat_tree",
    "transport": "uet",
    "tss": False,
}

#: Endpoint settings of ``uet-sim`` by default (**decisions**; there is no congestion control yet):
#:
#: * 4 KiB payloads, ECN-capable data;
#: * a fixed window (``max_inflight``, packets in flight per lane) of about 1.15 × the
#:   bandwidth-delay product of the longest path plus the ACK coalescing size, when the
#:   settings do not give one (:func:`default_window`: 56 packets at 100 Gb/s on a 3-tier tree);
#: * on the ``datacenter`` profile, ``RTO_Init_Time`` 1 ms (:data:`DATACENTER_RTO_NS`) unless the
#:   settings give ``pds.rto_ns``: the endpoint's own 50 ms default is sized for Python receivers
#:   on a loaded host (uet.fep.config), which the simulator does not have; 1 ms is the spec-table
#:   mirror's value (behaviour.md §2.9), about 70 base RTTs of a 3-tier tree at 100 Gb/s and 10 ×
#:   the coalesced-ACK timer, so it fires only for real losses (a trimmed header dropped when the
#:   trimmed class overflows, as in the first round trip of a 127→1 incast: with 50 ms those flows
#:   finished after 57–100 ms instead of about 22). The slow profiles keep the endpoint's default;
#: * trimmed packets resent until they get through: ``Max_NACK_Retx_Cnt`` at its "infinite"
#:   setting (behaviour.md §2.9: "0–31; max = infinite"), a bound no run reaches here; with the
#:   spec default of 5 a sustained incast fails messages whose packets were trimmed 6 times;
#: * no SACK fast retransmit (``pds.fast_retx_threshold`` 0): with per-packet spraying, reordering
#:   by more than 3 packets is the norm, and the dup-ACK rule resent about one packet in two of a
#:   128-host permutation for nothing (15,265 retransmissions for 8,816 trims; without it
#:   retransmissions = trims, 37 % fewer packet-hops, p99 slowdown 2.9 → 2.2). A trimming fabric
#:   reports every loss it causes by NACK; the RTO covers real drops.
DEFAULT_ENDPOINT: dict[str, Any] = {
    "payload_size": 4096,
    "ecn_capable": True,
    "pds": {"max_nack_retx": 1 << 30, "fast_retx_threshold": 0},
}

#: ``pds.rto_ns`` of simulated endpoints on the ``datacenter`` profile (see DEFAULT_ENDPOINT).
DATACENTER_RTO_NS = 1_000_000

#: Bytes each data packet adds to its payload on the wire (see the module docstring).
DATA_OVERHEAD = 44 + 12 + 8 + 20 + 14 + 24
#: The same for a RoCEv2 packet: BTH 12 + ICRC 4 + UDP 8 + IPv4 20 + Ethernet 14 + 24 on the wire
#: (rocev2-and-fabric.md §1.1); SEND carries no other extension header.
ROCE_DATA_OVERHEAD = 12 + 4 + 8 + 20 + 14 + 24
#: A minimum Ethernet frame on the wire (ACKs): 60 + 24.
MIN_WIRE = 84


def secure_domain(seed: int) -> SecureDomain:
    """``tss``: the run's one secure domain (SDI 1, cluster mode, behaviour.md §5.1), every
    endpoint a member. Its key is derived from the run seed (SHA-256), not drawn at random, so a
    secure run is as reproducible as any other; a simulation protects nothing, it measures."""
    key = hashlib.sha256(b"uet-sim secure domain/%d" % seed).digest()
    return SecureDomain.with_key(1, SdMode.CLUSTER, key)


def build_topology(settings: dict[str, Any], table: dict[str, Any] | None = None) -> Topology:
    """The scenario's topology, sized to hold ``endpoints`` hosts (a fat tree grows ``hosts``, the
    other kinds ``hosts_per_leaf``, as ``uet-run`` does)."""
    topo = load_topology(
        table or settings.get("topology", "fat_tree"),
        profile=settings.get("profile", "datacenter"),
        rate_bps=int(settings.get("rate_bps", 100_000_000_000)),
        overrides=overrides_to_dict(settings.get("overrides", [])),
    )
    n = int(settings["endpoints"])
    if topo.host_count() < n:
        if topo.kind == "fat_tree":
            topo = merge(topo, {"hosts": n})
        else:
            leaves = topo.host_count() // topo.hosts_per_leaf
            topo = merge(topo, {"hosts_per_leaf": math.ceil(n / leaves)})
    return topo


def base_rtt_ns(fabric: Fabric, frame: int) -> float:
    """The base RTT of the fabric's longest path: a ``frame``-byte data frame out and a minimum
    frame back over every link, with propagation."""
    port = fabric.nics[0].port
    links = 6 if fabric.topology.kind in ("three_tier", "fat_tree") else 4
    return links * (2 * port.delay_ns + (frame + MIN_WIRE) * 8e9 / port.rate_bps)


def default_window(fabric: Fabric, payload: int, ack_bytes: int = 0) -> int:
    """About 1.15 × the BDP of the fabric's longest path, in data packets, plus the packets a
    target receives before it sends a coalesced ACK (``ack_bytes`` = ``ACK_Gen_Trigger``,
    behaviour.md §2.8): the sender hears of a packet up to that many packets late, so a window
    of one BDP alone leaves the link idle while it waits (a 2 MB flow across 3 tiers with
    32 KiB coalescing: 1.012 × ideal with 48 packets, 1.0016 × with 50 or more). At least 8."""
    frame = payload + DATA_OVERHEAD
    bdp = base_rtt_ns(fabric, frame) * fabric.nics[0].port.rate_bps / 8e9 / frame
    return max(8, math.ceil(1.15 * bdp) + math.ceil(ack_bytes / payload))


def roce_config(fabric: Fabric, profile: str) -> QpConfig:
    """The RoCE queue pairs of a simulated scenario: :func:`~uet.roce.core.config_for_link` for
    the host links, with the local ACK timeout scaled to the base RTT (§8.9) — the profile's
    effective RTT for ``realtime`` (:data:`~uet.fabric.profiles.REALTIME_RTT_NS`), else the
    longest path's."""
    port = fabric.nics[0].port
    mtu = fabric.topology.host_link.mtu
    cfg = config_for_link(port.rate_bps, mtu)
    rtt = REALTIME_RTT_NS if profile == "realtime" else base_rtt_ns(fabric, cfg.pmtu + ROCE_DATA_OVERHEAD)
    return replace(cfg, timeout=timeout_for_rtt(rtt))


def _links(fabric: Fabric, a: int, b: int) -> int:
    sa, sb = fabric.hosts[a].switch, fabric.hosts[b].switch
    if sa == sb:
        return 2
    if sa.startswith("pod") and sa.split("-")[0] != sb.split("-")[0]:
        return 6
    return 4


def ideal_seconds(fabric: Fabric, flow: Flow, payload: int, *, roce: bool = False) -> float:
    """The ideal completion time of ``flow`` (module docstring); ``roce``: with RoCEv2 frames
    (``payload`` is then the PMTU; each message carries the 24-byte provider header)."""
    host = fabric.nics[flow.src].port
    rate = host.rate_bps
    delay = host.delay_ns
    links = _links(fabric, flow.src, flow.dst)
    overhead = ROCE_DATA_OVERHEAD if roce else DATA_OVERHEAD
    extra = PROVIDER_HEADER.size if roce else 0
    frames = []
    for _ in range(flow.messages):
        left = flow.nbytes + extra
        while left > 0:
            p = min(payload, left)
            frames.append(max(p + overhead, MIN_WIRE))
            left -= p
    ser = sum(frames) * 8e9 / rate
    last = frames[-1] * 8e9 / rate
    ack = MIN_WIRE * 8e9 / rate
    return (ser + (links - 1) * last + 2 * links * delay + links * ack) / 1e9


def simulate(
    settings: dict[str, Any],
    topology: dict[str, Any] | None = None,
    endpoint: dict[str, Any] | None = None,
    *,
    workload: Workload | None = None,
    on_progress: Callable[[int, int, int], None] | None = None,
    timeline: bool = False,
    faults: FaultConfig | None = None,
    taps: Any = None,
    event_log: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the scenario (module docstring) and return its result dict.

    ``taps``: a :class:`~uet.fabric.telemetry_io.PcapTaps` the fabric's links are captured to
    (virtual timestamps). ``event_log``: every core's JSON-lines records (``t`` in virtual ns), each
    with ``host`` (the index) and ``fep`` (the address) added.

    ``on_progress(virtual ns, messages received, messages expected)`` is called as the run goes;
    ``timeline`` keeps queue-depth, port-byte and NIC-byte samples (``result["timeline"]``) and the
    switches' ECN/PFC thresholds (``result["thresholds"]``) for plots. ``faults``: the fault
    schedule the fabric applies (uet.fabric.model.faults); its events and losses go under
    ``result["faults"]``.
    """
    s = {**DEFAULT_RUN, **settings}
    topo = build_topology(s, topology)
    seed = int(s["seed"])
    wl = workload or make(
        s["workload"],
        int(s["endpoints"]),
        message_bytes=int(s["message_bytes"]),
        messages=int(s["messages"]),
        seed=seed,
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
    engine = Engine(fabric)
    ep_over = dict(endpoint if endpoint is not None else DEFAULT_ENDPOINT)
    cfg = merge(FepConfig(), ep_over)
    if s.get("profile") == "datacenter" and "rto_ns" not in ep_over.get("pds", {}):
        cfg = replace(cfg, pds=replace(cfg.pds, rto_ns=DATACENTER_RTO_NS))
    if "max_inflight" not in ep_over:
        window = default_window(
            fabric, min(cfg.payload_size, 16383), 0 if cfg.pds.ack_per_pkt else cfg.pds.ack_gen_trigger
        )
        cfg = replace(cfg, max_inflight=window)
    n = wl.n
    eps = []
    transport = s.get("transport", "uet")
    if transport not in ("uet", "roce"):
        raise SimulationError(f"transport {transport!r}: one of uet, roce")
    roce_cfg = roce_config(fabric, str(s.get("profile"))) if transport == "roce" else None
    cc_records: list[dict[str, Any]] = []  # ``timeline`` with CC on: cwnd / credit per sender
    directory: dict[str, Any] = {}  # RoCE: the out-of-band connection exchange (rocev2 core docstring)
    domain = secure_domain(seed) if s.get("tss") else None
    if domain is not None and roce_cfg is not None:
        raise SimulationError("tss: secure endpoints are UET endpoints (transport uet)")
    for i in range(n):
        core: Any
        if roce_cfg is not None:
            core = RoceCore(
                fabric.hosts[i].ip,
                config=roce_cfg,
                seed=(seed << 20) + i,
                directory=directory,
                log=_host_log(event_log, None, i, fabric.hosts[i].ip),
            )
        else:
            sec = None if domain is None else SecurityConfig(SecureDomainTable([domain.provision()]))
            log = _cc_logger(cc_records, i) if timeline and cfg.pds.cc != "none" else None
            log = _host_log(event_log, log, i, fabric.hosts[i].ip)
            core = FepCore(
                fabric.hosts[i].ip, job=0, pid=0, config=cfg, security=sec, seed=(seed << 20) + i, event_log=log
            )
        eps.append(SimEndpoint(engine, engine.attach(i, core)))
    addresses = [ep.address for ep in eps]
    reports = [RankReport() for _ in range(n)]
    expected = sum(wl.expected(r) for r in range(n))
    stalled: int | None = None
    error: str | None = None

    async def main() -> None:
        tasks = [asyncio.ensure_future(wl.run(i, ep, addresses, reports[i])) for i, ep in enumerate(eps)]
        if on_progress is not None:
            engine.on_progress = lambda now: on_progress(now, sum(len(r.rx) for r in reports), expected)
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    loop = VirtualTimeLoop(engine)
    interrupted = False
    try:
        loop.run_until_complete(main())
    except SimulationError as e:
        stalled = engine.now
        error = str(e)
    except KeyboardInterrupt:
        interrupted = True  # Ctrl-C: what finished so far is the result (module docstring)
    finally:
        pending = asyncio.all_tasks(loop)
        for t in pending:
            t.cancel()
        if pending:  # let the cancelled ranks unwind (each wakes at once, no time passes)
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()
    end_ns = engine.now
    cpu = time.process_time() - cpu0
    payload = roce_cfg.pmtu if roce_cfg is not None else min(cfg.payload_size, 16383)
    res = summarize(
        wl, addresses, reports, ideal_s=lambda f: ideal_seconds(fabric, f, payload, roce=roce_cfg is not None)
    )
    hops = sum(p.tx_frames for sw in fabric.switches.values() for p in sw.ports) + sum(
        nic.port.tx_frames for nic in fabric.nics
    )
    counters: dict[str, int] = {}
    for ep in eps:
        for k, v in ep.counters.items():
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
    if interrupted:
        for f in res["flows"]:
            if "completion_s" not in f:
                f.update(error="unfinished", unfinished=True)
        res.update(
            ok=False,
            interrupted=True,
            flows_finished=sum(1 for f in res["flows"] if not f.get("unfinished")),
            received_messages=sum(len(r.rx) for r in reports),
            received_bytes=sum(m.bytes for r in reports for m in r.rx),
        )
    if timeline:
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
