"""RoCEv2 comparison transport, sans-I/O (spec/rocev2-and-fabric.md §1–§7).

:class:`QueuePair` is one RC queue pair (SEND, WRITE with and without immediate, READ, atomic
fetch-add and compare-swap; go-back-N; ACK coalescing; ACK timeout and RNR retry; memory regions
with R_Keys) with DCQCN (:mod:`uet.roce.dcqcn`) pacing its requests. Wire formats live in
:mod:`uet.wire.roce`, :mod:`uet.wire.rocepkt` and :mod:`uet.wire.icrc`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uet.lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover
    from uet.roce.config import DcqcnConfig, QpConfig
    from uet.roce.dcqcn import NotificationPoint, ReactionPoint
    from uet.roce.events import (
        AtomicCompleted,
        Event,
        MessageReceived,
        OpFailed,
        QpErrored,
        ReadCompleted,
        SendCompleted,
        Transmit,
        WriteCompleted,
    )
    from uet.roce.qp import QueuePair
    from uet.roce.states import QpState, QpStateError

# Imported on first use (PEP 562): the queue pair and its events load only for a RoCEv2 run; the
# scenario's derived settings need only uet.roce.config.
_LAZY = {
    "QpConfig": "uet.roce.config",
    "DcqcnConfig": "uet.roce.config",
    "NotificationPoint": "uet.roce.dcqcn",
    "ReactionPoint": "uet.roce.dcqcn",
    "AtomicCompleted": "uet.roce.events",
    "Event": "uet.roce.events",
    "MessageReceived": "uet.roce.events",
    "OpFailed": "uet.roce.events",
    "QpErrored": "uet.roce.events",
    "ReadCompleted": "uet.roce.events",
    "SendCompleted": "uet.roce.events",
    "Transmit": "uet.roce.events",
    "WriteCompleted": "uet.roce.events",
    "QueuePair": "uet.roce.qp",
    "QpState": "uet.roce.states",
    "QpStateError": "uet.roce.states",
}

__all__ = [
    "AtomicCompleted",
    "DcqcnConfig",
    "Event",
    "MessageReceived",
    "NotificationPoint",
    "OpFailed",
    "QpConfig",
    "QpErrored",
    "QpState",
    "QpStateError",
    "QueuePair",
    "ReactionPoint",
    "ReadCompleted",
    "SendCompleted",
    "Transmit",
    "WriteCompleted",
]

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
