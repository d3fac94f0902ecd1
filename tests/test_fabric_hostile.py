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


def _victim_through_storm(storm: bool) -> tuple[int, int, Fabric]:
    """Host 7 → host 1 (the victim, TC3) beside host 6 → host 0 (TC3, its path shares the victim's
    uplink); host 0 storms its leaf with short XOFFs on TC3 (95 µs of every 100 µs, so a frame
    leaves in each gap) for the first 20 ms of 40. Victim frames received during, after."""
    topo = Topology()
    topo.switch.watchdog = replace(topo.switch.watchdog, poll_ns=MS, detect_ns=2 * MS, restore_ns=2 * MS)
    fab = Fabric(topo, seed=1)
    ip = [fab.host_ip(i) for i in range(8)]
    mac0 = fab.plan.hosts[0].mac
    during = after = 0
    for t in range(0, 40 * MS, 10_000):
        fab.inject(7, ipv4_frame(ip[7], ip[1], bytes(1000), dscp=26, ecn=2), t)
        fab.inject(6, ipv4_frame(ip[6], ip[0], bytes(1000), dscp=26, ecn=2), t)
        if storm and t < 20 * MS and t % 100_000 == 0:
            fab.inject(0, pfc_frame(mac0, {3: 186}), t)  # 186 quanta of 512 bit times at 1 Gb/s: 95 µs
        for at, h, _f in fab.poll_timed(t):
            if h == 1:
                if at < 20 * MS:
                    during += 1
                else:
                    after += 1
    return during, after, fab


def test_a_storm_of_short_pauses_is_caught_by_the_watchdog_and_spares_an_unrelated_flow() -> None:
    """Issue 29 item 12: such a storm cut the victim to 18 % of its baseline and the watchdog never
    fired (a frame left between two pauses, so the queue never looked stuck). A queue paused ≥ 90 %
    of a poll interval is a storm: it stops honouring pause (counted) until the XOFFs stop."""
    base_during, base_after, _ = _victim_through_storm(False)
    during, after, fab = _victim_through_storm(True)
    assert during >= 0.8 * base_during
    assert after >= 0.99 * base_after  # all of it (frames at the 20 ms edge land on either side)
    assert fab.counters[("watchdog", "leaf0", 0, 3)] == 1
    assert fab.counters[("watchdog_ignored", "leaf0", 0, 3)] > 100
