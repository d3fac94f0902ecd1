"""RCCC receiver against core congestion (uet.cc.pullrate; spec/behaviour.md §3.2, §3.3, §4.5).

A sender whose data is trimmed *before* the last hop gets a smaller share of the receiver's pull
rate; last-hop trims (the receiver's own link, which the pacer already shares) change nothing.
Before this, every receiver granted its full link rate whatever happened in the core, and the
single-path RCCC permutation resent about one packet per packet delivered.

Pacer figures as in test_cc_rccc.py: a full grant is 64 quanta (16 384 B), 1323 ns apart at
100 Gb/s × 0.99; an epoch is 1.5 × base RTT = 18 000 ns.
"""

from __future__ import annotations

from collections.abc import Hashable

import pytest
from pds_harness import A_ADDR, SES_NH, hdr, ses_small

from uet.cc import CcConfig, CreditScheduler
from uet.cc.pullrate import PullRate
from uet.pds import PdsConfig, PdsCore
from uet.wire import pds as w

CFG = CcConfig()


def test_a_core_trimmed_epoch_cuts_the_share_by_half_the_trimmed_fraction_then_it_grows() -> None:
    r = PullRate()
    for i in range(8):  # epoch [0, 18 000): 8 packets, 4 trimmed in the core
        r.on_data(i < 4, 1_000 * i, CFG)
    assert r.rate == 1.0  # nothing decided inside an epoch
    r.on_data(False, 18_000, CFG, ce=True)  # closes it: 1 × (1 − 4/8 / 2); opens [18 000, 36 000)
    assert r.rate == 0.75
    r.on_data(True, 20_000, CFG)
    r.on_data(True, 30_000, CFG)
    r.on_data(False, 36_000, CFG, ce=True)  # 2 of 3 trimmed: 0.75 × (1 − 2/3 / 2)
    assert r.rate == pytest.approx(0.5)
    r.on_data(False, 54_000, CFG, ce=True)  # no core trim, a CE mark (a queue): + 0.03
    assert r.rate == pytest.approx(0.53)
    r.on_data(False, 72_000, CFG)  # + 0.03 × 1.1
    assert r.rate == pytest.approx(0.563)
    r.on_data(False, 80_000, CFG)  # inside the epoch: nothing
    assert r.rate == pytest.approx(0.563)
    r.on_data(False, 90_000, CFG)  # neither trim nor mark: × 1.5, more than + 0.03 × 1.21
    assert r.rate == pytest.approx(0.8445)
    r.on_data(False, 108_000, CFG)
    assert r.rate == 1.0


def test_the_share_halves_at_most_per_epoch_never_below_the_floor_and_recovers_to_one() -> None:
    r = PullRate()
    t = 0
    rates = []
    for _ in range(10):  # every packet trimmed in the core, one packet per epoch
        r.on_data(True, t, CFG)
        t += 18_000
        rates.append(r.rate)
    assert rates[:4] == [1.0, 0.5, 0.25, 0.125]
    assert rates[7:] == [CFG.core_pull_min] * 3  # 1/128 would be below the floor 0.01
    ai_only = CcConfig(core_pull_mi=1.0)
    for n in range(30):  # marked all along: additive increase only, 1.1× larger each time
        r.on_data(False, t, ai_only, ce=True)
        t += 18_000
        if n == 1:
            assert r.rate == pytest.approx(0.04)
    assert r.rate == 1.0


def _cut(s: CreditScheduler, key: str, trims: int, of: int, t: int) -> None:
    """``of`` packets of ``key`` in the epoch starting at ``t``, ``trims`` of them trimmed in the
    core, then one that closes the epoch."""
    for i in range(of):
        s.note_arrival(key, i < trims, t + i)
    s.note_arrival(key, False, t + 18_000)


def _drain(s: CreditScheduler, until: int) -> list[tuple[int, Hashable]]:
    out: list[tuple[int, Hashable]] = []
    while (t := s.deadline()) is not None and t <= until:
        out += [(t, k) for k, _r, _g in s.poll(t)]
    return out


def test_a_slowed_sender_gets_its_share_while_the_others_fill_the_link() -> None:
    s = CreditScheduler(CFG)
    s.note_target("A", 0, 0)
    s.note_target("B", 0, 0)
    _cut(s, "A", 2, 2, 0)  # all trimmed: A's share 1/2
    _cut(s, "B", 0, 2, 0)
    t0 = 18_000
    s.note_target("A", 0xFFFFF, t0)
    s.note_target("B", 0xFFFFF, t0)
    got = _drain(s, t0 + 5 * 1323)
    assert [k for _t, k in got] == ["A", "B", "A", "B", "A", "B"]  # the link stays full
    assert got[0][0] == t0 and got[-1][0] == t0 + 5 * 1323


