"""ACK coalescing keeps the trigger's SES response (spec/behaviour.md §2.8, §6.9; issue 13 ACK-020).

A request whose SES response is not guaranteed (plain RESPONSE, list 0, RC_OK/RC_NULL) is ACKed
by the coalescing rules like a request without one; the ACK that names it (the coalesced ACK it
triggered, a timer flush, an ACK_REQ answer) carries its response. A request replaced as the
trigger by a newer one is acknowledged by CACK, which counts as success (§6.9). Guaranteed
responses are still ACKed at once. Exact packets into the target core.
"""

from __future__ import annotations

from pds_harness import A_ADDR, Pair, control, hdr, request

from uet.pds import PdsConfig
from uet.ses.packets import build_response
from uet.wire import pds as pds_wire
from uet.wire.ses import ReturnCode

START = 0x1000
IPDC = 7
CFG = PdsConfig(close_idle_ns=None, target_idle_ns=None, ack_timer_ns=50_000)
AR = int(pds_wire.ReqFlag.AR)
RETX = int(pds_wire.ReqFlag.RETX)


def _ok(psn: int) -> bytes:
    """A non-guaranteed SES response naming the request's PSN in its message id (§6.9)."""
    return build_response(int(ReturnCode.OK), message_id=psn & 0xFFFF, modified_length=4)


def _target(respond_every: bool = True, gtd_at: int | None = None) -> tuple[Pair, int]:
    """Pair whose B answers every delivery with ``_ok`` (or an error, guaranteed, at PSN
    ``gtd_at``); the PDC is established by a SYN at START. Returns (pair, B's PDCID)."""
    pair = Pair(CFG)

    def respond(d):
        if d.psn == gtd_at:
            return 4, build_response(int(ReturnCode.NO_MATCH), message_id=d.psn & 0xFFFF)
        return (4, _ok(d.psn)) if respond_every else None

    pair.b.respond = respond
    pair.inject(pair.b, request(START, IPDC, syn_offset=0, flags=AR), A_ADDR)
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(ack).cack_psn == START and ack[32:] == _ok(START)  # the SYN: ACKed at once
    [tp] = pair.b.core.pdcs.values()
    return pair, tp.lpdcid


def _req(psn: int, dpdcid: int, flags: int = 0) -> bytes:
    return request(psn, IPDC, dpdcid, flags=flags, cpo=-(psn - START + 1))


def test_non_guaranteed_responses_coalesce_and_the_ack_carries_the_triggers() -> None:
    pair, lp = _target()
    for i in range(1, 16):
        pair.inject(pair.b, _req(START + i, lp, AR if i == 15 else 0), A_ADDR)
    assert len(pair.b.deliveries) == 16
    acks = pair.take(pair.b)
    # 15 single-packet requests with responses: one ACK (the 15th asked with AR), not 15
    assert len(acks) == 1
    data = acks[0][0]
    h = hdr(data)
    assert h.type == pds_wire.PdsType.ACK_CC and h.cack_psn == START + 15 and h.ack_psn_offset == 0
    assert h.next_hdr == 4 and data[32:] == _ok(START + 15)  # the trigger's own response


def test_ack_gen_trigger_makes_an_ack_due_with_the_newest_response() -> None:
    pair, lp = _target()
    # ACK_Gen_Min_Pkt_Add 1024 per small packet: the 16th reaches ACK_Gen_Trigger 16384
    for i in range(1, 17):
        pair.inject(pair.b, _req(START + i, lp), A_ADDR)
        if i < 16:
            assert pair.b.core._out == []  # nothing leaves before the trigger
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START + 16 and data[32:] == _ok(START + 16)


def test_the_ack_timer_flush_carries_the_response() -> None:
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)
    assert pair.take(pair.b) == []
    t = pair.b.core.get_timer()
    assert t == pair.now + CFG.ack_timer_ns
    pair.now = t
    pair.b.core.handle_timer(t)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    h = hdr(data)
    assert h.cack_psn == START + 1 and h.ack_psn_offset == 0 and data[32:] == _ok(START + 1)
    # sent once: the next timer has nothing left to send
    assert pair.b.core.get_timer() is None


def test_an_ack_req_for_the_pending_trigger_brings_its_response_once() -> None:
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)
    pair.inject(pair.b, control(int(pds_wire.ControlType.ACK_REQ), START + 1, IPDC, lp), A_ADDR)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START + 1 and data[32:] == _ok(START + 1)
    # the pending coalesced ACK was that one: a second ACK_REQ gets a default (no SES header)
    pair.inject(pair.b, control(int(pds_wire.ControlType.ACK_REQ), START + 1, IPDC, lp), A_ADDR)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).next_hdr == 0 and len(data) == 32
    assert pair.b.core.get_timer() is None


def test_a_newer_trigger_replaces_the_older_response_which_cack_covers() -> None:
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)
    pair.inject(pair.b, _req(START + 2, lp, AR), A_ADDR)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    h = hdr(data)
    assert h.cack_psn == START + 2 and h.ack_psn_offset == 0 and data[32:] == _ok(START + 2)


