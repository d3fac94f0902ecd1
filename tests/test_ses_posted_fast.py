"""The fast path's expected list (sans-I/O, exact packets): a message whose first-arriving packet
finds a matching posted receive with room for it is placed straight into that receive's buffer
by the message layer, and the receive completes (or fails) exactly once."""

from __future__ import annotations

import random

from ses_response import response_fields

from uet.pds import Mode
from uet.pds.events import Delivery
from uet.pds.target import normalize_response
from uet.ses import RecvCompleted, SesFep
from uet.ses.message import Message, MessageConfig
from uet.ses.segmenter import Segmenter
from uet.ses.target import TargetConfig
from uet.wire.ses import RESPONSE, ReturnCode

PEER, ME, JOB, PID = "10.0.0.1", "10.0.0.2", 42, 1
SEC = 1_000_000_000


def fep() -> SesFep:
    return SesFep(
        ME,
        target=TargetConfig(max_payload=1024),
        rng=random.Random(1),
        fast=MessageConfig(payload_size=1024, reassembly_timeout_ns=5 * SEC),
        default=(PID, 0, JOB),
    )


def packets(data: bytes, mid: int, **kw) -> list[tuple[bytes, bytes]]:
    seg = Segmenter(job_id=JOB, initiator=7, payload_size=1024)
    return [(s, bytes(p)) for s, p, _som, _eom in seg.packets(data, mid, pid_on_fep=PID, **kw)]


def deliver(f: SesFep, ses: bytes, payload: bytes, now: int = 0, mode: Mode = Mode.RUD, retx: bool = False):
    f.now = now
    return f.on_deliver(Delivery(PEER, mode, 5, 0, 3, ses, payload, 0, retx))


def events(f: SesFep) -> list:
    out = []
    while (e := f.next_event()) is not None:
        out.append(e)
    return out


def test_out_of_order_packets_land_in_the_posted_buffer_with_header_data() -> None:
    f = fep()
    buf = bytearray(5000)
    recv = f.post_recv(buf, context="ctx")
    data = random.Random(3).randbytes(4500)
    pk = packets(data, 10, header_data=0x1122)
    order = [2, 4, 0, 3, 1]
    answers = [deliver(f, *pk[i]) for i in order]
    assert answers[:-1] == [None] * 4  # default responses until the message is whole
    assert response_fields(answers[-1][1]) == (1, ReturnCode.OK, 10, 4500)
    (ev,) = events(f)
    assert isinstance(ev, RecvCompleted)
    got = (ev.recv_id, ev.context, ev.return_code, ev.length, ev.message_length)
    assert got == (recv.id, "ctx", ReturnCode.OK, 4500, 4500)
    assert ev.header_data == 0x1122 and ev.source == PEER and not ev.unexpected
    assert bytes(buf[:4500]) == data and bytes(buf[4500:]) == bytes(500)
    assert f.counters["fast_messages"] == 1 and f.counters["tgt_requests"] == 0
    assert f.fast is not None and f.fast.partial_count == 0


def test_single_packet_and_empty_messages() -> None:
    f = fep()
    b1, b2 = bytearray(8), bytearray(8)
    r1, r2 = f.post_recv(b1), f.post_recv(b2)
    (p,) = packets(b"hello", 1)
    assert response_fields(deliver(f, *p)[1]) == (1, ReturnCode.OK, 1, 5)
    (p,) = packets(b"", 2)
    assert response_fields(deliver(f, *p)[1]) == (1, ReturnCode.OK, 2, 0)
    e1, e2 = events(f)
    assert (e1.recv_id, e1.length, bytes(b1[:5])) == (r1.id, 5, b"hello")
    assert (e2.recv_id, e2.length, e2.return_code) == (r2.id, 0, ReturnCode.OK)


def test_duplicates_are_counted_and_the_receive_completes_once() -> None:
    f = fep()
    buf = bytearray(3000)
    f.post_recv(buf)
    pk = packets(b"a" * 1024 + b"b" * 1024 + b"c" * 952, 20)
    deliver(f, *pk[0], mode=Mode.RUDI)
    assert deliver(f, *pk[0], mode=Mode.RUDI) is None  # a duplicate before completion: default answer, no copy
    deliver(f, *pk[1], mode=Mode.RUDI)
    done = deliver(f, *pk[2], mode=Mode.RUDI)
    again = deliver(f, *pk[2], mode=Mode.RUDI, retx=True)  # a retransmission after completion: same answer
    assert done == again
    (ev,) = events(f)
    assert ev.length == 3000 and bytes(buf) == b"a" * 1024 + b"b" * 1024 + b"c" * 952
    assert f.fast is not None and f.fast.counters["duplicate_packets"] == 1


