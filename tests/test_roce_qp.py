"""RC queue pair: exact packets in, exact packets out, for every requester and responder transition
(spec/rocev2-and-fabric.md §2.3, §3.1, §5, §6).

One QP is driven directly: the test builds each datagram its peer would send (with the ICRC the
peer would compute) and checks the datagrams the QP answers with, field by field.
"""

from __future__ import annotations

from typing import Any

import pytest

from uet.roce import (
    AtomicCompleted,
    MessageReceived,
    OpFailed,
    QpConfig,
    QpErrored,
    QpState,
    QpStateError,
    QueuePair,
    ReadCompleted,
    SendCompleted,
    WriteCompleted,
)
from uet.roce import errors as E
from uet.roce.states import transition
from uet.ses.memory import Access
from uet.wire import net
from uet.wire.roce import (
    AETH,
    ATOMIC_ACK_ETH,
    ATOMIC_ETH,
    BTH,
    IMMDT,
    RETH,
    NakCode,
    OpCode,
    entropy_port,
    psn_add,
    rnr_timer_ns,
)
from uet.wire.rocepkt import encode_roce, parse_roce, seal

Op = OpCode
ME, PEER = "10.0.0.1", "10.0.0.2"
MY_QPN, PEER_QPN = 0x11, 0x22
PEER_PSN = 0xFFFFFE  # the peer's start PSN: wraps after two packets
ENT = entropy_port(MY_QPN, PEER_QPN)


def cfg(**kw: Any) -> QpConfig:
    base: dict[str, Any] = dict(pmtu=256, dcqcn=None, timeout=4, retry_cnt=2, rnr_retry=2, ack_req_every=3)
    base.update(kw)
    return QpConfig(**base)


def make_qp(**kw) -> QueuePair:
    qp = QueuePair(ME, MY_QPN, config=cfg(**kw), seed=7, start_psn=0xFFFFFD)
    qp.connect(PEER, PEER_QPN, PEER_PSN)
    return qp


def pkt(op, psn, exts=(), payload=b"", *, ack_req=0, qpn=MY_QPN) -> bytes:
    """A datagram from the peer to the QP under test."""
    bth = BTH.make(opcode=op, dest_qp=qpn, psn=psn & 0xFFFFFF, ack_req=ack_req)
    return seal(encode_roce(bth, exts, payload), net.ip_bytes(PEER), net.ip_bytes(ME), ENT)


def ack(psn, syndrome=0x1F, msn=0) -> bytes:
    return pkt(Op.ACKNOWLEDGE, psn, (AETH.make(syndrome=syndrome, msn=msn),))


def out(qp: QueuePair, now: int = 0) -> list:
    res = []
    for tx in qp.datagrams_to_send(now):
        assert tx.destination == PEER and tx.entropy == ENT
        r = parse_roce(tx.data)
        assert r.bth.dest_qp == PEER_QPN
        res.append((r, tx))
    return res


def ops(qp: QueuePair, now: int = 0) -> list[tuple[str, int]]:
    return [(r.opcode_name, r.bth.psn) for r, _ in out(qp, now)]


def events(qp: QueuePair) -> list:
    res = []
    while (e := qp.next_event()) is not None:
        res.append(e)
    return res


S0 = 0xFFFFFD  # the QP's own start PSN


# -- requester ---------------------------------------------------------------------------------


def test_send_packetization_psn_wrap_ackreq_and_pad() -> None:
    qp = make_qp()
    data = bytes(range(256)) * 4 + b"xyz"  # 1027 bytes: FIRST, MIDDLE x3, LAST of 3 bytes
    h = qp.post_send(data)
    got = out(qp)
    assert [(r.opcode_name, r.bth.psn, r.bth.ack_req, r.bth.pad_cnt) for r, _ in got] == [
        ("SEND_FIRST", S0, 0, 0),
        ("SEND_MIDDLE", 0xFFFFFE, 0, 0),
        ("SEND_MIDDLE", 0xFFFFFF, 1, 0),  # every 3rd packet asks for an ACK
        ("SEND_MIDDLE", 0, 0, 0),
        ("SEND_LAST", 1, 1, 1),  # the last always does
    ]
    assert b"".join(r.payload for r, _ in got) == data
    assert all(tx.dscp == 26 and tx.ecn == 2 for _, tx in got)
    qp.receive_datagram(ack(0xFFFFFF), 10, source=PEER)
    assert events(qp) == []  # partial ACK: the message is not complete
    assert qp.requester.una == 0
    qp.receive_datagram(ack(1), 20, source=PEER)
    assert events(qp) == [SendCompleted(h)]
    assert qp.requester.una == 2 and qp.requester.rto_deadline is None


