"""PFC (802.1Qbb) in the switch model: thresholds, real pause frames, refresh, headroom, incast
losslessness, propagation upstream and the watchdog (rocev2-and-fabric.md §8.3, §8.5, §8.9)."""

from __future__ import annotations

from functools import cache

from uet.fabric.model import Fabric, PortSpec, Switch, SwitchConfig, Telemetry
from uet.fabric.model.frames import ipv4_frame, parse_pause, pfc_frame
from uet.fabric.model.telemetry import PfcSent, WatchdogEvent
from uet.fabric.topology import Topology

from uet.wire.net import ETHERNET, PFC, PFC_DST_MAC, EtherType

GBPS = 1_000_000_000
MS = 1_000_000
FRAME = 1042
IN_SER = 853  # a 1042-byte frame at 10 Gb/s: (1042 + 24) × 8 / 10 ns, rounded up
PEER = bytes.fromhex("020000000099")


@cache
def roce(k: int = 0, dscp: int = 26) -> bytes:
    return ipv4_frame("10.0.0.1", "10.0.1.2", bytes(1000), sport=0xC000 + k, dport=4791, dscp=dscp, ecn=2)


def switch(cfg: SwitchConfig | None = None, telemetry: Telemetry | None = None) -> Switch:
    sw = Switch("sw", 1, [PortSpec(10 * GBPS), PortSpec(GBPS)], cfg, telemetry=telemetry)
    sw.add_route("10.0.1.0/24", [1])
    return sw


def feed(sw: Switch, n: int, t0: int = 0, gap: int = IN_SER) -> int:
    """n lossless frames arriving on port 0 back to back at 10 Gb/s; returns the last arrival."""
    t = t0
    for k in range(n):
        t = t0 + k * gap
        sw.receive(0, roce(k), t)
    return t


def run(sw: Switch, until: int = 10**12) -> list:
    while (t := sw.next_deadline()) is not None and t <= until:
        sw.advance(t)
    return sw.take_transmissions()


def test_xoff_and_xon_at_the_thresholds_as_real_pfc_frames() -> None:
    tel = Telemetry()
    cfg = SwitchConfig()
    sw = switch(cfg, tel)
    feed(sw, 38)
    tx = run(sw)
    sent = tel.of(PfcSent)
    assert [(r.port, r.prio, r.quanta, r.refresh) for r in sent] == [(0, 3, 0xFFFF, False), (0, 3, 0, False)]
    xoff, xon = sent
    # XOFF on the first arrival that takes the (port 0, priority 3) counter to ≥ XOFF
    assert xoff.ingress_bytes >= cfg.pfc.xoff > xoff.ingress_bytes - FRAME
    # XON on the first departure that takes it below XON
    assert xon.ingress_bytes < cfg.pfc.xon <= xon.ingress_bytes + FRAME
    pfc = [x for x in tx if x.port == 0]
    assert len(pfc) == 2
    for x, quanta in zip(pfc, (0xFFFF, 0), strict=True):
        eth = ETHERNET.decode(x.frame)
        assert (eth.dst, eth.ethertype, len(x.frame)) == (PFC_DST_MAC, EtherType.MAC_CONTROL, 60)
        body = PFC.decode(x.frame, 14)
        assert (body.opcode, body.class_enable, body.quanta3) == (0x0101, 0x08, quanta)
    assert pfc[0].start == xoff.t and pfc[1].start == xon.t  # the port towards upstream was idle
    assert sw.counters.total("drop") == 0
    assert len([x for x in tx if x.port == 1]) == 38


def test_headroom_absorbs_late_frames_then_overflows() -> None:
    cfg = SwitchConfig()
    sw = switch(cfg)
    feed(sw, 60)  # the "upstream" here ignores the pause: headroom must overflow
    run(sw)
    dropped = sw.counters[("drop", "sw", "headroom_overflow")]
    assert dropped > 0
    assert sw.mmu.peak_used <= cfg.pfc.xoff + cfg.pfc.headroom + FRAME
    # with a bigger headroom the same burst is lossless
    cfg = SwitchConfig()
    cfg.pfc.headroom = 40 * 1024
    sw = switch(cfg)
    feed(sw, 60)
    assert len([x for x in run(sw) if x.port == 1]) == 60 and sw.counters.total("drop") == 0


