"""SYNC_WRITE / SYNC_ATOMIC (sync groups, uet.ses.sync) and TSEND_ATOMIC / TSEND_FETCH_ATOMIC at
the target engine, fed exact request packets with responses checked byte for byte
(behaviour.md §6.5, wire-format.md §8.5, §9.4); the initiator's exact packets; and the four
operations end to end through ``uet.Endpoint`` (they were answered UNSUPPORTED_OP before)."""

from __future__ import annotations

import asyncio
import struct

import pytest
from test_ses_target import (
    EOM,
    HD,
    INIT,
    JOB,
    KEY,
    PEER,
    PID,
    RC,
    REL,
    RI,
    RUDI,
    events,
    handle,
    ok,
    res,
    resp,
    som_hdr,
)
from test_ses_target import fep as fep  # noqa: F401 - the fixture

from uet.ses import Access, RecvCompleted, SesFep, WriteCompleted
from uet.ses.initiator import SesAddress
from uet.ses.packets import parse_request
from uet.ses.sync import SyncGroups
from uet.wire.pds import NextHeader
from uet.wire.ses import ATOMIC_EXT, CSWAP_EXT, RESPONSE_DATA, SYNC_EXT, AmoOp, AmoType, SesOpcode

OP = SesOpcode
U64 = AmoType.UINT64


def sync(group: int, count: int) -> bytes:
    return SYNC_EXT.encode((group, count))


def sum_ext() -> bytes:
    return ATOMIC_EXT.encode((AmoOp.SUM, U64, 0))


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def sync_write(mid: int, group: int, count: int, off: int, data: bytes, *, hd: int | None = None) -> bytes:
    flags = REL | EOM | (HD if hd is not None else 0)
    return som_hdr(OP.SYNC_WRITE, flags, mid, len(data), bo=off, mb=KEY, hdata=hd or 0) + sync(group, count)


def sync_atomic(mid: int, group: int, count: int, off: int) -> bytes:
    return som_hdr(OP.SYNC_ATOMIC, REL | EOM, mid, 8, bo=off, mb=KEY) + sync(group, count) + sum_ext()


@pytest.fixture
def mem(fep: SesFep) -> bytearray:  # noqa: F811
    buf = bytearray(64)
    fep.memory.register(buf, Access.ALL, key=KEY)
    return buf


# -- sync groups ------------------------------------------------------------------------------------


def test_sync_atomic_waits_for_the_groups_writes(fep: SesFep, mem: bytearray) -> None:  # noqa: F811
    """Group 7 of 3: the SYNC_ATOMIC arrives first (accepted: DEFAULT_RESPONSE RC_OK, ml 8) but
    is applied only when the second SYNC_WRITE completes."""
    r = handle(fep, sync_atomic(1, 7, 3, 32), u64(5))
    assert r is not None and r.data == ok(1, 8) and not r.guaranteed
    assert mem[32:40] == bytes(8) and fep.target.sync.counters["sync_deferred"] == 1
    r = handle(fep, sync_write(2, 7, 3, 0, b"A" * 8), b"A" * 8)
    assert r is not None and r.data == ok(2, 8)
    assert mem[:8] == b"A" * 8 and mem[32:40] == bytes(8)
    r = handle(fep, sync_write(3, 7, 3, 8, b"B" * 8), b"B" * 8)
    assert r is not None and r.data == ok(3, 8)
    assert mem[8:16] == b"B" * 8 and struct.unpack_from("<Q", mem, 32)[0] == 5
    assert len(fep.target.sync) == 0 and fep.target.sync.counters["sync_completed"] == 1


def test_a_terminator_after_its_members_takes_effect_at_once_and_the_group_restarts(
    fep: SesFep,  # noqa: F811
    mem: bytearray,
) -> None:
    handle(fep, sync_write(1, 9, 2, 0, b"x" * 4), b"x" * 4)
    assert handle(fep, sync_atomic(2, 9, 2, 40), u64(3)).data == ok(2, 8)
    assert struct.unpack_from("<Q", mem, 40)[0] == 3
    # the same group number starts a new round
    assert handle(fep, sync_atomic(3, 9, 2, 40), u64(4)).data == ok(3, 8)
    assert struct.unpack_from("<Q", mem, 40)[0] == 3
    handle(fep, sync_write(4, 9, 2, 0, b"y" * 4), b"y" * 4)
    assert struct.unpack_from("<Q", mem, 40)[0] == 7


def test_terminating_sync_write_posts_its_completion_after_the_members(
    fep: SesFep,  # noqa: F811
    mem: bytearray,
) -> None:
    """The SYNC_WRITE with header data terminates the group: its bytes are placed on arrival, its
    WriteCompleted (what the target application sees) waits for the other member."""
    r = handle(fep, sync_write(1, 2, 2, 16, b"T" * 4, hd=0xABC), b"T" * 4)
    assert r is not None and r.data == ok(1, 4)
    assert mem[16:20] == b"TTTT" and events(fep) == []
    handle(fep, sync_write(2, 2, 2, 0, b"M" * 4), b"M" * 4)
    [e] = events(fep)
    assert isinstance(e, WriteCompleted) and (e.offset, e.length, e.header_data, e.source) == (16, 4, 0xABC, PEER)