def test_write_with_and_without_immediate_and_send_immediate() -> None:
    qp = make_qp()
    h1 = qp.post_write(b"a" * 300, 0x40, 0xABCD, imm=0x1234)
    h2 = qp.post_write(b"b" * 10, 0x80, 0xABCD)
    h3 = qp.post_send(b"c", imm=5, solicited=True)
    h4 = qp.post_write(b"", 0, 0xABCD, imm=9)
    got = [r for r, _ in out(qp)]
    assert [r.opcode_name for r in got] == [
        "RDMA_WRITE_FIRST",
        "RDMA_WRITE_LAST_WITH_IMMEDIATE",
        "RDMA_WRITE_ONLY",
        "SEND_ONLY_WITH_IMMEDIATE",
        "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
    ]
    assert got[0].reth == RETH.make(va=0x40, rkey=0xABCD, dma_len=300)
    assert got[1].immdt == IMMDT.make(imm=0x1234) and got[1].payload == b"a" * 44 and got[1].reth is None
    assert got[2].reth == RETH.make(va=0x80, rkey=0xABCD, dma_len=10)
    assert got[3].immdt.imm == 5 and got[3].bth.se == 1
    assert got[4].reth.dma_len == 0 and got[4].immdt.imm == 9 and got[4].payload == b""
    qp.receive_datagram(ack(psn_add(S0, 4)), 5, source=PEER)
    assert events(qp) == [WriteCompleted(h1), WriteCompleted(h2), SendCompleted(h3), WriteCompleted(h4)]


def test_window_limits_outstanding_psns() -> None:
    qp = make_qp(window=4, ack_req_every=16)
    qp.post_send(bytes(256 * 10))
    assert len(out(qp)) == 4
    assert out(qp) == []
    qp.receive_datagram(ack(psn_add(S0, 1)), 1, source=PEER)  # two acknowledged: two more may go
    assert [p for _, p in ops(qp, 1)] == [psn_add(S0, 4), psn_add(S0, 5)]


def test_sequence_nak_go_back_n_and_retry_exhaustion() -> None:
    qp = make_qp(ack_req_every=16)
    qp.post_send(bytes(256 * 4))
    out(qp)
    # NAK at S0+2: S0, S0+1 implicitly acknowledged, rewind to S0+2
    qp.receive_datagram(ack(psn_add(S0, 2), NakCode.PSN_SEQUENCE_ERROR), 10, source=PEER)
    assert ops(qp, 10) == [("SEND_MIDDLE", psn_add(S0, 2)), ("SEND_LAST", psn_add(S0, 3))]
    assert qp.requester.una == psn_add(S0, 2)
    c = qp.counters()
    assert c["retransmitted_packets"] == 2 and c["retransmitted_bytes"] == 512 and c["naks_received"] == 1
    # the same NAK again (a duplicate on the wire) is not a second retry sequence
    qp.receive_datagram(ack(psn_add(S0, 2), NakCode.PSN_SEQUENCE_ERROR), 11, source=PEER)
    assert ops(qp, 11) == []
    # an older NAK is stale
    qp.receive_datagram(ack(S0, NakCode.PSN_SEQUENCE_ERROR), 12, source=PEER)
    assert qp.counters()["stale_naks"] == 1
    # retry_cnt = 2: the third retry fails the request and the QP
    qp.receive_datagram(ack(psn_add(S0, 3), NakCode.PSN_SEQUENCE_ERROR), 20, source=PEER)
    assert ops(qp, 20) == [("SEND_LAST", psn_add(S0, 3))]
    qp.receive_datagram(ack(psn_add(S0, 3), NakCode.PSN_SEQUENCE_ERROR), 30, source=PEER)
    assert qp.state is QpState.RTS  # same PSN, no progress: ignored
    qp.receive_datagram(ack(psn_add(S0, 2), 0x1F), 31, source=PEER)  # progress resets the count
    qp.receive_datagram(ack(psn_add(S0, 3), NakCode.PSN_SEQUENCE_ERROR), 40, source=PEER)
    assert qp.requester.retries_left == 1


def test_timeout_rewinds_to_una_then_retry_exceeded() -> None:
    qp = make_qp(ack_req_every=16)  # timeout 4: RTO = 4.096 us * 16 = 65536 ns
    h = qp.post_send(bytes(300))
    assert ops(qp, 0) == [("SEND_FIRST", S0), ("SEND_LAST", psn_add(S0, 1))]
    assert qp.get_timer() == 65536
    qp.handle_timer(65535)
    assert ops(qp, 65535) == []
    for i in range(1, 3):
        qp.handle_timer(65536 * i)
        assert ops(qp, 65536 * i) == [("SEND_FIRST", S0), ("SEND_LAST", psn_add(S0, 1))]
        assert qp.counters()["timeouts"] == i
    qp.handle_timer(65536 * 3)
    evs = events(qp)
    assert isinstance(evs[0], OpFailed) and evs[0].handle == h and isinstance(evs[0].error, E.RetryExceeded)
    assert isinstance(evs[-1], QpErrored) and qp.state is QpState.ERR
    with pytest.raises(QpStateError):
        qp.post_send(b"x")


