"""Receives without a buffer (``recv``): their filters, and matching messages to them.

A ``recv()`` posts no buffer, so it is not on the SES expected list; it waits here. Matching it
is a protocol decision, not bookkeeping: when the first packet of a new message finds no posted
receive, :class:`~uet.ses.fep.SesFep` asks :meth:`Waiters.waiting` whether a ``recv()`` would take
the message, and the answer sets the SES response's ``list`` field (expected vs overflow, §6.4),
which decides whether PDS treats the response as guaranteed (§6.9). Then:

* a fast-path message no posted receive took is offered to the first matching waiter
  (:meth:`Waiters.offer`, synchronously from ``on_deliver``);
* messages already on the unexpected lists are served to waiters in the order the ``recv()``
  calls were made (:meth:`Waiters.serve`); an entry of the target engine's own unexpected list
  (RTR / rendezvous) gets a sized receive posted for it, completing later.

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
        self.queue: deque[Waiter] = deque()
        self.by_handle: dict[int, Waiter] = {}

    def __bool__(self) -> bool:
        return bool(self.queue)

    def add(self, w: Waiter) -> None:
        self.queue.append(w)
        self.by_handle[w.handle] = w

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

    def waiting(self, tagged: bool, tag: int, initiator: int, source: str) -> bool:
        """``SesFep.receive_waiting``: a ``recv()`` waits for a message arriving with these fields."""
        return self.first(tagged, tag, initiator, source) is not None

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
        abandoned deferrable send). A ``recv()`` it was posted for goes back to the head of the
        queue, to take the next matching message (issue 29 item 4: it stayed bound to the
        receive, which only the target engine could match, so the ``recv()`` never completed and
        every later message waited on the unexpected list). False for other receives."""
        w = recv.context
        if type(w) is not Waiter or w.posted is not recv:
            return False
        w.posted = None
        if not w.cancelled and w.handle in self.by_handle:
            self.queue.appendleft(w)
        return True

    def serve(self) -> bool:
        """Give unexpected messages to waiters in call order; True when a sized receive was
        posted for a target-engine entry (its packets may need a pump)."""
        ses = self.ses
        posted = False
        keep: deque[Waiter] = deque()
        while self.queue:
            w = self.queue.popleft()
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
        self.queue = keep
        return posted
