"""Topologies from dicts / TOML and built-ins, forwarding paths, telemetry and stats output."""

from __future__ import annotations

import json
import tomllib

import pytest
from uet.fabric.model import Fabric, SwitchConfig, Telemetry
from uet.fabric.model.config import FabricError, scaled
from uet.fabric.model.frames import ipv4_frame
from uet.fabric.model.telemetry import PortBytes, QueueDepth
from uet.fabric.topology import Topology

SCENARIO = """
[topology]
leaves = 3
spines = 2
hosts_per_leaf = 2
parallel_links = 2

[topology.fabric_link]
rate_bps = 2_000_000_000
delay_ns = 500

[topology.switch]
sample_ns = 0

[topology.switch.lb]
mode = "spray_rr"

[topology.switch.pfc]
xoff = 40000
xon = 36000

[topology.switch.tcs.0]
limit = 65536
ecn = { kmin = 8192, kmax = 32768, pmax = 0.1 }

[topology.switch.tcs.6]
ecn = false

[topology.switch.dscp_map]
10 = 3
"""


def test_topology_from_toml() -> None:
    topo = Topology.from_dict(tomllib.loads(SCENARIO)["topology"])
    assert (topo.leaves, topo.spines, topo.hosts_per_leaf, topo.parallel_links) == (3, 2, 2, 2)
    assert topo.fabric_link.rate_bps == 2_000_000_000 and topo.fabric_link.delay_ns == 500
    assert topo.host_link.rate_bps == 1_000_000_000
    cfg = topo.switch
    assert cfg.lb.mode == "spray_rr" and (cfg.pfc.xoff, cfg.pfc.xon) == (40000, 36000)
    ecn = cfg.tcs[0].ecn
    assert cfg.tcs[0].limit == 65536 and ecn is not None and ecn.kmax == 32768 and ecn.pmax == 0.1
    assert cfg.tcs[6].ecn is None and cfg.dscp_map[10] == 3 and cfg.dscp_map[26] == 3
    fab = Fabric(topo)
    spine = fab.switches["spine0"]
    assert len(spine.ports) == 3 * 2 and len(fab.switches["leaf0"].ports) == 2 + 2 * 2
    assert spine.ports[0].rate_bps == 2_000_000_000 and spine.ports[0].delay_ns == 500
    # spraying across the 4 parallel uplinks of leaf0
    for _ in range(40):
        fab.inject(0, ipv4_frame(fab.host_ip(0), fab.host_ip(5), bytes(100)), 0)
    assert len(fab.poll(10**9)) == 40
    assert [p.tx_frames for p in fab.switches["leaf0"].ports[2:]] == [10] * 4


def test_bad_options_raise() -> None:
    with pytest.raises(FabricError, match="unknown option"):
        Topology.from_dict({"leafs": 2})
    with pytest.raises(FabricError, match="unknown option"):
        SwitchConfig.from_dict({"pfc": {"xof": 1}})
    with pytest.raises(FabricError, match="load-balancing"):
        SwitchConfig.from_dict({"lb": {"mode": "magic"}})
    with pytest.raises(FabricError):
        Topology(kind="torus")
    with pytest.raises(FabricError, match="trim_bytes"):
        SwitchConfig.from_dict({"trim": {"trim_bytes": 30}})
    assert Topology.from_dict({"builtin": "lab"}).leaves == 4


def test_rail_optimised_traffic_stays_on_its_rail() -> None:
    fab = Fabric("rail")
    names = [h.name for h in fab.hosts]
    assert names[:4] == ["srv0-nic0", "srv0-nic1", "srv1-nic0", "srv1-nic1"] and len(names) == 16
    a, b = fab.host_index("srv0-nic1"), fab.host_index("srv3-nic1")  # same group, same rail
    fab.inject(a, ipv4_frame(fab.host_ip(a), fab.host_ip(b), bytes(100)), 0)
    assert [h for h, _ in fab.poll(10**9)] == [b]
    assert sum(p.rx_frames for s in ("spine0", "spine1") for p in fab.switches[s].ports) == 0
    c = fab.host_index("srv5-nic0")  # other group, other rail: through a spine
    fab.inject(a, ipv4_frame(fab.host_ip(a), fab.host_ip(c), bytes(100)), 10**9)
    assert [h for h, _ in fab.poll(2 * 10**9)] == [c]
    assert sum(p.rx_frames for s in ("spine0", "spine1") for p in fab.switches[s].ports) == 1


def test_three_tier_cross_pod_path() -> None:
    fab = Fabric("three_tier")
    assert fab.host_ip(0) == "10.0.0.1" and fab.host_ip(4) == "10.1.0.1"
    fab.inject(0, ipv4_frame(fab.host_ip(0), fab.host_ip(4), bytes(1000)), 0)
    ((t, h, f),) = fab.poll_timed(10**9)
    assert h == 4 and t == 6 * (8528 + 1000)  # host → leaf → spine → super-spine → spine → leaf → host
    assert f[22] == 64 - 5
    assert (
        sum(sw.ports[0].rx_frames + sw.ports[1].rx_frames for n, sw in fab.switches.items() if n.startswith("ss")) == 1
    )


def test_telemetry_records_and_stats_are_json() -> None:
    tel = Telemetry()
    fab = Fabric("default", telemetry=tel)
    for s in (4, 5):
        for _ in range(30):
            fab.inject(s, ipv4_frame(fab.host_ip(s), fab.host_ip(0), bytes(1000), sport=s, ecn=2), 0)
    fab.poll(10**9)
    depths = tel.of(QueueDepth)
    assert depths and max(d.bytes for d in depths if d.node == "leaf0" and d.port == 0) > 0
    assert tel.of(PortBytes)
    lines = [json.dumps(r.as_dict()) for r in tel.drain()]
    assert any('"event": "queue_depth"' in x for x in lines) and tel.records == []
    st = fab.stats()
    json.dumps(st)
    leaf0 = next(s for s in st["switches"] if s["switch"] == "leaf0")
    assert leaf0["ports"][0]["tx_bytes"] == 60 * 1042
    assert sum(h["rx_bytes"] for h in st["hosts"]) == 60 * 1042
    quiet = Telemetry(kinds={"drop"})
    fab = Fabric("default", telemetry=quiet)
    fab.inject(0, ipv4_frame(fab.host_ip(0), fab.host_ip(1), bytes(10)), 0)
    fab.poll(10**9)
    assert quiet.records == []


def test_scaled_profile_keeps_the_ordering_rules() -> None:
    frame = 1086
    for bdp in (3_000, 6 * 1024, 60_000, 600_000):
        cfg = scaled(frame, bdp)
        e, limit = cfg.tcs[0].ecn, cfg.tcs[0].limit
        assert e is not None and limit is not None
        assert e.kmin >= 2 * frame and e.kmax >= e.kmin + 4 * frame
        assert cfg.pfc.xoff > e.kmax and cfg.pfc.xon < cfg.pfc.xoff
        assert limit > e.kmax
