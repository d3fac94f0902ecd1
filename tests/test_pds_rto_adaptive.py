"""The adaptive RTO (``PdsConfig.rto_adaptive``, uet.pds.backoff: RFC 6298's estimator on §2.9's
valid samples) and RTT samples of packets whose RTO re-armed them without a send (issue 11's
"peer window forbids" note). Fake clock, exact packets."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, ses_small

from uet.pds import Mode, PdsConfig
from uet.pds.backoff import RTO_EST_MAX_NS, rto_for, rtt_sample
from uet.wire import pds as pds_wire
from uet.wire.pds import PdsType, ReqFlag

MS = 1_000_000
US = 1_000
START = 0x1234_5678
FIXED = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None)
ADAPTIVE = replace(FIXED, rto_adaptive=True)


def _state() -> SimpleNamespace:
    return SimpleNamespace(srtt=0, rttvar=0, rto=0, rto_shift=3)


def test_estimator_follows_rfc_6298_with_the_rto_init_time_as_floor() -> None:
    """Hand-computed: the first sample sets SRTT = R, RTTVAR = R/2; then RTTVAR ← ¾·RTTVAR +
    ¼·|SRTT − R| and SRTT ← ⅞·SRTT + ⅛·R (old SRTT in RTTVAR's update); RTO = SRTT + 4·RTTVAR,
    at least ``rto_ns``, at most 60 s; every sample ends the back-off."""
    cfg = PdsConfig(rto_ns=2 * MS)
    st = _state()
    rtt_sample(st, 10 * MS, cfg)
    assert (st.srtt, st.rttvar, st.rto, st.rto_shift) == (10 * MS, 5 * MS, 30 * MS, 0)
    st.rto_shift = 2
    rtt_sample(st, 18 * MS, cfg)
    # RTTVAR = 5 + (|10 - 18| - 5) / 4 = 5.75 ms; SRTT = 10 + (18 - 10) / 8 = 11 ms
    assert (st.srtt, st.rttvar, st.rto, st.rto_shift) == (11 * MS, 5_750_000, 34 * MS, 0)
    st = _state()
    rtt_sample(st, 100 * US, cfg)  # 100 µs + 4 × 50 µs is below the floor
    assert (st.srtt, st.rto) == (100 * US, 2 * MS)
    st = _state()
    rtt_sample(st, 30_000 * MS, cfg)  # 30 s + 4 × 15 s is above RFC 6298's 60 s bound
    assert st.rto == RTO_EST_MAX_NS


def test_backoff_applies_to_the_adaptive_base() -> None:
    """``rto_for`` doubles the PDC's estimate; the cap is ``rto_max_ns`` or the estimate itself
    when that is higher (no back-off then); base 0 is the fixed ``rto_ns``."""
    cfg = PdsConfig(rto_ns=2 * MS, rto_max_ns=100 * MS)
    assert [rto_for(cfg, s, 30 * MS) // MS for s in range(4)] == [30, 60, 100, 100]
    assert [rto_for(cfg, s, 150 * MS) // MS for s in range(3)] == [150, 150, 150]
    assert [rto_for(cfg, s, 0) // MS for s in range(3)] == [2, 4, 8]


def _retx(pair: Pair) -> list[int]:
    return [t for t, src, _d, data in pair.wire if src == A_ADDR and data[0] >> 3 == PdsType.RUD_REQ
            and data[1] & ReqFlag.RETX]  # fmt: skip


def _one_by_one(cfg: PdsConfig, n: int) -> tuple[Pair, list[int]]:
    """A pair 10 µs apart exchanges one message; then the one-way delay grows to 5 ms (RTT
    10 ms, five times the 2 ms ``rto_ns``) and ``n`` single-packet messages go one after the
    other, each submitted when the previous one is acknowledged. Returns the pair and the times
    of the RUD retransmissions after the change."""
    pair = Pair(cfg)
    k = 0

    def send() -> None:
        nonlocal k
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x" * 64, token=k, som=True, eom=True, now=pair.now)
        k += 1

    send()
    assert pair.run_until(lambda: len(pair.a.acked()) == 1)
    pair.delay_ns = 5 * MS
    t0 = pair.now
    for i in range(n):
        send()
        assert pair.run_until(lambda: len(pair.a.acked()) == i + 2)  # noqa: B023 - called in this iteration
    pair.run_idle()
    assert not pair.a.failed()
    return pair, [t for t in _retx(pair) if t > t0]


def test_fixed_rto_resends_every_message_once_the_rtt_passes_it() -> None:
    """The collapse of the live all-to-all in miniature: with the fixed 2 ms RTO every message
    is resent at +2 ms and +6 ms (back-off 2, 4 ms) before its ACK comes at +10 ms, and the ACK
    resets the back-off, so the next message pays the same: 2 × 10 spurious copies."""
    _pair, times = _one_by_one(FIXED, 10)
    assert len(times) == 20


def test_adaptive_rto_learns_the_longer_round_trip() -> None:
    """With ``rto_adaptive`` the first message is resent at +2 and +6 ms like the fixed RTO, but
    its ACK (for a packet sent three times) is no valid sample, so the doubled RTO stays (RFC 6298
    (5.7)): the second message waits 8 ms and is resent once; the third waits 16 ms, its ACK is
    the first valid 10 ms sample (SRTT 1.27 ms, RTTVAR 2.5 ms: RTO 11.3 ms), and from then on the
    RTO stays above the RTT: 3 spurious copies for 10 messages instead of 20."""
    pair, times = _one_by_one(ADAPTIVE, 10)
    assert len(times) == 3
    (pdc,) = [p for p in pair.a.core.pdcs.values() if p.role == "initiator"]
    assert pdc.rto > 10 * MS and pdc.rto_shift == 0
    assert 5 * MS < pdc.srtt < 10 * MS  # converging on the 10 ms round trip


def test_adaptive_rto_still_recovers_a_lost_packet_at_the_floor() -> None:
    """On a short round trip the estimate stays at the floor ``rto_ns``: a lost packet is resent
    exactly 2 ms after it was sent, as with the fixed RTO."""
    pair = Pair(ADAPTIVE)
    for i in range(3):
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x" * 64, token=i, som=True, eom=True, now=pair.now)
        assert pair.run_until(lambda: len(pair.a.acked()) == i + 1)  # noqa: B023 - called in this iteration
    lost: list[bytes] = []  # the next request from A is lost, nothing else

    def lose_first(d: bytes, src: str, _dst: str) -> list[bytes]:
        if src != A_ADDR or lost:
            return [d]
        lost.append(d)
        return []

    pair.filter = lose_first
    t0 = pair.now
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x" * 64, token=9, som=True, eom=True, now=pair.now)
    assert pair.run_until(lambda: len(pair.a.acked()) == 4)
    assert [t - t0 for t in _retx(pair)] == [2 * MS]


def _burst_setup(cfg: PdsConfig) -> tuple[Pair, list[bytes]]:
    """Eight one-packet messages whose originals are lost; the first RTO round (t = 2 ms) resends
    all eight, the second (t = 6 ms, backed off) only ``rto_burst`` = 4 and re-arms the other four
    without sending them. Returns the pair and the copies of the first round."""
    pair = Pair(cfg)
    for i in range(8):
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), bytes([i]) * 64, token=i, som=True, eom=True,
                           now=pair.now)  # fmt: skip
    assert len(pair.take(pair.a)) == 8  # the originals: lost
    pair.now = 2 * MS
    pair.a.core.handle_timer(pair.now)
    first = [d for d, _dst, _e in pair.take(pair.a)]
    assert len(first) == 8
    pair.now = 6 * MS
    pair.a.core.handle_timer(pair.now)
    assert len(pair.take(pair.a)) == 4
    assert pair.a.core.counters["rto_deferred"] == 4
    return pair, first


def test_a_packet_rearmed_without_a_send_gives_no_rtt_sample() -> None:
    """Issue 11's note: the RTO re-arms ``tx_time`` of a packet it does not send (the burst is
    spent, or the peer window forbids it). The ACK of its earlier copy (sent at 2 ms, answered at
    7 ms, ``retx`` set: valid by §2.9 for a packet sent twice) was taken as a 1 ms round trip,
    measured from the re-arm at 6 ms: a sample 5× too short, fed to SRTT and to the CCC (whose
    base RTT and window it would shrink). Now it gives none: the four packets of the second
    round were sent three times and the four re-armed ones are marked, so SRTT stays unset."""
    pair, first = _burst_setup(FIXED)
    pair.now = 7 * MS
    for d in first:
        pair.inject(pair.b, d, A_ADDR)
    acks = [d for d, _dst, _e in pair.take(pair.b)]
    assert acks
    for d in acks:
        pair.inject(pair.a, d, B_ADDR)
    (pdc,) = [p for p in pair.a.core.pdcs.values() if p.role == "initiator"]
    assert not pdc.outstanding  # every packet acknowledged
    assert pdc.srtt == 0


def test_a_packet_held_by_the_peer_window_gives_no_rtt_sample() -> None:
    """The "peer window forbids" path itself: the target shrinks its window (MPR 2 → 1, i.e.
    256 → 128 PSNs) while PSNs beyond the new edge are outstanding; their RTO waits without
    sending (§2.9) and re-arms them. The ACK of their only copy, sent at t = 0 and answered at
    t = 3 ms, was taken as a 1 ms sample (from the re-arm at 2 ms); now none is taken."""
    cfg = replace(FIXED, mp_range=256, max_outstanding=256)
    pair = Pair(cfg)
    n = 200
    for i in range(n):
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"y" * 16, token=i, som=True, eom=True, now=pair.now)
    sent = [d for d, _dst, _e in pair.take(pair.a)]
    # the first ACK opens the window to 256 (MPR 2): the PDC sends the rest
    pair.inject(pair.b, sent[0], A_ADDR)
    (ack0,) = [d for d, _dst, _e in pair.take(pair.b)]
    pair.inject(pair.a, ack0, B_ADDR)
    sent += [d for d, _dst, _e in pair.take(pair.a)]
    assert len(sent) == n
    # the target then receives everything (its ACKs are held back) and shrinks its window to 128
    for d in sent[1:]:
        pair.inject(pair.b, d, A_ADDR)
    acks = [d for d, _dst, _e in pair.take(pair.b)]
    shrink = hdr(acks[0])
    assert shrink.mpr == 2
    lay = pds_wire.pds_layout(acks[0][0] >> 3, acks[0][1] & 0x7F, acks[0][12])
    assert lay is not None
    pair.inject(pair.a, lay.encode(shrink._replace(mpr=1)), B_ADDR)
    (pdc,) = [p for p in pair.a.core.pdcs.values() if p.role == "initiator"]
    assert pdc.peer_mp == 128
    srtt = pdc.srtt
    pair.now = 2 * MS
    pair.a.core.handle_timer(pair.now)
    pair.take(pair.a)
    assert pair.a.core.counters.get("rto_window_wait", 0) > 0
    pair.now = 3 * MS
    for d in acks[1:]:  # each names its own packet (AR on every one-packet message)
        pair.inject(pair.a, d, B_ADDR)
    assert not pdc.outstanding
    assert pdc.srtt == srtt  # the window-held packets gave no sample
