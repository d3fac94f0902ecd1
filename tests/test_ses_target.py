"""Target SES engine fed exact request packets; responses checked byte for byte (behaviour.md §6)."""

from __future__ import annotations

import pytest

from uet.ses import Access, RecvCompleted, SesFep, WriteCompleted
from uet.ses.initiator import InitiatorConfig
from uet.ses.matching import MatchLimits
from uet.ses.target import TargetConfig
from uet.wire.pds import NextHeader
from uet.wire.ses import (
    ATOMIC_EXT,
    CSWAP_EXT,
    MEDIUM,
    RENDEZVOUS_EXT,
    RESPONSE,
    RESPONSE_DATA,
    SMALL,
    STANDARD,
    AmoOp,
    AmoType,
    ResponseOpcode,
    ReturnCode,
    SesFlag,
    SesOpcode,
)

PEER = "10.0.0.1"
JOB, PID, RI, INIT = 0x42, 3, 0, 0x0A000001
KEY = 0x1111_2222_3333_4444
SOM, EOM, HD, REL, IE, DC = SesFlag.SOM, SesFlag.EOM, SesFlag.HD, SesFlag.REL, SesFlag.IE, SesFlag.DC
RUD, ROD, RUDI = 0, 1, 2
RC = ReturnCode


def som_hdr(
    op: int,
    flags: int,
    mid: int,
    rlen: int,
    *,
    gen: int = 0,
    job: int = JOB,
    pid: int = PID,
    ri: int = RI,
    bo: int = 0,
    init: int = INIT,
    mb: int = 0,
    hdata: int = 0,
) -> bytes:
    return STANDARD[(1, "none")].encode((op, 0, flags | SOM, mid, gen, job, pid, ri, bo, init, mb, hdata, rlen))


def mid_hdr(
    op: int,
    flags: int,
    mid: int,
    plen: int,
    moff: int,
    rlen: int,
    *,
    bo: int = 0,
    mb: int = 0,
    gen: int = 0,
    job: int = JOB,
) -> bytes:
    return STANDARD[(0, "none")].encode((op, 0, flags, mid, gen, job, PID, RI, bo, INIT, mb, plen, moff, rlen))


def resp(
    rc: int, mid: int, *, ml: int = 0, gen: int = 0, job: int = JOB, lst: int = 0, opcode: int = ResponseOpcode.RESPONSE
) -> bytes:
    return RESPONSE.encode((lst, opcode, 0, rc, mid, gen, job, ml))


def ok(mid: int, ml: int) -> bytes:
    return resp(RC.OK, mid, ml=ml, opcode=ResponseOpcode.DEFAULT_RESPONSE)


@pytest.fixture
def fep() -> SesFep:
    f = SesFep(
        "10.0.0.2",
        initiator=InitiatorConfig(initiator_id=0x0A000002),
        target=TargetConfig(max_payload=64),
        limits=MatchLimits(max_deferred=2),
    )
    f.resources.add(PID, RI, JOB)
    f.resources.add(PID, 1, JOB, generation=5)
    return f


def res(f: SesFep, ri: int = RI):  # noqa: ANN201
    r = f.resources.get(PID, ri)
    assert r is not None
    return r


def handle(  # noqa: ANN201
    f: SesFep,
    ses: bytes,
    payload: bytes = b"",
    *,
    mode: int = RUD,
    nh: int = NextHeader.STANDARD,
    pdc: int = 9,
    retx: bool = False,
):
    return f.target.handle(PEER, nh, ses, payload, mode=mode, pdc=pdc, retx=retx)


def events(f: SesFep) -> list:
    out = []
    while (e := f.next_event()) is not None:
        out.append(e)
    return out


# -- the worked example (wire-format.md §13) ------------------------------------------------------

EXAMPLE_SES = bytes.fromhex("0503000100000042000300000000000000000000000000000000000000000000000000000000000000000005")


def test_worked_example_send() -> None:
    f = SesFep("10.0.0.2")
    f.resources.add(3, 0, 0x42)
    buf = bytearray(16)
    f.target.post_recv(f.resources.get(3, 0), buf)  # type: ignore[arg-type]
    r = f.target.handle("10.0.0.1", NextHeader.STANDARD, EXAMPLE_SES, b"hello")
    assert r is not None and r.next_hdr == NextHeader.RESPONSE and not r.guaranteed
    assert r.data == bytes.fromhex("00 01 00 01 00 00 00 42 00 00 00 05")  # DEFAULT_RESPONSE, RC_OK, ml 5
    assert buf[:5] == b"hello"
    [e] = events(f)
    assert isinstance(e, RecvCompleted) and e.return_code == RC.OK and e.length == 5 and e.source == "10.0.0.1"


def test_worked_example_with_dc_gives_the_section_13_2_response() -> None:
    f = SesFep("10.0.0.2")
    f.resources.add(3, 0, 0x42)
    f.target.post_recv(f.resources.get(3, 0), bytearray(16))  # type: ignore[arg-type]
    ses = bytearray(EXAMPLE_SES)
    ses[1] |= DC
    r = f.target.handle("10.0.0.1", NextHeader.STANDARD, bytes(ses), b"hello")
    assert r is not None and r.guaranteed
    assert r.data == bytes.fromhex("01 01 00 01 00 00 00 42 00 00 00 05")


# -- sends ----------------------------------------------------------------------------------------


def test_multi_packet_send_out_of_order_with_header_data(fep: SesFep) -> None:
    buf = bytearray(300)
    fep.target.post_recv(res(fep), buf, context="ctx")
    data = bytes(range(250))
    p0 = (som_hdr(SesOpcode.SEND, REL | HD, 7, 250, hdata=0xDEADBEEF), data[:100])
    p1 = (mid_hdr(SesOpcode.SEND, REL, 7, 100, 100, 250), data[100:200])
    p2 = (mid_hdr(SesOpcode.SEND, REL | EOM, 7, 50, 200, 250), data[200:])
    assert handle(fep, *p2, mode=RUDI) is None
    assert handle(fep, *p1, mode=RUDI) is None
    r = handle(fep, *p0, mode=RUDI)
    assert r is not None and r.data == ok(7, 250)
    assert bytes(buf[:250]) == data
    [e] = events(fep)
    assert (e.return_code, e.length, e.header_data, e.context, e.initiator) == (RC.OK, 250, 0xDEADBEEF, "ctx", INIT)
    # a RUDI retransmission after completion is answered again, nothing delivered twice (§2.14)
    assert handle(fep, *p1, mode=RUDI, retx=True) == r
    assert events(fep) == []


