"""Control packets (behaviour.md §2.11, §2.12; wire-format.md §5.8) and the NACKs a target can be
driven to send, with their fields and payloads (behaviour.md §2.6, §2.10; wire-format.md §5.6, §7.1)."""

from __future__ import annotations

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import CT, NC, OP, check, opened, peer_pdcid
from uet.conformance.session import Pdc, Session
from uet.conformance.wirekit import Reply, control, ses_standard
from uet.wire import pds as P

C = "control"
N = "nack"


def _f(s: Session) -> bytes:
    return ses_standard(s.ses(opcode=OP.NO_OP))


def _ctl(s: Session, p: Pdc, ctl: int, **kw: int) -> None:
    s.send(control(ctl, spdcid=kw.pop("spdcid", p.spdcid), dpdcid=kw.pop("dpdcid", p.dpdcid or 0), **kw))


# -- ACK_REQ ------------------------------------------------------------------------------------------


@case("CTL-001", C, "ACK_REQ for a received PSN is answered by an ACK naming that PSN", "behaviour.md §2.11")
def _ackreq(s: Session) -> None:
    p = opened(s)
    psn = p.send(_f(s))
    p.ack_for(psn)
    _ctl(s, p, CT.ACK_REQ, psn=psn)
    r = s.expect(lambda r: p.mine(r) and r.is_ack and (r.ack_psn == psn or not P.psn_after(psn, r.pds.cack_psn)),
                 f"an ACK covering {psn:#x}")  # fmt: skip
    check(not P.psn_after(psn, r.pds.cack_psn) or r.ack_psn == psn, "the ACK covers the PSN", r)


@case("CTL-002", C, "ACK_REQ for an in-window PSN never received draws NACK PKT_NOT_RCVD", "behaviour.md §2.11")
def _ackreq_missing(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 5) & 0xFFFFFFFF
    _ctl(s, p, CT.ACK_REQ, psn=psn)
    r = p.nack(psn)
    check(r.pds.nack_code == NC.PKT_NOT_RCVD, "NACK PKT_NOT_RCVD", r)


@case("CTL-003", C, "ACK_REQ for a PSN outside the window is dropped silently", "behaviour.md §2.11", SHOULD,
      hostile=True)  # fmt: skip
def _ackreq_oor(s: Session) -> None:
    p = opened(s)
    _ctl(s, p, CT.ACK_REQ, psn=(p.start + 100000) & 0xFFFFFFFF)
    s.assert_silent(lambda r: p.mine(r), "no answer to an out-of-window ACK_REQ")


@case("CTL-004", C, "ACK_REQ does not consume a PSN: the next request still uses the next PSN", "wire-format.md §5.8")
def _ackreq_nopsn(s: Session) -> None:
    p = opened(s)
    _ctl(s, p, CT.ACK_REQ, psn=p.start)
    s.expect(lambda r: p.mine(r) and r.is_ack, "the ACK_REQ's ACK")
    psn = p.send(_f(s))
    r = p.ack_for(psn)
    check(r.pds.cack_psn == psn, f"CACK = {psn:#x}", r)


# -- PROBE --------------------------------------------------------------------------------------------


@case("CTL-005", C, "PROBE is answered by an ACK with P = 1 echoing probe_opaque", "wire-format.md §5.3")
def _probe(s: Session) -> None:
    p = opened(s)
    _ctl(s, p, CT.PROBE, probe_opaque=0xC0DE, payload=p.start)
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.flags & P.AckFlag.P, "an ACK with P = 1")
    check(r.pds.probe_opaque == 0xC0DE, "probe_opaque 0xC0DE echoed", r)


@case("CTL-006", C, "the PROBE's ACK reports the current CACK", "behaviour.md §2.11")
def _probe_cack(s: Session) -> None:
    p = opened(s)
    for _ in range(3):
        psn = p.send(_f(s))
    p.ack_for(psn)
    _ctl(s, p, CT.PROBE, probe_opaque=0x0101, payload=p.start)
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.flags & P.AckFlag.P, "an ACK with P = 1")
    check(r.pds.cack_psn == psn, f"CACK = {psn:#x}", r)


