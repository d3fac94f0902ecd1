"""The k-ary fat tree (3-tier Clos sized from a host count) and the datacenter profile."""

from __future__ import annotations

import pytest
from uet.fabric.model import Fabric
from uet.fabric.model.config import FabricError
from uet.fabric.model.frames import ipv4_frame
from uet.fabric.profiles import DATACENTER_FRAME, load_topology
from uet.fabric.topology import Topology, fat_tree_k

from uet.wire.net import ip_bytes


@pytest.mark.parametrize(("hosts", "k"), [(1, 2), (2, 2), (3, 4), (16, 4), (17, 6), (128, 8), (1024, 16)])
def test_k_is_the_smallest_tree_that_holds_the_hosts(hosts: int, k: int) -> None:
    assert fat_tree_k(hosts) == k
    assert Topology(kind="fat_tree", hosts=hosts).host_count() == k**3 // 4


def test_fat_tree_wiring_k4() -> None:
    fab = Fabric(Topology(kind="fat_tree", hosts=16))
    assert len(fab.hosts) == 16
    tiers: dict[str, int] = {}
    for sp in fab.plan.switches:
        tiers[sp.tier] = tiers.get(sp.tier, 0) + 1
        assert len(sp.ports) == 4  # every switch of a k-ary fat tree has k ports
    assert tiers == {"leaf": 8, "spine": 8, "superspine": 4}
    # each core switch reaches every pod exactly once
    for j in range(4):
        peers = [p for p, _ in fab.plan.switches[16 + j].peers]
        assert sorted(int(p[3]) for p in peers) == [0, 1, 2, 3]


def _path_hops(fab: Fabric, a: int, b: int) -> tuple[int, bytes]:
    frame = ipv4_frame(fab.host_ip(a), fab.host_ip(b), b"x" * 100, sport=77)
    fab.inject(a, frame, fab.now)
    got: list[tuple[int, bytes]] = []
    while not got:
        t = fab.next_deadline()
        assert t is not None
        got = fab.poll(t)
    host, out = got[0]
    assert host == b
    return 64 - out[22], out


def test_paths_cross_one_two_or_three_tiers() -> None:
    fab = Fabric(Topology(kind="fat_tree", hosts=16))
    assert _path_hops(fab, 0, 1)[0] == 1  # same leaf
    assert _path_hops(fab, 0, 2)[0] == 3  # same pod, via a spine
    assert _path_hops(fab, 0, 15)[0] == 5  # other pod, via the core


def test_topology_table_and_bad_k() -> None:
    t = Topology.from_dict({"kind": "fat_tree", "hosts": 100})
    assert t.fat_k == 8
    assert Topology.builtin("fat_tree").host_count() == 16
    with pytest.raises(FabricError):
        Topology(kind="fat_tree", k=5)


def test_datacenter_profile_sizes_buffers_from_the_bdp() -> None:
    topo = load_topology({"kind": "fat_tree", "hosts": 128}, profile="datacenter", rate_bps=100_000_000_000)
    assert topo.host_link.rate_bps == topo.fabric_link.rate_bps == 100_000_000_000
    assert topo.host_link.delay_ns == 1_000 and topo.host_link.mtu >= 4096 + 88
    tc0 = topo.switch.tcs[0]
    bdp = tc0.limit
    assert bdp == 100 * 2 * 6 * (1_000 + DATACENTER_FRAME * 8 // 100) // 8  # 2 × 6 × (1 µs + 0.34 µs)
    assert tc0.ecn is not None and 9 <= tc0.ecn.kmin / DATACENTER_FRAME <= 10
    assert 35 <= tc0.ecn.kmax / DATACENTER_FRAME <= 40 and tc0.ecn.pmax == 1.0
    assert topo.switch.trim.enabled and not tc0.dynamic and topo.switch.nic_queue_bytes is None
    Fabric(topo)  # the buffer carve-up is consistent


def _container_sizes(obj: object) -> dict[str, int]:
    """The size of every dict, list and set ``obj`` holds: its attributes by ``dir`` (a class of
    the compiled model, ``UET_COMPILED=1``, has no ``__dict__`` for ``vars``)."""
    out = {}
    for k in dir(obj):
        v = getattr(obj, k)
        if isinstance(v, (dict, list, set)):
            out[k] = len(v)
    return out


def test_switches_remember_nothing_per_destination() -> None:
    """Issue 28 item 4: a switch's memory must not grow with the destinations it forwards to
    (a per-destination route cache held switches × hosts entries, 10 million at 8,192 hosts)."""
    fab = Fabric(Topology(kind="fat_tree", hosts=128))
    ips = [fab.host_ip(h) for h in range(128)]
    for h in range(0, 128, 7):  # every packet gets to its host, through every tier
        assert _path_hops(fab, h, (h * 37 + 11) % 128)[0] in (1, 3, 5)
    for sw in fab.switches.values():
        before = _container_sizes(sw)
        groups = [sw.lookup(ip_bytes(ip)) for ip in ips]
        assert all(g for g in groups)  # a fat tree switch routes every host
        assert _container_sizes(sw) == before, sw.name
