"""RCCC (spec/behaviour.md §4.5): the receiver pacer in virtual time and the source's credit.

100 Gb/s × pull rate 0.99 = 12.375 bytes/ns; a grant is 4 MTUs = 16 384 B = 64 quanta of 256 B,
so full grants are int(16384 / 12.375) = 1323 ns apart.
"""

from __future__ import annotations

from collections.abc import Hashable

import pytest

from uet.cc import CcConfig, CreditScheduler, CreditSender
from uet.cc.rccc import diff24

CFG = CcConfig()


def test_grants_are_paced_round_robin_in_virtual_time() -> None:
    s = CreditScheduler(CFG)
    assert s.deadline() is None
    s.note_target("A", 200, 0, route="pa")
    s.note_target("B", 100, 0, route="pb")
    assert s.deadline() == 0
    seen = []
    while (t := s.deadline()) is not None:
        seen.append((t, s.poll(t)))
    assert seen == [
        (0, [("A", "pa", 64)]),
        (1323, [("B", "pb", 64)]),
        (2646, [("A", "pa", 128)]),
        (3969, [("B", "pb", 100)]),  # B's last 36 quanta: 9216 B → int(9216 / 12.375) = 744
        (4713, [("A", "pa", 192)]),
        (6036, [("A", "pa", 200)]),  # 8 quanta: 2048 B → 165 ns
        (6201, []),  # nothing left: the pacer stops
    ]
    assert s.grants == 6


def test_grants_never_exceed_target_and_late_poll_bursts_once_per_interval() -> None:
    s = CreditScheduler(CFG)
    s.note_target("A", 1000, 0)
    assert [g for _k, _r, g in s.poll(5_000)] == [64, 128, 192, 256]  # at 0, 1323, 2646, 3969
    assert s.deadline() == 4 * 1323
    s.note_target("A", 10, 6_000)  # an older (smaller) target changes nothing
    assert s.peers["A"].target == 1000


def test_trim_adds_demand_and_a_new_sender_waits_for_the_pacer() -> None:
    s = CreditScheduler(CFG)
    s.note_target("A", 64, 0)
    assert s.poll(0) == [("A", None, 64)]
    s.add_demand("A", 4_096, 100)  # fund a retransmission: +16 quanta
    assert s.deadline() == 1323  # not before the pacing interval of the last grant
    assert s.poll(1323) == [("A", None, 80)]


