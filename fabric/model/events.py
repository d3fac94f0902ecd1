"""Virtual-time event queue shared by the switches and links of one fabric.

The model never reads a clock (architecture.md principle 4): callers hand in the time, the queue
holds what must happen later (a link finishing a frame, a frame arriving at the far end of a link,
a pause expiring, a PFC refresh, a watchdog poll) and runs it when the caller's time reaches it.
Events at the same nanosecond run in the order they were scheduled, so a run is deterministic.

**One bucket per instant.** Links of one rate carrying frames of one size finish and deliver at
the same nanoseconds, so a fabric's events crowd onto few instants (a 1,024-host permutation:
about 125 events per distinct time, 40,000 pending at once). The queue therefore keeps, per
pending time, the list of its events in scheduling order: scheduling at a time already pending is
a look-up and an append, and running an instant takes one bucket. The order is exactly the one a
heap of ``(time, sequence number)`` gives, so every run is unchanged by it.

**Near times in a sorted list, far ones in a heap.** The earliest pending times (at most
:data:`NEAR_MAX`) are a list in ascending order from a head index, beside the list of their
buckets; the later ones, each after every near time, are a heap of times beside a dict time →
bucket. Running an instant reads the time and bucket at the head and moves the head on (the run
ones are removed 32 at a time); scheduling finds its time among the near ones (a few steps back
from the latest, where a new time nearly always falls, then a binary search) or in the dict
beyond them, and inserts a new one in its place; the latest near time moves to the heap when the
near list is full, and the earliest far times move back (up to half the list) when it is empty.
**Decision** (issue 28): a one-flow run has at most 43 distinct times pending (a 15→1 incast 335,
a 1,024-host permutation at 64 KiB 445; about 40, 52 and 360 on average, and a new time has on
average 5, 9 and 25 pending ones after it), and nearly every instant of one flow holds one event,
which cost a heap pop, a dict look-up and a dict delete (about 1,400 instructions of the compiled
build) and, when scheduled, a dict insert and a heap push; reading and moving the head and an
insertion moving a few pointers cost about half of that. The bound keeps the moves short and the
cost of a new time logarithmic when far more times are pending. The queue remembers the two times
it gave buckets for last: a 1,024-host permutation's instants hold about 125 events each, which
schedule at one or two times (the frames' arrivals, their links' ends), so most look-ups there
find the time without a search (a search for a time already pending cost more than the dict's
look-up did).

**Flat buckets.** A bucket holds its events' three parts one after the other, ``[fn, a, b, fn, a,
b, ...]``, not one tuple per event: a tuple is a garbage-collected object, made, linked into the
collector's list, unlinked and freed once per event (about one per packet-hop), and unlinking it
writes to its neighbours in that list, which a 1,024-host run finds in no cache (issue 28: 2.3 %
of the row's time in ``PyObject_GC_UnTrack`` alone). Three appends to a list whose storage is
already there touch nothing new.

**The heap, compiled.** ``heapq.heappop`` compares the heap's ints through the generic rich
comparison, about 1,000 instructions a pop on a one-flow row, and ``heappush`` about 280 a push
with its call. The compiled build pops and pushes the far heap with :func:`pop_time` and
:func:`push_time` instead (when :data:`NATIVE_HEAP`), and searches the near list with its own
binary search (pure Python: ``bisect``): the same heap, ints compared natively, objects moved
without boxing. The heap holds *distinct* times (one per bucket), so any correct pop gives the
same time: the order events run in is unchanged. Pure Python keeps ``heapq`` and ``bisect`` (C,
faster than any interpreted search).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable
from typing import Any, Final

from uet.fabric.model import COMPILED

#: One scheduled event: ``fn(a, b, time)`` runs at its time.
Event = tuple[Callable[[Any, Any, int], None], Any, Any]


#: the compiled build: push and pop with :func:`push_time` and :func:`pop_time`, not ``heapq``
#: (module docstring); everything that pushes or pops the heap of times reads it
NATIVE_HEAP: Final = COMPILED
#: the most pending distinct times kept in the sorted near list (module docstring)
NEAR_MAX: Final = 4096


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


#: what a run instant's place in ``EventQueue._nb`` holds until it is removed (never appended to)
_DONE: Final[list[Any]] = []


class EventQueue:
    """Events by time (see the module docstring); :meth:`run_until` calls ``fn(a, b, time)``."""

    __slots__ = ("_near", "_nb", "_head", "_times", "_at", "_c1", "_q1", "_c2", "_q2", "now")

    #: The model's hot path (uet.fabric.model.switch, .nic) schedules by hand: ``q =
    #: ev.bucket(t)`` (the instant's flat bucket, made when none exists), then ``q.append(fn)``,
    #: ``q.append(a)``, ``q.append(b)``. That is the contract (a bucket is flat: the module
    #: docstring); the loops that run instants (:meth:`run_instant`, ``Fabric.run_to_arrival``)
    #: take the instant at ``_head`` and close it with :meth:`done`.

    def __init__(self) -> None:
        #: the earliest pending distinct times in ascending order from ``_head`` on, at most
        #: :data:`NEAR_MAX` of them (module docstring), and their buckets (``_nb[i]`` is the bucket
        #: of ``_near[i]``); the items before ``_head`` are instants already run (their buckets
        #: dropped), removed in batches. The running instant stays at ``_head`` while it runs, so
        #: an event scheduled for the running instant joins its bucket and runs in turn
        self._near: list[int] = []
        self._nb: list[list[Any]] = []
        self._head = 0
        #: the later pending times (every one after every near time): a heap, and time → its
        #: events in scheduling order, flat (``[fn, a, b, fn, a, b, ...]``)
        self._times: list[int] = []
        self._at: dict[int, list[Any]] = {}
        #: the two times :meth:`bucket` gave last and their buckets (-1: none): the events of one
        #: instant mostly schedule at the same one or two times (a frame's arrival at the far end
        #: of its link, its link's end of the frame), found here without a search
        self._c1 = -1
        self._q1: list[Any] = _DONE
        self._c2 = -1
        self._q2: list[Any] = _DONE
        #: Time of the event being run, or the last time :meth:`run_until` reached.
        self.now = 0

    def bucket(self, t: int) -> list[Any]:
        """The flat bucket of the instant ``t`` (never earlier than now), made empty and queued
        when ``t`` has none yet: the caller appends ``fn``, ``a`` and ``b`` to it."""
        if t == self._c1:
            return self._q1
        if t == self._c2:
            return self._q2
        self._c2 = self._c1
        self._q2 = self._q1
        self._c1 = t  # (its bucket, below, as it is returned)
        q: list[Any]
        near = self._near
        n = len(near)
        head = self._head
        if n > head and t <= near[n - 1]:  # within the near times: found, or inserted among them
            # the first index from ``head`` whose time is >= t: a new time usually falls among the
            # last few, so a few steps back from the end first, then a binary search
            if NATIVE_HEAP:
                i = n - 1
                stop = i - 8 if i - 8 > head else head
                while i > stop:
                    m: int = near[i - 1]
                    if m < t:
                        break
                    i -= 1
                else:
                    lo = head
                    while lo < i:  # (compiled: native ints)
                        mid = (lo + i) >> 1
                        m2: int = near[mid]
                        if m2 < t:
                            lo = mid + 1
                        else:
                            i = mid
            else:
                i = bisect_left(near, t, head, n - 1)
            if near[i] == t:
                q = self._q1 = self._nb[i]
                return q
            q = self._q1 = []
            near.insert(i, t)
            self._nb.insert(i, q)
            if n - head >= NEAR_MAX:  # one too many: the latest near time joins the far ones
                last = near.pop()
                self._at[last] = self._nb.pop()
                if NATIVE_HEAP:
                    push_time(self._times, last)
                else:
                    heapq.heappush(self._times, last)
            return q
        times = self._times
        if times:
            far = self._at.get(t)
            if far is not None:
                self._q1 = far
                return far
            q = self._q1 = []
            if n - head < NEAR_MAX and t < times[0]:
                near.append(t)
                self._nb.append(q)
                return q
            self._at[t] = q
            if NATIVE_HEAP:
                push_time(times, t)
            else:
                heapq.heappush(times, t)
            return q
        q = self._q1 = []
        if n - head < NEAR_MAX:
            near.append(t)
            self._nb.append(q)
        else:
            self._at[t] = q
            times.append(t)
        return q

    def refill(self) -> bool:
        """Whether an instant is pending; when no near time is, first move the earliest far
        times and their buckets (up to half of :data:`NEAR_MAX`) to the near ones."""
        if self._head < len(self._near):
            return True
        times = self._times
        if not times:
            return False
        near = self._near
        nb = self._nb
        at = self._at
        k = NEAR_MAX // 2 if NEAR_MAX > 1 else 1
        while times and k:
            t = pop_time(times) if NATIVE_HEAP else heapq.heappop(times)
            near.append(t)
            nb.append(at.pop(t))
            k -= 1
        return True

    def done(self, head: int, t: int) -> None:
        """The instant ``t`` at ``head`` (``_head``) has run: the next one becomes the head; the
        run ones are removed when none is left, or 32 at a time (a move of the rest)."""
        self._nb[head] = _DONE  # its events go now, not with the batch
        if self._c1 == t:  # a later event at ``t`` (the same nanosecond) makes a new bucket
            self._c1 = -1
            self._q1 = _DONE
        elif self._c2 == t:
            self._c2 = -1
            self._q2 = _DONE
        head += 1
        near = self._near
        if head == len(near):
            near.clear()
            self._nb.clear()
            head = 0
        elif head >= 32:
            del near[:head]
            del self._nb[:head]
            head = 0
        self._head = head

    def schedule(self, t: int, fn: Callable[[Any, Any, int], None], a: Any = None, b: Any = None) -> None:
        """Run ``fn(a, b, t)`` when the caller's time reaches ``t`` (never earlier than now)."""
        q = self.bucket(t)
        q.append(fn)
        q.append(a)
        q.append(b)

    def next_time(self) -> int | None:
        """Time of the earliest pending event, or None when nothing is pending."""
        if self._head < len(self._near):
            return self._near[self._head]
        return self._times[0] if self._times else None

    def run_instant(self) -> int:
        """Run every event of the earliest pending instant (those it schedules for itself too);
        returns how many ran. The queue must not be empty."""
        self.refill()
        head = self._head
        t = self._near[head]
        self.now = t
        q = self._nb[head]
        i = 0
        while i < len(q):  # the length read each time: what is appended while it runs runs too
            fn = q[i]
            fn(q[i + 1], q[i + 2], t)
            i += 3
        self.done(head, t)
        return i // 3

    def run_until(self, now: int) -> int:
        """Run every event due at or before ``now`` in time order; returns how many ran."""
        n = 0
        while self.refill():
            if self._near[self._head] > now:
                break
            n += self.run_instant()
        if now > self.now:
            self.now = now
        return n

    def __len__(self) -> int:
        return (sum(map(len, self._nb[self._head :])) + sum(map(len, self._at.values()))) // 3
