"""The fabric's event queue: time order, scheduling order within an instant, and events an
instant schedules for itself (uet.fabric.model.events)."""

from __future__ import annotations

from typing import Any

from uet.fabric.model.events import EventQueue


def test_events_run_in_time_then_scheduling_order() -> None:
    q = EventQueue()
    ran: list[tuple[int, Any]] = []

    def rec(a: Any, b: Any, t: int) -> None:
        ran.append((t, a))

    for t, name in [(30, "c1"), (10, "a1"), (30, "c2"), (20, "b1"), (10, "a2"), (30, "c3")]:
        q.schedule(t, rec, name)
    assert len(q) == 6 and q.next_time() == 10
    assert q.run_until(20) == 3
    assert ran == [(10, "a1"), (10, "a2"), (20, "b1")]
    assert q.now == 20 and q.next_time() == 30
    assert q.run_until(100) == 3
    assert [a for _, a in ran[3:]] == ["c1", "c2", "c3"]
    assert q.now == 100 and q.next_time() is None and len(q) == 0


def test_an_event_scheduled_for_the_running_instant_runs_in_it_after_the_others() -> None:
    q = EventQueue()
    ran: list[tuple[int, str]] = []

    def first(a: Any, b: Any, t: int) -> None:
        ran.append((t, "first"))
        q.schedule(t, last, None)  # the same nanosecond: after what was already due then
        q.schedule(t + 5, later, None)

    def second(a: Any, b: Any, t: int) -> None:
        ran.append((t, "second"))

    def last(a: Any, b: Any, t: int) -> None:
        ran.append((t, "last"))

    def later(a: Any, b: Any, t: int) -> None:
        ran.append((t, "later"))

    q.schedule(7, first)
    q.schedule(7, second)
    assert q.run_instant() == 3
    assert ran == [(7, "first"), (7, "second"), (7, "last")]
    assert q.next_time() == 12
    q.schedule(7 + 5, second)  # joins the pending instant, after ``later``
    assert q.run_until(12) == 2
    assert ran[3:] == [(12, "later"), (12, "second")]


def test_a_bucket_holds_its_events_flat_in_scheduling_order() -> None:
    """Issue 28: an instant's bucket is ``[fn, a, b, fn, a, b, ...]``, no tuple per event (the
    contract the switches' and NICs' hand-written scheduling keeps); running it calls each event
    once, in order, events it schedules for itself included, and empties the queue."""
    q = EventQueue()
    ran: list[tuple[Any, Any, int]] = []

    def rec(a: Any, b: Any, t: int) -> None:
        ran.append((a, b, t))
        if a == "x":
            q.schedule(t, rec, "y", None)

    q.schedule(5, rec, "x", 1)
    q.schedule(5, rec, "z")
    assert q.bucket(5) == [rec, "x", 1, rec, "z", None]
    assert len(q) == 2
    assert q.run_instant() == 3
    assert ran == [("x", 1, 5), ("z", None, 5), ("y", None, 5)]
    assert len(q) == 0 and not q._near and not q._nb and not q._at and not q._times and q._head == 0


