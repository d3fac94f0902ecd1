"""One hostile host on the modelled fabric (issue 15 item 14; rocev2-and-fabric.md §8.5): a host
sending far above its link rate, and a host sending all-class PFC XOFF storms. In virtual time the
flooding host's excess is dropped at its own NIC (bounded queue, counted), the storm is broken by
the leaf's watchdog, and an unrelated flow delivers every frame in both cases."""

from __future__ import annotations

from dataclasses import replace

from uet.fabric.model import Fabric
from uet.fabric.model.frames import ipv4_frame, pfc_frame
from uet.fabric.topology import Topology

MS = 1_000_000
STEP = 20_000  # one victim frame per 20 µs


def _run(fab: Fabric, *, flood: bool = False, storm: bool = False, to_attacker: bool = False) -> dict[int, int]:
    ip = [fab.host_ip(i) for i in range(len(fab.hosts))]
    mac0 = fab.plan.hosts[0].mac
    got = {0: 0, 5: 0}
    end = 40 * MS
    t = 0
    while t < end:
        fab.inject(1, ipv4_frame(ip[1], ip[5], bytes(1000), dscp=26, ecn=2), t)  # the victim flow
        if to_attacker:
            fab.inject(2, ipv4_frame(ip[2], ip[0], bytes(1000), dscp=26, ecn=2), t)
        if flood:  # ~20 × 1.4 KB per 20 µs: far above any host link here
            for _ in range(20):
                fab.inject(0, ipv4_frame(ip[0], ip[6], bytes(1400), dscp=26, ecn=2), t)
        if storm and t % MS == 0:
            fab.inject(0, pfc_frame(mac0, dict.fromkeys(range(8), 0xFFFF)), t)
        for h, _f in fab.poll(t):
            if h in got:
                got[h] += 1
        t += STEP
    for h, _f in fab.poll(end + 200 * MS):
        if h in got:
            got[h] += 1
    return got


def test_a_host_far_above_its_link_rate_is_bounded_at_its_own_nic() -> None:
    fab = Fabric(Topology(), seed=1)
    got = _run(fab, flood=True)
    assert got[5] == 40 * MS // STEP  # every victim frame
    assert fab.counters[("drop", fab.plan.hosts[0].name, "nic_queue_full")] > 0
    assert max(fab.nics[0].port.qbytes) <= fab.topology.switch.nic_queue_bytes
    # unbounded (the former model): nothing is dropped and the queue holds everything
    topo = Topology()
    topo.switch = replace(topo.switch, nic_queue_bytes=None)
    fab2 = Fabric(topo, seed=1)
    _run(fab2, flood=True)
    assert fab2.counters[("drop", fab2.plan.hosts[0].name, "nic_queue_full")] == 0
    assert max(fab2.nics[0].port.qbytes) > 4 * fab.topology.switch.nic_queue_bytes


def test_an_all_class_pfc_storm_is_broken_by_the_watchdog() -> None:
    fab = Fabric(Topology(), seed=1)
    got = _run(fab, storm=True, to_attacker=True)
    assert got[5] == 40 * MS // STEP
    assert fab.counters.total("watchdog") >= 1