def test_first_packet_resent_after_a_timeout_asks_for_an_ack() -> None:
    """§6.5/§6.6: after an ACK timeout the first resent packet carries AckReq, so the responder
    (which drops nothing it already has: a duplicate) reports its ePSN − 1 and ``una`` moves on
    without a second timeout (the go-back-N livelock of a requester slower than its RTO)."""
    qp = make_qp(ack_req_every=4)
    qp.post_send(bytes(256 * 6))
    first = [(r.bth.psn, r.bth.ack_req) for r, _ in out(qp)]
    assert first == [(S0, 0), (0xFFFFFE, 0), (0xFFFFFF, 0), (0, 1), (1, 0), (2, 1)]
    qp.handle_timer(65536)  # neither ACK came back
    again = [(r.bth.psn, r.bth.ack_req) for r, _ in out(qp, 65536)]
    # the first resent packet asks; the count of ack_req_every restarts from it
    assert again == [(S0, 1), (0xFFFFFE, 0), (0xFFFFFF, 0), (0, 0), (1, 1), (2, 1)]
    qp.receive_datagram(ack(0xFFFFFF), 66000, source=PEER)  # the duplicate's ACK: ePSN - 1
    assert qp.requester.una == 0 and qp.requester.retries_left == 2
    assert qp.requester.rto_deadline == 66000 + 65536
    qp.handle_timer(66000 + 65536)  # lost again: the next resend starts at una and asks at once
    assert [(r.bth.psn, r.bth.ack_req) for r, _ in out(qp, 66000 + 65536)] == [(0, 1), (1, 0), (2, 1)]


def test_the_packet_that_fills_the_window_asks_for_an_ack() -> None:
    """A window smaller than ``ack_req_every``: the packet that fills it asks for an ACK, else
    the requester would wait for a timeout every window (§6.2, §6.5)."""
    qp = make_qp(window=4, ack_req_every=16)
    qp.post_send(bytes(256 * 10))
    assert [(r.bth.psn, r.bth.ack_req) for r, _ in out(qp)] == [(S0, 0), (0xFFFFFE, 0), (0xFFFFFF, 0), (0, 1)]
    qp.receive_datagram(ack(0), 10, source=PEER)
    assert [(r.bth.psn, r.bth.ack_req) for r, _ in out(qp, 10)] == [(1, 0), (2, 0), (3, 0), (4, 1)]


def test_rnr_nak_waits_the_rnr_time_then_resends_and_exhausts() -> None:
    qp = make_qp()
    h = qp.post_send(b"hi")
    out(qp)
    qp.receive_datagram(ack(S0, 0x20 | 3), 100, source=PEER)  # RNR, timer code 3 = 30 us
    assert ops(qp, 100) == []
    assert qp.get_timer() == 100 + rnr_timer_ns(3) == 30_100
    assert ops(qp, 30_099) == []
    qp.handle_timer(30_100)
    assert ops(qp, 30_100) == [("SEND_ONLY", S0)]
    qp.receive_datagram(ack(S0, 0x20 | 1), 30_200, source=PEER)
    qp.handle_timer(40_200)
    assert ops(qp, 40_200) == [("SEND_ONLY", S0)]
    qp.receive_datagram(ack(S0, 0x20 | 1), 40_300, source=PEER)  # third RNR with rnr_retry = 2
    evs = events(qp)
    assert isinstance(evs[0], OpFailed) and isinstance(evs[0].error, E.RnrRetryExceeded) and evs[0].handle == h


def test_rnr_retry_7_is_infinite() -> None:
    qp = make_qp(rnr_retry=7)
    qp.post_send(b"hi")
    out(qp)
    for i in range(20):
        t = i * 100_000
        qp.receive_datagram(ack(S0, 0x20 | 1), t, source=PEER)
        qp.handle_timer(t + 10_000)
        assert ops(qp, t + 10_000) == [("SEND_ONLY", S0)]
    assert qp.state is QpState.RTS


@pytest.mark.parametrize(
    ("code", "exc"),
    [
        (NakCode.INVALID_REQUEST, E.RemoteInvalidRequest),
        (NakCode.REMOTE_ACCESS_ERROR, E.RemoteAccessError),
        (NakCode.REMOTE_OPERATIONAL_ERROR, E.RemoteOperationalError),
    ],
)
def test_fatal_nak_fails_the_request_and_flushes_the_rest(code, exc) -> None:
    qp = make_qp()
    h1 = qp.post_send(b"a")
    h2 = qp.post_write(b"b", 0, 1)
    h3 = qp.post_send(b"c")
    qp.post_recv()
    out(qp)
    qp.receive_datagram(ack(psn_add(S0, 1), code), 5, source=PEER)
    evs = events(qp)
    assert evs[0] == SendCompleted(h1)  # before the NAKed PSN: implicitly acknowledged
    assert evs[1].handle == h2 and isinstance(evs[1].error, exc)
    assert evs[2].handle == h3 and isinstance(evs[2].error, E.Flushed)
    assert isinstance(evs[3].error, E.Flushed)  # the posted receive
    assert isinstance(evs[4], QpErrored) and qp.state is QpState.ERR
    assert out(qp) == []


