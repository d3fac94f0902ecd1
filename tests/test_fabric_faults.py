"""Faults on the modelled fabric (issue 27; uet.fabric.model.failover): exact frames, exact times.

The default topology: 2 leaves × 2 spines × 4 hosts per leaf, every link 1 Gb/s with 1 µs of
propagation. A 1000-byte UDP payload makes a 1042-byte frame (Ethernet 14 + IPv4 20 + UDP 8),
1066 bytes on the wire: 8528 ns per link at 1 Gb/s.
"""

from __future__ import annotations

import pytest
from uet.fabric.model import Fabric
from uet.fabric.model.config import FabricError
from uet.fabric.model.faults import FaultConfig, FaultEvent, parse_ns, parse_option
from uet.fabric.model.frames import ipv4_frame
from uet.fabric.model.routes import ecmp_path
from uet.fabric.topology import Topology

from uet.wire.net import ip_bytes

SER = 8_528  # one 1042-byte frame on a 1 Gb/s link
DELAY = 1_000


def _fabric(*events: FaultEvent, detect: int = 50_000, holddown: int = 200_000) -> Fabric:
    return Fabric(Topology(), seed=1, faults=FaultConfig(detect, holddown, events=list(events)))


def _frame(fab: Fabric, src: int, dst: int, sport: int) -> bytes:
    return ipv4_frame(fab.host_ip(src), fab.host_ip(dst), bytes(1000), sport=sport)


def _sport_via(fab: Fabric, src: int, dst: int, spine: str, skip: int = 0) -> int:
    """A UDP source port whose ECMP path from ``src`` to ``dst`` crosses ``spine``."""
    found = [s for s in range(0xC000, 0xC100) if any(spine + ":" in hop for hop in ecmp_path(fab, src, dst, s))]
    return found[skip]


def test_frame_sizes_of_this_module() -> None:
    fab = _fabric()
    f = _frame(fab, 0, 4, 0xC000)
    assert len(f) == 1042 and fab.nics[0].port.ser_ns(len(f)) == SER


def test_a_packet_on_a_failed_link_is_lost_and_counted() -> None:
    """Two frames take leaf0's uplink to spine0: the first is on the wire when the link fails
    (lost at the far end), the second waits in leaf0's queue (lost there); both counted."""
    probe = _fabric()
    s1 = _sport_via(probe, 0, 4, "spine0")
    s2 = _sport_via(probe, 1, 4, "spine0")
    # both reach leaf0 at SER + DELAY; the first starts on the uplink then, the second queues
    fail_at = SER + DELAY + SER // 2
    fab = _fabric(FaultEvent("down", "leaf0-spine0", fail_at))
    fab.inject(0, _frame(fab, 0, 4, s1), 0)
    fab.inject(1, _frame(fab, 1, 4, s2), 0)
    assert fab.poll(10 * SER) == []
    c = fab.counters
    assert c[("drop", "spine0", "link_down")] == 1  # in flight: lost on arrival
    assert c[("drop", "leaf0", "link_down")] == 1  # queued: flushed
    assert c.total("lost_bytes") == 2 * 1042
    assert fab.failover is not None
    s = fab.failover.summary()
    assert s["lost_packets"] == {"link_down": 2, "link_loss": 0} and s["lost_bytes"] == 2084
    assert s["events"][0] == {"t_ns": fail_at, "what": "leaf0-spine0", "event": "down"}


