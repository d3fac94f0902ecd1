"""ROD with target buffering (``PdsConfig(rod_buffer=True)``, behaviour.md §2.13; issue 15 #11).

Two bugs made it lose messages at 20 % loss:

- the target's CACK ran over PSNs held in the reorder buffer (received, not yet handed to SES):
  a buffered PSN that SES then refused was acknowledged and never delivered, and the delivered
  PSNs below the new CACK stayed in ``rcvd`` for good (stale entries that also turned the
  in-order fast path off);
- the initiator spent the RTO budget of SACKed packets waiting behind the gap on ACK_REQs (each
  answered ``RCVD_SES_PROCG``), and the back-off round's burst went to them instead of the
  missing head, which then starved until the PDC failed with "retry exhausted".
"""

from __future__ import annotations

from dataclasses import replace

from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, only_initiator, only_target, ses_small

from uet.experiments.impair_matrix import run_cell
from uet.pds import Delivery, Mode, PdsConfig, SesNack
from uet.wire import pds as pds_wire
from uet.wire.pds import NackCode

START = 0x2000
# exact packet sequences without the anti-amplification proof exchange (uet.pds.validation,
# tested in tests/test_pds_validation.py)
CFG = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None, rod_buffer=True, amp_factor=0)


def _flight(pair: Pair, n: int) -> list[bytes]:
    for i in range(n):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), bytes([i]), token=i, som=True, eom=True, now=0)
    return [d for d, _x, _y in pair.take(pair.a)]


def test_cack_never_covers_a_buffered_psn_that_ses_refuses() -> None:
    pair = Pair(CFG)
    out = _flight(pair, 4)
    pair.inject(pair.b, out[0], A_ADDR)
    pair.inject(pair.b, out[2], A_ADDR)  # buffered behind the gap at 1
    pair.inject(pair.b, out[3], A_ADDR)  # buffered
    pair.take(pair.b)

    def refuse_2(d: Delivery) -> None:
        if d.payload == b"\x02":
            raise SesNack("no room")
        return None

    pair.b.respond = refuse_2
    pair.inject(pair.b, out[1], A_ADDR)  # the gap fills: 1 delivered, 2 refused by SES
    assert [d.payload[0] for d in pair.b.deliveries] == [0, 1, 2]
    acks = [hdr(d) for d, _x, _y in pair.take(pair.b)]
    assert all(not (a.type == 10 and a.nack_code != NackCode.NO_SES_MSG_AVAIL) for a in acks)
    assert any(a.type == 10 and a.nack_psn == START + 2 for a in acks)
    tp = only_target(pair.b.core)
    # CACK stops before the refused PSN; nothing at or below it is still tracked in ``rcvd``
    assert tp.rx_base == START + 2
    assert all(a.cack_psn == START + 1 for a in acks if a.type != 10)
    assert tp.rcvd == {START + 3} and set(tp.rod_buf) == {START + 3}
    # the resend of 2 is accepted and drains the buffer in order
    pair.b.respond = None
    pair.inject(pair.b, out[2], A_ADDR)
    assert [d.payload[0] for d in pair.b.deliveries] == [0, 1, 2, 2, 3]
    assert tp.rx_base == START + 4 and not tp.rcvd and not tp.rod_buf


def test_delivered_psns_leave_rcvd_when_the_buffer_drains() -> None:
    pair = Pair(CFG)
    out = _flight(pair, 6)
    for i in (0, 2, 3, 4, 5, 1):
        pair.inject(pair.b, out[i], A_ADDR)
    tp = only_target(pair.b.core)
    assert [d.payload[0] for d in pair.b.deliveries] == list(range(6))
    assert tp.rx_base == START + 6 and not tp.rcvd and not tp.rod_buf


def test_sacked_packets_behind_the_gap_do_not_spend_retries_or_starve_the_head() -> None:
    """The head is lost again and again; the buffered packets behind it wait without ACK_REQs
    and without using their budget, and the head is resent at every RTO round."""
    cfg = replace(CFG, rto_ns=100_000, rto_max_ns=100_000)
    pair = Pair(cfg)
    out = _flight(pair, 12)
    for d in out[1:]:
        pair.inject(pair.b, d, A_ADDR)
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    ip = only_initiator(pair.a.core)
    assert all(ip.outstanding[START + i].dst_received for i in range(1, 12))
    assert [hdr(d).psn for d, _x, _y in pair.take(pair.a)] == [START]  # SACK fast retransmit: lost
    heads = rounds = 0
    while heads < 8:  # RTO rounds in which every copy of the head is lost
        rounds += 1
        assert rounds < 40
        t = pair.a.core.get_timer()
        assert t is not None
        pair.now = t
        pair.a.core.handle_timer(pair.now)
        sent = [hdr(d) for d, _x, _y in pair.take(pair.a)]
        assert all(h.type == 3 and h.psn == START for h in sent), sent  # the head; no ACK_REQ
        heads += len(sent)
    assert all(ip.outstanding[START + i].retries == 0 for i in range(1, 12))
    pair.inject(pair.b, out[0], A_ADDR)
    assert [d.payload[0] for d in pair.b.deliveries] == list(range(12))
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert sorted(e.token for e in pair.a.acked()) == list(range(12)) and heads == 8