def test_read_request_responses_and_gap_reissue() -> None:
    qp = make_qp()
    h = qp.post_read(700, 0x1000, 0x77)  # 3 response PSNs
    h2 = qp.post_send(b"after")
    got = out(qp)
    assert [(r.opcode_name, r.bth.psn) for r, _ in got] == [("RDMA_READ_REQUEST", S0), ("SEND_ONLY", psn_add(S0, 3))]
    assert got[0][0].reth == RETH.make(va=0x1000, rkey=0x77, dma_len=700)
    data = bytes(range(256)) * 3
    qp.receive_datagram(pkt(Op.RDMA_READ_RESPONSE_FIRST, S0, (AETH.make(),), data[:256]), 10, source=PEER)
    # S0+1 lost: S0+2 is a gap, the READ is re-issued for the remainder
    qp.receive_datagram(pkt(Op.RDMA_READ_RESPONSE_LAST, psn_add(S0, 2), (AETH.make(),), data[512:700]), 11, source=PEER)
    got = out(qp, 11)
    assert [(r.opcode_name, r.bth.psn) for r, _ in got] == [
        ("RDMA_READ_REQUEST", psn_add(S0, 1)),
        ("SEND_ONLY", psn_add(S0, 3)),
    ]
    assert got[0][0].reth == RETH.make(va=0x1000 + 256, rkey=0x77, dma_len=444)
    assert qp.counters()["response_gaps"] == 1
    qp.receive_datagram(
        pkt(Op.RDMA_READ_RESPONSE_FIRST, psn_add(S0, 1), (AETH.make(),), data[256:512]), 20, source=PEER
    )
    qp.receive_datagram(pkt(Op.RDMA_READ_RESPONSE_LAST, psn_add(S0, 2), (AETH.make(),), data[512:700]), 21, source=PEER)
    assert events(qp) == [ReadCompleted(h, data[:700])]
    qp.receive_datagram(ack(psn_add(S0, 3)), 30, source=PEER)
    assert events(qp) == [SendCompleted(h2)]


def test_ack_beyond_an_unanswered_read_reissues_it() -> None:
    qp = make_qp()
    qp.post_read(10, 0, 0x77)
    qp.post_send(b"x")
    out(qp)
    qp.receive_datagram(ack(psn_add(S0, 1)), 10, source=PEER)  # the SEND after it was ACKed
    assert ops(qp, 10) == [("RDMA_READ_REQUEST", S0), ("SEND_ONLY", psn_add(S0, 1))]
    assert qp.counters()["rewinds"] == 1


def test_atomics_complete_with_the_original_value() -> None:
    qp = make_qp()
    h1 = qp.fetch_add(8, 0x77, 5)
    h2 = qp.compare_swap(16, 0x77, 1, 2)
    got = [r for r, _ in out(qp)]
    assert [r.opcode_name for r in got] == ["FETCH_ADD", "COMPARE_SWAP"]
    assert got[0].atomic_eth == ATOMIC_ETH.make(va=8, rkey=0x77, swap_add=5, compare=0)
    assert got[1].atomic_eth == ATOMIC_ETH.make(va=16, rkey=0x77, swap_add=2, compare=1)
    exts = lambda v: (AETH.make(), ATOMIC_ACK_ETH.make(orig=v))  # noqa: E731
    # the second's acknowledgement first: the first's was lost, so it is asked again (in order)
    qp.receive_datagram(pkt(Op.ATOMIC_ACKNOWLEDGE, psn_add(S0, 1), exts(1)), 5, source=PEER)
    assert events(qp) == [] and qp.counters()["response_gaps"] == 1
    assert ops(qp, 5) == [("FETCH_ADD", S0), ("COMPARE_SWAP", psn_add(S0, 1))]
    qp.receive_datagram(pkt(Op.ATOMIC_ACKNOWLEDGE, S0, exts(40)), 6, source=PEER)
    qp.receive_datagram(pkt(Op.ATOMIC_ACKNOWLEDGE, psn_add(S0, 1), exts(1)), 6, source=PEER)
    qp.receive_datagram(pkt(Op.ATOMIC_ACKNOWLEDGE, psn_add(S0, 1), exts(1)), 7, source=PEER)  # duplicate
    assert events(qp) == [AtomicCompleted(h1, 40), AtomicCompleted(h2, 1)]
    assert qp.counters()["stale_responses"] == 1


def test_max_rd_atomic_limits_outstanding_reads() -> None:
    qp = make_qp(max_rd_atomic=2)
    for _ in range(3):
        qp.post_read(8, 0, 0x77)
    assert [o for o, _ in ops(qp)] == ["RDMA_READ_REQUEST"] * 2
    qp.receive_datagram(pkt(Op.RDMA_READ_RESPONSE_ONLY, S0, (AETH.make(),), bytes(8)), 1, source=PEER)
    assert ops(qp, 1) == [("RDMA_READ_REQUEST", psn_add(S0, 2))]


# -- responder ---------------------------------------------------------------------------------


def P(i: int) -> int:
    return psn_add(PEER_PSN, i)


def test_responder_send_in_order_acks_only_on_ackreq() -> None:
    qp = make_qp()
    r1 = qp.post_recv()
    qp.receive_datagram(pkt(Op.SEND_FIRST, P(0), payload=b"a" * 256), 1, source=PEER)
    qp.receive_datagram(pkt(Op.SEND_MIDDLE, P(1), payload=b"b" * 256, ack_req=1), 2, source=PEER)
    got = out(qp)
    assert [(r.opcode_name, r.bth.psn, r.aeth.syndrome, r.aeth.msn) for r, _ in got] == [("ACKNOWLEDGE", P(1), 0x1F, 0)]
    assert got[0][1].dscp == 26 and got[0][1].ecn == 2
    qp.receive_datagram(pkt(Op.SEND_LAST_WITH_IMMEDIATE, P(2), (IMMDT.make(imm=3),), b"c", ack_req=1), 3, source=PEER)
    assert [(r.bth.psn, r.aeth.msn) for r, _ in out(qp)] == [(P(2), 1)]
    assert events(qp) == [MessageReceived(r1, b"a" * 256 + b"b" * 256 + b"c", 3)]
    assert qp.responder.epsn == P(3) == 1  # wrapped