@case("CTL-007", C, "a PROBE does not consume a PSN", "behaviour.md §2.11")
def _probe_nopsn(s: Session) -> None:
    p = opened(s)
    _ctl(s, p, CT.PROBE, probe_opaque=7)
    s.expect(lambda r: p.mine(r) and r.is_ack and r.flags & P.AckFlag.P, "the PROBE's ACK")
    psn = p.send(_f(s))
    check(p.ack_for(psn).pds.cack_psn == psn, f"CACK = {psn:#x}")


for _i, _opq in enumerate((0x0000, 0xFFFF, 0x8001)):

    def _mk(opq: int = _opq, i: int = _i) -> None:
        @case(f"CTL-{i + 8:03d}", C, f"probe_opaque {opq:#06x} is echoed bit for bit", "wire-format.md §5.3")
        def _t(s: Session) -> None:
            p = opened(s)
            _ctl(s, p, CT.PROBE, probe_opaque=opq)
            r = s.expect(lambda r: p.mine(r) and r.is_ack and r.flags & P.AckFlag.P, "an ACK with P = 1")
            check(r.pds.probe_opaque == opq, f"probe_opaque {opq:#06x}", r)

    _mk()


# -- CLOSE --------------------------------------------------------------------------------------------


@case("CTL-011", C, "CLOSE is acknowledged by an ACK naming the CLOSE's PSN", "behaviour.md §2.12")
def _close(s: Session) -> None:
    p = opened(s)
    psn = p.next_psn
    r = p.close()
    check(r is not None and r.is_ack and r.ack_psn == psn, f"an ACK naming the CLOSE PSN {psn:#x}", r or "nothing")


@case("CTL-012", C, "a retransmitted CLOSE is acknowledged again", "behaviour.md §2.12")
def _close_dup(s: Session) -> None:
    """The CLOSE's ACK was lost, so the initiator resends it (§2.12: CLOSE is retransmitted on
    RTO). The copy follows the CLOSE at once: a target keeps a closed PDC only a short while to
    re-ACK it (the notes' MSL is the endpoint's; ``uet-peer`` lingers 10 ms), which a loaded
    host can outlast even between two datagrams sent back to back (the target may run between
    them). So the answer may be that the PDC is gone; the case then tries again on a new PDC, up
    to three times, and fails only when no copy was ever acknowledged again."""
    for _ in range(3):
        psn, r = _close_and_copy(s)
        if r.is_ack:
            break
    check(r.is_ack and r.ack_psn == psn, f"an ACK naming {psn:#x}", r)


def _close_and_copy(s: Session) -> tuple[int, Reply]:
    """A new PDC closed by a CLOSE and its copy (RETX) sent back to back: (the CLOSE's PSN, the
    answer to the copy) once the CLOSE itself was acknowledged."""
    p = opened(s)
    psn = p.next_psn
    close = control(CT.CLOSE, psn=psn, spdcid=p.spdcid, dpdcid=p.dpdcid or 0, flags=P.ReqFlag.AR)
    copy = control(CT.CLOSE, psn=psn, spdcid=p.spdcid, dpdcid=p.dpdcid or 0, flags=P.ReqFlag.AR | P.ReqFlag.RETX)
    p.next_psn, p.closed = (psn + 1) & 0xFFFFFFFF, True
    s.send_burst([close, copy])
    s.expect(lambda r: p.mine(r) and r.is_ack and r.ack_psn == psn, f"the ACK of the CLOSE (PSN {psn:#x})")
    return psn, s.expect(lambda r: p.mine(r) and (r.is_ack or r.is_nack), "an answer to the retransmitted CLOSE")


@case("CTL-013", C, "a request newer than the CLOSE draws NACK CLOSING", "behaviour.md §2.12", hostile=True)
def _closing(s: Session) -> None:
    p = opened(s)
    p.close()
    psn = p.send(_f(s))
    r = p.nack(psn)
    check(r.pds.nack_code in (NC.CLOSING, NC.INV_DPDCID), "NACK CLOSING (or INV_DPDCID once the PDC is freed)", r)


