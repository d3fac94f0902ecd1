"""NACK codes a target can be driven to send, beyond the ones the control and window cases check
(behaviour.md §2.10–§2.13, wire-format.md §7.1), and the catalogue of every code: the cases that
check it, or why no black-box case can drive a target to send it.

:data:`NACK_CASES` is the suite's account of the code table (a test keeps it complete): a vendor
reading a run knows which codes were judged and which only their own tests can reach.
"""

from __future__ import annotations

import time

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import CT, NC, OP, RC, ack_psn, check, expect_rc, need_region, opened
from uet.conformance.session import CheckFailed, Session, Skipped
from uet.conformance.wirekit import control, ses_standard
from uet.wire import pds as P
from uet.wire.frame import DSCP_TRIM_FABRIC, DSCP_TRIM_LASTHOP

N = "nack"

#: every NACK code → the cases judging it (ids), or the reason no case can drive a target to send it
NACK_CASES: dict[NC, tuple[str, ...] | str] = {
    NC.TRIMMED: ("NAK-016",),
    NC.TRIMMED_LASTHOP: ("NAK-017",),
    NC.TRIMMED_ACK: "sent by an initiator whose ACK with read data was trimmed: an initiator-side code",
    NC.NO_PDC_AVAIL: "needs the target's PDC table full (the reference's is 4096 PDCs): the size is the "
    "implementation's, and filling it disturbs every later case",
    NC.NO_CCC_AVAIL: "a congestion-context shortage: implementation-specific resource, not reachable from the wire",
    NC.NO_BITMAP: "a PSN-tracking resource shortage: implementation-specific, not reachable from the wire",
    NC.NO_PKT_BUFFER: "a packet-buffer shortage: implementation-specific, not reachable from the wire",
    NC.NO_GTD_DEL_AVAIL: "a shortage of guaranteed-response storage: implementation-specific",
    NC.NO_SES_MSG_AVAIL: "needs the target's message-tracking table full (the reference's holds 1024 partial "
    "messages, each kept for the reassembly timeout): the size is the implementation's",
    NC.NO_RESOURCE: "a general resource shortage: implementation-specific, not reachable from the wire",
    NC.PSN_OOR_WINDOW: ("WIN-001", "WIN-002", "WIN-003", "WIN-004", "WIN-005", "WIN-006", "WIN-009"),
    NC.ROD_OOO: ("NAK-009", "NAK-010"),
    NC.INV_DPDCID: ("NAK-001", "WIN-012", "CTL-019", "CTL-020", "CTL-021", "CTL-022", "CTL-023", "CTL-024"),
    NC.PDC_HDR_MISMATCH: ("NAK-002", "EST-015", "CTL-025"),
    NC.CLOSING: ("CTL-013", "CTL-014"),
    NC.CLOSING_IN_ERR: ("NAK-015",),
    NC.PKT_NOT_RCVD: ("CTL-002", "NAK-012", "NAK-013"),
    NC.GTD_DEL_RESP_UNAVAIL: "a duplicate whose guaranteed response the target lost before it was cleared: a "
    "target that keeps responses until CLEAR (the spec's model) never sends it",
    NC.ACK_WITH_DATA: ("NAK-014",),
    NC.INVALID_SYN: ("EST-016", "EST-021", "WIN-014"),
    NC.PDC_MODE_MISMATCH: ("NAK-003", "NAK-004"),
    NC.NEW_START_PSN: ("TSS-011", "TSS-012", "TSS-015"),
    NC.RCVD_SES_PROCG: ("NAK-013",),
    NC.UNEXP_EVENT: ("CTL-016", "CTL-017"),
    NC.RCVR_INFER_LOSS: "a receiver's optional hint that it inferred a loss: when to send it is the "
    "implementation's, so no packet sequence obliges a target to",
    NC.EXP_NACK_NORMAL: "experimental code: no defined trigger",
    NC.EXP_NACK_ERR: "experimental code: no defined trigger",
    NC.EXP_NACK_FATAL: "experimental code: no defined trigger",
}


def _f(s: Session) -> bytes:
    return ses_standard(s.ses(opcode=OP.NO_OP))


@case("NAK-013", N, "ACK_REQ for a ROD PSN held behind a hole: NACK RCVD_SES_PROCG (held) or PKT_NOT_RCVD "
      "(discarded), never an ACK", "behaviour.md §2.11")  # fmt: skip
def _procg(s: Session) -> None:
    """A buffering ROD target holds the request (received, not handed to SES: ``RCVD_SES_PROCG``);
    a go-back-N target discarded it (``ROD_OOO``, then ``PKT_NOT_RCVD``). Acknowledging it would
    claim a delivery that has not happened."""
    p = opened(s, rod=True)
    psn = (p.start + 2) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    s.send(control(CT.ACK_REQ, psn=psn, spdcid=p.spdcid, dpdcid=p.dpdcid or 0))
    r = s.expect(
        lambda r: p.mine(r) and (r.is_nack and r.pds.nack_code != NC.ROD_OOO or r.is_ack and r.ack_psn == psn),
        f"the answer to ACK_REQ for PSN {psn:#x}",
    )
    check(r.is_nack and r.pds.nack_code in (NC.RCVD_SES_PROCG, NC.PKT_NOT_RCVD),
          "NACK RCVD_SES_PROCG (held behind the hole) or PKT_NOT_RCVD (discarded)", r)  # fmt: skip
    check(r.pds.nack_psn == psn, f"the NACK names PSN {psn:#x}", r)


@case("NAK-014", N, "ACK_REQ for a READ whose ACK carried the data, not yet cleared: the same data again or NACK "
      "ACK_WITH_DATA", "behaviour.md §2.7")  # fmt: skip