def test_responder_one_sequence_nak_per_gap() -> None:
    qp = make_qp()
    for _ in range(3):
        qp.post_recv()
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(1), payload=b"x", ack_req=1), 1, source=PEER)
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(2), payload=b"x", ack_req=1), 2, source=PEER)
    got = out(qp)
    assert [(r.bth.psn, r.aeth.syndrome) for r, _ in got] == [(P(0), NakCode.PSN_SEQUENCE_ERROR)]
    assert qp.counters()["sequence_errors"] == 2
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(0), payload=b"x", ack_req=1), 3, source=PEER)
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(2), payload=b"x", ack_req=1), 4, source=PEER)  # a new gap
    assert [(r.bth.psn, r.aeth.syndrome) for r, _ in out(qp)] == [(P(0), 0x1F), (P(1), 0x60)]


def test_responder_duplicates_are_not_executed_again() -> None:
    qp = make_qp()
    r1 = qp.post_recv()
    qp.post_recv()
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(0), payload=b"once", ack_req=1), 1, source=PEER)
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(1), payload=b"two", ack_req=0), 1, source=PEER)
    out(qp)
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(0), payload=b"once", ack_req=0), 2, source=PEER)
    assert out(qp) == []  # no AckReq: dropped silently
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(0), payload=b"once", ack_req=1), 3, source=PEER)
    assert [(r.opcode_name, r.bth.psn) for r, _ in out(qp)] == [("ACKNOWLEDGE", P(1))]  # ePSN - 1
    evs = events(qp)
    assert [e for e in evs if isinstance(e, MessageReceived)][0] == MessageReceived(r1, b"once")
    assert len(evs) == 2 and qp.counters()["duplicate_requests"] == 2


def _region(qp: QueuePair, size: int = 4096, access=Access.ALL):
    buf = bytearray(size)
    return buf, qp.register(buf, access)


def test_responder_write_read_and_duplicate_read_replay() -> None:
    qp = make_qp()
    buf, mr = _region(qp)
    data = bytes(range(256)) * 2 + b"tail"
    qp.receive_datagram(
        pkt(Op.RDMA_WRITE_FIRST, P(0), (RETH.make(va=100, rkey=mr.key, dma_len=516),), data[:256]), 1, source=PEER
    )
    qp.receive_datagram(pkt(Op.RDMA_WRITE_MIDDLE, P(1), (), data[256:512]), 1, source=PEER)
    qp.receive_datagram(pkt(Op.RDMA_WRITE_LAST, P(2), (), data[512:], ack_req=1), 1, source=PEER)
    assert buf[100:616] == data
    assert [(r.opcode_name, r.bth.psn, r.aeth.msn) for r, _ in out(qp)] == [("ACKNOWLEDGE", P(2), 1)]
    qp.receive_datagram(pkt(Op.RDMA_READ_REQUEST, P(3), (RETH.make(va=100, rkey=mr.key, dma_len=516),)), 2, source=PEER)
    got = [r for r, _ in out(qp, 2)]
    assert [(r.opcode_name, r.bth.psn, r.aeth is not None) for r in got] == [
        ("RDMA_READ_RESPONSE_FIRST", P(3), True),
        ("RDMA_READ_RESPONSE_MIDDLE", P(4), False),
        ("RDMA_READ_RESPONSE_LAST", P(5), True),
    ]
    assert b"".join(r.payload for r in got) == data
    assert qp.responder.epsn == P(6)
    # the requester lost P(4) and re-issues the READ for the remainder: a sub-range replay
    qp.receive_datagram(pkt(Op.RDMA_READ_REQUEST, P(4), (RETH.make(va=356, rkey=mr.key, dma_len=260),)), 3, source=PEER)
    got = [r for r, _ in out(qp, 3)]
    assert [(r.opcode_name, r.bth.psn) for r in got] == [
        ("RDMA_READ_RESPONSE_FIRST", P(4)),
        ("RDMA_READ_RESPONSE_LAST", P(5)),
    ]
    assert b"".join(r.payload for r in got) == data[256:]
    assert qp.counters()["read_replays"] == 1


def test_responder_write_with_immediate_consumes_a_receive_or_rnr() -> None:
    qp = make_qp(min_rnr_timer=5)
    buf, mr = _region(qp)
    wr = pkt(
        Op.RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        P(0),
        (RETH.make(va=0, rkey=mr.key, dma_len=3), IMMDT.make(imm=7)),
        b"abc",
        ack_req=1,
    )
    qp.receive_datagram(wr, 1, source=PEER)
    assert [(r.bth.psn, r.aeth.syndrome) for r, _ in out(qp)] == [(P(0), 0x25)]  # RNR NAK, code 5
    assert qp.responder.epsn == P(0) and bytes(buf[:3]) == bytes(3)
    h = qp.post_recv()
    qp.receive_datagram(wr, 2, source=PEER)
    assert [(r.bth.psn, r.aeth.syndrome) for r, _ in out(qp)] == [(P(0), 0x1F)]
    assert events(qp) == [MessageReceived(h, b"", 7, 3)] and bytes(buf[:3]) == b"abc"


