"""PDC establishment (behaviour.md §1.3–§1.4, §2.2, §2.3; wire-format.md §5.1) and the PSN
window (§2.4, §2.6 step 5)."""

from __future__ import annotations

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import CT, NC, OP, RC, check, expect_ok, opened, peer_pdcid
from uet.conformance.session import Pdc, Session, Skipped
from uet.conformance.wirekit import control, ses_standard
from uet.wire import pds as P

A = "establish"
W = "window"


def _f(s: Session) -> bytes:
    """Filler request: a NO_OP (non-guaranteed success response, so CACK advances at once, §2.7)."""
    return ses_standard(s.ses(opcode=OP.NO_OP))


@case("EST-001", A, "a SYN request is answered by an ACK naming the initiator's PDCID", "behaviour.md §2.2")
def _syn_acked(s: Session) -> None:
    p = Pdc(s)
    psn = p.send(_f(s))
    r = p.ack_for(psn)
    check(r.pds.dpdcid == p.spdcid, f"ACK DPDCID = our SPDCID {p.spdcid}", r)


@case("EST-002", A, "the target assigns a non-zero PDCID in the ACK's SPDCID", "behaviour.md §1.3")
def _pdcid_nonzero(s: Session) -> None:
    r = Pdc(s).open()
    check(r.pds.spdcid != 0, "ACK SPDCID (the target's PDCID) ≠ 0 (0 is reserved)", r)


@case("EST-003", A, "the first ACK's CACK PSN is the Start PSN", "wire-format.md §5.3")
def _cack_start(s: Session) -> None:
    p = Pdc(s)
    r = p.open()
    check(r.pds.cack_psn == p.start, f"CACK PSN = Start PSN {p.start:#x}", r)


@case("EST-004", A, "ACK PSN (CACK + ack_psn_offset) names the SYN packet", "behaviour.md §2.8")
def _ack_psn(s: Session) -> None:
    p = Pdc(s)
    r = p.open()
    check(r.ack_psn == p.start, f"ACK PSN = {p.start:#x}", r)


@case("EST-005", A, "Start PSN = PSN − psn_offset: a first SYN with psn_offset 3 leaves a hole", "behaviour.md §2.3.3")
def _psn_offset(s: Session) -> None:
    p = Pdc(s)
    psn = (p.start + 3) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    r = s.expect(lambda r: p.mine(r) and r.is_ack, "an ACK for the SYN with psn_offset 3")
    check(r.pds.cack_psn == (p.start - 1) & 0xFFFFFFFF, f"CACK = Start PSN − 1 = {(p.start - 1) & 0xFFFFFFFF:#x}", r)
    check(r.ack_psn == psn, f"ACK PSN = {psn:#x}", r)


@case("EST-006", A, "SYN packets sent before the first ACK (0-RTT) are all accepted", "behaviour.md §2.2")
def _zero_rtt(s: Session) -> None:
    p = Pdc(s)
    for _ in range(4):
        p.send(_f(s), ar=False)
    last = p.send(_f(s))
    r = p.ack_for(last)
    check(r.pds.cack_psn == last, f"CACK = {last:#x} (all five SYN packets received)", r)


@case(
    "EST-007",
    A,
    "after the first ACK, requests with SYN clear and the learned DPDCID are accepted",
    "behaviour.md §1.4",
)
def _non_syn(s: Session) -> None:
    p = opened(s)
    psn = p.send(_f(s))
    r = p.ack_for(psn)
    check(r.pds.cack_psn == psn, f"CACK = {psn:#x}", r)


@case("EST-008", A, "two PDCs from one peer get different target PDCIDs", "behaviour.md §1.3")
def _two_pdcs(s: Session) -> None:
    a, b = Pdc(s).open(), Pdc(s).open()
    check(a.pds.spdcid != b.pds.spdcid, "two distinct target PDCIDs", f"{a.pds.spdcid} and {b.pds.spdcid}")


@case("EST-009", A, "a retransmitted SYN (RETX) is acknowledged again with the same PDCID", "behaviour.md §2.6")
def _syn_retx(s: Session) -> None:
    p = Pdc(s)
    psn = p.send(_f(s))
    first = s.expect(lambda r: p.mine(r) and r.is_ack, "the first ACK")
    p.send(_f(s), psn=psn, retx=True, syn=True)
    r = s.expect(lambda r: p.mine(r) and r.is_ack, "an ACK for the retransmitted SYN")
    check(r.pds.spdcid == first.pds.spdcid, f"the same target PDCID {first.pds.spdcid}", r)
    check(not P.psn_after(psn, r.pds.cack_psn), f"CACK covers {psn:#x}", r)


