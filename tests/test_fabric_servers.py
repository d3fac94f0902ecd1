"""Servers of GPUs, the scale-up domain and rank placement on the rail topologies (issue 26 item 1)."""

from __future__ import annotations

import pytest
from uet.fabric.model import Fabric
from uet.fabric.model.config import FabricError
from uet.fabric.model.frames import ipv4_frame
from uet.fabric.model.plan import plan_links
from uet.fabric.model.scaleup import GpuNic
from uet.fabric.topology import Topology


def _frames_through(fab: Fabric, prefix: str) -> int:
    return sum(p.rx_frames for n, sw in fab.switches.items() if n.startswith(prefix) for p in sw.ports)


def _send(fab: Fabric, a: int, b: int, t: int, size: int = 1000) -> int:
    """Host a sends one frame to host b at t; the arrival time (it must reach b, and only b)."""
    fab.inject(a, ipv4_frame(fab.host_ip(a), fab.host_ip(b), bytes(size)), t)
    got = fab.poll_timed(t + 10**9)
    assert [h for _, h, _ in got] == [b]
    return got[0][0]


def test_servers_gpus_and_placement() -> None:
    topo = Topology.builtin("rail")  # 2 groups × 2 rails × 4 servers: 8 servers of 2 GPUs
    assert topo.gpus_per_server == 2 and topo.server_count == 8
    assert topo.servers[3] == [6, 7] and topo.server_of(7) == 3
    assert Topology(kind="rail").gpus_per_server == 8  # the default server: 8 GPUs, 8 rails
    assert Topology().gpus_per_server == 1 and Topology().servers[:2] == [[0], [1]]
    assert topo.placement(4, "server") == [0, 1, 2, 3]
    # rail-major over the fewest servers: ranks 0, 1 on rail 0 of servers 0, 1; ranks 2, 3 on rail 1
    assert topo.placement(4, "rail") == [0, 2, 1, 3]
    assert topo.placement(16) == [0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15]
    assert Topology().placement(5) == [0, 1, 2, 3, 4]
    assert topo.placement(3, [5, 0, 9]) == [5, 0, 9]
    assert topo.rank_servers(topo.placement(4, "rail")) == [[0, 2], [1, 3]]
    fab = Fabric(topo)
    assert [fab.hosts[h].name for h in topo.placement(3)] == ["srv0-nic0", "srv1-nic0", "srv0-nic1"]
    assert all(fab.hosts[h].server == topo.server_of(h) and fab.hosts[h].gpu == h % 2 for h in range(16))
    for bad in ([1, 1, 2], [0, 1], [0, 1, 16]):
        with pytest.raises(FabricError, match="placement"):
            topo.placement(3, bad)
    with pytest.raises(FabricError, match="one of rail, server"):
        topo.placement(3, "random")
    with pytest.raises(FabricError, match="placement: 17 ranks on a topology of 16"):
        topo.placement(17)


def test_gpus_of_one_server_meet_over_the_scale_up_links_only() -> None:
    fab = Fabric("rail")
    a, b = fab.host_index("srv2-nic0"), fab.host_index("srv2-nic1")
    assert isinstance(fab.nics[a], GpuNic) and "srv2-nvs" in fab.switches
    t = _send(fab, a, b, 0)
    assert _frames_through(fab, "leaf") == _frames_through(fab, "spine") == 0  # the Ethernet fabric untouched
    assert _frames_through(fab, "srv2-nvs") == 1
    assert 500 < t < 520  # two scale-up hops of 250 ns plus a few ns of serialisation at 3.6 Tb/s
    c = fab.host_index("srv3-nic1")  # another server, same rail: through the rail leaf only
    _send(fab, a + 1, c, 10**9)
    assert _frames_through(fab, "spine") == 0 and _frames_through(fab, "srv3-nvs") == 0
    # with no scale-up domain the same pair crosses a spine (GPU 0 and GPU 1 are on two rails)
    flat = Fabric(Topology.from_dict({"builtin": "rail", "scale_up": {"rate_bps": 0}}))
    assert not any(n.endswith("-nvs") for n in flat.switches)
    _send(flat, a, b, 0)
    assert _frames_through(flat, "spine") == 1