def test_send_placed_at_buffer_offset(fep: SesFep) -> None:
    buf = bytearray(8)
    fep.target.post_recv(res(fep), buf)
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 1, 3, bo=4), b"abc")
    assert r is not None and r.data == ok(1, 3) and buf == b"\0\0\0\0abc\0"
    fep.target.post_recv(res(fep), bytearray(8))
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 2, 5, bo=4), b"abcde")  # 4 + 5 > 8
    assert r is not None and r.data == resp(RC.TOO_LONG, 2)


def test_duplicate_packet_is_ignored(fep: SesFep) -> None:
    buf = bytearray(200)
    fep.target.post_recv(res(fep), buf)
    p0 = (som_hdr(SesOpcode.SEND, REL, 1, 120), bytes(64))
    assert handle(fep, *p0, mode=RUDI) is None
    assert handle(fep, *p0, mode=RUDI) is None
    assert fep.target.counters["duplicates"] == 1
    r = handle(fep, mid_hdr(SesOpcode.SEND, REL | EOM, 1, 56, 64, 120), b"x" * 56, mode=RUDI)
    assert r is not None and r.data == ok(1, 120)


def test_medium_header_send(fep: SesFep) -> None:
    buf = bytearray(8)
    fep.target.post_recv(res(fep), buf, tagged=True, tag=0x99)
    ses = MEDIUM.encode((SesOpcode.TAGGED_SEND, 0, SOM | EOM | REL, 3, 0, JOB, PID, RI, 0, INIT, 0x99))
    r = handle(fep, ses, b"abc", nh=NextHeader.MEDIUM)
    assert r is not None and r.data == ok(0, 3)
    assert buf[:3] == b"abc"


def test_medium_header_must_be_single_packet(fep: SesFep) -> None:
    ses = MEDIUM.encode((SesOpcode.SEND, 0, SOM | REL, 3, 0, JOB, PID, RI, 0, INIT, 0))
    r = handle(fep, ses, b"abc", nh=NextHeader.MEDIUM)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 0)


def test_small_header_send_untagged(fep: SesFep) -> None:
    buf = bytearray(8)
    fep.target.post_recv(res(fep), buf)
    ses = SMALL.encode((SesOpcode.SEND, 0, SOM | EOM | REL, 2, 0, JOB, PID, RI, 0))
    r = handle(fep, ses, b"hi", nh=NextHeader.SMALL)
    assert r is not None and r.data == ok(0, 2) and buf[:2] == b"hi"


def test_unexpected_message_then_post(fep: SesFep) -> None:
    r = handle(fep, som_hdr(SesOpcode.TAGGED_SEND, REL | EOM, 4, 5, mb=0x77), b"early")
    assert r is not None and r.guaranteed
    assert r.data == resp(RC.OK, 4, ml=5, lst=1)
    buf = bytearray(10)
    fep.target.post_recv(res(fep), buf, tagged=True, tag=0x70, ignore=0x0F)
    [e] = events(fep)
    assert e.unexpected and e.length == 5 and e.tag == 0x77 and buf[:5] == b"early"


def test_unexpected_partial_then_post_then_rest(fep: SesFep) -> None:
    assert handle(fep, som_hdr(SesOpcode.SEND, REL, 5, 100), b"a" * 64) is None
    buf = bytearray(100)
    fep.target.post_recv(res(fep), buf)
    assert events(fep) == []
    r = handle(fep, mid_hdr(SesOpcode.SEND, REL | EOM, 5, 36, 64, 100), b"b" * 36)
    assert r is not None and r.data == resp(RC.OK, 5, ml=100, lst=1)
    [e] = events(fep)
    assert e.unexpected and bytes(buf) == b"a" * 64 + b"b" * 36


def test_no_match_without_overflow_and_rod_disables_generation() -> None:
    f = SesFep("10.0.0.2", target=TargetConfig(overflow=False))
    f.resources.add(PID, RI, JOB)
    r = f.target.handle(PEER, NextHeader.STANDARD, som_hdr(SesOpcode.SEND, REL | EOM, 1, 2), b"hi", mode=ROD)
    assert r is not None and r.guaranteed and r.data == resp(RC.NO_MATCH, 1)
    # later in-order messages on ROD are refused until a receive is posted (§6.4)
    r = f.target.handle(PEER, NextHeader.STANDARD, som_hdr(SesOpcode.SEND, REL | EOM, 2, 2), b"hi", mode=ROD)
    assert r is not None and r.data == resp(RC.DISABLED_GEN, 2)
    f.target.post_recv(f.resources.get(PID, RI), bytearray(4))  # type: ignore[arg-type]
    r = f.target.handle(PEER, NextHeader.STANDARD, som_hdr(SesOpcode.SEND, REL | EOM, 3, 2), b"hi", mode=ROD)
    assert r is not None and r.data == ok(3, 2)


def test_dc_send_before_its_receive_is_buffered_not_refused(fep: SesFep) -> None:
    """Issue 16: ``send(..., dc=True)`` failed with NO_MATCH when no receive was posted yet.
    DC does not change matching (behaviour.md §6.4, §6.8): the message goes on the overflow
    list, the guaranteed response follows its placement there (list = overflow, RC_OK,
    modified length 2), and a later receive gets it."""
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM | DC, 1, 2), b"hi")
    assert r is not None and r.guaranteed and r.data == resp(RC.OK, 1, ml=2, lst=1)
    buf = bytearray(4)
    fep.target.post_recv(res(fep), buf)
    [e] = events(fep)
    assert e.unexpected and e.return_code == RC.OK and e.length == 2 and buf[:2] == b"hi"


