"""Fixed-window resends of trimmed packets on the ACK clock (uet.pds.trimwait, issue 10).

Exact packets through a real target: the initiator's requests are handed to the target whole or
cut by a switch (``trimmed`` / ``lasthop``), the target's NACKs and ACKs are handed back, and
each test checks what the initiator puts on the wire after each of them.
"""

from __future__ import annotations

from dataclasses import replace

from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, ses_small

from uet.pds import Mode, PdsConfig
from uet.pds.pdc import InitiatorPdc
from uet.wire.pds import NackCode, PdsType, ReqFlag

START = 0x40000000
CFG = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None)


def send(pair: Pair, *tokens: str) -> list[bytes]:
    """Submit one single-packet message per token (each EOM, so each asks for an ACK) and
    return what the initiator sends at once."""
    for tok in tokens:
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), tok.encode(), token=tok, som=True, eom=True, now=0)
    return [d for d, _dst, _e in pair.take(pair.a)]


def to_target(pair: Pair, data: bytes, **kw: object) -> list[bytes]:
    """Hand ``data`` to the target (``trimmed=True`` etc. as a switch marks it); its answers."""
    pair.inject(pair.b, data, A_ADDR, **kw)
    return [d for d, _dst, _e in pair.take(pair.b)]


def to_initiator(pair: Pair, answers: list[bytes]) -> list[bytes]:
    """Hand the target's answers to the initiator; what it sends in reply."""
    for d in answers:
        pair.inject(pair.a, d, B_ADDR)
    return [d for d, _dst, _e in pair.take(pair.a)]


def is_resend_of(data: bytes, original: bytes) -> bool:
    h = hdr(data)
    return (
        h.psn == hdr(original).psn
        and bool(h.flags & ReqFlag.RETX)
        and bool(h.flags & ReqFlag.AR)
        and data[12:] == original[12:]
    )


def test_trimmed_packets_wait_for_the_ack_clock_and_go_before_new_data() -> None:
    pair = Pair(CFG)
    p = send(pair, "p0", "p1", "p2", "p3")
    assert [hdr(d).psn for d in p] == [START + i for i in range(4)]
    # p0 cut before the last hop, p1 at the last hop: each NACK takes its packet out of the
    # network, but p2 and p3 are still on their way, so nothing is resent yet
    nack0 = to_target(pair, p[0], trimmed=True)
    assert [hdr(d).nack_code for d in nack0] == [NackCode.TRIMMED]
    assert to_initiator(pair, nack0) == []
    nack1 = to_target(pair, p[1], trimmed=True, last_hop=True)
    assert [hdr(d).nack_code for d in nack1] == [NackCode.TRIMMED_LASTHOP]
    assert to_initiator(pair, nack1) == []
    assert pair.a.core.counters["trim_rtx_wait"] == 2
    # new data waits behind the resends
    assert send(pair, "new") == []
    # p2 arrives: its ACK shows one packet received, so one waiting packet goes (the oldest)
    ack2 = to_target(pair, p[2])
    assert [hdr(d).type for d in ack2] == [PdsType.ACK_CC]
    (r0,) = to_initiator(pair, ack2)
    assert is_resend_of(r0, p[0])
    # p3 arrives: the last waiting packet goes, then new data again
    r1, new = to_initiator(pair, to_target(pair, p[3]))
    assert is_resend_of(r1, p[1])
    assert hdr(new).psn == START + 4 and not hdr(new).flags & ReqFlag.RETX
    for d in (r0, r1, new):
        to_initiator(pair, to_target(pair, d))
    assert sorted(a.token for a in pair.a.acked()) == ["new", "p0", "p1", "p2", "p3"]
    c = pair.a.core.counters
    assert c["retransmits"] == 2 and c.get("trim_resend_idle", 0) == 0 and not pair.a.failed()
    assert [bytes(d.payload) for d in pair.b.deliveries] == [b"p2", b"p3", b"p0", b"p1", b"new"]


