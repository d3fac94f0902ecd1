"""Delivery modes other than RUD: ROD ordering, RUDI (packet ids, one response per request,
duplicates) and UUD (behaviour.md §2.1, §2.13–§2.15; wire-format.md §5.9, §5.10)."""

from __future__ import annotations

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import OP, RC, check, expect_ok, need_region, opened, rc_name, read_back
from uet.conformance.session import Session
from uet.conformance.wirekit import Reply, rudi, ses_standard, uud
from uet.wire import pds as P

R = "rudi"
U = "uud"
O = "rod"  # noqa: E741


def _rudi_reply(s: Session, pid: int) -> Reply:
    """The RUDI response to ``pid``; it carries the SES response (§2.14: every request is processed
    by SES and answered by one RUDI_RESP carrying the SES response)."""
    what = f"a RUDI response to id {pid:#x}"
    r = s.expect(lambda r: r.ptype == P.PdsType.RUDI_RESP and r.pds.pkt_id == pid, what, refute=s.rudi_unsent)
    check(r.ses is not None, "a SES response in the RUDI response", r)
    return r


def _rudi_write(s: Session, pid: int, data: bytes, off: int = 0, flags: int = 0) -> None:
    reg = need_region(s, "rwai")
    s.send(rudi(pid, flags=flags) + ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=off), data))


@case("RUDI-001", R, "a RUDI WRITE is answered by one RUDI response echoing the packet id", "behaviour.md §2.14")
def _rudi(s: Session) -> None:
    pid = s.rng.getrandbits(32)
    _rudi_write(s, pid, b"rudi")
    r = _rudi_reply(s, pid)
    check(r.ses is not None and r.rc in (RC.OK, RC.NULL), "a SES response with OK", r)


@case("RUDI-002", R, "the RUDI response carries the PDS type RUDI_RESP (5) with next_hdr 4/5/6", "wire-format.md §5.9")
def _rudi_type(s: Session) -> None:
    pid = s.rng.getrandbits(32)
    _rudi_write(s, pid, b"x")
    r = _rudi_reply(s, pid)
    check(r.pds.next_hdr in (4, 5, 6), "next_hdr 4, 5 or 6", r)


@case("RUDI-003", R, "a duplicate RUDI request (same id) is processed and answered again", "behaviour.md §2.14")
def _rudi_dup(s: Session) -> None:
    pid = s.rng.getrandbits(32)
    _rudi_write(s, pid, b"one")
    _rudi_reply(s, pid)
    _rudi_write(s, pid, b"one", flags=P.RudiFlag.RETX)
    _rudi_reply(s, pid)


@case("RUDI-004", R, "exactly one response per RUDI request", "behaviour.md §2.14")
def _rudi_once(s: Session) -> None:
    pid = s.rng.getrandbits(32)
    _rudi_write(s, pid, b"once")
    got = s.replies_before_probe(lambda r: r.ptype == P.PdsType.RUDI_RESP and r.pds.pkt_id == pid)
    check(len(got) == 1, "exactly one RUDI response", f"{len(got)} responses")
    check(got[0].rc in (RC.OK, RC.NULL), "a SES response with OK in it", got[0])


for _k, _pid in enumerate((0, 0xFFFFFFFF, 0x80000000)):

    def _mk(pid: int = _pid, k: int = _k) -> None:
        @case(f"RUDI-{k + 5:03d}", R, f"packet id {pid:#x} is echoed (ids need not be sequential)",
              "behaviour.md §2.14")  # fmt: skip
        def _t(s: Session) -> None:
            _rudi_write(s, pid, b"id")
            _rudi_reply(s, pid)

    _mk()


@case("RUDI-008", R, "a RUDI READ returns the data inline in the response", "behaviour.md §2.14")
def _rudi_read(s: Session) -> None:
    reg = need_region(s, "rwai")
    p = opened(s)
    want = bytes(range(16))
    p.exchange(ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=256), want))
    pid = s.rng.getrandbits(32)
    s.send(rudi(pid) + ses_standard(s.ses(opcode=OP.READ, match_bits=reg.key, buffer_offset=256, request_length=16)))
    r = _rudi_reply(s, pid)
    check(r.rc == RC.OK and r.data[:16] == want, "RC OK and the 16 bytes written", r)


