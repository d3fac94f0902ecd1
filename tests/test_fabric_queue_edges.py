"""The switch's egress queues at their edges (uet.fabric.model.switch ``_enqueue``/``_trim``/``_push``
and the ECN decision at dequeue; issue 30 item 9): a frame for a failed link, lossless admission and
its XOFF, the buffer and queue accounting returning to zero after trims and WRED drops, the
averaged queue of classic WRED, queue-depth sampling, every mark reported, and the random draws
made only where the marking probability lies strictly between 0 and 1."""

from __future__ import annotations

import random

from test_fabric_pfc import roce
from test_fabric_pfc import switch as lossless_switch
from test_fabric_trim import switch as trim_switch
from test_fabric_trim import uet_frame
from uet.fabric.model import EcnConfig, PortSpec, Switch, SwitchConfig, Telemetry
from uet.fabric.model.buffer import Mmu
from uet.fabric.model.frames import ipv4_frame
from uet.fabric.model.port import Packet
from uet.fabric.model.telemetry import EcnMarked, PfcSent, QueueDepth

from uet.wire.net import IPV4, Ecn

GBPS = 1_000_000_000
FRAME = 1042  # ipv4_frame with a 1000-byte payload


def run(sw: Switch) -> list:
    while (t := sw.next_deadline()) is not None:
        sw.advance(t)
    return sw.take_transmissions()


def frame(k: int, ecn: int = Ecn.ECT0) -> bytes:
    return ipv4_frame("10.0.0.1", "10.0.1.2", bytes(1000), sport=k, ecn=ecn)


def marking(ecn: EcnConfig, telemetry: Telemetry | None = None, sample_ns: int | None = None) -> Switch:
    cfg = SwitchConfig()
    cfg.tcs[0].ecn = ecn
    cfg.tcs[0].limit = 200 * 1024
    cfg.tcs[0].dynamic = False
    cfg.buffer.size = 4 * 1024 * 1024
    if sample_ns is not None:
        cfg.sample_ns = sample_ns
    sw = Switch("sw", 1, [PortSpec(100 * GBPS), PortSpec(GBPS)], cfg, seed=5, telemetry=telemetry)
    sw.add_route("10.0.1.0/24", [1])
    return sw


def drained(sw: Switch) -> None:
    """Every queue, backlog count and buffer charge is back at zero."""
    for p in sw.ports:
        assert p.backlog == 0 and not any(p.qbytes) and not any(p.queues), p.index
    assert (sw.mmu.used, sw.mmu.shared_used) == (0, 0)


def test_a_frame_for_a_failed_link_is_lost_and_counted_not_queued() -> None:
    sw = trim_switch()
    sw.port_down(1, 0)
    sw.receive(0, uet_frame(1), 10)
    assert run(sw) == []
    assert sw.counters[("drop", "sw", "link_down")] == 1
    assert sw.counters[("lost_bytes", "sw")] == len(uet_frame(1))
    drained(sw)


def test_a_lossless_burst_is_admitted_sends_one_xoff_then_xon_and_drains() -> None:
    tel = Telemetry()
    sw = lossless_switch(SwitchConfig(), tel)
    for k in range(38):  # back to back at 10 Gb/s into a 1 Gb/s port: XOFF after about 31
        sw.receive(0, roce(k), k * 853)
    tx = run(sw)
    assert sum(len(x.frame) == FRAME for x in tx) == 38 and sw.counters.total("drop") == 0
    sent = tel.of(PfcSent)
    assert sent[0].quanta == 0xFFFF and not sent[0].refresh and sent[0].port == 0
    assert sent[-1].quanta == 0  # XON once it drained
    drained(sw)


def test_trimmed_headers_are_charged_and_given_back() -> None:
    sw = trim_switch()
    for psn in range(40):
        sw.receive(0, uet_frame(psn), 0)
    tx = run(sw)
    assert len(tx) == 40 and sw.counters[("trim", "sw", 1)] == 10
    assert sw.mmu.peak_used > 0
    drained(sw)


