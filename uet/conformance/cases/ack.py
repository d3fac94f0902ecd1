"""ACKs: CACK, SACK bitmap and offsets, coalescing and the AR flag, clear PSN and guaranteed
responses (behaviour.md §2.6–§2.8; wire-format.md §5.3–§5.5)."""

from __future__ import annotations

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import (
    CT,
    OP,
    RC,
    F,
    ack_psn,
    check,
    expect_ok,
    expect_rc,
    need_region,
    opened,
    peer_pdcid,
    read_back,
)
from uet.conformance.session import CheckFailed, Pdc, Session, Skipped
from uet.conformance.wirekit import Reply, control, ses_standard
from uet.wire import crc
from uet.wire import pds as P

A = "ack"
G = "clear"


def _f(s: Session) -> bytes:
    return ses_standard(s.ses(opcode=OP.NO_OP))


def _probe(s: Session, p: Pdc, opaque: int = 0x5A5A) -> Reply:
    """The target's current CACK/SACK view of PDC ``p``, from a PROBE (§2.11)."""
    if p.dpdcid is None:
        raise CheckFailed("an established PDC to PROBE", "the target's PDCID is not known yet")
    s.send(control(CT.PROBE, spdcid=p.spdcid, dpdcid=p.dpdcid, probe_opaque=opaque, payload=p.start))
    return s.expect(lambda r: p.mine(r) and r.is_ack and r.flags & P.AckFlag.P, "the PROBE's ACK (P = 1)")


@case("ACK-001", A, "ACKs use a PDS ACK type (ACK, ACK_CC or ACK_CCX)", "wire-format.md §5.3")
def _type(s: Session) -> None:
    r = opened(s).exchange(_f(s))
    check(r.ptype in (P.PdsType.ACK, P.PdsType.ACK_CC, P.PdsType.ACK_CCX), "PDS type 7, 8 or 9", r)


@case("ACK-002", A, "an ACK's next_hdr is 0, 4, 5 or 6 (no SES, or a SES response)", "wire-format.md §5.3")
def _nh(s: Session) -> None:
    r = opened(s).exchange(_f(s))
    check(r.pds.next_hdr in (0, 4, 5, 6), "next_hdr in {0, 4, 5, 6}", r)


@case("ACK-003", A, "an ACK's reserved flag bits are 0", "wire-format.md §4")
def _rsvd(s: Session) -> None:
    r = opened(s).exchange(_f(s))
    check(not r.flags & 0x01, "flag bit 0 (reserved) clear", r)


@case("ACK-004", A, "a hole leaves CACK before it and the SACK bitmap names the PSN after it", "behaviour.md §2.8")
def _sack_hole(s: Session) -> None:
    p = opened(s)
    p.send(_f(s), ar=False)  # start + 1; start + 2 is never sent
    psn = (p.start + 3) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    naming = f"the ACK naming {psn:#x}"
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == psn, naming, refute=p.names_unsent)
    check(r.pds.cack_psn == (p.start + 1) & 0xFFFFFFFF, f"CACK = {(p.start + 1) & 0xFFFFFFFF:#x} (hole at +2)", r)
    check(not r.has_sack or psn in r.sacked(), f"SACK bit for {psn:#x}", r)


def _sack_set(s: Session, offsets: list[int]) -> None:
    p = opened(s)
    sent = [(p.start + o) & 0xFFFFFFFF for o in offsets]
    for q in sent[:-1]:
        p.send(_f(s), psn=q, ar=False)
    p.send(_f(s), psn=sent[-1])
    what = f"the ACK naming {sent[-1]:#x}"
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == sent[-1], what, refute=p.names_unsent)
    if not r.has_sack:
        r = _probe(s, p)
    check(r.has_sack, "an ACK_CC / ACK_CCX with a SACK bitmap (or SACK cannot be checked)", r)
    want = {q for q in sent if P.psn_after(q, r.pds.cack_psn)}
    got = set(r.sacked())
    check(want <= got, f"SACK bits for {sorted(hex(x) for x in want)}", r)
    wrong = {q for q in got if P.psn_after(q, r.pds.cack_psn) and q not in sent}
    check(not wrong, f"no SACK bit for PSNs never sent (found {sorted(hex(x) for x in wrong)})", r)


