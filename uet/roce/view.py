"""What the two halves of an RC queue pair use of the :class:`~uet.roce.qp.QueuePair` that owns
them: its configuration, counters, memory and log, and the few actions they ask of it (build a
packet, queue an acknowledgement, complete a work request, fail or flush).

Declared here, below all three, so that :mod:`uet.roce.requester` and :mod:`uet.roce.responder`
need not import :mod:`uet.roce.qp`, which imports them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from uet.errors import UetError
from uet.roce.config import QpConfig
from uet.roce.events import QpEvent
from uet.ses.memory import MemoryTable

__all__ = ["QueuePairView"]


class QueuePairView(Protocol):
    """The queue pair as its requester and responder see it (module docstring)."""

    @property
    def config(self) -> QpConfig: ...

    @property
    def qpn(self) -> int: ...

    @property
    def stats(self) -> Counter[str]: ...

    @property
    def memory(self) -> MemoryTable: ...

    @property
    def log(self) -> Callable[[dict[str, Any]], None] | None: ...

    def build(
        self,
        op: int,
        psn: int,
        exts: tuple[Any, ...] = (),
        payload: bytes = b"",
        *,
        ack_req: bool = False,
        se: bool = False,
    ) -> bytes: ...

    def send_ctrl(self, op: int, psn: int, exts: tuple[Any, ...]) -> None: ...

    def complete(self, event: QpEvent) -> None: ...

    def fail_all(self, error: UetError) -> None: ...

    def to_error(self, reason: str) -> None: ...
