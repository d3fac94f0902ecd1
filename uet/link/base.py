"""The seam between a Fabric Endpoint and the wire (architecture.md "Link modes").

A link moves UET datagrams (bytes starting at the TSS or PDS header) between this FEP and peers
named by Fabric Address. Two implementations are planned:

* :class:`uet.link.direct.DirectLink` — the host IP stack: one UDP socket bound to the FEP's
  address and port 4793; the kernel builds IP/UDP, ECN/DSCP travel in ``IP_TOS``.
* a fabric link (the fabric issue) — the FEP builds Ethernet/IPv4/UDP itself and exchanges whole
  frames with one switch port, so the entropy value really becomes the UDP source port.

Both have the same surface: :meth:`Link.send` per datagram, and a receive callback that gets the
datagrams read in one batch (so the endpoint runs its PDS core once per batch, not per packet).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

from uet.fep.marking import DSCP_CONTROL, DSCP_DATA

__all__ = ["DSCP_CONTROL", "DSCP_DATA", "Link", "ReceiveCallback", "WrappedLink", "tos"]

# DSCP of requests (CS0) and of ACK/NACK/control packets (EF), wire-format.md §1.3: the FEP
# core marks each datagram (uet.fep.marking); links only put the values in the IP header.

#: ``callback(batch)`` with ``batch`` a sequence of ``(datagram, source FA, ecn)``.
ReceiveCallback = Callable[[Sequence[tuple[bytes, str, int]]], None]


def tos(dscp: int, ecn: int = 0) -> int:
    """The IPv4 TOS / IPv6 traffic-class byte: ``DSCP << 2 | ECN``."""
    return ((dscp & 0x3F) << 2) | (ecn & 3)


class Link(abc.ABC):
    """A way for one FEP to send and receive UET datagrams."""

    #: The FEP's Fabric Address (IPv4 or IPv6 text).
    address: str
    #: Counters: packets/bytes sent and received, send-buffer stalls, errors.
    counters: dict[str, int]

    @abc.abstractmethod
    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        """Send one UET datagram to the FEP at ``dst`` (never blocks; queues if the OS is full)."""

    @abc.abstractmethod
    def set_receiver(self, callback: ReceiveCallback) -> None:
        """Install the callback that receives batches of incoming datagrams."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop receiving and release the socket(s); pending delayed datagrams are discarded."""


class WrappedLink(Link):
    """A link in front of another (``inner``): the tap, the conformance fault injector. What the
    endpoint reads of its link — address, ports, impairment — passes through; a wrapper has no
    batch transmit method (``send_many``, ``send_transmits``...), so the endpoint hands every
    datagram to :meth:`send`, which the subclass defines."""

    def __init__(self, inner: Link) -> None:
        self.inner = inner
        self.address = inner.address

    @property
    def port(self) -> int | None:
        return getattr(self.inner, "port", None)

    @property
    def peer_port(self) -> int | None:
        return getattr(self.inner, "peer_port", None)

    @property
    def impairment(self) -> object:
        return getattr(self.inner, "impairment", None)

    @property
    def counters(self) -> dict[str, int]:  # type: ignore[override]
        return self.inner.counters

    def close(self) -> None:
        self.inner.close()
