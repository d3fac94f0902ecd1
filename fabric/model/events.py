"""Virtual-time event queue shared by the switches and links of one fabric.

The model never reads a clock (architecture.md principle 4): callers hand in the time, the queue
holds what must happen later (a link finishing a frame, a frame arriving at the far end of a link,
a pause expiring, a PFC refresh, a watchdog poll) and runs it when the caller's time reaches it.
Events at the same nanosecond run in the order they were scheduled, so a run is deterministic.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any


class EventQueue:
    """A heap of ``(time, seq, fn, a, b)``; :meth:`run_until` calls ``fn(a, b, time)``."""

    __slots__ = ("_heap", "_seq", "now")

    #: The model's hot path (uet.fabric.model.switch) pushes ``(t, next(queue._seq), fn, a, b)``
    #: onto ``_heap`` itself, saving a call per frame per hop; the entry shape is the contract.

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Callable[[Any, Any, int], None], Any, Any]] = []
        self._seq = itertools.count(1)
        #: Time of the event being run, or the last time :meth:`run_until` reached.
        self.now = 0

    def schedule(self, t: int, fn: Callable[[Any, Any, int], None], a: Any = None, b: Any = None) -> None:
        """Run ``fn(a, b, t)`` when the caller's time reaches ``t`` (never earlier than now)."""
        heapq.heappush(self._heap, (t, next(self._seq), fn, a, b))

    def next_time(self) -> int | None:
        """Time of the earliest pending event, or None when nothing is pending."""
        return self._heap[0][0] if self._heap else None

    def run_until(self, now: int) -> int:
        """Run every event due at or before ``now`` in time order; returns how many ran."""
        heap = self._heap
        pop = heapq.heappop
        n = 0
        while heap and heap[0][0] <= now:
            t, _, fn, a, b = pop(heap)
            self.now = t
            fn(a, b, t)
            n += 1
        if now > self.now:
            self.now = now
        return n

    def __len__(self) -> int:
        return len(self._heap)
