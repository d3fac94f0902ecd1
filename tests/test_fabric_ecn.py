"""WRED/ECN marking at dequeue on the instantaneous queue (spec rocev2-and-fabric.md §8.2)."""

from __future__ import annotations

import math
from functools import cache

from uet.fabric.model import EcnConfig, PortSpec, Switch, SwitchConfig
from uet.fabric.model.frames import ipv4_checksum_ok, ipv4_frame
from uet.fabric.model.port import Marking

from uet.wire.net import IPV4, Ecn

GBPS = 1_000_000_000
FRAME = 1042  # ipv4_frame with a 1000-byte payload


def marking_switch(ecn: EcnConfig, seed: int = 1) -> Switch:
    cfg = SwitchConfig()
    cfg.tcs[0].ecn = ecn
    cfg.tcs[0].limit = 200 * 1024
    cfg.tcs[0].dynamic = False
    cfg.buffer.size = 4 * 1024 * 1024
    sw = Switch("sw", 1, [PortSpec(100 * GBPS), PortSpec(GBPS)], cfg, seed=seed)
    sw.add_route("10.0.1.0/24", [1])
    return sw


@cache
def frame(k: int, ecn: int, dscp: int) -> bytes:
    return ipv4_frame("10.0.0.1", "10.0.1.2", bytes(1000), sport=k, dscp=dscp, ecn=ecn)


def burst(sw: Switch, t: int, n: int, ecn: int = Ecn.ECT0, dscp: int = 0) -> list:
    """n frames arriving together at t: the first leaves at once (queue 0), then the i-th leaves a
    queue of (n − 1 − i) frames behind it. Returns the transmissions with the queue each saw."""
    for k in range(n):
        sw.receive(0, frame(k, ecn, dscp), t)
    while (d := sw.next_deadline()) is not None:
        sw.advance(d)
    tx = sw.take_transmissions()
    assert len(tx) == n
    return [(0 if i == 0 else (n - 1 - i) * FRAME, x.frame) for i, x in enumerate(tx)]


def test_mark_fraction_follows_thresholds() -> None:
    ecn = EcnConfig(kmin=10 * 1024, kmax=40 * 1024, pmax=0.5)
    sw = marking_switch(ecn, seed=7)
    samples = []
    for b in range(50):
        samples += burst(sw, b * 1_000_000, 60)
    below = [f for q, f in samples if q <= ecn.kmin]
    above = [f for q, f in samples if q > ecn.kmax]
    middle = [(q, f) for q, f in samples if ecn.kmin < q <= ecn.kmax]
    marked = lambda f: IPV4.decode(f, 14).ecn == Ecn.CE  # noqa: E731
    assert below and not any(marked(f) for f in below)
    assert above and all(marked(f) for f in above)
    # linear region, in three bands: observed fraction within 4 sigma of the expected mean
    middle.sort(key=lambda x: x[0])
    third = len(middle) // 3
    for band in (middle[:third], middle[third : 2 * third], middle[2 * third :]):
        ps = [ecn.probability(q) for q, _ in band]
        expected = sum(ps)
        sigma = math.sqrt(sum(p * (1 - p) for p in ps))
        observed = sum(marked(f) for _, f in band)
        assert abs(observed - expected) <= 4 * sigma + 1, (observed, expected, sigma)
    # the bands differ: marking grows with the queue
    fr = [sum(marked(f) for _, f in band) / len(band) for band in (middle[:third], middle[2 * third :])]
    assert fr[1] > fr[0] + 0.1
    assert all(ipv4_checksum_ok(f, 14) for _, f in samples)
    assert sw.counters[("mark", "sw", 1, 0)] == sum(marked(f) for _, f in samples)


def test_probability_function() -> None:
    e = EcnConfig(kmin=4096, kmax=20480, pmax=0.2)
    assert e.probability(4096) == 0.0
    assert e.probability(12288) == 0.1
    assert e.probability(20480) == 0.2
    assert e.probability(20481) == 1.0


def test_port_marking_is_the_configured_rule() -> None:
    """The port's copy of a class's ECN settings (Port.ecn, read per departing packet) gives the
    probability EcnConfig gives, for queues in bytes and averaged queues alike."""
    for ecn in (EcnConfig(), EcnConfig(kmin=1000, kmax=3000, pmax=0.5), EcnConfig(kmin=7, kmax=90_001, pmax=1)):
        m = Marking(ecn)
        assert (m.kmin, m.kmax, m.wred_drop, m.weight_shift, m.last_hop) == (
            ecn.kmin,
            ecn.kmax,
            ecn.wred_drop,
            ecn.weight_shift,
            ecn.last_hop,
        )
        for q in [*range(0, 100_000, 97), ecn.kmin, ecn.kmax, ecn.kmax + 1, 1234.5678, 2999.999]:
            assert m.probability(q) == ecn.probability(q)