def test_dc_send_without_overflow_list_is_refused_no_match() -> None:
    f = SesFep("10.0.0.2", target=TargetConfig(overflow=False))
    f.resources.add(PID, RI, JOB)
    r = f.target.handle(PEER, NextHeader.STANDARD, som_hdr(SesOpcode.SEND, REL | EOM | DC, 1, 2), b"hi")
    assert r is not None and r.guaranteed and r.data == resp(RC.NO_MATCH, 1)


def test_too_long_and_truncation(fep: SesFep) -> None:
    fep.target.post_recv(res(fep), bytearray(4), context="short")
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 1, 5), b"hello")
    assert r is not None and r.data == resp(RC.TOO_LONG, 1)
    [e] = events(fep)
    assert (e.return_code, e.context) == (RC.TOO_LONG, "short")
    buf = bytearray(4)
    fep.target.post_recv(res(fep), buf, truncate=True)
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 2, 5), b"hello")
    assert r is not None and r.guaranteed and r.data == resp(RC.OK, 2, ml=4)
    [e] = events(fep)
    assert (e.length, e.message_length) == (4, 5) and buf == b"hell"


def test_job_restricted_receive(fep: SesFep) -> None:
    fep.target.post_recv(res(fep), bytearray(4), job=0x43)
    r = handle(fep, som_hdr(SesOpcode.SEND, EOM, 1, 2), b"hi")  # absolute addressing, job 0x42
    assert r is not None and r.data == resp(RC.BAD_JOB_ID, 1)


def test_cancel_posted_receive(fep: SesFep) -> None:
    recv = fep.target.post_recv(res(fep), bytearray(4), context=1)
    assert fep.target.cancel_recv(res(fep), recv)
    assert not fep.target.cancel_recv(res(fep), recv)
    [e] = events(fep)
    assert (e.return_code, e.context) == (RC.CANCELLED, 1)


# -- resolution and generic return codes -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "flags", "rc", "gen_back"),
    [
        ({"job": 0x99}, REL, RC.BAD_JOB_ID, 0),
        ({"pid": 9}, REL, RC.BAD_PID, 0),
        ({"ri": 7}, REL, RC.BAD_INDEX, 0),
        ({"ri": 7}, 0, RC.UNDELIVERABLE, 0),
        ({"ri": 1, "gen": 4}, REL, RC.BAD_GENERATION, 5),
    ],
)
def test_resolution_codes(fep: SesFep, kw: dict, flags: int, rc: int, gen_back: int) -> None:
    r = handle(fep, som_hdr(SesOpcode.SEND, flags | EOM, 9, 1, **kw), b"x")
    job = kw.get("job", JOB)
    assert r is not None and r.guaranteed
    assert r.data == resp(rc, 9, gen=gen_back if rc == RC.BAD_GENERATION else kw.get("gen", 0), job=job)


def test_disabled_resource(fep: SesFep) -> None:
    res(fep).enabled = False
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 1, 1), b"x")
    assert r is not None and r.data == resp(RC.DISABLED, 1)


def test_bad_version_is_uncor(fep: SesFep) -> None:
    ses = bytearray(som_hdr(SesOpcode.SEND, REL | EOM, 1, 1))
    ses[1] |= 0x40
    r = handle(fep, bytes(ses), b"x")
    assert r is not None and r.data == resp(RC.UNCOR, 1)


@pytest.mark.parametrize("op", [0x12, 0x20, 0x3F])
def test_unsupported_opcodes(fep: SesFep, op: int) -> None:
    """Reserved opcodes (TSEND_ATOMIC and SYNC_* are implemented: tests/test_ses_sync_tatomic.py)."""
    r = handle(fep, som_hdr(op, REL | EOM, 1, 0) + b"\0\0\0\0")
    assert r is not None and r.data == resp(RC.UNSUPPORTED_OP, 1)


def test_small_header_rma_unsupported(fep: SesFep) -> None:
    ses = SMALL.encode((SesOpcode.WRITE, 0, SOM | EOM | REL, 2, 0, JOB, PID, RI, 0))
    r = handle(fep, ses, b"hi", nh=NextHeader.SMALL)
    assert r is not None and r.data == resp(RC.UNSUPPORTED_OP, 0)


def test_short_header_is_op_violation(fep: SesFep) -> None:
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 0x1234, 1)[:30])
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 0x1234, job=0)


def test_no_op(fep: SesFep) -> None:
    r = handle(fep, som_hdr(SesOpcode.NO_OP, REL | EOM, 1, 0))
    assert r is not None and r.data == ok(1, 0)


@pytest.mark.parametrize(
    "packets",
    [
        [(som_hdr(SesOpcode.SEND, REL | EOM, 1, 5), b"hell")],  # SOM+EOM payload != request_length
        [(som_hdr(SesOpcode.SEND, REL, 1, 5), b"")],  # empty SOM of a longer message
        [(som_hdr(SesOpcode.SEND, REL, 1, 10), b"hello"), (mid_hdr(SesOpcode.SEND, REL | EOM, 1, 4, 5, 10), b"world")],
        [(som_hdr(SesOpcode.SEND, REL, 1, 10), b"hello"), (mid_hdr(SesOpcode.SEND, REL | EOM, 1, 3, 5, 10), b"wor")],
        [(som_hdr(SesOpcode.SEND, REL, 1, 10), b"hello"), (mid_hdr(SesOpcode.SEND, REL | EOM, 1, 5, 5, 11), b"world")],
        [(som_hdr(SesOpcode.SEND, REL, 1, 10), b"hello"), (mid_hdr(SesOpcode.WRITE, REL | EOM, 1, 5, 5, 10), b"world")],
    ],
)
def test_malformed_lengths_are_op_violation(fep: SesFep, packets: list) -> None:
    fep.target.post_recv(res(fep), bytearray(16))
    for ses, payload in packets[:-1]:
        handle(fep, ses, payload)
    r = handle(fep, *packets[-1])
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)


