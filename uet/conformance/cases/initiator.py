"""Initiator-side cases: the implementation's sending side, driven through its agent.

The tester plays the target and the network (:mod:`uet.conformance.driver_target`): it tells the
implementation what to send (:mod:`uet.conformance.driver`), then reads its requests and control
packets and answers them — acknowledging, withholding ACKs, NACKing each code, trimming,
advertising an MPR, asking for a clear or a close — and judges the packets and the completions.
Without an agent (``--agent``) every case here is skipped with the reason.

Choices where the spec notes leave room (each case's docstring says which it relies on):

* the NACK reaction classes are the reference grouping of behaviour.md §2.10 (retransmit 0x01–0x0B,
  0x12, 0x14, 0x1A, 0xFD, 0xFE; close 0x0E–0x11, 0x13, 0x15, 0x16, 0x19, 0xFF; 0x18 ignored). A
  retransmit-class NACK must draw a resend and must not fail the operation; a resend that an
  implementation ignoring the NACK would make at its RTO instead passes too (the timing is not
  judged: ``NACK_Retx_Time`` may equal the RTO);
* after a PDC-fatal NACK the implementation may retry the message on a new PDC (§2.10 "retry on a
  new PDC") or fail it; it must not resend on the PDC the NACK closed;
* retry exhaustion is judged by the outcome (the operation fails) within 30 s, not by a count:
  ``Max_RTO_Retx_Cnt`` is configurable and an implementation may add a time budget.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from uet.conformance.case import SHOULD, case
from uet.conformance.cases._util import check
from uet.conformance.driver_target import RETRY_BUDGET_S, Iut
from uet.conformance.session import CheckFailed, Session, Skipped
from uet.conformance.wirekit import M32, Reply
from uet.wire import pds as P
from uet.wire import ses as S

A = "initiator"
NC = P.NackCode
CT = P.ControlType
F = S.SesFlag
RF = P.ReqFlag
OP = S.SesOpcode
RC = S.ReturnCode

#: a WRITE of this size takes several packets at any MTU (even a 9000-byte jumbo payload)
MULTI = 12288
KEY = 0x1000


def _same(r: Reply) -> Callable[[Reply], bool]:
    """A predicate: a copy of request ``r`` (same PDC, same PSN)."""
    return lambda x: x.pds.spdcid == r.pds.spdcid and x.pds.psn == r.pds.psn and x.ses is not None


def _start_psn(r: Reply) -> int:
    """The Start PSN a SYN request implies (PSN − psn_offset, behaviour.md §2.3.3)."""
    return int(r.pds.psn - r.pds.psn_offset) & M32


def _clear_psn(r: Reply) -> int:
    return int(r.pds.psn + r.pds.clear_psn_offset) & M32


def _established(iut: Iut) -> Reply:
    """One acknowledged SEND: the implementation's PDC toward the tester is ESTABLISHED."""
    cid, r = iut.sent(b"establish")
    iut.ack(r)
    iut.expect_ok(cid, "the SEND")
    return r


def _one_outstanding(iut: Iut, tag: bytes) -> tuple[Reply, int, Reply]:
    """Two SENDs back to back on one PDC; the first is acknowledged (the PDC is ESTABLISHED), the
    second left unacknowledged, so the PDC is never idle (no idle close can start meanwhile):
    (the first request, the second's command id, the second request)."""
    a, b = tag + b" first", tag + b" outstanding"
    cid_a = iut.send(a)
    cid_b = iut.send(b)
    r_a = iut.request("the first SEND's request", lambda x: x.data == a)
    iut.ack(r_a)  # before the second is read: a secure PDC's first flight may be one packet (§2.3.2)
    r_b = iut.request("the second SEND's request", lambda x: x.data == b)
    check(r_b.pds.spdcid == r_a.pds.spdcid, "two messages to one destination on one PDC (§1.4)", r_b)
    iut.expect_ok(cid_a, "the first SEND")
    return r_a, cid_b, r_b


def _closed_pdc(iut: Iut, cid_close: int) -> None:
    """Answer the CLOSE of the PDC and wait for the close command's completion."""
    c = iut.control(CT.CLOSE, "a CLOSE control packet")
    iut.ack(c, ses=False)
    iut.expect_ok(cid_close, "the close")


# -- establishment and the first packets ----------------------------------------------------------


@case("INI-001", A, "the first request of a new PDC: RUD type, SYN, psn_offset 0, the initiator's own PDCID, AR on EOM",
      "behaviour.md §2.2", rules=("b2.1-1", "b2.2-1", "b1.3-1", "b2.5-2"))  # fmt: skip
def ini_first_request(s: Session) -> None:
    iut = Iut(s)
    data = b"INI-001 first SEND"
    cid = iut.send(data)
    r = iut.request("the SEND's request (a SYN opening a PDC)")
    check(r.ptype in (P.PdsType.RUD_REQ, P.PdsType.RUD_CC_REQ), "a RUD request type for a RUD destination", r)
    check(bool(r.flags & RF.SYN), "SYN set on the first request of a new PDC", r)
    check(r.pds.spdcid != 0, "the initiator's own non-zero PDCID in spdcid", r)
    check(r.pds.psn_offset == 0, "psn_offset 0 on the first packet of a one-packet message (PSN = Start PSN)", r)
    check(bool(r.flags & RF.AR), "AR set on the message's EOM packet", r)
    iut.ack(r)
    iut.expect_ok(cid, "the SEND")


@case("INI-002", A, "a SEND's SES header: opcode, SOM and EOM, relative addressing to the job / PIDonFEP / RI named",
      "behaviour.md §6.1", rules=("b1.2-1", "b6.1-2"))  # fmt: skip
def ini_send_header(s: Session) -> None:
    iut = Iut(s)
    data = b"INI-002 " * 4
    cid = iut.send(data)
    r = iut.request("the SEND's request")
    h = r.ses
    check(h is not None and h.opcode == OP.SEND, "a standard SES header with opcode SEND", r)
    check(h.flags & (F.SOM | F.EOM) == F.SOM | F.EOM, "SOM and EOM both set on a one-packet message", r)
    check(bool(h.flags & F.REL), "REL set: the destination was named relatively", r)
    t = s.target
    check((h.job_id, h.pid_on_fep, h.resource_index) == (t.job, t.pid, t.ri),
          f"JobID {t.job:#x}, PIDonFEP {t.pid}, RI {t.ri} as the agent was told", r)  # fmt: skip
    check(h.request_length == len(data) and r.data == data, f"request_length {len(data)} and the message as payload", r)
    iut.ack(r)
    iut.expect_ok(cid, "the SEND")


