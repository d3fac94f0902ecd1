"""The state :class:`uet.fep.core.FepCore` and its two halves share, declared once with its types.

``FepCore`` (:mod:`uet.fep.core`) is built on :class:`~uet.fep.operations.Operations` (what the
owner asks for) over :class:`~uet.fep.completions.Completions` (what PDS and SES report back) over
:class:`FepState`: one chain of single inheritance (the two halves define no method in common),
because the optional compiled build (:mod:`uet.compiled`, mypyc) compiles single inheritance only.
:class:`FepState` declares the attributes ``FepCore.__init__`` assigns and the methods one half
calls on the core or on the other half, so each half is type checked against the whole core: the
attributes are annotations only, each method a stub the core or a half overrides (mypy checks
each override against its stub).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from uet.fep.config import FepConfig
from uet.fep.events import Event
from uet.fep.lanes import Lane, OutMessage
from uet.fep.peer import PeerBook
from uet.fep.receives import Waiter, Waiters, _Posted
from uet.pds import Mode, PathWindow, PdsCore
from uet.ses.fep import SesFep
from uet.ses.message import Message
from uet.ses.segmenter import Segmenter


class FepState:
    """Declared, typed state of one FEP core (assigned by ``FepCore.__init__``)."""

    config: FepConfig
    address: str
    job: int
    pid: int
    event_log: Callable[[dict[str, Any]], None] | None
    #: the window of the path towards a peer, where it differs from ``config``'s (uet.fep.core)
    path_window: Callable[[str], PathWindow | None] | None
    pds: PdsCore
    ses: SesFep
    segmenter: Segmenter
    peers: PeerBook
    #: eager lanes by (peer, mode, traffic class, job)
    lanes: dict[tuple[str, Mode, int, int], Lane]
    #: lanes to refill, in the order they became dirty (uet.fep.core)
    _dirty: dict[Lane, None]
    _unfinished: dict[int, OutMessage]
    #: engine operations in progress: handle -> the view a read fills (None otherwise)
    _ops: dict[int, memoryview | None]
    _recvs: dict[int, _Posted]
    waiters: Waiters
    #: ``waiters.queue`` (the same deque, made once)
    _wq: deque[Waiter]
    #: completion events (uet.fep.events) not yet taken by the owner
    _events: deque[Event]
    _now: int
    _closing: bool
    _closed: bool
    _stats: dict[str, int]
    #: the per-packet increments of three of ``_stats``' counters (``pumps``, ``packets_acked``
    #: of plain ACKs, ``timer_fires``), kept as ints: a dict entry's update costs several times a
    #: typed attribute's in the compiled build (issue 28); ``_stats`` keeps their keys, in their
    #: place, and the rare increments, and uet.fep.core ``stats`` adds the two up
    _n_pumps: int
    _n_acked: int
    _n_timer_fires: int

    # uet.fep.core
    def _handle(self) -> int:
        raise NotImplementedError  # defined in a subclass (named above)

    def _log(self, ev: str, **fields: Any) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.fep.completions
    def _drain_ses(self) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _delivered(self, m: Message) -> Message:
        raise NotImplementedError  # defined in a subclass (named above)

    def _on_event(self, ev: Any, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)
