"""ECN on coalesced ACKs and the ACK_CCX state (issue 11; spec/behaviour.md §2.8, §4.2, §4.7;
wire-format.md §5.4, §5.5), with exact packets: a coalesced ACK never loses a CE mark, with
``ack_on_ecn`` off the target sends ACK_CCX carrying the ECN-marked bytes and the initiator
takes them by difference, and an ACK_CCX of a type the notes do not define is no credit grant."""

from __future__ import annotations

from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, request, ses_small
from test_cc_pds import credit_of

from uet.cc import Ccc
from uet.pds import Mode, PdsConfig, PdsCore
from uet.wire import pds as w

CCX = w.ACK_CCX[(False, "nscc")]
M = int(w.AckFlag.M)


def _established(cfg: PdsConfig) -> tuple[Pair, int, int]:
    """A target with an established PDC from peer A (SPDCID 5); returns (pair, its PDCID,
    nominal size of one of ``request``'s packets)."""
    p = Pair(cfg)
    req = request(1000, 5, syn_offset=0, flags=0x08)
    p.inject(p.b, req, A_ADDR)
    (ack,) = p.take(p.b)
    return p, hdr(ack[0]).spdcid, len(req) + 48


def test_coalesced_ack_keeps_the_ce_mark_and_ack_ccx_counts_marked_bytes() -> None:
    p, lp, _ = _established(PdsConfig(start_psn=1000, ack_on_ecn=False))
    r1, r2, r3 = (request(1001 + i, 5, lp, flags=0x08 if i == 2 else 0) for i in range(3))
    p.inject(p.b, r1, A_ADDR, ecn=3)  # CE marked, coalesced (ack_on_ecn off)
    p.inject(p.b, r2, A_ADDR, ecn=2)
    assert p.take(p.b) == []
    p.inject(p.b, r3, A_ADDR, ecn=2)  # AR: the ACK names 1003, which was not marked
    (ack,) = p.take(p.b)
    h = hdr(ack[0])
    assert h.type == w.PdsType.ACK_CCX and len(ack[0]) == 40
    assert h.flags & M  # the mark of 1001 is not lost
    assert h.cack_psn == 1003 and h.ack_psn_offset == 0
    marked = len(r1) + 48
    assert h.ack_ccx_state == ((marked + 255) >> 8) << 40
    # the next ACK covers no marked byte: no m, the same cumulative count
    p.inject(p.b, request(1004, 5, lp, flags=0x08), A_ADDR, ecn=2)
    (ack,) = p.take(p.b)
    h = hdr(ack[0])
    assert not h.flags & M and h.ack_ccx_state == ((marked + 255) >> 8) << 40


def test_with_ack_on_ecn_a_marked_request_is_acked_at_once_and_the_next_ack_is_clean() -> None:
    p, lp, _ = _established(PdsConfig(start_psn=1000))
    p.inject(p.b, request(1001, 5, lp), A_ADDR, ecn=3)
    (ack,) = p.take(p.b)
    h = hdr(ack[0])
    assert h.type == w.PdsType.ACK_CC and h.flags & M and h.cack_psn == 1001
    p.inject(p.b, request(1002, 5, lp, flags=0x08), A_ADDR, ecn=2)
    (ack,) = p.take(p.b)
    assert not hdr(ack[0]).flags & M


def _initiator(cc: str) -> tuple[PdsCore, Ccc, int, int]:
    core = PdsCore(A_ADDR, PdsConfig(cc=cc, start_psn=500))
    for i in range(3):
        core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(1000), b"x" * 1000, token=i, som=True, eom=True, now=0)
    pkts = core.datagrams_to_send(0)
    lp = (pkts[0][0][8] << 8) | pkts[0][0][9]
    g = core.gates[(B_ADDR, 0)][0]
    assert isinstance(g, Ccc)
    return core, g, lp, len(pkts[0][0]) + 48


def _ccx(cack: int, lp: int, rcvd: int, ecn_units: int, cc_type: int = 0, flags: int = 0) -> bytes:
    return CCX.encode((9, 0, flags, 0, cack, 77, lp, cc_type, 0, 1, 1, 0, 0, 0, 0, rcvd, 0, ecn_units << 40))


def test_initiator_takes_marked_bytes_from_ack_ccx_by_difference() -> None:
    core, g, lp, size = _initiator("nscc")
    core.receive_datagram(_ccx(500, lp, 4, 4, flags=M), 20_000, source=B_ADDR)
    assert g.counters["ecn_acks"] == 1 and g.counters["ecn_bytes"] == 4 * 256 + g.overhead
    # 2 more packets acknowledged, 3 more 256-byte units marked (the count is cumulative)
    core.receive_datagram(_ccx(502, lp, 12, 7, flags=M), 21_000, source=B_ADDR)
    assert g.counters["ecn_acks"] == 2 and g.counters["ecn_bytes"] == 4 * 256 + 3 * 256 + 2 * g.overhead


def test_ack_ccx_of_an_undefined_type_is_not_a_credit_grant() -> None:
    """Regression (issue 16 found it): an ACK_CCX whose CCX type is 1 was read as the credit
    ACK_CC state and its bits taken as a cumulative grant."""
    core, g, lp, size = _initiator("rccc")
    pull, credit = credit_of(g).pull, credit_of(g).credit
    # bytes 24-26 hold 0x000100 where the credit ACK_CC state keeps its grant (256 quanta)
    pkt = _ccx(500, lp, 4, 0, cc_type=1)[:24] + (0x100 << 40).to_bytes(8, "big") + bytes(8)
    core.receive_datagram(pkt, 20_000, source=B_ADDR)
    assert credit_of(g).pull == pull and core.counters["ack_ccx_opaque"] == 1
    assert g.counters["acks"] == 1  # still an ACK: PSN 500 acknowledged
    assert credit_of(g).credit <= credit
