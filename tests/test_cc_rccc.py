"""RCCC (spec/behaviour.md §4.5): the receiver pacer in virtual time and the source's credit.

100 Gb/s × pull rate 0.99 = 12.375 bytes/ns; a grant is 4 MTUs = 16 384 B = 64 quanta of 256 B,
so full grants are int(16384 / 12.375) = 1323 ns apart.
"""

from __future__ import annotations

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
    t = 0
    while s.deadline() is not None:
        t = s.deadline()
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
    assert c.request_deadline() == c.last_req + 12_000
    c.on_request_sent(5_000)
    assert c.request_deadline() == 17_000
    c.pull = 0xFFFFF0
    c.on_grant(0x000010, 6_000)  # 24-bit wrap: 32 quanta
    assert c.credit == pytest.approx(32 * 256)
    assert diff24(0x000010, 0xFFFFF0) == 32