@case("INI-003", A, "a second message reuses the PDC: same PDCID, next PSN, SYN clear, the target's PDCID learned",
      "behaviour.md §1.4", rules=("b1.4-1", "b2.2-2", "b2.5-1", "b6.9-2"))  # fmt: skip
def ini_pdc_reuse(s: Session) -> None:
    iut = Iut(s)
    r1 = _established(iut)
    cid = iut.send(b"INI-003 second")
    r2 = iut.request("the second SEND's request", lambda r: r.pds.psn != r1.pds.psn)
    iut.same_pdc(r1, r2)
    check(r2.pds.spdcid == r1.pds.spdcid, f"the same PDC (spdcid {r1.pds.spdcid})", r2)
    check(r2.pds.psn == (r1.pds.psn + 1) & M32, f"the next PSN {(r1.pds.psn + 1) & M32:#x}", r2)
    check(not r2.flags & RF.SYN, "SYN clear once an ACK named the target's PDCID", r2)
    check(r2.pds.dpdcid == iut.me(r1), f"dpdcid = the PDCID the ACK named ({iut.me(r1)})", r2)
    iut.ack(r2, rc=RC.NULL)  # a PDS-regenerated default response is success too (§6.9)
    iut.expect_ok(cid, "the second SEND (DEFAULT_RESPONSE with RC_NULL)")


@case("INI-004", A, "0-RTT: a multi-packet WRITE before any ACK: SYN and psn_offset on each, one PDC, consecutive PSNs",
      "behaviour.md §2.2", rules=("b2.2-1", "b2.5-1", "b1.4-2", "b2.8-3"))  # fmt: skip