def test_ecmp_excludes_a_failed_link_only_after_the_detection_delay() -> None:
    detect, hold = 50_000, 200_000
    down, up = 10_000, 400_000
    fab = _fabric(FaultEvent("down", "leaf0-spine0", down, up), detect=detect, holddown=hold)
    leaf0, leaf1, spine0 = fab.switches["leaf0"], fab.switches["leaf1"], fab.switches["spine0"]
    h0, h4 = ip_bytes(fab.host_ip(0)), ip_bytes(fab.host_ip(4))
    up0 = next(p.index for p in leaf0.ports if p.peer and p.peer[0].name == "spine0")
    up1 = next(p.index for p in leaf1.ports if p.peer and p.peer[0].name == "spine0")
    assert leaf0.lookup(h4) == (4, 5) and leaf1.lookup(h0) == (4, 5) and up0 == 4 and up1 == 4
    s = _sport_via(fab, 0, 4, "spine0")
    # down, but still in every group: a frame hashed to it is lost at leaf0
    fab.inject(0, _frame(fab, 0, 4, s), down)
    fab.poll(down + detect - 1)
    assert leaf0.lookup(h4) == (4, 5) and spine0.lookup(h0) == (0,)
    assert fab.counters[("drop", "leaf0", "link_down")] == 1
    fab.poll(down + detect)
    # routed out: leaf0 stops using it, spine0 withdraws leaf0's prefix, leaf1 avoids spine0 for it
    assert leaf0.lookup(h4) == (5,)
    assert spine0.lookup(h0) is None
    assert leaf1.lookup(h0) == (5,)
    assert leaf1.lookup(ip_bytes(fab.host_ip(5))) == (1,)  # local: untouched
    assert spine0.lookup(h4) == (1,)  # spine0 still reaches leaf1
    t = down + detect + 5_000
    fab.inject(0, _frame(fab, 0, 4, s), t)  # the same flow now goes by spine1
    got = fab.poll_timed(t + 10 * SER)
    assert [h for _, h, _ in got] == [4]
    # back up at `up`, used again only after the hold-down
    fab.poll(up + hold - 1)
    assert leaf0.lookup(h4) == (5,) and not leaf0.ports[4].down
    fab.poll(up + hold)
    assert leaf0.lookup(h4) == (4, 5) and spine0.lookup(h0) == (0,) and leaf1.lookup(h0) == (4, 5)
    events = [(e["t_ns"], e["event"]) for e in fab.failover.summary()["events"]]  # type: ignore[union-attr]
    assert events == [(down, "down"), (down + detect, "routed_out"), (up, "up"), (up + hold, "routed_in")]


def test_a_link_back_before_detection_is_never_routed_out() -> None:
    fab = _fabric(FaultEvent("down", "leaf0-spine0", 1_000, 20_000), detect=50_000)
    fab.poll(200_000)
    assert fab.switches["leaf0"].lookup(ip_bytes(fab.host_ip(4))) == (4, 5)
    assert fab.counters.total("reroute") == 0


def test_a_degraded_link_serialises_at_its_reduced_rate() -> None:
    """One frame h0 → h4 over leaf0-spine0 at 25 %: that hop takes 4 × the serialisation, in
    both directions; the other three links keep their rate."""
    for rate, factor in ((0.25, 4), (1.0, 1)):
        probe = _fabric()
        s = _sport_via(probe, 0, 4, "spine0")
        fab = _fabric(FaultEvent("degrade", "leaf0-spine0", 0, None, rate=rate))
        fab.inject(0, _frame(fab, 0, 4, s), 0)
        [(t, host, _)] = fab.poll_timed(1_000_000)
        assert host == 4
        assert t == 3 * SER + factor * SER + 4 * DELAY
        # the reverse direction too
        back = _sport_via(probe, 4, 0, "spine0")
        fab.inject(4, _frame(fab, 4, 0, back), 2_000_000)
        [(t2, host2, _)] = fab.poll_timed(3_000_000)
        assert host2 == 0 and t2 - 2_000_000 == 3 * SER + factor * SER + 4 * DELAY


def test_a_lossy_link_loses_its_share_seeded() -> None:
    def run(seed: int) -> int:
        lossy = FaultEvent("loss", "h0-leaf0", 0, None, loss=0.3)
        fab = Fabric(Topology(), seed=1, faults=FaultConfig(seed=seed, events=[lossy]))
        for i in range(200):
            fab.inject(0, _frame(fab, 0, 1, 0xC000), i * SER)
        return len(fab.poll(300 * SER))

    got = run(7)
    assert got == run(7) and 100 < got < 180 and got != run(8)