def _ack_with_data(s: Session) -> None:
    reg = need_region(s, "rwa")
    p = opened(s)
    ses = ses_standard(s.ses(opcode=OP.READ, match_bits=reg.key, buffer_offset=256, request_length=8))
    first = expect_rc(p.exchange(ses, clear=False), RC.OK, " for the 8-byte READ")
    check(len(first.data) == 8, "the 8 bytes read in the ACK", first)
    psn = ack_psn(first)
    s.send(control(CT.ACK_REQ, psn=psn, spdcid=p.spdcid, dpdcid=p.dpdcid or 0))
    r = s.expect(lambda r: p.mine(r) and (r.is_nack or r.is_ack and r.ack_psn == psn),
                 f"the answer to ACK_REQ for the READ's PSN {psn:#x}")  # fmt: skip
    if r.is_nack:
        check(r.pds.nack_code == NC.ACK_WITH_DATA and r.pds.nack_psn == psn, f"NACK ACK_WITH_DATA for {psn:#x}", r)
        return
    check(r.data[:8] == first.data[:8] and r.rc == RC.OK, "the stored response again, with the same 8 bytes", r)


@case("NAK-015", N, "a CLOSE_REQ the initiator never answers ends in NACK CLOSING_IN_ERR", "behaviour.md §2.12",
      SHOULD)  # fmt: skip
def _closing_in_err(s: Session) -> None:
    """The target closes an idle PDC (CLOSE_REQ, §2.12); the tester neither acknowledges it nor
    closes, so after its retries the target closes in error and says so (``CLOSING_IN_ERR``, the
    Linux provider's behaviour: a SHOULD). A target whose idle timer is longer than the wait here
    (ten times ``--timeout``, at least 5 s) skips."""
    p = opened(s)
    wait = max(5.0, 10 * s.timeout)
    try:
        s.expect(lambda r: p.mine(r) and r.is_control and r.pds.ctl_type == CT.REQ_CLOSE, "a CLOSE_REQ", wait)
    except CheckFailed:
        raise Skipped(f"the target did not close an idle PDC within {wait:g} s") from None
    p.closed = True  # answering nothing is the point: no courtesy CLOSE afterwards
    t0 = time.monotonic()
    r = s.expect(lambda r: p.mine(r) and r.is_nack, "NACK CLOSING_IN_ERR once the CLOSE_REQ's retries run out", wait)
    check(r.is_nack and r.pds.nack_code == NC.CLOSING_IN_ERR,
          f"NACK CLOSING_IN_ERR (after {time.monotonic() - t0:.2f} s)", r)  # fmt: skip


def _trimmed(s: Session, dscp: int, code: NC, ecn: int, retx: bool) -> None:
    """The tester plays the trimming switch (behaviour.md §3.2): it sends a WRITE cut after its
    headers and the first 8 bytes of payload, its DSCP rewritten to the trim mark (no CRC-32C
    trailer: the cut took it). §3.3: the target NACKs it at once with ``code`` naming its PSN (``m``
    = its CE mark, ``retx`` echoed) and delivers nothing — a READ still finds the bytes written
    before; the whole WRITE resent on the same PSN is acknowledged and lands. With TSS the cut
    packet cannot be authenticated (§3.5, a gap in the notes): skipped."""
    if s.target.keys is not None:
        raise Skipped("a trimmed sealed packet cannot be authenticated (behaviour.md §3.5): no NACK is owed")
    reg = need_region(s, "rw")
    p = opened(s)
    off = 512 + 64 * (dscp & 1)
    old, new = b"BEFORE-T" * 8, bytes(range(64))
    expect_rc(p.exchange(ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=off), old)), RC.OK,
              " for the first WRITE")  # fmt: skip
    whole = ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=off), new)
    psn = p.next_psn
    s.send(p.header(psn, retx=retx) + whole[: len(whole) - len(new) + 8], ecn=ecn, dscp=dscp, trailer=False)
    p.next_psn = (psn + 1) & 0xFFFFFFFF
    r = p.nack(psn)
    check(r.pds.nack_code == code, f"NACK {code.name} for a packet marked DSCP {dscp}", r)
    check(bool(r.flags & P.NackFlag.M) == (ecn == 3), f"m = the trimmed packet's CE mark ({ecn == 3})", r)
    check(bool(r.flags & P.NackFlag.RETX) == retx, f"retx echoed ({retx})", r)
    read = ses_standard(s.ses(opcode=OP.READ, match_bits=reg.key, buffer_offset=off, request_length=64))
    got = expect_rc(p.exchange(read), RC.OK, " for the READ after the trimmed WRITE")
    check(got.data[:64] == old, "the trimmed WRITE delivered nothing: the bytes written before", got)
    s.send(p.header(psn, retx=True) + whole)
    p.ack_for(psn)
    got = expect_rc(p.exchange(read), RC.OK, " for the READ after the whole WRITE")
    check(got.data[:64] == new, "the whole WRITE, resent, landed", got)


@case("NAK-016", N, "a request trimmed in the fabric (DSCP 7, cut): NACK TRIMMED naming its PSN with m = its CE "
      "mark, nothing delivered; resent whole, it lands", "behaviour.md §3.3")  # fmt: skip
def _trimmed_fabric(s: Session) -> None:
    _trimmed(s, DSCP_TRIM_FABRIC, NC.TRIMMED, ecn=3, retx=False)


@case("NAK-017", N, "a request trimmed at the last hop (DSCP 5, cut): NACK TRIMMED_LASTHOP, retx echoed, nothing "
      "delivered; resent whole, it lands", "behaviour.md §3.3")  # fmt: skip
def _trimmed_lasthop(s: Session) -> None:
    _trimmed(s, DSCP_TRIM_LASTHOP, NC.TRIMMED_LASTHOP, ecn=0, retx=True)
