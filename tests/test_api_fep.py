"""SesFep with the unexpected-message fast path (sans-I/O, exact packets): which requests the
fast path takes, which go to the full target engine, and how receives find both."""

from __future__ import annotations

import random

import pytest
from ses_response import response_fields

import uet
from uet.pds import Mode
from uet.pds.events import Delivery
from uet.ses import RecvCompleted, SesFep
from uet.ses.initiator import InitiatorConfig, SesAddress
from uet.ses.matching import PostedReceive
from uet.ses.message import Message, MessageConfig
from uet.ses.segmenter import Segmenter
from uet.ses.target import TargetConfig
from uet.wire.ses import ReturnCode, SesOpcode

PEER, ME, JOB, PID = "10.0.0.1", "10.0.0.2", 42, 1


def fep() -> SesFep:
    return SesFep(
        ME,
        target=TargetConfig(max_payload=1024),
        rng=random.Random(1),
        fast=MessageConfig(payload_size=1024),
        default=(PID, 0, JOB),
    )


def packets(data: bytes, mid: int, *, tag: int | None = None, pid: int = PID) -> list[tuple[bytes, bytes]]:
    seg = Segmenter(job_id=JOB, initiator=7, payload_size=1024)
    return [(s, bytes(p)) for s, p, _som, _eom in seg.packets(data, mid, pid_on_fep=pid, tag=tag)]


def deliver(f: SesFep, ses: bytes, payload: bytes, nh: int = 3, mode: Mode = Mode.RUD, retx: bool = False):
    return f.on_deliver(Delivery(PEER, mode, 5, 0, nh, ses, payload, 0, retx))


def events(f: SesFep) -> list:
    out = []
    while (e := f.next_event()) is not None:
        out.append(e)
    return out


def test_unexpected_messages_take_the_fast_path_and_match_by_tag() -> None:
    f = fep()
    data = bytes(range(256)) * 10
    pk = packets(data, 100, tag=0xAB)
    for ses, pl in reversed(pk):  # RUD: any order
        r = deliver(f, ses, pl)
    assert r is not None and response_fields(r[1])[1] == ReturnCode.OK
    assert f.counters["fast_messages"] == 1 and f.counters["tgt_requests"] == 0
    assert f.take_unexpected(tagged=False) is None  # untagged receives never take tagged messages
    assert f.take_unexpected(tagged=True, tag=0xAC) is None
    m = f.take_unexpected(tagged=True, tag=0xA0, ignore=0x0F)
    assert isinstance(m, Message) and m.data == data and m.tag == 0xAB and m.source == PEER


def test_posted_receive_with_room_takes_the_fast_path_into_its_buffer() -> None:
    f = fep()
    buf = bytearray(4000)
    recv = f.post_recv(buf, tagged=True, tag=5)
    data = b"z" * 2500
    for ses, pl in packets(data, 200, tag=5):
        r = deliver(f, ses, pl)
    assert f.counters["fast_messages"] == 1 and f.counters["tgt_requests"] == 0
    assert r is not None and response_fields(r[1]) == (1, ReturnCode.OK, 200, 2500)
    (ev,) = events(f)
    assert isinstance(ev, RecvCompleted) and ev.recv_id == recv.id and ev.length == 2500 and not ev.unexpected
    assert bytes(buf[:2500]) == data and ev.tag == 5


def test_posted_receive_that_would_truncate_sends_the_message_to_the_target_engine() -> None:
    f = fep()
    buf = bytearray(2000)
    recv = f.post_recv(buf, tagged=True, tag=5, truncate=True)
    data = b"z" * 2500
    for ses, pl in packets(data, 200, tag=5):
        deliver(f, ses, pl)
    assert f.counters["fast_messages"] == 0 and f.counters["tgt_requests"] == 3
    (ev,) = events(f)
    assert isinstance(ev, RecvCompleted) and ev.recv_id == recv.id and ev.length == 2000 and not ev.unexpected
    assert ev.message_length == 2500 and bytes(buf) == data[:2000]


def test_receive_posted_while_a_fast_message_arrives_gets_it_at_completion() -> None:
    f = fep()
    pk = packets(b"q" * 3000, 300)
    deliver(f, *pk[0])  # the message starts on the fast path (no receive yet)
    buf = bytearray(3000)
    recv = f.post_recv(buf)
    for p in pk[1:]:
        deliver(f, *p)
    (ev,) = events(f)
    assert ev.recv_id == recv.id and ev.unexpected and ev.length == 3000 and bytes(buf) == b"q" * 3000
    assert not f.unexpected_messages


