"""Virtual-time event queue shared by the switches and links of one fabric.

The model never reads a clock (architecture.md principle 4): callers hand in the time, the queue
holds what must happen later (a link finishing a frame, a frame arriving at the far end of a link,
a pause expiring, a PFC refresh, a watchdog poll) and runs it when the caller's time reaches it.
Events at the same nanosecond run in the order they were scheduled, so a run is deterministic.

**One bucket per instant.** Links of one rate carrying frames of one size finish and deliver at
the same nanoseconds, so a fabric's events crowd onto few instants (a 1,024-host permutation:
about 125 events per distinct time, 40,000 pending at once). The queue therefore keeps a heap of
the distinct pending *times* (plain ints) and, per time, the list of its events in scheduling
order: scheduling at a time already pending is one dict look-up and an append, and running an
instant pops the heap once. The order is exactly the one a heap of ``(time, sequence number)``
gives, so every run is unchanged by it.

**Flat buckets.** A bucket holds its events' three parts one after the other, ``[fn, a, b, fn, a,
b, ...]``, not one tuple per event: a tuple is a garbage-collected object, made, linked into the
collector's list, unlinked and freed once per event (about one per packet-hop), and unlinking it
writes to its neighbours in that list, which a 1,024-host run finds in no cache (issue 28: 2.3 %
of the row's time in ``PyObject_GC_UnTrack`` alone). Three appends to a list whose storage is
already there touch nothing new.

**The heap, compiled.** ``heapq.heappop`` compares the heap's ints through the generic rich
comparison, about 1,000 instructions a pop on a one-flow row (a sixth of the queue's cost per
event there), and ``heappush`` about 280 a push with its call. The compiled build pops and pushes
with :func:`pop_time` and :func:`push_time` instead (when :data:`NATIVE_HEAP`): the same heap,
ints compared natively, objects moved without boxing. The heap holds *distinct* times (one per
bucket), so any correct pop gives the same time: the order events run in is unchanged. Pure
Python keeps ``heapq`` (C, faster than any interpreted heap).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Final

from uet.fabric.model import COMPILED

#: One scheduled event: ``fn(a, b, time)`` runs at its time.
Event = tuple[Callable[[Any, Any, int], None], Any, Any]


#: the compiled build: push and pop with :func:`push_time` and :func:`pop_time`, not ``heapq``
#: (module docstring); everything that pushes or pops the heap of times reads it
NATIVE_HEAP: Final = COMPILED


def push_time(times: list[Any], t_o: Any) -> None:
    """Push the int ``t_o`` onto the binary min-heap ``times`` (as ``heapq.heappush``: the heap
    stays one ``heapq`` accepts). For the compiled build, which compares the ints natively; pure
    Python uses ``heapq.heappush``."""
    t: int = t_o
    i = len(times)
    times.append(t_o)
    while i > 0:  # move the new item up while its parent is larger
        p = (i - 1) >> 1
        p_o = times[p]
        pt: int = p_o
        if pt <= t:
            break
        times[i] = p_o
        i = p
    times[i] = t_o


def pop_time(times: list[Any]) -> Any:
    """Pop the smallest int of the binary min-heap ``times`` (as ``heapq.heappop``: the heap
    stays one ``heapq`` accepts) and return that object. For the compiled build, which compares
    the ints natively; pure Python uses ``heapq.heappop``. The heap must not be empty."""
    last_o = times.pop()
    n = len(times)
    if n == 0:
        return last_o
    top_o = times[0]
    last: int = last_o
    i = 0
    c = 1
    while c < n:  # sift the former last item down from the root, the smaller child up
        x_o = times[c]
        x: int = x_o
        r = c + 1
        if r < n:
            y_o = times[r]
            y: int = y_o
            if y < x:
                c = r
                x_o = y_o
                x = y
        if last <= x:
            break
        times[i] = x_o
        i = c
        c = 2 * c + 1
    times[i] = last_o
    return top_o


class EventQueue:
    """Events by time (see the module docstring); :meth:`run_until` calls ``fn(a, b, time)``."""

    __slots__ = ("_times", "_at", "now")

    #: The model's hot path (uet.fabric.model.switch) schedules by hand, saving a call per frame
    #: per hop: ``q = _at.get(t)``, then ``q.append(fn)``, ``q.append(a)``, ``q.append(b)``, or,
    #: when no bucket exists, ``_at[t] = [fn, a, b]`` and ``heappush(_times, t)`` (``push_time``
    #: when :data:`NATIVE_HEAP`). That is the
    #: contract (a bucket is flat: the module docstring).

    def __init__(self) -> None:
        #: heap of the distinct times that have events pending
        self._times: list[int] = []
        #: time → its events in scheduling order, flat (``[fn, a, b, fn, a, b, ...]``: the module
        #: docstring); a bucket stays while its instant runs, so an event scheduled for the
        #: running instant joins it and runs in turn
        self._at: dict[int, list[Any]] = {}
        #: Time of the event being run, or the last time :meth:`run_until` reached.
        self.now = 0

    def schedule(self, t: int, fn: Callable[[Any, Any, int], None], a: Any = None, b: Any = None) -> None:
        """Run ``fn(a, b, t)`` when the caller's time reaches ``t`` (never earlier than now)."""
        q = self._at.get(t)
        if q is None:
            self._at[t] = [fn, a, b]
            if NATIVE_HEAP:
                push_time(self._times, t)
            else:
                heapq.heappush(self._times, t)
        else:
            q.append(fn)
            q.append(a)
            q.append(b)

    def next_time(self) -> int | None:
        """Time of the earliest pending event, or None when nothing is pending."""
        return self._times[0] if self._times else None

    def run_instant(self) -> int:
        """Run every event of the earliest pending instant (those it schedules for itself too);
        returns how many ran. The queue must not be empty."""
        t: int = pop_time(self._times) if NATIVE_HEAP else heapq.heappop(self._times)
        self.now = t
        q = self._at[t]
        i = 0
        while i < len(q):  # the length read each time: what is appended while it runs runs too
            fn = q[i]
            fn(q[i + 1], q[i + 2], t)
            i += 3
        del self._at[t]
        return i // 3

    def run_until(self, now: int) -> int:
        """Run every event due at or before ``now`` in time order; returns how many ran."""
        times = self._times
        n = 0
        while times and times[0] <= now:
            n += self.run_instant()
        if now > self.now:
            self.now = now
        return n

    def __len__(self) -> int:
        return sum(map(len, self._at.values())) // 3
