"""Initiator SES engine: exact request packets per operation, response interpretation, retries."""

from __future__ import annotations

import pytest

from uet.ses import atomics
from uet.ses.errors import BadMkey, Dropped, NoMatch, OpViolation, TooLong, Undeliverable
from uet.ses.events import OpCompleted, OpFailed
from uet.ses.initiator import InitiatorConfig, SesAddress, SesInitiator
from uet.wire.pds import NextHeader
from uet.wire.ses import (
    ATOMIC_EXT,
    CSWAP_EXT,
    MEDIUM,
    MEDIUM_HD,
    RENDEZVOUS_EXT,
    RESPONSE,
    RESPONSE_DATA,
    STANDARD,
    AmoOp,
    AmoType,
    ResponseOpcode,
    ReturnCode,
    SesFlag,
    SesOpcode,
)

SOM, EOM, HD, REL, DC = SesFlag.SOM, SesFlag.EOM, SesFlag.HD, SesFlag.REL, SesFlag.DC
RC = ReturnCode
DEST = SesAddress("10.0.0.2", pid_on_fep=3, resource_index=1, ri_generation=4, job_id=0x42)
INIT = 0x0A000001
MS = 1_000_000


class Rng:
    """Deterministic stand-in for random.Random: message ids from 0x100, fixed backoff draws."""

    def __init__(self) -> None:
        self.draws: list[tuple[int, int]] = []

    def getrandbits(self, k: int) -> int:
        return 0x100

    def randint(self, a: int, b: int) -> int:
        self.draws.append((a, b))
        return a


def mk(**kw: object) -> SesInitiator:
    cfg = InitiatorConfig(initiator_id=INIT, max_payload=64, **kw)  # type: ignore[arg-type]
    return SesInitiator(cfg, rng=Rng())  # type: ignore[arg-type]


def resp(
    rc: int, mid: int = 0, *, ml: int = 0, gen: int = 0, lst: int = 0, opcode: int = ResponseOpcode.RESPONSE
) -> bytes:
    return RESPONSE.encode((lst, opcode, 0, rc, mid, gen, 0x42, ml))


def ack_all(ini: SesInitiator, pkts: list, nh: int = 0, data: bytes = b"", now: int = 0) -> None:
    for p in pkts:
        ini.on_ack(p.token, nh, data, now)


def the_event(ini: SesInitiator) -> OpCompleted | OpFailed:
    e = ini.next_event()
    assert e is not None and ini.next_event() is None
    return e


# -- request packets -----------------------------------------------------------------------------


def test_single_packet_send_uses_medium_header() -> None:
    ini = mk()
    op = ini.send(DEST, b"hello", context="c")
    [p] = ini.packets_to_send()
    assert (p.peer, p.next_hdr, p.som, p.eom, p.job_id) == ("10.0.0.2", NextHeader.MEDIUM, True, True, 0x42)
    assert p.ses == MEDIUM.encode((SesOpcode.SEND, 0, SOM | EOM | REL, 5, 4, 0x42, 3, 1, 0, INIT, 0))
    assert bytes(p.payload) == b"hello"
    ini.on_ack(p.token, NextHeader.RESPONSE, resp(RC.OK, 0, ml=5, opcode=ResponseOpcode.DEFAULT_RESPONSE))
    assert the_event(ini) == OpCompleted(op, "send", None, 5, "c")
    assert ini.idle()


def test_single_packet_send_standard_when_medium_disabled() -> None:
    ini = mk(use_medium=False)
    ini.send(DEST, b"hello", tag=0x77, dc=True)
    [p] = ini.packets_to_send()
    assert p.next_hdr == NextHeader.STANDARD
    want = STANDARD[(1, "none")].encode(
        (SesOpcode.TAGGED_SEND, 0, SOM | EOM | REL | DC, 0x100, 4, 0x42, 3, 1, 0, INIT, 0x77, 0, 5)
    )
    assert p.ses == want


