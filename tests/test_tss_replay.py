"""The TSS anti-replay window on its own (behaviour.md §5.6; uet/tss/replay.py).

The TSS tests drive the window through whole secure packets; these feed sequence numbers directly,
so each rule of the sliding bitmap is asked once: a replay of a packet accepted *out of order*,
the replay right after a jump of a whole window, the stale edge, the size limits, and a model
check against a plain set of everything seen.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uet.tss.replay import DEFAULT_WINDOW, ReplayWindow


def accept(w: ReplayWindow, seq: int) -> str | None:
    """What a receiver does: check, and record only what was accepted."""
    verdict = w.check(seq)
    if verdict is None:
        w.update(seq)
    return verdict


def test_first_sequence_is_accepted_and_becomes_top() -> None:
    w = ReplayWindow(8)
    assert w.check(0) is None
    w.update(0)
    assert w.top == 0
    assert w.check(0) == "replay"


def test_replay_of_a_packet_accepted_out_of_order_is_rejected() -> None:
    w = ReplayWindow(16)
    assert accept(w, 10) is None
    assert accept(w, 7) is None  # late, inside the window: accepted once
    assert w.top == 10
    assert w.check(7) == "replay"
    assert w.check(8) is None and w.check(9) is None  # neighbours still unseen


def test_replay_right_after_a_jump_of_a_whole_window() -> None:
    w = ReplayWindow(8)
    for seq in range(4):
        assert accept(w, seq) is None
    assert accept(w, 3 + 8) is None  # jump by exactly the window size
    assert w.check(11) == "replay"
    assert w.check(3) == "stale"  # 11 - 3 == size: just out of the window
    assert w.check(4) is None  # inside the window, never seen
    assert accept(w, 100) is None  # a jump of more than a window
    assert w.check(100) == "replay"
    assert w.check(99) is None and w.check(92) == "stale"


def test_stale_edge_of_the_default_window() -> None:
    w = ReplayWindow()
    assert w.size == DEFAULT_WINDOW == 4096
    w.update(10_000)
    assert w.check(10_000 - 4095) is None  # overtaken by 4095 later sequences: still fine
    assert w.check(10_000 - 4096) == "stale"


@pytest.mark.parametrize("size", [0, -1])
def test_window_size_must_be_positive(size: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        ReplayWindow(size)


def test_window_of_one_keeps_only_the_top() -> None:
    w = ReplayWindow(1)
    assert accept(w, 5) is None
    assert w.check(5) == "replay"
    assert w.check(4) == "stale"
    assert accept(w, 6) is None and w.check(5) == "stale"


def test_bitmap_never_grows_past_the_window() -> None:
    """Memory stays bounded however long the sender runs (no unbounded growth on hostile input)."""
    w = ReplayWindow(8)
    for seq in range(40):
        assert accept(w, seq) is None
        assert w._bits.bit_length() <= w.size and w._run <= w.size
    assert all(w.check(seq) == "replay" for seq in range(32, 40))  # all eight in-window sequences recorded
    assert w.check(31) == "stale"


def test_in_order_run_longer_than_the_window_then_late_and_replayed_packets() -> None:
    """The in-order run (kept as a count) across the window's size, then a gap, a late packet
    inside the window and replays on both sides of the fold."""
    w = ReplayWindow(8)
    for seq in range(20):
        if seq != 14:  # 14 is late
            assert accept(w, seq) is None
        assert w._run <= w.size
    assert w.check(14) is None and w.check(19) == "replay" and w.check(15) == "replay"
    assert accept(w, 14) is None and w.check(14) == "replay"
    assert accept(w, 23) is None  # a gap: 20-22 unseen
    assert [w.check(s) for s in (20, 21, 22, 23, 19, 16, 15)] == [
        None,
        None,
        None,
        "replay",
        "replay",
        "replay",
        "stale",
    ]
    assert accept(w, 24) is None and accept(w, 21) is None
    assert [w.check(s) for s in (20, 21, 22, 24)] == [None, "replay", None, "replay"]


@settings(max_examples=200)
@given(size=st.integers(1, 12), seqs=st.lists(st.integers(0, 40), max_size=60))
def test_window_matches_a_model_of_everything_seen(size: int, seqs: list[int]) -> None:
    w = ReplayWindow(size)
    seen: set[int] = set()
    top = -1
    for seq in seqs:
        if seq > top:
            expected = None
        elif top - seq >= size:
            expected = "stale"
        else:
            expected = "replay" if seq in seen else None
        assert accept(w, seq) == expected, (seq, top, sorted(seen))
        if expected is None:
            seen.add(seq)
            top = max(top, seq)
        assert w.top == top
        assert w._bits.bit_length() <= size and w._run <= size