def test_responder_send_without_receive_is_rnr_nak() -> None:
    qp = make_qp()
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(0), payload=b"x", ack_req=1), 1, source=PEER)
    assert [(r.bth.psn, r.aeth.syndrome) for r, _ in out(qp)] == [(P(0), 0x21)]
    assert qp.counters()["rnr_naks_sent"] == 1 and qp.state is QpState.RTS


@pytest.mark.parametrize(
    ("case", "syndrome"),
    [
        ("bad_rkey", 0x62),
        ("out_of_bounds", 0x62),
        ("no_write_access", 0x62),
        ("no_read_access", 0x62),
        ("no_atomic_access", 0x62),
        ("middle_without_first", 0x61),
        ("short_first", 0x61),
        ("write_longer_than_dma_len", 0x61),
        ("misaligned_atomic", 0x61),
        ("buffer_too_small", 0x61),
        ("response_opcode_as_request", None),
    ],
)
def test_responder_refusals(case: str, syndrome: int | None) -> None:
    qp = make_qp()
    buf, mr = _region(
        qp, 1024, Access.REMOTE_WRITE if case in ("no_read_access", "no_atomic_access") else Access.REMOTE_READ
    )
    _, rw = _region(qp, 1024, Access.ALL)
    reth = lambda va, n, key=rw.key: (RETH.make(va=va, rkey=key, dma_len=n),)  # noqa: E731
    recv = qp.post_recv(4)
    d = {
        "bad_rkey": pkt(Op.RDMA_WRITE_ONLY, P(0), reth(0, 1, key=12345), b"x"),
        "out_of_bounds": pkt(Op.RDMA_WRITE_ONLY, P(0), reth(1020, 8), bytes(8)),
        "no_write_access": pkt(Op.RDMA_WRITE_ONLY, P(0), reth(0, 1, key=mr.key), b"x"),
        "no_read_access": pkt(Op.RDMA_READ_REQUEST, P(0), reth(0, 8, key=mr.key)),
        "no_atomic_access": pkt(Op.FETCH_ADD, P(0), (ATOMIC_ETH.make(va=0, rkey=mr.key, swap_add=1),)),
        "middle_without_first": pkt(Op.SEND_MIDDLE, P(0), (), bytes(256)),
        "short_first": pkt(Op.SEND_FIRST, P(0), (), bytes(100)),
        "write_longer_than_dma_len": pkt(Op.RDMA_WRITE_ONLY, P(0), reth(0, 2), b"xyz"),
        "misaligned_atomic": pkt(Op.COMPARE_SWAP, P(0), (ATOMIC_ETH.make(va=4, rkey=rw.key),)),
        "buffer_too_small": pkt(Op.SEND_ONLY, P(0), (), b"12345"),
        "response_opcode_as_request": None,
    }[case]
    if d is None:  # a READ response to a QP with no READ outstanding: counted, dropped, no NAK
        qp.receive_datagram(pkt(Op.RDMA_READ_RESPONSE_ONLY, P(0), (AETH.make(),), b"x"), 1, source=PEER)
        assert out(qp) == [] and qp.counters()["stale_responses"] == 1 and qp.state is QpState.RTS
        return
    qp.receive_datagram(d, 1, source=PEER)
    assert [(r.opcode_name, r.bth.psn, r.aeth.syndrome) for r, _ in out(qp)] == [("ACKNOWLEDGE", P(0), syndrome)]
    assert qp.state is QpState.ERR
    evs = events(qp)
    assert all(isinstance(e, (OpFailed, QpErrored)) for e in evs)
    failed = [e for e in evs if isinstance(e, OpFailed)]
    assert [e.handle for e in failed] == [recv]
    want = E.LocalLengthError if case == "buffer_too_small" else E.Flushed
    assert isinstance(failed[0].error, want)
    assert bytes(buf) == bytes(1024)
    # in ERR further packets are dropped, not answered
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(0), (), b"x", ack_req=1), 2, source=PEER)
    assert out(qp) == [] and qp.counters()["dropped_not_ready"] == 1


def test_responder_atomics_and_duplicate_atomic_not_executed_twice() -> None:
    qp = make_qp()
    buf, mr = _region(qp, 64)
    buf[8:16] = (40).to_bytes(8, "little")
    fa = pkt(Op.FETCH_ADD, P(0), (ATOMIC_ETH.make(va=8, rkey=mr.key, swap_add=2),))
    qp.receive_datagram(fa, 1, source=PEER)
    qp.receive_datagram(
        pkt(Op.COMPARE_SWAP, P(1), (ATOMIC_ETH.make(va=8, rkey=mr.key, swap_add=7, compare=42),)), 1, source=PEER
    )
    got = [r for r, _ in out(qp)]
    assert [(r.opcode_name, r.bth.psn, r.atomic_ack.orig) for r in got] == [
        ("ATOMIC_ACKNOWLEDGE", P(0), 40),
        ("ATOMIC_ACKNOWLEDGE", P(1), 42),
    ]
    assert int.from_bytes(buf[8:16], "little") == 7
    qp.receive_datagram(fa, 2, source=PEER)  # duplicate: the stored result again, memory untouched
    assert [(r.bth.psn, r.atomic_ack.orig) for r, _ in out(qp)] == [(P(0), 40)]
    assert int.from_bytes(buf[8:16], "little") == 7