def test_multi_packet_send_with_header_data() -> None:
    ini = mk()
    data = bytes(range(150))
    ini.send(DEST, data, header_data=0x1234)
    ps = ini.packets_to_send()
    assert [(p.som, p.eom, len(p.payload)) for p in ps] == [(True, False, 64), (False, False, 64), (False, True, 22)]
    assert ps[0].ses == STANDARD[(1, "none")].encode(
        (SesOpcode.SEND, 0, SOM | REL | HD, 0x100, 4, 0x42, 3, 1, 0, INIT, 0, 0x1234, 150)
    )
    assert ps[1].ses == STANDARD[(0, "none")].encode(
        (SesOpcode.SEND, 0, REL, 0x100, 4, 0x42, 3, 1, 0, INIT, 0, 64, 64, 150)
    )
    assert ps[2].ses == STANDARD[(0, "none")].encode(
        (SesOpcode.SEND, 0, REL | EOM, 0x100, 4, 0x42, 3, 1, 0, INIT, 0, 22, 128, 150)
    )
    assert b"".join(bytes(p.payload) for p in ps) == data
    assert len({p.token for p in ps}) == 3
    ack_all(ini, ps[:2])
    assert ini.next_event() is None  # not until every packet is acknowledged
    ack_all(ini, ps[2:])  # implicit (CACK) acknowledgement counts as success
    e = the_event(ini)
    assert isinstance(e, OpCompleted) and e.modified_length == 150


def test_write_headers() -> None:
    ini = mk()
    ini.write(DEST, 0xABC, 16, b"data")
    ini.write(DEST, 0xABC, 0, b"data", header_data=9)
    ini.write(DEST, 0xABC, 16, b"data", header_data=9)
    p1, p2, p3 = ini.packets_to_send()
    assert p1.ses == MEDIUM.encode((SesOpcode.WRITE, 0, SOM | EOM | REL, 4, 4, 0x42, 3, 1, 16, INIT, 0xABC))
    assert p2.ses == MEDIUM_HD.encode((SesOpcode.WRITE, 0, SOM | EOM | REL | HD, 4, 4, 0x42, 3, 1, 9, INIT, 0xABC))
    assert p3.next_hdr == NextHeader.STANDARD  # header data and an offset: standard header
    assert p3.ses == STANDARD[(1, "none")].encode(
        (SesOpcode.WRITE, 0, SOM | EOM | REL | HD, 0x102, 4, 0x42, 3, 1, 16, INIT, 0xABC, 9, 4)
    )


def test_absolute_addressing_clears_rel() -> None:
    ini = mk(use_medium=False)
    ini.send(SesAddress("10.0.0.2", 3, 1, 0, 0x42, relative=False), b"x")
    [p] = ini.packets_to_send()
    assert STANDARD[(1, "none")].decode(p.ses).flags == SOM | EOM


def test_read_split_into_single_packet_messages_and_reassembled() -> None:
    ini = mk()
    op = ini.read(DEST, 0xABC, 1000, 150)
    ps = ini.packets_to_send()
    hdrs = [STANDARD[(1, "none")].decode(p.ses) for p in ps]
    assert [(h.opcode, h.flags, h.buffer_offset, h.request_length, h.match_bits) for h in hdrs] == [
        (SesOpcode.READ, SOM | EOM | REL, 1000, 64, 0xABC),
        (SesOpcode.READ, SOM | EOM | REL, 1064, 64, 0xABC),
        (SesOpcode.READ, SOM | EOM | REL, 1128, 22, 0xABC),
    ]
    assert [h.message_id for h in hdrs] == [0x100, 0x101, 0x102]
    data = bytes(range(150))
    # chunk 0: data in the ACK; chunks 1 and 2: RESPONSE OK then return data
    body0 = RESPONSE_DATA.encode((0, 2, 0, RC.OK, 0x100, 0x42, 0x100, 64, 64, 0)) + data[:64]
    ini.on_ack(ps[0].token, NextHeader.RESPONSE_DATA, body0)
    ini.on_ack(ps[1].token, NextHeader.RESPONSE, resp(RC.OK, 0x101, ml=64))
    ret1 = RESPONSE_DATA.encode((0, 2, 0, RC.OK, 0x101, 0x42, 0x101, 64, 64, 0))
    assert ini.on_return_data("10.0.0.2", ret1, data[64:128]) == RC.OK
    ret2 = RESPONSE_DATA.encode((0, 2, 0, RC.OK, 0x102, 0x42, 0x102, 22, 22, 0))
    assert ini.on_return_data("10.0.0.2", ret2, data[128:]) == RC.OK
    assert ini.next_event() is None  # chunk 2's request not yet acknowledged
    ini.on_ack(ps[2].token)
    assert the_event(ini) == OpCompleted(op, "read", data, 150)