def test_error_is_sticky_and_completes_receive_with_error(fep: SesFep) -> None:
    buf = bytearray(16)
    fep.target.post_recv(res(fep), buf, context="c")
    assert handle(fep, som_hdr(SesOpcode.SEND, REL, 1, 10), b"hello") is None
    r = handle(fep, mid_hdr(SesOpcode.SEND, REL, 1, 2, 5, 11), b"wo")  # length changed
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)
    assert events(fep) == []  # bytes 7..9 still outstanding
    # a well-formed last packet: the error sticks, and with every byte accounted for the
    # receive completes with it
    r = handle(fep, mid_hdr(SesOpcode.SEND, REL | EOM, 1, 3, 7, 10), b"rld")
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)
    [e] = events(fep)
    assert isinstance(e, RecvCompleted)
    assert (e.return_code, e.context, e.length, e.message_length) == (RC.OP_VIOLATION, "c", 0, 10)
    assert bytes(buf[5:]) == bytes(11)  # nothing after the violation was placed
    assert res(fep).matcher.posted(False) == []


def test_initiator_error_flag(fep: SesFep) -> None:
    fep.target.post_recv(res(fep), bytearray(16))
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM | IE, 1, 2), b"hi")
    assert r is not None and r.data == resp(RC.INITIATOR_ERR, 1)
    assert len(res(fep).matcher.posted(False)) == 1  # no buffer consumed


def test_msg_error_unsolicited_and_cancel(fep: SesFep) -> None:
    r = handle(fep, mid_hdr(SesOpcode.MSG_ERROR, REL | EOM, 8, 0, 0, 10))
    assert r is not None and r.data == resp(RC.INITIATOR_ERR, 8)
    fep.target.post_recv(res(fep), bytearray(16), context="c")
    assert handle(fep, som_hdr(SesOpcode.SEND, REL, 9, 10), b"hello") is None
    r = handle(fep, mid_hdr(SesOpcode.MSG_ERROR, REL | EOM, 9, 0, 5, 10))
    assert r is not None and r.data == resp(RC.CANCELLED, 9)
    [e] = events(fep)
    assert (e.return_code, e.context) == (RC.CANCELLED, "c")


# -- RMA write ---------------------------------------------------------------------------------------


@pytest.fixture
def region(fep: SesFep):  # noqa: ANN201
    return fep.memory.register(bytearray(64), Access.ALL, key=KEY)


def test_write_places_bytes_and_hd_completion(fep: SesFep, region) -> None:  # noqa: ANN001
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | HD, 1, 60, bo=8, mb=KEY, hdata=77), b"A" * 60)
    assert r is not None and r.data == resp(RC.UNSUPPORTED_SIZE, 1)  # 8 + 60 > 64
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | HD, 2, 40, bo=8, mb=KEY, hdata=77), b"A" * 32)
    assert r is None
    r = handle(fep, mid_hdr(SesOpcode.WRITE, REL | EOM, 2, 8, 32, 40, bo=8, mb=KEY), b"B" * 8)
    assert r is not None and r.data == ok(2, 40)
    assert bytes(region.view) == bytes(8) + b"A" * 32 + b"B" * 8 + bytes(16)
    [e] = events(fep)
    assert e == WriteCompleted(KEY, 8, 40, 77, PEER, INIT)


@pytest.mark.parametrize(
    ("bo", "rlen", "key", "access", "rc"),
    [
        (0, 65, KEY, Access.ALL, RC.UNSUPPORTED_SIZE),
        (65, 0, KEY, Access.ALL, RC.BAD_ADDR),
        (0, 4, KEY + 1, Access.ALL, RC.BAD_MKEY),
        (0, 4, KEY, Access.REMOTE_READ, RC.PERM_VIOLATION),
    ],
)
def test_write_errors(fep: SesFep, bo: int, rlen: int, key: int, access: Access, rc: int) -> None:
    fep.memory.register(bytearray(64), access, key=KEY)
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 1, rlen, bo=bo, mb=key), bytes(rlen))
    assert r is not None and r.guaranteed and r.data == resp(rc, 1)


def test_write_region_of_other_job_is_bad_mkey(fep: SesFep) -> None:
    fep.memory.register(bytearray(8), Access.ALL, key=KEY, job=0x43)
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 1, 1, mb=KEY), b"x")
    assert r is not None and r.data == resp(RC.BAD_MKEY, 1)


def test_write_key_change_mid_message(fep: SesFep, region) -> None:  # noqa: ANN001
    fep.memory.register(bytearray(64), Access.ALL, key=KEY + 1)
    assert handle(fep, som_hdr(SesOpcode.WRITE, REL, 1, 10, mb=KEY), b"hello") is None
    r = handle(fep, mid_hdr(SesOpcode.WRITE, REL | EOM, 1, 5, 5, 10, mb=KEY + 1), b"world")
    assert r is not None and r.data == resp(RC.PERM_VIOLATION, 1)


def test_rudi_write_needs_idempotent_safe_region(fep: SesFep) -> None:
    fep.memory.register(bytearray(8), Access.ALL, key=KEY)
    safe = fep.memory.register(bytearray(8), Access.ALL | Access.IDEMPOTENT_SAFE)
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 1, 1, mb=KEY), b"x", mode=RUDI)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 2, 1, mb=safe.key), b"x", mode=RUDI)
    assert r is not None and r.data == ok(2, 1)


# -- RMA read -------------------------------------------------------------------------------------


def test_small_read_returns_data_in_ack(fep: SesFep, region) -> None:  # noqa: ANN001
    region.view[:] = bytes(range(64))
    r = handle(fep, som_hdr(SesOpcode.READ, REL | EOM, 6, 16, bo=4, mb=KEY))
    assert r is not None and r.guaranteed and r.next_hdr == NextHeader.RESPONSE_DATA
    hdr = RESPONSE_DATA.encode((0, ResponseOpcode.RESPONSE_W_DATA, 0, RC.OK, 6, JOB, 6, 16, 16, 0))
    assert r.data == hdr + bytes(range(4, 20))
    assert fep.target.packets_to_send() == []