def test_with_nothing_left_in_the_network_the_oldest_waiting_packet_goes_at_once() -> None:
    pair = Pair(CFG)
    p = send(pair, "p0", "p1")
    assert to_initiator(pair, to_target(pair, p[0], trimmed=True)) == []  # p1 still on its way
    # p1 trimmed too: no ACK can come now, so the oldest waiting packet goes without one
    (r0,) = to_initiator(pair, to_target(pair, p[1], trimmed=True))
    assert is_resend_of(r0, p[0]) and pair.a.core.counters["trim_resend_idle"] == 1
    # its ACK clocks out p1
    (r1,) = to_initiator(pair, to_target(pair, r0))
    assert is_resend_of(r1, p[1])
    assert to_initiator(pair, to_target(pair, r1)) == []
    assert sorted(a.token for a in pair.a.acked()) == ["p0", "p1"]


def test_a_trim_nack_of_a_waiting_packet_answers_an_older_copy_and_is_ignored() -> None:
    pair = Pair(CFG)
    p = send(pair, "p0", "p1")
    nack0 = to_target(pair, p[0], trimmed=True)
    assert to_initiator(pair, nack0) == []
    (ip,) = pair.a.core.pdcs.values()
    assert isinstance(ip, InitiatorPdc) and ip.outstanding[START].nack_retries == 1
    assert to_initiator(pair, nack0) == []  # the same NACK again (a copy of an older copy's)
    assert ip.outstanding[START].nack_retries == 1
    assert pair.a.core.counters["nack_while_waiting"] == 1


def test_the_rto_of_a_waiting_packet_only_rearms_it() -> None:
    """A waiting packet is out of flight: its RTO does not resend it while another packet of the
    PDC is still due to clock it (here p1, lost, which its own RTO resends)."""
    pair = Pair(CFG)
    p = send(pair, "p0", "p1")
    assert to_initiator(pair, to_target(pair, p[0], trimmed=True)) == []
    pair.now = CFG.rto_ns
    pair.a.core.handle_timer(pair.now)
    (r1,) = [d for d, _dst, _e in pair.take(pair.a)]
    assert is_resend_of(r1, p[1])
    c = pair.a.core.counters
    assert c["rto"] == 1 and c["rto_rtx_wait"] == 1
    (r0,) = to_initiator(pair, to_target(pair, r1))  # p1's ACK clocks out p0
    assert is_resend_of(r0, p[0])
    to_initiator(pair, to_target(pair, r0))
    assert sorted(a.token for a in pair.a.acked()) == ["p0", "p1"]


def test_clocked_trim_resend_off_resends_at_once() -> None:
    pair = Pair(replace(CFG, clocked_trim_resend=False))
    p = send(pair, "p0", "p1")
    (r0,) = to_initiator(pair, to_target(pair, p[0], trimmed=True))
    assert is_resend_of(r0, p[0]) and "trim_rtx_wait" not in pair.a.core.counters


def test_an_incast_of_full_windows_resends_no_more_than_it_delivers() -> None:
    """Eight packets in flight, every first copy trimmed: each resend waits for a packet to
    arrive, so the copies in the network never exceed the window again (no storm)."""
    pair = Pair(CFG)
    p = send(pair, *(f"p{i}" for i in range(8)))
    assert len(p) == 8
    resent: list[bytes] = []
    for d in p:
        resent += to_initiator(pair, to_target(pair, d, trimmed=True))
    assert len(resent) == 1 and is_resend_of(resent[0], p[0])  # the last NACK left nothing in flight
    sent = 0
    while resent:
        d = resent.pop(0)
        sent += 1
        more = to_initiator(pair, to_target(pair, d))
        assert len(more) <= 1  # one packet out per packet in
        resent += more
    assert sent == 8 and sorted(a.token for a in pair.a.acked()) == sorted(f"p{i}" for i in range(8))