def test_two_messages_take_receives_in_first_packet_arrival_order() -> None:
    f = fep()
    b1, b2 = bytearray(2048), bytearray(2048)
    r1, r2 = f.post_recv(b1), f.post_recv(b2)
    m1, m2 = packets(b"1" * 2048, 30), packets(b"2" * 2048, 31)
    deliver(f, *m2[1])  # message 31 arrives first: it takes the first receive
    deliver(f, *m1[0])
    deliver(f, *m1[1])
    deliver(f, *m2[0])
    e1, e2 = events(f)
    assert (e1.recv_id, bytes(b2)) == (r2.id, b"1" * 2048)
    assert (e2.recv_id, bytes(b1)) == (r1.id, b"2" * 2048)


def test_a_bad_packet_fails_the_receive_once_and_later_packets_get_the_error() -> None:
    f = fep()
    buf = bytearray(3000)
    recv = f.post_recv(buf)
    pk = packets(b"x" * 3000, 40)
    longer = packets(b"x" * 4000, 40)  # same message id, different request_length
    deliver(f, *pk[0])
    r = deliver(f, *longer[1])
    assert response_fields(r[1])[1] == ReturnCode.OP_VIOLATION
    r = deliver(f, *pk[2])
    assert response_fields(r[1])[1] == ReturnCode.OP_VIOLATION
    (ev,) = events(f)
    assert (ev.recv_id, ev.return_code, ev.length, ev.message_length) == (recv.id, ReturnCode.OP_VIOLATION, 0, 3000)
    assert not events(f)


def test_an_idle_partial_message_fails_its_receive_with_dropped() -> None:
    f = fep()
    recv = f.post_recv(bytearray(3000))
    pk = packets(b"y" * 3000, 50)
    deliver(f, *pk[0], now=1 * SEC)
    f.expire(3 * SEC)
    assert not events(f)
    f.expire(7 * SEC)
    (ev,) = events(f)
    assert (ev.recv_id, ev.return_code) == (recv.id, ReturnCode.DROPPED)
    assert f.cancel_recv(recv) is False  # already taken by the message


def test_receives_the_fast_path_leaves_to_the_target_engine() -> None:
    f = fep()
    small = f.post_recv(bytearray(100))  # too short, no truncation: the engine answers TOO_LONG
    pk = packets(b"z" * 300, 60)
    r = deliver(f, *pk[0])
    assert response_fields(r[1])[1] == ReturnCode.TOO_LONG
    (ev,) = events(f)
    assert (ev.recv_id, ev.return_code) == (small.id, ReturnCode.TOO_LONG)
    assert f.default is not None
    other_job = f.target.post_recv(f.default, bytearray(100), job=JOB + 1)  # restricted to another job
    (p,) = packets(b"w" * 10, 61)
    r = deliver(f, *p)
    assert response_fields(r[1])[1] == ReturnCode.BAD_JOB_ID
    assert f.counters["fast_messages"] == 0 and f.cancel_recv(other_job) is True


def test_the_response_says_which_list_the_message_went_to() -> None:
    """§6.4: list 0 for a posted receive (plain response), 1 for the overflow list, which is a
    guaranteed-delivery response PDS keeps until cleared (§2.7); a RUDI-style duplicate of a
    completed message gets the same answer again."""
    f = fep()
    f.post_recv(bytearray(100))
    (p,) = packets(b"e" * 50, 70)
    expected = deliver(f, *p, mode=Mode.RUDI)
    (p2,) = packets(b"o" * 50, 71)
    overflow = deliver(f, *p2, mode=Mode.RUDI)
    assert RESPONSE.unpack(expected[1])[0] == 0 and normalize_response(expected)[2] is False
    assert RESPONSE.unpack(overflow[1])[0] == 1 and normalize_response(overflow)[2] is True
    assert response_fields(overflow[1])[1:] == (ReturnCode.OK, 71, 50)
    assert deliver(f, *p2, mode=Mode.RUDI, retx=True) == overflow
    assert deliver(f, *p, mode=Mode.RUDI, retx=True) == expected