def test_not_ect_is_never_marked_and_ce_stays_ce() -> None:
    ecn = EcnConfig(kmin=0, kmax=1, pmax=1.0)
    sw = marking_switch(ecn)
    for _, f in burst(sw, 0, 10, ecn=Ecn.NOT_ECT):
        assert IPV4.decode(f, 14).ecn == Ecn.NOT_ECT
    out = burst(sw, 10**6, 10, ecn=Ecn.ECT1)
    assert [IPV4.decode(f, 14).ecn for _, f in out] == [Ecn.ECT1] + [Ecn.CE] * 8 + [Ecn.ECT1]
    for _, f in burst(sw, 2 * 10**6, 10, ecn=Ecn.CE):
        assert IPV4.decode(f, 14).ecn == Ecn.CE
    assert sw.counters[("mark", "sw", 1, 0)] == 8  # only ECT → CE transitions count


def test_wred_drop_of_not_ect_and_no_marking_on_control_class() -> None:
    ecn = EcnConfig(kmin=0, kmax=1, pmax=1.0, wred_drop=True)
    sw = marking_switch(ecn)
    for k in range(10):
        sw.receive(0, ipv4_frame("10.0.0.1", "10.0.1.2", bytes(1000), sport=k, ecn=0), 0)
    while (d := sw.next_deadline()) is not None:
        sw.advance(d)
    # first leaves an empty queue behind it; the next 8 see q > kmax and are dropped; the last sees 0
    assert len(sw.take_transmissions()) == 2
    assert sw.counters[("drop", "sw", "wred")] == 8
    # TC6 (DSCP 46) has no ECN configured: never marked however long the queue
    out = burst(sw, 10**6, 10, dscp=46)
    assert all(IPV4.decode(f, 14).ecn == Ecn.ECT0 for _, f in out)


def test_same_seed_same_marks() -> None:
    ecn = EcnConfig(kmin=2048, kmax=40 * 1024, pmax=0.5)
    runs = []
    for _ in range(2):
        sw = marking_switch(ecn, seed=3)
        runs.append([IPV4.decode(f, 14).ecn for _, f in burst(sw, 0, 40)])
    assert runs[0] == runs[1]
    assert Ecn.CE in runs[0] and Ecn.ECT0 in runs[0][1:]


def test_averaged_wred_reacts_slowly() -> None:
    """Classic WRED (weight 2^-9): a single 60-frame burst barely moves the average, so nothing
    is marked where the instantaneous queue marks most of the burst."""
    inst = marking_switch(EcnConfig(kmin=10 * 1024, kmax=20 * 1024, pmax=1.0))
    avg = marking_switch(EcnConfig(kmin=10 * 1024, kmax=20 * 1024, pmax=1.0, weight_shift=9))
    n_inst = sum(IPV4.decode(f, 14).ecn == Ecn.CE for _, f in burst(inst, 0, 60))
    n_avg = sum(IPV4.decode(f, 14).ecn == Ecn.CE for _, f in burst(avg, 0, 60))
    assert n_inst > 40 and n_avg == 0
    assert 0 < avg.ports[1].avg_q[0] < 10 * 1024


def test_last_hop_off_leaves_host_facing_ports_unmarked() -> None:
    """``last_hop = false`` (behaviour.md §4.5: with RCCC "typically ECN is disabled on the
    last-hop queue"): the same burst is marked towards a switch and left alone towards a host."""
    ecn = EcnConfig(kmin=0, kmax=1, pmax=1.0, last_hop=False)
    for faces_host, marks in ((False, 8), (True, 0)):
        cfg = SwitchConfig()
        cfg.tcs[0].ecn = ecn
        cfg.tcs[0].limit = 200 * 1024
        cfg.tcs[0].dynamic = False
        sw = Switch("sw", 1, [PortSpec(100 * GBPS), PortSpec(GBPS, faces_host=faces_host)], cfg, seed=1)
        sw.add_route("10.0.1.0/24", [1])
        out = burst(sw, 0, 10)
        assert sum(IPV4.decode(f, 14).ecn == Ecn.CE for _, f in out) == marks
        assert sw.counters[("mark", "sw", 1, 0)] == marks