@case("RUDI-009", R, "RUDI to a region that is not idempotent-safe is refused with OP_VIOLATION", "behaviour.md §2.14")
def _rudi_unsafe(s: Session) -> None:
    reg = need_region(s, "rwa")
    pid = s.rng.getrandbits(32)
    s.send(rudi(pid) + ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=0), b"no"))
    r = _rudi_reply(s, pid)
    check(r.rc == RC.OP_VIOLATION, f"RC OP_VIOLATION, got {rc_name(r.rc)}", r)


@case("RUDI-010", R, "a RUDI WRITE lands in memory", "behaviour.md §2.14")
def _rudi_lands(s: Session) -> None:
    reg = need_region(s, "rwai")
    pid = s.rng.getrandbits(32)
    data = s.rng.randbytes(16)
    _rudi_write(s, pid, data, off=512)
    _rudi_reply(s, pid)
    check(read_back(s, opened(s), reg.key, 512, 16) == data, "the RUDI data read back")


@case("RUDI-011", R, "a RUDI response sent to the target (unsolicited) is dropped silently", "behaviour.md §2.14",
      hostile=True)  # fmt: skip
def _rudi_unsolicited(s: Session) -> None:
    pid = s.rng.getrandbits(32)
    s.send(rudi(pid, response=True, next_hdr=P.NextHeader.RESPONSE) + bytes(12))
    s.assert_silent(lambda r: r.ptype == P.PdsType.RUDI_RESP or (r.is_nack and r.pds.nack_psn == pid),
                    "no answer to an unsolicited RUDI response")  # fmt: skip


@case("RUDI-012", R, "a RUDI error NACK, if any, has NT = 1 and PDCIDs 0", "behaviour.md §2.14", SHOULD, hostile=True)
def _rudi_bad_addr(s: Session) -> None:
    pid = s.rng.getrandbits(32)
    s.send(rudi(pid) + ses_standard(s.ses(opcode=OP.WRITE, match_bits=0xBAD0BAD0, buffer_offset=0), b"e"))
    got = s.replies_before_probe(lambda r: (r.ptype == P.PdsType.RUDI_RESP and r.pds.pkt_id == pid)
                                 or (r.is_nack and r.pds.nack_psn == pid))  # fmt: skip
    check(len(got) == 1, "one answer (a RUDI response with the error, or an NT NACK)", f"{len(got)}")
    r = got[0]
    if r.is_nack:
        check(bool(r.flags & P.NackFlag.NT) and r.pds.spdcid == 0 and r.pds.dpdcid == 0, "NT = 1, PDCIDs 0", r)
    else:
        check(r.rc == RC.BAD_MKEY, f"RC BAD_MKEY, got {rc_name(r.rc)}", r)


# -- UUD -----------------------------------------------------------------------------------------------


@case("UUD-001", U, "a UUD send draws no reply at all (no ACK, no response)", "behaviour.md §2.15")
def _uud(s: Session) -> None:
    s.send(uud() + ses_standard(s.ses(opcode=OP.SEND), b"datagram"))
    s.assert_silent(lambda r: not s.earlier_traffic(r), "no reply to a UUD request")


@case("UUD-002", U, "a UUD send with an error (unknown PID) is still silent", "behaviour.md §2.15", hostile=True)
def _uud_err(s: Session) -> None:
    s.send(uud() + ses_standard(s.ses(opcode=OP.SEND, pid=(s.target.pid + 99) & 0xFFF), b"lost"))
    s.assert_silent(lambda r: not s.earlier_traffic(r), "no reply to a UUD request")


@case("UUD-003", U, "a multi-packet UUD fragment (SOM only) is dropped silently", "behaviour.md §2.15", hostile=True)
def _uud_frag(s: Session) -> None:
    from uet.conformance.cases._util import F

    s.send(uud() + ses_standard(s.ses(opcode=OP.SEND, flags=F.SOM | F.REL, request_length=9000), b"frag"))
    s.assert_silent(lambda r: not s.earlier_traffic(r), "no reply")


@case("UUD-004", U, "a UUD request to the target's datagram path does not open a PDC", "behaviour.md §2.15")
def _uud_nopdc(s: Session) -> None:
    s.send(uud() + ses_standard(s.ses(opcode=OP.DATAGRAM_SEND), b"dg"))
    s.assert_silent(lambda r: (r.is_ack or r.is_control) and not s.earlier_traffic(r), "no ACK or control packet")


# -- ROD ordering -----------------------------------------------------------------------------------