def test_headroom_is_given_back_first_so_the_next_pause_has_all_of_it() -> None:
    """Issue 12 regression: a lossless PG gives its bytes back headroom first (HPCC ns-3 MMU).
    Released per packet, the headroom frames of the first pause sat at the queue's tail: after
    XON the headroom was still full, and the second XOFF overflowed it at once."""
    tel = Telemetry()
    cfg = SwitchConfig()
    sw = switch(cfg, tel)
    t = feed(sw, 38)  # 38 frames: XOFF after about 31, the last 7 in the headroom
    assert sw.mmu.pg_headroom[0][3] > 0
    while not any(r.quanta == 0 for r in tel.of(PfcSent)):
        deadline = sw.next_deadline()
        assert deadline is not None
        sw.advance(t := deadline)
    assert sw.mmu.pg_headroom[0][3] == 0  # XON: the queue holds shared bytes only
    # a second burst: about 4 frames to the XOFF point again, then 6 late ones into the headroom
    feed(sw, 10, t0=t)
    tx = run(sw)
    assert sw.counters.total("drop") == 0
    assert len([x for x in tx if x.port == 1]) == 48 and sw.mmu.used == 0


def test_xoff_is_refreshed_while_paused_and_pause_holds_the_queue() -> None:
    tel = Telemetry()
    cfg = SwitchConfig()
    cfg.pfc.refresh_ns = 100_000
    cfg.watchdog.enabled = False
    sw = switch(cfg, tel)
    sw.receive(1, pfc_frame(PEER, {3: 0xFFFF}), 0)  # downstream holds our egress TC3
    feed(sw, 36, t0=1)
    sw.advance(1_000_000)
    sent = tel.of(PfcSent)
    assert sent[0].quanta == 0xFFFF and not sent[0].refresh
    assert [r.t - sent[0].t for r in sent[1:]] == [100_000 * k for k in range(1, len(sent))]
    assert all(r.refresh and r.quanta == 0xFFFF for r in sent[1:]) and len(sent) == 10
    assert not [x for x in sw.take_transmissions() if x.port == 1]
    sw.receive(1, pfc_frame(PEER, {3: 0}), 1_000_000)  # downstream resumes
    tx = run(sw)
    assert len([x for x in tx if x.port == 1]) == 36
    assert tel.of(PfcSent)[-1].quanta == 0
    assert sw.ports[1].paused_ns(3, 2_000_000) == 1_000_000


def incast(dscp: int, n_per: int = 60, **topo: object) -> tuple[Fabric, list[tuple[int, int, bytes]]]:
    """8 senders (all hosts of leaves 1 and 2) → host 0 on leaf 0, all at 1 Gb/s: the fabric
    and what it delivered (``poll_timed``)."""
    fab = Fabric(Topology(leaves=3, hosts_per_leaf=4, **topo))  # type: ignore[arg-type]
    for s in range(4, 12):
        f = ipv4_frame(fab.host_ip(s), fab.host_ip(0), bytes(1000), sport=0xC000 + s, dport=4791, dscp=dscp, ecn=2)
        for _ in range(n_per):
            fab.inject(s, f, 0)
    return fab, fab.poll_timed(10**10)


def test_lossless_incast_loses_nothing_and_pause_propagates_upstream() -> None:
    fab, got = incast(26)
    assert len(got) == 8 * 60 and fab.counters.total("drop") == 0
    # the receiver's link stayed busy: completion within 2 % of 480 back-to-back frames
    assert got[-1][0] <= 1.02 * 480 * 8528 + 4 * (8528 + 1000)
    c = fab.counters
    assert c.total("pfc_tx", "leaf0") > 0  # receiver leaf pauses the spines
    assert c.total("pfc_tx", "spine0") + c.total("pfc_tx", "spine1") > 0  # spines pause sender leaves
    # sender leaves pause hosts (which of the two congests first depends on how the flows hash)
    assert c.total("pfc_tx", "leaf1") + c.total("pfc_tx", "leaf2") > 0
    assert sum(c.total("pfc_rx", f"h{h}") for h in range(4, 12)) > 0  # NICs obey
    assert all(sw.mmu.used == 0 for sw in fab.switches.values())
    assert all(not any(sw.mmu.paused[p][3] for p in range(len(sw.ports))) for sw in fab.switches.values())


def test_lossy_incast_drops() -> None:
    fab, got = incast(0)  # same traffic on the lossy data class (RoCE port: never trimmed)
    assert fab.counters.total("drop") > 0
    assert len(got) + fab.counters.total("drop") == 8 * 60
    assert fab.counters.total("pfc_tx") == 0


def test_pfc_frames_can_be_handed_to_hosts() -> None:
    # one spine: the pause reaches the hosts whatever the ECMP hash does with the 8 flows
    fab = Fabric(Topology(leaves=3, spines=1, hosts_per_leaf=4), deliver_pfc=True)
    for s in range(4, 12):
        f = ipv4_frame(fab.host_ip(s), fab.host_ip(0), bytes(1000), sport=s, dport=4791, dscp=26)
        for _ in range(60):
            fab.inject(s, f, 0)
    pauses = [(h, parse_pause(f)) for h, f in fab.poll(10**10) if f[12:14] == b"\x88\x08"]
    assert pauses and all(4 <= h < 12 and p is not None for h, p in pauses)
    assert {q for _, p in pauses if p is not None for q in p.values()} == {0, 0xFFFF}


