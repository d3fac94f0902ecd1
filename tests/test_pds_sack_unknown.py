"""SACK fast retransmit with CACK held by an uncleared guaranteed response (spec/behaviour.md
§2.7, §2.8 SACK, §2.9): a PSN counts as missing only when an ACK's bitmap (or its CACK) covered
it and said "not received"; a PSN no bitmap ever described is unknown, not lost."""

from __future__ import annotations

from pds_harness import A_ADDR, B_ADDR, Pair, hdr
from test_pds_rud import CFG, establish, submit

from uet.wire.pds import ReqFlag, psn_add

N = 100  # more than 64 PSNs beyond the held CACK


def _held_cack_flight(drop: int | None = None) -> tuple[Pair, int, list]:
    """Establish, make B answer the first request of a flight of ``N`` with a guaranteed response
    (CACK stays below it until the CLEAR), feed B the whole flight in one batch (less ``drop``) and
    hand A every ACK B built. Returns (pair, the flight's first PSN, B's ACK headers)."""
    pair = Pair(CFG)
    ipdc, _tp, _ = establish(pair)
    p0 = ipdc.next_psn
    pair.b.respond = lambda d: (4, b"\x00" * 16, True) if d.psn == p0 else None
    submit(pair, N, size=1000)
    out = pair.take(pair.a)
    assert len(out) == N
    for i, (data, _d, _e) in enumerate(out):
        if i != drop:
            pair.inject(pair.b, data, A_ADDR)
    acks = pair.take(pair.b)
    for data, _d, _e in acks:
        pair.inject(pair.a, data, B_ADDR)
    return pair, p0, [hdr(d) for d, _x, _y in acks]


def _sack_window(h) -> range:
    base = psn_add(h.cack_psn, h.sack_psn_offset)
    return range(base, base + 64)


def test_psns_below_the_sack_window_are_not_fast_retransmitted() -> None:
    pair, p0, acks = _held_cack_flight()
    # the guaranteed response's ACK at once, then one coalesced ACK naming the newest PSN
    assert len(acks) == 2
    h = acks[-1]
    assert h.cack_psn == psn_add(p0, -1)  # held by the uncleared guaranteed response at p0
    assert h.ack_psn_offset == N  # names p0 + 99
    win = _sack_window(h)
    assert win.start == p0 + N - 64 and h.sack_bitmap == (1 << 64) - 1
    # p0 + 1 .. p0 + 35 were delivered but no bitmap ever described them: unknown, not lost
    assert [d.psn for d in pair.b.deliveries[-N:]] == [p0 + i for i in range(N)]
    resent = pair.take(pair.a)
    assert [hdr(d).psn for d, _x, _y in resent if hdr(d).type != 4 and hdr(d).flags & ReqFlag.RETX] == []
    assert pair.a.core.counters.get("fast_retransmits", 0) == 0
    for data, _dst, _e in resent:  # the CLEAR releases CACK; everything completes, once each
        pair.inject(pair.b, data, A_ADDR)
    assert pair.run_until(lambda: len(pair.a.acked()) == 1 + N)
    assert pair.a.core.counters.get("fast_retransmits", 0) == 0
    assert len(pair.b.deliveries) == 1 + N


def test_a_hole_inside_the_sack_window_is_fast_retransmitted_once() -> None:
    lost = N - 20  # inside the coalesced ACK's window [p0 + 36, p0 + 99]
    pair, p0, acks = _held_cack_flight(drop=lost)
    h = acks[-1]
    assert p0 + lost in _sack_window(h) and not h.sack_bitmap >> (p0 + lost - _sack_window(h).start) & 1
    resent = [hdr(d) for d, _x, _y in pair.take(pair.a)]
    fast = [r.psn for r in resent if r.flags & ReqFlag.RETX]
    assert fast == [p0 + lost]
    assert pair.a.core.counters["fast_retransmits"] == 1
    assert pair.run_until(lambda: len(pair.a.acked()) == 1 + N)
    assert pair.a.core.counters["fast_retransmits"] == 1
    assert len(pair.b.deliveries) == 1 + N
