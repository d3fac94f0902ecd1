"""Initiator ↔ target loop without PDS: 1,000 random mixed operations, every result checked.

A tiny in-memory "network" feeds each FEP's request packets to the peer's target engine in a
random order (RUD delivers out of order), hands the response back as the ACK, and replaces
non-guaranteed responses by an implicit acknowledgement a third of the time (what ACK coalescing
and CACK do). Time only advances to the engines' own timer deadlines (virtual time).
"""

from __future__ import annotations

import random
from collections import Counter

from uet.ses import Access, OpCompleted, RecvCompleted, SesFep
from uet.ses.initiator import InitiatorConfig, SesAddress
from uet.ses.target import TargetConfig
from uet.wire.ses import AmoOp, AmoType, ReturnCode

A_FA, B_FA = "10.0.0.1", "10.0.0.2"
JOB = 0x77


class Net:
    def __init__(self, feps: dict[str, SesFep], rng: random.Random) -> None:
        self.feps, self.rng, self.now = feps, rng, 0
        self.packets = 0

    def run(self, *, timers: bool = True) -> None:
        for _ in range(100_000):
            pkts = [(fa, p) for fa, f in self.feps.items() for p in f.packets_to_send()]
            if not pkts:
                ts = [t for f in self.feps.values() if (t := f.get_timer()) is not None]
                if not ts or not timers:
                    return
                self.now = max(self.now, min(ts))
                for f in self.feps.values():
                    f.handle_timer(self.now)
                continue
            self.rng.shuffle(pkts)
            for src, p in pkts:
                self.packets += 1
                r = self.feps[p.peer].target.handle(src, p.next_hdr, p.ses, p.payload, mode=p.mode, now=self.now)
                if r is None or (not r.guaranteed and self.rng.random() < 0.33):
                    self.feps[src].on_ack(p.token, 0, b"", self.now)
                else:
                    self.feps[src].on_ack(p.token, r.next_hdr, r.data, self.now)
        raise AssertionError("network did not quiesce")


def _fep(fa: str, pid: int, init: int, rng: random.Random) -> SesFep:
    cfg = InitiatorConfig(
        initiator_id=init,
        max_payload=256,
        deferrable_threshold=None,
        eager_length=128,
        local_pid=pid,
        local_index=0,
    )
    f = SesFep(fa, initiator=cfg, target=TargetConfig(max_payload=200), rng=rng)
    f.resources.add(pid, 0, JOB)
    return f


