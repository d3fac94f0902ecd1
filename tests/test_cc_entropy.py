"""Path selection (spec/behaviour.md §4.6) with exact feedback: REPS recycling, freezing and
exploration; the bitmap penalties; oblivious spraying covers every EV once per round."""

from __future__ import annotations

import random

from uet.cc import Bitmap, CcConfig, Oblivious, Reps, Single
from uet.cc.entropy import below

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


class _LowRng(random.Random):
    """Records every ``randrange`` call and answers its lowest value."""

    def __init__(self) -> None:
        super().__init__(0)
        self.calls: list[tuple[int, ...]] = []

    def randrange(self, *args: int) -> int:  # type: ignore[override]
        self.calls.append(args)
        return args[0] if len(args) > 1 else 0


def test_entropy_spaces_stay_above_the_well_known_ports() -> None:
    """EVs are UDP source ports from 0x4000 up (§4.6); a space of ``paths`` EVs fits below
    0x10000: the base is drawn from [0x4000, 0x10000 − paths]."""
    rng = _LowRng()
    s = Single(rng)
    assert rng.calls == [(0x4000, 0x10000)] and s.next_entropy() == 0x4000
    for cls in (Oblivious, Reps, Bitmap):
        rng = _LowRng()
        sel = cls(rng, CcConfig(paths=16))
        assert rng.calls[0] == (0x4000, 0x10000 - 16 + 1) and sel.base == 0x4000


def test_reps_stats_and_frozen_reuse_from_the_oldest_cached_entropy() -> None:
    r = Reps(random.Random(8), CFG)
    b = r.base
    for i in range(10):  # the buffer wraps: slots hold b+8, b+9, b+2 ... b+7; oldest is b+2
        r.feedback(b + i, "ack", 10)
    r.feedback(b + 15, "timeout", 20)
    assert r.frozen_until == 20 + 10_000_000 and r.cursor == 2
    assert [r.next_entropy() for _ in range(9)] == [b + i for i in range(2, 10)] + [b + 2]
    assert r.stats == {"recycled": 0, "random": 0, "explored": 0, "frozen_reuse": 9, "freezes": 1}


def test_reps_frozen_with_an_empty_buffer_draws_at_random() -> None:
    r = Reps(random.Random(9), CFG)
    r.feedback(r.base, "timeout")  # no time given: ``now`` 0
    assert r.frozen_until == 10_000_000
    x = r.next_entropy()
    assert r.base <= x < r.base + 16 and r.stats["random"] == 1 and r.stats["frozen_reuse"] == 0


def test_reps_time_never_goes_back() -> None:
    r = Reps(random.Random(10), CFG)
    r.feedback(r.base, "ecn", 5_000)
    r.feedback(r.base, "ecn", 1_000)  # an older time: the clock stays at 5 µs
    r.feedback(r.base + 1, "timeout", 2_000)
    assert r.now == 5_000 and r.frozen_until == 5_000 + 10_000_000


def test_bitmap_walks_every_entropy_once_per_round_when_paths_is_not_a_power_of_two() -> None:
    m = Bitmap(random.Random(11), CcConfig(paths=5))
    assert m.size == 8
    b = m.base
    for _ in range(4):  # each round is a permutation of the 5 EVs; a new XOR mask per round
        assert sorted(m.next_entropy() for _ in range(5)) == [b + i for i in range(5)]
    one = Bitmap(random.Random(12), CcConfig(paths=1))
    assert one.size == 1 and {one.next_entropy() for _ in range(3)} == {one.base}


def test_bitmap_penalties_loss_cap_and_range() -> None:
    m = Bitmap(random.Random(13), CcConfig(paths=4))
    b = m.base
    m.feedback(b, "loss")  # an inferred loss counts as a trim: +4
    assert m.penalty == [4, 0, 0, 0]
    for _ in range(4):
        m.feedback(b + 1, "trim")
    assert m.penalty[1] == 15  # 16 capped
    m.feedback(b + 2, "ack")
    m.feedback(b + 4, "timeout")  # outside the space: ignored
    m.feedback(b - 1, "ecn")
    assert m.penalty == [4, 15, 0, 0]
    m.feedback(b + 3, "ecn")
    assert m.penalty == [4, 15, 0, 1]


def test_reps_exploration_draws_at_random_and_leaves_the_buffer_alone() -> None:
    r = Reps(random.Random(14), CFG)
    b = r.base
    r.feedback(b + 3, "timeout", 0)
    r.feedback(b + 5, "ack", 10_000_000)  # the freeze ends, then b + 5 is cached
    assert r.explore == 16
    for _ in range(16):
        r.next_entropy()
    assert r.stats["explored"] == 16 and r.stats["recycled"] == 0  # b + 5 still cached
    assert r.next_entropy() == b + 5 and r.stats["recycled"] == 1


def test_bitmap_first_round_covers_every_entropy_and_each_round_draws_a_new_order() -> None:
    for seed in range(8):
        m = Bitmap(random.Random(seed), CcConfig(paths=16))
        rounds = [[m.next_entropy() for _ in range(16)] for _ in range(4)]
        assert all(sorted(r) == list(range(m.base, m.base + 16)) for r in rounds)
        assert len({tuple(r) for r in rounds}) > 1  # a new XOR mask at each wrap


def test_below_draws_what_randrange_draws() -> None:
    """The per-packet draw of the selectors (entropy.below) is randrange's, draw for draw, so the
    figures of every run stay what they were."""
    a, b = random.Random(5), random.Random(5)
    for n in (1, 2, 3, 7, 64, 127, 128, 129, 1000, 1 << 16):
        assert [below(a, n) for _ in range(200)] == [b.randrange(n) for _ in range(200)]