@case("EST-010", A, "a duplicate SYN without RETX reaches the same target PDC", "behaviour.md §1.4")
def _syn_dup(s: Session) -> None:
    p = Pdc(s)
    psn = p.send(_f(s))
    first = s.expect(lambda r: p.mine(r) and r.is_ack, "the first ACK")
    p.send(_f(s), psn=psn, syn=True)
    r = s.expect(lambda r: p.mine(r) and (r.is_ack or r.is_nack), "an answer to the duplicate SYN")
    check(r.is_ack and r.pds.spdcid == first.pds.spdcid, "an ACK from the same target PDC (no second PDC)", r)


@case("EST-011", A, "a later SYN with a new psn_offset on the same PDC is accepted in-window", "behaviour.md §2.3.3")
def _syn_series(s: Session) -> None:
    p = Pdc(s)
    p.send(_f(s))
    s.expect(lambda r: p.mine(r) and r.is_ack, "the first ACK")
    psn = p.send(_f(s), syn=True)
    r = p.ack_for(psn)
    check(r.pds.cack_psn == psn, f"CACK = {psn:#x}", r)


@case("EST-012", A, "PSNs wrap modulo 2^32: a Start PSN of 0xFFFFFFFE spans the wrap", "behaviour.md §0")
def _wrap(s: Session) -> None:
    if s._tss is not None:
        raise Skipped("secure PDCs take their Start PSN from the target's Expected_PSN (behaviour.md §2.3.2)")
    p = Pdc(s, start=0xFFFFFFFE)
    p.open()
    for _ in range(3):
        psn = p.send(_f(s))
    r = p.ack_for(psn)
    check(psn == 1 and r.pds.cack_psn == 1, "CACK = 0x1 after 0xFFFFFFFE, 0xFFFFFFFF, 0x0, 0x1", r)


@case("EST-013", A, "a Start PSN of 0 is accepted (non-secure PDCs trust the offered Start PSN)", "behaviour.md §2.3.1",
      SHOULD)  # fmt: skip
def _start_zero(s: Session) -> None:
    if s._tss is not None:
        raise Skipped("secure PDCs take their Start PSN from the target's Expected_PSN (behaviour.md §2.3.2)")
    p = Pdc(s, start=0)
    r = p.open()
    check(r.pds.cack_psn == 0, "CACK = 0", r)


@case("EST-014", A, "a ROD PDC is established the same way", "behaviour.md §2.2")
def _rod(s: Session) -> None:
    p = Pdc(s, rod=True)
    r = p.open()
    check(r.pds.dpdcid == p.spdcid and r.pds.cack_psn == p.start, "ACK to our PDC with CACK = Start PSN", r)


@case("EST-015", A, "a SYN whose next header is a response is refused with PDC_HDR_MISMATCH", "behaviour.md §2.2",
      hostile=True)  # fmt: skip
def _syn_wrong_nh(s: Session) -> None:
    p = Pdc(s, start=s.rng.randrange(1 << 16, 1 << 31))  # no PDC, not even a PENDING one (§2.3.2)
    p.send(bytes(12), next_hdr=P.NextHeader.RESPONSE)
    r = p.nack(p.start)
    check(r.pds.nack_code == NC.PDC_HDR_MISMATCH, "NACK PDC_HDR_MISMATCH", r)


@case("EST-016", A, "a SYN far outside the window of an existing PDC draws INVALID_SYN", "behaviour.md §2.3.3",
      hostile=True)  # fmt: skip
def _syn_collision(s: Session) -> None:
    p = opened(s)
    far = (p.start + 0x40000000) & 0xFFFFFFFF
    p.send(_f(s), psn=far, syn=True)
    r = p.nack(far)
    check(r.pds.nack_code == NC.INVALID_SYN, "NACK INVALID_SYN", r)


@case("EST-017", A, "a SYN with a new Start PSN but the same SPDCID does not disturb the live PDC", "behaviour.md §2.2",
      hostile=True)  # fmt: skip
def _syn_collision_alive(s: Session) -> None:
    p = opened(s)
    far = (p.start + 0x40000000) & 0xFFFFFFFF
    p.send(_f(s), psn=far, syn=True)
    s.expect(lambda r: p.mine(r) and (r.is_nack or r.is_ack), "an answer to the colliding SYN")
    psn = p.send(_f(s))
    r = p.ack_for(psn)
    check(r.pds.cack_psn == psn, f"the original PDC still acknowledges PSN {psn:#x}", r)


