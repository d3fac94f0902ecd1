"""A guard against a hang that the machine's load does not trip.

``asyncio.wait_for(aw, 10)`` fails after ten seconds of wall clock, and on a shared machine a
process can wait most of those ten seconds for a CPU: at a load of 19 on two cores, a step that
needs one second of CPU under coverage takes ten. :func:`within` counts only the time the
calling thread could have run: the wall clock minus the time it spent runnable but waiting for a
CPU (Linux's ``run_delay``, the second field of ``/proc/thread-self/schedstat``). A hang, a
coroutine waiting forever for an arrival or a timer, sleeps in the event loop's poll, and that
time counts in full, so the guard still ends it after ``seconds``; the machine's load does not.
Where the kernel does not keep the figure, the guard falls back to the wall clock.

The guard only ends a test that would otherwise never end: what a test checks never depends on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

_SCHEDSTAT = Path("/proc/thread-self/schedstat")


def run_delay() -> float:
    """Seconds the calling thread has spent runnable but waiting for a CPU (0.0 where unknown)."""
    try:
        return int(_SCHEDSTAT.read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def own_time() -> float:
    """A clock that advances while this thread runs or sleeps, not while it waits for a CPU."""
    return time.monotonic() - run_delay()


async def within(aw: Awaitable[T], seconds: float) -> T:
    """Await ``aw``; raise :class:`TimeoutError` (cancelling it) once it has taken ``seconds`` of
    :func:`own_time`: a hang still fails the test, a loaded machine does not."""
    task = asyncio.ensure_future(aw)
    start = own_time()
    left = seconds
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=left)
            if done:
                return task.result()
            left = seconds - (own_time() - start)
            if left <= 0:
                raise TimeoutError(f"no result after {seconds} s of the thread's own time (a hang)")
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