@case("CTL-014", C, "a request newer than the CLOSE, sent right after it, draws NACK CLOSING", "behaviour.md §2.12",
      SHOULD, hostile=True)  # fmt: skip
def _closing_exact(s: Session) -> None:
    p = opened(s)
    cpsn = p.next_psn
    p.next_psn = (cpsn + 1) & 0xFFFFFFFF
    _ctl(s, p, CT.CLOSE, psn=cpsn, flags=P.ReqFlag.AR)
    psn = p.send(_f(s))
    r = p.nack(psn)
    check(r.pds.nack_code == NC.CLOSING, "NACK CLOSING", r)
    p.closed = True


@case("CTL-015", C, "CLOSE with a PSN outside the window is refused", "behaviour.md §2.12", hostile=True)
def _close_oor(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 5000) & 0xFFFFFFFF
    _ctl(s, p, CT.CLOSE, psn=psn, flags=P.ReqFlag.AR)
    r = p.nack(psn)
    check(r.pds.nack_code == NC.PSN_OOR_WINDOW, "NACK PSN_OOR_WINDOW", r)


# -- control packets that do not belong --------------------------------------------------------------


@case("CTL-016", C, "REQ_CLOSE sent to a target-role PDC draws NACK UNEXP_EVENT", "behaviour.md §2.11", hostile=True)
def _reqclose_to_target(s: Session) -> None:
    p = opened(s)
    _ctl(s, p, CT.REQ_CLOSE, psn=p.next_psn, flags=P.ReqFlag.AR)
    r = p.nack()
    check(r.pds.nack_code == NC.UNEXP_EVENT, "NACK UNEXP_EVENT", r)


@case("CTL-017", C, "an unassigned control type (15) draws NACK UNEXP_EVENT", "behaviour.md §2.11", hostile=True)
def _ctl15(s: Session) -> None:
    p = opened(s)
    _ctl(s, p, 15, psn=p.start)
    r = p.nack()
    check(r.pds.nack_code == NC.UNEXP_EVENT, "NACK UNEXP_EVENT", r)


@case("CTL-018", C, "NOOP on an established PDC draws no reply", "wire-format.md §5.8", SHOULD)
def _noop(s: Session) -> None:
    p = opened(s)
    _ctl(s, p, CT.NOOP)
    s.assert_silent(lambda r: p.mine(r) and (r.is_nack or r.is_ack), "no answer to NOOP")


for _j, (_ct, _nm) in enumerate([(CT.NOOP, "NOOP"), (CT.ACK_REQ, "ACK_REQ"), (CT.CLEAR, "CLEAR"),
                                 (CT.CLOSE, "CLOSE"), (CT.PROBE, "PROBE"), (CT.CREDIT_REQ, "CREDIT_REQ")]):  # fmt: skip

    def _mk2(ct: int = _ct, nm: str = _nm, j: int = _j) -> None:
        @case(f"CTL-{j + 19:03d}", C, f"{nm} for a PDC that does not exist draws NACK INV_DPDCID with SPDCID 0",
              "behaviour.md §2.11", hostile=True)  # fmt: skip
        def _t(s: Session) -> None:
            mine = s.new_pdcid()
            s.send(control(ct, psn=0x1234, spdcid=mine, dpdcid=s.unused_dpdcid(), flags=P.ReqFlag.AR))
            r = s.expect(lambda r: r.is_nack and r.pds.dpdcid == mine, f"a NACK to PDCID {mine}")
            check(r.pds.nack_code == NC.INV_DPDCID, "NACK INV_DPDCID", r)
            check(r.pds.spdcid == 0, "NACK SPDCID 0 (no PDC at the target)", r)

    _mk2()


@case("CTL-025", C, "a control packet with the wrong SPDCID draws NACK PDC_HDR_MISMATCH", "behaviour.md §2.11",
      hostile=True)  # fmt: skip
