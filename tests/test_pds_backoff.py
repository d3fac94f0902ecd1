"""RTO back-off, the retry budget in count and time, ROD go-back-N cost and bounded CLEAR_REQ
(spec/behaviour.md §2.9, §2.13, §2.7; uet.pds.backoff). Regression tests for issue
"reliability" items 6, 10, 11 and 18: each failed before the fix."""

from __future__ import annotations

from dataclasses import replace

from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, request, ses_small

from uet.experiments.impair_matrix import run_cell
from uet.pds import Mode, PdsConfig
from uet.pds.backoff import retries_spent, rto_for
from uet.wire.pds import ControlType, PdsType, ReqFlag

START = 0x1234_5678
# exact packet sequences without the anti-amplification proof exchange (uet.pds.validation,
# tested in tests/test_pds_validation.py)
CFG = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None, amp_factor=0)
MS = 1_000_000


#: ROD with the spec's go-back-N instead of the default target buffering (uet.pds.config)
GBN = PdsConfig(rod_buffer=False)


def _send(pair: Pair, n: int = 1, mode: Mode = Mode.RUD) -> None:
    for i in range(n):
        pair.a.core.submit(B_ADDR, mode, SES_NH, ses_small(), bytes([i]) * 64, token=i, som=True, eom=True,
                           now=pair.now)  # fmt: skip


def _retx_times(pair: Pair, types: tuple[int, ...]) -> list[int]:
    return [t for t, src, _d, data in pair.wire if src == A_ADDR and data[0] >> 3 in types and data[1] & ReqFlag.RETX]