def test_read_return_data_errors() -> None:
    ini = mk()
    ini.read(DEST, 0xABC, 0, 20)
    [p] = ini.packets_to_send()
    bad_id = RESPONSE_DATA.encode((0, 2, 0, RC.OK, 0x999, 0x42, 0x999, 4, 4, 0))
    assert ini.on_return_data("10.0.0.2", bad_id, b"abcd") == RC.UNDELIVERABLE
    wrong_peer = RESPONSE_DATA.encode((0, 2, 0, RC.OK, 0x100, 0x42, 0x100, 20, 20, 0))
    assert ini.on_return_data("10.0.0.9", wrong_peer, bytes(20)) == RC.UNDELIVERABLE
    beyond = RESPONSE_DATA.encode((0, 2, 0, RC.OK, 0x100, 0x42, 0x100, 8, 20, 16))
    assert ini.on_return_data("10.0.0.2", beyond, bytes(8)) == RC.OP_VIOLATION
    ini.on_ack(p.token, NextHeader.RESPONSE, resp(RC.OK, 0x100, ml=12))  # truncated read
    e = the_event(ini)
    assert isinstance(e, OpFailed) and isinstance(e.error, OpViolation)


def test_atomic_packets_and_fetch_result() -> None:
    ini = mk()
    op = ini.atomic(DEST, 0xABC, 8, AmoOp.SUM, AmoType.INT32, [5, -1], fetch=True)
    ini.atomic(DEST, 0xABC, 16, AmoOp.CSWAP_GT, AmoType.UINT64, compare=3, swap=4)
    p1, p2 = ini.packets_to_send()
    ext = ATOMIC_EXT.encode((AmoOp.SUM, AmoType.INT32, 0))
    assert (
        p1.ses
        == STANDARD[(1, "none")].encode(
            (SesOpcode.FETCHING_ATOMIC, 0, SOM | EOM | REL, 0x100, 4, 0x42, 3, 1, 8, INIT, 0xABC, 0, 8)
        )
        + ext
    )
    assert bytes(p1.payload) == atomics.encode_values(AmoType.INT32, [5, -1])
    cext = CSWAP_EXT.encode((AmoOp.CSWAP_GT, AmoType.UINT64, 0, 3, 4))
    assert (
        p2.ses
        == STANDARD[(1, "none")].encode(
            (SesOpcode.ATOMIC, 0, SOM | EOM | REL, 0x101, 4, 0x42, 3, 1, 16, INIT, 0xABC, 0, 8)
        )
        + cext
    )
    assert bytes(p2.payload) == b""
    prior = atomics.encode_values(AmoType.INT32, [-7, 9])
    body = RESPONSE_DATA.encode((0, 2, 0, RC.OK, 0x100, 0x42, 0x100, 8, 8, 0)) + prior
    ini.on_ack(p1.token, NextHeader.RESPONSE_DATA, body)
    assert ini.next_event() == OpCompleted(op, "atomic", (-7, 9), 8)


def test_rendezvous_packets_and_completion_after_remote_read() -> None:
    ini = mk(local_pid=5, local_index=6, local_generation=7, eager_length=64)
    data = bytes(range(200))
    ini.send(DEST, data, protocol="rendezvous")
    [p] = ini.packets_to_send()
    h = STANDARD[(1, "none")].decode(p.ses)
    ext = RENDEZVOUS_EXT.decode(p.ses[44:])
    assert len(p.ses) == 44 + 24 and h.opcode == SesOpcode.RENDEZVOUS_SEND and h.request_length == 200
    assert (ext.eager_length, ext.read_ri_generation, ext.read_pid_on_fep, ext.read_resource_index) == (64, 7, 5, 6)
    assert bytes(p.payload) == data[:64]
    region = ini.memory.get(ext.read_match_bits)
    assert region is not None and region.job == 0x42 and bytes(region.view) == data
    ini.on_ack(p.token, NextHeader.RESPONSE, resp(RC.OK, 0x100, ml=200, opcode=0))
    assert ini.next_event() is None  # the target has not read the rest yet
    region.on_remote_read(64, 100)  # type: ignore[misc]
    assert ini.next_event() is None
    region.on_remote_read(164, 36)  # type: ignore[misc]
    e = the_event(ini)
    assert isinstance(e, OpCompleted) and e.kind == "rendezvous"
    assert ini.memory.get(ext.read_match_bits) is None  # registration removed


def test_rendezvous_error_deregisters() -> None:
    ini = mk(eager_length=8)
    ini.send(DEST, bytes(100), protocol="rendezvous")
    [p] = ini.packets_to_send()
    ini.on_ack(p.token, NextHeader.RESPONSE, resp(RC.TOO_LONG, 0x100))
    e = the_event(ini)
    assert isinstance(e, OpFailed) and isinstance(e.error, TooLong) and len(ini.memory) == 0


# -- deferrable send -------------------------------------------------------------------------------