def test_large_read_returns_data_in_return_direction(fep: SesFep, region) -> None:  # noqa: ANN001
    region.view[:] = bytes(range(64))
    r = handle(fep, som_hdr(SesOpcode.READ, REL | EOM, 6, 60, bo=2, mb=KEY))
    assert r is not None and r.data == ok(6, 60)
    [p] = fep.target.packets_to_send()
    assert (p.peer, p.next_hdr, p.return_pdc, p.som, p.eom) == (PEER, NextHeader.RESPONSE_DATA, 9, True, True)
    assert p.ses == RESPONSE_DATA.encode((0, ResponseOpcode.RESPONSE_W_DATA, 0, RC.OK, 6, JOB, 6, 60, 60, 0))
    assert bytes(p.payload) == bytes(range(2, 62))


def test_large_read_chunks_by_max_payload() -> None:
    f = SesFep("10.0.0.2", target=TargetConfig(max_payload=24))
    f.resources.add(PID, RI, JOB)
    f.memory.register(bytes(range(64)), Access.REMOTE_READ, key=KEY)
    r = f.target.handle(PEER, NextHeader.STANDARD, som_hdr(SesOpcode.READ, REL | EOM, 1, 50, mb=KEY))
    assert r is not None and r.data == ok(1, 50)
    ps = f.target.packets_to_send()
    assert [(len(p.payload), p.som, p.eom) for p in ps] == [(24, True, False), (24, False, False), (2, False, True)]
    assert [RESPONSE_DATA.decode(p.ses).message_offset for p in ps] == [0, 24, 48]
    assert b"".join(bytes(p.payload) for p in ps) == bytes(range(50))


def test_read_of_non_som_packet_asks_payload_length(fep: SesFep, region) -> None:  # noqa: ANN001
    region.view[:] = bytes(range(64))
    r = handle(fep, mid_hdr(SesOpcode.READ, REL | EOM, 6, 6, 10, 16, bo=0, mb=KEY))
    assert r is not None and r.next_hdr == NextHeader.RESPONSE_DATA
    assert RESPONSE_DATA.decode(r.data).message_offset == 10 and r.data[20:] == bytes(range(10, 16))


@pytest.mark.parametrize(
    ("access", "bo", "rlen", "flags", "rc"),
    [
        (Access.REMOTE_WRITE, 0, 8, 0, RC.PERM_VIOLATION),
        (Access.ALL, 60, 8, 0, RC.BAD_ADDR),
        (Access.ALL, 0, 8, IE, RC.INITIATOR_ERR),
    ],
)
def test_read_errors(fep: SesFep, access: Access, bo: int, rlen: int, flags: int, rc: int) -> None:
    fep.memory.register(bytearray(64), access, key=KEY)
    r = handle(fep, som_hdr(SesOpcode.READ, REL | EOM | flags, 1, rlen, bo=bo, mb=KEY))
    assert r is not None and r.data == resp(rc, 1)


# -- atomics ---------------------------------------------------------------------------------------


def amo_hdr(ext: bytes, flags: int, rlen: int, *, bo: int = 0, key: int = KEY, fetch: bool = False) -> bytes:
    """An atomic request's header followed by its extension header ``ext``."""
    return som_hdr(SesOpcode.FETCHING_ATOMIC if fetch else SesOpcode.ATOMIC, flags, 1, rlen, bo=bo, mb=key) + ext


def test_fetching_sum_returns_prior_value(fep: SesFep, region) -> None:  # noqa: ANN001
    region.view[8:16] = (40).to_bytes(8, "little")
    ext = ATOMIC_EXT.encode((AmoOp.SUM, AmoType.UINT64, 0))
    r = handle(fep, amo_hdr(ext, REL | EOM, 8, bo=8, fetch=True), (2).to_bytes(8, "little"))
    assert r is not None and r.guaranteed and r.next_hdr == NextHeader.RESPONSE_DATA
    hdr = RESPONSE_DATA.encode((0, ResponseOpcode.RESPONSE_W_DATA, 0, RC.OK, 1, JOB, 1, 8, 8, 0))
    assert r.data == hdr + (40).to_bytes(8, "little")
    assert int.from_bytes(region.view[8:16], "little") == 42
    r = handle(fep, amo_hdr(ext, REL | EOM, 8, bo=8), (8).to_bytes(8, "little"))
    assert r is not None and r.data == ok(1, 8) and int.from_bytes(region.view[8:16], "little") == 50


def test_cswap_through_extension(fep: SesFep, region) -> None:  # noqa: ANN001
    region.view[0:4] = (5).to_bytes(4, "little")
    ext = CSWAP_EXT.encode((AmoOp.CSWAP, AmoType.UINT32, 0, 5, 9))
    r = handle(fep, amo_hdr(ext, REL | EOM, 4, fetch=True))
    assert r is not None and r.data[20:] == (5).to_bytes(4, "little")
    assert int.from_bytes(region.view[0:4], "little") == 9


@pytest.mark.parametrize(
    ("ext", "payload", "bo", "flags", "access", "rc"),
    [
        (ATOMIC_EXT.encode((AmoOp.SUM, AmoType.FLOAT_COMPLEX, 0)), bytes(8), 0, EOM, Access.ALL, RC.AMO_UNSUPPORTED_DT),
        (ATOMIC_EXT.encode((AmoOp.BXOR, AmoType.DOUBLE, 0)), bytes(8), 0, EOM, Access.ALL, RC.AMO_UNSUPPORTED_OP),
        (ATOMIC_EXT.encode((AmoOp.SUM, AmoType.UINT64, 0)), bytes(6), 0, EOM, Access.ALL, RC.AMO_UNSUPPORTED_SIZE),
        (ATOMIC_EXT.encode((AmoOp.SUM, AmoType.UINT64, 0)), bytes(8), 4, EOM, Access.ALL, RC.AMO_UNALIGNED),
        (ATOMIC_EXT.encode((AmoOp.SUM, AmoType.UINT64, 0)), bytes(8), 64, EOM, Access.ALL, RC.BAD_ADDR),
        (ATOMIC_EXT.encode((AmoOp.SUM, AmoType.UINT64, 0)), bytes(8), 0, 0, Access.ALL, RC.OP_VIOLATION),
        (
            ATOMIC_EXT.encode((AmoOp.SUM, AmoType.UINT64, 0)),
            bytes(8),
            0,
            EOM,
            Access.REMOTE_READ | Access.REMOTE_WRITE,
            RC.PERM_VIOLATION,
        ),
    ],
)
def test_atomic_errors(fep: SesFep, ext: bytes, payload: bytes, bo: int, flags: int, access: Access, rc: int) -> None:
    fep.memory.register(bytearray(64), access, key=KEY)
    r = handle(fep, amo_hdr(ext, REL | flags, len(payload), bo=bo), payload)
    assert r is not None and r.data == resp(rc, 1)


