"""Receives without a buffer (``recv``): their filters, and matching messages to them.

A ``recv()`` posts no buffer, so it is not on the SES expected list; it waits here, in call order.
Matching it is a protocol decision, not bookkeeping, and it is made as for a posted buffer: on the
first-arriving packet of a message (behaviour.md §6.3 step 5, §6.4). When that packet finds no
posted receive, :class:`~uet.ses.fep.SesFep` asks :meth:`Waiters.reserve` for the oldest waiting
``recv()`` that takes the message; that receive leaves the queue, *reserved* for this message
alone, and the SES response says ``list`` = expected (a plain response, §6.9). Every other new
message is unexpected: overflow list, its byte limit (NACK ``NO_SES_MSG_AVAIL`` beyond it), a
guaranteed response. (A ``recv()`` used to be only asked whether it would take a message and kept
waiting, so while one waited every new message was reported expected and skipped the limit,
though only the first to complete went to it, in completion order rather than arrival order.)
Then (:meth:`Waiters.reserved_done`):

* the reserved message, when whole, goes to its receive; if the receive was cancelled meanwhile
  the message is handled as an unexpected one (the next receive gets it);
* a reserved message that will never be whole (its first packet refused for want of a
  reassembly slot, too long, failed, expired) gives its receive back: it waits again, in its
  call-order place (choice: ``recv()`` returns the next *message*, so a message that never
  arrived whole takes nobody's receive; a posted buffer in that case completes with the error).
  The same holds on the target engine's path: a ``recv()`` whose sized receive (below) completes
  with an error — its message expired, failed, or was a deferral whose RTR went unanswered or
  whose restart never began — waits again (:meth:`Waiters.give_back`, counted
  ``recvs_given_back``) instead of failing with the message's error;
* a fast-path message that began before any ``recv()`` waited (unexpected) and is whole after
  one was called is offered to the first matching waiter (:meth:`Waiters.offer`, synchronously
  from ``on_deliver``), as a buffer posted meanwhile would take it;
* messages already on the unexpected lists are served to waiters in the order the ``recv()``
  calls were made (:meth:`Waiters.serve`); an entry of the target engine's own unexpected list
  (RTR / rendezvous) gets a sized receive posted for it, completing later. A new engine entry is
  served at once (:meth:`Waiters.serve_now`), so a ``recv()`` takes the message whose first
  packet came first whichever path each took (the engine answers such a message as unexpected:
  its entry exists before any receive takes it).

A directed receive (``source``) checks the Fabric Address the message came from as well as the
initiator ID its SES header claims: a copy of the source's packet sent by anyone else does not
match.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from uet.ses.fep import SesFep
from uet.ses.matching import PostedReceive, tag_matches
from uet.ses.message import Message
from uet.ses.sink import ReceiveSink

__all__ = ["Waiter", "Waiters", "matches"]


class _Posted:
    """A receive posted with a buffer: its handle, the buffer and the SES entry."""

    __slots__ = ("handle", "buffer", "posted")

    def __init__(self, handle: int, buffer: memoryview | ReceiveSink) -> None:
        self.handle = handle
        self.buffer = buffer
        self.posted: PostedReceive | None = None


class Waiter:
    """A receive without a buffer: its handle and filter; ``posted`` once a sized receive was
    posted for a target-engine entry; ``cancelled`` when withdrawn after that."""

    __slots__ = ("handle", "tagged", "tag", "ignore", "initiator", "source", "posted", "cancelled")

    def __init__(
        self, handle: int, tagged: bool, tag: int, ignore: int, initiator: int | None, source: str | None
    ) -> None:
        self.handle = handle
        self.tagged = tagged
        self.tag = tag
        self.ignore = ignore
        self.initiator = initiator
        #: the Fabric Address a directed receive wants (checked against where a message came from)
        self.source = source
        self.posted: PostedReceive | None = None
        self.cancelled = False

    def takes(self, tagged: bool, tag: int, initiator: int, source: str) -> bool:
        """Whether a message with these fields matches this receive's filter."""
        if self.tagged != tagged:
            return False
        if tagged and not tag_matches(self.tag, tag, self.ignore):
            return False
        return self.initiator is None or (self.initiator == initiator and self.source == source)


def matches(m: Message, tag: int | None, ignore: int, initiator: int | None, source: str | None) -> bool:
    """Whether message ``m`` matches a receive filter (``tag`` None: untagged)."""
    if (m.tag is not None) != (tag is not None):
        return False
    if tag is not None and not tag_matches(tag, m.tag or 0, ignore):
        return False
    return initiator is None or (initiator == m.initiator and m.source == source)