def test_watchdog_fires_on_a_stuck_pause_and_restores() -> None:
    tel = Telemetry()
    cfg = SwitchConfig()  # watchdog: poll 5 ms, detect 10 ms, restore 10 ms, action drop
    sw = switch(cfg, tel)
    # a faulty downstream NIC: XOFF storm on priority 3, refreshed every 2 ms, for 60 ms
    sw.receive(1, pfc_frame(PEER, {3: 0xFFFF}), 0)
    feed(sw, 10, t0=1)
    for t in range(2 * MS, 60 * MS, 2 * MS):
        sw.receive(1, pfc_frame(PEER, {3: 0xFFFF}), t)
        if t == 16 * MS:
            sw.receive(0, roce(99), t)  # arrives while the watchdog has the queue disabled
    run(sw, 80 * MS)
    ev = tel.of(WatchdogEvent)
    storm = [e for e in ev if e.state == "storm"]
    assert len(storm) == 1  # released for as long as the storm lasts, not re-paused every restore_ns
    assert storm[0].port == 1 and storm[0].tc == 3 and storm[0].action == "drop"
    assert 10 * MS <= storm[0].t <= 20 * MS
    assert storm[0].dropped == 10
    assert sw.counters[("drop", "sw", "watchdog")] == 11  # the queue, then the arrival during restore
    restored = [e for e in ev if e.state == "restored"]
    # restored restore_ns after the last XOFF (58 ms), not restore_ns after the storm was declared
    assert restored and 68 * MS <= restored[0].t <= 68 * MS + cfg.watchdog.poll_ns
    assert sw.counters[("watchdog", "sw", 1, 3)] == 1
    assert sw.counters[("watchdog_ignored", "sw", 1, 3)] >= 20  # the XOFFs it no longer honoured
    assert sw.mmu.used == 0


def test_watchdog_forward_action_ignores_the_pause() -> None:
    cfg = SwitchConfig()
    cfg.watchdog.action = "forward"
    sw = switch(cfg)
    sw.receive(1, pfc_frame(PEER, {3: 0xFFFF}), 0)
    feed(sw, 10, t0=1)
    tx = [x for x in run(sw, 40 * MS) if x.port == 1]
    assert len(tx) == 10 and 10 * MS <= tx[0].start <= 20 * MS
    assert sw.counters.total("drop") == 0


def test_watchdog_quiet_for_short_pauses() -> None:
    sw = switch()
    sw.receive(1, pfc_frame(PEER, {3: 0xFFFF}), 0)
    feed(sw, 10, t0=1)
    sw.receive(1, pfc_frame(PEER, {3: 0}), 3 * MS)
    tx = run(sw)
    assert len([x for x in tx if x.port == 1]) == 10
    assert sw.counters.total("watchdog") == 0 and sw.next_deadline() is None


def test_dynamic_xoff_threshold() -> None:
    cfg = SwitchConfig()
    cfg.pfc.dynamic = True
    cfg.buffer.size = 200 * 1024
    tel = Telemetry()
    sw = switch(cfg, tel)
    feed(sw, 30)
    run(sw)
    xoff = [r for r in tel.of(PfcSent) if r.quanta]
    assert xoff
    # paused when the PG's shared bytes x reached alpha × (shared − x): x ≥ shared / 9, about
    # 20 KB here (plus the 2 KB reserve), well below the static 32 KB
    x = xoff[0].ingress_bytes - FRAME  # one frame fits the 2 KB reserve
    assert sw.mmu.shared_size / 9 <= x < sw.mmu.shared_size / 9 + FRAME
    assert xoff[0].ingress_bytes < cfg.pfc.xoff - 8 * FRAME
    assert sw.counters.total("drop") == 0


def test_xon_on_the_departing_port_never_overlaps_a_frame() -> None:
    """Hairpin: frames leave by the port they came in on, so the XON a departure triggers is
    queued on the busy port itself; it must wait for the link like any frame."""
    sw = Switch("sw", 1, [PortSpec(GBPS)])
    sw.add_route("10.0.1.0/24", [0])
    for k in range(38):
        sw.receive(0, roce(k), k * IN_SER)
    tx = run(sw)
    assert len(tx) == 38 + 2  # the frames, one XOFF and one XON
    assert all(b.start >= a.end for a, b in zip(tx, tx[1:], strict=False))
    assert [parse_pause(x.frame) for x in tx if len(x.frame) == 60] == [{3: 0xFFFF}, {3: 0}]