def test_requests_the_fast_path_declines_get_the_engine_answer() -> None:
    f = fep()
    ses, pl = packets(b"x", 400, pid=9)[0]
    r = deliver(f, ses, pl)
    assert response_fields(r[1])[1] == ReturnCode.BAD_PID  # relative addressing, unknown PIDonFEP
    # a medium-header send from the engine lands on the engine's unexpected list; a receive
    # without buffer gets a receive of exactly its length posted for it
    ini = SesFep(PEER, initiator=InitiatorConfig(initiator_id=7, max_payload=1024), rng=random.Random(3)).initiator
    ini.send(SesAddress(ME, PID, 0, 0, JOB), b"medium", tag=3)
    (p,) = ini.packets_to_send()
    assert p.next_hdr == 2  # medium header
    deliver(f, p.ses, bytes(p.payload), nh=2)
    assert f.has_unexpected() and f.take_unexpected(tagged=False) is None
    recv = f.take_unexpected(tagged=True, tag=3)
    assert isinstance(recv, PostedReceive)
    (ev,) = events(f)
    assert isinstance(recv.buffer, memoryview)
    assert ev.recv_id == recv.id and bytes(recv.buffer) == b"medium"


def test_fast_path_duplicate_and_too_long_receive() -> None:
    f = fep()
    ses, pl = packets(b"d" * 100, 500)[0]
    first = deliver(f, ses, pl, mode=Mode.RUDI)
    # a RUDI retransmission of a completed message: same answer, no 2nd copy (§2.14)
    again = deliver(f, ses, pl, mode=Mode.RUDI, retx=True)
    assert first == again and len(f.unexpected_messages) == 1
    small = f.post_recv(bytearray(10))
    (ev,) = events(f)
    assert ev.recv_id == small.id and ev.return_code == ReturnCode.TOO_LONG and ev.message_length == 100


def test_public_names() -> None:
    for name in ("Endpoint", "Access", "AmoOp", "AmoType", "ReturnCode", "UetError", "Peer", "SesError"):
        assert getattr(uet, name).__doc__
    assert set(uet.__all__) <= set(dir(uet))


# -- issue 15 follow-up: a request whose SES extension is missing ----------------------------------


@pytest.mark.parametrize("mode", [Mode.RUD, Mode.RUDI])
@pytest.mark.parametrize("op", [SesOpcode.ATOMIC, SesOpcode.TSEND_ATOMIC, SesOpcode.SYNC_WRITE])
def test_request_without_its_extension_is_refused_not_dropped(op: SesOpcode, mode: Mode) -> None:
    """Before the fix the PDS dropped such a request without ACK or NACK (its SES header ends
    where the extension should start), so the initiator retried until it gave up. Now SES answers
    it RC_OP_VIOLATION in the ACK / RUDI response (behaviour.md §6.3, §6.9; wire-format.md §8.5)."""
    from uet.pds import Acked, PdsCore
    from uet.wire.pds import NextHeader
    from uet.wire.ses import STANDARD, SesFlag

    a, b = PdsCore(PEER), PdsCore(ME)
    f = fep()
    b.on_deliver = f.on_deliver
    flags = SesFlag.SOM | SesFlag.EOM | SesFlag.REL
    ses = STANDARD[(1, "none")].encode((op, 0, flags, 9, 0, JOB, PID, 0, 0, 7, 0x55, 0, 8))
    a.submit(ME, mode, NextHeader.STANDARD, ses, b"", token="t", som=True, eom=True, now=0)
    for d, _dst, _ent in a.datagrams_to_send(0):
        b.receive_datagram(d, 1, source=PEER)
    replies = b.datagrams_to_send(1)
    assert len(replies) == 1 and b.counters.get("drop_ses_header", 0) == 0
    a.receive_datagram(replies[0][0], 2, source=ME)
    acked = [e for e in iter(a.next_event, None) if isinstance(e, Acked)]
    assert len(acked) == 1 and acked[0].token == "t"
    assert response_fields(acked[0].response)[1] == ReturnCode.OP_VIOLATION