@case("ROD-001", O, "ROD: in-order requests advance CACK one by one", "behaviour.md §2.13")
def _rod_inorder(s: Session) -> None:
    p = opened(s, rod=True)
    for _ in range(4):
        psn = p.send(ses_standard(s.ses(opcode=OP.NO_OP)))
        r = p.ack_for(psn)
        check(r.pds.cack_psn == psn, f"CACK = {psn:#x}", r)


@case("ROD-002", O, "ROD: ACKs never acknowledge past a hole", "behaviour.md §2.13", hostile=True)
def _rod_hole(s: Session) -> None:
    p = opened(s, rod=True)
    for k in (2, 3, 4):
        p.send(ses_standard(s.ses(opcode=OP.NO_OP)), psn=(p.start + k) & 0xFFFFFFFF)
    for r in s.replies_before_probe(lambda r: p.mine(r) and r.is_ack):
        check(r.pds.cack_psn == p.start, f"CACK = {p.start:#x}", r)


@case("ROD-003", O, "ROD: a WRITE split over packets lands in order once the gap is filled", "behaviour.md §2.13")
def _rod_write(s: Session) -> None:
    from uet.conformance.cases._util import F

    reg = need_region(s, "rwa")
    p = opened(s, rod=True)
    mid = s.ses().message_id
    a = ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=4096, flags=F.SOM | F.REL,
                           request_length=16, message_id=mid), b"A" * 8)  # fmt: skip
    b = ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=4096, flags=F.EOM | F.REL,
                           request_length=16, message_id=mid, payload_length=8, message_offset=8),
                     b"B" * 8)  # fmt: skip
    first, second = p.next_psn, (p.next_psn + 1) & 0xFFFFFFFF
    p.send(b, psn=second)
    p.send(a, psn=first)
    r = p.ack_for(first)
    if r.pds.cack_psn != second:  # go-back-N discarded the second half: resend it
        p.send(b, psn=second, retx=True)
        r = p.ack_for(second)
    elif p.next_psn != (second + 1) & 0xFFFFFFFF:  # a buffering target kept it: next PSN after it
        p.next_psn = (second + 1) & 0xFFFFFFFF
    expect_ok(r)
    check(read_back(s, p, reg.key, 4096, 16) == b"A" * 8 + b"B" * 8, "AAAAAAAABBBBBBBB in the region")


@case("ROD-004", O, "ROD: a duplicate of an acknowledged PSN is acknowledged, not NACKed", "behaviour.md §2.13",
      SHOULD)  # fmt: skip
def _rod_dup(s: Session) -> None:
    p = opened(s, rod=True)
    psn = p.send(ses_standard(s.ses(opcode=OP.NO_OP)))
    p.ack_for(psn)
    p.send(ses_standard(s.ses(opcode=OP.NO_OP)), psn=psn, retx=True)
    r = s.expect(lambda r: p.mine(r) and (r.is_ack or r.is_nack), "an answer to the duplicate")
    check(r.is_ack, "an ACK", r)


@case("ROD-005", O, "ROD: a request behind a hole does not reach the SES before the hole is filled",
      "behaviour.md §2.13")  # fmt: skip
def _rod_ooo_held(s: Session) -> None:
    reg = need_region(s, "rwa", min_size=8192)
    p = opened(s, rod=True)
    off = 6144 + 8 * s.rng.randrange(0, 64)
    before = read_back(s, opened(s), reg.key, off, 8)
    mark = bytes(b ^ 0xFF for b in before)
    late = (p.next_psn + 1) & 0xFFFFFFFF  # next_psn itself stays a hole
    w = ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=off), mark)
    p.send(w, psn=late)
    s.replies_before_probe(lambda r: p.mine(r))  # the target has handled it (buffered, dropped or NACKed)
    check(read_back(s, opened(s), reg.key, off, 8) == before,
          "memory unchanged while the ROD request waits behind a hole (in-order delivery to SES)")  # fmt: skip
    # fill the hole and resend the WRITE (a target that dropped it asked for it with ROD_OOO): now it lands
    hole = p.send(ses_standard(s.ses(opcode=OP.NO_OP)), psn=(late - 1) & 0xFFFFFFFF)
    p.ack_for(hole)
    p.send(w, psn=late, retx=True)
    p.ack_for(late)
    check(read_back(s, opened(s), reg.key, off, 8) == mark, "the WRITE lands once in order")
