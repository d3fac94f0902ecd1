"""The AR (ACK request) rule of the initiator (behaviour.md §2.5 step 3, §2.8; uet.pds.initiator).

A sender whose window refills by a packet or a few per ACK used to set AR on the packet that
filled the window (or emptied the queue) every time, so every ACK asked for the next one: one
ACK per data packet instead of one per ``ack_gen_trigger`` bytes. Now that guard AR is set only
when no earlier AR'd packet is still in flight, and no sender waits for the coalescing timer.
"""

from __future__ import annotations

import heapq

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, ses_small

from uet.pds import Mode, PdsConfig
from uet.wire import pds as pds_wire

PAYLOAD = b"x" * 4096
N = 200
WIN = 8
#: the coalescing timer is far longer than the whole transfer would take without it
CFG = PdsConfig(close_idle_ns=None, target_idle_ns=None, max_outstanding=WIN, ack_timer_ns=5_000_000)


def _requests(pair: Pair) -> list[bytes]:
    """Data requests A put on the wire (first transmissions and resends)."""
    return [d for _t, src, _dst, d in pair.wire if src == A_ADDR and hdr(d).type in (2, 3) and len(d) > 100]


def _ar_count(reqs: list[bytes]) -> int:
    return sum(1 for d in reqs if hdr(d).flags & pds_wire.ReqFlag.AR)


def _acks(pair: Pair) -> int:
    return sum(1 for _t, src, _dst, _d in pair.wire if src == B_ADDR)


class PacedLink:
    """Both cores on a link that serialises: a datagram leaves when the sender's link is free and
    takes ``len × 8 / 100 Gb/s`` to send, then ``DELAY`` to arrive; so the packets of one window
    arrive one by one and each ACK frees one slot or a few, as on a real fabric (the pair
    harness delivers a whole window at one instant)."""

    DELAY = 2_000

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.free = {A_ADDR: 0, B_ADDR: 0}
        self.flight: list[tuple[int, int, str, bytes]] = []
        self.seq = 0

    def collect(self) -> None:
        pair = self.pair
        for src, side in ((A_ADDR, pair.a), (B_ADDR, pair.b)):
            for data, dst, _ent in side.core.datagrams_to_send(pair.now):
                pair.wire.append((pair.now, src, dst, data))
                depart = max(pair.now, self.free[src]) + (len(data) + 78) * 8 // 100
                self.free[src] = depart
                self.seq += 1
                heapq.heappush(self.flight, (depart + self.DELAY, self.seq, src, data))
            side.drain_events()

    def step(self) -> bool:
        pair = self.pair
        self.collect()
        cands = [self.flight[0][0]] if self.flight else []
        cands += [t for s in (pair.a, pair.b) if (t := s.core.get_timer()) is not None]
        if not cands:
            return False
        pair.now = max(pair.now, min(cands))
        if self.flight and self.flight[0][0] <= pair.now:
            _t, _s, src, data = heapq.heappop(self.flight)
            pair.side(B_ADDR if src == A_ADDR else A_ADDR).core.receive_datagram(data, pair.now, source=src)
        for s in (pair.a, pair.b):
            t = s.core.get_timer()
            if t is not None and t <= pair.now:
                s.core.handle_timer(pair.now)
        self.collect()
        return True


@pytest.mark.parametrize("refill", ["window", "one_per_ack"])
def test_a_refilling_window_does_not_ask_for_an_ack_per_packet(refill: str) -> None:
    """``window``: the whole message waits in the PDS queue and the window refills as ACKs come;
    ``one_per_ack``: the submitter hands one packet per acknowledged one (the FEP lanes'
    ``max_inflight``), so the queue empties after every refill."""
    pair = Pair(CFG)
    link = PacedLink(pair)
    core = pair.a.core
    submitted = 0

    def submit(k: int) -> None:
        nonlocal submitted
        for _ in range(k):
            i = submitted
            core.submit(
                B_ADDR, Mode.RUD, SES_NH, ses_small(), PAYLOAD, token=i, som=i == 0, eom=i == N - 1, now=pair.now
            )
            submitted += 1

    submit(N if refill == "window" else WIN)
    done = 0
    while done < N:
        assert link.step(), "idle before every packet was acknowledged"
        acked = len(pair.a.acked())
        if refill == "one_per_ack" and acked > done:
            submit(min(acked - done, N - submitted))
        done = acked
        assert pair.now < 4_000_000, "a sender waited for the coalescing timer"
    reqs = _requests(pair)
    assert len(reqs) == N  # nothing lost, nothing resent
    assert len(pair.b.deliveries) == N
    # AR on the EOM and about once per window (each AR'd packet's ACK pumps the next refill)
    assert _ar_count(reqs) <= 2 * N // WIN + 4, _ar_count(reqs)
    # one ACK per ack_gen_trigger (16 KiB = 4 packets) plus those AR asked for, not one per packet
    assert _acks(pair) <= N // 4 + 2 * N // WIN + 4, _acks(pair)


def test_the_last_packet_before_a_stall_asks_for_an_ack() -> None:
    """With nothing AR'd in flight, the packet that fills the window carries AR (its ACK is what
    reopens the window); so does the one that empties the queue."""
    pair = Pair(CFG, delay_ns=2_000)
    core = pair.a.core
    core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), PAYLOAD, token="s", som=True, eom=True, now=0)
    assert pair.run_until(lambda: len(pair.a.acked()) == 1)
    pair.wire.clear()
    for i in range(WIN + 3):  # one message; the window takes WIN of it
        core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), PAYLOAD, token=i, som=i == 0, eom=False, now=pair.now)
    first = [d for d, _x, _y in pair.take(pair.a)]
    assert len(first) == WIN
    flags = [bool(hdr(d).flags & pds_wire.ReqFlag.AR) for d in first]
    assert flags == [False] * (WIN - 1) + [True]