def test_rto_helpers() -> None:
    assert [rto_for(CFG, s) // MS for s in range(9)] == [2, 4, 8, 16, 32, 64, 100, 100, 100]
    assert not retries_spent(CFG, 5, 0, CFG.retry_time_ns - 1)  # count spent, time not
    assert not retries_spent(CFG, 4, 0, 10 * CFG.retry_time_ns)  # time spent, count not
    assert retries_spent(CFG, 5, 0, CFG.retry_time_ns)


def test_rud_rto_backs_off_exponentially_with_a_cap() -> None:
    """Item 10: a black-holed packet is resent at 2, 6, 14, 30, 62, 126, 226 ms… (fixed 2 ms
    before), and fails only after 2 s (0.3 s of silence killed a transfer before)."""
    pair = Pair(CFG)
    pair.filter = lambda data, src, dst: []
    _send(pair)
    assert pair.run_until(lambda: bool(pair.a.failed()))
    times = _retx_times(pair, (PdsType.RUD_REQ,))
    assert [t // MS for t in times[:8]] == [2, 6, 14, 30, 62, 126, 226, 326]
    assert len(times) == 24 and pair.now == 2026 * MS
    assert pair.a.failed()[0].reason == "retry exhausted"


def test_ack_resets_the_backoff() -> None:
    """After progress the RTO returns to its initial value."""
    pair = Pair(CFG)
    _send(pair)
    assert pair.run_until(lambda: len(pair.a.acked()) == 1)
    drop = {"n": 3}

    def lossy(data: bytes, src: str, dst: str) -> list[bytes]:
        if src == A_ADDR and drop["n"]:
            drop["n"] -= 1
            return []
        return [data]

    pair.filter = lossy
    t0 = pair.now
    _send(pair)
    assert pair.run_until(lambda: len(pair.a.acked()) == 2)
    assert [t - t0 for t in _retx_times(pair, (PdsType.RUD_REQ,))] == [2 * MS, 6 * MS, 14 * MS]
    (pdc,) = [p for p in pair.a.core.pdcs.values() if p.role == "initiator"]
    assert pdc.rto_shift == 0
    pair.filter = None
    t1 = pair.now
    drop["n"] = 1
    pair.filter = lossy
    _send(pair)
    assert pair.run_until(lambda: len(pair.a.acked()) == 3)
    assert _retx_times(pair, (PdsType.RUD_REQ,))[-1] - t1 == 2 * MS


def test_rudi_rto_backs_off() -> None:
    pair = Pair(CFG)
    pair.filter = lambda data, src, dst: []
    _send(pair, mode=Mode.RUDI)
    assert pair.run_until(lambda: bool(pair.a.failed()))
    times = _retx_times(pair, (PdsType.RUDI_REQ,))
    assert [t // MS for t in times[:7]] == [2, 6, 14, 30, 62, 126, 226]
    assert pair.now >= CFG.retry_time_ns


def test_rudi_survives_20_percent_loss() -> None:
    """Item 18: RUDI at 20 % loss with reordering and duplication (failed with the fixed RTO)."""
    for seed in (1, 2, 3):
        r = run_cell(Mode.RUDI, 0.20, seed, packets=500)
        assert r.intact and r.failed == 0, r


def test_rod_go_back_n_survives_loss_at_bounded_cost() -> None:
    """Item 11: ROD go-back-N (``rod_buffer=False``; buffering is the default) intact at 10 % and
    20 % loss; at 10 % at most 20 retransmissions per lost packet (before: retry exhausted at
    20 %, ≈ 80 per lost packet at 1 %)."""
    for loss in (0.10, 0.20):
        for seed in (1, 2):
            r = run_cell(Mode.ROD, loss, seed, packets=500, config=GBN)
            assert r.intact and r.duplicates == 0, r
            if loss == 0.10:
                assert r.retx_per_lost <= 20, r


def test_rod_reordering_alone_costs_bounded_go_back_resends() -> None:
    """Item 11: with 5 % reordering and no loss, go-back-N resends fewer packets than it sends
    (before: the whole old flight was resent at every go-back, 762 and 940 resends for these
    400 packets; now 324 and 295), and delivery stays intact and in order."""
    for seed in (1, 5):
        r = run_cell(Mode.ROD, 0.0, seed, packets=400, dup=0.0, config=GBN)
        assert r.intact and r.in_order and r.duplicates == 0, r
        assert r.retransmissions < 400, r


def test_rod_packet_behind_gap_spends_no_retries() -> None:
    """Item 11: on an RTO of a go-back-N PDC only the oldest unacknowledged packet counts a
    retry; the packets discarded behind it are resent without spending theirs."""
    pair = Pair(replace(CFG, rod_buffer=False))
    _send(pair, 1, Mode.ROD)
    assert pair.run_until(lambda: len(pair.a.acked()) == 1)
    pair.filter = lambda data, src, dst: []
    for i in range(4):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), b"x" * 64, token=("g", i), som=True, eom=True,
                           now=pair.now)  # fmt: skip
    pair.run_until(lambda: pair.a.core.counters.get("rto", 0) >= 3)
    (pdc,) = [p for p in pair.a.core.pdcs.values() if p.role == "initiator"]
    pkts = sorted(pdc.outstanding.values(), key=lambda q: q.psn)
    assert pkts[0].retries == 3 and all(q.retries == 0 for q in pkts[1:])
    assert all(q.sends == 4 for q in pkts)  # go-back-N resent every one each time


def test_clear_req_is_bounded_and_backs_off() -> None:
    """Item 6: one request whose guaranteed response is never cleared drew a CLEAR_REQ every
    1 ms without limit (≈ 974 replies); now at most ``max_clear_req``, backed off."""
    pair = Pair(CFG)
    pair.b.respond = lambda d: (4, b"\x00\x05" + bytes(6), True)  # a guaranteed response
    pair.inject(pair.b, request(START, 7, syn_offset=0), A_ADDR)
    pair.take(pair.b)  # the ACK (REQ_CLEAR) goes nowhere: the forger never answers
    pair.filter = lambda data, src, dst: []
    t0 = pair.now
    pair.run_until(lambda: False, max_ns=5_000 * MS)
    reqs = [
        t - t0
        for t, src, _d, data in pair.wire
        if src == B_ADDR and data[0] >> 3 == PdsType.CONTROL and hdr(data).ctl_type == ControlType.REQ_CLEAR
    ]
    assert len(reqs) == CFG.max_clear_req == 5
    assert [t // MS for t in reqs] == [1, 5, 13, 29, 61]


def test_a_silent_peer_draws_a_bounded_burst_per_backed_off_round() -> None:
    """Once the RTO has backed off (the peer stayed silent), a round resends at most
    ``rto_burst`` packets and re-arms the rest: 64 outstanding packets toward a black hole cost
    64 + 4 per later round over the whole budget, not 64 per round (≈ 1,500 before)."""
    pair = Pair(CFG)
    _send(pair)
    assert pair.run_until(lambda: len(pair.a.acked()) == 1)
    pair.filter = lambda data, src, dst: []
    _send(pair, 64)
    assert pair.run_until(lambda: len(pair.a.failed()) == 64)
    times = _retx_times(pair, (PdsType.RUD_REQ,))
    rounds: dict[int, int] = {}
    for t in times:
        rounds[t] = rounds.get(t, 0) + 1
    per_round = [rounds[t] for t in sorted(rounds)]
    assert per_round[0] == 64 and max(per_round[1:]) <= CFG.rto_burst
    assert len(times) <= 64 + CFG.rto_burst * len(per_round)
    assert len(times) < 200