def test_with_only_slowed_senders_the_pacer_waits_for_their_share() -> None:
    s = CreditScheduler(CFG)
    s.note_target("A", 0, 0)
    _cut(s, "A", 4, 4, 0)  # share 1/2
    s.note_target("A", 0xFFFFF, 18_000)
    got = _drain(s, 18_000 + 4 * 2646)
    assert [t for t, _k in got] == [18_000 + i * 2646 for i in range(5)]


def test_last_hop_trims_and_no_core_pull_leave_the_rate_alone() -> None:
    s = CreditScheduler(CFG)
    s.note_target("A", 0, 0)
    for i in range(4):
        s.note_arrival("A", False, i)  # last-hop trims arrive as core_trim=False
    s.note_arrival("A", False, 18_000)
    assert s.peers["A"].pace.rate == 1.0
    off = CreditScheduler(CcConfig(core_pull=False))
    off.note_target("A", 0, 0)
    _cut(off, "A", 4, 4, 0)
    assert off.peers["A"].pace.rate == 1.0


# -- through the PDS target, exact packets --------------------------------------------------------


def _cc_req(psn: int, dpdcid: int | None, target: int) -> bytes:
    """An exact RUD CC request (type 13) from PDC 5, CCC 0, carrying the credit target."""
    if dpdcid is None:
        h = w.CC_REQUEST_SYN.encode((13, SES_NH, 0x04, -1, psn, 5, 0, psn - 1000, 0, target))
    else:
        h = w.CC_REQUEST.encode((13, SES_NH, 0, -1, psn, 5, dpdcid, 0, target))
    return h + ses_small(4) + b"data"


def _grant_times(core: PdsCore, until: int) -> list[int]:
    """Times of the CREDIT CPs the target sends, driving its timer up to ``until``."""
    times: list[int] = []
    while True:
        t = core.get_timer()
        if t is None or t > until:
            return times
        core.handle_timer(t)
        for d, _dst, _e in core.datagrams_to_send(t):
            if d[0] >> 3 == 11 and hdr(d).ctl_type == w.ControlType.CREDIT:
                times.append(t)


@pytest.mark.parametrize("lasthop", [False, True])
def test_core_trims_slow_the_target_credit_pacer_last_hop_trims_do_not(lasthop: bool) -> None:
    """A sender's first packet, then three trimmed before the last hop, in one epoch: once the
    next packet closes it (3 of 4 trimmed: share 1 × (1 − 3/4 / 2) = 0.625) its CREDITs are
    int(1323 / 0.625) = 2116 ns apart. The same trims at the last hop leave them 1323 ns apart."""
    b = PdsCore("10.0.0.2", PdsConfig(cc="rccc", start_psn=1000))
    b.receive_datagram(_cc_req(1000, None, 0xFFFFF), 0, source=A_ADDR)
    (ack,) = [d for d, _dst, _e in b.datagrams_to_send(0) if d[0] >> 3 != 11]
    lp = hdr(ack).spdcid
    for i in (1, 2, 3):
        b.receive_datagram(
            _cc_req(1000 + i, lp, 0xFFFFF)[:24], 1_000 * i, source=A_ADDR, trimmed=True, last_hop=lasthop
        )
    _grant_times(b, 17_999)
    b.receive_datagram(_cc_req(1004, lp, 0xFFFFF), 18_000, source=A_ADDR)  # closes the epoch
    b.datagrams_to_send(18_000)
    times = _grant_times(b, 40_000)
    gaps = {y - x for x, y in zip(times, times[1:], strict=False)}
    assert gaps == ({1323} if lasthop else {2116})


# -- the single-path RCCC permutation, scaled down (uet-sim --suite cc) ----------------------------


def _perm_row(*extra: str) -> dict:
    from uet.tools.cc_suite import run_suite
    from uet.tools.sim import build_parser

    args = build_parser().parse_args(
        ["--suite", "cc", "--only", "perm1024_1path_rccc", "--max-hosts", "8", "--seed", "1", *extra]
    )
    (row,) = run_suite(args)["rows"]
    return row


def test_single_path_permutation_resends_far_less_and_says_why() -> None:
    """8 hosts, seed 1, one entropy per flow: two flows share a core link. Before, each receiver granted
    its full rate and the link trimmed about half of what it was offered (2,341 retransmissions
    for 3,912 data packets, every one a core trim NACK); now 615, the tail within 3 %."""
    off = _perm_row("--endpoint-set", "pds.cc_params.core_pull=false")
    on = _perm_row()
    for row in (off, on):
        assert row["ok"]
        causes = row["retx_causes"]
        assert causes["trim_nack_core"] == row["retransmits"] == row["trims"]
        assert causes["trim_nack_last_hop"] == causes["rto"] == causes["fast_retransmit"] == 0
    assert off["retransmits"] > 2_000
    assert on["retransmits"] < off["retransmits"] / 3
    assert on["tail_us"] < 1.03 * off["tail_us"]
