"""SES engines over two real PDS cores (sans-I/O, virtual time, lossy in-memory wire).

Checks the seam between the sublayers: request packets go through ``PdsCore.submit``, targets
answer through ``on_deliver``, responses come back in ``Acked`` events.

The PDS core refuses requests whose next_hdr is not a request header (a RESPONSE_DATA request
opening a PDC is NACKed ``PDC_HDR_MISMATCH``, as the provider does) and has no return-direction
queue yet, so read data must come back in the ACKs: the targets run with ``max_ack_data`` at
least the initiators' ``max_payload`` (each read-request packet asks for at most that much).
"""

from __future__ import annotations

import random

from uet.pds import Acked, Failed, Mode, PdsCore
from uet.ses import Access, OpCompleted, RecvCompleted, SesFep
from uet.ses.initiator import InitiatorConfig, SesAddress
from uet.ses.target import TargetConfig
from uet.wire.ses import AmoOp, AmoType, ReturnCode

A_FA, B_FA, JOB = "10.0.0.1", "10.0.0.2", 5


class Node:
    def __init__(self, fa: str, pid: int, rng: random.Random) -> None:
        self.ses = SesFep(
            fa,
            initiator=InitiatorConfig(initiator_id=pid, max_payload=512, local_pid=pid),
            target=TargetConfig(max_ack_data=512),
            rng=rng,
        )
        self.ses.resources.add(pid, 0, JOB)
        self.pds = PdsCore(fa, rng=rng)
        self.pds.on_deliver = self.ses.on_deliver

    def pump(self, now: int) -> None:
        for p in self.ses.packets_to_send():
            self.pds.submit(
                p.peer, Mode(p.mode), p.next_hdr, p.ses, p.payload,
                token=p.token, som=p.som, eom=p.eom, now=now, job_id=p.job_id,
            )  # fmt: skip
        while (e := self.pds.next_event()) is not None:
            if isinstance(e, Acked):
                self.ses.on_ack(e.token, e.response_next_hdr, e.response, now)
            elif isinstance(e, Failed):
                self.ses.on_failed(e.token, e.reason, e.nack_code, now)


def run(nodes: dict[str, Node], rng: random.Random, now: int, loss: float) -> int:
    for _ in range(200_000):
        for n in nodes.values():
            n.pump(now)
        wire = [(src, d) for src, n in nodes.items() for d in n.pds.datagrams_to_send(now)]
        if wire:
            for src, (data, dst, _entropy) in wire:
                if rng.random() >= loss:
                    nodes[dst].pds.receive_datagram(data, now, source=src)
            now += 1000
            continue
        ts = [t for n in nodes.values() for t in (n.pds.get_timer(), n.ses.get_timer()) if t is not None]
        if not ts:
            return now
        now = max(now + 1, min(ts))
        for n in nodes.values():
            n.pds.handle_timer(now)
            n.ses.handle_timer(now)
    raise AssertionError("no quiescence")


def test_mixed_operations_over_pds_with_loss() -> None:
    rng = random.Random(99)
    a, b = Node(A_FA, 1, rng), Node(B_FA, 2, rng)
    nodes = {A_FA: a, B_FA: b}
    res_b = b.ses.resources.get(2, 0)
    assert res_b is not None
    mem = bytearray(4096)
    reg = b.ses.memory.register(mem, Access.ALL)
    mem[:] = rng.randbytes(4096)
    snapshot = bytes(mem)
    dest = SesAddress(B_FA, 2, 0, 0, JOB)
    expect: dict[int, tuple[str, object]] = {}
    sent = []
    bufs = {}
    total = 0
    for i in range(60):
        kind = rng.choice(["send", "read", "sum", "write"])
        if kind == "send":
            data = rng.randbytes(rng.randint(1, 1500))
            buf = bytearray(1500)
            bufs[b.ses.target.post_recv(res_b, buf, tagged=True, tag=i).id] = buf
            sent.append(data)
            expect[a.ses.initiator.send(dest, data, tag=i)] = ("send", len(data))
        elif kind == "read":
            off, ln = rng.randint(0, 1700), rng.randint(1, 1200)
            expect[a.ses.initiator.read(dest, reg.key, off, ln)] = ("read", snapshot[off : off + ln])
        elif kind == "sum":
            total += i
            expect[a.ses.initiator.atomic(dest, reg.key, 4088, AmoOp.SUM, AmoType.UINT64, [i], fetch=True)] = ("sum", 0)
        else:
            data = rng.randbytes(rng.randint(1, 900))
            expect[a.ses.initiator.write(dest, reg.key, 3000, data)] = ("write", len(data))
    run(nodes, rng, 0, loss=0.05)
    done = {}
    while (e := a.ses.next_event()) is not None:
        assert isinstance(e, OpCompleted), e
        done[e.op] = e
    assert set(done) == set(expect)
    for op, (kind, want) in expect.items():
        if kind == "read":
            assert done[op].result == want
        elif kind in ("send", "write"):
            assert done[op].modified_length == want
    got = []
    while (e := b.ses.next_event()) is not None:
        assert isinstance(e, RecvCompleted) and e.return_code == ReturnCode.OK
        got.append(bytes(bufs[e.recv_id][: e.length]))
    assert sorted(got) == sorted(sent)
    start = int.from_bytes(snapshot[4088:4096], "little")
    assert int.from_bytes(mem[4088:4096], "little") == (start + total) % (1 << 64)
    assert sum(v for k, v in a.pds.counters.items() if "retx" in k or "retrans" in k) > 0  # loss was repaired