def test_rudi_atomic_refused_on_non_idempotent_region(fep: SesFep, region) -> None:  # noqa: ANN001
    ext = ATOMIC_EXT.encode((AmoOp.SUM, AmoType.UINT64, 0))
    r = handle(fep, amo_hdr(ext, REL | EOM, 8), bytes(8), mode=RUDI)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)


# -- deferrable send and RTR (§6.7) ------------------------------------------------------------------


def defer_hdr(
    som: int,
    flags: int,
    mid: int,
    rlen: int,
    src: int,
    dst: int,
    plen: int = 0,
    moff: int = 0,
    tagged: bool = False,
    tag: int = 0,
) -> bytes:
    op = SesOpcode.DEFERRABLE_TSEND if tagged else SesOpcode.DEFERRABLE_SEND
    tail = (0,) if som else (plen, moff)
    return STANDARD[(som, "buffer")].encode(
        (op, 0, flags | (SOM if som else 0), mid, 0, JOB, PID, RI, src, dst, INIT, tag) + tail + (rlen,)
    )


def test_deferral_rtr_and_restart(fep: SesFep) -> None:
    r = handle(fep, defer_hdr(1, REL, 1, 100, 0x21, 0), b"a" * 64)
    assert r is not None and r.guaranteed and r.data == resp(RC.OK, 1, lst=1)  # the "deferred" signal
    # the initiator truncates the message: EOM, no payload, next offset
    assert handle(fep, defer_hdr(0, REL | EOM, 1, 100, 0x21, 0, 0, 64)) is None
    buf = bytearray(100)
    fep.target.post_recv(res(fep), buf, context="late")
    [rtr] = fep.packets_to_send()
    assert (rtr.peer, rtr.next_hdr, rtr.som, rtr.eom) == (PEER, NextHeader.STANDARD, True, True)
    v = STANDARD[(1, "match")].decode(rtr.ses)
    assert v.opcode == SesOpcode.DEFERRABLE_RTR and v.flags == SOM | EOM
    assert (v.src_restart_token, v.dst_restart_token) == (1, 0x21)  # target token ‖ initiator token
    assert v.initiator == 0x0A000002 and v.job_id == JOB
    # the restarted message carries both tokens and lands in the reserved buffer
    r = handle(fep, defer_hdr(1, REL, 2, 100, 0x21, 1), b"b" * 64)
    assert r is None
    r = handle(fep, defer_hdr(0, REL | EOM, 2, 100, 0x21, 1, 36, 64), b"c" * 36)
    assert r is not None and r.data == ok(2, 100)
    [e] = events(fep)
    assert e.context == "late" and bytes(buf) == b"b" * 64 + b"c" * 36


def test_bad_restart_token_and_deferral_limit(fep: SesFep) -> None:
    r = handle(fep, defer_hdr(1, REL | EOM, 1, 4, 0x21, 0x999), b"abcd")
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)
    for mid in (2, 3):  # max_deferred = 2 in the fixture
        r = handle(fep, defer_hdr(1, REL | EOM, mid, 4, 0x30 + mid, 0), b"abcd")
        assert r is not None and r.data == resp(RC.OK, mid, lst=1)
    r = handle(fep, defer_hdr(1, REL | EOM, 4, 4, 0x40, 0), b"abcd")
    assert r is not None and r.data == resp(RC.NO_MATCH, 4)


def test_rtr_with_unknown_token(fep: SesFep) -> None:
    ses = STANDARD[(1, "match")].encode((SesOpcode.DEFERRABLE_RTR, 0, SOM | EOM, 1, 0, JOB, 0, 0, 0, 7, 5, 6, 0, 0))
    r = handle(fep, ses)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)


def test_unknown_read_return_data_is_undeliverable(fep: SesFep) -> None:
    ses = RESPONSE_DATA.encode((0, ResponseOpcode.RESPONSE_W_DATA, 0, RC.OK, 1, JOB, 0x55, 4, 4, 0))
    r = handle(fep, ses, b"data", nh=NextHeader.RESPONSE_DATA)
    assert r is not None and r.data == resp(RC.UNDELIVERABLE, 0, job=0)


# -- rendezvous (§6.6) -------------------------------------------------------------------------------


def test_rendezvous_eager_then_read_request(fep: SesFep) -> None:
    buf = bytearray(40)
    fep.target.post_recv(res(fep), buf)
    ext = RENDEZVOUS_EXT.encode((10, 2, 11, 12, 1000, 0xABCD))
    ses = som_hdr(SesOpcode.RENDEZVOUS_SEND, REL | EOM, 1, 30) + ext
    r = handle(fep, ses, b"e" * 10)
    assert r is not None and r.data == ok(1, 30)
    assert events(fep) == []  # completes when the rest has been read
    [rd] = fep.packets_to_send()
    v = STANDARD[(1, "none")].decode(rd.ses)
    assert rd.peer == PEER and v.opcode == SesOpcode.READ and v.flags == SOM | EOM | REL
    assert (v.ri_generation, v.pid_on_fep, v.resource_index, v.job_id) == (2, 11, 12, JOB)
    assert (v.buffer_offset, v.match_bits, v.request_length) == (1010, 0xABCD, 20)
    # the initiator FEP answers with the data in the return direction; feed it back
    ret = RESPONSE_DATA.encode(
        (0, ResponseOpcode.RESPONSE_W_DATA, 0, RC.OK, v.message_id, JOB, v.message_id, 20, 20, 0)
    )
    assert fep.target.handle(PEER, NextHeader.RESPONSE_DATA, ret, b"r" * 20) is None
    fep.on_ack(rd.token, NextHeader.RESPONSE, ok(v.message_id, 20))
    [e] = events(fep)
    assert e.return_code == RC.OK and e.length == 30 and bytes(buf[:30]) == b"e" * 10 + b"r" * 20