def _ctl_mismatch(s: Session) -> None:
    p = opened(s)
    other = s.new_pdcid()
    s.send(control(CT.PROBE, spdcid=other, dpdcid=peer_pdcid(p), psn=0))
    r = s.expect(lambda r: r.is_nack and r.pds.dpdcid == other, f"a NACK to PDCID {other}")
    check(r.pds.nack_code == NC.PDC_HDR_MISMATCH, "NACK PDC_HDR_MISMATCH", r)


# -- NACK codes and payloads ------------------------------------------------------------------------


@case("NAK-001", N, "a request to an unknown DPDCID draws NACK INV_DPDCID: PSN echoed, SPDCID 0, payload 0",
      "behaviour.md §1.4", hostile=True)  # fmt: skip
def _inv(s: Session) -> None:
    p = Pdc(s)
    p.dpdcid = s.unused_dpdcid()
    psn = p.send(_f(s))
    r = p.nack(psn)
    check(r.pds.nack_code == NC.INV_DPDCID, "NACK INV_DPDCID", r)
    check(r.pds.spdcid == 0 and r.pds.payload == 0, "SPDCID 0 and payload 0", r)


@case("NAK-002", N, "a request with the wrong SPDCID draws NACK PDC_HDR_MISMATCH", "behaviour.md §1.4", hostile=True)
def _mismatch(s: Session) -> None:
    p = opened(s)
    q = Pdc(s)
    q.dpdcid = p.dpdcid
    q.start, q.next_psn = p.start, p.next_psn
    psn = q.send(_f(s))
    r = q.nack(psn)
    check(r.pds.nack_code == NC.PDC_HDR_MISMATCH, "NACK PDC_HDR_MISMATCH", r)


@case("NAK-003", N, "a ROD request on a RUD PDC draws NACK PDC_MODE_MISMATCH", "behaviour.md §2.6", hostile=True)
def _mode(s: Session) -> None:
    p = opened(s)
    p.rod = True
    psn = p.send(_f(s))
    r = p.nack(psn)
    check(r.pds.nack_code == NC.PDC_MODE_MISMATCH, "NACK PDC_MODE_MISMATCH", r)


@case("NAK-004", N, "a RUD request on a ROD PDC draws NACK PDC_MODE_MISMATCH", "behaviour.md §2.6", hostile=True)
def _mode2(s: Session) -> None:
    p = opened(s, rod=True)
    p.rod = False
    psn = p.send(_f(s))
    r = p.nack(psn)
    check(r.pds.nack_code == NC.PDC_MODE_MISMATCH, "NACK PDC_MODE_MISMATCH", r)


@case("NAK-005", N, "NACKs carry next_hdr 0 and no SES header", "wire-format.md §5.6", hostile=True)
def _nack_nh(s: Session) -> None:
    p = opened(s)
    psn = p.send(_f(s), psn=(p.start + 9000) & 0xFFFFFFFF)
    r = p.nack(psn)
    check(r.pds.next_hdr == 0 and r.ses is None, "next_hdr 0", r)


@case("NAK-006", N, "a NACK names the refused packet's PSN and our PDCID as DPDCID", "wire-format.md §5.6",
      hostile=True)  # fmt: skip
def _nack_fields(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 7777) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    r = s.expect(lambda r: r.is_nack and r.pds.dpdcid == p.spdcid, "a NACK to our PDC")
    check(r.pds.nack_psn == psn, f"nack_psn = {psn:#x}", r)
    check(r.pds.spdcid == p.dpdcid, f"SPDCID = the target's PDCID {p.dpdcid}", r)


@case("NAK-007", N, "a NACK answering a retransmission carries RETX", "behaviour.md §2.10", SHOULD, hostile=True)
def _nack_retx(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 7000) & 0xFFFFFFFF
    p.send(_f(s), psn=psn, retx=True)
    r = p.nack(psn)
    check(bool(r.flags & P.NackFlag.RETX), "NACK flag RETX", r)


@case("NAK-008", N, "the NACK for an unknown PDC is not repeated: one NACK per refused packet", "behaviour.md §2.10",
      SHOULD, hostile=True)  # fmt: skip