def test_wred_drops_give_their_buffer_back() -> None:
    sw = marking(EcnConfig(kmin=0, kmax=1, pmax=1.0, wred_drop=True))
    for k in range(10):
        sw.receive(0, frame(k, ecn=0), 0)
    assert len(run(sw)) == 2 and sw.counters[("drop", "sw", "wred")] == 8
    drained(sw)


def test_the_averaged_queue_follows_its_formula() -> None:
    """weight_shift 1: avg ← avg/2 + q/2 at each arrival, q the queue with the arrival in it."""
    sw = marking(EcnConfig(kmin=10**9, kmax=2 * 10**9, weight_shift=1))
    sw.receive(0, frame(1), 0)
    run(sw)
    assert sw.ports[1].avg_q[0] == FRAME / 2
    sw.receive(0, frame(2), 10**6)
    run(sw)
    assert sw.ports[1].avg_q[0] == FRAME / 2 / 2 + FRAME / 2
    drained(sw)


def test_queue_depth_is_sampled_on_change_at_most_once_per_interval() -> None:
    tel = Telemetry(kinds={"queue_depth"})
    sw = marking(EcnConfig(kmin=10**9, kmax=2 * 10**9), telemetry=tel, sample_ns=20_000)
    for k in range(4):  # 4 frames at once: the 1 Gb/s port serialises each in 8,528 ns
        sw.receive(0, frame(k), 0)
    run(sw)
    sw.receive(0, frame(9), 100_000)
    run(sw)
    got = [(r.t, r.bytes) for r in tel.of(QueueDepth) if r.port == 1 and r.tc == 0]
    # at 0 the first push; the others within 20 µs are not sampled until one 20 µs later, and
    # always when the queue drains; a lone frame much later is sampled again
    assert got[0] == (0, FRAME)
    assert all(b - a >= 20_000 or y == 0 for (a, _x), (b, y) in zip(got, got[1:], strict=False)), got
    assert got[-1][1] == 0 and any(t >= 100_000 for t, _ in got)
    assert len(got) < 2 * 5


def test_every_mark_is_reported_with_the_queue_it_saw() -> None:
    tel = Telemetry(kinds={"ecn_mark"})
    sw = marking(EcnConfig(kmin=0, kmax=1, pmax=1.0), telemetry=tel)
    for k in range(6):
        sw.receive(0, frame(k), 0)
    tx = run(sw)
    marks = tel.of(EcnMarked)
    assert len(marks) == sw.counters[("mark", "sw", 1, 0)] == 4  # the first and last see no queue
    assert [m.qbytes for m in marks] == [4 * FRAME, 3 * FRAME, 2 * FRAME, FRAME]
    assert sum(IPV4.decode(x.frame, 14).ecn == Ecn.CE for x in tx) == 4


class CountingRandom(random.Random):
    """A seeded random source that counts its draws."""

    draws = 0

    def random(self) -> float:
        self.draws += 1
        return super().random()


def test_the_switch_draws_only_where_marking_is_uncertain() -> None:
    """A queue at or below kmin is never marked and one above kmax always is: neither draws, so
    a run's marks depend on the seed only where the probability is strictly between 0 and 1."""
    sw = marking(EcnConfig(kmin=2 * FRAME, kmax=5 * FRAME, pmax=0.5))
    sw.rng = CountingRandom(3)
    for k in range(10):
        sw.receive(0, frame(k), 0)
    tx = run(sw)
    assert len(tx) == 10
    # departures see queues of 8, 7, ..., 1, 0 frames behind them (the first: 0)
    seen = [0, *range(8, -1, -1)]
    assert sw.rng.draws == sum(2 * FRAME < q * FRAME <= 5 * FRAME for q in seen) == 3
    ce = [IPV4.decode(x.frame, 14).ecn == Ecn.CE for x in tx]
    assert ce[1:4] == [True, True, True]  # above kmax: always
    assert not any(ce[i] for i, q in enumerate(seen) if q <= 2)