# -- compatibility with the endpoint's minimal message layer ---------------------------------------


def test_accepts_message_layer_segments(fep: SesFep) -> None:
    from uet.ses.segmenter import Segmenter

    seg = Segmenter(job_id=JOB, initiator=INIT, payload_size=64)
    data = bytes(range(150))
    buf = bytearray(200)
    fep.target.post_recv(res(fep), buf)
    last = None
    for ses, payload, _som, _eom in seg.packets(data, 0x1234, pid_on_fep=PID, resource_index=RI):
        last = handle(fep, ses, bytes(payload))
    assert last is not None and RESPONSE.decode(last.data).modified_length == 150
    assert bytes(buf[:150]) == data


# -- reassembly expiry (§6.1) ------------------------------------------------------------------------


def test_idle_partial_message_expires_with_dropped(fep: SesFep) -> None:
    fep.target.post_recv(res(fep), bytearray(100), context="x")
    assert (
        fep.target.handle(PEER, NextHeader.STANDARD, som_hdr(SesOpcode.SEND, REL, 1, 100), b"a" * 64, pdc=9, now=10)
        is None
    )
    assert handle(fep, som_hdr(SesOpcode.SEND, REL, 2, 100), b"u" * 64) is None  # unexpected, partial
    assert fep.get_timer() == 5_000_000_000
    fep.handle_timer(5_000_000_000)  # only the unexpected one (idle since 0) has expired
    assert events(fep) == [] and not res(fep).matcher.unexpected
    assert fep.get_timer() == 5_000_000_010
    fep.handle_timer(5_000_000_010)
    [e] = events(fep)
    assert (e.return_code, e.context) == (RC.DROPPED, "x")
    assert not res(fep).matcher.unexpected and fep.target.counters["expired"] == 2
    assert fep.get_timer() is None
    r = handle(fep, mid_hdr(SesOpcode.SEND, REL | EOM, 1, 36, 64, 100), b"b" * 36)
    assert r is not None and r.data == resp(RC.DROPPED, 1)


# -- issue "reliability" items 7 and 8 ------------------------------------------------------------

UUD = 3


@pytest.mark.parametrize("mode", [RUDI, UUD])
def test_unreliable_write_and_atomic_need_idempotent_safe_region(fep: SesFep, region, mode: int) -> None:  # noqa: ANN001
    """Item 8: UUD WRITE and ATOMIC obey the idempotent-safe rule RUDI enforces (§2.14, §2.15);
    before the fix a UUD write changed a region that is not idempotent-safe."""
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 1, 4, mb=KEY), b"evil", mode=mode)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)
    ext = ATOMIC_EXT.encode((AmoOp.SUM, AmoType.UINT64, 0))
    r = handle(fep, amo_hdr(ext, REL | EOM, 8), (5).to_bytes(8, "little"), mode=mode)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 1)
    assert bytes(region.view) == bytes(64)
    safe = fep.memory.register(bytearray(8), Access.ALL | Access.IDEMPOTENT_SAFE)
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 2, 4, mb=safe.key), b"good", mode=mode)
    assert r is not None and r.data == ok(2, 4) and bytes(safe.view[:4]) == b"good"


@pytest.mark.parametrize("mode", [RUD, ROD, RUDI])
def test_write_with_stale_generation_is_refused_and_changes_nothing(fep: SesFep, region, mode: int) -> None:  # noqa: ANN001
    """Item 7 (§6.3 step 4, every first packet): a WRITE carrying a generation other than the
    resource's is answered BAD_GENERATION with the current one and places nothing; a packet
    outside the region is BAD_ADDR, a message longer than the region UNSUPPORTED_SIZE (§6.5)."""
    region.access |= Access.IDEMPOTENT_SAFE
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 1, 4, mb=KEY, ri=1, gen=4), b"evil", mode=mode)
    assert r is not None and r.data == resp(RC.BAD_GENERATION, 1, gen=5)
    r = handle(fep, mid_hdr(SesOpcode.WRITE, REL | EOM, 2, 4, 4, 8, mb=KEY, gen=9), b"evil", mode=mode)
    assert r is not None and r.data == resp(RC.BAD_GENERATION, 2, gen=0)
    assert bytes(region.view) == bytes(64)
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 3, 0, bo=65, mb=KEY), b"", mode=mode)
    assert r is not None and r.data == resp(RC.BAD_ADDR, 3)


def test_forged_deferral_releases_the_receive_after_the_reassembly_timeout(fep: SesFep) -> None:
    """Issue 15 item 3: one forged deferrable-send packet bound a posted receive to an RTR toward
    a peer that never restarts the message, for good. The reservation now expires after
    ``reassembly_timeout_ns`` and the receive completes with DROPPED (as one bound to an expired
    partial message does); a restart arriving after that is refused."""
    timeout = fep.target.config.reassembly_timeout_ns
    r = handle(fep, defer_hdr(1, REL | EOM, 1, 4, 0x21, 0), b"evil")
    assert r is not None and r.data == resp(RC.OK, 1, lst=1)
    buf = bytearray(8)
    fep.target.post_recv(res(fep), buf, context="app")
    [rtr] = fep.packets_to_send()
    assert STANDARD[(1, "match")].decode(rtr.ses).opcode == SesOpcode.DEFERRABLE_RTR
    fep.on_ack(rtr.token, NextHeader.RESPONSE, ok(rtr.token[1] if isinstance(rtr.token, tuple) else 0, 0))
    fep.handle_timer(1_000)  # the reservation's clock starts
    assert fep.get_timer() == 1_000 + timeout
    fep.handle_timer(1_000 + timeout - 1)
    assert not [x for x in events(fep) if isinstance(x, RecvCompleted)]
    fep.handle_timer(1_000 + timeout)
    assert fep.target.counters["rtr_expired"] == 1
    [e] = [x for x in events(fep) if isinstance(x, RecvCompleted)]
    assert e.context == "app" and e.return_code == RC.DROPPED  # released, as an expired message's
    buf2 = bytearray(8)
    fep.target.post_recv(res(fep), buf2, context="again")
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 9, 5), b"hello")
    assert r is not None and r.data == ok(9, 5)
    [e] = [x for x in events(fep) if isinstance(x, RecvCompleted)]
    assert e.context == "again" and bytes(buf2[:5]) == b"hello"
    r = handle(fep, defer_hdr(1, REL | EOM, 2, 4, 0x21, 1), b"late")  # the restart, too late
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 2)