def test_a_switch_down_fails_all_its_links_and_routing_avoids_it() -> None:
    fab = _fabric(FaultEvent("switch_down", "spine0", 0, None), detect=10_000)
    fab.poll(10_000)
    for i in range(40):
        fab.inject(0, _frame(fab, 0, 4, 0xC000 + i), 20_000 + i * SER)
    assert len(fab.poll(2_000_000)) == 40
    assert fab.counters.total("drop") == 0
    assert fab.counters[("fault", "down", "leaf0-spine0")] == 1 and fab.counters[("fault", "down", "leaf1-spine0")] == 1


def test_pfc_state_on_a_failed_port_is_released() -> None:
    from uet.fabric.model.frames import pfc_frame

    fab = _fabric(FaultEvent("down", "h0-leaf0", 50_000, None))
    leaf0 = fab.switches["leaf0"]
    fab.inject(0, pfc_frame(fab.host_mac(0), {3: 0xFFFF}), 0)  # h0 pauses TC3 on leaf0's port 0
    fab.poll(40_000)
    assert leaf0.ports[0].paused_until[3] > 50_000
    fab.poll(50_000)
    assert leaf0.ports[0].paused_until[3] == 50_000
    assert fab.counters[("pfc_released", "leaf0", 0)] == 1


def test_flap_expands_into_down_and_up_halves() -> None:
    fab = _fabric(FaultEvent("flap", "leaf0-spine0", 0, 100_000, period_ns=40_000), detect=1_000_000)
    fab.poll(200_000)
    ev = [(e["t_ns"], e["event"]) for e in fab.failover.summary()["events"]]  # type: ignore[union-attr]
    assert ev == [(0, "down"), (20_000, "up"), (40_000, "down"), (60_000, "up"), (80_000, "down"), (100_000, "up")]


@pytest.mark.parametrize(
    ("option", "text", "want"),
    [
        ("fail", "leaf3-spine1@100us..300us", FaultEvent("down", "leaf3-spine1", 100_000, 300_000)),
        ("degrade", "uplinks:4=0.25", FaultEvent("degrade", "uplinks:4", 0, None, rate=0.25)),
        ("lossy", "h0-leaf0=0.01@1ms", FaultEvent("loss", "h0-leaf0", 1_000_000, None, loss=0.01)),
        ("flap", "leaf0-spine0@0..1ms/100us", FaultEvent("flap", "leaf0-spine0", 0, 1_000_000, period_ns=100_000)),
        ("fail-switch", "spine1@2ms", FaultEvent("switch_down", "spine1", 2_000_000)),
    ],
)
def test_command_line_forms(option: str, text: str, want: FaultEvent) -> None:
    assert parse_option(option, text) == want


@pytest.mark.parametrize(
    ("option", "text", "msg"),
    [
        ("fail", "leaf3-spine1", "--fail 'leaf3-spine1': NAME@T[..T2]"),
        ("fail", "leaf3-spine1@3", "not a time"),
        ("fail", "leaf3-spine1@3us..1us", "must come after the start"),
        ("degrade", "leaf0-spine0=1.5", "rate kept must be in (0, 1]"),
        ("degrade", "leaf0-spine0=x", "'x' is not a number"),
        ("lossy", "leaf0-spine0=1", "loss probability must be in [0, 1)"),
        ("flap", "leaf0-spine0@1us", "LINK@T..T2/PERIOD"),
    ],
)
def test_command_line_mistakes_are_one_line_errors(option: str, text: str, msg: str) -> None:
    with pytest.raises(FabricError, match=None) as e:
        parse_option(option, text)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_unknown_links_and_tables() -> None:
    with pytest.raises(FabricError, match="no link 'leaf9-spine0' in this topology"):
        _fabric(FaultEvent("down", "leaf9-spine0"))
    with pytest.raises(FabricError, match="N must be in 1..4"):
        _fabric(FaultEvent("down", "uplinks:5"))
    with pytest.raises(FabricError, match="no switch 'spine7'"):
        _fabric(FaultEvent("switch_down", "spine7"))
    assert _fabric(FaultEvent("down", "spine0-leaf1")).failover is not None  # either order
    cfg = FaultConfig.from_dict(
        {"detect": "20us", "seed": 3, "event": [{"kind": "degrade", "link": "uplinks:2", "rate": 0.5, "at": "1ms"}]}
    )
    assert cfg.detect_ns == 20_000 and cfg.seed == 3
    assert cfg.events == [FaultEvent("degrade", "uplinks:2", 1_000_000, None, rate=0.5)]
    with pytest.raises(FabricError, match="unknown key 'when'"):
        FaultConfig.from_dict({"event": [{"kind": "down", "link": "a-b", "when": 1}]})
    with pytest.raises(FabricError, match="kind = 'explode'"):
        FaultConfig.from_dict({"event": [{"kind": "explode"}]})
    assert parse_ns("1.5ms") == 1_500_000 and parse_ns(0) == 0