class Waiters:
    """The waiting ``recv()`` calls of one FEP, in call order. ``deliver(waiter, message)`` is
    called for each match (the core turns it into a ``MessageReceived`` event)."""

    def __init__(self, ses: SesFep, deliver: Callable[[Waiter, Message], None]) -> None:
        self.ses = ses
        self.deliver = deliver
        #: made once and never replaced (FepCore tests it through its own reference, ``_wq``)
        self.queue: deque[Waiter] = deque()
        self.by_handle: dict[int, Waiter] = {}
        #: receives given back to the queue because their message never completed
        #: (:meth:`give_back`; the FEP's ``recvs_given_back`` counter)
        self.given_back = 0

    def __bool__(self) -> bool:
        return bool(self.queue)

    def add(self, w: Waiter) -> None:
        self.queue.append(w)
        self.by_handle[w.handle] = w

    def _requeue(self, w: Waiter) -> None:
        """Put a waiter that was taken out of the queue back in its call-order place (handles
        grow with each call) unless it was withdrawn meanwhile."""
        if w.cancelled or w.handle not in self.by_handle:
            return
        q = self.queue
        for i, other in enumerate(q):
            if other.handle > w.handle:
                q.insert(i, w)
                return
        q.append(w)

    def remove(self, w: Waiter) -> None:
        self.by_handle.pop(w.handle, None)
        try:
            self.queue.remove(w)
        except ValueError:
            pass

    def first(self, tagged: bool, tag: int, initiator: int, source: str) -> Waiter | None:
        """The first waiting receive that takes a message with these fields."""
        for w in self.queue:
            if w.takes(tagged, tag, initiator, source):
                return w
        return None

    def reserve(self, tagged: bool, tag: int, initiator: int, source: str) -> Waiter | None:
        """``SesFep.reserve``: the oldest waiting ``recv()`` that takes a new message with these
        fields, taken out of the queue for that message alone (``by_handle`` keeps it, so it can
        still be cancelled), or None."""
        w = self.first(tagged, tag, initiator, source)
        if w is not None:
            self.queue.remove(w)
        return w

    def reserved_done(self, w: Waiter, m: Message | None) -> bool:
        """``SesFep.on_reserved``: the message reserved ``w`` is whole (``m``: delivered, True;
        False when ``w`` was withdrawn meanwhile), or will never be (None: ``w`` waits again)."""
        if m is None:
            self.give_back(w)
            return True
        if w.cancelled or self.by_handle.pop(w.handle, None) is None:
            return False
        self.deliver(w, m)
        return True

    def offer(self, m: Message) -> bool:
        """``SesFep.on_unexpected``: give a fast-path message to the first matching waiter."""
        w = self.first(m.tag is not None, m.tag or 0, m.initiator, m.source)
        if w is None:
            return False
        self.remove(w)
        self.deliver(w, m)
        return True

    def unbind(self, recv: PostedReceive) -> bool:
        """``SesTarget.on_unreserved``: the sized receive posted for a deferred message's RTR is
        released because the RTR failed (its initiator does not know the deferral: a forged or
        abandoned deferrable send). A ``recv()`` it was posted for goes back to its call-order
        place in the queue, to take the next matching message (issue 29 item 4: it stayed bound to the
        receive, which only the target engine could match, so the ``recv()`` never completed and
        every later message waited on the unexpected list). False for other receives."""
        w = recv.context
        if type(w) is not Waiter or w.posted is not recv:
            return False
        self.give_back(w)
        return True

    def give_back(self, w: Waiter) -> None:
        """The message ``w`` was reserved or bound for will never complete it (refused, failed,
        expired, its RTR unanswered or its restart never begun; on the fast path or the target
        engine's alike): ``w`` waits again in its call-order place, counted in
        :attr:`given_back`. (Choice: ``recv()`` returns the next *message*; a message that never
        arrived whole is nobody's, so one stranger's first packet cannot fail an application's
        receive. Its loss is reported to its sender, whose send fails, and counted here.)"""
        w.posted = None
        self.given_back += 1
        self._requeue(w)

    def serve_now(self) -> None:
        """``SesFep.on_engine_unexpected``: the target engine buffered a new message; serve the
        waiting receives now, before later packets of the same batch can reserve them."""
        if self.queue:
            self.serve()

    def serve(self) -> bool:
        """Give unexpected messages to waiters in call order; True when a sized receive was
        posted for a target-engine entry (its packets may need a pump)."""
        ses = self.ses
        posted = False
        keep: deque[Waiter] = deque()
        q = self.queue
        while q:
            w = q.popleft()
            if not ses.has_unexpected():
                keep.append(w)
                continue
            got = ses.take_unexpected(
                tagged=w.tagged, tag=w.tag, ignore=w.ignore, initiator=w.initiator, context=w, source=w.source
            )
            if got is None:
                keep.append(w)
            elif isinstance(got, Message):
                self.by_handle.pop(w.handle, None)
                self.deliver(w, got)
            else:
                # a sized receive posted for a target-engine entry (RTR / rendezvous): the waiter
                # leaves the queue and completes with that receive (by_handle keeps it)
                w.posted = got
                posted = True
        q.extend(keep)  # the same deque, never a new one: FepCore holds a reference to it
        return posted
