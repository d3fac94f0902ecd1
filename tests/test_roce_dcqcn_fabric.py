"""DCQCN end to end on the switch model: two RoCE flows into one 100 Gb/s link converge to their
fair share, and each notification point respects its CNP hold-off
(spec/rocev2-and-fabric.md §5.2, §7, §8.2, §9).

Topology: one leaf, three hosts, 100 Gb/s links with 1 µs propagation, PMTU 4096 (9000-byte MTU).
Host 0 writes to host 2 from t = 0, host 1 joins at 0.5 ms; both keep 16 writes of 64 KB
outstanding. The leaf marks TC3 with the 100GE vendor-guide values of §8.9 (Kmin 7 KB, Kmax
500 KB, Pmax 30 %); DCQCN runs the paper profile scaled to 100 Gb/s. Everything is virtual time
and seeded, so the figures are exact for this code.
"""

from __future__ import annotations

import pytest
from roce_fabric import RoceFabric
from uet.fabric.model.config import KB, BufferConfig, EcnConfig, PfcConfig, SwitchConfig
from uet.fabric.model.plan import LinkSpec
from uet.fabric.topology import Topology

from uet.roce import DcqcnConfig, QpConfig, WriteCompleted

G = 1e9
MS = 1_000_000
MSG = 64 * 1024


@pytest.mark.unit_each  # long: a unit of work of its own, started early (tests/conftest.py)
def test_two_flows_converge_to_the_fair_share_and_cnps_respect_the_holdoff() -> None:
    link = LinkSpec(rate_bps=100_000_000_000, delay_ns=1_000, mtu=9000)
    sw = SwitchConfig()
    sw.tcs[3].ecn = EcnConfig(kmin=7 * KB, kmax=500 * KB, pmax=0.3)
    sw.pfc = PfcConfig(xoff=2048 * KB, xon=2000 * KB, headroom=256 * KB)
    sw.buffer = BufferConfig(size=32 * 1024 * KB)
    rf = RoceFabric(Topology(leaves=1, spines=1, hosts_per_leaf=3, host_link=link, fabric_link=link, switch=sw))
    dcqcn = DcqcnConfig.paper(100 * G)
    cfg = QpConfig(pmtu=4096, dcqcn=dcqcn, timeout=14)
    a, ra = rf.connect(0, 2, cfg, seed=1)
    b, rb = rf.connect(1, 2, cfg, seed=3)
    regions = {id(a): ra.register(bytearray(MSG)), id(b): rb.register(bytearray(MSG))}
    start = {id(a): 0, id(b): MS // 2}
    done: dict[int, list[int]] = {id(a): [], id(b): []}
    posted = {id(a): 0, id(b): 0}

    def on_event(now: int, qp: object, e: object) -> None:
        assert not hasattr(e, "error"), e
        if isinstance(e, WriteCompleted):
            done[id(qp)].append(now)

    def tick(now: int) -> None:
        for qp in (a, b):
            if now >= start[id(qp)]:
                while posted[id(qp)] - len(done[id(qp)]) < 16:
                    qp.post_write(bytes(MSG), 0, regions[id(qp)].key)
                    posted[id(qp)] += 1

    rf.on_event = on_event
    rf.run(6 * MS, tick)

    # goodput over [3, 6] ms: together near the link's payload capacity, each within 10 % of half
    t0, t1 = 3 * MS, 6 * MS
    rate = {k: sum(t0 <= t < t1 for t in v) * MSG * 8 / ((t1 - t0) / 1e9) for k, v in done.items()}
    total = rate[id(a)] + rate[id(b)]
    assert total > 0.9 * 100 * G * 4096 / (4096 + 12 + 16 + 4 + 66)  # BTH, RETH, ICRC, frame
    for r in rate.values():
        assert abs(r - total / 2) <= 0.1 * total / 2, (rate, total)
    # both flows were cut and recovered; their DCQCN rates also end near the fair share
    assert a.rp is not None and b.rp is not None and ra.np is not None
    assert a.rp.cnps > 3 and b.rp.cnps > 3
    # the notification point (the receivers) never sent two CNPs for one QP within the hold-off
    assert set(rf.cnp_times) == {ra.qpn, rb.qpn}
    for times in rf.cnp_times.values():
        assert all(t2 - t1 >= dcqcn.cnp_holdoff_ns for t1, t2 in zip(times, times[1:], strict=False))
    assert sum(len(t) for t in rf.cnp_times.values()) == a.rp.cnps + b.rp.cnps  # CNPs are never lost here
    assert ra.np.marked > ra.np.cnps  # marks inside a hold-off did not produce CNPs