def test_pop_time_pops_as_heapq_does_and_keeps_a_heap() -> None:
    """Issue 28: the compiled build's pop and push (events.pop_time, events.push_time): the pop
    returns the smallest time, the very object pushed, and both leave a heap that heapq's push
    and pop accept, at every size and with pushes between pops (distinct times: one per bucket)."""
    import heapq
    import random

    from uet.fabric.model.events import pop_time, push_time

    rng = random.Random(28)
    for size in (1, 2, 3, 4, 5, 7, 8, 9, 31, 200):
        times = rng.sample(range(1 << 40, (1 << 40) + 10 * size), size)
        heap: list[Any] = []
        for t in times:
            heapq.heappush(heap, t)
        ref = list(heap)
        out: list[int] = []
        while heap:
            ids = {id(x): x for x in heap}
            got = pop_time(heap)
            assert got is ids[id(got)]  # the object itself, not a new int
            out.append(got)
            assert all(heap[(c - 1) // 2] < heap[c] for c in range(1, len(heap)))  # still a heap
        assert out == sorted(times)
        assert [heapq.heappop(ref) for _ in range(size)] == out
    # interleaved pushes and pops (events.push_time, the compiled build's push), against heapq
    heap, ref = [], []
    pending: set[int] = set()
    for _ in range(3000):
        if pending and rng.random() < 0.45:
            a, b = pop_time(heap), heapq.heappop(ref)
            assert a == b == min(pending)
            pending.discard(a)
        else:
            t = rng.randrange(1 << 20)
            if t not in pending:
                pending.add(t)
                push_time(heap, t)
                heapq.heappush(ref, t)
        assert all(heap[(c - 1) // 2] < heap[c] for c in range(1, len(heap)))


def _scripted_run(q: EventQueue, drive: Any) -> list[tuple[int, str]]:
    """Events that schedule more events (same instant, later instants, ties) and the order they ran."""
    ran: list[tuple[int, str]] = []

    def ev(a: Any, b: Any, t: int) -> None:
        ran.append((t, a))
        for dt, name in b or ():
            q.schedule(t + dt, ev, name, None)

    q.schedule(10, ev, "a", [(0, "a+0"), (5, "a+5"), (3, "a+3")])
    q.schedule(10, ev, "b", [(0, "b+0"), (5, "b+5")])
    q.schedule(13, ev, "c", [(0, "c+0"), (2, "c+2")])
    q.schedule(15, ev, "d", [(1, "d+1")])
    q.schedule(12, ev, "e", [(3, "e+3"), (0, "e+0"), (4, "e+4")])
    for t in (40, 33, 36, 30, 31, 39, 35):
        q.schedule(t, ev, f"x{t}", [(0, f"x{t}+0")] if t % 2 else None)
    drive(q)
    return ran


def test_the_native_pop_runs_events_in_the_same_order(monkeypatch: Any) -> None:
    """Issue 28: the queue with the compiled build's pop (NATIVE_HEAP) runs the same events in
    the same order as with heapq's: same instants, ties, events scheduled while running."""
    from uet.fabric.model import events

    orders = []
    for native in (False, True):
        monkeypatch.setattr(events, "NATIVE_HEAP", native)
        orders.append(_scripted_run(EventQueue(), lambda q: q.run_until(1000)))
        # one instant at a time, as many as were pending before the first ran: a prefix of the run
        orders.append(_scripted_run(EventQueue(), lambda q: [q.run_instant() for _ in range(len(q._near) - q._head)]))
    assert orders[0][:8] == [
        (10, "a"),
        (10, "b"),
        (10, "a+0"),
        (10, "b+0"),
        (12, "e"),
        (12, "e+0"),
        (13, "c"),
        (13, "a+3"),
    ]
    assert orders[0] == orders[2]
    assert len(orders[0]) == 27  # 12 scheduled first, 15 by events as they ran
    assert orders[1] == orders[3] and orders[1] == orders[0][: len(orders[1])]


def test_run_to_arrival_with_the_native_pop_runs_events_in_the_same_order(monkeypatch: Any) -> None:
    """Issue 28: Fabric.run_to_arrival's inlined loop, with heapq's pop and search and the
    compiled build's, and with a near list so short that times pass through the far heap, on the
    same script of events (its generic branch: handlers that are no switch or NIC)."""
    from uet.fabric.model import events
    from uet.fabric.model.fabric import Fabric

    orders = []
    for native, near_max in ((False, 256), (True, 256), (False, 2), (True, 1)):
        monkeypatch.setattr(events, "NATIVE_HEAP", native)
        monkeypatch.setattr(events, "NEAR_MAX", near_max)
        fab = Fabric("lab")
        orders.append(_scripted_run(fab.events, lambda q, f=fab: f.run_to_arrival(35)))
        assert fab.now == 35 and fab.next_deadline() == 35 + 1
    assert orders[0] == orders[1] == orders[2] == orders[3]
    assert orders[0][-1][0] == 35 and all(t <= 35 for t, _ in orders[0])


def test_a_simulation_with_the_native_heap_gives_the_same_results(monkeypatch: Any) -> None:
    """Issue 28: a whole run (switches and NICs scheduling by hand, the fabric's loop running the
    instants) gives the same figures with the compiled build's heap and search functions as with
    heapq's and bisect's, and with a near list of 2 times (nearly every time through the heap)."""
    import json

    from uet.fabric.model import events

    from uet.sim.scenario import simulate

    s = {"workload": "permutation", "endpoints": 16, "message_bytes": 64 << 10, "messages": 1, "seed": 3}
    out = []
    for native, near_max in ((False, 256), (True, 256), (True, 2)):
        monkeypatch.setattr(events, "NATIVE_HEAP", native)
        monkeypatch.setattr(events, "NEAR_MAX", near_max)
        res = simulate(s)
        res.pop("timing")
        out.append(json.dumps(res, sort_keys=True))
    assert out[0] == out[1] == out[2]


def _near_far_run(script: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[tuple[int, int]], EventQueue]:
    """Run ``script`` (per event: its time after the running instant, how many events it
    schedules) on a new queue; the order the events ran in and the order a heap of (time,
    sequence number) gives."""
    import heapq

    from uet.fabric.model import events

    q = EventQueue()
    ref: list[tuple[int, int, int]] = []  # (time, sequence, event id)
    ran: list[tuple[int, int]] = []
    it = iter(range(len(script)))

    def ev(a: Any, b: Any, t: int) -> None:
        ran.append((t, a))
        for _ in range(b):
            k = next(it, None)
            if k is None:
                return
            add(t + script[k][0], k, script[k][1])

    def add(t: int, k: int, fan: int) -> None:
        q.schedule(t, ev, k, fan)
        heapq.heappush(ref, (t, len(ref), k))

    for _ in range(20):
        k = next(it)
        add(script[k][0] * 7, k, script[k][1] + 1)
    while q.next_time() is not None:
        assert q.run_instant() >= 1
        near = q._near[q._head :]
        assert len(near) <= events.NEAR_MAX
        assert not near or not q._times or near[-1] < q._times[0]
        assert near == sorted(set(near))
    want = [(t, k) for t, _, k in sorted(ref)]
    return ran, want, q


def test_near_and_far_times_run_in_time_then_scheduling_order(monkeypatch: Any) -> None:
    """Issue 28: the near times (a sorted list of at most NEAR_MAX) and the far ones (a heap and a
    dict) run as one queue: with a near list of 1, 2, 3 or 256 times, and with the pure-Python and
    the compiled build's searches, every order of scheduling (new times before, between and after
    the pending ones, times already pending near and far, the running instant) runs the events in
    the order a heap of (time, sequence number) gives."""
    import random

    from uet.fabric.model import events

    rng = random.Random(28)
    script = [
        (rng.choice((0, 1, 2, 3, 5, 8, 13, 40, 41, 100, rng.randrange(500))), rng.randrange(3)) for _ in range(400)
    ]
    for near_max in (1, 2, 3, 256):
        for native in (False, True):
            monkeypatch.setattr(events, "NEAR_MAX", near_max)
            monkeypatch.setattr(events, "NATIVE_HEAP", native)
            ran, want, q = _near_far_run(script)
            assert ran == want and len(ran) > 100
            assert len(q) == 0 and not q._near and not q._nb and not q._at and q._head == 0


def test_an_instant_scheduled_again_after_it_ran_runs_again() -> None:
    """Issue 28: the bucket of an instant that has run is never handed out again (EventQueue
    remembers the last two buckets it gave, the one that ran given last or before): an event
    scheduled at that very nanosecond after it ran (the caller's time still stands there) gets a
    new bucket and runs."""
    for first in ((9, "b"), (5, "a")), ((5, "a"), (9, "b")):
        q = EventQueue()
        ran: list[tuple[int, str]] = []

        def rec(a: Any, b: Any, t: int, ran: list[tuple[int, str]] = ran) -> None:
            ran.append((t, a))

        for t, name in first:
            q.schedule(t, rec, name)
        assert q.run_until(5) == 1
        q.schedule(5, rec, "again")  # the time the queue stands at
        q.schedule(9, rec, "c")  # still the pending instant's bucket
        assert q.next_time() == 5 and len(q) == 3
        assert q.run_until(9) == 3
        assert ran == [(5, "a"), (5, "again"), (9, "b"), (9, "c")]
