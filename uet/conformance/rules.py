"""The rules of the spec notes that an endpoint's behaviour on the wire shows, and which cases check them.

Each rule is one normative statement of ``behaviour.md`` / ``wire-format.md`` (the project's copy
under docs/ keeps the same section numbers) that a black-box tester can observe: what a target
answers (side ``target``) or what an initiator sends and how its operations complete (side
``initiator``). Statements about internal state, timers' values, congestion-control arithmetic or
switches are not rules here: nothing on one endpoint's wire decides them. The id names the
document and section: ``b2.6-3`` is the third rule taken from behaviour.md §2.6, ``w5.4-1`` the
first from wire-format.md §5.4. Rules marked SHOULD come from a reference-only or inferred
statement of the notes.

A case names the rules it checks: the initiator-side cases in their ``case(..., rules=...)``
registration, the target-side cases in :data:`TARGET_CASE_RULES` below (kept here, next to the
rules, so the case modules stay as they are). ``uet-conformance --coverage`` counts, per section
and per side, the rules that at least one selected case checks (:func:`coverage`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from uet.conformance.case import Case

__all__ = ["RULES", "TARGET_CASE_RULES", "Rule", "case_rules", "coverage", "print_coverage"]


@dataclass(frozen=True)
class Rule:
    id: str
    side: str  # "target" or "initiator"
    level: str  # MUST or SHOULD
    text: str

    @property
    def section(self) -> str:
        """``behaviour.md §2.6`` for ``b2.6-3``."""
        doc = {"b": "behaviour.md", "w": "wire-format.md"}[self.id[0]]
        return f"{doc} §{self.id[1:].rsplit('-', 1)[0]}"


# id  side(T/I)  level  statement — one line each, in section order
_RULES = """
b0-1 T MUST PSNs are compared modulo 2^32 (serial arithmetic): a PDC spans the wrap
b1.2-1 I MUST requests carry the JobID, PIDonFEP and resource index addressed, REL set for relative addressing
b1.2-2 T MUST relative addressing: a JobID other than the endpoint's is refused with BAD_JOB_ID
b1.2-3 T MUST absolute addressing: the endpoint accepts any JobID
b1.2-4 T MUST an unknown (PIDonFEP, RI) is refused with UNDELIVERABLE
b1.3-1 I MUST an initiator writes its own non-zero PDCID in spdcid
b1.3-2 T MUST the target assigns a non-zero PDCID of its own, distinct for each PDC
b1.4-1 I MUST a new message to a destination with a usable PDC goes on that PDC
b1.4-2 I MUST all packets of one message use the same PDC
b1.4-3 I MUST messages do not interleave on a PDC (one active message at a time)
b1.4-4 I MUST a closing or closed PDC is not used for a new message: a new PDC is created
b1.4-5 T MUST a SYN is matched to its PDC by (remote FA, spdcid): a repeated SYN reaches the same PDC
b1.4-6 T MUST a packet to an unknown DPDCID draws NACK INV_DPDCID with spdcid 0
b1.4-7 T MUST a packet whose spdcid is not the PDC's peer draws NACK PDC_HDR_MISMATCH
b1.4-8 T MUST read return data travels in the PDC's return direction with its own PSNs
b2.1-1 I MUST every request of a PDC carries the PDC's mode (RUD or ROD request type)
b2.1-2 T MUST a request of the other mode on a PDC draws NACK PDC_MODE_MISMATCH
b2.2-1 I MUST while SYN_SENT every request carries SYN and psn_offset = PSN − Start_PSN
b2.2-2 I MUST after the first ACK every packet, retransmissions included, has SYN clear and the target's PDCID
b2.2-3 I MUST NACK NEW_START_PSN: the initiator re-stamps and resends from the Start PSN named, still SYN
b2.2-4 I MUST a PDC-fatal NACK or retry exhaustion closes the PDC in error
b2.2-5 I MUST CLOSE is sent only once every outstanding PSN is acknowledged
b2.2-6 I MUST the ACK of the CLOSE's PSN frees the PDC
b2.2-7 T MUST a SYN request on no PDC creates one and is acknowledged at once, naming the initiator's PDCID
b2.2-8 T MUST a SYN whose next header is not a SES request draws NACK PDC_HDR_MISMATCH
b2.2-9 T MUST a SYN when no PDC is free draws NACK NO_PDC_AVAIL with spdcid 0
b2.2-10 T MUST a PENDING secure PDC becomes ESTABLISHED by a SYN from the Start PSN assigned
b2.2-11 T MUST a PENDING secure PDC re-NACKs NEW_START_PSN a SYN from another Start PSN
b2.2-12 T MUST a SYN on an established PDC that implies another Start PSN draws NACK INVALID_SYN
b2.2-13 T MUST a CLOSE on an established PDC is acknowledged and the PDC freed
b2.2-14 T MUST a target closing a PDC sends CLOSE_REQ and, unanswered, closes in error (CLOSING_IN_ERR)
b2.3-1 I SHOULD the Start PSN is random: successive PDCs do not reuse it
b2.3-2 T MUST a non-secure target trusts Start_PSN = PSN − psn_offset and delivers 0-RTT data at once
b2.3-3 T MUST EXPECTED_0RTT_START: a SYN before Expected_PSN draws NEW_START_PSN naming it; one at or after is accepted
b2.3-4 T MUST RANDOM_1RTT_START: the target mints the Start PSN and only accepts that one
b2.3-5 T MUST EXPECTED_0RTT_START: the closing ACK carries EPSN and the new Expected_PSN
b2.3-6 T MUST a PENDING PDC not re-driven within New_PDC_Time is freed silently
b2.3-7 T MUST any SYN of a PDC gives its Start PSN: the first to arrive need not be the Start PSN
b2.3-8 T MUST a SYN outside the acceptable window draws NACK INVALID_SYN
b2.4-1 I MUST new packets stay within MP_RANGE and the peer's advertised MPR × 128 beyond its CACK
b2.4-2 T MUST a PSN in [rx_base, rx_base + MP_RANGE) is accepted
b2.4-3 T MUST a PSN beyond the window (either side) draws NACK PSN_OOR_WINDOW and is not delivered
b2.4-4 T MUST an ACK_CC advertises an MPR of at least 1
b2.5-1 I MUST PSNs are assigned consecutively, one per new packet
b2.5-2 I MUST AR is set on a message's EOM packet
b2.5-3 I MUST clear_psn_offset names tx_base − 1, the newest PSN below which everything is acknowledged
b2.6-1 T MUST a duplicate of an acknowledged PSN is acknowledged (default response), not NACKed
b2.6-2 T MUST a duplicate of an uncleared PSN gets its stored guaranteed response again
b2.6-3 T MUST a duplicate is never delivered to SES twice
b2.6-4 T MUST a request with RETX is acknowledged at once
b2.6-5 T MUST an out-of-window request is not delivered and does not break the PDC
b2.6-6 T MUST a request newer than a CLOSE draws NACK CLOSING
b2.6-7 T MUST a SES resource shortage draws NACK NO_SES_MSG_AVAIL and the PSN stays unreceived
b2.7-1 I MUST on an ACK with REQ_CLEAR and nothing to send, the initiator sends a CLEAR naming tx_base − 1
b2.7-2 I MUST a CLEAR control packet consumes no PSN
b2.7-3 T MUST CACK stops before a guaranteed response that is not cleared
b2.7-4 T MUST a non-guaranteed response needs no clear
b2.7-5 T MUST an ACK carrying a guaranteed response sets REQ_CLEAR
b2.7-6 T MUST a CLEAR control packet releases the guaranteed response and CACK moves on
b2.7-7 T MUST clear_psn_offset of a later request releases it too
b2.7-8 T SHOULD a target holding an uncleared response asks with CLEAR_REQ
b2.7-9 T MUST CACK never passes a hole, whatever CLEAR PSN arrives
b2.7-10 T MUST CACK is the newest PSN up to which every PSN was received
b2.7-11 T MUST a duplicate whose guaranteed response is lost and not cleared draws NACK GTD_RESP_UNAVAIL
b2.8-1 I MUST an ACK whose CACK is beyond the newest PSN sent is dropped
b2.8-2 I MUST outside SYN_SENT an ACK from another spdcid than the peer's is dropped
b2.8-3 I MUST CACK acknowledges every PSN up to it as implicit success
b2.8-4 I MUST a SACKed PSN is known received: it is not retransmitted
b2.8-5 I MUST an ACK with REQ_CLOSE makes the initiator close the PDC
b2.8-6 T MUST a request with AR is acknowledged at once
b2.8-7 T MUST a request without AR is still acknowledged (coalescing or timer)
b2.8-8 T SHOULD ACKs coalesce by bytes
b2.8-9 T MUST the ACK PSN (CACK + offset) names the request the ACK answers
b2.8-10 T MUST an ACK answering a retransmission echoes RETX
b2.8-11 T MUST the SACK bitmap names exactly the PSNs received beyond CACK
b2.8-12 T MUST a PROBE is answered by an ACK with P set echoing probe_opaque
b2.8-13 T MUST ACKs for an unknown PDC or an unsent PSN are ignored
b2.9-1 I MUST on RTO an unacknowledged packet is retransmitted: same PSN and payload, RETX and AR
b2.9-2 I MUST on RTO a packet known received gets an ACK_REQ for its PSN instead of a retransmission
b2.9-3 I MUST when the retries are spent the PDC closes in error and the operation fails
b2.9-4 I SHOULD successive RTO retransmissions of one packet back off: the interval between them grows
b2.10-1 I MUST a NACK naming a PSN outside [tx_base, next_psn − 1] is ignored
b2.10-2 I MUST a retransmit-class NACK (0x01–0x0B, 0x12, 0x14, 0x1A, 0xFD, 0xFE) resends the packet
b2.10-3 I MUST a PDC-fatal NACK (0x0E–0x11, 0x13, 0x15, 0x16, 0x19, 0xFF) ends resends on that PDC
b2.10-4 I MUST RCVD_SES_PROCG is not an error: the initiator waits for the ACK
b2.10-5 I MUST NACK-driven resends have a limit; when it is spent the PDC closes in error
b2.10-6 I MUST ROD_OOO makes the initiator go back to the oldest unacknowledged PSN
b2.10-7 I MUST TRIMMED_ACK makes the initiator resend the read request
b2.10-8 T MUST a NACK names the refused PSN and the initiator's PDCID, with no SES header
b2.10-9 T SHOULD a NACK answering a retransmission echoes RETX
b2.10-10 T MUST NACKs for an unknown PDC are ignored
b2.11-1 I MUST a CLEAR_REQ is answered with a CLEAR
b2.11-2 T MUST ACK_REQ for a received PSN resends its ACK (with a stored response)
b2.11-3 T MUST ACK_REQ for an in-window PSN never received draws NACK PKT_NOT_RCVD
b2.11-4 T SHOULD ACK_REQ for a PSN outside the window is dropped
b2.11-5 T MUST ACK_REQ, PROBE and CLEAR consume no PSN
b2.11-6 T MUST a PROBE's ACK reports the current CACK
b2.11-7 T MUST a control packet for an unknown PDC draws NACK INV_DPDCID with spdcid 0
b2.11-8 T MUST a control packet from another spdcid draws NACK PDC_HDR_MISMATCH
b2.11-9 T MUST an unsupported control type or one for the wrong role draws NACK UNEXP_EVENT
b2.11-10 T SHOULD a NOOP draws no reply
b2.11-11 T MUST ACK_REQ for a PSN received but not yet answered draws NACK RCVD_SES_PROCG
b2.11-12 T MUST ACK_REQ for a READ whose ACK held data, uncleared: the data again or NACK ACK_WITH_DATA
b2.12-1 I MUST CLOSE takes a new PSN and sets AR
b2.12-2 I MUST an unacknowledged CLOSE is retransmitted
b2.12-3 I MUST a CLOSE_REQ is acknowledged and the initiator closes the PDC
b2.12-4 I MUST closing in error fails every outstanding operation of the PDC
b2.12-5 T MUST a CLOSE is acknowledged by an ACK naming its PSN
b2.12-6 T MUST a retransmitted CLOSE is acknowledged again
b2.12-7 T MUST a CLOSE implicitly clears every PSN up to the highest received
b2.12-8 T MUST a CLOSE while return-direction PSNs are outstanding draws NACK CLOSING_IN_ERR
b2.12-9 T MUST a CLOSE outside the window is refused
b2.13-1 T MUST ROD delivers strictly in PSN order
b2.13-2 T MUST ROD: an out-of-order request draws NACK ROD_OOO or is held, and the in-order PSN is accepted
b2.13-3 T MUST ROD: ACKs never acknowledge past a hole
b2.14-1 I MUST RUDI: each request carries a packet id unique among the outstanding ones
b2.14-2 I MUST RUDI: on RTO a request is resent with RETX and the same packet id
b2.14-3 I MUST RUDI: a response matching no outstanding id is dropped
b2.14-4 T MUST RUDI: every request, duplicates included, is answered by exactly one response echoing its id
b2.14-5 T MUST RUDI: a READ returns its data inline in the response
b2.14-6 T MUST RUDI: a request to a region that is not idempotent-safe is refused with OP_VIOLATION
b2.14-7 T SHOULD RUDI: an error NACK has NT set and PDCIDs 0
b2.14-8 T MUST RUDI: an unsolicited RUDI response is dropped
b2.14-9 T MUST RUDI: a WRITE lands
b2.15-1 I MUST UUD: one packet with SOM and EOM, never retransmitted; the send completes on transmission
b2.15-2 T MUST UUD: no ACK and no response, even for an error
b2.15-3 T MUST UUD: a fragment (not SOM and EOM) is dropped
b2.15-4 T MUST UUD: no PDC is opened
b2.16-1 T MUST with the CRC trailer a packet whose CRC is wrong or missing is dropped silently
b2.16-2 T MUST with the CRC trailer every packet sent carries a valid one
b3.3-1 T MUST a trimmed request draws NACK TRIMMED (or TRIMMED_LASTHOP) and is not delivered
b3.3-2 T MUST the trim NACK names the packet's PSN, echoes its retx and carries its ECN-CE mark in m
b3.4-1 I MUST a trimmed packet (NACK TRIMMED / TRIMMED_LASTHOP) is resent
b4.2-1 T MUST ACK_CC rcvd_bytes counts the nominal bytes of new data packets in 256-byte units
b4.2-2 T SHOULD ACK_CC reports the out-of-order count
b4.7-1 I MUST UET sources send ECT
b4.7-2 T MUST the ACK echoes a request's ECN-CE as M (and only then)
b5.6-1 I MUST every frame sent, retransmissions included, takes a new TSC
b5.6-2 T SHOULD a replayed sealed packet is dropped or taken as a duplicate, never delivered twice
b5.8-1 T MUST a sealed packet that fails authentication is dropped silently
b5.8-2 T MUST a packet for an unknown secure domain is dropped
b5.8-3 T MUST a packet whose epoch is too old is dropped
b5.8-4 T SHOULD an unsecured packet is dropped by a target that requires TSS
b5.8-5 T MUST a good sealed packet is accepted and answered sealed, also after drops
b6.1-1 I MUST all packets of a message carry one message ID, unique among the outstanding messages
b6.1-2 I MUST SOM is set on a message's first packet, EOM on its last
b6.1-3 I MUST later packets carry payload_length and message_offset; request_length is the message's length
b6.1-4 T MUST a message ID may be reused once its message completed
b6.3-1 T MUST SES version other than 0 is refused with UNCOR
b6.3-2 T MUST once a packet of a message fails, its later packets get the same error
b6.3-3 T MUST later packets must keep the first packet's key and opcode (PERM_VIOLATION / OP_VIOLATION)
b6.3-4 T MUST a stale RI generation is refused with BAD_GENERATION carrying the current one
b6.3-5 T MUST the IE flag is answered INITIATOR_ERR
b6.3-6 T MUST the job is resolved before the process (BAD_JOB_ID first)
b6.4-1 T MUST an untagged send takes a posted receive
b6.4-2 T MUST a tagged send matches a posted receive by the exact tag, never an untagged one
b6.4-3 T MUST an unmatched message is buffered on the overflow list (guaranteed response) or refused NO_MATCH
b6.4-4 T MUST a matched message reports the expected list (0)
b6.4-5 T MUST a message longer than its receive is refused (TOO_LONG) unless the receive truncates
b6.5-1 I MUST RMA requests carry the memory key in match_bits and the offset in buffer_offset
b6.5-2 I MUST a READ completes with the data of the response with data
b6.5-3 I MUST a read response whose modified length differs from the length asked fails the READ
b6.5-4 I MUST an atomic is one packet (SOM and EOM) with the atomic extension and its operand
b6.5-5 T MUST an unknown memory key, or a region of another job, is refused with BAD_MKEY
b6.5-6 T MUST a WRITE needs the remote-write right (PERM_VIOLATION)
b6.5-7 T MUST a WRITE past the region is refused (UNSUPPORTED_SIZE / BAD_ADDR) and writes nothing
b6.5-8 T MUST a READ needs the remote-read right (PERM_VIOLATION)
b6.5-9 T MUST a READ past the region is refused with BAD_ADDR
b6.5-10 T SHOULD a read packet asking for more than request_length is refused with OP_VIOLATION
b6.5-11 T MUST a small READ returns its data in the ACK (RESPONSE_WITH_DATA, guaranteed)
b6.5-12 T MUST a READ longer than Max_ACK_Data_Size returns its data as return-direction requests
b6.5-13 T MUST a WRITE's data lands (with HD as well)
b6.5-14 T MUST an atomic that is not single-packet is refused with OP_VIOLATION
b6.5-15 T MUST an atomic needs the atomic right (PERM_VIOLATION, memory unchanged)
b6.5-16 T MUST an atomic is applied as its opcode and datatype say; a fetching one returns the prior value
b6.5-17 T MUST an unsupported atomic opcode, datatype or size is refused (AMO_UNSUPPORTED_*)
b6.5-18 T MUST a misaligned atomic is refused with AMO_UNALIGNED
b6.5-19 T MUST an atomic past the region is refused with BAD_ADDR
b6.5-20 T MUST inconsistent SYNC_WRITE / SYNC_ATOMIC counts are refused with OP_VIOLATION
b6.6-1 T MUST a rendezvous send: the target pulls the rest with a READ from the descriptor
b6.7-1 T MUST a deferred send is answered OK, list overflow, modified length 0 (guaranteed)
b6.7-2 T MUST a deferral is followed by DEFERRABLE_RTR, single-packet, on a PDC the target initiates
b6.7-3 T MUST the restarted message is delivered in full
b6.7-4 T MUST a restart naming an unknown token is refused with OP_VIOLATION
b6.8-1 T SHOULD DC does not change matching
b6.9-1 I MUST an error response fails the operation with that return code
b6.9-2 I MUST a DEFAULT_RESPONSE with RC_NULL or RC_OK completes the operation successfully
b6.9-3 T MUST success without data is DEFAULT_RESPONSE / RC_OK, not guaranteed
b6.9-4 T MUST an error is a RESPONSE with the code and modified length 0, guaranteed
b6.9-5 T MUST a response echoes the request's message ID and JobID
b6.9-6 T MUST an unknown opcode is refused with UNSUPPORTED_OP
b6.9-7 T MUST MSG_ERROR for a message never seen is answered INITIATOR_ERR
b6.9-8 T MUST an unknown PIDonFEP or resource index is refused with BAD_PID / BAD_INDEX
w4-1 T MUST reserved flag bits of an ACK are 0
w5.2-1 T MUST RUD_CC / ROD_CC requests (types 13, 14) are parsed past their CC state word
w5.3-1 T MUST an ACK uses an ACK type and next header 0, 4, 5 or 6
w5.4-1 T MUST ACK_CC cc_type is NSCC (0) or credit (1)
w5.6-1 T SHOULD the PSN_OOR_WINDOW NACK payload is 0
w8.3-1 T MUST small and medium request headers are accepted
w8.5-1 T MUST NO_OP, DATAGRAM_SEND and TSEND_ATOMIC are accepted
w11.2-1 T MUST return data carries RESPONSE_DATA naming the READ, its lengths and message offsets
w12.4-1 T MUST malformed or hostile datagrams are dropped and the endpoint keeps answering
"""

RULES: dict[str, Rule] = {}
for _line in _RULES.strip().splitlines():
    _id, _side, _level, _text = _line.split(" ", 3)
    RULES[_id] = Rule(_id, {"T": "target", "I": "initiator"}[_side], _level, _text)

# target-side case id (or ``FIRST..LAST`` range of one family) → the rules it checks
_TARGET = """
EST-001 b2.2-7
EST-002 b1.3-2
EST-003 b2.7-10
EST-004 b2.8-9 b2.2-7
EST-005 b2.3-2 b2.3-7
EST-006 b2.3-2
EST-007 b1.4-5
EST-008 b1.3-2
EST-009 b1.4-5 b2.6-4
EST-010 b1.4-5
EST-011 b2.3-7
EST-012 b0-1
EST-013 b2.3-2
EST-014 b2.2-7
EST-015 b2.2-8
EST-016 b2.3-8
EST-017 b1.4-5
EST-018 b2.3-2
EST-019 w5.2-1
EST-020 w5.2-1
EST-021 b2.2-12
WIN-001..005 b2.4-3
WIN-006 w5.6-1
WIN-007 b2.6-5
WIN-008 b2.4-2
WIN-009 b2.4-3
WIN-010 b2.6-1
WIN-011 b2.6-5 b2.4-3
WIN-012 b1.4-6
WIN-013 b2.4-3
WIN-014 b2.3-8
ACK-001 w5.3-1
ACK-002 w5.3-1
ACK-003 w4-1
ACK-004 b2.7-10 b2.8-11
ACK-005..010 b2.8-11
ACK-011 b2.7-10
ACK-012 b2.8-6
ACK-013 b2.8-7
ACK-014 b2.8-8
ACK-015 b2.8-10
ACK-016 b2.4-4
ACK-017 w5.4-1
ACK-018 b2.6-1
ACK-019 b2.6-3
ACK-020 b2.8-8
ACK-021 b4.7-2
ACK-022 b4.7-2
ACK-023 b4.2-1
ACK-024 b4.2-2
CLR-001 b2.7-5
CLR-002 b2.7-3
CLR-003 b2.7-6
CLR-004 b2.7-7
CLR-005 b2.6-2
CLR-006 b2.11-2
CLR-007 b2.7-8
CLR-008 b6.5-11 b2.7-5
CLR-009 b2.7-4
CLR-010 b2.7-9
CLR-011 b2.7-9
NAK-001 b1.4-6 b2.10-8
NAK-002 b1.4-7
NAK-003 b2.1-2
NAK-004 b2.1-2
NAK-005 b2.10-8
NAK-006 b2.10-8
NAK-007 b2.10-9
NAK-008 b1.4-6
NAK-009 b2.13-1
NAK-010 b2.13-2
NAK-011 b2.13-2
NAK-012 b2.11-3
NAK-013 b2.11-11
NAK-014 b2.11-12
NAK-015 b2.2-14
NAK-016 b3.3-1 b3.3-2
NAK-017 b3.3-1 b3.3-2
CTL-001 b2.11-2
CTL-002 b2.11-3
CTL-003 b2.11-4
CTL-004 b2.11-5
CTL-005 b2.8-12
CTL-006 b2.11-6
CTL-007 b2.11-5
CTL-008..010 b2.8-12
CTL-011 b2.12-5 b2.2-13
CTL-012 b2.12-6
CTL-013 b2.6-6
CTL-014 b2.6-6
CTL-015 b2.12-9
CTL-016 b2.11-9
CTL-017 b2.11-9
CTL-018 b2.11-10
CTL-019..024 b2.11-7
CTL-025 b2.11-8
ROD-001 b2.13-1
ROD-002 b2.13-3
ROD-003 b2.13-1
ROD-004 b2.6-1
ROD-005 b2.13-1
RUDI-001 b2.14-4
RUDI-002 b2.14-4
RUDI-003 b2.14-4
RUDI-004 b2.14-4
RUDI-005..007 b2.14-4
RUDI-008 b2.14-5
RUDI-009 b2.14-6
RUDI-010 b2.14-9
RUDI-011 b2.14-8
RUDI-012 b2.14-7
UUD-001 b2.15-2
UUD-002 b2.15-2
UUD-003 b2.15-3
UUD-004 b2.15-4
SES-001 w8.5-1 b6.9-3
SES-002 b6.4-1 b6.9-3
SES-003 b6.9-5
SES-004 b6.9-5
SES-005 b6.4-2
SES-006 b6.5-13
SES-007 b6.5-13
SES-008 b6.5-11
SES-009 b6.5-11
SES-010 w8.5-1 b6.4-1
SES-011 b6.9-7
SES-012 b6.7-4
SES-013..015 b6.9-6
SES-016 w8.5-1
SES-017 w8.3-1 b6.4-1
SES-018 w8.3-1
SES-019 b6.9-4
SES-020 b6.1-4
SES-021 b6.9-3 b2.7-4
RC-001 b1.2-2
RC-002 b6.9-8
RC-003 b6.9-8
RC-004 b1.2-4
RC-005 b6.3-4
RC-006 b6.3-1
RC-007 b6.3-5
RC-008 b6.5-5
RC-009 b6.5-5
RC-010 b1.2-3
RC-011 b6.3-4
RC-012 b6.5-5
RC-013 b6.9-4
RC-014 b6.5-6
RC-015 b6.5-8
RC-016 b6.5-15
RC-017 b6.5-8
RC-018 b6.5-6
RC-019 b6.4-5
RC-020 b6.4-5
RC-021 b6.5-14
RC-022 b6.3-2
RC-023 b6.3-3
RC-024 b6.5-15
RC-025 b6.3-6
MAT-001 b6.4-3
MAT-002 b6.4-2
MAT-003 b6.4-2
MAT-004 b6.4-4
MAT-005 b6.8-1 b6.4-3
MAT-006 b6.4-3 b2.7-5
RMA-001..004 b6.5-9
RMA-005 b6.5-13
RMA-006 b6.5-7
RMA-007 b6.5-7
RMA-008 b6.5-9
RMA-009 b6.5-7
RMA-010 b6.5-10
RMA-011 b6.5-7
RMA-012 b6.5-12
RMA-013 b6.3-3
READ-001..004 b6.5-12
READ-005 w11.2-1
READ-006 b1.4-8
READ-007 b6.5-12
READ-008 b6.5-9
DEF-001 b6.7-1
DEF-002 b6.7-2
DEF-003 b6.7-2
DEF-004 b6.7-3
DEF-005 b6.7-4
RDV-001..004 b6.6-1
AMO-001..040 b6.5-16
AMO-041 b6.5-18
AMO-042..045 b6.5-17
AMO-046 b6.5-14
AMO-047 b6.5-19
AMO-048..050 b6.5-16
TSS-001 b5.8-5
TSS-002..004 b5.8-1
TSS-005 b5.6-2
TSS-006 b5.8-2
TSS-007 b5.8-3
TSS-008 b5.8-4
TSS-009 b5.8-1
TSS-010 b5.8-5
TSS-011 b2.3-3 b2.3-4
TSS-012 b2.2-10
TSS-013 b2.3-5
TSS-014 b2.3-3
TSS-015 b2.2-11 b2.3-4
CRC-001 b2.16-1
CRC-002 b2.16-1
CRC-003 b2.16-2
ROB-001..025 w12.4-1
ROB-026 b2.10-10
ROB-027 b2.8-13
ROB-028 b2.8-13
ROB-029 w12.4-1
ROB-030 w12.4-1
"""


def _expand(text: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for line in text.strip().splitlines():
        ids, *rules = line.split()
        m = re.fullmatch(r"([A-Z]+)-(\d+)\.\.(\d+)", ids)
        if m:
            width = len(m.group(2))
            names = [f"{m.group(1)}-{n:0{width}d}" for n in range(int(m.group(2)), int(m.group(3)) + 1)]
        else:
            names = [ids]
        for n in names:
            out[n] = tuple(rules)
    return out


#: the rules each target-side case checks (module docstring)
TARGET_CASE_RULES: dict[str, tuple[str, ...]] = _expand(_TARGET)


def case_rules(c: Case) -> tuple[str, ...]:
    """The rules case ``c`` checks: its own ``rules``, else :data:`TARGET_CASE_RULES`'s entry."""
    return c.rules or TARGET_CASE_RULES.get(c.id, ())