@case("EST-018", A, "0-RTT data is delivered: a SYN WRITE lands before any ACK", "behaviour.md §2.3.1")
def _zero_rtt_write(s: Session) -> None:
    from uet.conformance.cases._util import need_region, read_back

    reg = need_region(s, "rwa")
    p = Pdc(s)
    data = bytes(range(0xA0, 0xB0))
    r = p.exchange(ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=512), data))
    expect_ok(r, " for the SYN WRITE")
    check(read_back(s, p, reg.key, 512, 16) == data, "the written bytes read back")


# -- PSN window -----------------------------------------------------------------------------------


def _oor(s: Session, delta: int) -> None:
    p = opened(s)
    psn = (p.start + delta) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    r = p.nack(psn)
    check(r.pds.nack_code == NC.PSN_OOR_WINDOW, "NACK PSN_OOR_WINDOW", r)
    check(
        r.pds.dpdcid == p.spdcid and r.pds.spdcid == p.dpdcid, "NACK PDCIDs: ours as DPDCID, the target's as SPDCID", r
    )


for _i, (_d, _t) in enumerate([(1 << 12, "4096 ahead"), (1 << 24, "2^24 ahead"), (0x7FFFFFF0, "almost 2^31 ahead"),
                               (-(1 << 12), "4096 behind"), (-(1 << 24), "2^24 behind")]):  # fmt: skip

    def _mk(d: int = _d, i: int = _i, t: str = _t) -> None:
        case(f"WIN-{i + 1:03d}", W, f"a PSN {t} of the window draws NACK PSN_OOR_WINDOW", "behaviour.md §2.4",
             hostile=True)(lambda s: _oor(s, d))  # fmt: skip

    _mk()


@case(
    "WIN-006", W, "PSN_OOR_WINDOW NACK payload is 0 (provider semantics)", "wire-format.md §5.6", SHOULD, hostile=True
)
def _oor_payload(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 5000) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    r = p.nack(psn)
    check(r.pds.payload == 0, "NACK payload 0", r)


@case("WIN-007", W, "an out-of-window PSN does not break the PDC: the next in-window PSN is acknowledged",
      "behaviour.md §2.6", hostile=True)  # fmt: skip
def _oor_then_ok(s: Session) -> None:
    p = opened(s)
    p.send(_f(s), psn=(p.start + 9999) & 0xFFFFFFFF)
    psn = p.send(_f(s))
    r = p.ack_for(psn)
    check(r.pds.cack_psn == psn, f"CACK = {psn:#x}", r)


@case("WIN-008", W, "the last PSN of the window (CACK + 128) is accepted", "behaviour.md §2.4")
def _edge_in(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 127) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    r = s.expect(lambda r: p.mine(r) and (r.is_ack or r.is_nack), f"an answer for PSN {psn:#x}")
    check(r.is_ack and psn in r.sacked() or r.is_ack and r.ack_psn == psn, f"an ACK naming or SACKing {psn:#x}", r)


@case("WIN-009", W, "the first PSN past the window (CACK + 129) is refused", "behaviour.md §2.4", hostile=True)
def _edge_out(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 129) & 0xFFFFFFFF
    p.send(_f(s), psn=psn)
    r = p.nack(psn)
    check(r.pds.nack_code == NC.PSN_OOR_WINDOW, "NACK PSN_OOR_WINDOW", r)


@case("WIN-010", W, "a PSN of the previous window (already CACKed) is a duplicate: ACKed, not NACKed",
      "behaviour.md §2.6")  # fmt: skip
def _prev_window(s: Session) -> None:
    p = opened(s)
    for _ in range(3):
        last = p.send(_f(s))
    p.ack_for(last)
    p.send(_f(s), psn=p.start)
    r = s.expect(lambda r: p.mine(r) and (r.is_ack or r.is_nack), "an answer to the old PSN")
    check(r.is_ack, "an ACK (duplicate), not a NACK", r)
    check(r.rc in (None, RC.NULL, RC.OK), "no error in the duplicate's response", r)


@case("WIN-011", W, "an out-of-window request is not delivered: CACK does not move", "behaviour.md §2.6",
      hostile=True)  # fmt: skip
