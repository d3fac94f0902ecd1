"""What goes in and out of a :class:`~uet.fep.core.FepCore` (small immutable records).

Datagrams (architecture.md "FEP core"): :class:`Datagram` in (the UDP payload with its named
per-datagram fields), :class:`Transmit` out (bytes, destination Fabric Address, entropy = the UDP
source port, DSCP, ECN). Both are named tuples: the data path builds and unpacks thousands per
second, and a tuple costs a fraction of a dataclass there.

Completions are frozen dataclasses carrying the operation's handle (the int an operation
returned), one per operation: :class:`SendCompleted` or :class:`OpFailed` for a send,
:class:`MessageReceived` or :class:`OpFailed` for a receive, :class:`OpCompleted` (with the
operation's value: read data, prior atomic value, None for a write) or :class:`OpFailed` for
RMA and atomics. Target-side notices: :class:`WriteCompleted` (a remote write with header data
landed, behaviour.md §6.5) and :class:`Closed` (the close sequence ended).
"""

# No ``from __future__ import annotations`` here: a NamedTuple's field annotations given as texts
# are compiled when its class is made (typing.ForwardRef), and a process's first compile() sets up
# the syntax tree's types (about 9 M instructions of a one-flow uet-sim run, issue 28).
from dataclasses import dataclass
from typing import Any, NamedTuple

from uet.errors import UetError
from uet.ses.events import WriteCompleted
from uet.ses.message import Message

__all__ = [
    "Closed",
    "Datagram",
    "Event",
    "MessageReceived",
    "OpCompleted",
    "OpFailed",
    "SendCompleted",
    "Transmit",
    "WriteCompleted",
]


class Datagram(NamedTuple):
    """One received UET datagram (UDP payload: the PDS header onward, or the TSS-sealed form).

    ``ecn``: the IP ECN field (0..3); ``trimmed``: a switch cut the payload (UET packet trimming,
    behaviour.md §2.6: answered with NACK TRIMMED at once); ``last_hop``: it was trimmed at the
    last hop; ``source_port``: the UDP source port it carried (TSS puts it in the AAD, §5.6;
    0 = unknown, the FEP then uses its configured peer port)."""

    data: bytes
    source: str
    ecn: int = 0
    trimmed: bool = False
    last_hop: bool = False
    source_port: int = 0


class Transmit(NamedTuple):
    """One datagram to send: ``data`` (UDP payload), ``destination`` (Fabric Address),
    ``entropy`` (the value for the UDP source port), ``dscp`` and ``ecn`` of its IP header
    (wire-format.md §1.3: requests DSCP 0 with ECT(0) when ECN-capable, everything else EF)."""

    data: bytes
    destination: str
    entropy: int
    dscp: int
    ecn: int


@dataclass(frozen=True, slots=True)
class SendCompleted:
    """The message of ``send(...)`` -> ``handle`` is delivered (behaviour.md §6.9)."""

    handle: int


@dataclass(frozen=True, slots=True)
class MessageReceived:
    """A receive (``recv``/``post_recv`` -> ``handle``) completed with ``message``."""

    handle: int
    message: Message


@dataclass(frozen=True, slots=True)
class OpCompleted:
    """A write, read or atomic (-> ``handle``) completed: ``value`` is the read data, the prior
    value of a fetching atomic, else None."""

    handle: int
    value: Any = None


@dataclass(frozen=True, slots=True)
class OpFailed:
    """An operation (-> ``handle``) failed with ``error`` (a :class:`~uet.errors.UetError`:
    a :class:`~uet.ses.errors.SesError` subclass carrying the return code,
    :class:`~uet.fep.errors.DeliveryError`, or :class:`~uet.fep.errors.EndpointClosed`)."""

    handle: int
    error: UetError


@dataclass(frozen=True, slots=True)
class Closed:
    """The close sequence ended: every operation still pending failed with ``EndpointClosed``;
    ``graceful`` is False when the close timeout cut it short."""

    graceful: bool = True


Event = SendCompleted | MessageReceived | OpCompleted | OpFailed | WriteCompleted | Closed
