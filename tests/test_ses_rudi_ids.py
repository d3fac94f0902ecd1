"""A RUDI copy of a finished message is told from a new message reusing its id by the RUDI
packet id (behaviour.md §2.14; uet.ses.replay; issue 15). UUD never suppresses a message.

Before the fix both SES layers remembered a finished RUDI/UUD ``(peer, message id)`` for 10 s
and answered any later packet with that id from memory: a new message reusing the id (16-bit ids
wrap after 65,536 messages to one peer) was acknowledged and never delivered. UUD has no packet
id: a duplicate is still suppressed by id (the trade is in uet.ses.replay)."""

from __future__ import annotations

import pytest
from test_ses_target import EOM, PEER, REL, fep, mid_hdr, ok, res, som_hdr  # noqa: F401  (fep: a fixture)

from uet.pds import Mode
from uet.ses.fep import SesFep
from uet.ses.message import MessageConfig
from uet.ses.packets import parse_response
from uet.ses.reassembly import Reassembler
from uet.ses.replay import is_copy, widen
from uet.ses.segmenter import Segmenter
from uet.wire.pds import NextHeader
from uet.wire.ses import ReturnCode, SesOpcode

RUDI, UUD = int(Mode.RUDI), int(Mode.UUD)


def test_widen_and_is_copy_use_serial_arithmetic() -> None:
    ids = widen(widen(None, 0xFFFF_FFFE), 1)  # wraps through 0
    assert ids == (0xFFFF_FFFE, 1)
    assert all(is_copy(ids, p) for p in (0xFFFF_FFFE, 0xFFFF_FFFF, 0, 1))
    assert not is_copy(ids, 2) and not is_copy(ids, 0xFFFF_FFFD)
    assert widen(ids, None) is ids and is_copy(ids, None)  # a packet without an id is a copy
    # a RUDI packet never copies a finished message that carried no ids (a RUD/ROD one reusing the id)
    assert not is_copy(None, 5)


# -- the fast message layer (uet.ses.message.Reassembler) ------------------------------------------


def _reasm() -> Reassembler:
    return Reassembler(job_id=7, pid_on_fep=3, resource_index=0, config=MessageConfig(payload_size=100))


def _pkts(data: bytes, mid: int) -> list[tuple[bytes, bytes]]:
    seg = Segmenter(job_id=7, payload_size=100)
    return [(bytes(s), bytes(p)) for s, p, _a, _b in seg.packets(data, mid, pid_on_fep=3)]


def test_fast_layer_rudi_copy_is_answered_new_message_with_the_same_id_is_delivered() -> None:
    r = _reasm()
    first = _pkts(b"a" * 250, 11)  # three packets, RUDI packet ids 10..12
    resps = [r.deliver(PEER, RUDI, NextHeader.STANDARD, s, p, False, 10 + i) for i, (s, p) in enumerate(first)]
    assert [m.data for m in r.completed] == [b"a" * 250]
    # a retransmitted copy of the middle packet (same packet id): answered again, not delivered
    again = r.deliver(PEER, RUDI, NextHeader.STANDARD, *first[1], True, 11)
    assert again == resps[-1] and len(r.completed) == 1
    assert r.counters["duplicate_after_complete"] == 1
    # a new message reusing message id 11, with the next packet ids: delivered
    second = _pkts(b"second", 11)
    (resp,) = [r.deliver(PEER, RUDI, NextHeader.STANDARD, s, p, False, 13) for s, p in second]
    assert [m.data for m in r.completed] == [b"a" * 250, b"second"]
    assert isinstance(resp, tuple)
    rsp = parse_response(NextHeader.RESPONSE, resp[1])
    assert (rsp.return_code, rsp.message_id, rsp.modified_length) == (ReturnCode.OK, 11, 6)
    # and its own copy is again a copy
    r.deliver(PEER, RUDI, NextHeader.STANDARD, *second[0], True, 13)
    assert len(r.completed) == 2


def test_fast_layer_uud_duplicates_are_still_suppressed_by_id() -> None:
    r = _reasm()
    for i in range(3):
        (s, p), = _pkts(bytes([i]) * 5, 4)  # fmt: skip
        r.deliver(PEER, UUD, NextHeader.STANDARD, s, p)
    assert [m.data for m in r.completed] == [bytes(5)]


# -- the SES target engine (uet.ses.target.SesTarget) --------------------------------------------