@pytest.mark.parametrize(
    ("steps", "bad"),
    [
        ([("w", 3)], None),
        ([("w", 3), ("w", 2)], 1),  # count differs from the group's
        ([("w", 2), ("w", 2)], 1),  # a member beyond count - 1
        ([("a", 3), ("a", 3)], 1),  # a second terminator
        ([("w", 0)], 0),  # count 0
    ],
)
def test_inconsistent_sync_counts_are_op_violation(
    fep: SesFep,  # noqa: F811
    mem: bytearray,
    steps: list,
    bad: int | None,
) -> None:
    for i, (kind, count) in enumerate(steps):
        mid = 10 + i
        if kind == "w":
            r = handle(fep, sync_write(mid, 5, count, 0, b"zz"), b"zz")
        else:
            r = handle(fep, sync_atomic(mid, 5, count, 0), u64(1))
        if i == bad:
            assert r is not None and r.data == resp(RC.OP_VIOLATION, mid) and r.guaranteed
        else:
            assert r is not None and r.data in (ok(mid, 2), ok(mid, 8))


def test_sync_operations_are_refused_in_rudi(fep: SesFep, mem: bytearray) -> None:  # noqa: F811
    fep.memory.register(bytearray(16), Access.ALL | Access.IDEMPOTENT_SAFE, key=KEY + 1)
    r = handle(fep, sync_atomic(1, 1, 1, 0), u64(1), mode=RUDI)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)


def test_sync_groups_expire_with_the_reassembly_timeout(fep: SesFep, mem: bytearray) -> None:  # noqa: F811
    handle(fep, sync_atomic(1, 4, 3, 0), u64(9))
    limit = fep.target.config.reassembly_timeout_ns
    assert fep.target.get_timer() == limit
    fep.target.handle_timer(limit)
    assert len(fep.target.sync) == 0 and fep.target.sync.counters["sync_expired"] == 1
    handle(fep, sync_write(2, 4, 3, 8, b"q"), b"q")
    handle(fep, sync_write(3, 4, 3, 9, b"q"), b"q")
    assert mem[:8] == bytes(8)  # the expired terminator never ran


def test_the_sync_table_is_bounded() -> None:
    t = SyncGroups(limit=2)
    t.member_done(("a", 0, 1), 3, 0)
    t.member_done(("a", 0, 2), 3, 0)
    with pytest.raises(Exception, match="open sync groups"):
        t.member_done(("a", 0, 3), 3, 0)


# -- tagged atomics ---------------------------------------------------------------------------------


def tsend_atomic(mid: int, tag: int, *, fetch: bool = False, off: int = 0, ext: bytes | None = None) -> bytes:
    op = OP.TSEND_FETCH_ATOMIC if fetch else OP.TSEND_ATOMIC
    return som_hdr(op, REL | EOM, mid, 8, bo=off, mb=tag) + (ext or sum_ext())


def test_tsend_atomic_applies_to_the_matched_receive_and_completes_it(fep: SesFep) -> None:  # noqa: F811
    buf = bytearray(u64(40) + u64(0))
    fep.target.post_recv(res(fep), buf, tagged=True, tag=0x77)
    r = handle(fep, tsend_atomic(1, 0x77, off=0), u64(2))
    assert r is not None and r.data == ok(1, 8) and not r.guaranteed
    assert struct.unpack_from("<Q", buf)[0] == 42
    [e] = events(fep)
    assert isinstance(e, RecvCompleted) and e.return_code == RC.OK and e.length == 8
    assert (e.tag, e.source, e.initiator) == (0x77, PEER, INIT)


def test_tsend_fetch_atomic_returns_the_prior_value(fep: SesFep) -> None:  # noqa: F811
    buf = bytearray(u64(0) + u64(100))
    fep.target.post_recv(res(fep), buf, tagged=True, tag=0x78)
    cswap = CSWAP_EXT.encode((AmoOp.CSWAP, U64, 0, 100, 7))
    r = handle(fep, som_hdr(OP.TSEND_FETCH_ATOMIC, REL | EOM, 3, 8, bo=8, mb=0x78) + cswap)
    assert r is not None and r.next_hdr == NextHeader.RESPONSE_DATA and r.guaranteed
    v = RESPONSE_DATA.decode(r.data[: RESPONSE_DATA.size])
    assert v.return_code == RC.OK and v.message_id == 3 and r.data[RESPONSE_DATA.size :] == u64(100)
    assert struct.unpack_from("<Q", buf, 8)[0] == 7