def test_thousand_random_operations() -> None:
    rng = random.Random(2024)
    a, b = _fep(A_FA, 1, 1, rng), _fep(B_FA, 2, 2, rng)
    net = Net({A_FA: a, B_FA: b}, rng)
    to_b = SesAddress(B_FA, 2, 0, 0, JOB)
    res_b = b.resources.get(2, 0)
    assert res_b is not None

    counter = bytearray(64)
    creg = b.memory.register(counter, Access.ALL)
    window = bytearray(8192)
    wreg = b.memory.register(window, Access.ALL)
    image = bytearray(8192)  # what the window must hold

    expected_ops: dict[int, tuple[str, object]] = {}
    sent_payloads: Counter[bytes] = Counter()
    received: Counter[bytes] = Counter()
    recv_bufs: dict[int, bytearray] = {}
    fetched: list[int] = []
    total_added = 0
    late_recvs: list[tuple[bool, int]] = []
    n_ops = 0

    def post(tagged: bool, tag: int) -> None:
        buf = bytearray(2048)
        r = b.target.post_recv(res_b, buf, tagged=tagged, tag=tag)
        recv_bufs[r.id] = buf

    while n_ops < 1000:
        touched: set[int] = set()  # window slots read or written in this batch
        for _ in range(25):
            n_ops += 1
            kind = rng.choices(
                ["send", "tsend", "defer", "rndv", "write", "read", "sum", "fsum", "cswap"],
                weights=[20, 15, 8, 6, 15, 12, 10, 10, 4],
            )[0]
            if kind in ("send", "tsend", "defer", "rndv"):
                size = rng.randint(200, 2000) if kind == "rndv" else rng.randint(0, 700)
                data = n_ops.to_bytes(4, "little") + rng.randbytes(size)
                tag = rng.getrandbits(64) if kind != "send" else None
                proto = {"defer": "deferrable", "rndv": "rendezvous"}.get(kind, "eager")
                if rng.random() < 0.5 and kind != "defer":
                    post(tag is not None, tag or 0)
                else:
                    late_recvs.append((tag is not None, tag or 0))
                op = a.initiator.send(to_b, data, tag=tag, protocol=proto)
                sent_payloads[data] += 1
                expected_ops[op] = ("send", len(data))
            elif kind == "write":
                free = [x for x in range(32) if x not in touched]
                slot = rng.choice(free)
                touched.add(slot)
                off = slot * 256 + rng.randint(0, 64)
                data = rng.randbytes(rng.randint(1, 192))
                image[off : off + len(data)] = data
                hd = n_ops if rng.random() < 0.3 else None
                op = a.initiator.write(to_b, wreg.key, off, data, header_data=hd)
                expected_ops[op] = ("write", len(data))
            elif kind == "read":
                slot = rng.choice([x for x in range(32) if x not in touched])
                touched.add(slot)  # no write may race this read
                off, ln = slot * 256 + rng.randint(0, 128), rng.randint(0, 128)
                op = a.initiator.read(to_b, wreg.key, off, ln, mode=rng.choice([0, 0, 2]))
                expected_ops[op] = ("read", bytes(image[off : off + ln]))
            elif kind in ("sum", "fsum"):
                inc = rng.randint(1, 1000)
                total_added += inc
                op = a.initiator.atomic(to_b, creg.key, 0, AmoOp.SUM, AmoType.UINT64, [inc], fetch=kind == "fsum")
                expected_ops[op] = (kind, inc)
            else:
                cur = int.from_bytes(counter[8:16], "little")
                op = a.initiator.atomic(
                    to_b, creg.key, 8, AmoOp.CSWAP, AmoType.UINT64, compare=cur, swap=cur + 1, fetch=True
                )
                expected_ops[op] = ("cswap", cur)
        net.run(timers=False)  # deferred sends wait for their receive: post the late ones now
        for tagged, tag in late_recvs:
            post(tagged, tag)
        late_recvs.clear()
        net.run()

    done: dict[int, OpCompleted] = {}
    cswaps = []
    while (e := a.next_event()) is not None:
        assert isinstance(e, OpCompleted), e
        done[e.op] = e
    assert set(done) == set(expected_ops)
    for op, (kind, info) in expected_ops.items():
        e = done[op]
        if kind in ("send", "write"):
            assert e.modified_length == info, (kind, e)
        elif kind == "read":
            assert e.result == info, op
        elif kind == "fsum":
            fetched.append(e.result)
        elif kind == "cswap":
            cswaps.append(e.result == info)
    while (e := b.next_event()) is not None:
        if isinstance(e, RecvCompleted):
            assert e.return_code == ReturnCode.OK, e
            received[bytes(recv_bufs[e.recv_id][: e.length])] += 1
    assert received == sent_payloads
    assert bytes(window) == bytes(image)
    assert int.from_bytes(counter[0:8], "little") == total_added
    assert len(set(fetched)) == len(fetched) and all(0 <= v < total_added for v in fetched)
    # a compare-and-swap succeeded exactly when it fetched its compare value; each added one
    assert int.from_bytes(counter[8:16], "little") == sum(cswaps) > 0
    assert a.initiator.idle() and b.initiator.idle()
    assert net.packets > 2000
    # every path was exercised: overflow list, deferral + RTR, rendezvous reads, return-direction data
    assert b.target.counters["unexpected"] > 0 and b.target.counters["deferred"] > 0
    assert a.initiator.counters["rtr_received"] > 0 and b.initiator.counters["ops"] > 0


def test_no_overflow_list_retries_until_receive_posted() -> None:
    """Without an overflow list unmatched sends get NO_MATCH and are retried after the backoff
    (behaviour.md §6.4); receives posted while they back off are matched by the retries."""
    rng = random.Random(7)
    a, b = _fep(A_FA, 1, 1, rng), _fep(B_FA, 2, 2, rng)
    b.target.config = TargetConfig(overflow=False)
    net = Net({A_FA: a, B_FA: b}, rng)
    res_b = b.resources.get(2, 0)
    assert res_b is not None
    to_b = SesAddress(B_FA, 2, 0, 0, JOB)
    msgs = [rng.randbytes(rng.randint(1, 900)) for _ in range(40)]
    ops = {a.initiator.send(to_b, m, tag=i): i for i, m in enumerate(msgs)}
    net.run(timers=False)
    assert a.initiator.get_timer() is not None  # all backing off
    bufs = {}
    for i in rng.sample(range(40), 40):
        bufs[i] = bytearray(1000)
        b.target.post_recv(res_b, bufs[i], tagged=True, tag=i, context=i)
    net.run()
    done = {}
    while (e := a.next_event()) is not None:
        assert isinstance(e, OpCompleted)
        done[ops[e.op]] = e
    assert len(done) == 40 and a.initiator.counters["retries"] >= 40
    got = 0
    while (e := b.next_event()) is not None:
        assert isinstance(e, RecvCompleted) and e.return_code == ReturnCode.OK
        assert bytes(bufs[e.context][: e.length]) == msgs[e.context]
        got += 1
    assert got == 40
    assert net.now >= 50_000_000  # virtual time advanced through the backoff
