"""RoCEv2 comparison transport, sans-I/O (spec/rocev2-and-fabric.md §1–§7).

:class:`QueuePair` is one RC queue pair (SEND, WRITE with and without immediate, READ, atomic
fetch-add and compare-swap; go-back-N; ACK coalescing; ACK timeout and RNR retry; memory regions
with R_Keys) with DCQCN (:mod:`uet.roce.dcqcn`) pacing its requests. Wire formats live in
:mod:`uet.wire.roce`, :mod:`uet.wire.rocepkt` and :mod:`uet.wire.icrc`.
"""

from uet.roce.config import QpConfig
from uet.roce.dcqcn import DcqcnConfig, NotificationPoint, ReactionPoint
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