def test_deferrable_send_rtr_and_restart() -> None:
    ini = mk(deferrable_threshold=100)
    data = bytes(range(150))
    op = ini.send(DEST, data, tag=9)
    [p0] = ini.packets_to_send(limit=1)  # only the first packet is out
    v = STANDARD[(1, "buffer")].decode(p0.ses)
    assert v.opcode == SesOpcode.DEFERRABLE_TSEND and (v.src_restart_token, v.dst_restart_token) == (1, 0)
    assert v.match_bits == 9 and v.request_length == 150
    ini.on_ack(p0.token, NextHeader.RESPONSE, resp(RC.OK, 0x100, lst=1))  # deferred
    [trunc] = ini.packets_to_send()
    assert trunc.ses == STANDARD[(0, "buffer")].encode(
        (SesOpcode.DEFERRABLE_TSEND, 0, REL | EOM, 0x100, 4, 0x42, 3, 1, 1, 0, INIT, 9, 0, 64, 150)
    )
    assert bytes(trunc.payload) == b""
    ini.on_ack(trunc.token, now=10)
    assert ini.get_timer() == 10 + 5_000_000_000  # waiting for RTR
    from uet.ses.packets import parse_request

    rtr = STANDARD[(1, "match")].encode((SesOpcode.DEFERRABLE_RTR, 0, SOM | EOM, 1, 0, 0x42, 0, 0, 0, 2, 0x55, 1, 0, 0))
    req = parse_request(NextHeader.STANDARD, rtr)
    assert ini.on_rtr("10.0.0.7", req) == RC.OP_VIOLATION  # not the target we deferred to
    assert ini.on_rtr("10.0.0.2", req) == RC.OK
    assert ini.get_timer() is None
    ps = ini.packets_to_send()
    assert len(ps) == 3
    v = STANDARD[(1, "buffer")].decode(ps[0].ses)
    assert (v.src_restart_token, v.dst_restart_token, v.message_id) == (1, 0x55, 0x101)
    assert b"".join(bytes(p.payload) for p in ps) == data
    ack_all(ini, ps)
    assert the_event(ini) == OpCompleted(op, "deferrable", None, 150)


def test_deferred_send_times_out_without_rtr() -> None:
    ini = mk(deferrable_threshold=10)
    ini.send(DEST, bytes(20))
    [p] = ini.packets_to_send()
    ini.on_ack(p.token, NextHeader.RESPONSE, resp(RC.OK, 0x100, lst=1), now=0)
    ini.handle_timer(4_999_999_999)
    assert ini.next_event() is None
    ini.handle_timer(5_000_000_000)
    e = the_event(ini)
    assert isinstance(e, OpFailed) and isinstance(e.error, Dropped)


# -- errors and retries ----------------------------------------------------------------------------


def test_no_match_cancels_rest_and_retries_with_doubling_backoff() -> None:
    ini = mk(max_message_retries=2)
    data = bytes(200)
    op = ini.send(DEST, data)
    first = ini.packets_to_send(limit=2)
    ini.on_ack(first[0].token, NextHeader.RESPONSE, resp(RC.NO_MATCH, 0x100), now=0)
    [cancel] = ini.packets_to_send()
    assert cancel.ses == STANDARD[(0, "none")].encode(
        (SesOpcode.MSG_ERROR, 0, REL | EOM, 0x100, 4, 0x42, 3, 1, 0, INIT, 0, 0, 128, 200)
    )
    assert ini.get_timer() is None  # waits for the outstanding ACKs first
    ini.on_ack(first[1].token, NextHeader.RESPONSE, resp(RC.NO_MATCH, 0x100), now=1)
    ini.on_ack(cancel.token, now=2)
    assert ini.get_timer() == 2 + 50 * MS
    assert ini.packets_to_send() == []
    ini.handle_timer(2 + 50 * MS)
    retry = ini.packets_to_send()
    assert len(retry) == 4 and STANDARD[(1, "none")].decode(retry[0].ses).message_id == 0x101
    ack_all(ini, retry[:1], NextHeader.RESPONSE, resp(RC.NO_MATCH, 0x101), now=100 * MS)
    ack_all(ini, retry[1:], now=100 * MS)
    ack_all(ini, ini.packets_to_send(), now=100 * MS)
    assert ini.get_timer() == 100 * MS + 100 * MS  # doubled
    assert ini._rng.draws == [(50 * MS, 100 * MS)] * 2  # type: ignore[attr-defined]  # noqa: SLF001
    ini.handle_timer(10**12)
    last = ini.packets_to_send()
    ack_all(ini, last[:1], NextHeader.RESPONSE, resp(RC.NO_MATCH, 0x102))
    ack_all(ini, last[1:])
    e = the_event(ini)
    assert isinstance(e, OpFailed) and e.op == op and isinstance(e.error, NoMatch)


