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
    assert q._at[5] == [rec, "x", 1, rec, "z", None]
    assert len(q) == 2
    assert q.run_instant() == 3
    assert ran == [("x", 1, 5), ("z", None, 5), ("y", None, 5)]
    assert len(q) == 0 and not q._at