for _n, _offs in enumerate([[2], [2, 4, 5], [3, 10, 20, 40], [1, 63], [5, 6, 7, 8, 9]]):

    def _mk(offs: list[int] = _offs, n: int = _n) -> None:
        case(f"ACK-{n + 5:03d}", A, f"SACK bitmap has exactly the received PSNs at offsets {offs} beyond CACK",
             "wire-format.md §5.4")(lambda s: _sack_set(s, offs))  # fmt: skip

    _mk()


@case("ACK-010", A, "SACK base = CACK + sack_psn_offset covers a PSN 100 beyond CACK", "wire-format.md §5.4", SHOULD)
def _sack_far(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 100) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == psn, f"the ACK naming {psn:#x}")
    check(r.has_sack and psn in r.sacked(), f"SACK bit for {psn:#x} (base moved with sack_psn_offset)", r)


@case("ACK-011", A, "filling the hole advances CACK over every received PSN", "behaviour.md §2.7")
def _fill(s: Session) -> None:
    p = opened(s)
    a = p.send(_f(s), psn=(p.start + 2) & 0xFFFFFFFF)
    s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == a, "the ACK of the out-of-order PSN")
    b = p.send(_f(s), psn=(p.start + 1) & 0xFFFFFFFF, retx=True)
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == b, "the ACK of the gap-filling PSN")
    check(r.pds.cack_psn == a, f"CACK = {a:#x}", r)


@case("ACK-012", A, "a request with AR is acknowledged at once, covering earlier non-AR requests", "behaviour.md §2.8")
def _ar(s: Session) -> None:
    p = opened(s)
    for _ in range(5):
        p.send(_f(s), ar=False)
    last = p.send(_f(s), ar=True)
    r = p.ack_for(last)
    check(r.pds.cack_psn == last, f"CACK = {last:#x}", r)


@case("ACK-013", A, "a request without AR is still acknowledged (ACK timer / coalescing)", "behaviour.md §2.8")
def _no_ar(s: Session) -> None:
    p = opened(s)
    psn = p.send(_f(s), ar=False)
    r = p.ack_for(psn)
    check(not P.psn_after(psn, r.pds.cack_psn), f"CACK covers {psn:#x}", r)


def _write_burst(s: Session, p: Pdc, n: int, multi: bool) -> int:
    """``n`` WRITE packets of 64 bytes, AR only on the last; one message (``multi``) or ``n``."""
    reg = need_region(s, "rwa", min_size=64 * n)
    mid = s.ses().message_id
    last = 0
    burst = []
    for i in range(n):
        if multi:
            fl = (F.SOM if i == 0 else 0) | (F.EOM if i == n - 1 else 0) | F.REL
            kw = dict(flags=fl, request_length=64 * n, message_id=mid)
            if i:
                kw.update(payload_length=64, message_offset=64 * i)
        else:
            kw = dict(buffer_offset=64 * i)
        last, pkt = p.build(ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, **kw), bytes(64)), ar=i == n - 1)
        burst.append(pkt)
    s.send_burst(burst)
    return last


@case("ACK-014", A, "ACKs coalesce: the 16 packets of one WRITE draw fewer than 16 ACKs", "behaviour.md §2.8", SHOULD)
def _coalesce(s: Session) -> None:
    p = opened(s)
    last = _write_burst(s, p, 16, True)
    acks = s.collect(lambda r: p.mine(r) and r.is_ack, lambda r: p.mine(r) and r.is_ack and r.pds.cack_psn == last,
                     "the ACK covering the burst")  # fmt: skip
    check(len(acks) + 1 < 16, "fewer than 16 ACKs for 16 requests", f"{len(acks) + 1} ACKs")


@case("ACK-020", A, "ACKs coalesce for single-packet requests whose success response is not guaranteed",
      "behaviour.md §2.8", SHOULD)  # fmt: skip
def _coalesce_single(s: Session) -> None:
    p = opened(s)
    last = _write_burst(s, p, 16, False)
    acks = s.collect(lambda r: p.mine(r) and r.is_ack, lambda r: p.mine(r) and r.is_ack and r.pds.cack_psn == last,
                     "the ACK covering the burst")  # fmt: skip
    check(len(acks) + 1 < 16, "fewer than 16 ACKs for 16 single-packet WRITEs (non-guaranteed responses may be "
          "replaced by a cumulative ACK, §2.8 'ACK meaning')", f"{len(acks) + 1} ACKs")  # fmt: skip


@case("ACK-015", A, "an ACK answering a retransmission (RETX) carries RETX", "behaviour.md §2.8", SHOULD)
def _retx_echo(s: Session) -> None:
    p = opened(s)
    psn = p.send(_f(s), retx=True)
    r = p.ack_for(psn)
    check(bool(r.flags & P.AckFlag.RETX), "ACK flag RETX set", r)


