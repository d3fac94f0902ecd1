"""Message layer: segmentation into SES standard requests and reassembly at the target."""

from __future__ import annotations

import os
import random

import pytest
from ses_response import response_fields

from uet.pds.config import SesNack
from uet.ses.message import MAX_WIRE_PAYLOAD, MessageConfig, MessageError, initiator_id
from uet.ses.reassembly import Reassembler
from uet.ses.segmenter import Segmenter
from uet.wire.pds import NextHeader
from uet.wire.ses import STANDARD, ResponseOpcode, ReturnCode, SesFlag, SesOpcode

PS = 1000
RUD, ROD, RUDI = 0, 1, 2
PEER = "10.0.0.1"


def seg(ps: int = PS, **kw) -> Segmenter:
    return Segmenter(job_id=7, initiator=initiator_id(PEER), payload_size=ps, **kw)


def reasm(**kw) -> Reassembler:
    return Reassembler(job_id=7, pid_on_fep=3, resource_index=0, config=MessageConfig(payload_size=PS, **kw))


def feed(r: Reassembler, pkts, peer: str = PEER, mode: int = 0, retx: bool = False):
    return [r.deliver(peer, mode, NextHeader.STANDARD, ses, bytes(p), retx) for ses, p, _s, _e in pkts]


@pytest.mark.parametrize("size", [0, 1, PS - 1, PS, PS + 1, 3 * PS, 10 * PS + 7])
def test_segmentation_boundaries(size: int) -> None:
    data = os.urandom(size)
    s = seg()
    pkts = list(s.packets(data, 0x1234, pid_on_fep=3))
    assert len(pkts) == s.count(size) == max(1, -(-size // PS))
    assert b"".join(bytes(p) for _h, p, _s, _e in pkts) == data
    for i, (ses, payload, som, eom) in enumerate(pkts):
        assert len(ses) == 44
        assert som == (i == 0) and eom == (i == len(pkts) - 1)
        lay = STANDARD[(1 if som else 0, "none")]
        h = lay.decode(ses)
        assert h.opcode == SesOpcode.SEND and h.version == 0
        assert h.message_id == 0x1234 and h.job_id == 7 and h.pid_on_fep == 3
        assert h.request_length == size
        assert bool(h.flags & SesFlag.SOM) == som and bool(h.flags & SesFlag.EOM) == eom
        assert h.flags & SesFlag.REL
        if not som:
            assert h.message_offset == i * PS and h.payload_length == len(payload)
        assert len(payload) <= PS
        assert isinstance(payload, memoryview)  # zero copy


@pytest.mark.parametrize(
    "size, kw",
    [
        (0, {}),
        (1, {"tag": 0xFFFF_FFFF_FFFF_FFFF}),
        (PS, {"header_data": 0x1122_3344_5566_7788, "generation": 5}),
        (PS - 1, {"relative": False, "job_id": 9, "pid_on_fep": 4, "resource_index": 2, "tag": 1 << 70}),
    ],
)
def test_single_is_the_one_packet_packets_yields(size: int, kw: dict) -> None:
    """``Segmenter.single`` (the eager lanes' one-packet messages) builds exactly the packet
    ``packets`` yields for a message of one packet, and refuses a longer one."""
    data = os.urandom(size)
    s = seg()
    [(ses, payload, som, eom)] = list(s.packets(data, 0x4321, **kw))
    assert som and eom
    ses1, payload1 = s.single(data, 0x4321, **kw)
    assert ses1 == ses and bytes(payload1) == bytes(payload) == data
    assert isinstance(payload1, memoryview)  # zero copy
    with pytest.raises(MessageError):
        s.single(os.urandom(PS + 1), 1)


def test_payload_is_zero_copy_view_of_the_message() -> None:
    data = bytearray(os.urandom(3 * PS))
    pkts = list(seg().packets(data, 1))
    data[PS] ^= 0xFF
    assert pkts[1][1][0] == data[PS]


def test_too_large_message_refused() -> None:
    with pytest.raises(MessageError):
        list(seg(max_message=100).packets(b"x" * 101, 0))
    with pytest.raises(MessageError):
        MessageConfig(payload_size=0)


def test_header_data_sets_hd_on_som_only() -> None:
    pkts = list(seg().packets(b"x" * (2 * PS), 5, header_data=0xABCDEF))
    h0 = STANDARD[(1, "none")].decode(pkts[0][0])
    assert h0.flags & SesFlag.HD and h0.header_data == 0xABCDEF
    r = reasm()
    feed(r, [(s, p, a, b) for s, p, a, b in seg().packets(b"y" * (2 * PS), 5, pid_on_fep=3, header_data=99)])
    assert r.completed.popleft().header_data == 99


@pytest.mark.parametrize("size", [0, 1, PS, PS + 1, 50 * PS + 3])
def test_reassembly_in_order_and_response_on_last(size: int) -> None:
    data = os.urandom(size)
    r = reasm()
    resps = feed(r, list(seg().packets(data, 42, pid_on_fep=3)))
    assert all(x is None for x in resps[:-1])
    nh, body = resps[-1]
    assert nh == NextHeader.RESPONSE
    op, rc, mid, mlen = response_fields(body)
    assert (op, rc, mid, mlen) == (ResponseOpcode.RESPONSE, ReturnCode.OK, 42, size)
    msg = r.completed.popleft()
    assert msg.data == data and msg.source == PEER and msg.message_id == 42 and msg.job_id == 7
    assert r.partial_count == 0 and not r.completed


def test_reassembly_out_of_order_with_duplicates() -> None:
    data = os.urandom(20 * PS + 5)
    pkts = list(seg().packets(data, 9, pid_on_fep=3))
    rng = random.Random(5)
    order = pkts + rng.sample(pkts, 8)  # duplicates
    rng.shuffle(order)
    r = reasm()
    resps = feed(r, order, mode=RUDI, retx=True)
    ok = [x for x in resps if x is not None]
    # exactly one message delivered; RUDI retransmissions after completion are answered again
    assert len(r.completed) == 1 and r.completed[0].data == data
    assert all(response_fields(b)[1] == ReturnCode.OK for _nh, b in ok)
    assert r.counters["messages"] == 1
    assert r.counters["duplicate_packets"] + r.counters["duplicate_after_complete"] == 8


def test_duplicate_of_single_packet_message_not_delivered_twice() -> None:
    r = reasm()
    pkts = list(seg().packets(b"hello", 3, pid_on_fep=3))
    a = feed(r, pkts, mode=RUDI)
    b = feed(r, pkts, mode=RUDI, retx=True)
    assert len(r.completed) == 1
    assert response_fields(a[0][1]) == response_fields(b[0][1])


def test_two_peers_same_message_id_are_distinct() -> None:
    r = reasm()
    d1, d2 = os.urandom(3 * PS), os.urandom(3 * PS)
    p1 = list(seg().packets(d1, 1, pid_on_fep=3))
    p2 = list(seg().packets(d2, 1, pid_on_fep=3))
    for a, b in zip(p1, p2, strict=True):
        feed(r, [a], peer="10.0.0.1")
        feed(r, [b], peer="10.0.0.2")
    got = {m.source: m.data for m in r.completed}
    assert got == {"10.0.0.1": d1, "10.0.0.2": d2}


def _mid_header(mid: int, off: int, plen: int, length: int, eom: bool = False) -> bytes:
    flags = SesFlag.REL | (SesFlag.EOM if eom else 0)
    return STANDARD[(0, "none")].encode(
        STANDARD[(0, "none")].make(
            flags=flags,
            message_id=mid,
            job_id=7,
            pid_on_fep=3,
            payload_length=plen,
            message_offset=off,
            request_length=length,
        )
    )


def _rc(resp) -> int:
    assert resp is not None
    return response_fields(resp[1])[1]


def test_bad_offsets_and_lengths_are_errors_not_crashes() -> None:
    r = reasm()
    # beyond the end of the message
    assert _rc(r.deliver(PEER, 0, 3, _mid_header(1, 2000, 100, 2050), b"x" * 100)) == ReturnCode.OP_VIOLATION
    # every later packet of a failed message gets the same error, nothing is delivered
    assert _rc(r.deliver(PEER, 0, 3, _mid_header(1, 0, 100, 2050), b"x" * 100)) == ReturnCode.OP_VIOLATION
    # payload_length disagrees with the bytes present
    assert _rc(r.deliver(PEER, 0, 3, _mid_header(2, 0, 99, 1000), b"x" * 100)) == ReturnCode.OP_VIOLATION
    # request_length changes within a message
    r.deliver(PEER, 0, 3, _mid_header(3, 0, 100, 1000), b"x" * 100)
    assert _rc(r.deliver(PEER, 0, 3, _mid_header(3, 100, 100, 999), b"x" * 100)) == ReturnCode.OP_VIOLATION
    # overlapping extents with different sizes
    r.deliver(PEER, 0, 3, _mid_header(4, 0, 100, 1000), b"x" * 100)
    assert _rc(r.deliver(PEER, 0, 3, _mid_header(4, 0, 50, 1000), b"x" * 50)) == ReturnCode.OP_VIOLATION
    # EOM packet not ending at request_length
    assert _rc(r.deliver(PEER, 0, 3, _mid_header(5, 0, 100, 1000, eom=True), b"x" * 100)) == ReturnCode.OP_VIOLATION
    # too long
    big = reasm(max_message=1000)
    assert _rc(big.deliver(PEER, 0, 3, _mid_header(6, 0, 100, 1001), b"x" * 100)) == ReturnCode.TOO_LONG
    assert not r.completed and r.counters["errors"] == 5
    assert r.counters["error_overlap"] == 1 and r.counters["error_out_of_bounds"] == 1


def test_overlap_with_gap_summing_to_length_is_not_delivered() -> None:
    r = reasm()
    r.deliver(PEER, 0, 3, _mid_header(1, 0, 60, 100), b"a" * 60)
    # [40, 80) overlaps [0, 60) and [80, 100) is missing, yet 60 + 40 = 100
    res = r.deliver(PEER, 0, 3, _mid_header(1, 40, 40, 100), b"b" * 40)
    assert _rc(res) == ReturnCode.OP_VIOLATION and not r.completed


def test_addressing_and_opcode_checks() -> None:
    r = reasm()
    good = list(seg().packets(b"x" * 10, 1, pid_on_fep=3))[0][0]
    assert _rc(r.deliver(PEER, 0, 3, bytes(list(seg().packets(b"x", 1, pid_on_fep=4))[0][0]), b"x")) == (
        ReturnCode.UNDELIVERABLE
    )
    wrong_job = Segmenter(job_id=8, payload_size=PS)
    assert _rc(r.deliver(PEER, 0, 3, list(wrong_job.packets(b"x", 1, pid_on_fep=3))[0][0], b"x")) == (
        ReturnCode.BAD_JOB_ID
    )
    bad_ver = bytearray(good)
    bad_ver[1] |= 0x40
    assert _rc(r.deliver(PEER, 0, 3, bytes(bad_ver), b"x" * 10)) == ReturnCode.UNCOR
    bad_op = bytearray(good)
    bad_op[0] = SesOpcode.WRITE
    assert _rc(r.deliver(PEER, 0, 3, bytes(bad_op), b"x" * 10)) == ReturnCode.UNSUPPORTED_OP
    assert _rc(r.deliver(PEER, 0, NextHeader.SMALL, good[:20], b"")) == ReturnCode.UNSUPPORTED_OP
    assert _rc(r.deliver(PEER, 0, 3, good[:10], b"")) == ReturnCode.UNSUPPORTED_OP
    assert not r.completed


def test_reassembly_slots_are_bounded_and_expire() -> None:
    r = reasm(max_partial=2, reassembly_timeout_ns=1000)
    for mid in (1, 2):
        assert r.deliver(PEER, 0, 3, _mid_header(mid, 0, 100, 1000), b"x" * 100) is None
    with pytest.raises(SesNack):
        r.deliver(PEER, 0, 3, _mid_header(3, 0, 100, 1000), b"x" * 100)
    assert r.expire(500) == 0
    assert r.expire(1000) == 2 and r.counters["expired"] == 2 and r.partial_count == 0
    assert r.deliver(PEER, 0, 3, _mid_header(3, 0, 100, 1000), b"x" * 100) is None


def test_completed_ids_forgotten_after_ttl() -> None:
    r = reasm(completed_ttl_ns=100)
    pkts = list(seg().packets(b"abc", 1, pid_on_fep=3))
    feed(r, pkts, mode=RUDI)
    r.expire(200)
    feed(r, pkts, mode=RUDI, retx=True)  # after the TTL the same id is a new message
    assert len(r.completed) == 2


@pytest.mark.parametrize("mode", [RUD, ROD])
def test_reused_message_id_is_a_new_message(mode: int) -> None:
    """SES-020 (behaviour.md §6.1, §2.6 step 5): a new message reusing a completed message's id
    is delivered. Before the fix the second message was answered with the first one's response
    (``uet-bench pair`` then ``rtt``: "target placed 1048576 of 64 bytes") and dropped. RUD/ROD
    duplicates never reach SES (PDS removes them by PSN)."""
    r = reasm()
    feed(r, list(seg().packets(b"x" * (3 * PS), 11, pid_on_fep=3)), mode=mode)
    resps = feed(r, list(seg().packets(b"second", 11, pid_on_fep=3)), mode=mode)
    assert [m.data for m in r.completed][1:] == [b"second"]
    assert response_fields(resps[-1][1])[1:] == (ReturnCode.OK, 11, 6)


def test_large_message_and_jumbo_payload() -> None:
    ps = 20000  # above the 14-bit field: non-conforming jumbo extension, payload_length 0
    data = os.urandom(5 * ps + 1)
    pkts = list(Segmenter(payload_size=ps).packets(data, 1))
    h = STANDARD[(0, "none")].decode(pkts[1][0])
    assert ps > MAX_WIRE_PAYLOAD and h.payload_length == 0
    r = Reassembler(config=MessageConfig(payload_size=ps))
    for ses, p, _s, _e in pkts:
        r.deliver(PEER, 0, 3, ses, p)
    assert r.completed.popleft().data == data


def test_many_packets_message() -> None:
    data = os.urandom(4 << 20)
    s = Segmenter(payload_size=4096)
    r = Reassembler()
    pkts = list(s.packets(data, 77))
    random.Random(3).shuffle(pkts)
    out = [r.deliver(PEER, 0, 3, ses, p) for ses, p, _a, _b in pkts]
    assert sum(x is not None for x in out) == 1
    assert r.completed.popleft().data == data
