"""Sync groups at the target: SYNC_WRITE / SYNC_ATOMIC (behaviour.md §6.5, wire-format.md §9.4).

The reference provider's extension (Δ18): a SYNC_WRITE or SYNC_ATOMIC request carries a 4-byte
sync extension ``group (16) ‖ count (16)``. The notes say the target "defers the terminating
operation (write with immediate or atomic) until all ``count`` messages of the group from that
source have completed; inconsistent counts → RC_OP_VIOLATION". Where they are silent, this
module decides (each choice most consistent with that sentence):

* A group is keyed by ``(source FA, JobID, group)`` and holds ``count`` operations **including**
  the terminating one: ``count − 1`` *members* (SYNC_WRITEs without header data) and one
  *terminator* (a SYNC_WRITE with header data, or a SYNC_ATOMIC).
* A member counts when its whole message is placed (all bytes accounted for, §6.1).
* The terminator's *effect* waits until ``count − 1`` members have completed: for SYNC_ATOMIC the
  atomic itself is applied then; for a terminating SYNC_WRITE its data is placed as it arrives but
  its remote completion (the immediate data the target application sees, ``WriteCompleted``) is
  posted then — that completion is what tells the application the group is complete. A
  terminator that finds its members done takes effect at once.
* The terminator is answered when it is *accepted* (RC_OK), not when it takes effect: SYNC_ATOMIC
  has no fetching form, so nothing waits for a result, and PDS must acknowledge the packet.
* When the terminator has taken effect the group is forgotten, so the same group number starts a
  new round.
* ``RC_OP_VIOLATION`` (:class:`~uet.ses.errors.OpViolation`): a count of 0; an operation whose
  count differs from the group's; a member beyond ``count − 1``; a second terminator; more than
  ``limit`` open groups (the table is bounded).
* A group idle for the target's reassembly timeout is dropped (``sync_expired``), its waiting
  terminator with it: a member that never completes cannot hold memory for ever.
* Sync operations are refused in RUDI and UUD by the target (a retransmitted member would count
  twice; there is no duplicate filter there).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uet.ses.errors import OpViolation

__all__ = ["SyncGroups"]


@dataclass(eq=False)
class _Group:
    """One sync group: the operations it counts, those done, and what runs when all are."""

    count: int
    done: int = 0
    pending: Callable[[], Any] | None = None
    last_ns: int = 0


class SyncGroups:
    """The open sync groups of one target engine (module docstring)."""

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._groups: dict[Any, _Group] = {}
        self.counters: dict[str, int] = {
            "sync_members": 0,
            "sync_deferred": 0,
            "sync_completed": 0,
            "sync_expired": 0,
        }

    def __len__(self) -> int:
        return len(self._groups)

    def _group(self, key: Any, count: int, now: int) -> _Group:
        if count < 1:
            raise OpViolation("sync count 0")
        g = self._groups.get(key)
        if g is None:
            if len(self._groups) >= self.limit:
                raise OpViolation(f"more than {self.limit} open sync groups")
            g = self._groups[key] = _Group(count)
        elif g.count != count:
            raise OpViolation(f"sync count {count} differs from the group's {g.count}")
        g.last_ns = now
        return g

    def member_done(self, key: Any, count: int, now: int) -> None:
        """A member of group ``key`` completed; runs the waiting terminator when it was the last."""
        g = self._group(key, count, now)
        if g.done >= count - 1:
            raise OpViolation(f"more than {count - 1} members in a sync group of {count}")
        g.done += 1
        self.counters["sync_members"] += 1
        if g.done == count - 1 and g.pending is not None:
            action, g.pending = g.pending, None
            self._close(key)
            action()

    def terminate(self, key: Any, count: int, action: Callable[[], Any], now: int) -> bool:
        """The terminator of group ``key`` arrived: run ``action`` now (True) or when the last
        member completes (False)."""
        g = self._group(key, count, now)
        if g.pending is not None:
            raise OpViolation("a second terminating operation in one sync group")
        if g.done == count - 1:
            self._close(key)
            action()
            return True
        g.pending = action
        self.counters["sync_deferred"] += 1
        return False

    def _close(self, key: Any) -> None:
        del self._groups[key]
        self.counters["sync_completed"] += 1

    def expire(self, now: int, idle_ns: int) -> int:
        """Drop the groups idle for ``idle_ns``; returns how many."""
        old = [k for k, g in self._groups.items() if now - g.last_ns >= idle_ns]
        for k in old:
            del self._groups[k]
        self.counters["sync_expired"] += len(old)
        return len(old)

    def next_expiry(self, idle_ns: int) -> int | None:
        """When the oldest open group expires, or None."""
        if not self._groups:
            return None
        return min(g.last_ns for g in self._groups.values()) + idle_ns
