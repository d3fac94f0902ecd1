"""The Fabric Endpoint core: one FEP's SES + PDS + TSS as a sans-I/O object (architecture.md).

The surface (agreed with the virtual-time engine, which drives it like :class:`uet.Endpoint`
does)::

    from uet.fep import FepCore, FepConfig, Datagram, Transmit

    core = FepCore("10.0.0.1", job=42, pid=1, ri=0, config=FepConfig(), security=None, seed=7)
    h = core.send("10.0.0.2", b"hello", tag=None)          # every operation returns a handle
    for t in core.datagrams_to_send(now):                  # Transmit(data, destination, entropy,
        wire(t)                                            #          dscp, ecn)
    core.receive_batch([Datagram(data, "10.0.0.2")], now)  # + ecn, trimmed, last_hop, source_port
    core.receive_datagram(data, now, source="10.0.0.2")
    while (ev := core.next_event()) is not None: ...       # SendCompleted(h), MessageReceived(h, m),
                                                           # OpCompleted(h, value), OpFailed(h, error),
                                                           # WriteCompleted, Closed
    at = core.get_timer(); core.handle_timer(at)           # integer ns, always a parameter

Operations: ``send`` (eager / rendezvous / deferrable, ``dc``), ``post_recv(buffer | None)`` and
``cancel``, ``recv_nowait``, ``register`` / ``deregister``, ``write``, ``read``, ``atomic``,
``compare_swap``, ``close(now)``; ``counters()``. After any input call ``datagrams_to_send(now)``
first, then drain ``next_event()``, then re-arm from ``get_timer()`` (:mod:`uet.fep.core`).

Modules: :mod:`~uet.fep.config` (``FepConfig`` = ``uet.EndpointConfig``), :mod:`~uet.fep.events`
(records in and out), :mod:`~uet.fep.core` (the object: datagrams, time, close),
:mod:`~uet.fep.operations` (operations), :mod:`~uet.fep.completions` (PDS/SES reports to events),
:mod:`~uet.fep.lanes` (eager sends:
lanes, flow control, the sender's completion rule), :mod:`~uet.fep.receives` (receives without a
buffer), :mod:`~uet.fep.marking` (DSCP/ECN), :mod:`~uet.fep.peer` (addressing),
:mod:`~uet.fep.errors`; TSS is the stage :mod:`uet.tss.stage`. Nothing here imports asyncio,
socket, selectors or time, or reads a clock (tests/test_fep_imports.py).
"""

from __future__ import annotations

from uet.fep.config import FepConfig
from uet.fep.core import ECN_LASTHOP, ECN_TRIMMED, FepCore
from uet.fep.errors import DeliveryError, EndpointClosed
from uet.fep.events import (
    Closed,
    Datagram,
    Event,
    MessageReceived,
    OpCompleted,
    OpFailed,
    SendCompleted,
    Transmit,
    WriteCompleted,
)
from uet.fep.peer import Peer

__all__ = [
    "ECN_LASTHOP",
    "ECN_TRIMMED",
    "Closed",
    "Datagram",
    "DeliveryError",
    "EndpointClosed",
    "Event",
    "FepConfig",
    "FepCore",
    "MessageReceived",
    "OpCompleted",
    "OpFailed",
    "Peer",
    "SendCompleted",
    "Transmit",
    "WriteCompleted",
]
