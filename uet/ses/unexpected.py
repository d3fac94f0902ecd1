"""The fast-path unexpected list of :class:`uet.ses.fep.SesFep` (§6.4): a deque of messages that
keeps their byte count.

A module of its own, kept out of the optional compiled build (uet.compiled): mypyc cannot compile
a subclass of ``deque``, and the list is used only when a message arrives before its receive.
"""

from __future__ import annotations

from collections import deque

from uet.ses.message import Message

__all__ = ["ENTRY_OVERHEAD", "UnexpectedList"]

#: bytes each message on the fast-path unexpected list is charged beyond its data (its objects)
ENTRY_OVERHEAD = 256


class UnexpectedList(deque[Message]):
    """The fast-path unexpected list: a deque of :class:`Message` that keeps ``nbytes``, the sum
    of its messages' sizes plus :data:`ENTRY_OVERHEAD` each (the methods the owners use)."""

    def __init__(self) -> None:
        super().__init__()
        self.nbytes = 0

    def append(self, m: Message) -> None:
        super().append(m)
        self.nbytes += m.nbytes + ENTRY_OVERHEAD

    def appendleft(self, m: Message) -> None:
        super().appendleft(m)
        self.nbytes += m.nbytes + ENTRY_OVERHEAD

    def popleft(self) -> Message:
        m = super().popleft()
        self.nbytes -= m.nbytes + ENTRY_OVERHEAD
        return m

    def pop(self) -> Message:  # type: ignore[override]  # deque.pop takes no index
        m = super().pop()
        self.nbytes -= m.nbytes + ENTRY_OVERHEAD
        return m

    def remove(self, m: Message) -> None:
        super().remove(m)
        self.nbytes -= m.nbytes + ENTRY_OVERHEAD

    def clear(self) -> None:
        super().clear()
        self.nbytes = 0
