"""The one empty queue every port shares for the classes it never used (:data:`UNUSED`).

A deque is 760 bytes: eight class queues and a PFC queue per port made 6.8 kB per port, 500 MB
at 8,192 hosts, for classes most ports never see. A :class:`~uet.fabric.model.port.Port` starts
with this queue in every place and gets its own on a class's first packet (``Port.queue``,
``Port.send_ctrl``). Kept out of the compiled build (uet.compiled): mypyc cannot
compile a subclass of ``deque``.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from uet.fabric.model.config import FabricError

__all__ = ["UNUSED"]


class _Unused(deque):  # type: ignore[type-arg]
    """The queue of a class that never held a packet (and the PFC queue of a port that never sent
    one): one empty deque shared by every port, so a port costs no memory for the classes it
    does not use (a deque is 760 bytes: 6.8 kB per port, 500 MB at 8,192 hosts). It refuses to
    grow: ``Port.queue`` and ``Port.send_ctrl`` give the port its own first."""

    __slots__ = ()

    def append(self, x: Any) -> None:
        raise FabricError("a port's unused queue is shared: Port.queue() makes the port's own")

    def appendleft(self, x: Any) -> None:
        self.append(x)

    def extend(self, xs: Any) -> None:
        self.append(xs)

    def extendleft(self, xs: Any) -> None:
        self.append(xs)

    def insert(self, i: int, x: Any) -> None:
        self.append(x)


#: the shared empty queue (:class:`_Unused`); ``port.queues[tc] is UNUSED``: never used
UNUSED: deque[Any] = _Unused()
