"""Switch-to-switch forwarding inside a Fabric (uet.fabric.model.switch ``_arrive`` and the
inlined link hand-off in ``_kick``): a forwarded packet keeps what its first switch learned and
goes straight onto the shared event heap, and the result must be exactly what the general path
gives — the path a tapped fabric (uet-fabric --pcap) still takes, frame by frame."""

from __future__ import annotations

from typing import Any

from uet.fabric.model import Fabric
from uet.fabric.model.frames import ipv4_frame
from uet.fabric.model.switch import Switch


def _tap(fab: Fabric) -> list[tuple[str, int, bytes, int]]:
    """Wrap every switch's ``on_transmit`` (as a pcap tap does): forces the general path."""
    seen: list[tuple[str, int, bytes, int]] = []
    for sw in fab.switches.values():
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


def test_ttl_runs_out_on_a_forwarded_packet() -> None:
    """TTL 3 leaves the first leaf as 2, the spine as 1; the super-spine (a forwarded packet,
    no re-parse) must still drop it as expired."""
    fab = Fabric("three_tier")
    fab.inject(0, ipv4_frame(fab.host_ip(0), fab.host_ip(4), bytes(100), ttl=3), 0)
    assert fab.poll(10**9) == []
    expired = {k for k, v in fab.counters.items() if k[0] == "drop" and k[2] == "ttl_expired" and v}
    assert len(expired) == 1 and next(iter(expired))[1].startswith("ss")


def test_a_fabric_switch_hands_frames_to_the_heap_until_someone_wraps_it() -> None:
    fab = Fabric("default")
    sw = next(iter(fab.switches.values()))
    assert isinstance(sw, Switch) and sw.on_transmit is sw.link_tx
    port = sw.ports[0]
    assert port.peer_ingress is not None and port.peer_port == port.peer[1]  # type: ignore[index]