def test_bad_icrc_wrong_qp_wrong_source_and_garbage_are_dropped() -> None:
    qp = make_qp()
    qp.post_recv()
    good = pkt(Op.SEND_ONLY, P(0), payload=b"x", ack_req=1)
    bad = bytearray(good)
    bad[-1] ^= 1
    qp.receive_datagram(bytes(bad), 1, source=PEER)
    qp.receive_datagram(pkt(Op.SEND_ONLY, P(0), payload=b"x", qpn=0x99), 1, source=PEER)
    qp.receive_datagram(good, 1, source="10.9.9.9")
    qp.receive_datagram(b"\x00" * 3, 1, source=PEER)
    c = qp.counters()
    assert c["icrc_errors"] == 2 and c["dropped_wrong_qp"] == 1 and c["dropped_wrong_source"] == 1
    assert out(qp) == [] and events(qp) == []


def test_ce_mark_sends_one_cnp_per_holdoff() -> None:
    from uet.roce import DcqcnConfig

    qp = make_qp(dcqcn=DcqcnConfig.paper(100e9))  # hold-off 50 us
    for _ in range(3):
        qp.post_recv()
    for i, t in enumerate((1_000, 30_000, 51_000)):
        qp.receive_datagram(pkt(Op.SEND_ONLY, P(i), payload=b"x"), t, source=PEER, ecn=3)
        got = out(qp, t)
        if i == 1:
            assert got == []
            continue
        ((r, tx),) = got
        assert r.opcode == Op.CNP and r.bth.becn == 1 and r.bth.dest_qp == PEER_QPN and r.bth.psn == 0
        assert tx.dscp == 48 and tx.ecn == 0
    assert qp.np is not None and qp.counters()["cnps_sent"] == 2 and qp.np.marked == 3


def test_cnp_received_cuts_the_rate() -> None:
    from uet.roce import DcqcnConfig

    qp = make_qp(dcqcn=DcqcnConfig.paper(100e9))
    cnp = seal(encode_roce(BTH.make(opcode=Op.CNP, becn=1, dest_qp=MY_QPN)), net.ip_bytes(PEER), net.ip_bytes(ME), ENT)
    qp.receive_datagram(cnp, 10, source=PEER)
    assert qp.rp is not None and qp.rp.rate == 50e9 and qp.counters()["cnps_received"] == 1


def test_state_table() -> None:
    assert transition(QpState.RESET, QpState.INIT) is QpState.INIT
    for old, new in ((QpState.RESET, QpState.RTS), (QpState.ERR, QpState.RTS), (QpState.RTS, QpState.RTR)):
        with pytest.raises(QpStateError):
            transition(old, new)
    qp = QueuePair(ME, MY_QPN, config=cfg(), seed=1)
    assert qp.state is QpState.INIT
    with pytest.raises(QpStateError):
        qp.post_send(b"x")  # not connected
    qp.connect(PEER, PEER_QPN, 0)
    with pytest.raises(QpStateError):
        qp.connect(PEER, PEER_QPN, 0)
    qp.to_error("test")
    qp.reset()
    assert qp.state is QpState.INIT


def test_responder_bounds_what_a_peer_can_queue() -> None:
    """READs beyond max_rd_atomic still being answered, and a SEND beyond max_message into a
    receive posted without a length, are refused (NAK invalid request) instead of queued."""
    qp = make_qp(max_rd_atomic=2)
    _, mr = _region(qp, 1 << 16)
    for i in range(2):
        qp.receive_datagram(
            pkt(Op.RDMA_READ_REQUEST, P(i * 64), (RETH.make(va=0, rkey=mr.key, dma_len=1 << 14),)), 1, source=PEER
        )
    qp.receive_datagram(pkt(Op.RDMA_READ_REQUEST, P(128), (RETH.make(va=0, rkey=mr.key, dma_len=8),)), 1, source=PEER)
    assert qp.state is QpState.ERR and qp.counters()["requests_refused"] == 1
    qp2 = QueuePair(ME, MY_QPN, config=cfg(max_message=512), seed=7)
    qp2.connect(PEER, PEER_QPN, PEER_PSN)
    h = qp2.post_recv()
    qp2.receive_datagram(pkt(Op.SEND_FIRST, P(0), (), bytes(256)), 1, source=PEER)
    qp2.receive_datagram(pkt(Op.SEND_MIDDLE, P(1), (), bytes(256)), 1, source=PEER)
    qp2.receive_datagram(pkt(Op.SEND_MIDDLE, P(2), (), bytes(256)), 1, source=PEER)
    assert [(r.bth.psn, r.aeth.syndrome) for r, _ in out(qp2)] == [(P(2), 0x61)]
    assert isinstance(events(qp2)[0].error, E.LocalLengthError) and h == 1


