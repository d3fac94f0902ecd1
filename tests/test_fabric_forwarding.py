"""Switch-to-switch forwarding inside a Fabric (uet.fabric.model.switch ``_arrive`` and the
inlined link hand-off in ``_kick``): a forwarded packet keeps what its first switch learned and
goes straight onto the shared event heap, and the result must be exactly what the general path
gives — the path a tapped fabric (uet-fabric --pcap) still takes, frame by frame."""

from __future__ import annotations

from typing import Any

from uet.fabric.model import Fabric
from uet.fabric.model.frames import ipv4_frame
from uet.fabric.model.switch import Switch
from uet.fabric.topology import Topology


def _tap(fab: Fabric) -> list[tuple[str, int, bytes, int]]:
    """Wrap every switch's and NIC's ``on_transmit`` (as a pcap tap does): forces the general
    path (``Fabric._on_transmit`` and ``EventQueue.schedule``) at every link."""
    seen: list[tuple[str, int, bytes, int]] = []
    nodes: list[Any] = [*fab.switches.values(), *fab.nics]
    for sw in nodes:
        orig = sw.on_transmit

        def tapped(n: Any, p: int, frame: bytearray, start: int, end: int, _orig: Any = orig) -> None:
            seen.append((n.name, p, bytes(frame), start))
            _orig(n, p, frame, start, end)

        sw.on_transmit = tapped
    return seen


def _incast(fab: Fabric, ttl: int = 64) -> list[tuple[int, int, bytes]]:
    """Every host of pod 1 and 0 but host 0 sends 40 UET frames to host 0 at once (trims, ECN)."""
    for h in range(1, len(fab.hosts)):
        for k in range(40):
            f = ipv4_frame(fab.host_ip(h), fab.host_ip(0), bytes(1400), sport=0xC000 + k, ecn=2, ttl=ttl)
            fab.inject(h, f, 0)
    return fab.poll_timed(10**10)


def test_forwarded_packets_match_the_general_path_byte_for_byte() -> None:
    fast = Fabric("three_tier", seed=3)
    slow = Fabric("three_tier", seed=3)
    _tap(slow)
    a = _incast(fast)
    b = _incast(slow)
    assert len(a) > 100 and a == b
    assert fast.counters == slow.counters and fast.counters.total("trim") > 0
    assert fast.stats() == slow.stats()


def test_lossless_incast_with_pause_matches_the_general_path() -> None:
    """PFC on every tier and at the NICs (paused classes, the wake-ups, PFC frames queued before
    data, ``Port.free_at`` never cleared): the direct hand-offs of switches and NICs, and
    ``Fabric.run_to_arrival`` stepping instant by instant, give what the general path gives."""

    def incast(fab: Fabric) -> None:
        for k in range(40):
            for s in range(4, 12):
                f = ipv4_frame(fab.host_ip(s), fab.host_ip(0), bytes(1000), sport=0xC000 + s, dport=4791, dscp=26)
                fab.inject(s, f, k * 500)

    topo = Topology(leaves=3, hosts_per_leaf=4)
    fast, slow = Fabric(topo, deliver_pfc=True), Fabric(topo, deliver_pfc=True)
    _tap(slow)
    incast(fast)
    incast(slow)
    got: list[tuple[int, int, bytes | bytearray]] = []
    limit = fast.now  # the injections ran the fabric up to the last of them
    while (t := fast.run_to_arrival(limit)) is not None or fast.next_deadline() is not None:
        if t is None:  # nothing reached a host by the limit: the fabric stands there
            assert fast.now == limit
            limit += 7_777
        else:
            got += fast.take_arrivals()
    want = slow.poll_timed(10**10)
    assert len(want) >= 8 * 40 and got == want
    assert fast.counters == slow.counters and fast.counters.total("pfc_tx") > 0
    assert fast.stats(10**10) == slow.stats(10**10)


def test_ttl_runs_out_on_a_forwarded_packet() -> None:
    """TTL 3 leaves the first leaf as 2, the spine as 1; the super-spine (a forwarded packet,
    no re-parse) must still drop it as expired."""
    fab = Fabric("three_tier")
    fab.inject(0, ipv4_frame(fab.host_ip(0), fab.host_ip(4), bytes(100), ttl=3), 0)
    assert fab.poll(10**9) == []
    expired = {k for k, v in fab.counters.items() if k[0] == "drop" and k[2] == "ttl_expired" and v}
    assert len(expired) == 1 and next(iter(expired))[1].startswith("ss")


def test_a_nic_hands_frames_to_its_fabric_until_someone_wraps_its_hook() -> None:
    """HostNic.ingress calls Fabric._on_deliver directly while ``on_deliver`` is the fabric's
    own hook, and a wrapper put in its place gets every frame instead."""
    fab = Fabric("default")
    nic = fab.nics[1]
    assert nic.fabric is fab and nic.on_deliver is fab.deliver_hook
    seen: list[int] = []
    hook = fab.deliver_hook

    def wrapped(host: int, frame: bytearray, now: int, is_pfc: bool) -> None:
        seen.append(host)
        hook(host, frame, now, is_pfc)

    nic.on_deliver = wrapped
    for h in (1, 2):
        fab.inject(0, ipv4_frame(fab.host_ip(0), fab.host_ip(h), bytes(100)), 0)
    got = fab.poll(10**9)
    assert sorted(h for h, _ in got) == [1, 2] and seen == [1]


def test_a_fabric_switch_hands_frames_to_the_heap_until_someone_wraps_it() -> None:
    fab = Fabric("default")
    sw = next(iter(fab.switches.values()))
    assert isinstance(sw, Switch) and sw.on_transmit is sw.link_tx
    port = sw.ports[0]
    assert port.peer_node is not None and port.peer_port == port.peer[1]  # type: ignore[index]
    nic = fab.nics[0]  # a NIC hands its frames to the leaf's ingress the same way
    assert nic.on_transmit is nic.link_tx and nic.port.peer_node is not None
    leaf, leaf_port = nic.port.peer  # type: ignore[misc]
    assert nic.port.peer_node is leaf and nic.port.peer_port == leaf_port


def test_take_arrivals_hands_over_the_carried_frames_and_poll_gives_bytes() -> None:
    """Issue 28: ``take_arrivals`` hands the simulator each delivered frame as the bytearray the
    fabric carried (no copy per delivery), while ``poll_timed`` still gives bytes; the same
    frames, the same times, either way."""
    frames = []
    for fab in (Fabric("default"), Fabric("default")):
        for k in range(3):
            fab.inject(k + 1, ipv4_frame(fab.host_ip(k + 1), fab.host_ip(0), bytes(300 + k), sport=0xC000 + k), 0)
        frames.append(fab)
    fast, slow = frames
    got: list[tuple[int, int, bytearray]] = []
    while fast.run_to_arrival(None) is not None:
        got += fast.take_arrivals()
    want = slow.poll_timed(10**9)
    assert len(got) == 3 and all(type(f) is bytearray for _, _, f in got)
    assert all(type(f) is bytes for _, _, f in want)
    assert [(t, h, bytes(f)) for t, h, f in got] == want
