"""What a queue pair hands back: transmit records and completion events (frozen dataclasses,
aioquic ``events.py`` style). Every completion carries the handle its operation returned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from uet.errors import UetError


class Transmit(NamedTuple):
    """One datagram to send: the UDP payload (BTH … ICRC), the peer's address, the UDP source
    port (flow entropy, §1.2), and the IP DSCP and ECN bits (§1.4)."""

    data: bytes
    destination: str
    entropy: int
    dscp: int
    ecn: int


@dataclass(frozen=True)
class Event:
    """Base class of queue pair events."""


@dataclass(frozen=True)
class SendCompleted(Event):
    """A SEND was acknowledged by the responder."""

    handle: int


@dataclass(frozen=True)
class WriteCompleted(Event):
    """An RDMA WRITE (with or without immediate) was acknowledged."""

    handle: int


@dataclass(frozen=True)
class ReadCompleted(Event):
    """An RDMA READ finished: ``data`` is what the remote region held."""

    handle: int
    data: bytes


@dataclass(frozen=True)
class AtomicCompleted(Event):
    """A FETCH_ADD or COMPARE_SWAP executed remotely; ``value`` is the original remote value."""

    handle: int
    value: int


@dataclass(frozen=True)
class MessageReceived(Event):
    """A posted receive was consumed: by a SEND (``data`` is the message) or by an RDMA WRITE
    with immediate (``data`` empty, ``write_length`` the bytes written)."""

    handle: int
    data: bytes
    imm: int | None = None
    write_length: int | None = None


@dataclass(frozen=True)
class OpFailed(Event):
    """A work request (posted send-side operation or receive) completed in error."""

    handle: int
    error: UetError


@dataclass(frozen=True)
class QpErrored(Event):
    """The QP entered the error state; ``reason`` says why."""

    reason: str


#: every event a queue pair reports (``QueuePair.next_event``)
QpEvent = SendCompleted | WriteCompleted | ReadCompleted | AtomicCompleted | MessageReceived | OpFailed | QpErrored