# -- lossy admission (uet.fabric.model.buffer.Mmu) --------------------------------------------------------


def pkt(size: int, in_port: int = 0, tc: int = 0) -> Packet:
    return Packet(bytearray(size), in_port, tc, 14, 0)


def mmu(limit: int | None = None, dynamic: bool = False, size: int = 512 * 1024) -> Mmu:
    cfg = SwitchConfig()
    cfg.tcs[0].limit, cfg.tcs[0].dynamic = limit, dynamic
    cfg.buffer.size = size
    return Mmu(cfg, 2)


def test_the_static_queue_limit_admits_up_to_it_exactly() -> None:
    m = mmu(limit=3000)
    assert m.lossy_limit(0) == (3000, None)
    assert m.admit_lossy(pkt(1000), 2000) == ""  # 2000 + 1000 = the limit: in
    assert m.admit_lossy(pkt(1001), 2000) == "queue_limit"
    assert (m.used, m.shared_used, m.ingress[0][0]) == (1000, 1000, 1000)


def test_the_dynamic_threshold_is_alpha_times_the_free_shared_buffer() -> None:
    m = mmu(dynamic=True)
    free = m.shared_size
    want = int(m.cfg.buffer.alpha * free)
    assert m.lossy_limit(0) == (None, want)
    assert m.admit_lossy(pkt(1000), want - 1000) == ""  # exactly at the threshold: in
    assert m.lossy_limit(0) == (None, int(m.cfg.buffer.alpha * (free - 1000)))
    assert m.admit_lossy(pkt(1000), int(m.cfg.buffer.alpha * (free - 1000)) - 999) == "dynamic_threshold"
    assert m.used == 1000


def test_the_shared_buffer_fills_exactly_then_refuses_and_tracks_its_peak() -> None:
    m = mmu(size=64 * 1024)
    shared = m.shared_size
    p = pkt(shared - 100, in_port=1)
    assert m.admit_lossy(p, 0) == "" and p.pool == "shared"
    assert (m.used, m.peak_used, m.shared_used, m.ingress[1][0]) == (
        shared - 100,
        shared - 100,
        shared - 100,
        shared - 100,
    )
    assert m.admit_lossy(pkt(101), 0) == "buffer_full"
    q = pkt(100)
    assert m.admit_lossy(q, 0) == "" and m.shared_used == shared == m.used == m.peak_used
    m.release(q)
    m.release(p)
    assert (m.used, m.shared_used, m.peak_used) == (0, 0, shared)
    assert m.admit_lossy(pkt(10), 0) == "" and m.peak_used == shared  # the peak stays


def test_the_marking_probability_is_zero_up_to_kmin() -> None:
    ecn = EcnConfig(kmin=1000, kmax=3000, pmax=0.5)
    assert ecn.probability(0) == ecn.probability(1000) == 0.0
    assert ecn.probability(2000) == 0.25 and ecn.probability(3000) == 0.5 and ecn.probability(3001) == 1.0