@case("ACK-016", A, "ACK_CC advertises an MPR of at least 1 (128 PSNs)", "behaviour.md §2.4")
def _mpr(s: Session) -> None:
    r = opened(s).exchange(_f(s))
    if not r.has_sack:
        return  # a plain ACK carries no MPR: nothing to check
    check(r.pds.mpr >= 1, "mpr ≥ 1", r)


@case("ACK-017", A, "ACK_CC cc_type is NSCC (0) or credit (1)", "wire-format.md §5.4")
def _cctype(s: Session) -> None:
    r = opened(s).exchange(_f(s))
    if r.has_sack:
        check(r.pds.cc_type in (0, 1), "cc_type 0 or 1", r)


@case("ACK-018", A, "a duplicate of an acknowledged request is answered at once without an error",
      "behaviour.md §2.6")  # fmt: skip
def _dup(s: Session) -> None:
    p = opened(s)
    psn = p.send(_f(s))
    p.ack_for(psn)
    p.send(_f(s), psn=psn, retx=True)
    r = s.expect(lambda r: p.mine(r) and (r.is_ack or r.is_nack), "an answer to the duplicate")
    check(r.is_ack and r.rc in (None, RC.NULL, RC.OK), "an ACK with no error", r)


@case("ACK-019", A, "a duplicate request is not delivered twice: a duplicated FETCH SUM adds once", "behaviour.md §2.6")
def _dup_once(s: Session) -> None:
    import struct

    from uet.conformance.cases._util import op
    from uet.wire import ses as S

    reg = need_region(s, "rwa")
    p = opened(s)
    off = 2048
    op(s, p, OP.WRITE, (1000).to_bytes(8, "big"), match_bits=reg.key, buffer_offset=off)
    ext = S.ATOMIC_EXT.encode(S.ATOMIC_EXT.make(atomic_opcode=S.AmoOp.SUM, atomic_datatype=S.AmoType.UINT64))
    body = ses_standard(s.ses(opcode=OP.ATOMIC, match_bits=reg.key, buffer_offset=off), struct.pack(">Q", 5), ext)
    psn = p.send(body)
    p.ack_for(psn)
    p.send(body, psn=psn, retx=True)
    s.expect(lambda r: p.mine(r) and (r.is_ack or r.is_nack), "an answer to the duplicate")
    got = int.from_bytes(read_back(s, p, reg.key, off, 8), "big")
    check(got == 1005, "1000 + 5 applied once = 1005", f"{got}")


# -- guaranteed responses and the clear PSN ----------------------------------------------------------


def _error_req(s: Session) -> bytes:
    """A request whose answer is an error (guaranteed delivery, §6.9): READ with an unknown key."""
    return ses_standard(s.ses(opcode=OP.READ, match_bits=0xDEADBEEF0BAD0000, request_length=8))


@case("CLR-001", G, "an ACK carrying an error response asks for a clear (REQ_CLEAR)", "behaviour.md §2.7")
def _req_clear(s: Session) -> None:
    p = opened(s)
    r = p.exchange(_error_req(s))
    expect_rc(r, RC.BAD_MKEY)
    check(bool(r.flags & P.AckFlag.REQ_CLEAR), "ACK flag REQ_CLEAR (0x02)", r)


@case("CLR-002", G, "CACK stops before a guaranteed response that is not cleared yet", "behaviour.md §2.7")
def _cack_held(s: Session) -> None:
    p = opened(s)
    r = p.exchange(_error_req(s), clear=False)
    psn = ack_psn(r)
    check(r.pds.cack_psn == (psn - 1) & 0xFFFFFFFF, f"CACK = {(psn - 1) & 0xFFFFFFFF:#x}", r)


@case("CLR-003", G, "a CLEAR control packet releases the guaranteed response: CACK moves past it", "behaviour.md §2.7")
def _clear_cp(s: Session) -> None:
    p = opened(s)
    r = p.exchange(_error_req(s), clear=False)
    psn = ack_psn(r)
    expect_rc(r, RC.BAD_MKEY, " (a guaranteed response to clear)")
    check(r.pds.cack_psn == (psn - 1) & 0xFFFFFFFF, f"CACK held at {(psn - 1) & 0xFFFFFFFF:#x} before the CLEAR", r)
    p.send_clear(psn)
    # judged by a PROBE, which carries no clear PSN of its own: a later request's clear_psn_offset
    # would release the response by itself and hide a CLEAR the target ignored
    r2 = _probe(s, p)
    check(r2.pds.cack_psn == psn, f"CACK = {psn:#x} after the CLEAR (the PROBE's ACK)", r2)