def test_sender_speculative_start_and_grants() -> None:
    c = CreditSender(CFG)
    assert c.speculating and c.credit == pytest.approx(225_000)
    c.backlog = 1_000_000
    # want = min(1e6, 225000) − credit 225000 = 0 → one MTU while speculating = 16 quanta
    assert c.target() == 16
    for _ in range(56):
        c.on_send(4_160)
    assert c.credit == pytest.approx(225_000 - 56 * 4_160)
    assert not c.can_send()
    # first grant: speculation ends, the deficit stays, 64 quanta added
    c.on_grant(64, 10_000)
    assert not c.speculating
    assert c.credit == pytest.approx(225_000 - 56 * 4_160 + 16_384)
    # target: min(backlog, MaxWnd) − credit, plus pull, in quanta (rounded up)
    want = 225_000 - (225_000 - 56 * 4_160 + 16_384)
    assert c.target() == 64 + -(-want // 256)
    # with NSCC the want is capped at cwnd + MTU
    assert c.target(cwnd=10_000.0) == c.advertised  # never goes backwards


def test_sender_credit_request_deadline_and_wrap() -> None:
    c = CreditSender(CFG)
    c.backlog = 10_000
    assert c.request_deadline() is None  # speculating
    c.on_grant(0, 0)  # ends speculation (credit → 0)
    assert c.credit == 0
    # the receiver granted all it was asked for: the backlog is new demand, announced at once
    assert c.credit_request_due(0)
    c.target()  # the CREDIT_REQ carries it; then a repeat only once per credit_req_ns
    c.on_request_sent(5_000)
    assert c.request_deadline() == 17_000
    c.pull = 0xFFFFF0
    c.on_grant(0x000010, 6_000)  # 24-bit wrap: 32 quanta
    assert c.credit == pytest.approx(32 * 256)
    assert diff24(0x000010, 0xFFFFF0) == 32


def _drain(s: CreditScheduler, until: int) -> list[Hashable]:
    """Keys granted, in order, polling at each deadline up to ``until``."""
    order: list[Hashable] = []
    while (t := s.deadline()) is not None and t <= until:
        order += [k for k, _r, _g in s.poll(t)]
    return order


def test_speculative_data_counts_as_service() -> None:
    """A sender whose speculative window reached the receiver untrimmed (100 000 nominal bytes)
    waits while one whose window was trimmed catches up: the least served goes first (uet.cc.rccc
    "Order of service"); plain round robin kept the near sender's lead to the end of the incast."""
    s = CreditScheduler(CFG)
    s.note_target("near", 4000, 0, rx=100_000)
    s.note_target("far", 4000, 0, rx=0)
    # far: 16 384 B per grant; after 7 grants (114 688 B) it has had more than near's 100 000
    assert _drain(s, 11 * 1323) == ["far"] * 7 + ["near", "far", "near", "far", "near"]


def test_a_sender_out_of_the_list_between_grants_keeps_its_place() -> None:
    """A window-limited sender whose target is met by each grant (NSCC's cwnd + MTU cap) leaves the
    active list until its next request; it comes back ahead of a sender that was served more,
    instead of queueing behind it (plain round robin gave the short-RTT sender more turns)."""
    s = CreditScheduler(CFG)
    s.note_target("A", 64, 0)  # one grant's worth
    s.note_target("B", 1000, 0)
    assert _drain(s, 3 * 1323) == ["A", "B", "B", "B"]
    s.note_target("A", 128, 3 * 1323 + 1)  # A asks again: served 16 384 < B's 49 152
    assert _drain(s, 5 * 1323) == ["A", "B"]


def test_a_newcomer_catches_up_at_most_one_max_wnd() -> None:
    """A sender joining after the others have been served cannot claim the service it missed:
    its account starts one MaxWnd (225 000 B) below the least served active sender, so it gets
    ceil(225 000 / 16 384) = 14 grants in a row, then round robin."""
    s = CreditScheduler(CFG)
    s.note_target("A", 0xFFFFF, 0)
    _drain(s, 99 * 1323)  # 100 grants to A: 1 638 400 B
    s.note_target("C", 0xFFFFF, 99 * 1323 + 1)
    assert _drain(s, 100 * 1323 + 15 * 1323) == ["C"] * 14 + ["A", "C"]


def test_credit_request_waits_for_an_overdue_grant() -> None:
    """A blocked source restates its target only when a grant is overdue: ``credit_req_ns``
    (base RTT, 12 µs) plus twice the smoothed time between grants after it last sent its target
    or got a grant; then at most once per ``credit_req_ns``. Before, it sent one every 12 µs of
    waiting (about one per grant in a 15→1 incast, whose grants come every ~20 µs)."""
    c = CreditSender(CFG)
    c.backlog = 1_000_000
    c.on_grant(64, 0)  # speculation ends; 16 384 B of credit
    for k in range(4):
        c.on_send(4_096, k * 100)
    c.target()  # the packets carried the target beyond the grants
    assert c.credit == 0 and c.request_deadline() == 300 + 12_000  # no gap known yet
    c.on_grant(128, 20_000)  # 20 µs after the first: gap 20 000
    c.on_grant(192, 40_000)  # another 20 µs
    assert c.grant_gap == 20_000
    for k in range(8):  # spends both grants
        c.on_send(4_096, 40_000 + k * 100)
    c.target()
    assert c.credit == 0 and c.request_deadline() == 40_700 + 2 * 20_000 + 12_000
    c.on_request_sent(92_700)
    assert c.request_deadline() == 92_700 + 12_000
