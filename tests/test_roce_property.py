"""RC delivers exactly once and in order under loss, reordering and duplication, and the
requester's retransmitted-bytes counter is exactly go-back-N's resent payload
(spec/rocev2-and-fabric.md §6, §9.1).
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from roce_harness import Impair, Pair

from uet.roce import (
    DcqcnConfig,
    MessageReceived,
    OpFailed,
    QpConfig,
    QpErrored,
    ReadCompleted,
    SendCompleted,
    WriteCompleted,
)
from uet.roce.config import WIRE_OVERHEAD
from uet.roce.errors import Flushed, RetryExceeded
from uet.wire.roce import OpCode, psn_diff

REQ_WITH_PAYLOAD = set(range(OpCode.SEND_FIRST, OpCode.RDMA_WRITE_ONLY_WITH_IMMEDIATE + 1))


def resent_payload(pair: Pair) -> int:
    """Payload bytes of request packets whose PSN had been sent before (from the wire log)."""
    high = None
    total = 0
    for _, side, tx in pair.wire:
        if side != "a":
            continue
        from uet.wire.rocepkt import parse_roce

        r = parse_roce(tx.data)
        if r.opcode not in REQ_WITH_PAYLOAD and r.opcode != OpCode.RDMA_READ_REQUEST:
            continue
        p = r.bth.psn
        if high is not None and psn_diff(p, high) < 0:
            total += len(r.payload)
        span = 1
        if r.opcode == OpCode.RDMA_READ_REQUEST:
            assert r.reth is not None
            span = max(1, -(-r.reth.dma_len // 256))
        end = (p + span) & 0xFFFFFF
        if high is None or psn_diff(end, high) > 0:
            high = end
    return total


ops = st.lists(
    st.tuples(st.sampled_from(["send", "send_imm", "write", "write_imm", "read"]), st.integers(0, 1100)),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=int(__import__("os").environ.get("ROCE_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    ops=ops,
    loss=st.sampled_from([0.0, 0.02, 0.1]),
    dup=st.sampled_from([0.0, 0.05, 0.2]),
    reorder=st.sampled_from([0.0, 0.05, 0.3]),
    seed=st.integers(0, 2**16),
    ce=st.sampled_from([None, 0.0, 0.3]),
)
@example(
    ops=[("read", 257), ("send", 1)], loss=0.0, dup=0.0, reorder=0.0, seed=0, ce=0.0
)  # ACK overtook READ responses
@example(
    ops=[("send", 0), ("send", 257), ("send", 0), ("send", 0), ("send", 513), ("read", 257)]
    + [("send", 0), ("send", 0), ("send", 257), ("read", 0)],
    loss=0.1,
    dup=0.0,
    reorder=0.0,
    seed=1,
    ce=0.0,
)  # an ACK past a READ whose rewind was under way left the cursor behind una
def test_exactly_once_in_order(ops, loss, dup, reorder, seed, ce) -> None:  # noqa: ANN001
    """``ce`` None: no congestion control; else DCQCN (1 Gb/s line, paper profile) with that
    fraction of datagrams arriving CE-marked, so CNPs, rate cuts and pacing join the mix."""
    dcqcn = None if ce is None else DcqcnConfig.paper(1e9)
    cfg = QpConfig(pmtu=256, dcqcn=dcqcn, timeout=5, retry_cnt=7, ack_req_every=4, window=16)
    im = Impair(loss=loss, dup=dup, reorder=reorder, reorder_ns=3_000, ce=ce or 0.0, seed=seed)
    pair = Pair(config=cfg, impair=im, seed=seed)
    mem = bytearray(len(ops) * 1200)
    mr = pair.b.register(mem)
    for i in range(len(mem)):
        mem[i] = (i * 7 + seed) & 0xFF
    expect_mem = bytearray(mem)
    expect_msgs: list[tuple[bytes, int | None]] = []
    expect_done: list[SendCompleted | WriteCompleted | int] = []  # an int: a READ's handle
    expect_reads: dict[int, tuple[int, int]] = {}
    for i, (kind, n) in enumerate(ops):
        data = bytes(((i + 1) * 31 + j) & 0xFF for j in range(n))
        va = i * 1200
        if kind.startswith("send"):
            pair.b.post_recv()
            imm = i if kind == "send_imm" else None
            h = pair.a.post_send(data, imm=imm)
            expect_msgs.append((data, imm))
            expect_done.append(SendCompleted(h))
        elif kind.startswith("write"):
            imm = None
            if kind == "write_imm":
                pair.b.post_recv()
                imm = 1000 + i
                expect_msgs.append((b"", imm))
            h = pair.a.post_write(data, va, mr.key, imm=imm)
            expect_mem[va : va + n] = data
            expect_done.append(WriteCompleted(h))
        else:
            h = pair.a.post_read(n, va, mr.key)
            expect_reads[h] = (va, n)
            expect_done.append(h)
    pair.run()
    snap = bytearray(mem)
    got_a = [e for e in pair.events["a"] if not isinstance(e, QpErrored)]
    # every work request completes exactly once, in posting order
    assert len(got_a) == len(expect_done), got_a
    failed = [i for i, e in enumerate(got_a) if isinstance(e, OpFailed)]
    if reorder == 0.0:
        assert not failed, got_a  # in-order delivery: loss and duplication are always recovered
    # a failure can only be an exhausted retry count under reordering (RC assumes in-order paths,
    # §1.2), after which everything later is flushed: the successes are a prefix
    ok = len(got_a) if not failed else failed[0]
    for e in got_a[ok:]:
        assert isinstance(e, OpFailed) and isinstance(e.error, (RetryExceeded, Flushed)), e
    for e, want in zip(got_a[:ok], expect_done[:ok], strict=True):
        if isinstance(want, int):
            assert isinstance(e, ReadCompleted) and e.handle == want
            va, n = expect_reads[want]
            assert len(e.data) == n
        else:
            assert e == want
    recv = [(e.data, e.imm) for e in pair.events["b"] if isinstance(e, MessageReceived)]
    if not failed:
        assert recv == expect_msgs
        assert len(pair.events["b"]) == len(expect_msgs)
        assert snap == expect_mem
    else:
        assert recv == expect_msgs[: len(recv)]  # exactly once and in order, as far as it got
    assert pair.a.counters().get("retransmitted_bytes", 0) == resent_payload(pair)
    if loss == dup == reorder == 0.0:
        assert pair.a.counters().get("retransmitted_bytes", 0) == 0


def test_go_back_n_resends_everything_after_a_loss() -> None:
    """One lost packet in a 20-packet SEND: the NAK rewinds to it, so the packets after it that
    were already sent go again (go-back-N's waste, §9.2)."""
    lost: list[int] = []

    def drop_once(side, tx, r):  # noqa: ANN001
        if (
            side == "a"
            and r.opcode == OpCode.SEND_MIDDLE
            and not lost
            and r.bth.psn == (pair.a.start_psn + 5) & 0xFFFFFF
        ):
            lost.append(r.bth.psn)
            return True
        return False

    cfg = QpConfig(pmtu=256, dcqcn=None, timeout=10, ack_req_every=16, window=128)
    pair = Pair(config=cfg, impair=Impair(drop=drop_once), delay_ns=10_000)
    pair.b.post_recv()
    pair.a.post_send(bytes(256 * 20))
    pair.run()
    assert lost and pair.a.counters()["naks_received"] == 1
    assert pair.a.counters()["retransmitted_bytes"] == 256 * 15  # PSNs 5..19 again
    assert pair.b.counters()["sequence_errors"] == 14  # 6..19 arrived ahead of ePSN; one NAK
    assert pair.b.counters()["naks_sent"] == 1


def test_a_message_slower_to_send_than_the_ack_timeout_still_completes() -> None:
    """The rate limiter lets about 3 packets out per ACK timeout, far fewer than the 16 between
    two AckReqs: each timeout rewound to ``una`` before enough packets had left to ask for an
    ACK, so the requester never learnt of the responder's progress and spent its retries
    ("retry exceeded" — a livelock with retry_cnt 7 read as infinite, and on a slow link or a
    slowed event loop). The first packet resent after a timeout now asks for an ACK (§6.5),
    and the answer moves ``una`` on."""
    frame = 256 + 12 + 4 + WIRE_OVERHEAD  # payload, BTH, ICRC, frame overhead
    rate = frame * 8 * 1e9 / 20_000  # one packet every 20 us; RTO (code 4) = 65.5 us
    cfg = QpConfig(pmtu=256, dcqcn=DcqcnConfig.paper(line_rate=rate), timeout=4, retry_cnt=3, ack_req_every=16)
    pair = Pair(config=cfg, delay_ns=1_000)
    pair.b.post_recv()
    data = bytes(range(256)) * 64  # 64 packets: about twenty ACK timeouts to send once
    h = pair.a.post_send(data)
    pair.run()
    assert pair.events["a"] == [SendCompleted(h)]
    assert [e.data for e in pair.events["b"] if isinstance(e, MessageReceived)] == [data]
    c = pair.a.counters()
    assert c["timeouts"] >= 10 and c.get("retry_exceeded", 0) == 0
