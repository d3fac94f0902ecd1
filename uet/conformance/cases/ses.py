"""SES: every opcode, the return codes a target produces, matching, RMA bounds and access rights,
deferrable send and RTR (behaviour.md §1.2, §6.3–§6.9; wire-format.md §8, §11)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import (
    OP,
    RC,
    F,
    check,
    expect_no_error,
    expect_ok,
    expect_rc,
    need_region,
    op,
    opened,
    rc_name,
    read_back,
    response,
)
from uet.conformance.session import Session, Skipped
from uet.conformance.wirekit import Reply, ses_medium, ses_small, ses_standard
from uet.wire import pds as P
from uet.wire import ses as S

O = "ses-opcode"  # noqa: E741
E = "ses-rc"
M = "ses-match"
B = "ses-rma"
D = "ses-defer"


def _tagged_recv(s: Session, truncate: bool) -> int:
    r = s.target.receive(tagged=True, truncate=truncate)
    if r is None:
        raise Skipped(f"no {'truncating ' if truncate else ''}tagged receive known (give --receive SIZE:TAG"
                      f"{':trunc' if truncate else ''})")  # fmt: skip
    return r.tag  # type: ignore[return-value]


# -- opcodes -------------------------------------------------------------------------------------------


@case("SES-001", O, "NO_OP succeeds", "wire-format.md §8.5")
def _noop(s: Session) -> None:
    expect_ok(op(s, None, OP.NO_OP))


@case("SES-002", O, "SEND succeeds and reports the bytes placed", "behaviour.md §6.9")
def _send(s: Session) -> None:
    r = expect_ok(op(s, None, OP.SEND, b"hello, uet"))
    if r.ses is not None and r.rc == RC.OK and r.ses.opcode == S.ResponseOpcode.RESPONSE:
        check(response(r).modified_length == 10, "modified_length 10", r)


@case("SES-003", O, "a response echoes the request's message ID", "wire-format.md §11.1")
def _mid(s: Session) -> None:
    r = op(s, None, OP.READ, match_bits=0xBAD, request_length=8, message_id=0x5A17)
    check(r.ses is not None and r.ses.message_id == 0x5A17, "message_id 0x5A17", r)


@case("SES-004", O, "a response echoes the request's JobID", "wire-format.md §11.1")
def _job(s: Session) -> None:
    r = op(s, None, OP.READ, match_bits=0xBAD, request_length=8)
    check(r.ses is not None and r.ses.job_id == s.target.job, f"job_id {s.target.job:#x}", r)


@case("SES-005", O, "TAGGED_SEND to a posted tagged receive succeeds from the expected list", "behaviour.md §6.4")
def _tsend(s: Session) -> None:
    tag = _tagged_recv(s, False)
    r = expect_rc(op(s, None, OP.TAGGED_SEND, b"tag!", match_bits=tag), RC.OK)
    check(response(r).list == 0, "list 0 (expected list)", r)


@case("SES-006", O, "WRITE succeeds and the data lands", "behaviour.md §6.5")
def _write(s: Session) -> None:
    reg = need_region(s, "rwa")
    p = opened(s)
    data = s.rng.randbytes(16)
    expect_ok(op(s, p, OP.WRITE, data, match_bits=reg.key, buffer_offset=64))
    check(read_back(s, p, reg.key, 64, 16) == data, "the written bytes read back")


@case("SES-007", O, "WRITE with header data (HD) succeeds", "behaviour.md §6.5")
def _write_hd(s: Session) -> None:
    reg = need_region(s, "rwa")
    expect_ok(op(s, None, OP.WRITE, b"imm", match_bits=reg.key, buffer_offset=96, flags=F.SOM | F.EOM | F.REL | F.HD,
                 header_data=0x1122334455667788))  # fmt: skip


@case("SES-008", O, "READ returns the requested bytes in a response with data", "behaviour.md §6.5")
def _read(s: Session) -> None:
    reg = need_region(s, "rwa")
    p = opened(s)
    data = s.rng.randbytes(16)
    op(s, p, OP.WRITE, data, match_bits=reg.key, buffer_offset=128)
    r = expect_rc(op(s, p, OP.READ, match_bits=reg.key, buffer_offset=128, request_length=16), RC.OK)
    check(r.pds.next_hdr in (5, 6) and r.data[:16] == data, "response with data holding the 16 bytes", r)


@case(
    "SES-009", O, "READ response: read_request_message_id, payload_length and modified_length", "wire-format.md §11.2"
)
def _read_fields(s: Session) -> None:
    reg = need_region(s, "r")
    r = expect_rc(op(s, None, OP.READ, match_bits=reg.key, request_length=8, message_id=0x3131), RC.OK)
    if r.pds.next_hdr == P.NextHeader.RESPONSE_DATA:
        h = r.ses
        check(h.read_request_message_id == 0x3131 and h.payload_length == 8 and h.modified_length == 8,
              "read_request_message_id 0x3131, payload_length 8, modified_length 8", r)  # fmt: skip
    else:
        check(r.pds.next_hdr == P.NextHeader.SMALL_RESPONSE_DATA and r.ses.payload_length == 8,
              "a response with data (next_hdr 5 or 6) with payload_length 8", r)  # fmt: skip


@case("SES-010", O, "DATAGRAM_SEND succeeds", "wire-format.md §8.5")
def _dgram(s: Session) -> None:
    expect_ok(op(s, None, OP.DATAGRAM_SEND, b"dgram"))


@case("SES-011", O, "MSG_ERROR for a message the target never saw is answered INITIATOR_ERR", "behaviour.md §6.9")
def _msgerr(s: Session) -> None:
    expect_rc(op(s, None, OP.MSG_ERROR, message_id=0x7777), RC.INITIATOR_ERR)


@case("SES-012", O, "DEFERRABLE_RTR with an unknown restart token is refused with OP_VIOLATION", "behaviour.md §6.7")
def _rtr_unknown(s: Session) -> None:
    expect_rc(op(s, None, OP.DEFERRABLE_RTR, src_token=0x1111, dst_token=0x2222), RC.OP_VIOLATION)


for _n, _opc in enumerate((0x12, 0x20, 0x3F)):

    def _mk(opc: int = _opc, n: int = _n) -> None:
        @case(f"SES-{n + 13:03d}", O, f"reserved opcode {opc:#04x} is refused with UNSUPPORTED_OP", "behaviour.md §6.9")
        def _t(s: Session) -> None:
            expect_rc(op(s, None, opc), RC.UNSUPPORTED_OP)

    _mk()


@case("SES-016", O, "TSEND_ATOMIC with its atomic extension is answered (OK or an error code)", "wire-format.md §8.5")
def _tsend_atomic(s: Session) -> None:
    ext = S.ATOMIC_EXT.encode(S.ATOMIC_EXT.make(atomic_opcode=S.AmoOp.SUM, atomic_datatype=S.AmoType.UINT64))
    r = op(s, None, OP.TSEND_ATOMIC, (1).to_bytes(8, "big"), ext, match_bits=0x515)
    check(r.is_ack and r.ses is not None, "an ACK with a SES response", r)


@case("SES-017", O, "a medium-header SEND succeeds", "wire-format.md §8.4")
def _medium(s: Session) -> None:
    p = opened(s)
    r = p.exchange(ses_medium(s.ses(opcode=OP.SEND), b"medium"), next_hdr=P.NextHeader.MEDIUM)
    expect_ok(r)


@case("SES-018", O, "a small-header WRITE is answered (OK, or UNSUPPORTED_OP without optimized keys)",
      "wire-format.md §8.3")  # fmt: skip
def _small(s: Session) -> None:
    p = opened(s)
    r = p.exchange(ses_small(s.ses(opcode=OP.WRITE, buffer_offset=0), b"sm"), next_hdr=P.NextHeader.SMALL)
    check(r.is_ack and r.rc in (RC.OK, RC.NULL, RC.UNSUPPORTED_OP, RC.BAD_MKEY), "an answer, not a drop", r)


@case("SES-019", O, "the response opcode is RESPONSE (1) for errors", "wire-format.md §11.1", SHOULD)
def _resp_opcode(s: Session) -> None:
    r = op(s, None, OP.READ, match_bits=0xBAD, request_length=8)
    check(r.ses is not None and r.ses.opcode == S.ResponseOpcode.RESPONSE, "opcode RESPONSE", r)


@case("SES-020", O, "a message ID may be reused once its message completed: the second WRITE is applied",
      "behaviour.md §6.1")  # fmt: skip
def _mid_reuse(s: Session) -> None:
    reg = need_region(s, "rwa")
    mid = s.ses().message_id
    expect_ok(op(s, opened(s), OP.WRITE, b"first!!!", match_bits=reg.key, buffer_offset=1024, message_id=mid))
    p = opened(s)
    expect_ok(op(s, p, OP.WRITE, b"second!!", match_bits=reg.key, buffer_offset=1032, message_id=mid))
    got = read_back(s, p, reg.key, 1032, 8)
    check(got == b"second!!", "the second message's bytes in memory (not dropped as a 'duplicate')", f"{got!r}")


# -- return codes ------------------------------------------------------------------------------------


def _rc_case(cid: str, title: str, section: str, rc: int, **kw: Any) -> None:
    @case(cid, E, title, section)
    def _t(s: Session) -> None:
        args = dict(kw)
        payload = args.pop("payload", b"")
        opcode = args.pop("opcode", OP.SEND)
        for k, v in list(args.items()):
            if callable(v):
                args[k] = v(s)
        expect_rc(op(s, None, opcode, payload, **args), rc)


_rc_case("RC-001", "relative addressing with an unknown JobID → BAD_JOB_ID", "behaviour.md §1.2", RC.BAD_JOB_ID,
         payload=b"j", job=lambda s: (s.target.job + 0x5151) & 0xFFFFFF)  # fmt: skip
_rc_case("RC-025", "an unknown JobID with an unknown PIDonFEP → BAD_JOB_ID (the job is resolved first)",
         "behaviour.md §6.3", RC.BAD_JOB_ID, payload=b"j",
         job=lambda s: (s.target.job + 0x5151) & 0xFFFFFF, pid=lambda s: (s.target.pid + 0x777) & 0xFFF)  # fmt: skip
_rc_case("RC-002", "relative addressing with an unknown PIDonFEP → BAD_PID", "behaviour.md §6.9", RC.BAD_PID,
         payload=b"p", pid=lambda s: (s.target.pid + 0x777) & 0xFFF)  # fmt: skip
_rc_case("RC-003", "relative addressing with an unknown resource index → BAD_INDEX", "behaviour.md §6.9",
         RC.BAD_INDEX, payload=b"i", ri=lambda s: (s.target.ri + 0x555) & 0xFFF)  # fmt: skip
_rc_case("RC-004", "absolute addressing to an unknown (PIDonFEP, RI) → UNDELIVERABLE", "behaviour.md §1.2",
         RC.UNDELIVERABLE, payload=b"u", flags=F.SOM | F.EOM, pid=lambda s: (s.target.pid + 0x777) & 0xFFF)  # fmt: skip
_rc_case("RC-005", "a stale resource-index generation → BAD_GENERATION", "behaviour.md §6.3", RC.BAD_GENERATION,
         payload=b"g", generation=0xA5)  # fmt: skip
_rc_case("RC-006", "SES version 1 → UNCOR", "behaviour.md §6.3", RC.UNCOR, payload=b"v", version=1)
_rc_case("RC-007", "the IE flag → INITIATOR_ERR", "wire-format.md §8.1", RC.INITIATOR_ERR, payload=b"e",
         flags=F.SOM | F.EOM | F.REL | F.IE)  # fmt: skip
_rc_case("RC-008", "WRITE with an unknown memory key → BAD_MKEY", "behaviour.md §6.5", RC.BAD_MKEY, opcode=OP.WRITE,
         payload=b"k", match_bits=0x0BAD0BAD0BAD0BAD)  # fmt: skip
_rc_case("RC-009", "READ with an unknown memory key → BAD_MKEY", "behaviour.md §6.5", RC.BAD_MKEY, opcode=OP.READ,
         match_bits=0x0BAD0BAD0BAD0BAE, request_length=8)  # fmt: skip


@case("RC-010", E, "absolute addressing reaches the target from another JobID", "behaviour.md §1.2")
def _abs_other_job(s: Session) -> None:
    expect_ok(op(s, None, OP.NO_OP, flags=F.SOM | F.EOM, job=(s.target.job + 3) & 0xFFFFFF))


@case("RC-011", E, "BAD_GENERATION carries the target's current generation", "behaviour.md §6.3")
def _gen_value(s: Session) -> None:
    r = expect_rc(op(s, None, OP.SEND, b"g", generation=0x5A), RC.BAD_GENERATION)
    check(response(r).ri_generation != 0x5A, "ri_generation = the current one, not the request's 0x5A", r)


@case("RC-012", E, "a region restricted to another JobID answers BAD_MKEY", "behaviour.md §6.5")
def _other_job_region(s: Session) -> None:
    reg = need_region(s, "rwa", job="other")
    expect_rc(op(s, None, OP.READ, match_bits=reg.key, request_length=8), RC.BAD_MKEY)


@case("RC-013", E, "an error response has modified_length 0", "behaviour.md §6.9")
def _err_len(s: Session) -> None:
    r = expect_rc(op(s, None, OP.WRITE, b"xyz", match_bits=0x0BAD), RC.BAD_MKEY)
    check(response(r).modified_length == 0, "modified_length 0", r)


@case("RC-014", E, "WRITE to a read-only region → PERM_VIOLATION", "behaviour.md §6.5")
def _perm_w(s: Session) -> None:
    reg = need_region(s, "r")
    expect_rc(op(s, None, OP.WRITE, b"no", match_bits=reg.key), RC.PERM_VIOLATION)


@case("RC-015", E, "READ from a write-only region → PERM_VIOLATION", "behaviour.md §6.5")
def _perm_r(s: Session) -> None:
    reg = need_region(s, "w")
    expect_rc(op(s, None, OP.READ, match_bits=reg.key, request_length=8), RC.PERM_VIOLATION)


@case("RC-016", E, "ATOMIC on a region without the atomic right → PERM_VIOLATION", "behaviour.md §6.5")
def _perm_a(s: Session) -> None:
    reg = need_region(s, "r")
    ext = S.ATOMIC_EXT.encode(S.ATOMIC_EXT.make(atomic_opcode=S.AmoOp.SUM, atomic_datatype=S.AmoType.UINT64))
    expect_rc(op(s, None, OP.ATOMIC, (1).to_bytes(8, "big"), ext, match_bits=reg.key), RC.PERM_VIOLATION)


@case("RC-017", E, "a read-only region is still readable", "behaviour.md §6.5")
def _ro_read(s: Session) -> None:
    reg = need_region(s, "r")
    expect_rc(op(s, None, OP.READ, match_bits=reg.key, request_length=8), RC.OK)


@case("RC-018", E, "a write-only region is still writable", "behaviour.md §6.5")
def _wo_write(s: Session) -> None:
    reg = need_region(s, "w")
    expect_ok(op(s, None, OP.WRITE, b"ok", match_bits=reg.key))


@case("RC-019", E, "a message longer than the posted receive (no truncation) → TOO_LONG", "behaviour.md §6.9")
def _too_long(s: Session) -> None:
    tag = _tagged_recv(s, False)
    size = next(r.size for r in s.target.receives if r.tag == tag)
    expect_rc(op(s, None, OP.TAGGED_SEND, bytes(size + 16), match_bits=tag), RC.TOO_LONG)


@case("RC-020", E, "a truncating receive takes a longer message: OK with modified_length = its size",
      "behaviour.md §6.9")  # fmt: skip
def _trunc(s: Session) -> None:
    tag = _tagged_recv(s, True)
    size = next(r.size for r in s.target.receives if r.tag == tag)
    r = expect_rc(op(s, None, OP.TAGGED_SEND, bytes(size + 24), match_bits=tag), RC.OK)
    check(response(r).modified_length == size, f"modified_length {size}", r)


@case("RC-021", E, "a medium request without EOM (not single-packet) → OP_VIOLATION", "behaviour.md §6.9")
def _medium_multi(s: Session) -> None:
    p = opened(s)
    r = p.exchange(ses_medium(s.ses(opcode=OP.SEND, flags=F.SOM | F.REL), b"m"), next_hdr=P.NextHeader.MEDIUM)
    expect_rc(r, RC.OP_VIOLATION)


def _two_packets(
    s: Session, key: int, *, offset: int = 0, second: dict[str, Any] | None = None, data: bytes = b"a" * 8 + b"b" * 8
) -> tuple[bytes, bytes]:
    """The two packets (SOM, then EOM at message offset 8) of a 16-byte WRITE to ``key`` at
    ``offset``; ``second`` overrides SES fields of the second packet (another opcode, key...)."""
    mid = s.ses().message_id
    common = dict(opcode=OP.WRITE, match_bits=key, request_length=16, message_id=mid, buffer_offset=offset)
    a = ses_standard(s.ses(**common, flags=F.SOM | F.REL), data[:8])
    b = ses_standard(s.ses(**{**common, "flags": F.EOM | F.REL, "payload_length": 8, "message_offset": 8,
                              **(second or {})}), data[8:])  # fmt: skip
    return a, b


@case("RC-022", E, "once a packet of a message fails, its later packets get the same error", "behaviour.md §6.9")
def _sticky(s: Session) -> None:
    p = opened(s)
    a, b = _two_packets(s, 0xBADBAD)
    expect_rc(p.exchange(a), RC.BAD_MKEY)
    expect_rc(p.exchange(b), RC.BAD_MKEY, " on the second packet")


@case("RC-023", E, "a multi-packet message whose later packet changes opcode is refused", "behaviour.md §6.3")
def _op_change(s: Session) -> None:
    reg = need_region(s, "rwa")
    p = opened(s)
    a, b = _two_packets(s, reg.key, offset=3000, second={"opcode": OP.READ})
    expect_no_error(p.exchange(a), " for the first packet")
    r = p.exchange(b)
    check(r.is_ack and r.rc not in (None, RC.OK, RC.NULL), "an error code for the changed opcode", r)


# -- matching ----------------------------------------------------------------------------------------


@case("MAT-001", M, "a tag that matches no posted receive is buffered (overflow list) or refused NO_MATCH",
      "behaviour.md §6.4")  # fmt: skip
def _unmatched(s: Session) -> None:
    r = op(s, None, OP.TAGGED_SEND, b"nobody", match_bits=0x6E6F626F6479)
    check(r.is_ack and (r.rc == RC.NO_MATCH or (r.rc == RC.OK and response(r).list == 1)),
          "NO_MATCH, or OK with list 1 (overflow)", r)  # fmt: skip


@case(
    "MAT-002",
    M,
    "tag matching is exact: a tag differing in one bit does not take the posted receive",
    "behaviour.md §6.4",
)
def _exact(s: Session) -> None:
    tag = _tagged_recv(s, False)
    size = next(r.size for r in s.target.receives if r.tag == tag)
    r = op(s, None, OP.TAGGED_SEND, bytes(size + 8), match_bits=tag ^ (1 << 40))
    check(
        r.rc != RC.TOO_LONG and (r.rc == RC.NO_MATCH or response(r).list == 1), "not matched to the receive of tag", r
    )


@case("MAT-003", M, "an untagged SEND never takes a tagged receive", "behaviour.md §6.4")
def _untagged(s: Session) -> None:
    _tagged_recv(s, False)
    r = op(s, None, OP.SEND, bytes(64))
    check(response(r).return_code != RC.TOO_LONG, "no TOO_LONG from a small tagged receive", r)


@case("MAT-004", M, "a matched message reports the expected list (0)", "wire-format.md §11.1")
def _list0(s: Session) -> None:
    tag = _tagged_recv(s, True)
    r = expect_rc(op(s, None, OP.TAGGED_SEND, b"1234", match_bits=tag), RC.OK)
    check(response(r).list == 0, "list 0", r)


@case("MAT-005", M, "DC does not change matching: an unmatched delivery-complete send is buffered or NO_MATCH",
      "behaviour.md §6.8", SHOULD)  # fmt: skip
def _dc_nomatch(s: Session) -> None:
    r = op(s, None, OP.TAGGED_SEND, b"dc", match_bits=0xDC0000DC, flags=F.SOM | F.EOM | F.REL | F.DC)
    check(r.is_ack and (r.rc == RC.NO_MATCH or (r.rc == RC.OK and response(r).list == 1)),
          "NO_MATCH, or OK with list 1 (overflow), as without DC", r)  # fmt: skip


@case("MAT-006", M, "the overflow list answer is a guaranteed response (REQ_CLEAR)", "behaviour.md §2.7")
def _overflow_gtd(s: Session) -> None:
    r = op(s, None, OP.TAGGED_SEND, b"ov", match_bits=0x0F0F0F0F)
    check(r.rc in (RC.OK, RC.NO_MATCH), "a SES response: OK (overflow list) or NO_MATCH", r)
    if r.rc == RC.OK and response(r).list == 1:
        check(bool(r.flags & P.AckFlag.REQ_CLEAR), "REQ_CLEAR on an overflow-list response", r)


# -- RMA bounds --------------------------------------------------------------------------------------


def _bounds(
    cid: str, title: str, rights: str, opcode: int, where: Callable[[int], int], length: int, ok: tuple[int, ...]
) -> None:
    @case(cid, B, title, "behaviour.md §6.5")
    def _t(s: Session) -> None:
        reg = need_region(s, rights)
        off = where(reg.size)
        if opcode == OP.READ:
            r = op(s, None, OP.READ, match_bits=reg.key, buffer_offset=off, request_length=length)
        else:
            r = op(s, None, OP.WRITE, bytes(length), match_bits=reg.key, buffer_offset=off)
        check(r.is_ack and r.rc in ok, "return code " + " or ".join(rc_name(x) for x in ok), r)
        if opcode == OP.READ and RC.OK in ok:  # a READ's success carries its data (§6.5, §6.9)
            check(len(r.data) == length, f"{length} bytes of read data in the ACK", r)


_OKS = (RC.OK, RC.NULL)
_bounds("RMA-001", "READ of the last 8 bytes of a region succeeds", "r", OP.READ, lambda n: n - 8, 8, (RC.OK,))
_bounds("RMA-002", "READ one byte past the end → BAD_ADDR", "r", OP.READ, lambda n: n - 7, 8, (RC.BAD_ADDR,))
_bounds("RMA-003", "READ starting past the end → BAD_ADDR", "r", OP.READ, lambda n: n, 8, (RC.BAD_ADDR,))
_bounds("RMA-004", "READ at offset 2^63 → BAD_ADDR", "r", OP.READ, lambda n: 1 << 63, 8, (RC.BAD_ADDR,))
_bounds("RMA-005", "WRITE of the last 8 bytes of a region succeeds", "w", OP.WRITE, lambda n: n - 8, 8, _OKS)
_bounds("RMA-006", "WRITE past the end → UNSUPPORTED_SIZE or BAD_ADDR", "w", OP.WRITE, lambda n: n - 4, 8,
        (RC.UNSUPPORTED_SIZE, RC.BAD_ADDR))  # fmt: skip
_bounds("RMA-007", "WRITE at offset 2^63 → UNSUPPORTED_SIZE or BAD_ADDR", "w", OP.WRITE, lambda n: 1 << 63, 8,
        (RC.UNSUPPORTED_SIZE, RC.BAD_ADDR))  # fmt: skip
_bounds("RMA-008", "READ of a whole small region succeeds", "r", OP.READ, lambda n: 0, 16, (RC.OK,))


@case("RMA-009", B, "a failed WRITE leaves the region unchanged", "behaviour.md §6.5")
def _no_partial(s: Session) -> None:
    reg = need_region(s, "rwa")
    p = opened(s)
    before = read_back(s, p, reg.key, reg.size - 8, 8)
    op(s, p, OP.WRITE, b"\xee" * 16, match_bits=reg.key, buffer_offset=reg.size - 8)
    check(read_back(s, p, reg.key, reg.size - 8, 8) == before, "the last 8 bytes unchanged")


@case("RMA-010", B, "READ asking for more than request_length in one packet is refused", "behaviour.md §6.5", SHOULD)
def _read_overask(s: Session) -> None:
    reg = need_region(s, "r")
    p = opened(s)
    mid = s.ses().message_id
    r = p.exchange(ses_standard(s.ses(opcode=OP.READ, match_bits=reg.key, flags=F.EOM | F.REL, request_length=8,
                                      message_id=mid, payload_length=64, message_offset=0)))  # fmt: skip
    check(r.is_ack and r.rc not in (None, RC.OK, RC.NULL), "an error (OP_VIOLATION)", r)


# -- deferrable send and RTR --------------------------------------------------------------------------


class _Cycle:
    """A deferrable send taken through deferral, RTR and restart (behaviour.md §6.7)."""

    def __init__(self, s: Session) -> None:
        self.token = s.rng.randrange(1, 0xFFFF)
        self.data = b"deferred!"
        self.pdc = opened(s)
        self.first = op(s, self.pdc, OP.DEFERRABLE_SEND, self.data, src_token=self.token)
        self.rtr: Reply | None = None
        self.final: Reply | None = None
        expect_rc(self.first, RC.OK, " for the DEFERRABLE_SEND")
        if response(self.first).modified_length != 0:
            return  # delivered at once: no deferral
        self.rtr = s.expect(lambda r: r.ptype in (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ) and r.ses is not None
                            and r.ses.opcode == OP.DEFERRABLE_RTR,
                            "a DEFERRABLE_RTR request from the target")  # fmt: skip
        rtr = self.rtr
        # we are the target of the target's PDC: answer with our PDCID for it (a new one on SYN)
        mine = s.new_pdcid() if rtr.flags & P.ReqFlag.SYN else rtr.pds.dpdcid
        s.serve(mine, rtr)
        s.send(P.ACK.encode(P.ACK.make(cack_psn=rtr.pds.psn, spdcid=mine, dpdcid=rtr.pds.spdcid)))
        self.final = op(s, self.pdc, OP.DEFERRABLE_SEND, self.data, src_token=self.token,
                        dst_token=rtr.ses.src_restart_token)  # fmt: skip

    def need_deferral(self) -> Reply:
        if self.rtr is None:
            raise Skipped("the target delivered the deferrable send at once (no deferral to check)")
        return self.rtr


@case("DEF-001", D, "DEFERRABLE_SEND is answered OK (deferred: list 1 and modified_length 0) or delivered",
      "behaviour.md §6.7")  # fmt: skip
def _deferrable(s: Session) -> None:
    c = _Cycle(s)
    r = c.first
    check(response(r).modified_length in (0, len(c.data)), f"modified_length 0 (deferred) or {len(c.data)}", r)
    if response(r).modified_length == 0:
        check(response(r).list == 1, "list 1 with a deferral", r)
        check(bool(r.flags & P.AckFlag.REQ_CLEAR), "a deferral is a guaranteed response (REQ_CLEAR)", r)


@case("DEF-002", D, "a deferral is followed by DEFERRABLE_RTR carrying our restart token", "behaviour.md §6.7")
def _rtr(s: Session) -> None:
    c = _Cycle(s)
    rtr = c.need_deferral()
    check(rtr.ses.dst_restart_token == c.token, f"RTR destination token = our token {c.token:#x}", rtr)


@case("DEF-003", D, "DEFERRABLE_RTR is a single-packet request on a PDC the target initiates", "behaviour.md §6.7")
def _rtr_syn(s: Session) -> None:
    rtr = _Cycle(s).need_deferral()
    check(bool(rtr.ses.flags & F.SOM) and bool(rtr.ses.flags & F.EOM), "SOM and EOM set", rtr)
    check(rtr.pds.spdcid != 0, "SPDCID ≠ 0 (the target's own initiator PDC)", rtr)
    check(bool(rtr.flags & P.ReqFlag.SYN) or rtr.pds.dpdcid in s._used, "SYN, or the PDCID we gave that PDC", rtr)


@case("DEF-004", D, "the message restarted with the RTR's target token is delivered in full", "behaviour.md §6.7")
def _restart(s: Session) -> None:
    c = _Cycle(s)
    c.need_deferral()
    r = expect_rc(c.final, RC.OK, " for the restarted message")  # type: ignore[arg-type]
    check(response(r).modified_length == len(c.data), f"modified_length {len(c.data)}", r)


@case("DEF-005", D, "a restart naming a target token that was never issued → OP_VIOLATION", "behaviour.md §6.7")
def _bad_restart(s: Session) -> None:
    r = op(s, None, OP.DEFERRABLE_SEND, b"forged", src_token=0x4242, dst_token=0x7FFF0001)
    expect_rc(r, RC.OP_VIOLATION)


# -- rendezvous ---------------------------------------------------------------------------------------

V = "ses-rndv"


class _Rndv:
    """A RENDEZVOUS_SEND of 24 bytes with 8 eager (behaviour.md §6.6), and the READ the target
    sends back to pull the rest, which the tester answers with the data like any target."""

    KEY, PID, RI, OFF = 0x7E57AB1E, 5, 7, 4096

    def __init__(self, s: Session, *, tagged: bool = False) -> None:
        self.data = bytes(range(0x40, 0x58))
        ext = S.RENDEZVOUS_EXT.encode(
            S.RENDEZVOUS_EXT.make(eager_length=8, read_ri_generation=0, read_pid_on_fep=self.PID,
                                  read_resource_index=self.RI, read_offset=self.OFF, read_match_bits=self.KEY)
        )  # fmt: skip
        opcode = OP.RENDEZVOUS_TSEND if tagged else OP.RENDEZVOUS_SEND
        kw = {"match_bits": 0x52444E56} if tagged else {}
        self.first = op(s, None, opcode, self.data[:8], ext, request_length=len(self.data), **kw)
        expect_rc(self.first, RC.OK, " for the rendezvous send")
        self.read = s.expect(lambda r: r.ptype in (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ) and r.ses is not None
                             and r.ses.opcode == OP.READ and r.ses.match_bits == self.KEY,
                             "a READ from the target naming the rendezvous key")  # fmt: skip
        rd = self.read
        mine = s.new_pdcid() if rd.flags & P.ReqFlag.SYN else rd.pds.dpdcid
        s.serve(mine, rd)
        want = rd.ses.request_length
        start = rd.ses.buffer_offset - self.OFF
        resp = S.RESPONSE_DATA.encode(
            S.RESPONSE_DATA.make(message_id=rd.ses.message_id, job_id=rd.ses.job_id,
                                 read_request_message_id=rd.ses.message_id, payload_length=want,
                                 modified_length=want, message_offset=0)
        )  # fmt: skip
        ack = P.ACK.make(next_hdr=P.NextHeader.RESPONSE_DATA, flags=P.AckFlag.REQ_CLEAR, cack_psn=rd.pds.psn,
                         spdcid=mine, dpdcid=rd.pds.spdcid)  # fmt: skip
        s.send(P.ACK.encode(ack) + resp + self.data[start : start + want])


@case("RDV-001", V, "RENDEZVOUS_SEND is answered OK", "behaviour.md §6.6")
def _rndv_ok(s: Session) -> None:
    r = _Rndv(s).first
    check(response(r).modified_length in (0, 8, 24), "modified_length of the eager part or the message", r)


@case("RDV-002", V, "the target pulls the rest: READ of (length − eager) bytes at read_offset + eager_length",
      "behaviour.md §6.6")  # fmt: skip
def _rndv_read(s: Session) -> None:
    rd = _Rndv(s).read
    check(rd.ses.buffer_offset == _Rndv.OFF + 8 and rd.ses.request_length == 16,
          f"READ at offset {_Rndv.OFF + 8} of 16 bytes", rd)  # fmt: skip


@case("RDV-003", V, "the READ is addressed to the read PIDonFEP / resource index of the descriptor",
      "wire-format.md §9.3")  # fmt: skip
def _rndv_addr(s: Session) -> None:
    rd = _Rndv(s).read
    check(rd.ses.pid_on_fep == _Rndv.PID and rd.ses.resource_index == _Rndv.RI,
          f"pid_on_fep {_Rndv.PID}, resource_index {_Rndv.RI}", rd)  # fmt: skip


@case("RDV-004", V, "the answered READ is not retransmitted", "behaviour.md §2.6", SHOULD)
def _rndv_done(s: Session) -> None:
    rv = _Rndv(s)
    psn = rv.read.pds.psn
    s.assert_silent(lambda r: r.ptype in (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ) and r.pds.psn == psn
                    and r.flags & P.ReqFlag.RETX, "no retransmission of the READ we answered")  # fmt: skip


@case("RC-024", E, "FETCHING_ATOMIC on a read-write region without the atomic right → PERM_VIOLATION, memory unchanged",
      "behaviour.md §6.5")  # fmt: skip
def _amo_no_right(s: Session) -> None:
    reg = need_region(s, "rw")
    p = opened(s)
    before = read_back(s, p, reg.key, 64, 8)
    ext = S.ATOMIC_EXT.encode(S.ATOMIC_EXT.make(atomic_opcode=S.AmoOp.SUM, atomic_datatype=S.AmoType.UINT64))
    r = op(s, p, OP.FETCHING_ATOMIC, (5).to_bytes(8, "little"), ext, match_bits=reg.key, buffer_offset=64)
    expect_rc(r, RC.PERM_VIOLATION, " (the region grants read and write, not atomic)")
    check(read_back(s, p, reg.key, 64, 8) == before, "the 8 bytes unchanged by the refused atomic")


@case("RMA-011", B, "a two-packet WRITE whose message overruns the region is refused at its first packet, "
      "nothing written", "behaviour.md §6.5")  # fmt: skip
def _overrun_multi(s: Session) -> None:
    reg = need_region(s, "rwa")
    p = opened(s)
    off = reg.size - 8  # the first packet's 8 bytes fit; the message's 16 do not
    before = read_back(s, p, reg.key, off, 8)
    a, b = _two_packets(s, reg.key, offset=off, data=b"\xa5" * 8 + b"\x5a" * 8)
    r = p.exchange(a)
    why = "UNSUPPORTED_SIZE or BAD_ADDR for the message's first packet (offset + request_length > size)"
    check(r.is_ack and r.rc in (RC.UNSUPPORTED_SIZE, RC.BAD_ADDR), why, r)
    r = p.exchange(b)
    check(r.is_ack and r.rc not in (None, RC.OK, RC.NULL), "the message's later packet fails too (§6.9)", r)
    check(read_back(s, p, reg.key, off, 8) == before, "the region's last 8 bytes unchanged (nothing partly written)")


@case("RMA-012", B, "a READ longer than Max_ACK_Data_Size returns its data in the return direction",
      "behaviour.md §6.5")  # fmt: skip
def _read_return(s: Session) -> None:
    from uet.conformance.cases.reads import fill, read_whole

    reg = need_region(s, "rwa", min_size=8192)
    p = opened(s)
    off, n = 4096 + 24, 96
    data = fill(s, p, reg.key, off, n)
    got = read_whole(s, p, reg.key, off, n)[2]
    check(got == data, f"the {n} bytes written, read back", got.hex())


@case("RMA-013", B, "a later packet of a WRITE naming another memory key → PERM_VIOLATION", "behaviour.md §6.9")
def _key_change(s: Session) -> None:
    reg = need_region(s, "rwa")
    other = need_region(s, "rwai")
    p = opened(s)
    a, b = _two_packets(s, reg.key, offset=2048, second={"match_bits": other.key})
    expect_no_error(p.exchange(a), " for the first packet")
    expect_rc(p.exchange(b), RC.PERM_VIOLATION, " (the key changed mid-message)")


@case("SES-021", O, "a successful WRITE is answered DEFAULT_RESPONSE / OK, not guaranteed (no REQ_CLEAR)",
      "behaviour.md §6.9")  # fmt: skip
def _ok_default(s: Session) -> None:
    reg = need_region(s, "rwa")
    r = expect_rc(op(s, None, OP.WRITE, b"ok", match_bits=reg.key, buffer_offset=512), RC.OK)
    check(response(r).opcode == S.ResponseOpcode.DEFAULT_RESPONSE, "response opcode DEFAULT_RESPONSE (0)", r)
    check(not r.flags & P.AckFlag.REQ_CLEAR, "no REQ_CLEAR (a non-guaranteed response)", r)
