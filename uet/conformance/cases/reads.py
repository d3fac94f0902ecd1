"""READs of one to several packets (behaviour.md §1.4, §6.5; wire-format.md §11.2).

A READ whose ``request_length`` exceeds the target's ``Max_ACK_Data_Size`` returns its data as
RESPONSE_DATA *requests* in the return direction of the PDC the READ went on, each acknowledged by
the tester like any request (:meth:`Session.serve_read_return`); a target may return a read no
larger than its ``Max_ACK_Data_Size`` in the ACK instead. Either way all of one READ's data takes
one of the two paths (§6.5: "all return data of one message uses the return direction if the
message exceeds Max_ACK_Data_Size").

Sizes are counted in packets of :data:`PAYLOAD` bytes, the SES payload of ``uet-peer`` on loopback
(the tester cannot learn a target's payload size; a target with a smaller one sends more packets,
which every check here accepts). The bytes read are first written with single-packet WRITEs of
random data, so no case depends on what an earlier case left in the region.
"""

from __future__ import annotations

from uet.conformance.case import case
from uet.conformance.cases._util import OP, RC, check, expect_ok, expect_rc, need_region, op, opened
from uet.conformance.session import Pdc, Session
from uet.conformance.wirekit import Reply, ses_standard
from uet.wire import pds as P

A = "ses-read"
PAYLOAD = 4096
#: the largest WRITE the tester sends to fill the bytes it reads back (fits any payload size ≥ 2 KiB)
CHUNK = 2048
#: where in the region the cases read (clear of the low offsets other cases write)
BASE = 16384


def fill(s: Session, p: Pdc, key: int, offset: int, n: int) -> bytes:
    """Write ``n`` random bytes at ``offset`` of region ``key`` (single-packet WRITEs); returns them."""
    data = s.rng.randbytes(n)
    for i in range(0, n, CHUNK):
        expect_ok(op(s, p, OP.WRITE, data[i : i + CHUNK], match_bits=key, buffer_offset=offset + i),
                  f" for the WRITE at offset {offset + i} preparing the READ")  # fmt: skip
    return data


def read_whole(s: Session, p: Pdc, key: int, offset: int, n: int) -> tuple[Reply, list[Reply], bytes]:
    """One single-packet READ of ``n`` bytes; returns its ACK, the return-direction packets (none
    when the data came in the ACK) and the bytes read, assembled by message offset."""
    mid = s.ses().message_id
    r = p.exchange(ses_standard(s.ses(opcode=OP.READ, match_bits=key, buffer_offset=offset, request_length=n,
                                      message_id=mid)))  # fmt: skip
    expect_rc(r, RC.OK, f" for the READ of {n} bytes")
    if r.data:
        check(len(r.data) == n, f"all {n} bytes in the ACK, or none (the rest may not take the return direction)", r)
        return r, [], r.data
    packets = s.serve_read_return(p, mid, n)
    got = bytearray(n)
    for q in packets:
        got[q.ses.message_offset : q.ses.message_offset + len(q.data)] = q.data
    return r, packets, bytes(got)


def _sized(cid: str, packets: int, extra: int, title: str) -> None:
    n = packets * PAYLOAD + extra

    @case(cid, A, title, "behaviour.md §6.5")
    def _read(s: Session) -> None:
        reg = need_region(s, "rwa", min_size=BASE + n + 8)
        p = opened(s)
        off = BASE + 8 - (extra % 8)  # an unaligned size starts unaligned too
        data = fill(s, p, reg.key, off, n)
        _r, _ret, got = read_whole(s, p, reg.key, off, n)
        differ = sum(a != b for a, b in zip(got, data, strict=True))
        check(got == data, f"the {n} bytes written, read back", f"{differ} of them differ")


_sized("READ-001", 1, 0, "a READ of one packet's payload (4096 bytes) returns the bytes written")
_sized("READ-002", 2, 0, "a READ of two packets (8192 bytes) returns the bytes written")
_sized("READ-003", 3, 0, "a READ of three packets (12288 bytes) returns the bytes written")
_sized("READ-004", 9, 1234, "a READ of ten packets (38098 bytes, unaligned) returns the bytes written")