class FixedRandom(random.Random):
    """A random source whose every draw is ``value``."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


def test_a_draw_equal_to_the_probability_does_not_mark() -> None:
    """Marking with probability p takes the draws in [0, p): a draw of exactly p leaves the packet
    alone, one just below marks it."""
    for draw, marked in ((0.25, False), (0.2499, True)):
        sw = marking(EcnConfig(kmin=0, kmax=4 * FRAME, pmax=1.0))
        sw.rng = FixedRandom(draw)
        for k in range(3):  # departures see 0, then one frame (p = 0.25), then 0
            sw.receive(0, frame(k), 0)
        ce = [IPV4.decode(x.frame, 14).ecn == Ecn.CE for x in run(sw)]
        assert ce == [False, marked, False], draw


def test_a_queue_is_sampled_again_exactly_one_interval_later() -> None:
    tel = Telemetry(kinds={"queue_depth"})
    sw = marking(EcnConfig(kmin=10**9, kmax=2 * 10**9), telemetry=tel, sample_ns=20_000)
    for k in range(4):
        sw.receive(0, frame(k), 0)
    sw.receive(0, frame(9), 20_000)  # the queue still holds frames: due again at exactly 20 µs
    run(sw)
    got = [(r.t, r.bytes) for r in tel.of(QueueDepth) if r.port == 1 and r.tc == 0]
    assert got[:3] == [(0, FRAME), (0, 0), (20_000, 2 * FRAME)], got  # (the first left at once)


def test_the_switch_admits_a_lossy_packet_as_mmu_admit_lossy_does() -> None:
    """Switch._enqueue inlines Mmu.admit_lossy (once per packet per hop): through a static limit,
    the dynamic threshold and a full shared buffer, its decision and the buffer state after it
    are the ones the Mmu's own rule gives from the same state."""
    rng = random.Random(3)
    for limit, dynamic, size in ((6000, False, 512 * 1024), (None, True, 64 * 1024), (None, False, 40 * 1024)):
        cfg = SwitchConfig()
        cfg.tcs[0].limit, cfg.tcs[0].dynamic = limit, dynamic
        cfg.buffer.size = size
        cfg.trim.enabled = False
        sw = Switch("sw", 1, [PortSpec(rate_bps=100 * GBPS, delay_ns=0), PortSpec(rate_bps=GBPS)], cfg)
        sw.add_route("10.0.1.0/24", [1])
        reasons = set()
        for k in range(120):
            f = ipv4_frame("10.0.0.1", "10.0.1.2", bytes(rng.randint(20, 1450)), dport=9)
            pkt = Packet(bytearray(f), 0, 0, 14, 0)
            shadow = Mmu(cfg, 2)  # the switch's buffer state, for the Mmu's own rule
            m = sw.mmu
            shadow.used, shadow.shared_used, shadow.peak_used = m.used, m.shared_used, m.peak_used
            shadow.ingress = [list(row) for row in m.ingress]
            want = shadow.admit_lossy(Packet(bytearray(f), 0, 0, 14, 0), sw.ports[1].qbytes[0])
            drops = sw.counters.total("drop")
            sw._enqueue(pkt, 1, k)  # the port stays busy: every packet after the first is queued
            if want:
                reasons.add(want)
                assert sw.counters[("drop", "sw", want)] and sw.counters.total("drop") == drops + 1
            else:
                assert sw.counters.total("drop") == drops
                if k:  # the first leaves at once: its charge is given back as it starts
                    assert pkt.pool == "shared"
                    assert (m.used, m.shared_used, m.peak_used, m.ingress) == (
                        shadow.used,
                        shadow.shared_used,
                        shadow.peak_used,
                        shadow.ingress,
                    )
        assert reasons, (limit, dynamic, size)


def test_a_packet_leaving_an_idle_port_at_once_is_seen_by_the_peak_only() -> None:
    """A lossy packet that finds its port idle and empty leaves at once (Switch._enqueue): its
    charge and its release fall in one instant, so the buffer is empty after it and only the
    peak shows it; a second packet behind it is charged until it leaves."""
    sw = Switch("sw", 1, [PortSpec(rate_bps=100 * GBPS, delay_ns=0), PortSpec(rate_bps=GBPS)])
    sw.add_route("10.0.1.0/24", [1])
    f = ipv4_frame("10.0.0.1", "10.0.1.2", bytes(1000), dport=9)
    sw.receive(0, f, 0)
    m = sw.mmu
    assert (m.used, m.shared_used, m.peak_used, m.ingress[0][0]) == (0, 0, len(f), 0)
    sw.receive(0, f, 1)  # the link is busy: queued and charged
    assert (m.used, m.shared_used, m.peak_used, m.ingress[0][0]) == (len(f), len(f), len(f), len(f))
    assert len(run(sw)) == 2
    assert (m.used, m.shared_used, m.peak_used, m.ingress[0][0]) == (0, 0, len(f), 0)