@case("CLR-004", G, "clear_psn_offset of the next request releases it as well", "behaviour.md §2.7")
def _clear_implicit(s: Session) -> None:
    p = opened(s)
    r = p.exchange(_error_req(s), clear=False)
    expect_rc(r, RC.BAD_MKEY, " (a guaranteed response to clear)")
    check(r.pds.cack_psn == (ack_psn(r) - 1) & 0xFFFFFFFF, "CACK held before the clear", r)
    p.clear_psn = ack_psn(r)
    nxt = p.send(_f(s))
    r2 = p.ack_for(nxt)
    check(r2.pds.cack_psn == nxt, f"CACK = {nxt:#x} (clear PSN carried in the request)", r2)


@case("CLR-005", G, "a duplicate of an uncleared PSN gets the stored guaranteed response again", "behaviour.md §2.6")
def _gtd_dup(s: Session) -> None:
    p = opened(s)
    r = p.exchange(_error_req(s), clear=False)
    psn = ack_psn(r)
    p.send(_error_req(s), psn=psn, retx=True)
    r2 = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == psn, f"the ACK of the duplicate {psn:#x}")
    expect_rc(r2, RC.BAD_MKEY, " (the stored response)")


@case("CLR-006", G, "ACK_REQ for an uncleared PSN resends its guaranteed response", "behaviour.md §2.11")
def _gtd_ackreq(s: Session) -> None:
    p = opened(s)
    r = p.exchange(_error_req(s), clear=False)
    psn = ack_psn(r)
    s.send(control(CT.ACK_REQ, psn=psn, spdcid=p.spdcid, dpdcid=peer_pdcid(p)))
    r2 = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == psn, f"an ACK naming {psn:#x}")
    expect_rc(r2, RC.BAD_MKEY, " (the stored response)")


@case("CLR-007", G, "a target holding an uncleared response asks with a REQ_CLEAR control packet", "behaviour.md §2.7",
      SHOULD)  # fmt: skip
def _req_clear_cp(s: Session) -> None:
    p = opened(s)
    r = p.exchange(_error_req(s), clear=False)
    psn = ack_psn(r)
    r2 = s.expect(lambda r: p.mine(r) and r.is_control and r.pds.ctl_type == CT.REQ_CLEAR, "a REQ_CLEAR CP")
    check(r2.pds.payload == psn, f"REQ_CLEAR payload = {psn:#x}", r2)
    p.send_clear(psn)


@case("CLR-008", G, "a successful small READ returns its data in the ACK as a guaranteed response",
      "behaviour.md §6.5")  # fmt: skip
def _read_gtd(s: Session) -> None:
    reg = need_region(s, "r")
    p = opened(s)
    r = p.exchange(ses_standard(s.ses(opcode=OP.READ, match_bits=reg.key, request_length=8)), clear=False)
    expect_rc(r, RC.OK)
    check(r.pds.next_hdr in (5, 6), "next_hdr 5 or 6 (response with data)", r)
    check(bool(r.flags & P.AckFlag.REQ_CLEAR), "REQ_CLEAR (response with data is guaranteed)", r)
    p.send_clear(ack_psn(r))


@case("CLR-009", G, "a non-guaranteed success does not ask for a clear", "behaviour.md §2.7")
def _no_clear(s: Session) -> None:
    r = expect_ok(opened(s).exchange(_f(s)), " for the NO_OP")
    check(not r.flags & P.AckFlag.REQ_CLEAR, "no REQ_CLEAR on a NO_OP's ACK", r)


@case("CLR-010", G, "a CLEAR beyond the highest received PSN is ignored (CACK never passes a hole)",
      "behaviour.md §2.7", hostile=True)  # fmt: skip
def _clear_beyond(s: Session) -> None:
    p = opened(s)
    p.send_clear((p.start + 50) & 0xFFFFFFFF)
    r = _probe(s, p)
    check(r.pds.cack_psn == p.start, f"CACK still {p.start:#x}", r)


@case("ACK-021", A, "a request that arrived CE-marked is acknowledged with M = 1", "behaviour.md §4.7")
def _ecn_echo(s: Session) -> None:
    p = opened(s)
    psn = p.send(_f(s), ecn=3)
    r = p.ack_for(psn)
    check(bool(r.flags & P.AckFlag.M), "ACK flag M (0x20): the CE mark echoed", r)