@pytest.mark.parametrize(
    ("over", "rule"),
    [
        ({"pfc": {"xon": 40_000}}, "rule xON < xOFF"),
        ({"tcs": {"3": {"ecn": {"kmin": 30_000, "kmax": 10_000}}}}, "rule WRED min < WRED max"),
        ({"tcs": {"3": {"ecn": {"kmax": 40_000}}}}, "rule WRED max < xOFF"),
        ({"pfc": {"headroom": 200}}, "rule headroom ≥ round trip × rate"),
    ],
)
def test_inverted_thresholds_are_refused_naming_the_rule(over: dict, rule: str) -> None:
    from uet.fabric.model.config import SwitchConfig

    with pytest.raises(FabricError, match=rule) as e:
        Fabric(Topology(switch=SwitchConfig.from_dict(over)))
    assert "\n" not in str(e.value)
    Fabric(Topology())  # the lab defaults pass


def test_headroom_must_cover_a_long_cable() -> None:
    from uet.fabric.model.plan import LinkSpec

    long = LinkSpec(rate_bps=100_000_000_000, delay_ns=1_000)  # 2 µs round trip at 100 Gb/s: 25,000 B
    with pytest.raises(FabricError, match=r"below the cable's round trip at 100 Gb/s over 1000 ns \(25000 B\)"):
        Fabric(Topology(fabric_link=long))


def test_a_dual_plane_nic_spreads_by_entropy_and_keeps_the_surviving_plane() -> None:
    """Two planes: each host NIC has a port on p0-leafN and on p1-leafN, same address. A frame's
    UDP source port picks the plane; once plane 1 is down and routed out, everything takes plane 0."""
    fab = Fabric(
        Topology(planes=2),
        seed=1,
        faults=FaultConfig(10_000, events=[FaultEvent("switch_down", "plane:1", 100_000)]),
    )
    assert [s for s in fab.switches][:5] == ["p0-leaf0", "p0-leaf1", "p0-spine0", "p0-spine1", "p1-leaf0"]
    assert len(fab.nics[0].ports) == 2
    for i in range(4):
        fab.inject(0, _frame(fab, 0, 4, 0xC000 + i), i * SER)
    assert len(fab.poll(90_000)) == 4
    leaf = {k: fab.switches[f"p{k}-leaf0"].ports[0].rx_frames for k in (0, 1)}
    assert leaf == {0: 2, 1: 2}  # even source ports on plane 0, odd on plane 1
    fab.poll(110_000)  # plane 1 down at 100 µs, routed out at 110 µs
    for i in range(4):
        fab.inject(0, _frame(fab, 0, 4, 0xC000 + i), 110_000 + i * SER)
    assert len(fab.poll(300_000)) == 4
    assert fab.switches["p0-leaf0"].ports[0].rx_frames == 6 and fab.counters.total("drop") == 0
    with pytest.raises(FabricError, match="no 'plane:2'"):
        Fabric(Topology(planes=2), faults=FaultConfig(events=[FaultEvent("switch_down", "plane:2")]))


def test_uet_completes_on_the_surviving_plane() -> None:
    from uet.sim.scenario import simulate

    faults = FaultConfig(events=[FaultEvent("switch_down", "plane:1", 5_000)])
    res = simulate({"workload": "all_to_all", "endpoints": 4, "messages": 1}, {"planes": 2}, faults=faults)
    assert res["ok"] and all(f["intact"] for f in res["flows"]) and res["faults"]["lost_packets"]["link_down"] > 0