# -- issue 15 follow-up: conformance finding SES-020 ----------------------------------------------


def test_reused_message_id_is_a_new_message_on_rud_and_rod(fep: SesFep, region) -> None:  # noqa: ANN001
    """SES-020 (behaviour.md §6.1, §2.6 step 5): PDS removes duplicate packets by PSN, so a RUD/ROD
    request reusing a finished message's id is a new message, on another PDC or the same one.
    Before the fix the target answered it OK from its 10 s memory and dropped its data."""
    for i, (mode, pdc) in enumerate([(RUD, 9), (RUD, 10), (RUD, 10), (ROD, 10)]):
        data = bytes([0x41 + i]) * 8
        r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 5, 8, mb=KEY, bo=32), data, mode=mode, pdc=pdc)
        assert r is None or r.data == ok(5, 8)
        assert bytes(region.view[32:40]) == data
    assert fep.target.counters["duplicates"] == 0


def test_late_packet_of_dropped_message_scoped_to_its_pdc(fep: SesFep) -> None:
    """A late packet of a message that expired (DROPPED) on the same PDC gets DROPPED again (not
    an OK that would hide the loss); the same id on another PDC, or a SOM, starts a new message."""
    fep.target.post_recv(res(fep), bytearray(100))
    assert handle(fep, som_hdr(SesOpcode.SEND, REL, 1, 100), b"a" * 64) is None
    fep.handle_timer(5_000_000_000)
    late = (mid_hdr(SesOpcode.SEND, REL | EOM, 1, 36, 64, 100), b"b" * 36)
    assert handle(fep, *late).data == resp(RC.DROPPED, 1)
    buf = bytearray(100)
    fep.target.post_recv(res(fep), buf)
    assert handle(fep, som_hdr(SesOpcode.SEND, REL, 1, 100), b"c" * 64, pdc=10) is None
    r = handle(fep, *late, pdc=10)
    assert r is not None and r.data == ok(1, 100) and bytes(buf) == b"c" * 64 + b"b" * 36


def test_later_packet_changing_the_opcode_is_refused(fep: SesFep, region) -> None:  # noqa: ANN001
    """RC-023 (behaviour.md §6.3 step 3): a non-first packet must use the first packet's op.
    Before the fix a READ packet with the id of a WRITE being received was served as a read."""
    assert handle(fep, som_hdr(SesOpcode.WRITE, REL, 3, 16, mb=KEY, bo=8), b"a" * 8) is None
    r = handle(fep, mid_hdr(SesOpcode.READ, REL | EOM, 3, 8, 8, 16, mb=KEY, bo=8), b"b" * 8)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 3) and r.guaranteed
    assert bytes(region.view[8:24]) == b"a" * 8 + bytes(8)  # the second half was not written


def test_a_rudi_write_reusing_a_finished_rud_writes_id_is_a_new_message(fep: SesFep) -> None:
    """A RUDI packet is a copy only of a RUDI message whose packet ids it falls among
    (uet.ses.replay): a finished RUD WRITE with the same message id (no packet ids) is another
    message. Before the fix the RUDI WRITE got the RUD one's response back and was never placed
    (conformance RUDI-010 against a long-lived uet-peer: message ids repeat across runs)."""
    buf = bytearray(64)
    fep.memory.register(buf, Access.ALL | Access.IDEMPOTENT_SAFE, key=KEY)
    r = handle(fep, som_hdr(SesOpcode.WRITE, REL | EOM, 5, 8, mb=KEY), b"A" * 8)
    assert r is not None and r.data == ok(5, 8)
    ses = som_hdr(SesOpcode.WRITE, REL | EOM, 5, 16, bo=16, mb=KEY)
    r = fep.target.handle(PEER, NextHeader.STANDARD, ses, b"B" * 16, mode=RUDI, pkt_id=77)
    assert r is not None and r.data == ok(5, 16) and bytes(buf[16:32]) == b"B" * 16
    # its own retransmission (same packet id) is a copy: answered again, placed once
    buf[16:32] = bytes(16)
    assert fep.target.handle(PEER, NextHeader.STANDARD, ses, b"B" * 16, mode=RUDI, pkt_id=77, retx=True) == r
    assert buf[16:32] == bytes(16)


@pytest.mark.parametrize("nh", [NextHeader.SMALL, NextHeader.STANDARD])
def test_a_refused_single_packet_send_leaves_no_unexpected_entry(fep: SesFep, nh: int) -> None:
    """A one-packet SEND (SOM and EOM) whose payload is not its request_length is refused
    OP_VIOLATION; nothing of it may stay on the unexpected list. Before the fix its entry stayed
    there (with a small header no record kept it, so nothing ever expired it): a receive posted
    later took it and was bound for good to a message that would never come (a long-lived
    uet-peer ran out of receives and refused deferrable and rendezvous sends)."""
    if nh == NextHeader.SMALL:
        ses = SMALL.encode((SesOpcode.SEND, 0, SOM | EOM | REL, 9000, 0, JOB, PID, RI, 0))
    else:
        ses = som_hdr(SesOpcode.SEND, REL | EOM, 6, 9000)
    r = handle(fep, ses, b"short", nh=nh)
    assert r is not None and r.data == resp(RC.OP_VIOLATION, 6 if nh == NextHeader.STANDARD else 0)
    assert not res(fep).matcher.unexpected
    buf = bytearray(16)
    fep.target.post_recv(res(fep), buf)
    assert events(fep) == []  # the receive waits for a real message
    r = handle(fep, som_hdr(SesOpcode.SEND, REL | EOM, 7, 5), b"hello")
    assert r is not None and r.data == ok(7, 5)
    [e] = events(fep)
    assert e.length == 5 and buf[:5] == b"hello"