def test_rail_only_crosses_rails_through_the_scale_up_domain() -> None:
    """No spines: srv0's GPU 0 reaches srv1's GPU 1 by NVLink to srv0's GPU 1, whose NIC puts
    the frame on rail 1 (PXN)."""
    topo = Topology(kind="rail_only", rails=4, groups=1, hosts_per_leaf=3)
    fab = Fabric(topo)
    assert sorted(fab.switches) == [f"leaf{r}" for r in range(4)] + [f"srv{s}-nvs" for s in range(3)]
    a, b = fab.host_index("srv0-nic0"), fab.host_index("srv1-nic1")
    _send(fab, a, b, 0)
    proxy = fab.nics[fab.host_index("srv0-nic1")]
    assert isinstance(proxy, GpuNic) and proxy.proxied == 1 and proxy.port.tx_frames == 1
    assert fab.switches["leaf1"].ports[1].tx_frames == 1 and _frames_through(fab, "leaf0") == 0
    assert fab.nics[a].port.tx_frames == 0  # GPU 0's own NIC never sent it
    _send(fab, a, fab.host_index("srv2-nic0"), 10**9)  # same rail: straight out of its own NIC
    assert fab.nics[a].port.tx_frames == 1 and proxy.proxied == 1
    with pytest.raises(FabricError, match="groups = 1"):
        Topology(kind="rail_only", groups=2)
    with pytest.raises(FabricError, match="scale-up"):
        Topology.from_dict({"kind": "rail_only", "groups": 1, "scale_up": {"rate_bps": 0}})


def test_rail_pods_three_tier() -> None:
    """Pods of rail groups under super-spines: same rail in a pod under one leaf, another pod
    through the super-spines; every server keeps its scale-up switch."""
    topo = Topology(kind="rail_pods", pods=2, groups=1, rails=2, hosts_per_leaf=2, spines=2, superspines=2)
    assert topo.host_count() == 8 and topo.server_count == 4
    fab = Fabric(topo)
    names = [h.name for h in fab.hosts]
    assert names[:3] == ["srv0-nic0", "srv0-nic1", "srv1-nic0"] and names[-1] == "srv3-nic1"
    assert fab.host_ip("srv2-nic1") == "10.1.1.1"  # pod 1, leaf 1 (rail 1), first server
    _send(fab, fab.host_index("srv0-nic1"), fab.host_index("srv1-nic1"), 0)
    assert _frames_through(fab, "pod0-spine") == _frames_through(fab, "ss") == 0
    _send(fab, fab.host_index("srv0-nic1"), fab.host_index("srv3-nic1"), 10**9)
    assert _frames_through(fab, "ss") == 1
    _send(fab, fab.host_index("srv3-nic0"), fab.host_index("srv3-nic1"), 2 * 10**9)
    assert _frames_through(fab, "ss") == 1 and _frames_through(fab, "srv3-nvs") == 1
    links = {lk.name for lk in plan_links(fab.plan)}
    assert "srv3-nic1-srv3-nvs" in links and "pod1-leaf1-pod1-spine0" in links


def test_routing_state_is_linear_in_hosts() -> None:
    """Item 4: no per-pair table — a scale-up switch routes its own GPUs (and, with PXN, one
    prefix per rail), a GPU NIC knows its server's GPUs only."""
    topo = Topology(kind="rail_only", rails=8, groups=1, hosts_per_leaf=16)
    fab = Fabric(topo)
    nvs = [sw for n, sw in fab.switches.items() if n.endswith("-nvs")]
    assert len(nvs) == 16 and all(len(sw.static_routes()) == 16 for sw in nvs)
    assert all(len(n.mates) == 8 for n in fab.nics if isinstance(n, GpuNic))