def test_rod_buffer_is_intact_at_20_percent_loss() -> None:
    """The cells that failed (``uet-bench matrix`` harness, 5 % reorder, 1 % dup)."""
    for seed, n in ((2, 200), (5, 200)):
        r = run_cell(Mode.ROD, 0.2, seed, packets=n, config=PdsConfig(rod_buffer=True))
        assert r.intact and r.duplicates == 0 and r.in_order, r
    r = run_cell(Mode.ROD, 0.1, 6, packets=300, config=PdsConfig(rod_buffer=True))
    assert r.intact, r


def test_the_reorder_buffer_is_bounded_per_fep_and_released_on_close() -> None:
    """``rod_buffer_bytes``: beyond it an out-of-order request is discarded and NACKed ROD_OOO
    (the go-back-N answer), and closing the PDC gives its share back."""
    pair = Pair(replace(CFG, rod_buffer_bytes=50))
    out = _flight(pair, 5)
    size = len(out[2])
    assert 25 < size <= 50  # one request fits, two do not
    pair.inject(pair.b, out[0], A_ADDR)
    pair.take(pair.b)
    pair.inject(pair.b, out[2], A_ADDR)  # buffered
    pair.inject(pair.b, out[3], A_ADDR)  # over the bound: discarded, NACKed
    replies = [hdr(d) for d, _x, _y in pair.take(pair.b)]
    assert [h.nack_code for h in replies if h.type == 10] == [NackCode.ROD_OOO]
    assert pair.b.core._rod_buffered == size
    tp = only_target(pair.b.core)
    assert set(tp.rod_buf) == {START + 2}
    pair.b.core._free_tpdc(tp, pair.now)
    assert pair.b.core._rod_buffered == 0 and not tp.rod_buf


def test_the_sack_of_a_buffered_packet_far_behind_a_lost_head_reports_it() -> None:
    """Issue 29 item 6: an ACK for a buffered request named CACK and based its SACK bitmap at
    CACK + 1, so a request more than 64 PSNs beyond a lost head was never reported received;
    when the head's resend was lost too, the RTO resent every such request (ROD at 1 % loss:
    119 retransmissions for 24 lost packets, seed 6). The bitmap now ends at the buffered PSN."""
    pair = Pair(CFG)
    out = _flight(pair, 100)
    pair.inject(pair.b, out[0], A_ADDR)
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    for d in out[2:]:  # 1 is lost: 98 requests buffered behind it
        pair.inject(pair.b, d, A_ADDR)
    acks = pair.take(pair.b)
    last = hdr(acks[-1][0])
    assert len(acks) == 98 and last.cack_psn == START
    assert START + last.sack_psn_offset == START + 99 - 63 and last.sack_bitmap == (1 << 64) - 1
    for d, _x, _y in acks:
        pair.inject(pair.a, d, B_ADDR)
    ip = only_initiator(pair.a.core)
    assert not ip.outstanding[START + 1].dst_received
    assert all(ip.outstanding[START + i].dst_received for i in range(2, 100))
    # the head's resend is lost as well: its RTO round resends the head alone
    pair.take(pair.a)  # (the SACK fast retransmit of the head)
    t = pair.a.core.get_timer()
    assert t is not None
    pair.now = t
    pair.a.core.handle_timer(pair.now)
    assert [hdr(d).psn for d, _x, _y in pair.take(pair.a) if hdr(d).type == 3] == [START + 1]


def test_a_resend_acknowledged_sooner_than_a_round_trip_teaches_the_reordering_window() -> None:
    """Issue 29 item 6: the reordering window grew only when a late packet's *first* copy was
    known to be the one that arrived, and a packet SACK fast retransmit had already resent
    (``sends == 2``) never counted, so a PDC whose first reordering drew a resend kept a zero
    window and resent every later reordered packet too (ROD at 1 % loss, seed 3: 98 resends
    for 17 lost packets). An acknowledgement that comes sooner after the resend than the
    smallest RTT seen was caused by the first copy (RFC 8985 §6.2): the window is learnt.
    Before any reordering is seen a hole waits a quarter of that RTT (RFC 8985's start)."""
    pair = Pair(CFG)
    _flight(pair, 10)  # START .. START + 9 at t = 0
    ip = only_initiator(pair.a.core)

    def sent() -> list:
        return [(h.psn - START, bool(h.flags & 0x10)) for h in (hdr(d) for d, _x, _y in pair.take(pair.a))]

    def ack(t: int, cack: int, off: int) -> list:
        pair.now = t
        pair.inject(pair.a, pds_wire.ACK.encode((7, 0, 0, off, START + cack, 0x77, ip.lpdcid)), B_ADDR)
        return sent()

    def timer() -> list:
        t = pair.a.core.get_timer()
        assert t is not None
        pair.now = t
        pair.a.core.handle_timer(pair.now)
        return sent()

    # 20 µs: 0 and 4 acknowledged (a 20 µs RTT), 1-3 missing: 1 waits min RTT / 4, then goes
    assert ack(20_000, 0, 4) == []
    assert timer() == [(1, True)] and pair.now == 20_000 + 2 * 5_000
    # 1 µs after that resend CACK covers 1-3: the first copy of 1 arrived 11 µs late
    assert ack(31_000, 4, 0) == []
    assert ip.min_rtt == 20_000 and ip.board.reo_wnd == 11_000 + 20_000 // 4
    # 5-7 missing, 8 acknowledged: 5 waits out the learnt window, then goes
    assert ack(32_000, 4, 4) == []
    assert timer() == [(5, True)] and pair.now == 32_000 + 2 * 16_000