def _nack_once(s: Session) -> None:
    p = Pdc(s)
    p.dpdcid = s.unused_dpdcid()
    psn = p.send(_f(s))
    got = s.replies_before_probe(lambda r: p.mine(r) and r.is_nack)
    check(len(got) == 1 and got[0].pds.nack_psn == psn, "exactly one NACK", f"{len(got)} NACKs")


@case("NAK-009", N, "ROD: an out-of-order request is not delivered early (CACK stays, any NACK is ROD_OOO)",
      "behaviour.md §2.13", hostile=True)  # fmt: skip
def _rod_ooo(s: Session) -> None:
    p = opened(s, rod=True)
    psn = (p.start + 3) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    for r in s.replies_before_probe(lambda r: p.mine(r) and r.is_nack):
        check(r.pds.nack_code == NC.ROD_OOO, "NACK ROD_OOO", r)
    _ctl(s, p, CT.PROBE, probe_opaque=9)
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.flags & P.AckFlag.P, "the PROBE's ACK")
    check(r.pds.cack_psn == p.start, f"CACK stays {p.start:#x}", r)


@case("NAK-010", N, "ROD: an out-of-order request draws NACK ROD_OOO (go-back-N) or is held and SACKed (buffering)",
      "behaviour.md §2.13", SHOULD, hostile=True)  # fmt: skip
def _rod_ooo_nack(s: Session) -> None:
    """§2.13 allows both models: the spec's go-back-N (discard, NACK ``ROD_OOO``) and the
    reference's buffering (keep it, report it in the SACK, never acknowledge past the hole)."""
    p = opened(s, rod=True)
    psn = (p.start + 2) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    r = s.expect(lambda r: p.mine(r) and (r.is_nack or r.is_ack), f"a NACK or an ACK for PSN {psn:#x}")
    if r.is_nack:
        check(r.pds.nack_code == NC.ROD_OOO and r.pds.nack_psn == psn, "NACK ROD_OOO for it", r)
        return
    check(P.psn_after(psn, r.pds.cack_psn), "an ACK that does not acknowledge it past the hole", r)
    if r.has_sack:
        base = P.sack_base(r.pds.cack_psn, r.pds.sack_psn_offset)
        check(psn in P.sack_to_psns(base, r.pds.sack_bitmap), "its PSN reported in the SACK", r)


@case("NAK-011", N, "ROD: after an out-of-order request the in-order PSN is accepted and CACK advances",
      "behaviour.md §2.13")  # fmt: skip
def _rod_recover(s: Session) -> None:
    p = opened(s, rod=True)
    p.send(_f(s), psn=(p.start + 2) & 0xFFFFFFFF)
    a = p.send(_f(s), psn=(p.start + 1) & 0xFFFFFFFF)
    r = p.ack_for(a)
    # go-back-N: CACK = a (the later PSN was discarded); buffering: CACK may cover it as well
    check(not P.psn_after(a, r.pds.cack_psn), f"CACK covers {a:#x}", r)
    b = p.send(_f(s), psn=(p.start + 2) & 0xFFFFFFFF, retx=True)
    r = p.ack_for(b)
    check(r.pds.cack_psn == b, f"CACK = {b:#x}", r)


@case("NAK-012", N, "ACK_REQ on a PDC that does not exist (SYN form) draws PKT_NOT_RCVD or INV_DPDCID",
      "behaviour.md §2.11", hostile=True)  # fmt: skip
def _ackreq_syn_unknown(s: Session) -> None:
    mine = s.new_pdcid()
    s.send(P.CONTROL_SYN.encode(P.CONTROL_SYN.make(ctl_type=CT.ACK_REQ, flags=P.ReqFlag.SYN, psn=77, spdcid=mine)))
    r = s.expect(lambda r: r.is_nack and r.pds.dpdcid == mine, f"a NACK to PDCID {mine}")
    check(r.pds.nack_code in (NC.PKT_NOT_RCVD, NC.INV_DPDCID), "NACK PKT_NOT_RCVD or INV_DPDCID", r)