def test_a_waiting_receive_without_buffer_is_reserved_by_one_message_on_the_expected_list() -> None:
    """The endpoint's ``recv()`` posts no buffer; the first new message whose first packet finds
    one waiting reserves it: that message is reassembled by the message layer as before but
    reported on the expected list (plain response, nothing for PDS to keep) and handed to that
    receive when whole; the next matching message takes the overflow list (the receive is no
    longer waiting). The hook sees the arrival address."""
    f = fep()
    asked: list[tuple[bool, int, int, str]] = []
    got: list[tuple[str, bytes | None]] = []
    waiting = ["w1"]

    def reserve(tagged: bool, tag: int, initiator: int, source: str) -> str | None:
        asked.append((tagged, tag, initiator, source))
        return waiting.pop(0) if tag == 1 and waiting else None

    def reserved(token: str, m: Message | None) -> bool:
        got.append((token, None if m is None else bytes(m.data)))
        return True

    f.reserve = reserve
    f.on_reserved = reserved
    (p1,) = packets(b"w" * 30, 80, tag=1)
    (p2,) = packets(b"n" * 30, 81, tag=2)
    (p3,) = packets(b"x" * 30, 83, tag=1)
    r1, r2, r3 = deliver(f, *p1), deliver(f, *p2), deliver(f, *p3)
    assert RESPONSE.unpack(r1[1])[0] == 0 and normalize_response(r1)[2] is False
    for r in (r2, r3):
        assert RESPONSE.unpack(r[1])[0] == 1 and normalize_response(r)[2] is True
    assert asked == [(True, 1, 7, PEER), (True, 2, 7, PEER), (True, 1, 7, PEER)]
    assert got == [("w1", b"w" * 30)]
    assert [m.tag for m in f.unexpected_messages] == [2, 1]  # no on_unexpected hook here
    waiting.append("w2")
    big = packets(b"b" * 3000, 82, tag=1)  # multi-packet: reserved by its first packet
    for p in big:
        r = deliver(f, *p)
    assert RESPONSE.unpack(r[1])[0] == 0 and response_fields(r[1])[1:] == (ReturnCode.OK, 82, 3000)
    assert got[-1] == ("w2", b"b" * 3000) and not waiting
    assert (f.counters["fast_expected_waiting"], f.counters["fast_unexpected"]) == (2, 2)


def test_unexpected_list_is_bounded_by_bytes_and_nacks_when_full() -> None:
    """Issue 15 item 15: the fast path's unexpected list grew without bound (40,000 × 4 KiB
    unreceived messages took 180 MB). With ``max_unexpected_bytes`` reached, a new message's
    first packet raises SesNack (PDS: NACK NO_SES_MSG_AVAIL, §2.6 step 7); once the application
    takes a message, the resend is accepted."""
    import pytest

    from uet.pds import SesNack
    from uet.ses.fep import ENTRY_OVERHEAD
    from uet.ses.matching import MatchLimits

    f = SesFep(
        ME,
        target=TargetConfig(max_payload=1024),
        limits=MatchLimits(max_unexpected_bytes=2 * (1000 + ENTRY_OVERHEAD)),
        rng=random.Random(1),
        fast=MessageConfig(payload_size=1024),
        default=(PID, 0, JOB),
    )
    for mid in (1, 2):
        ((ses, pl),) = packets(bytes([mid]) * 1000, mid)
        assert response_fields(deliver(f, ses, pl)[1])[1] == ReturnCode.OK
    assert len(f.unexpected_messages) == 2 and f.unexpected_messages.nbytes == 2 * (1000 + ENTRY_OVERHEAD)
    ((ses3, pl3),) = packets(b"\x03" * 1000, 3)
    with pytest.raises(SesNack):
        deliver(f, ses3, pl3)
    assert f.counters["fast_unexpected_full"] == 1 and len(f.unexpected_messages) == 2
    m = f.take_unexpected(tagged=False)
    assert isinstance(m, Message) and bytes(m.data) == b"\x01" * 1000  # the fast path's own message
    assert response_fields(deliver(f, ses3, pl3)[1])[1] == ReturnCode.OK  # the resend gets in
    assert [bytes(x.data)[:1] for x in f.unexpected_messages] == [b"\x02", b"\x03"]
