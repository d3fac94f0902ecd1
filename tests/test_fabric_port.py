"""Link timing, scheduling between classes and the pause timer (spec §8.1, §8.5, §8.6), in
virtual time with exact nanosecond expectations."""

from __future__ import annotations

from uet.fabric.model import Fabric, PortSpec, Switch, SwitchConfig
from uet.fabric.model.frames import ipv4_frame, pfc_frame
from uet.fabric.model.port import CTRL, MIN_FRAME, WIRE_OVERHEAD, Port
from uet.fabric.topology import Topology

from uet.wire.net import IPV4

GBPS = 1_000_000_000


def data(dscp: int = 0, payload: int = 1000, sport: int = 0xC001, dst: str = "10.0.1.2", dport: int = 4793) -> bytes:
    return ipv4_frame("10.0.0.1", dst, bytes(payload), sport=sport, dport=dport, dscp=dscp, ecn=2)


def ser(nbytes: int, rate: int) -> int:
    """Expected serialisation time: (frame padded to 60 + FCS/preamble/IFG 24) × 8 bits / rate, ceil."""
    bits = (max(nbytes, MIN_FRAME) + WIRE_OVERHEAD) * 8
    return -(-bits * GBPS // rate)


def switch(rate_out: int = GBPS, cfg: SwitchConfig | None = None, delay: int = 1_000) -> Switch:
    sw = Switch("sw", 1, [PortSpec(rate_bps=100 * GBPS, delay_ns=0), PortSpec(rate_bps=rate_out, delay_ns=delay)], cfg)
    sw.add_route("10.0.1.0/24", [1])
    sw.add_route("10.0.0.0/24", [0])
    return sw


def drain(sw: Switch, until: int = 10**12) -> list:
    while (t := sw.next_deadline()) is not None and t <= until:
        sw.advance(t)
    return sw.take_transmissions()


def tc_of(frame: bytes) -> int:
    return SwitchConfig().dscp_map[IPV4.decode(frame, 14).dscp]


def test_serialisation_timing_is_exact() -> None:
    for rate in (GBPS, 25 * GBPS, 3 * GBPS):
        sw = switch(rate)
        sizes = [1042, 60, 50, 1514, 300]
        for n in sizes:
            payload = n - 42
            sw.receive(0, data(payload=max(payload, 0)), 0)
        tx = drain(sw)
        assert [len(t.frame) for t in tx] == [max(n, 42) for n in sizes]
        t = 0
        for x in tx:
            assert x.start == t
            assert x.end == t + ser(len(x.frame), rate)
            assert x.arrival == x.end + 1_000
            t = x.end
    assert ser(1042, GBPS) == 8528 and ser(50, GBPS) == 672


def test_serialisation_from_the_reduced_ratio_is_ceil_of_bits_over_rate() -> None:
    """Ports time frames with 8·10⁹ / rate reduced to ser_num / ser_den (small factors); the
    result is ceil(wire bits × 10⁹ / rate) for any rate, also after the rate changes (a degraded
    link), and a frame's end (Port.start) agrees with Port.ser_ns."""
    rates = [1, 3, 1_000_000_000, 25_000_000_000, 100_000_000_000, 400_000_000_000, 7_777_777_777, 123_456_789]
    for rate in rates:
        port = Port(0, rate, 0)
        for rate2 in (rate, max(1, rate // 3)):
            port.rate_bps = rate2
            assert port.rate_bps == rate2
            for n in (0, 59, 60, 61, 64, 1500, 4096, 9018):
                wire = (max(n, MIN_FRAME) + WIRE_OVERHEAD) * 8
                assert port.ser_ns(n) == -(-wire * 1_000_000_000 // rate2)
                assert port.start(n, 1000) - 1000 == port.ser_ns(n)


def test_frame_arriving_while_busy_waits_for_the_link() -> None:
    sw = switch()
    sw.receive(0, data(), 0)
    sw.receive(0, data(), 5_000)  # link busy until 8528
    sw.receive(0, data(), 20_000)  # link idle again
    tx = drain(sw)
    assert [(x.start, x.end) for x in tx] == [(0, 8528), (8528, 17056), (20_000, 28_528)]


def test_fabric_path_latency_is_exact() -> None:
    """Store-and-forward: same leaf = 2 links, cross leaf = 4 links, each ser + 1 µs; a train of N
    equal frames pipelines so the last one lands (N − 1) × ser later."""
    fab = Fabric("default")
    s = ser(1042, GBPS)
    f_local = ipv4_frame(fab.host_ip(0), fab.host_ip(1), bytes(1000))
    fab.inject(0, f_local, 1_000_000)
    assert fab.poll_timed(1_500_000)[0][0] == 1_000_000 + 2 * (s + 1_000)
    n = 10
    for _ in range(n):
        fab.inject(0, ipv4_frame(fab.host_ip(0), fab.host_ip(5), bytes(1000)), 2_000_000)
    got = fab.poll_timed(10**9)
    assert [h for _, h, _ in got] == [5] * n
    assert [t for t, _, _ in got] == [2_000_000 + 4 * (s + 1_000) + k * s for k in range(n)]
    # TTL decremented once per switch hop (3 switches), IP checksum valid, MACs rewritten
    ip = IPV4.decode(got[0][2], 14)
    assert ip.ttl == 61
    assert got[0][2][:6] == fab.host_mac(5) and got[0][2][6:12] == fab.gateway_mac(5)


def test_strict_priority_then_dwrr_alternation() -> None:
    big = 1472  # 1514-byte frames: one per DWRR quantum (one maximum frame, 1518)
    sw = switch()
    sw.receive(0, data(0, sport=1), 0)  # occupies the link from t = 0 and empties TC0
    for k in range(6):
        sw.receive(0, data(0, payload=big, sport=10 + k), 1)
        sw.receive(0, data(26, payload=big, sport=20 + k, dport=4791), 1)
    for k in range(2):
        sw.receive(0, data(46, payload=100, sport=30 + k), 1)
        sw.receive(0, data(7, payload=100, sport=40 + k), 1)
    order = [tc_of(x.frame) for x in drain(sw)[1:]]
    assert order[:4] == [7, 7, 6, 6]
    # DWRR TC3 : TC0 = 1 : 1; the round continues after TC0, which just emptied, so TC3 leads
    assert order[4:] == [3, 0] * 6


def test_dwrr_deficit_carries_over_and_evens_bytes() -> None:
    """Frames smaller than the quantum: the unused deficit carries to the next turn (so a queue
    sometimes sends two in a row), and the byte shares stay within one frame of each other."""
    sw = switch()
    sw.receive(0, data(0, sport=1), 0)
    for k in range(30):
        sw.receive(0, data(0, sport=10 + k), 1)
        sw.receive(0, data(26, sport=100 + k, dport=4791), 1)
    order = [tc_of(x.frame) for x in drain(sw)[1:]]
    assert order[:6] == [3, 0, 3, 0, 3, 3]
    for i in range(len(order)):
        assert abs(order[:i].count(0) - order[:i].count(3)) <= 2


def test_dwrr_weights_share_bytes() -> None:
    cfg = SwitchConfig()
    cfg.tcs[3].weight = 2
    sw = switch(cfg=cfg)
    sw.receive(0, data(0, sport=1), 0)
    for k in range(20):
        sw.receive(0, data(0, payload=1472, sport=100 + k), 1)
        sw.receive(0, data(26, payload=1472, sport=200 + k, dport=4791), 1)
    tx = drain(sw)[1:]
    assert [tc_of(x.frame) for x in tx[:30]] == [3, 3, 0] * 10


def test_strict_budget_lets_dwrr_through() -> None:
    cfg = SwitchConfig(strict_budget=1)
    sw = switch(cfg=cfg)
    sw.receive(0, data(0, sport=1), 0)
    for k in range(3):
        sw.receive(0, data(7, sport=40 + k), 1)
        sw.receive(0, data(0, sport=50 + k), 1)
    order = [tc_of(x.frame) for x in drain(sw)[1:]]
    assert order == [7, 0, 7, 0, 7, 0]


def test_received_pause_stops_only_its_class_for_the_quanta() -> None:
    sw = switch()
    peer = bytes.fromhex("020000000099")
    sw.receive(1, pfc_frame(peer, {3: 100}), 0)  # 100 quanta × 512 ns at 1 Gb/s = 51.2 µs
    for k in range(3):
        sw.receive(0, data(26, sport=k, dport=4791), 10)
    sw.receive(0, data(0, sport=9), 10)
    tx = drain(sw)
    assert [tc_of(x.frame) for x in tx] == [0, 3, 3, 3]
    assert tx[0].start == 10
    assert tx[1].start == 51_200  # resumes exactly when the pause runs out
    assert sw.ports[1].paused_ns(3, 10**9) == 51_200
    # a second pause, cancelled early by XON (0 quanta)
    t0 = 20_000_000  # after the watchdog poll the first pause armed (5 ms) has run
    sw.receive(1, pfc_frame(peer, {3: 0xFFFF}), t0)
    sw.receive(0, data(26, sport=7, dport=4791), t0)
    sw.advance(t0 + 50_000)
    assert sw.take_transmissions() == []
    sw.receive(1, pfc_frame(peer, {3: 0}), t0 + 60_000)
    tx = drain(sw)
    assert [x.start for x in tx] == [t0 + 60_000]
    assert sw.counters[("pfc_rx", "sw", 1, 3, "xoff")] == 2 and sw.counters[("pfc_rx", "sw", 1, 3, "xon")] == 1


def test_ttl_and_routing_drops_are_counted() -> None:
    sw = switch()
    sw.receive(0, ipv4_frame("10.0.0.1", "10.0.1.2", b"x", ttl=1), 0)
    sw.receive(0, ipv4_frame("10.0.0.1", "192.168.0.1", b"x"), 0)
    sw.receive(0, b"\0" * 12 + b"\x86\xdd" + bytes(60), 0)
    assert drain(sw) == []
    c = sw.counters
    assert (c[("drop", "sw", "ttl_expired")], c[("drop", "sw", "no_route")], c[("drop", "sw", "not_ipv4")]) == (1, 1, 1)


def test_topology_builtins_reach_every_host() -> None:
    for name in ("default", "lab", "rail", "three_tier"):
        fab = Fabric(name)
        n = len(fab.hosts)
        for src in range(n):
            dst = (src * 7 + 3) % n
            if dst == src:
                dst = (src + 1) % n
            fab.inject(src, ipv4_frame(fab.host_ip(src), fab.host_ip(dst), bytes(100), sport=src), 0)
        got = fab.poll(10**9)
        assert sorted(h for h, _ in got) == sorted(
            ((s * 7 + 3) % n if (s * 7 + 3) % n != s else (s + 1) % n) for s in range(n)
        )
        assert fab.counters.total("drop") == 0
    assert len(Fabric("lab").hosts) == 8 and len(Fabric("default").hosts) == 8
    assert Topology.builtin("three_tier").plan().switches[-1].name == "ss1"


def test_fixed_switching_latency_and_oversize_drop() -> None:
    sw = Switch("sw", 1, [PortSpec(GBPS), PortSpec(GBPS)], SwitchConfig(latency_ns=500))
    sw.add_route("10.0.1.0/24", [1])
    sw.receive(0, data(), 1_000)
    sw.receive(0, data(payload=1473), 2_000)  # 1515 bytes: over MTU 1500 + 14, under 1518 (tagged)
    sw.receive(0, data(payload=1477), 3_000)  # 1519 bytes: longer than any 1500-MTU frame
    tx = drain(sw)
    assert [(x.start, len(x.frame)) for x in tx] == [(1_500, 1042), (1_500 + ser(1042, GBPS), 1515)]
    assert sw.counters[("drop", "sw", "oversize")] == 1


def test_headroom_formula() -> None:
    from uet.fabric.model.config import headroom_bytes

    assert headroom_bytes(GBPS, 1_000, 1086) == 4 * 1086  # §8.9: "the §8.5 formula gives ≈ 3.6 KB"
    # 100 Gb/s: 25 000 B in 2 µs + PFC frame 84 + one frame 1110 + 2 × 1086 = 28 366 → 27 frames
    assert headroom_bytes(100 * GBPS, 1_000, 1086) == 27 * 1086


def test_pcp_classification_when_trusted() -> None:
    f = data(0)
    tagged = f[:12] + b"\x81\x00" + bytes((3 << 5, 1)) + f[12:]  # PCP 3, VID 1, DSCP 0
    for trust, tc in ((False, 0), (True, 3)):
        sw = switch(cfg=SwitchConfig(trust_pcp=trust))
        sw.receive(0, data(0), 0)  # keeps the link busy so the tagged frame stays queued
        sw.receive(0, tagged, 1)
        assert sw.ports[1].qbytes[tc] == len(tagged)
        assert sw.ingress_bytes(0, tc) == len(tagged)
        tx = drain(sw)
        assert tx[1].frame[12:16] == tagged[12:16] and IPV4.decode(tx[1].frame, 18).ttl == 63


def test_pick_alone_leaves_the_scheduler_as_pick_does() -> None:
    """A packet alone at an idle port leaves without entering its queue (Switch._enqueue): the
    scheduler's state must then be what pushing it and Port.pick would have left, from any state
    (round-robin position, fresh turn, deficits, strict run) and for every class."""
    import random

    from uet.fabric.model.port import Packet, Port

    rng = random.Random(7)

    def state(p: Port) -> tuple[object, ...]:
        return (p._rr, p._fresh, list(p.deficit), p._strict_run)

    for strict in ((7, 6), (7,), ()):
        for _ in range(40):
            weights = {tc: rng.randint(1, 4) for tc in range(8)}
            budget = rng.choice((None, 0, 3000))
            a, b = (Port(0, GBPS, 0, strict=strict, weights=weights, strict_budget=budget) for _ in range(2))
            rr, fresh, run = rng.randrange(len(a.dwrr)), rng.random() < 0.5, rng.randrange(5000)
            deficit = [rng.randrange(3 * a.max_frame) for _ in range(8)]
            for p in (a, b):
                p._rr, p._fresh, p._strict_run, p.deficit = rr, fresh, run, list(deficit)
            tc = rng.randrange(8)
            size = rng.randint(60, 1500)
            a.push(Packet(bytearray(size), 0, tc, 14, 0))
            assert a.pick(0) == tc
            b.pick_alone(tc, size)
            assert state(a) == state(b), (strict, tc)


def test_dwrr_positions_are_the_round_robin_order() -> None:
    """Issue 28: Port.dwrr_pos (read by _dwrr_pick instead of ``dwrr.index``) is each DWRR
    class's place in the round robin's order and -1 for a strict class; a class served alone
    leaves the round robin past itself when it sent its last packet, on itself otherwise."""
    from uet.fabric.model.port import Packet

    for strict in ((7, 6), (7,), (), (5, 2)):
        p = Port(0, GBPS, 0, strict=strict)
        assert p.dwrr_pos == tuple(p.dwrr.index(tc) if tc in p.dwrr else -1 for tc in range(8))
        for tc in p.dwrr:
            for queued in (1, 2):
                q = Port(0, GBPS, 0, strict=strict)
                for _ in range(queued):
                    q.push(Packet(bytearray(100), 0, tc, 14, 0))
                assert q.pick(0) == tc
                i = q.dwrr.index(tc)
                assert q._rr == ((i + 1) % len(q.dwrr) if queued == 1 else i)


def test_a_port_keeps_no_queue_for_a_class_it_never_used() -> None:
    """Issue 28 (memory): the queues of unused classes and the PFC queue of a port that sent no
    PFC are one shared empty deque, which refuses to grow; a class's first packet gives the port
    its own queue."""
    import pytest
    from uet.fabric.model.config import FabricError
    from uet.fabric.model.emptyqueue import UNUSED
    from uet.fabric.model.port import Packet, Port

    p, q = Port(0, GBPS, 0), Port(1, GBPS, 0)
    assert all(a is UNUSED and b is UNUSED for a, b in zip(p.queues, q.queues, strict=True))
    assert p.ctrl is UNUSED and q.ctrl is UNUSED
    for grow in (UNUSED.append, UNUSED.appendleft, UNUSED.extend, UNUSED.extendleft):
        with pytest.raises(FabricError):
            grow([1])
    p.push(Packet(bytearray(100), 0, 3, 14, 0))
    p.send_ctrl(bytes(60))
    assert len(p.queues[3]) == 1 and len(p.ctrl) == 1
    assert not UNUSED and q.queues[3] is UNUSED and q.ctrl is UNUSED
    assert p.pick(0) == CTRL and p.pop(3).size == 100


def test_bytes_per_class_count_every_frame_of_interleaved_classes() -> None:
    """Issue 28: a port counts the bytes of its running class apart (Port.count_tc) and adds
    them to the per-class list when another class sends; ``tx_tc_bytes`` is always the whole
    count, whatever the order of the classes and wherever it is read."""
    import random

    rng = random.Random(3)
    p = Port(0, GBPS, 0)
    want = [0] * 8
    assert p.tx_tc_bytes == want
    for _ in range(500):
        tc = rng.choice((0, 0, 0, 3, 7))
        n = rng.randint(60, 4200)
        p.count_tc(tc, n)
        want[tc] += n
        if rng.random() < 0.1:
            assert p.tx_tc_bytes == want
    assert p.tx_tc_bytes == want
    p.tx_tc_bytes[0] += 1  # a copy: the count itself is not changed through it
    assert p.tx_tc_bytes == want


def test_the_switch_counts_bytes_per_class_of_interleaved_classes() -> None:
    """The data path's inlined count (Switch._kick) gives the per-class bytes that were sent."""
    cfg = SwitchConfig()
    sw = switch(cfg=cfg)
    frames = [data(dscp=d, payload=p) for d, p in ((0, 1000), (0, 500), (26, 700), (0, 300), (26, 64), (46, 90))]
    for i, f in enumerate(frames):
        sw.receive(0, f, i * 10)
    sent = drain(sw)
    want = [0] * 8
    for f in frames:
        want[tc_of(f)] += len(f)
    assert len(sent) == len(frames) and sw.ports[1].tx_tc_bytes == want


def test_pause_high_water_mark_says_when_no_class_is_paused() -> None:
    """Issue 28: ``Port.pause_hi``, the latest end of any pause, lets the data path skip the
    per-class pause list when no class can be paused; a pause still stops only its class until
    it ends, and an XON (0 quanta) ends it at once."""
    from uet.fabric.model.port import Packet

    p = Port(0, GBPS, 0)
    assert p.pause_hi == 0
    p.apply_pause(3, 100, 1_000)
    until = p.paused_until[3]
    assert p.pause_hi == until > 1_000
    p.push(Packet(bytearray(100), 0, 3, 14, 0))
    assert p.pick(1_000) is None and p.pick(until) == 3
    p.apply_pause(3, 0, 2_000)  # XON: the class resumes; the mark only ever grows
    assert p.paused_until[3] == 2_000 and p.pause_hi == until
    assert p.pick(2_000) == 3


def test_ingress_reads_untagged_and_tagged_headers_alike() -> None:
    """Issue 28: ingress reads an untagged IPv4 frame's header fields in one unpack and a tagged
    one byte by byte; both give the same verdict for a good frame, another IP version, a header
    shorter than 20 bytes, a total length beyond the frame, an expiring TTL and no route."""

    def edit(f: bytes, **kw: int) -> bytearray:
        b = bytearray(f)
        for off, v in kw.items():
            b[14 + int(off[1:])] = v
        return b

    good = data()
    cases = {
        "forwarded": bytearray(good),
        "not_ipv4": edit(good, o0=0x65),
        "malformed": edit(good, o0=0x44),
        "malformed_len": edit(good, o2=0xFF),
        "ttl_expired": edit(good, o8=1),
        "no_route": edit(good, o16=11),
    }
    for tagged in (False, True):
        for name, f in cases.items():
            sw = switch()
            frame = f[:12] + bytes((0x81, 0, 0, 0)) + f[12:] if tagged else f
            sw.receive(0, bytes(frame), 0)
            sent = drain(sw)
            reason = name.split("_len")[0]
            drops = {k[2]: v for k, v in sw.counters.items() if k[0] == "drop"}
            if name == "forwarded":
                assert len(sent) == 1 and not drops, tagged
            else:
                assert not sent and drops == {reason: 1}, (name, tagged, drops)
