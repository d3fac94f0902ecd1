"""tests/hang_guard.py: the guard ends a hang, and time spent waiting for a CPU does not count."""

from __future__ import annotations

import asyncio

import hang_guard
import pytest
from hang_guard import within


async def test_a_result_in_time_is_returned() -> None:
    async def step() -> int:
        await asyncio.sleep(0)
        return 7

    assert await within(step(), 30) == 7


async def test_a_hang_raises_and_is_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 100.0])  # the start, then far beyond the budget (the thread slept in the poll)
    monkeypatch.setattr(hang_guard, "own_time", lambda: next(clock))
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    with pytest.raises(TimeoutError):
        await within(never, 0.001)
    assert never.cancelled()


async def test_time_spent_waiting_for_a_cpu_does_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that takes longer than the budget in wall time, all of it (as the fake clock says)
    waiting for a CPU, is not a hang: its result comes back."""
    monkeypatch.setattr(hang_guard, "own_time", lambda: 0.0)

    async def slow_step() -> str:
        for _ in range(5):
            await asyncio.sleep(0.002)
        return "done"

    assert await within(slow_step(), 0.001) == "done"


def test_run_delay_is_read_and_never_goes_back() -> None:
    first = hang_guard.run_delay()
    sum(range(200_000))
    assert 0.0 <= first <= hang_guard.run_delay()