@case("ACK-022", A, "a request that arrived unmarked is acknowledged with M = 0", "behaviour.md §4.7")
def _ecn_clear(s: Session) -> None:
    p = opened(s)
    psn = p.send(_f(s), ecn=2)
    r = p.ack_for(psn)
    check(not r.flags & P.AckFlag.M, "ACK flag M clear for an ECT(0) packet", r)


def _nominal(s: Session, plaintext: bytes) -> int:
    """The nominal size of a datagram the tester sent (§4.2): its transport size + 40, the UET
    bytes as they went on the wire (sealed with TSS, with the CRC-32C trailer of a CRC target)
    after the 8-byte UDP header, or directly over IP after the 4-byte entropy header."""
    transport = 4 if s.over_ip is not None else 8
    return len(s.seal(plaintext)) + (crc.TRAILER_LEN if s.target.crc else 0) + transport + 40


@case("ACK-023", A, "ACK_CC rcvd_bytes counts the nominal bytes received (256-byte units, rounded up), "
      "duplicates excluded", "behaviour.md §4.2")  # fmt: skip
def _rcvd_bytes(s: Session) -> None:
    reg = need_region(s, "rwa", min_size=16384)
    p = Pdc(s)
    first = p.open()
    if not first.has_sack:
        raise Skipped("the target answers with plain ACKs (no ACK_CC state to check)")
    sizes = [_nominal(s, next(b for d, b in reversed(s.log) if d == "sent"))]
    base = first.pds.rcvd_bytes
    total = 0
    # many small packets: the 40 + 8 (or 4) bytes of each one's nominal size add up to several units of 256
    for k in range(16):
        w = ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=12288 + 64 * k), bytes(32))
        r = p.exchange(w)
        total += _nominal(s, p.header((p.next_psn - 1) & 0xFFFFFFFF) + w)
    check(r.has_sack, "an ACK_CC", r)
    lo, hi = total, total + sizes[0]  # the opening NO_OP carries no data: a target may count it or not
    got = (r.pds.rcvd_bytes - base) & 0xFFFFFF
    # each end rounds up once: the difference of two rounded counts may be one unit either way
    umin, umax = (lo >> 8) - 1, ((hi + 255) >> 8) + 1
    check(umin <= got <= umax, f"rcvd_bytes grew by {umin}..{umax} units of 256 ({lo} nominal bytes sent)", r)
    dup = p.send(w, psn=(p.next_psn - 1) & 0xFFFFFFFF, retx=True)
    r2 = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == dup, "the ACK of the duplicate WRITE")
    if r2.has_sack:
        check(r2.pds.rcvd_bytes == r.pds.rcvd_bytes, "a duplicate does not add to rcvd_bytes", r2)


@case("ACK-024", A, "ACK_CC ooo_count reports the out-of-order packets held, 0 once the hole is filled",
      "behaviour.md §4.2", SHOULD)  # fmt: skip
def _ooo_count(s: Session) -> None:
    p = opened(s)
    a = p.send(_f(s), psn=(p.next_psn + 1) & 0xFFFFFFFF)
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == a, "the ACK of the out-of-order PSN")
    if not r.has_sack:
        raise Skipped("the target answers with plain ACKs (no ooo_count)")
    check(r.pds.ooo_count >= 1, "ooo_count ≥ 1 with a packet held behind a hole", r)
    b = p.send(_f(s), psn=(a - 1) & 0xFFFFFFFF)
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == b, "the ACK of the gap-filling PSN")
    check(r.pds.ooo_count == 0, "ooo_count 0 once everything is in order", r)
    p.next_psn = (a + 1) & 0xFFFFFFFF


@case("CLR-011", G, "a CLEAR beyond the highest received PSN clears nothing received later", "behaviour.md §2.7",
      hostile=True)  # fmt: skip
def _clear_beyond_later(s: Session) -> None:
    p = opened(s)
    p.send_clear((p.start + 5) & 0xFFFFFFFF)  # ignored: nothing up to there was received
    r = p.exchange(_error_req(s), clear=False)
    expect_rc(r, RC.BAD_MKEY)
    psn = ack_psn(r)
    check(bool(r.flags & P.AckFlag.REQ_CLEAR) and r.pds.cack_psn == (psn - 1) & 0xFFFFFFFF,
          "REQ_CLEAR and CACK held before the new guaranteed response (the early CLEAR did not count)", r)  # fmt: skip