def ini_zero_rtt(s: Session) -> None:
    iut = Iut(s)
    if iut.secure:
        raise Skipped("a secure initiator may hold a new PDC's first flight to one packet until the target answers "
                      "(a RANDOM_1RTT_START target refuses it; §2.3.2 is silent on its size)")  # fmt: skip
    data = bytes(range(256)) * (MULTI // 256)
    cid = iut.start("write", key=KEY, offset=64, data=data.hex())
    pkts = iut.message("the WRITE")
    check(len(pkts) >= 2, f"a {MULTI}-byte WRITE split into several packets", pkts[0])
    start = _start_psn(pkts[0])
    for i, p in enumerate(pkts):
        check(bool(p.flags & RF.SYN), f"SYN on packet {i + 1} (no ACK yet)", p)
        check(p.pds.spdcid == pkts[0].pds.spdcid, "every packet of the message on one PDC", p)
        check(p.pds.psn_offset == (p.pds.psn - start) & 0xFFF, f"psn_offset = PSN − Start PSN {start:#x}", p)
    # CACK over the last packet acknowledges every one of them: implicit success (§2.8, §6.9)
    iut.ack(pkts[-1])
    iut.expect_ok(cid, "the WRITE acknowledged by one CACK over all its packets")


@case("INI-005", A, "a multi-packet message: one message ID, SOM first, EOM last, payload_length / message_offset",
      "behaviour.md §6.1", rules=("b6.1-1", "b6.1-2", "b6.1-3", "b6.5-1"))  # fmt: skip
def ini_segmentation(s: Session) -> None:
    iut = Iut(s)
    data = bytes((i * 7) & 0xFF for i in range(MULTI))
    cid = iut.start("write", key=KEY, offset=64, data=data.hex())
    pkts = iut.message("the WRITE")
    h0 = pkts[0].ses
    check(h0.opcode == OP.WRITE and h0.match_bits == KEY and h0.buffer_offset == 64,
          f"WRITE with the memory key {KEY:#x} in match_bits and offset 64 in buffer_offset", pkts[0])  # fmt: skip
    check(h0.request_length == len(data), f"request_length {len(data)} (the whole message)", pkts[0])
    got = bytearray()
    for i, p in enumerate(pkts):
        h = p.ses
        check(h.message_id == h0.message_id, f"message ID {h0.message_id:#x} on every packet", p)
        check(bool(h.flags & F.SOM) == (i == 0), "SOM on the first packet only", p)
        check(bool(h.flags & F.EOM) == (i == len(pkts) - 1), "EOM on the last packet only", p)
        if i:
            check(h.message_offset == len(got), f"message_offset {len(got)}", p)
            check(h.payload_length == len(p.data), "payload_length = the packet's payload", p)
        got += p.data
    check(bytes(got) == data, "the packets carry the message's bytes in order", pkts[-1])
    iut.ack(pkts[-1])
    iut.expect_ok(cid, "the WRITE")


@case("INI-006", A, "two messages at once: distinct message IDs, never interleaved on one PDC",
      "behaviour.md §1.4", rules=("b1.4-3", "b6.1-1"))  # fmt: skip
def ini_no_interleave(s: Session) -> None:
    iut = Iut(s)
    cids = [iut.start("write", key=KEY, offset=0, data=(bytes([n]) * MULTI).hex()) for n in (1, 2)]
    seen: list[Reply] = []
    sent: set[tuple[int, int]] = set()  # (SPDCID, PSN) of every packet taken: a repeat is a resend
    eoms = 0
    while eoms < 2:
        # The ACKs wait until both messages were seen, so on a slow tester the RTO may resend: a
        # resend is not a new packet whether or not it carries RETX (that flag is INI-007's).
        r = iut.request(f"packets of two concurrent WRITEs ({len(seen)} so far)",
                        lambda r: r.ses is not None and not r.flags & RF.RETX
                        and (r.pds.spdcid, r.pds.psn) not in sent)  # fmt: skip
        sent.add((r.pds.spdcid, r.pds.psn))
        if iut.secure and not seen and r.flags & RF.SYN:  # a secure first flight may wait for it (Iut.message)
            iut.ack(r, ses=False)
        seen.append(r)
        eoms += bool(r.ses.flags & F.EOM)
    ids = {r.ses.message_id for r in seen if r.ses.flags & F.SOM}
    check(len(ids) == 2, "two different message IDs for two outstanding messages", seen[-1])
    for pdc in {r.pds.spdcid for r in seen}:
        on = sorted((r for r in seen if r.pds.spdcid == pdc), key=lambda r: P.psn_diff(r.pds.psn, seen[0].pds.psn))
        starts = [i for i, r in enumerate(on) if r.ses.flags & F.SOM]
        for a, b in zip(starts, starts[1:], strict=False):
            check(all(r.ses.message_id == on[a].ses.message_id for r in on[a:b]) and on[b - 1].ses.flags & F.EOM,
                  "a message's packets all precede the next message's on the same PDC", on[b])  # fmt: skip
        iut.ack(on[-1])
    for c in cids:
        iut.expect_ok(c, "each WRITE")


# -- retransmission -------------------------------------------------------------------------------


@case("INI-007", A, "a request whose ACK is withheld is retransmitted on RTO: same PSN and payload, RETX and AR",
      "behaviour.md §2.9", rules=("b2.9-1",))  # fmt: skip
def ini_rto_retx(s: Session) -> None:
    iut = Iut(s)
    cid, r = iut.sent(b"INI-007 withheld")
    r2 = iut.request("its retransmission after the RTO", _same(r))
    check(bool(r2.flags & RF.RETX) and bool(r2.flags & RF.AR), "RETX and AR set on the retransmission", r2)
    check(r2.data == r.data and r2.ses.message_id == r.ses.message_id, "the same SES header and payload", r2)
    check(bool(r2.flags & RF.SYN), "still SYN: no ACK has named the target's PDCID yet", r2)
    iut.ack(r2)
    iut.expect_ok(cid, "the SEND")


@case("INI-008", A, "a retransmission after establishment has SYN clear and the target's PDCID",
      "behaviour.md §2.2", rules=("b2.2-2", "b2.9-1"))  # fmt: skip
def ini_retx_established(s: Session) -> None:
    iut = Iut(s)
    r1 = _established(iut)
    cid = iut.send(b"INI-008 withheld")
    r = iut.request("the second SEND's request", lambda r: r.pds.psn != r1.pds.psn)
    iut.same_pdc(r1, r)
    r2 = iut.request("its retransmission after the RTO", _same(r))
    check(not r2.flags & RF.SYN and r2.pds.dpdcid == iut.me(r1), "SYN clear and dpdcid set on the retransmission", r2)
    check(bool(r2.flags & RF.RETX), "RETX set on the retransmission", r2)
    iut.ack(r2)
    iut.expect_ok(cid, "the SEND")


@case("INI-010", A, "retry exhaustion: a request never acknowledged fails the operation (PDC closed in error)",
      "behaviour.md §2.9", rules=("b2.9-3", "b2.2-4", "b2.12-4"))  # fmt: skip
def ini_retry_exhaustion(s: Session) -> None:
    iut = Iut(s)
    cid, r = iut.sent(b"INI-010 never acknowledged")
    copies = [0]

    def count(x: Reply) -> None:
        copies[0] += x.ptype != P.PdsType.CONTROL and x.pds.psn == r.pds.psn and x.pds.spdcid == r.pds.spdcid

    ans = iut.serve(cid, RETRY_BUDGET_S, count)
    check(ans is not None, f"the operation completes (fails) once the retries are spent, within {RETRY_BUDGET_S:g} s",
          f"{copies[0]} copies and no completion")  # fmt: skip
    assert ans is not None
    check(copies[0] >= 1, "at least one retransmission before giving up", f"{copies[0]} copies")
    check(ans.get("rc") != "OK", "an error completion (the target never acknowledged)", str(ans))


@case("INI-011", A, "a packet the target SACKed gets an ACK_REQ on RTO, not a retransmission",
      "behaviour.md §2.9", rules=("b2.9-2", "b2.8-4"))  # fmt: skip
def ini_sacked_ack_req(s: Session) -> None:
    iut = Iut(s)
    cid = iut.start("write", key=KEY, offset=0, data=bytes(MULTI).hex())
    pkts = iut.message("the WRITE")
    if iut.held_first:  # a secure first flight: its first packet is acknowledged already
        pkts = pkts[1:]
    p0 = pkts[0]
    later = pkts[1:]
    # ACK_CC: CACK just below the first PSN, SACK naming every later packet received
    cack = (p0.pds.psn - 1) & M32
    bitmap = sum(1 << (i + 1) for i in range(len(later)))
    iut.ack(p0, psn=cack, cack=cack, ses=False, cc={"mpr": 1, "sack_psn_offset": 1, "sack_bitmap": bitmap})
    sacked = {p.pds.psn for p in later}
    asked: set[int] = set()
    resent_first = False
    # a copy that left before the ACK_CC arrived is no verdict; once the sender asks for a PSN
    # with ACK_REQ it knows that PSN arrived, and a data copy of it after that is one
    while not (resent_first and asked == sacked):
        x = iut.packet(f"after the RTO: a copy of PSN {p0.pds.psn:#x} and an ACK_REQ for each SACKed PSN")
        if x.ptype == P.PdsType.CONTROL and x.pds.ctl_type == CT.ACK_REQ:
            asked.add(x.pds.psn)
        elif x.ptype != P.PdsType.CONTROL:
            check(x.pds.psn not in asked, "no retransmission of a PSN the sender already probed with ACK_REQ", x)
            resent_first |= x.pds.psn == p0.pds.psn
    iut.ack(pkts[-1])
    iut.expect_ok(cid, "the WRITE")


@case("INI-037", A, "back-off: the RTO retransmissions of a withheld request come at growing intervals",
      "behaviour.md §2.9", SHOULD, rules=("b2.9-4",))  # fmt: skip
def ini_backoff(s: Session) -> None:
    """The notes give ``RTO_Init_Time`` and ``Max_RTO_Retx_Cnt`` but no back-off (§2.9); TCP
    (RFC 6298 §5.5) and the reference double the RTO per timeout, and a sender that does not hammers
    a silent peer at its shortest RTO. Judged on a ratio of the intervals the tester measures
    between the copies of one withheld request, never on their length: the median of the
    intervals from the third on is at least 1.3 × the shorter of the first two (a doubling RTO
    gives 2 or more even when capped at twice its start, as ``uet-peer``'s 50 → 100 ms; a fixed RTO
    about 1; the median and the minimum keep one late copy on a loaded machine from deciding, and
    the margin below 2 absorbs a first interval stretched by load).
    SHOULD: the notes are silent. At least four retransmissions are needed (else skipped: a
    ``Max_RTO_Retx_Cnt`` below 4 leaves too few intervals), at most six are waited for."""
    iut = Iut(s)
    cid, r = iut.sent(b"INI-037 withheld")
    times = [r.at]
    last = r
    while len(times) < 7:
        gap = times[-1] - times[-2] if len(times) > 1 else 0.0
        try:  # the next copy comes after a longer interval than the last: wait for several of those
            last = iut.request(f"retransmission {len(times)} of the withheld request", _same(r),
                               timeout=max(s.timeout, 4 * gap))  # fmt: skip
        except CheckFailed:
            break
        times.append(last.at)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    if len(gaps) < 4:
        raise Skipped(f"{len(gaps)} retransmissions before the implementation stopped: too few to judge a back-off")
    early, late = min(gaps[:2]), statistics.median(gaps[2:])
    ms = ", ".join(f"{1000 * g:.1f}" for g in gaps)
    check(late >= 1.3 * early, "later retransmission intervals at least 1.3 × the first ones (back-off)",
          f"intervals {ms} ms: median {1000 * early:.1f} ms, then {1000 * late:.1f} ms")  # fmt: skip
    iut.ack(last)
    iut.expect_ok(cid, "the SEND")


# -- ACK processing -----------------------------------------------------------------------------


@case("INI-012", A, "an ACK whose CACK lies beyond the newest PSN sent is dropped: the request stays outstanding",
      "behaviour.md §2.8", rules=("b2.8-1",))  # fmt: skip
def ini_bogus_cack(s: Session) -> None:
    iut = Iut(s)
    cid, r = iut.sent(b"INI-012")
    far = (r.pds.psn + 1000) & M32
    iut.ack(r, psn=far, cack=far)
    r2 = iut.request("the retransmission (the bogus ACK acknowledged nothing)", _same(r))
    iut.not_completed(cid, "no completion from an ACK whose CACK is beyond every PSN sent")
    iut.ack(r2)
    iut.expect_ok(cid, "the SEND")


@case("INI-013", A, "on an established PDC an ACK from another SPDCID is dropped: the request stays outstanding",
      "behaviour.md §2.8", rules=("b2.8-2",))  # fmt: skip
def ini_wrong_spdcid(s: Session) -> None:
    iut = Iut(s)
    r1 = _established(iut)
    cid = iut.send(b"INI-013")
    r = iut.request("the second SEND's request", lambda r: r.pds.psn != r1.pds.psn)
    iut.same_pdc(r1, r)
    iut.ack(r, spdcid=(iut.me(r1) ^ 0x5A5A) or 1)
    r2 = iut.request("the retransmission (the ACK from a wrong PDCID acknowledged nothing)", _same(r))
    iut.not_completed(cid, "no completion from an ACK whose SPDCID is not the target's")
    iut.ack(r2)
    iut.expect_ok(cid, "the SEND")


@case("INI-014", A, "an ACK_CC advertising MPR 1: no PSN beyond CACK + 128 is sent before the next ACK",
      "behaviour.md §2.4", rules=("b2.4-1",))  # fmt: skip
def ini_mpr(s: Session) -> None:
    iut = Iut(s)
    # the MPR is advertised before the WRITE starts: a sender may use a larger window until it
    # hears one (Default_MPR), so only the packets sent after it are judged
    cc = {"mpr": 1, "sack_psn_offset": 0, "sack_bitmap": 0}
    data = bytes(1 << 20).hex()
    c0, r0 = iut.sent(b"INI-014 MPR")
    iut.ack(r0, cc=cc)
    iut.expect_ok(c0, "the SEND whose ACK_CC advertised MPR 1")
    cid = iut.start("write", key=KEY, offset=0, data=data)
    x = iut.request("the WRITE's first packet")
    cack = r0.pds.psn
    if x.pds.spdcid != r0.pds.spdcid:
        # the implementation closed the idle PDC meanwhile (§2.12): advertise MPR 1 on the new one
        # at once; its first flight, sent before, may use Default_MPR's 128 PSNs from its first
        iut.ack(x, ses=False, cc=cc)
        cack = x.pds.psn
    limit = (cack + 128) & M32
    while not x.flags & RF.RETX:  # everything the window allows, until the RTO resends the oldest
        check(not P.psn_after(x.pds.psn, limit), f"no PSN after CACK + MPR × 128 = {limit:#x}", x)
        x = iut.request("the WRITE's packets up to its window, then a retransmission")
    ans = iut.serve(cid, max(s.timeout, 10.0),
                    lambda x: iut.ack(x, ses=False, cc={"mpr": 1, "sack_psn_offset": 0, "sack_bitmap": 0})
                    if x.ptype != P.PdsType.CONTROL else None)  # fmt: skip
    check(ans is not None and ans.get("rc") == "OK", "the WRITE completes once everything is acknowledged", str(ans))


# -- clearing -----------------------------------------------------------------------------------


@case("INI-015", A, "clear_psn_offset names the newest PSN below which all is acknowledged (tx_base − 1)",
      "behaviour.md §2.5", rules=("b2.5-3",))  # fmt: skip
def ini_clear_offset(s: Session) -> None:
    iut = Iut(s)
    cid = iut.send(b"INI-015 a")
    r1 = iut.request("the first SEND's request")
    check(_clear_psn(r1) == (r1.pds.psn - 1) & M32, f"CLEAR_PSN {(r1.pds.psn - 1) & M32:#x} (nothing acknowledged)", r1)
    iut.ack(r1)
    iut.expect_ok(cid, "the first SEND")
    cid = iut.send(b"INI-015 b")
    r2 = iut.request("the second SEND's request", lambda r: r.pds.psn != r1.pds.psn)
    iut.same_pdc(r1, r2)
    check(_clear_psn(r2) == r1.pds.psn, f"CLEAR_PSN {r1.pds.psn:#x} (the first request acknowledged)", r2)
    iut.ack(r2)
    iut.expect_ok(cid, "the second SEND")


@case("INI-016", A, "an ACK with REQ_CLEAR and nothing else to send draws a CLEAR naming the CLEAR PSN, no new PSN",
      "behaviour.md §2.7", rules=("b2.7-1", "b2.7-2"))  # fmt: skip
def ini_req_clear(s: Session) -> None:
    iut = Iut(s)
    cid, r = iut.sent(b"INI-016")
    iut.ack(r, flags=P.AckFlag.REQ_CLEAR)
    iut.expect_ok(cid, "the SEND")
    c = iut.control(CT.CLEAR, "a CLEAR control packet")
    check(c.pds.payload == r.pds.psn, f"CLEAR payload = CLEAR PSN {r.pds.psn:#x}", c)
    cid = iut.send(b"INI-016 next")
    r2 = iut.request("the next SEND's request", lambda x: x.pds.psn != r.pds.psn)
    iut.same_pdc(r, r2)
    check(r2.pds.psn == (r.pds.psn + 1) & M32, "the CLEAR consumed no PSN", r2)
    iut.ack(r2)
    iut.expect_ok(cid, "the next SEND")


@case("INI-017", A, "a CLEAR_REQ from the target is answered with a CLEAR", "behaviour.md §2.11",
      rules=("b2.11-1",))  # fmt: skip
def ini_clear_req(s: Session) -> None:
    iut = Iut(s)
    r = _established(iut)
    iut.send_control(r, CT.REQ_CLEAR, payload=r.pds.psn)
    c = iut.control(CT.CLEAR, "a CLEAR answering the CLEAR_REQ")
    check(not P.psn_after(r.pds.psn, c.pds.payload), f"CLEAR PSN at or after {r.pds.psn:#x}", c)


# -- NACKs --------------------------------------------------------------------------------------

#: retransmit class (behaviour.md §2.10 reference grouping); NO_*_AVAIL answer with SPDCID 0
RETRANSMIT = [NC.TRIMMED, NC.TRIMMED_LASTHOP, NC.NO_PDC_AVAIL, NC.NO_CCC_AVAIL, NC.NO_BITMAP, NC.NO_PKT_BUFFER,
              NC.NO_GTD_DEL_AVAIL, NC.NO_SES_MSG_AVAIL, NC.NO_RESOURCE, NC.PSN_OOR_WINDOW, NC.PKT_NOT_RCVD,
              NC.ACK_WITH_DATA, NC.RCVR_INFER_LOSS, NC.EXP_NACK_NORMAL, NC.EXP_NACK_ERR]  # fmt: skip
#: PDC-fatal class
CLOSE = [NC.INV_DPDCID, NC.PDC_HDR_MISMATCH, NC.CLOSING, NC.CLOSING_IN_ERR, NC.GTD_DEL_RESP_UNAVAIL, NC.INVALID_SYN,
         NC.PDC_MODE_MISMATCH, NC.UNEXP_EVENT, NC.EXP_NACK_FATAL]  # fmt: skip
_TRIMS = (NC.TRIMMED, NC.TRIMMED_LASTHOP)


def _nack_retransmit(code: int) -> Callable[[Session], None]:
    def fn(s: Session) -> None:
        iut = Iut(s)
        cid = iut.send(b"NACKed " + bytes([code]))
        r = iut.request("the SEND's request")
        iut.nack(r, code, payload=0)
        r2 = iut.request(f"the request resent after NACK {NC(code).name}", _same(r))
        check(r2.data == r.data, "the same payload", r2)
        iut.ack(r2)
        iut.expect_ok(cid, f"the SEND (NACK {NC(code).name} is not a failure)")

    return fn


for _i, _code in enumerate(RETRANSMIT):
    _rules = ("b2.10-2", "b3.4-1") if _code in _TRIMS else ("b2.10-2",)
    case(f"INI-{100 + _i:03d}", A, f"NACK {_code.name} ({_code:#04x}): the request is resent, the operation succeeds",
         "behaviour.md §2.10", rules=_rules)(_nack_retransmit(_code))  # fmt: skip


def _nack_close(code: int) -> Callable[[Session], None]:
    def fn(s: Session) -> None:
        iut = Iut(s)
        cid = iut.send(b"NACKed " + bytes([code]))
        r = iut.request("the SEND's request")
        iut.nack(r, code)
        resent: list[Reply] = []
        new_pdc = [False]

        def watch(x: Reply) -> None:
            if x.ptype == P.PdsType.CONTROL:
                if x.pds.ctl_type in (CT.CLOSE, CT.ACK_REQ):
                    iut.ack(x, ses=False)
            elif x.pds.spdcid == r.pds.spdcid:
                resent.append(x)
            else:  # retried on a new PDC (§2.10): a healthy target answers it
                new_pdc[0] = True
                iut.ack(x)

        ans = iut.serve(cid, max(s.timeout, 3.0), watch)
        check(not resent, f"no resend on the PDC that NACK {NC(code).name} closed", resent[0] if resent else None)
        check(ans is not None, "the operation completes: it fails, or succeeds on a new PDC", "no completion")
        assert ans is not None
        check(ans.get("rc") != "OK" or new_pdc[0], "an error completion unless the message went on a new PDC", str(ans))

    return fn


for _i, _code in enumerate(CLOSE):
    case(f"INI-{130 + _i:03d}", A, f"NACK {_code.name} ({_code:#04x}) is PDC-fatal: no resend on that PDC",
         "behaviour.md §2.10", rules=("b2.10-3", "b2.2-4", "b2.12-4"))(_nack_close(_code))  # fmt: skip


@case("INI-018", A, "NACK RCVD_SES_PROCG is not an error: 40 of them, then the ACK, and the operation succeeds",
      "behaviour.md §2.10", rules=("b2.10-4",))  # fmt: skip
def ini_rcvd_ses_procg(s: Session) -> None:
    iut = Iut(s)
    cid, r = iut.sent(b"INI-018")
    for _ in range(40):  # more than any Max_NACK_Retx_Cnt (0-31): acting on them would fail the packet
        iut.nack(r, NC.RCVD_SES_PROCG)
    iut.ack(r)
    iut.expect_ok(cid, "the SEND")


@case("INI-019", A, "NACK NEW_START_PSN: the request is re-stamped from the new Start PSN, still SYN",
      "behaviour.md §2.2", rules=("b2.2-3",))  # fmt: skip
def ini_new_start_psn(s: Session) -> None:
    iut = Iut(s)
    cid, r = iut.sent(b"INI-019")
    new = (_start_psn(r) + 0x10000) & M32
    iut.nack(r, NC.NEW_START_PSN, payload=new)
    want = (new + r.pds.psn_offset) & M32
    r2 = iut.request(
        f"the request re-sent as PSN {want:#x}", lambda x: x.pds.spdcid == r.pds.spdcid and x.pds.psn == want
    )
    check(bool(r2.flags & RF.SYN) and r2.pds.psn_offset == r.pds.psn_offset, "still SYN, same psn_offset", r2)
    check(r2.data == r.data, "the same payload", r2)
    iut.ack(r2)
    iut.expect_ok(cid, "the SEND")


@case("INI-020", A, "a NACK naming a PSN outside the outstanding range is ignored", "behaviour.md §2.10",
      rules=("b2.10-1",))  # fmt: skip
def ini_nack_out_of_range(s: Session) -> None:
    iut = Iut(s)
    cid, r = iut.sent(b"INI-020")
    iut.nack(r, NC.INV_DPDCID, psn=(r.pds.psn + 1000) & M32)  # a PDC-fatal code, were it taken
    iut.ack(r)
    iut.expect_ok(cid, "the SEND (the stray NACK changed nothing)")


@case("INI-021", A, "NACK-driven resends have a limit: a request NACKed TRIMMED each time fails",
      "behaviour.md §2.10", rules=("b2.10-5",))  # fmt: skip
def ini_nack_limit(s: Session) -> None:
    """Every copy of the request is NACKed at once, so no RTO ever expires: only a limit on
    NACK-driven resends can end it. ``Max_NACK_Retx_Cnt`` is at most 30 when finite (0–31, 31 =
    infinite, behaviour.md §2.9); the tester NACKs up to 64 copies, then lets the RTO run, and the
    operation must have failed by then (a sender without the limit fails only by its RTO retries)."""
    iut = Iut(s)
    cid, r = iut.sent(b"INI-021")
    nacks = [1]

    def trim(x: Reply) -> None:
        if x.ptype != P.PdsType.CONTROL and x.pds.psn == r.pds.psn and x.pds.spdcid == r.pds.spdcid and nacks[0] < 64:
            iut.nack(x, NC.TRIMMED, flags=P.NackFlag.RETX if x.flags & RF.RETX else 0)
            nacks[0] += 1

    iut.nack(r, NC.TRIMMED)
    ans = iut.serve(cid, RETRY_BUDGET_S, trim)
    check(ans is not None and ans.get("rc") != "OK", "the operation fails once the NACK retries are spent",
          f"{nacks[0]} NACKs; completion {ans}")  # fmt: skip
    check(nacks[0] <= 32, "it fails within 31 NACK-driven resends (a finite Max_NACK_Retx_Cnt)",
          f"{nacks[0]} NACKs before the failure")  # fmt: skip


@case("INI-022", A, "ROD: NACK ROD_OOO makes the sender go back to the oldest unacknowledged PSN",
      "behaviour.md §2.13", rules=("b2.10-6", "b2.1-1"))  # fmt: skip
def ini_rod_go_back(s: Session) -> None:
    iut = Iut(s, mode="rod")
    cid = iut.start("write", key=KEY, offset=0, data=bytes(MULTI).hex())
    pkts = iut.message("the ROD WRITE")
    check(all(p.ptype in (P.PdsType.ROD_REQ, P.PdsType.ROD_CC_REQ) for p in pkts), "ROD request types", pkts[0])
    iut.ack(pkts[0], ses=False)
    iut.nack(pkts[-1], NC.ROD_OOO, payload=pkts[1].pds.psn)
    iut.request(f"PSN {pkts[1].pds.psn:#x} resent (go-back-N from the oldest unacknowledged)", _same(pkts[1]))
    iut.ack(pkts[-1])
    iut.expect_ok(cid, "the ROD WRITE")


# -- READ and atomics ---------------------------------------------------------------------------


@case("INI-023", A, "a READ: key, offset and length in the request; the data of the response completes it",
      "behaviour.md §6.5", rules=("b6.5-1", "b6.5-2"))  # fmt: skip
def ini_read(s: Session) -> None:
    iut = Iut(s)
    cid = iut.start("read", key=KEY, offset=40, length=8)
    r = iut.request("the READ request")
    h = r.ses
    check(h.opcode == OP.READ and h.match_bits == KEY and h.buffer_offset == 40 and h.request_length == 8,
          f"READ of 8 bytes at offset 40 of key {KEY:#x}", r)  # fmt: skip
    iut.ack(r, data=b"READDATA", flags=P.AckFlag.REQ_CLEAR)
    ans = iut.expect_ok(cid, "the READ")
    check(ans.get("data") == b"READDATA".hex(), "the READ returns the response's data", str(ans))


@case("INI-024", A, "NACK TRIMMED_ACK (the ACK with the read data was trimmed): the READ request is resent",
      "behaviour.md §3.3", rules=("b2.10-7",))  # fmt: skip
def ini_trimmed_ack(s: Session) -> None:
    iut = Iut(s)
    cid = iut.start("read", key=KEY, offset=0, length=8)
    r = iut.request("the READ request")
    iut.nack(r, NC.TRIMMED_ACK)
    r2 = iut.request("the READ request resent", _same(r))
    iut.ack(r2, data=b"TRIMACK!", flags=P.AckFlag.REQ_CLEAR)
    ans = iut.expect_ok(cid, "the READ")
    check(ans.get("data") == b"TRIMACK!".hex(), "the data of the second answer", str(ans))


@case("INI-025", A, "a read response whose modified length is not the requested length fails the READ",
      "behaviour.md §6.5", rules=("b6.5-3",))  # fmt: skip
def ini_read_short(s: Session) -> None:
    iut = Iut(s)
    cid = iut.start("read", key=KEY, offset=0, length=8)
    r = iut.request("the READ request")
    iut.ack(r, data=b"SHORT", modified=5, flags=P.AckFlag.REQ_CLEAR)
    ans = iut.completion(cid, "the READ")
    check(ans.get("rc") != "OK", "an error completion for a 5-byte answer to an 8-byte READ", str(ans))


@case("INI-026", A, "a fetching atomic: one packet with the atomic extension; the fetched value completes it",
      "behaviour.md §6.5", rules=("b6.5-4",))  # fmt: skip
def ini_atomic(s: Session) -> None:
    iut = Iut(s)
    cid = iut.start("atomic", key=KEY, offset=8, amo="SUM", type="UINT64", operand=5, fetch=True)
    r = iut.request("the atomic request")
    h = r.ses
    check(h.opcode == OP.FETCHING_ATOMIC and h.flags & (F.SOM | F.EOM) == F.SOM | F.EOM,
          "FETCHING_ATOMIC in a single packet (SOM and EOM)", r)  # fmt: skip
    ext = S.ATOMIC_EXT.decode(r.data)
    check(ext.atomic_opcode == S.AmoOp.SUM and ext.atomic_datatype == S.AmoType.UINT64, "SUM on UINT64", r)
    check(r.data[S.ATOMIC_EXT.size :][:8] == (5).to_bytes(8, "little"), "the operand 5 after the extension", r)
    iut.ack(r, data=(41).to_bytes(8, "little"), flags=P.AckFlag.REQ_CLEAR)
    ans = iut.expect_ok(cid, "the atomic")
    check(ans.get("value") == 41, "the fetched value 41", str(ans))


@case("INI-027", A, "an error response fails the operation with that return code", "behaviour.md §6.9",
      rules=("b6.9-1",))  # fmt: skip
def ini_error_rc(s: Session) -> None:
    iut = Iut(s)
    cid = iut.start("write", key=KEY, offset=0, data=b"refused".hex())
    r = iut.request("the WRITE request")
    iut.ack(r, rc=RC.PERM_VIOLATION, flags=P.AckFlag.REQ_CLEAR)
    ans = iut.completion(cid, "the WRITE")
    check(ans.get("rc") == "PERM_VIOLATION", "the completion carries PERM_VIOLATION", str(ans))


# -- closing ------------------------------------------------------------------------------------


@case("INI-028", A, "close: a CLOSE with the next PSN and AR; its ACK frees the PDC; the next message opens a new one",
      "behaviour.md §2.12", rules=("b2.12-1", "b2.2-6", "b1.4-4"))  # fmt: skip
def ini_close(s: Session) -> None:
    iut = Iut(s)
    r = _established(iut)
    cid = iut.start("close")
    c = iut.control(CT.CLOSE, "a CLOSE control packet")
    check(c.pds.psn == (r.pds.psn + 1) & M32, f"the CLOSE takes the next PSN {(r.pds.psn + 1) & M32:#x}", c)
    check(bool(c.flags & RF.AR) and c.pds.dpdcid == iut.me(r), "AR set, dpdcid = the target's PDCID", c)
    iut.ack(c, ses=False)
    iut.expect_ok(cid, "the close")
    cid = iut.send(b"INI-028 after close")
    r2 = iut.request("the next SEND's request", lambda x: x.pds.psn != c.pds.psn)
    check(bool(r2.flags & RF.SYN), "a new PDC (SYN) after the close", r2)
    iut.ack(r2)
    iut.expect_ok(cid, "the SEND on the new PDC")


@case("INI-029", A, "close waits for every ACK: no CLOSE while a request is unacknowledged", "behaviour.md §2.12",
      rules=("b2.2-5",))  # fmt: skip
def ini_close_waits(s: Session) -> None:
    """On an ESTABLISHED PDC (one still SYN_SENT may defer the close until its first ACK, which
    would hide an early CLOSE) a SEND is left unacknowledged, then the close is asked for: the
    request's retransmission must come before any CLOSE (§2.12 "MUST wait for all PDS ACKs")."""
    iut = Iut(s)
    _, cid, r = _one_outstanding(iut, b"INI-029")
    ccl = iut.start("close")
    x = iut.packet("the request's retransmission (or a premature CLOSE)",
                   lambda x: x.ptype == P.PdsType.CONTROL and x.pds.ctl_type == CT.CLOSE or _same(r)(x))  # fmt: skip
    check(x.ptype != P.PdsType.CONTROL, "no CLOSE before every outstanding PSN is acknowledged", x)
    iut.ack(x)
    iut.expect_ok(cid, "the SEND")
    _closed_pdc(iut, ccl)


@case("INI-030", A, "a CLOSE whose ACK is withheld is retransmitted (same PSN)", "behaviour.md §2.12",
      rules=("b2.12-2",))  # fmt: skip
def ini_close_retx(s: Session) -> None:
    iut = Iut(s)
    _established(iut)
    cid = iut.start("close")
    c = iut.control(CT.CLOSE, "a CLOSE control packet")
    c2 = iut.control(CT.CLOSE, "the CLOSE retransmitted after the RTO", pred=lambda x: x.pds.psn == c.pds.psn)
    iut.ack(c2, ses=False)
    iut.expect_ok(cid, "the close")


@case("INI-031", A, "a CLOSE_REQ from the target is acknowledged and the initiator closes", "behaviour.md §2.12",
      rules=("b2.12-3",))  # fmt: skip
def ini_close_req(s: Session) -> None:
    """The CLOSE_REQ comes while a SEND is unacknowledged, so the PDC is not idle: a close the
    initiator's own idle timer starts cannot stand in for the one the CLOSE_REQ asks for. Once it
    is acknowledged the PDC takes no new message (§2.2 QUIESCE, §1.4): the next SEND opens a new
    PDC; the old one closes once its request is acknowledged."""
    iut = Iut(s)
    r, cid1, r1 = _one_outstanding(iut, b"INI-031")
    psn = _start_psn(r)  # the return direction's first PSN (both directions start at Start PSN, §2.3.1)
    iut.send_control(r, CT.REQ_CLOSE, psn=psn, flags=RF.AR)
    me = iut.me(r)
    a = s.expect(lambda x: x.is_ack and x.pds.dpdcid == me and x.ack_psn == psn,
                 f"an ACK naming the CLOSE_REQ's PSN {psn:#x}")  # fmt: skip
    check(a.pds.spdcid == r.pds.spdcid, "from the initiator's PDC", a)
    _closing_pdc_takes_no_message(iut, r1, cid1, b"INI-031 after CLOSE_REQ")


def _closing_pdc_takes_no_message(iut: Iut, r1: Reply, cid1: int, data: bytes) -> None:
    """The PDC of ``r1`` (its request still unacknowledged) was asked to close: a new SEND goes
    on a new PDC (SYN), and once ``r1`` is acknowledged its PDC sends CLOSE."""
    cid = iut.send(data)
    r2 = iut.request("the next SEND's request", lambda x: x.data == data)
    check(r2.pds.spdcid != r1.pds.spdcid and bool(r2.flags & RF.SYN),
          "the next message on a new PDC (SYN): a PDC asked to close takes no new message (§1.4)", r2)  # fmt: skip
    iut.ack(r2)
    iut.ack(r1)
    iut.expect_ok(cid1, "the outstanding SEND")
    iut.expect_ok(cid, "the SEND on the new PDC")
    c = iut.control(CT.CLOSE, "the CLOSE of the PDC asked to close", pred=lambda x: x.pds.spdcid == r1.pds.spdcid)
    iut.ack(c, ses=False)


@case("INI-032", A, "an ACK with REQ_CLOSE makes the initiator close the PDC", "behaviour.md §2.8",
      rules=("b2.8-5",))  # fmt: skip
def ini_req_close(s: Session) -> None:
    """As INI-031: the ACK with REQ_CLOSE leaves a second SEND unacknowledged (the PDC is not
    idle), and the next message must open a new PDC."""
    iut = Iut(s)
    a, b = b"INI-032 first", b"INI-032 outstanding"
    cid, cid1 = iut.send(a), iut.send(b)
    r = iut.request("the first SEND's request", lambda x: x.data == a)
    if iut.secure:  # a secure PDC's first flight may be one packet (§2.3.2): establish it first
        iut.ack(r, ses=False)
    r1 = iut.request("the second SEND's request", lambda x: x.data == b)
    iut.ack(r, flags=P.AckFlag.REQ_CLOSE)
    iut.expect_ok(cid, "the SEND")
    _closing_pdc_takes_no_message(iut, r1, cid1, b"INI-032 after REQ_CLOSE")


@case("INI-033", A, "successive PDCs do not reuse the Start PSN", "behaviour.md §2.3.1", SHOULD,
      rules=("b2.3-1",))  # fmt: skip
def ini_start_psn_random(s: Session) -> None:
    iut = Iut(s)
    r1 = _established(iut)
    cid = iut.start("close")
    _closed_pdc(iut, cid)
    cid = iut.send(b"INI-033 again")
    r2 = iut.request("the first request of the next PDC", lambda x: bool(x.flags & RF.SYN))
    check(_start_psn(r2) != _start_psn(r1), f"a Start PSN other than {_start_psn(r1):#x}", r2)
    iut.ack(r2)
    iut.expect_ok(cid, "the SEND")


# -- RUDI and UUD -------------------------------------------------------------------------------


def _rudi(r: Reply) -> bool:
    return r.ptype == P.PdsType.RUDI_REQ


@case("INI-034", A, "RUDI: an unanswered request is resent with RETX and the same packet id; a response completes it",
      "behaviour.md §2.14", rules=("b2.14-2",))  # fmt: skip
def ini_rudi_retx(s: Session) -> None:
    iut = Iut(s, mode="rudi")
    cid = iut.start("write", key=0x4000, offset=0, data=b"RUDI".hex())
    r = iut.packet("the RUDI WRITE request", _rudi)
    r2 = iut.packet("its retransmission after the RTO", lambda x: _rudi(x) and x.pds.pkt_id == r.pds.pkt_id)
    check(bool(r2.flags & P.RudiFlag.RETX), "RETX set on the resent RUDI request", r2)
    iut.rudi_response(r2)
    iut.expect_ok(cid, "the RUDI WRITE")


@case("INI-035", A, "RUDI: concurrent requests have distinct packet ids; a response to no outstanding id is dropped",
      "behaviour.md §2.14", rules=("b2.14-1", "b2.14-3"))  # fmt: skip
def ini_rudi_ids(s: Session) -> None:
    iut = Iut(s, mode="rudi")
    cids = [iut.start("write", key=0x4000, offset=8 * n, data=bytes([n]).hex() * 8) for n in (1, 2)]
    a = iut.packet("the first RUDI request", _rudi)
    b = iut.packet("the second RUDI request", lambda x: _rudi(x) and x.pds.pkt_id != a.pds.pkt_id)
    stray = (max(a.pds.pkt_id, b.pds.pkt_id) + 0x1000) & M32
    iut.rudi_response(a, pkt_id=stray)  # answers nothing outstanding
    iut.packet(
        "a retransmission (the stray response completed nothing)", lambda x: _rudi(x) and x.flags & P.RudiFlag.RETX
    )
    for c in cids:
        iut.not_completed(c, "no completion from a response naming no outstanding packet id")
    iut.rudi_response(a)
    iut.rudi_response(b)
    for c in cids:
        iut.expect_ok(c, "each RUDI WRITE")


@case("INI-036", A, "UUD: a send is one packet with SOM and EOM and completes with no answer at all",
      "behaviour.md §2.15", rules=("b2.15-1",))  # fmt: skip
def ini_uud(s: Session) -> None:
    iut = Iut(s, mode="uud")
    cid = iut.send(b"UUD datagram")
    r = iut.packet("the UUD request", lambda x: x.ptype == P.PdsType.UUD_REQ)
    check(r.ses is not None and r.ses.flags & (F.SOM | F.EOM) == F.SOM | F.EOM, "SOM and EOM on the one packet", r)
    iut.expect_ok(cid, "the UUD send, with no response from the tester")