def test_bad_generation_adopts_generation_and_resends_at_once() -> None:
    ini = mk(use_medium=False)
    ini.send(DEST, b"x")
    [p] = ini.packets_to_send()
    ini.on_ack(p.token, NextHeader.RESPONSE, resp(RC.BAD_GENERATION, 0x100, gen=9))
    [p2] = ini.packets_to_send()
    assert STANDARD[(1, "none")].decode(p2.ses).ri_generation == 9
    ini.on_ack(p2.token)
    assert isinstance(the_event(ini), OpCompleted)


def test_other_codes_fail_the_operation() -> None:
    ini = mk()
    ini.write(DEST, 0xBAD, 0, b"x")
    [p] = ini.packets_to_send()
    ini.on_ack(p.token, NextHeader.RESPONSE, resp(RC.BAD_MKEY))
    e = the_event(ini)
    assert isinstance(e, OpFailed) and isinstance(e.error, BadMkey) and e.error.return_code == RC.BAD_MKEY


def test_pds_failure_is_undeliverable_and_late_acks_ignored() -> None:
    ini = mk()
    ini.send(DEST, bytes(100))
    p1, p2 = ini.packets_to_send()
    ini.on_failed(p1.token, "rto exhausted", None)
    ini.on_ack(p2.token)
    e = the_event(ini)
    assert isinstance(e, OpFailed) and isinstance(e.error, Undeliverable)
    ini.on_ack(p2.token)  # unknown now: ignored
    ini.on_ack(("junk",))
    assert ini.next_event() is None and ini.idle()


def test_null_default_response_and_truncated_send() -> None:
    ini = mk()
    a = ini.send(DEST, b"hello")
    b = ini.send(DEST, b"hello")
    pa, pb = ini.packets_to_send()
    ini.on_ack(pa.token, NextHeader.RESPONSE, resp(RC.NULL, opcode=ResponseOpcode.DEFAULT_RESPONSE))
    ini.on_ack(pb.token, NextHeader.RESPONSE, resp(RC.OK, ml=4))
    assert ini.next_event() == OpCompleted(a, "send", None, 5)
    assert ini.next_event() == OpCompleted(b, "send", None, 4)


def test_undecodable_response_fails() -> None:
    ini = mk()
    ini.send(DEST, b"x")
    [p] = ini.packets_to_send()
    ini.on_ack(p.token, NextHeader.RESPONSE, b"\x01")
    e = the_event(ini)
    assert isinstance(e, OpFailed) and isinstance(e.error, OpViolation)


def test_config_validation() -> None:
    with pytest.raises(ValueError):
        InitiatorConfig(max_payload=0x4000)


def test_bad_generation_retry_for_read_chunk_and_atomic() -> None:
    ini = mk()
    rd = ini.read(DEST, 0xABC, 0, 100)
    am = ini.atomic(DEST, 0xABC, 0, AmoOp.SUM, AmoType.UINT64, [1])
    r0, r1, a0 = ini.packets_to_send()
    ini.on_ack(r1.token, NextHeader.RESPONSE, resp(RC.BAD_GENERATION, 0x101, gen=6))
    ini.on_ack(a0.token, NextHeader.RESPONSE, resp(RC.BAD_GENERATION, 0x102, gen=6))
    r1b, a0b = ini.packets_to_send()
    h = STANDARD[(1, "none")].decode(r1b.ses)
    assert (h.ri_generation, h.buffer_offset, h.request_length) == (6, 64, 36)
    assert STANDARD[(1, "none")].decode(a0b.ses).ri_generation == 6
    body = RESPONSE_DATA.encode((0, 2, 0, RC.OK, 0x100, 0x42, 0x100, 64, 64, 0)) + b"A" * 64
    ini.on_ack(r0.token, NextHeader.RESPONSE_DATA, body)
    body = RESPONSE_DATA.encode((0, 2, 0, RC.OK, h.message_id, 0x42, h.message_id, 36, 36, 0)) + b"B" * 36
    ini.on_ack(r1b.token, NextHeader.RESPONSE_DATA, body)
    ini.on_ack(a0b.token)
    got = {e.op: e for e in (ini.next_event(), ini.next_event()) if e is not None}
    read = got[rd]
    assert isinstance(read, OpCompleted) and read.result == b"A" * 64 + b"B" * 36 and isinstance(got[am], OpCompleted)