def test_event_log_records() -> None:
    from uet.roce import DcqcnConfig

    recs: list[dict] = []
    qp = QueuePair(ME, MY_QPN, config=cfg(dcqcn=DcqcnConfig.paper(100e9)), seed=7, start_psn=S0, log=recs.append)
    qp.connect(PEER, PEER_QPN, PEER_PSN)
    qp.post_send(b"x" * 300)
    out(qp, 5)  # the rate limiter lets one packet go at t = 5
    qp.receive_datagram(ack(S0, NakCode.PSN_SEQUENCE_ERROR), 6, source=PEER)
    cnp = seal(encode_roce(BTH.make(opcode=Op.CNP, becn=1, dest_qp=MY_QPN)), net.ip_bytes(PEER), net.ip_bytes(ME), ENT)
    qp.receive_datagram(cnp, 7, source=PEER)
    qp.receive_datagram(ack(S0, NakCode.REMOTE_ACCESS_ERROR), 8, source=PEER)
    evs = [(r["ev"], r["t"]) for r in recs]
    assert evs == [("tx", 5), ("rx", 6), ("rewind", 6), ("rx", 7), ("rate", 7), ("rx", 8), ("qp_error", 8)]
    assert recs[0]["op"] == Op.SEND_FIRST and recs[0]["psn"] == S0 and recs[0]["dscp"] == 26
    assert recs[4]["rate"] == 50e9 and recs[4]["alpha"] == 1.0


def test_requester_ignores_old_and_future_acks() -> None:
    qp = make_qp()
    h = qp.post_send(b"a")
    out(qp)
    qp.receive_datagram(ack(psn_add(S0, -1)), 1, source=PEER)  # older than una
    qp.receive_datagram(ack(psn_add(S0, 5)), 2, source=PEER)  # beyond anything sent
    qp.receive_datagram(ack(psn_add(S0, 5), NakCode.PSN_SEQUENCE_ERROR), 3, source=PEER)
    assert events(qp) == [] and qp.requester.una == S0 and qp.counters()["stale_naks"] == 1
    qp.receive_datagram(ack(S0), 4, source=PEER)
    assert events(qp) == [SendCompleted(h)]


def test_responder_drops_duplicates_it_has_no_state_for() -> None:
    """A duplicate READ older than the stored READ states, or a duplicate atomic whose result was
    forgotten, is dropped (the requester's timeout recovers), never executed again."""
    qp = make_qp(max_rd_atomic=1)
    buf, mr = _region(qp, 64)
    qp.receive_datagram(pkt(Op.FETCH_ADD, P(0), (ATOMIC_ETH.make(va=0, rkey=mr.key, swap_add=1),)), 1, source=PEER)
    qp.receive_datagram(pkt(Op.FETCH_ADD, P(1), (ATOMIC_ETH.make(va=0, rkey=mr.key, swap_add=1),)), 1, source=PEER)
    qp.receive_datagram(pkt(Op.RDMA_READ_REQUEST, P(2), (RETH.make(va=0, rkey=mr.key, dma_len=8),)), 1, source=PEER)
    out(qp)
    qp.receive_datagram(pkt(Op.RDMA_READ_REQUEST, P(3), (RETH.make(va=0, rkey=mr.key, dma_len=8),)), 2, source=PEER)
    out(qp)
    qp.receive_datagram(pkt(Op.FETCH_ADD, P(0), (ATOMIC_ETH.make(va=0, rkey=mr.key, swap_add=1),)), 3, source=PEER)
    qp.receive_datagram(pkt(Op.RDMA_READ_REQUEST, P(2), (RETH.make(va=0, rkey=mr.key, dma_len=8),)), 3, source=PEER)
    assert out(qp, 3) == []
    assert int.from_bytes(buf[:8], "little") == 2 and qp.counters()["duplicate_requests"] == 2


def test_timers_never_stay_in_the_past() -> None:
    """After handle_timer(t) and datagrams_to_send(t), get_timer() is None or later than t, also
    when the rate limiter holds the packets an RNR wait released (an engine would spin otherwise)."""
    from uet.roce import DcqcnConfig

    qp = make_qp(dcqcn=DcqcnConfig.paper(1e8))  # 100 Mb/s: a packet takes longer than the RNR wait
    qp.post_send(bytes(256 * 3))
    out(qp, 0)
    qp.receive_datagram(ack(S0, 0x20 | 1), 100, source=PEER)
    t = 100
    for _ in range(50):
        nxt = qp.get_timer()
        if nxt is None:
            break
        assert nxt > t or nxt == t == 100, (nxt, t)
        t = nxt
        qp.handle_timer(t)
        out(qp, t)
        assert (qp.get_timer() or t + 1) > t


def test_responder_acks_never_overtake_queued_read_responses() -> None:
    """A READ's responses and the ACK of a later SEND leave in PSN order, also when the READ
    responses wait for the rate limiter (an overtaking ACK would make the requester think the
    responses were lost and send everything again). Found by the property test."""
    from uet.roce import DcqcnConfig

    for dcqcn in (None, DcqcnConfig.paper(1e9)):
        qp = make_qp(dcqcn=dcqcn)
        _, mr = _region(qp, 4096)
        qp.post_recv()
        qp.receive_datagram(
            pkt(Op.RDMA_READ_REQUEST, P(0), (RETH.make(va=0, rkey=mr.key, dma_len=300),)), 0, source=PEER
        )
        qp.receive_datagram(pkt(Op.SEND_ONLY, P(2), (), b"x", ack_req=1), 0, source=PEER)
        got: list[tuple[str, int]] = []
        t = 0
        while len(got) < 3 and t < 100_000:
            got += [(r.opcode_name, r.bth.psn) for r, _ in out(qp, t)]
            t = qp.get_timer() or t + 1000
        assert got == [("RDMA_READ_RESPONSE_FIRST", P(0)), ("RDMA_READ_RESPONSE_LAST", P(1)), ("ACKNOWLEDGE", P(2))]