def test_a_request_without_response_after_one_with_clears_it() -> None:
    """The newest trigger has no response: the ACK carries none (START + 1 is covered by CACK)."""
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)
    pair.b.respond = lambda d: None
    pair.inject(pair.b, _req(START + 2, lp, AR), A_ADDR)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START + 2 and hdr(data).next_hdr == 0 and len(data) == 32


def test_guaranteed_responses_and_retransmissions_are_still_acked_at_once() -> None:
    pair, lp = _target(gtd_at=START + 2)
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)
    pair.inject(pair.b, _req(START + 2, lp), A_ADDR)
    out = pair.b.core._out
    assert len(out) == 1  # the error response, at once (no datagrams_to_send needed)
    h = hdr(out[0][0])
    assert h.flags & pds_wire.AckFlag.REQ_CLEAR and h.cack_psn == START + 1 and h.ack_psn_offset == 1
    pair.take(pair.b)
    pair.inject(pair.b, _req(START + 3, lp, RETX), A_ADDR)
    assert len(pair.b.core._out) == 1 and pair.b.core._out[0][0][32:] == _ok(START + 3)


def test_the_general_path_behind_a_hole_coalesces_the_same_way() -> None:
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 2, lp), A_ADDR)  # START + 1 missing: general path
    pair.inject(pair.b, _req(START + 3, lp, AR), A_ADDR)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    h = hdr(data)
    assert h.cack_psn == START and pds_wire.psn_add(h.cack_psn, h.ack_psn_offset) == START + 3
    # SACK base CACK + 1 (the hole): bits 1 and 2 are START + 2 and START + 3
    assert h.sack_psn_offset == 1 and h.sack_bitmap == 0b110 and data[32:] == _ok(START + 3)


def test_the_request_filling_the_hole_below_an_ar_request_is_acked_at_once() -> None:
    """Sprayed packets overtake each other, so a message's AR'd EOM often arrives before one of
    its predecessors: the request that fills the hole (no AR of its own) moves CACK past the AR'd
    PSN and makes the ACK due at once, instead of after ``ack_timer_ns`` (issue 11: +100 µs on
    about half the flows of a sprayed permutation)."""
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 2, lp, AR), A_ADDR)  # AR'd, behind the hole at START + 1
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)  # fills the hole
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START + 2
    # later requests without AR coalesce again (the held AR is spent)
    pair.inject(pair.b, _req(START + 3, lp), A_ADDR)
    assert pair.take(pair.b) == []


def test_a_predicted_run_behind_a_hole_holding_an_ar_is_acked_when_the_hole_fills() -> None:
    """The same through the receive fast path (``receive_batch``): the AR'd PSN ends a predicted
    run held above CACK; the hole filler makes the ACK due."""
    pair, lp = _target()
    core = pair.b.core
    core.receive_batch([(_req(START + 2, lp), A_ADDR, 0)], pair.now)
    core.receive_batch([(_req(START + k, lp, AR if k == 4 else 0), A_ADDR, 0) for k in (3, 4)], pair.now)
    pair.take(pair.b)
    core.receive_batch([(_req(START + 1, lp), A_ADDR, 0)], pair.now)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START + 4


def test_an_ar_request_acked_at_once_behind_a_hole_still_acks_when_the_hole_fills() -> None:
    """An AR'd request that arrives CE-marked (or as a retransmission) behind a hole is ACKed at
    once, and that ACK cannot cover the hole; the request that fills it later must make the ACK due
    as well. Before the fix the immediate-ACK branch skipped ``ar_held``, so the last stragglers
    of a message waited for the initiator's RTO (issue 11: 26 spurious RTOs and +100 µs on the
    slowest flows of the 128-host sprayed RCCC permutation)."""
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 2, lp, AR), A_ADDR, ecn=3)  # AR'd and CE-marked, hole at + 1
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)  # fills the hole: ACK now, not at the timer
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START + 2
    pair.inject(pair.b, _req(START + 3, lp), A_ADDR)  # the held AR is spent: coalesced again
    assert pair.take(pair.b) == []


def test_a_retransmitted_ar_request_behind_a_hole_acks_when_the_hole_fills() -> None:
    """The same for a retransmission (RETX: ACKed at once) that lands behind a hole."""
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 2, lp, AR | RETX), A_ADDR)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START + 2


def test_an_older_ar_request_arriving_late_does_not_hide_the_newest_one() -> None:
    """Credit-gated senders (RCCC) set AR on many requests, and sprayed packets arrive in any
    order: an older AR'd PSN that lands after the newest one must not replace it as the PSN whose
    gap-fill makes the ACK due, or the final ACK of the message waits for the RTO (issue 11)."""
    pair, lp = _target()
    pair.inject(pair.b, _req(START + 4, lp, AR), A_ADDR)  # the EOM, holes at + 1 .. + 3
    pair.inject(pair.b, _req(START + 2, lp, AR), A_ADDR)  # an older AR'd request, late
    assert pair.take(pair.b)  # ACKed on arrival (SACK); the hole keeps CACK at START
    pair.inject(pair.b, _req(START + 1, lp), A_ADDR)  # CACK passes + 2, not + 4
    pair.take(pair.b)
    pair.inject(pair.b, _req(START + 3, lp), A_ADDR)  # the last hole below the EOM fills
    (data, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(data).cack_psn == START + 4