def test_tsend_atomic_without_a_receive_is_no_match_and_too_small_keeps_it(fep: SesFep) -> None:  # noqa: F811
    r = handle(fep, tsend_atomic(1, 0x79), u64(1))
    assert r is not None and r.data == resp(RC.NO_MATCH, 1) and r.guaranteed
    small = bytearray(4)
    fep.target.post_recv(res(fep), small, tagged=True, tag=0x79)
    r = handle(fep, tsend_atomic(2, 0x79), u64(1))
    assert r is not None and r.data == resp(RC.TOO_LONG, 2)
    assert events(fep) == [] and res(fep).matcher.posted(True)  # still posted
    r = handle(fep, tsend_atomic(3, 0x79), u64(1), mode=RUDI)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 3)


# -- the initiator's packets ------------------------------------------------------------------------


def _one_packet(f: SesFep) -> tuple:
    [p] = f.initiator.packets_to_send()
    return p, parse_request(p.next_hdr, p.ses, p.payload)


def test_initiator_builds_each_opcode_with_its_extensions() -> None:
    f = SesFep("10.0.0.9")
    dest = SesAddress(PEER, job_id=JOB, pid_on_fep=PID, resource_index=RI)
    f.initiator.write(dest, KEY, 16, b"data", sync=(7, 3))
    p, q = _one_packet(f)
    assert (q.opcode, q.ext, q.match_bits, q.buffer_offset, bytes(q.payload)) == (
        OP.SYNC_WRITE,
        (7, 3),
        KEY,
        16,
        b"data",
    )
    f.initiator.atomic(dest, KEY, 8, AmoOp.SUM, U64, [5], sync=(7, 3))
    p, q = _one_packet(f)
    assert q.opcode == OP.SYNC_ATOMIC and q.ext[0] == (7, 3) and q.ext[1] == (AmoOp.SUM, U64, 0)
    assert bytes(q.payload) == u64(5)
    f.initiator.atomic(dest, 0x77, 0, AmoOp.SUM, U64, [1], tagged=True)
    p, q = _one_packet(f)
    assert (q.opcode, q.match_bits) == (OP.TSEND_ATOMIC, 0x77)
    f.initiator.atomic(dest, 0x77, 0, AmoOp.CSWAP, U64, compare=1, swap=2, tagged=True, fetch=True)
    p, q = _one_packet(f)
    assert q.opcode == OP.TSEND_FETCH_ATOMIC and (q.ext.compare_value, q.ext.swap_value) == (1, 2)
    with pytest.raises(ValueError):
        f.initiator.atomic(dest, KEY, 0, AmoOp.SUM, U64, [1], sync=(1, 2), fetch=True)
    with pytest.raises(ValueError):
        f.initiator.write(dest, KEY, 0, b"x", sync=(1, 0))


# -- end to end -------------------------------------------------------------------------------------


async def test_the_four_opcodes_through_the_endpoint_api() -> None:
    from uet import Endpoint
    from uet.link import loopback_addresses
    from uet.link.direct import DirectLink

    a, b = loopback_addresses(2)
    ea = await Endpoint.open(a, job=JOB, pid=1, port=0)
    assert isinstance(ea.link, DirectLink)
    eb = await Endpoint.open(b, job=JOB, pid=1, port=0, peer_port=ea.link.port)
    assert isinstance(eb.link, DirectLink)
    ea.link.peer_port = eb.link.port

    def w(c):  # noqa: ANN001, ANN202
        return asyncio.wait_for(c, 20)

    async with ea, eb:
        mem = bytearray(64)
        mr = eb.register(mem, Access.ALL)
        # a sync group of 3: two writes and the flag atomic, the atomic sent first
        flag = ea.atomic(b, mr.key, 56, AmoOp.SUM, U64, 1, sync=(1, 3))
        await w(flag)
        assert mem[56:64] == bytes(8)
        await w(ea.write(b, mr.key, 0, b"a" * 16, sync=(1, 3)))
        await w(ea.write(b, mr.key, 16, b"b" * 16, sync=(1, 3)))
        assert struct.unpack_from("<Q", mem, 56)[0] == 1
        # a terminating write with immediate data
        await w(ea.write(b, mr.key, 32, b"c" * 8, sync=(2, 2), header_data=0x5A))
        await w(ea.write(b, mr.key, 40, b"d" * 8, sync=(2, 2)))
        wc = await w(eb.next_write())
        assert (wc.offset, wc.header_data) == (32, 0x5A)
        # tagged atomics on posted receives
        acc = bytearray(u64(10))
        h = eb.post_recv(acc, tag=0x99)
        assert await w(ea.atomic(b, 0x99, 0, AmoOp.SUM, U64, 5, tagged=True)) is None
        m = await w(h)
        assert m.tag == 0x99 and struct.unpack_from("<Q", acc)[0] == 15
        h = eb.post_recv(acc, tag=0x9A)
        assert await w(ea.atomic(b, 0x9A, 0, AmoOp.SUM, U64, 1, tagged=True, fetch=True)) == 15
        await w(h)
        assert struct.unpack_from("<Q", acc)[0] == 16