def _oor_not_delivered(s: Session) -> None:
    p = opened(s)
    p.send(_f(s), psn=(p.start + 4000) & 0xFFFFFFFF)
    p.nack()
    s.send(control(CT.PROBE, spdcid=p.spdcid, dpdcid=peer_pdcid(p), probe_opaque=0x1234))
    r = s.expect(lambda r: p.mine(r) and r.is_ack and r.flags & P.AckFlag.P, "the PROBE's ACK")
    check(r.pds.cack_psn == p.start, f"CACK still {p.start:#x}", r)
    check(not any(P.psn_after(x, p.start + 128) for x in r.sacked()), "no SACK bit for the refused PSN", r)


@case("WIN-012", W, "a non-SYN request must not open a PDC: unknown DPDCID → NACK INV_DPDCID", "behaviour.md §1.4",
      hostile=True)  # fmt: skip
def _no_syn_no_pdc(s: Session) -> None:
    p = Pdc(s)
    p.dpdcid = s.unused_dpdcid()
    p.send(_f(s))
    r = p.nack(p.start)
    check(r.pds.nack_code == NC.INV_DPDCID, "NACK INV_DPDCID", r)


for _cck, (_ccrod, _ccname) in enumerate(((False, "RUD_CC_REQ (13)"), (True, "ROD_CC_REQ (14)"))):

    def _mk_cc(rod: bool = _ccrod, name: str = _ccname, k: int = _cck) -> None:
        @case(f"EST-{19 + k:03d}", A, f"a WRITE carried by a {name} request lands (the CC state word parsed past)",
              "wire-format.md §5.2")  # fmt: skip
        def _t(s: Session) -> None:
            from uet.conformance.cases._util import need_region, read_back

            reg = need_region(s, "rwa", min_size=8192)
            p = Pdc(s, rod=rod)
            p.open()
            data = s.rng.randbytes(24)
            off = 7168 + 32 * k
            r = p.exchange(ses_standard(s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=off), data),
                           cc=(0x5A, 0x123456))  # fmt: skip
            expect_ok(r, f" for the WRITE in a {name}")
            check(read_back(s, p, reg.key, off, 24) == data, "the 24 bytes written, read back")

    _mk_cc()


@case("EST-021", A, "an in-window SYN implying another Start PSN on a live PDC is refused (NACK INVALID_SYN)",
      "behaviour.md §2.3.3", SHOULD, hostile=True)  # fmt: skip
def _syn_other_start(s: Session) -> None:
    """The reference's reading (uet.pds.target): a target PDC keeps the Start PSN it was opened
    with; a later SYN whose ``PSN − psn_offset`` names another one is a different PDC's packet
    (NACK ``INVALID_SYN``), not data for this one. The notes state it for initiator-role PDCs and
    out-of-window SYNs only, hence SHOULD."""
    p = opened(s)
    psn = p.next_psn
    p.send(_f(s), psn=psn, syn=True, psn_offset=(psn - p.start + 5) & 0xFFF)
    r = s.expect(lambda r: p.mine(r) and (r.is_nack or r.is_ack), "an answer to the SYN naming another Start PSN")
    check(r.is_nack and r.pds.nack_code == NC.INVALID_SYN, "NACK INVALID_SYN", r)


@case("WIN-013", W, "a PSN behind the previous window (CACK − 138) is refused, not taken as a duplicate",
      "behaviour.md §2.6", hostile=True)  # fmt: skip
def _before_prev(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 1 - 128 - 10) & 0xFFFFFFFF  # rx_base is Start + 1 after the opening NO_OP
    p.send(_f(s), psn=psn)
    r = s.expect(lambda r: p.mine(r) and (r.is_ack and r.ack_psn == psn or r.is_nack), f"an answer for PSN {psn:#x}")
    check(r.is_nack and r.pds.nack_code == NC.PSN_OOR_WINDOW, "NACK PSN_OOR_WINDOW (neither window)", r)


@case("WIN-014", W, "a SYN past the window (its psn_offset naming the PDC's Start PSN) draws NACK INVALID_SYN",
      "behaviour.md §2.3.3", hostile=True)  # fmt: skip
def _syn_oor(s: Session) -> None:
    p = opened(s)
    psn = (p.start + 200) & 0xFFFFFFFF
    p.send(_f(s), psn=psn, syn=True, psn_offset=200)
    r = p.nack(psn)
    check(r.pds.nack_code == NC.INVALID_SYN, "NACK INVALID_SYN (an out-of-window SYN, not PSN_OOR_WINDOW)", r)
