"""One hostile host on the modelled fabric (issue 15 item 14; rocev2-and-fabric.md §8.5): a host
sending far above its link rate, and a host sending all-class PFC XOFF storms. In virtual time the
flooding host's excess is dropped at its own NIC (bounded queue, counted), the storm is broken by
the leaf's watchdog, and an unrelated flow delivers every frame in both cases."""

from __future__ import annotations

from dataclasses import replace

import pytest
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


@pytest.mark.unit_each  # long: a unit of work of its own, started early (tests/conftest.py)
def test_a_host_far_above_its_link_rate_is_bounded_at_its_own_nic() -> None:
    fab = Fabric(Topology(), seed=1)
    got = _run(fab, flood=True)
    assert got[5] == 40 * MS // STEP  # every victim frame
    assert fab.counters[("drop", fab.plan.hosts[0].name, "nic_queue_full")] > 0
    cap = fab.topology.switch.nic_queue_bytes
    assert cap is not None and max(fab.nics[0].port.qbytes) <= cap
    # unbounded (the former model): nothing is dropped and the queue holds everything
    topo = Topology()
    topo.switch = replace(topo.switch, nic_queue_bytes=None)
    fab2 = Fabric(topo, seed=1)
    _run(fab2, flood=True)
    assert fab2.counters[("drop", fab2.plan.hosts[0].name, "nic_queue_full")] == 0
    assert max(fab2.nics[0].port.qbytes) > 4 * cap


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


@pytest.mark.unit_each  # long: a unit of work of its own, started early (tests/conftest.py)
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


def _victim_beside_a_rogue_host(flood: bool, police: bool = True) -> tuple[int, int, Fabric]:
    """Host 1 → host 5 (the victim, TC3, 400 Mb/s of a 1 Gb/s link) while host 0's NIC ignores its
    link: frames handed to its leaf port directly at ~27 Gb/s toward host 5 on TC0, for the first
    10 ms of 20. Victim frames received during, after."""
    topo = Topology()
    if not police:
        topo.switch = replace(topo.switch, police_burst_bytes=None)
    fab = Fabric(topo, seed=1)
    ip = [fab.host_ip(i) for i in range(8)]
    victim = bytes(int(x) for x in ip[1].split("."))
    leaf = fab.switches[fab.plan.hosts[0].switch]
    port = fab.plan.hosts[0].port
    got = [0, 0]
    for t in range(0, 20 * MS, STEP):
        fab.inject(1, ipv4_frame(ip[1], ip[5], bytes(1000), dscp=26, ecn=2), t)
        for at, h, f in fab.poll_timed(t):
            if h == 5 and bytes(f[26:30]) == victim:
                got[at >= 10 * MS] += 1
        if flood and t < 10 * MS:
            for k in range(48):  # 48 × 1.4 KB per 20 µs
                leaf.receive(port, ipv4_frame(ip[0], ip[5], bytes(1400), dscp=0, ecn=2), t + k * STEP // 48)
    for at, h, f in fab.poll_timed(40 * MS):
        if h == 5 and bytes(f[26:30]) == victim:
            got[at >= 10 * MS] += 1
    return got[0], got[1], fab


@pytest.mark.unit_each  # long: a unit of work of its own, started early (tests/conftest.py)
def test_a_host_above_its_link_rate_is_policed_at_the_leaf_and_spares_an_unrelated_flow() -> None:
    """Issue 29 item 12: a host sending above its link rate (its NIC ignoring the link) cut the
    flow beside it to 5 % of its baseline; the leaf now polices each host-facing port at its link
    rate (uet.fabric.model.switch), so the victim keeps all of it during the attack and after."""
    base_during, base_after, _ = _victim_beside_a_rogue_host(False)
    during, after, fab = _victim_beside_a_rogue_host(True)
    assert during >= 0.8 * base_during and after >= base_after
    assert fab.counters[("drop", "leaf0", "policed")] > 0
    unpoliced, _after, _ = _victim_beside_a_rogue_host(True, police=False)
    assert unpoliced < 0.2 * base_during  # (the same attack without policing)


def test_a_host_at_its_link_rate_is_never_policed() -> None:
    """The NIC model serialises at the link rate: a host sending flat out, with the burst a
    queue drains in, loses nothing to the policer."""
    fab = Fabric(Topology(), seed=1)
    ip = [fab.host_ip(i) for i in range(8)]
    for t in range(0, 5 * MS, STEP):
        for _ in range(4):  # ~2.3 Gb/s offered to a 1 Gb/s NIC: its queue fills, the link runs flat out
            fab.inject(0, ipv4_frame(ip[0], ip[6], bytes(1400), dscp=0, ecn=2), t)
        fab.poll(t)
    fab.poll(200 * MS)
    assert fab.counters[("drop", "leaf0", "policed")] == 0
    assert fab.switches["leaf0"].ports[0].rx_frames == 4 * 5 * MS // STEP  # every frame reached the leaf
