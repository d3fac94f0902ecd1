"""Parameter profiles for running the fabric model in real time (``uet-fabric``, ``uet-run``).

The model's defaults are the §8.9 "lab" profile (rocev2-and-fabric.md): 1 Gb/s links, thresholds
sized for a 50 µs base RTT. A real-time switch process in CPython forwards roughly 17 000 frames/s
(about 12 µs per frame per switch hop, fabric/topology.py), i.e. ~140 Mb/s of 1 KB frames summed
over the whole fabric, and the endpoints behind it are Python processes too. So the real-time
profile (**decision**) runs every link at **100 Mb/s**: the one congested link of an incast then
carries ~11 000 frames/s, which the switch process keeps up with, while the senders together offer
far more than the receiver's downlink can take, so queues build and ECN marks / trims appear.

Thresholds follow the §8.9 scaling rules (bytes in units of the BDP, time constants × k_t,
watchdog ≥ 100 × RTT) with the *effective* base RTT of the real-time system, which is dominated
by the endpoints' per-packet processing, not by the modelled links: :data:`REALTIME_RTT_NS`
(1 ms, the order of the ACK turnaround measured between two Python endpoints under load).
At 100 Mb/s that is a 12.5 KB BDP, about 2 × the lab BDP: ECN Kmin/Kmax ≈ 8 / 41 KB, TC0 limit
and PFC XOFF ≈ 66 KB, shared buffer ≈ 1 MB; flowlet gap 1 ms (one RTT, §8.7); PFC watchdog poll
100 ms, detect / restore 200 ms (the Juniper defaults, §8.9: ≥ 100 × RTT); queue-depth samples at
most every 100 µs (about one frame time).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import replace
from typing import Any

from uet.fabric.model.config import (
    DataclassT,
    EcnConfig,
    FabricError,
    SwitchConfig,
    WatchdogConfig,
    headroom_bytes,
    scaled,
)
from uet.fabric.model.plan import LinkSpec
from uet.fabric.topology import Topology

#: Link rate of the real-time profile (bit/s).
REALTIME_RATE_BPS = 100_000_000
#: Effective base RTT of endpoints + switch process in real time (ns); see the module docstring.
REALTIME_RTT_NS = 1_000_000
#: Largest data frame of the real-time scenarios: 1024-byte payload + SES 44 + PDS 12 + UDP 8 +
#: IPv4 20 + Ethernet 14 (the lab PMTU of §8.9), plus the 24 bytes of wire overhead.
REALTIME_FRAME = 1024 + 44 + 12 + 8 + 20 + 14 + 24

PROFILES = ("realtime", "lab", "datacenter")

#: Link rate of the ``datacenter`` profile (the simulator's default, bit/s).
DATACENTER_RATE_BPS = 100_000_000_000
#: One-way propagation delay of every link in the ``datacenter`` profile (ns).
DATACENTER_DELAY_NS = 1_000
#: IP MTU of the ``datacenter`` profile: jumbo frames, so 4 KiB UET payloads fit.
DATACENTER_MTU = 9000
#: Largest data frame the simulator sends: 4096-byte payload + SES 44 + PDS 12 + UDP 8 + IPv4 20 +
#: Ethernet 14, plus the 24 bytes of wire overhead.
DATACENTER_FRAME = 4096 + 44 + 12 + 8 + 20 + 14 + 24


def datacenter_switch_config(rate_bps: int, hops: int, frame: int = DATACENTER_FRAME) -> SwitchConfig:
    """Switches of the ``datacenter`` profile (**decision**, after uet-htsim's fat-tree setup):
    output queues of one bandwidth-delay product with UET trimming, ECN marked at dequeue with a
    probability rising from 0 at 20 % of the BDP to 1 at 80 % (about 9 and 35 packets of 4 KiB
    at 100 Gb/s on a 3-tier tree), no dynamic threshold (the shared buffer never binds: 64 BDP),
    host NIC queues unbounded (the hosts' windows bound them).

    The BDP is taken over the longest path of ``hops`` links each way: ``2 × hops × (1 µs +
    serialisation of one frame)`` (a 3-tier path is 6 links: 14 µs and ≈ 175 KB at 100 Gb/s).
    """
    ser = frame * 8 * 1_000_000_000 // rate_bps
    rtt = 2 * hops * (DATACENTER_DELAY_NS + ser)
    bdp = max(8 * frame, rate_bps * rtt // 8 // 1_000_000_000)
    cfg = SwitchConfig()
    for tc in cfg.tcs:
        if tc.ecn is not None:
            tc.ecn = EcnConfig(kmin=bdp // 5, kmax=bdp * 4 // 5, pmax=1.0)
        tc.dynamic = False
    cfg.tcs[0].limit = bdp
    cfg.tcs[6].limit = bdp
    cfg.tcs[7].limit = bdp
    cfg.buffer = replace(cfg.buffer, size=64 * bdp)
    cfg.pfc = replace(
        cfg.pfc, headroom=headroom_bytes(rate_bps, DATACENTER_DELAY_NS, frame), xoff=bdp, xon=bdp - 3 * frame
    )
    cfg.lb = replace(cfg.lb, flowlet_ns=rtt)
    cfg.watchdog = WatchdogConfig(poll_ns=100 * rtt, detect_ns=200 * rtt, restore_ns=200 * rtt)
    cfg.sample_ns = max(1, ser)
    # a simulated host's fixed window already bounds what it queues; a real NIC back-pressures
    # its sender instead of dropping its own frames
    cfg.nic_queue_bytes = None
    return cfg


def realtime_switch_config(rate_bps: int = REALTIME_RATE_BPS, rtt_ns: int = REALTIME_RTT_NS) -> SwitchConfig:
    """The switch configuration of the real-time profile for links of ``rate_bps``."""
    bdp = rate_bps * rtt_ns // 8 // 1_000_000_000
    cfg = scaled(REALTIME_FRAME, bdp)
    k_t = rtt_ns / 50_000  # lab base RTT ≈ 50 µs (§8.9)
    cfg.lb = replace(cfg.lb, flowlet_ns=int(cfg.lb.flowlet_ns * k_t))
    # watchdog ≥ 100 × RTT; the PFC refresh falls back to half the pause time at the port's rate
    cfg.watchdog = WatchdogConfig(poll_ns=100 * rtt_ns, detect_ns=200 * rtt_ns, restore_ns=200 * rtt_ns)
    cfg.pfc = replace(cfg.pfc, refresh_ns=None)
    cfg.sample_ns = max(cfg.sample_ns, REALTIME_FRAME * 8 * 1_000_000_000 // rate_bps)
    return cfg


def apply_profile(topology: Topology, profile: str = "realtime", rate_bps: int = REALTIME_RATE_BPS) -> Topology:
    """A copy of ``topology`` with the links and switch config of ``profile``.

    ``realtime``: every link at ``rate_bps`` (default 100 Mb/s) and :func:`realtime_switch_config`;
    ``lab``: the model defaults (the §8.9 lab profile) unchanged; ``datacenter``: every link at
    ``rate_bps`` (100 Gb/s by default, 1 µs, jumbo MTU) and :func:`datacenter_switch_config`
    (the simulator's profile: real time cannot reach these rates). Topology files and ``-o``
    overrides are applied after the profile, so they win.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {PROFILES}")
    topo = topology.copy()
    if profile == "realtime":
        topo.host_link = LinkSpec(rate_bps, topo.host_link.delay_ns, topo.host_link.mtu)
        topo.fabric_link = LinkSpec(rate_bps, topo.fabric_link.delay_ns, topo.fabric_link.mtu)
        topo.switch = realtime_switch_config(rate_bps)
    elif profile == "datacenter":
        topo.host_link = LinkSpec(rate_bps, DATACENTER_DELAY_NS, DATACENTER_MTU)
        topo.fabric_link = LinkSpec(rate_bps, DATACENTER_DELAY_NS, DATACENTER_MTU)
        topo.switch = datacenter_switch_config(rate_bps, topo.max_path_links)
    return topo


def parse_value(text: str) -> Any:
    """A ``-o key=value`` value as a TOML literal (``100e6``, ``true``, ``"spray_rr"``, ``[1, 2]``),
    falling back to the bare text as a string (``spray_rr``)."""
    import tomllib  # here: a run without -o values needs no TOML parser (uet.config_file.read_toml)

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def overrides_to_dict(items: list[str]) -> dict[str, Any]:
    """``["switch.lb.mode=spray_rr", "host_link.rate_bps=5e7"]`` → nested dict."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise FabricError(f"override {item!r} is not KEY=VALUE")
        d = out
        parts = key.strip().split(".")
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = parse_value(value.strip())
    return out


def merge(obj: DataclassT, d: dict[str, Any], path: str = "") -> DataclassT:
    """Apply a TOML-shaped dict onto a copy of the config dataclass ``obj`` (a :class:`Topology`,
    :class:`SwitchConfig` or one of its parts), keeping every field ``d`` does not name. The
    special keys are those of :meth:`SwitchConfig.from_dict`: ``tcs`` (a table keyed by TC
    number; ``ecn = false`` removes marking), ``dscp_map`` (DSCP → TC) and ``lb.per_tc``.
    Unknown keys raise :class:`FabricError`; the result is re-validated by its ``__post_init__``."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise FabricError(f"{path or 'config'} is not a table")
    names = {f.name for f in dataclasses.fields(obj)}
    changes: dict[str, Any] = {}
    for key, value in d.items():
        where = f"{path}.{key}" if path else key
        if key == "builtin" and not path:
            continue
        if key not in names:
            raise FabricError(f"unknown option {where!r}")
        cur = getattr(obj, key)
        if key == "tcs" and isinstance(value, dict):
            tcs = [copy.deepcopy(t) for t in cur]
            for k, over in value.items():
                tc = int(k)
                over = dict(over)
                if "ecn" in over:
                    e = over.pop("ecn")
                    tcs[tc].ecn = None if e is False or e is None else merge(tcs[tc].ecn or EcnConfig(), e, where)
                tcs[tc] = merge(tcs[tc], over, f"{where}.{k}")
            changes[key] = tcs
        elif key == "dscp_map" and isinstance(value, dict):
            table = list(cur)
            for k, v in value.items():
                table[int(k)] = int(v)
            changes[key] = tuple(table)
        elif key == "per_tc" and isinstance(value, dict):
            changes[key] = {**cur, **{int(k): v for k, v in value.items()}}
        elif dataclasses.is_dataclass(cur) and not isinstance(cur, type) and isinstance(value, dict):
            changes[key] = merge(cur, value, where)
        else:
            if isinstance(cur, int) and not isinstance(cur, bool) and isinstance(value, float) and value.is_integer():
                value = int(value)  # "100e6" is a TOML float
            changes[key] = value
    return dataclasses.replace(obj, **changes)


def load_topology(
    spec: str | dict[str, Any] | None = None,
    *,
    profile: str = "realtime",
    rate_bps: int = REALTIME_RATE_BPS,
    overrides: dict[str, Any] | None = None,
) -> Topology:
    """The topology of a run: a built-in name, a TOML file (its ``[topology]`` table, or the whole
    document when it has none) or a dict; then the profile (:func:`apply_profile`); then the
    file's own settings; then ``overrides`` (``-o`` options). A file may start from a built-in
    with ``builtin = "lab"``."""
    table: dict[str, Any] = {}
    if isinstance(spec, dict):
        table = spec
    elif spec and (spec.endswith(".toml") or os.path.sep in spec):
        from uet.config_file import read_toml  # bounded, one-line errors (ConfigFileError is a ValueError)

        doc = read_toml(spec)
        table = doc.get("topology", doc)
    elif spec:
        table = {"builtin": spec}
    base = Topology.builtin(table.get("builtin", "default"))
    if "kind" in table:  # the profile sizes buffers from the path length the kind implies
        base = merge(base, {"kind": table["kind"]})
    topo = apply_profile(base, profile, rate_bps)
    topo = merge(topo, table)
    if overrides:
        topo = merge(topo, overrides)
    return topo


def fit_hosts(topo: Topology, n: int) -> tuple[Topology, dict[str, Any]]:
    """``topo`` grown to hold ``n`` hosts, and the overrides that grow it (``-o`` for
    ``uet-fabric``): a fat tree grows ``hosts``; the other kinds grow ``hosts_per_leaf``, and
    then each leaf's switch buffer by the reserve and headroom of the lossless priority groups
    of the ports it gained, so its shared pool keeps its size (**decision**: ``-n 128`` on the
    default 2-leaf fabric gave 64-port leaves whose carve-outs exceeded the buffer, "buffer too
    small for the reserve and headroom of every lossless PG"). ``topo`` itself when it fits."""
    import math

    if topo.host_count() >= n:
        return topo, {}
    if topo.kind == "fat_tree":
        over: dict[str, Any] = {"hosts": n}
        return merge(topo, over), over
    leaves = topo.host_count() // topo.hosts_per_leaf
    per_leaf = math.ceil(n / leaves)
    sw = topo.switch
    lossless = sum(1 for tc in sw.tcs if tc.lossless) if sw.pfc.enabled else 0
    grow = (per_leaf - topo.hosts_per_leaf) * lossless * (sw.buffer.reserve + sw.pfc.headroom)
    over = {"hosts_per_leaf": per_leaf}
    if grow > 0:
        over["switch"] = {"buffer": {"size": sw.buffer.size + grow}}
    return merge(topo, over), over


def override_args(over: dict[str, Any], prefix: str = "") -> list[str]:
    """A nested override dict as ``-o key=value`` arguments (the inverse of
    :func:`overrides_to_dict`)."""
    out: list[str] = []
    for k, v in over.items():
        if isinstance(v, dict):
            out += override_args(v, f"{prefix}{k}.")
        else:
            out += ["-o", f"{prefix}{k}={v}"]
    return out