def coverage(cases: Iterable[Case]) -> dict[str, Any]:
    """Rules checked by ``cases``: per section and per side, with the rules no case checks."""
    cases = list(cases)
    by_rule: dict[str, list[str]] = {r: [] for r in RULES}
    unknown: dict[str, list[str]] = {}
    for c in cases:
        for r in case_rules(c):
            (by_rule if r in RULES else unknown).setdefault(r, []).append(c.id)
    sections: dict[tuple[str, str], dict[str, Any]] = {}
    sides: dict[str, dict[str, Any]] = {}
    for rid, rule in RULES.items():
        sec = sections.setdefault((rule.section, rule.side), {"section": rule.section, "side": rule.side,
                                                              "rules": 0, "covered": 0, "uncovered": []})  # fmt: skip
        side = sides.setdefault(rule.side, {"rules": 0, "covered": 0, "uncovered": []})
        for d in (sec, side):
            d["rules"] += 1
            if by_rule[rid]:
                d["covered"] += 1
            else:
                d["uncovered"].append(rid)
    for d in sides.values():
        d["percent"] = round(100 * d["covered"] / d["rules"], 1) if d["rules"] else 0.0
    uncased = [c.id for c in cases if not case_rules(c)]
    return {
        "sides": sides,
        "sections": list(sections.values()),
        "cases": {rid: ids for rid, ids in by_rule.items() if ids},
        "unknown_rules": unknown,
        "cases_without_rules": uncased,
    }


def print_coverage(cov: dict[str, Any], out: TextIO) -> None:
    """The coverage report as a table: one line per section and side, then the totals."""
    for s in cov["sections"]:
        missing = ", ".join(s["uncovered"])
        out.write(f"{s['section']:<22} {s['side']:<9} {s['covered']:>3}/{s['rules']:<3}"
                  + (f"  not checked: {missing}" if missing else "") + "\n")  # fmt: skip
    for side in ("target", "initiator"):
        d = cov["sides"].get(side)
        if d:
            out.write(f"{side}-side rules: {d['covered']} of {d['rules']} checked by a case ({d['percent']} %)\n")
    if cov["cases_without_rules"]:
        out.write(f"cases naming no rule: {', '.join(cov['cases_without_rules'])}\n")
    if cov["unknown_rules"]:
        out.write(f"rule ids not in the catalogue: {', '.join(sorted(cov['unknown_rules']))}\n")
