"""Receive matching: posted (expected) receives and the unexpected (overflow) list (behaviour.md §6.4).

Rules implemented:

* Untagged and tagged receives live in two separate posted lists; an untagged send only matches
  untagged receives and a tagged send only tagged ones.
* A tagged receive matches a tagged send when ``(tag & ~ignore) == (match_bits & ~ignore)``
  (the HPC wildcard rule the notes infer; ``ignore = 0`` is the reference's exact match).
* A receive may be *directed*: it then matches only sends whose ``initiator`` equals its
  ``initiator``; ``None`` accepts any source. A directed receive that also names its ``source``
  (a Fabric Address) matches only messages that arrived from that address: the ``initiator`` ID
  is a claim in the SES header, the address is the PDC's peer, and both must agree (as for the
  endpoint's buffer-less ``recv(source=...)``); a caller that does not know where a message came
  from passes ``source=None`` and the ID alone decides.
* Search is in post order: the **first** posted receive that matches wins (MPI ordering).
  If that receive is restricted to a JobID other than the request's, the send is refused with
  ``BAD_JOB_ID`` and the receive stays posted (§6.4 "If the buffer's JobID restriction does not
  match").
* Unexpected entries (a buffered eager message, a remembered deferral, a rendezvous descriptor)
  are searched in arrival order when a receive is posted; a receive restricted to another JobID
  does not match them.
* Truncation: a receive posted with ``truncate=True`` accepts a longer message and keeps its
  first ``len(buffer)`` bytes (the response's ``modified_length`` says how many); otherwise a
  longer message is refused with ``TOO_LONG`` (wire-format.md §11.4 "truncation not allowed").
  The reference never truncates and answers ``UNSUPPORTED_SIZE``; we follow the return-code
  table, which names the truncation case.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from uet.ses.errors import BadJobId

if TYPE_CHECKING:
    from uet.ses.sink import ReceiveSink

__all__ = ["MatchLimits", "Matcher", "PostedReceive", "Unexpected"]

_MASK64 = (1 << 64) - 1


def tag_matches(tag: int, match_bits: int, ignore: int) -> bool:
    """The tag rule of a tagged receive (behaviour.md §6.4): its ``tag`` matches a send's
    ``match_bits`` when they are equal in every one of the 64 bits ``ignore`` does not set."""
    return not (tag ^ match_bits) & ~ignore & _MASK64


_ids = itertools.count(1)


@dataclass(frozen=True)
class MatchLimits:
    """Resource limits of one receive context.

    Attributes:
        max_unexpected: most entries on the unexpected list (messages beyond it → ``NO_MATCH``).
        max_unexpected_bytes: most bytes buffered on the unexpected list.
        max_deferred: most remembered deferrals per context (reference: 8, §6.7).
    """

    max_unexpected: int = 1024
    max_unexpected_bytes: int = 64 << 20
    max_deferred: int = 8


@dataclass(eq=False)
class PostedReceive:
    """A posted receive buffer.

    Attributes:
        buffer: writable flat memoryview the message is placed into.
        tagged: True for a tagged receive.
        tag / ignore: match bits and the bits to ignore (tagged receives).
        initiator: directed receive: only this initiator ID, or None for any source.
        job: only this JobID, or None for any.
        truncate: accept longer messages, keeping the first ``len(buffer)`` bytes.
        context: opaque, returned in the completion.
        source: a directed receive's Fabric Address: only messages that arrived from it (or
            None: the ``initiator`` ID alone).
        id: unique handle (used by :meth:`Matcher.cancel`).
    """

    buffer: memoryview | ReceiveSink
    tagged: bool = False
    tag: int = 0
    ignore: int = 0
    initiator: int | None = None
    job: int | None = None
    truncate: bool = False
    context: Any = None
    source: str | None = None
    id: int = field(default_factory=lambda: next(_ids))

    def accepts(self, tagged: bool, tag: int, initiator: int, source: str | None = None) -> bool:
        """Tag and source rule (job checked separately); ``source``: the Fabric Address the
        message arrived from, where known."""
        if tagged != self.tagged:
            return False
        if tagged and not tag_matches(self.tag, tag, self.ignore):
            return False
        if self.initiator is None:
            return True
        return self.initiator == initiator and (self.source is None or source is None or self.source == source)


@dataclass(eq=False)
class Unexpected:
    """An entry of the unexpected list: what arrived with no receive posted.

    ``kind`` is ``"eager"`` (message bytes buffered in ``data``), ``"deferred"`` (a deferrable send
    remembered for an RTR, §6.7) or ``"rendezvous"`` (eager bytes plus a read descriptor, §6.6);
    ``record`` is the target engine's own bookkeeping; ``source`` the Fabric Address the message
    came from (the PDC's peer, where ``initiator`` is only what its header claims).
    """

    kind: str
    tagged: bool
    tag: int
    initiator: int
    job: int
    length: int
    record: Any = None
    nbytes: int = 0
    source: str = ""


class Matcher:
    """Posted and unexpected lists of one receive context (a resource)."""

    def __init__(self, limits: MatchLimits | None = None) -> None:
        self.limits = limits or MatchLimits()
        self._posted: dict[bool, deque[PostedReceive]] = {False: deque(), True: deque()}
        self.unexpected: deque[Unexpected] = deque()
        self.unexpected_bytes = 0

    def posted(self, tagged: bool) -> list[PostedReceive]:
        """Posted receives of one kind, in post order."""
        return list(self._posted[tagged])

    def first_posted(self, tagged: bool, tag: int, initiator: int, source: str | None = None) -> PostedReceive | None:
        """The first posted receive that accepts a message with these fields (left posted), or
        None: :meth:`posted` without the copy of the list."""
        for r in self._posted[tagged]:
            if r.accepts(tagged, tag, initiator, source):
                return r
        return None

    def post(self, recv: PostedReceive) -> Unexpected | None:
        """Post a receive. If an unexpected entry matches, it is removed from the list and
        returned and the receive is *not* queued (the caller completes it); else None."""
        for u in self.unexpected:
            if recv.accepts(u.tagged, u.tag, u.initiator, u.source or None) and (recv.job is None or recv.job == u.job):
                self.unexpected.remove(u)
                self.unexpected_bytes -= u.nbytes
                return u
        self._posted[recv.tagged].append(recv)
        return None

    def repost_front(self, recv: PostedReceive) -> None:
        """Put a receive back at the head of its list (a reserved receive whose restart failed)."""
        self._posted[recv.tagged].appendleft(recv)

    def match(
        self, *, tagged: bool, tag: int, initiator: int, job: int, source: str | None = None
    ) -> PostedReceive | None:
        """Consume the first posted receive matching a send (from ``source``, where known), or
        None. Raises :class:`BadJobId` when that receive is restricted to another job (it stays
        posted)."""
        q = self._posted[tagged]
        for r in q:
            if r.accepts(tagged, tag, initiator, source):
                if r.job is not None and r.job != job:
                    raise BadJobId(f"receive restricted to job {r.job:#x}")
                q.remove(r)
                return r
        return None

    def cancel(self, recv: PostedReceive | int) -> bool:
        """Remove a posted receive (by object or id); True if it was still posted."""
        rid = recv.id if isinstance(recv, PostedReceive) else recv
        for q in self._posted.values():
            for r in q:
                if r.id == rid:
                    q.remove(r)
                    return True
        return False

    def can_buffer(self, kind: str, nbytes: int) -> bool:
        """Whether an unexpected entry of this kind and size fits the limits."""
        if kind == "deferred":
            return sum(1 for u in self.unexpected if u.kind == "deferred") < self.limits.max_deferred
        return (
            len(self.unexpected) < self.limits.max_unexpected
            and self.unexpected_bytes + nbytes <= self.limits.max_unexpected_bytes
        )

    def add_unexpected(self, entry: Unexpected) -> None:
        """Append an entry (the caller checked :meth:`can_buffer`)."""
        self.unexpected.append(entry)
        self.unexpected_bytes += entry.nbytes