def _handle(f: SesFep, ses: bytes, payload: bytes, mode: int, pkt_id: int | None, retx: bool = False):  # noqa: ANN202
    return f.target.handle(PEER, NextHeader.STANDARD, ses, payload, mode=mode, pdc=0, retx=retx, pkt_id=pkt_id)


@pytest.fixture
def safe(fep: SesFep):  # noqa: ANN201, F811
    from uet.ses.memory import Access

    return fep.memory.register(bytearray(64), Access.ALL | Access.IDEMPOTENT_SAFE)


def test_engine_rudi_write_copy_vs_new_write_reusing_the_id(fep: SesFep, safe) -> None:  # noqa: ANN001, F811
    w1 = som_hdr(SesOpcode.WRITE, REL | EOM, 5, 4, mb=safe.key, bo=0)
    assert _handle(fep, w1, b"one!", RUDI, 100).data == ok(5, 4)
    # a copy (same packet id) is answered from memory and does not write again
    safe.view[0:4] = b"XXXX"
    assert _handle(fep, w1, b"one!", RUDI, 100, retx=True).data == ok(5, 4)
    assert bytes(safe.view[0:4]) == b"XXXX" and fep.target.counters["duplicates"] == 1
    # a new write reusing message id 5 with a new packet id is executed
    w2 = som_hdr(SesOpcode.WRITE, REL | EOM, 5, 4, mb=safe.key, bo=8)
    assert _handle(fep, w2, b"two!", RUDI, 101).data == ok(5, 4)
    assert bytes(safe.view[8:12]) == b"two!" and fep.target.counters["duplicates"] == 1


def test_engine_rudi_multi_packet_copy_inside_the_range(fep: SesFep, safe) -> None:  # noqa: ANN001, F811
    p0 = (som_hdr(SesOpcode.WRITE, REL, 6, 16, mb=safe.key, bo=0), b"a" * 8)
    p1 = (mid_hdr(SesOpcode.WRITE, REL | EOM, 6, 8, 8, 16, mb=safe.key, bo=0), b"b" * 8)
    assert _handle(fep, *p0, RUDI, 7) is None
    assert _handle(fep, *p1, RUDI, 9).data == ok(6, 16)  # ids 7..9 (8 went to another message)
    safe.view[0:16] = bytes(16)
    assert _handle(fep, *p0, RUDI, 7, retx=True) is not None  # a copy: answered, not placed
    assert bytes(safe.view[0:16]) == bytes(16)
    assert _handle(fep, *p0, RUDI, 10) is None  # beyond the range: a new message begins
    assert bytes(safe.view[0:8]) == b"a" * 8


def test_engine_uud_duplicates_are_still_suppressed_by_id(fep: SesFep) -> None:  # noqa: F811
    buf = bytearray(8)
    fep.target.post_recv(res(fep), buf)
    for i in range(3):
        _handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 2, 3), bytes([0x61 + i]) * 3, UUD, None)
    assert bytes(buf[:3]) == b"aaa" and fep.target.counters["duplicates"] == 2


# -- end to end: two FEP cores -------------------------------------------------------------------


@pytest.mark.parametrize("size", [3000, 20000])
def test_fep_rudi_message_reusing_a_finished_id_is_delivered(size: int) -> None:
    """The initiator's 16-bit message ids wrap: a later RUDI message with a finished one's id
    (forced here) is delivered, not answered from the target's memory and lost."""
    from fep_harness import B_ADDR, FepPair

    from uet.fep.events import SendCompleted

    p = FepPair(seed=21)
    ini = p.a.core.ses.initiator
    first = ini._next_msg
    r1 = p.b.core.post_recv(None)
    h1 = p.a.core.send(B_ADDR, b"1" * size, mode=Mode.RUDI)
    (m1,) = p.complete(p.b, r1)
    p.complete(p.a, h1)
    ini._next_msg = first  # the id space wrapped
    r2 = p.b.core.post_recv(None)
    h2 = p.a.core.send(B_ADDR, b"2" * size, mode=Mode.RUDI)
    (m2,) = p.complete(p.b, r2)
    p.complete(p.a, h2)
    assert m1.message_id == m2.message_id == first
    assert bytes(m1.data) == b"1" * size and bytes(m2.data) == b"2" * size
    assert isinstance(p.a.result(h2), SendCompleted)