def test_pxn_routes_survive_fault_convergence() -> None:
    """Routing convergence after a fault keeps the scale-up switch's rail prefixes while the proxy
    GPU's NIC still reaches its rail, and withdraws the one whose proxy lost its rail link."""
    from uet.fabric.model.faults import FaultConfig, FaultEvent

    from uet.wire.net import ip_bytes

    topo = Topology(kind="rail_only", rails=2, groups=1, hosts_per_leaf=3)
    fab = Fabric(topo, faults=FaultConfig(1_000, 1_000, events=[FaultEvent("down", "srv0-nic1-leaf1", 0, 10**12)]))
    a = fab.host_index("srv0-nic0")
    fab.poll(10_000)  # converged without srv0's GPU 1 on rail 1
    nvs = fab.switches["srv0-nvs"]
    assert nvs.lookup(ip_bytes(fab.host_ip("srv1-nic1"))) is None  # its proxy is cut off its rail
    assert nvs.lookup(ip_bytes(fab.host_ip("srv0-nic1"))) == (1,)  # its own GPU: still there
    _send(fab, a, fab.host_index("srv1-nic0"), 20_000)  # same rail: GPU 0's own NIC, untouched
    other = fab.switches["srv1-nvs"]  # another server's proxy is fine
    assert other.lookup(ip_bytes(fab.host_ip("srv2-nic1"))) == (1,)
    _send(fab, fab.host_index("srv1-nic0"), fab.host_index("srv2-nic1"), 2 * 10**9)


def test_static_paths_follow_the_scale_up_domain() -> None:
    """uet.fabric.model.routes.ecmp_path takes the GPU NIC's own choice: the scale-up switch inside
    a server, and on rail_only the proxy GPU's NIC onto the destination's rail."""
    from uet.fabric.model.routes import ecmp_path

    fab = Fabric("rail")
    a, b = fab.host_index("srv2-nic0"), fab.host_index("srv2-nic1")
    assert ecmp_path(fab, a, b, 0xC000) == ["srv2-nic0:1>srv2-nvs", "srv2-nvs:1>srv2-nic1"]
    only = Fabric(Topology(kind="rail_only", rails=2, groups=1, hosts_per_leaf=2))
    a, b = only.host_index("srv0-nic0"), only.host_index("srv1-nic1")
    assert ecmp_path(only, a, b, 0xC000) == [
        "srv0-nic0:1>srv0-nvs",
        "srv0-nvs:1>srv0-nic1",
        "srv0-nic1>leaf1",
        "leaf1:1>srv1-nic1",
    ]


def test_roce_qps_inside_a_server_are_paced_at_the_scale_up_rate() -> None:
    """A RoCEv2 QP towards a GPU of the same server sends on the scale-up link, so its DCQCN rate
    limiter runs at that link's rate, not the NIC's: a ring all-reduce inside one server then
    takes as long on RoCEv2 as on UET (both at the scale-up rate). Paced at the NIC's 400 Gb/s it
    took 1.5 times as long."""
    from uet.sim.scenario import simulate

    topo = {"kind": "rail", "rails": 4, "groups": 1, "hosts_per_leaf": 2, "spines": 2}
    run = {"workload": "collective", "endpoints": 4, "rate_bps": 400_000_000_000, "placement": "server"}
    run["message_bytes"] = 128 * 1024
    run["workload_params"] = {"check": False}
    took = {}
    for transport in ("uet", "roce"):
        res = simulate({**run, "transport": transport}, topo)
        assert res["ok"], res["errors"]
        took[transport] = res["collective"]["rows"][0]["time_us"]
    assert took["roce"] == pytest.approx(took["uet"], rel=0.02), took


def test_scale_up_qps_only_towards_the_same_server() -> None:
    from uet.roce.core import config_for_link
    from uet.scenario.derive import scale_up_qps

    topo = Topology(kind="rail", rails=4, groups=1, hosts_per_leaf=2, spines=2)
    qp = config_for_link(400e9, 9000)
    got = scale_up_qps(topo, [0, 1, 4], ["a", "b", "c"], qp)
    fast = got["a"]("b")
    assert fast is not None and fast.dcqcn is not None and fast.dcqcn.line_rate == topo.scale_up.rate_bps
    assert fast.pmtu == qp.pmtu and got["a"]("c") is None and got["c"]("a") is None
    assert scale_up_qps(Topology(), [0, 1], ["a", "b"], qp) == {}