@case("READ-005", A, "return data: RESPONSE_DATA naming the READ, modified_length = request_length, "
      "payload_length = the bytes carried, message offsets tiling the read", "wire-format.md §11.2")  # fmt: skip
def _fields(s: Session) -> None:
    reg = need_region(s, "rwa", min_size=BASE + 3 * PAYLOAD)
    p = opened(s)
    n = 3 * PAYLOAD - 40
    fill(s, p, reg.key, BASE, n)
    _r, packets, _got = read_whole(s, p, reg.key, BASE, n)
    at = 0
    for q in sorted(packets, key=lambda q: q.ses.message_offset):
        h = q.ses
        check(q.pds.next_hdr == P.NextHeader.RESPONSE_DATA, "next_hdr RESPONSE_DATA (5)", q)
        check(h.modified_length == n, f"modified_length {n} (the READ's request_length)", q)
        check(h.payload_length == len(q.data), f"payload_length {len(q.data)} (the bytes this packet carries)", q)
        check(h.message_offset == at, f"message_offset {at} (packets tile the read)", q)
        at += len(q.data)


@case("READ-006", A, "return packets carry consecutive PSNs of the PDC's return direction, in offset order",
      "behaviour.md §1.4")  # fmt: skip
def _psns(s: Session) -> None:
    reg = need_region(s, "rwa", min_size=BASE + 4 * PAYLOAD)
    p = opened(s)
    n = 4 * PAYLOAD
    fill(s, p, reg.key, BASE, n)
    _r, packets, _got = read_whole(s, p, reg.key, BASE, n)
    fresh = [q for q in packets if not q.flags & P.ReqFlag.RETX]
    psns = [q.pds.psn for q in fresh]
    want = [(psns[0] + i) & 0xFFFFFFFF for i in range(len(psns))] if psns else []
    check(psns == want, f"PSNs {[hex(x) for x in want]}", str([hex(x) for x in psns]))
    offs = [q.ses.message_offset for q in fresh]
    check(offs == sorted(offs), "message offsets ascending with the PSNs", str(offs))


@case("READ-007", A, "two multi-packet READs in a row on one PDC both return complete and correct",
      "behaviour.md §6.5")  # fmt: skip
def _two(s: Session) -> None:
    reg = need_region(s, "rwa", min_size=BASE + 5 * PAYLOAD)
    p = opened(s)
    a = fill(s, p, reg.key, BASE, 2 * PAYLOAD + 100)
    b = fill(s, p, reg.key, BASE + 3 * PAYLOAD, 2 * PAYLOAD - 100)
    check(read_whole(s, p, reg.key, BASE, len(a))[2] == a, "the first READ's bytes")
    check(read_whole(s, p, reg.key, BASE + 3 * PAYLOAD, len(b))[2] == b, "the second READ's bytes")


@case("READ-008", A, "a multi-packet READ past the region's end → BAD_ADDR, and no data returns",
      "behaviour.md §6.5")  # fmt: skip
def _past_end(s: Session) -> None:
    reg = need_region(s, "rwa", min_size=3 * PAYLOAD)
    p = opened(s)
    mid = s.ses().message_id
    n = 3 * PAYLOAD
    r = p.exchange(ses_standard(s.ses(opcode=OP.READ, match_bits=reg.key, buffer_offset=reg.size - n + 8,
                                      request_length=n, message_id=mid)))  # fmt: skip
    expect_rc(r, RC.BAD_ADDR, f" (the READ of {n} bytes ends 8 bytes past the region)")
    check(not r.data, "no read data in the ACK of a refused READ", r)
    s.assert_silent(
        lambda q: q.ses is not None and getattr(q.ses, "read_request_message_id", None) == mid,
        "no return data for the refused READ",
    )
