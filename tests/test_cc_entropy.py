"""Path selection (spec/behaviour.md §4.6) with exact feedback: REPS recycling, freezing and
exploration; the bitmap penalties; oblivious spraying covers every EV once per round."""

from __future__ import annotations

import random

from uet.cc import Bitmap, CcConfig, Oblivious, Reps, Single

CFG = CcConfig(paths=16)


def test_reps_recycles_good_entropies_oldest_first_once_each() -> None:
    r = Reps(random.Random(1), CFG)
    b = r.base
    for e in (b + 3, b + 7, b + 5):
        r.feedback(e, "ack", 100)
    r.feedback(b + 9, "ecn", 100)  # marked: not recycled
    r.feedback(b + 11, "trim", 100)
    assert [r.next_entropy() for _ in range(3)] == [b + 3, b + 7, b + 5]
    x = r.next_entropy()  # buffer empty: a random EV of the space
    assert b <= x < b + 16 and r.stats["random"] == 1 and r.stats["recycled"] == 3


def test_reps_buffer_keeps_the_newest_eight() -> None:
    r = Reps(random.Random(2), CFG)
    b = r.base
    for i in range(10):
        r.feedback(b + i, "ack", 0)
    assert [r.next_entropy() for _ in range(8)] == [b + i for i in range(2, 10)]


def test_reps_freezes_on_timeout_then_explores() -> None:
    r = Reps(random.Random(3), CFG)
    b = r.base
    for e in (b + 1, b + 2, b + 4):
        r.feedback(e, "ack", 1_000)
    r.feedback(b + 6, "timeout", 2_000)
    assert r.frozen_until == 2_000 + 10_000_000
    # frozen: the cached good EVs are reused cyclically, not consumed; new ACKs do not enter
    r.feedback(b + 8, "ack", 3_000)
    assert [r.next_entropy() for _ in range(5)] == [b + 1, b + 2, b + 4, b + 1, b + 2]
    r.feedback(b + 8, "timeout", 4_000)  # already frozen: no new freeze
    assert r.stats["freezes"] == 1
    # leaving the freeze clears the buffer and explores 16 random EVs
    r.feedback(b + 12, "ack", 2_000 + 10_000_000)
    assert r.frozen_until is None and r.explore == 16
    got = [r.next_entropy() for _ in range(15)]
    r.feedback(b + 13, "timeout", 10_100_000)  # still exploring: no freeze
    assert r.frozen_until is None
    got.append(r.next_entropy())
    assert all(b <= e < b + 16 for e in got) and r.stats["explored"] == 16
    assert r.next_entropy() == b + 12  # the ACK that ended the freeze was recorded


def test_reps_no_freeze_without_trimming() -> None:
    r = Reps(random.Random(4), CcConfig(paths=16, trimming=False))
    r.feedback(r.base, "timeout", 5)
    assert r.frozen_until is None


def test_bitmap_skips_penalised_entropies() -> None:
    m = Bitmap(random.Random(5), CcConfig(paths=4))
    b = m.base
    m.feedback(b + 1, "timeout")
    m.feedback(b + 2, "trim")
    m.feedback(b + 3, "ecn")
    assert m.penalty == [0, 15, 4, 1]
    got = [m.next_entropy() for _ in range(8)]
    # a penalised EV is skipped once per penalty point: b+1 (15) is not chosen for a long
    # time, b+3 (1) only after one skip
    assert b + 1 not in got and got.count(b) >= 4
    assert b + 3 not in got[:1]
    assert m.penalty[1] + m.penalty[2] + m.penalty[3] == 15 + 4 + 1 - m.stats["skipped"]
    m.feedback(b + 1, "trim")
    assert m.penalty[1] <= 15


def test_oblivious_uses_each_entropy_once_per_round_and_single_one() -> None:
    o = Oblivious(random.Random(6), CFG)
    assert sorted(o.next_entropy() for _ in range(16)) == list(range(o.base, o.base + 16))
    s = Single(random.Random(7))
    assert len({s.next_entropy() for _ in range(5)}) == 1
