"""The seam between a Fabric Endpoint and the wire (architecture.md "Link modes").

A link moves UET datagrams (bytes starting at the TSS or PDS header) between this FEP and peers
named by Fabric Address. Two implementations are planned:

* :class:`uet.link.direct.DirectLink` — the host IP stack: one UDP socket bound to the FEP's
  address and port 4793; the kernel builds IP/UDP, ECN/DSCP travel in ``IP_TOS``.
* a fabric link (the fabric issue) — the FEP builds Ethernet/IPv4/UDP itself and exchanges whole
  frames with one switch port, so the entropy value really becomes the UDP source port.

Both have the same surface: :meth:`Link.send` per datagram (and :meth:`Link.send_marked` per
batch, which a link overrides where it has a cheaper way), and a receive callback that gets the
datagrams read in one batch (so the endpoint runs its PDS core once per batch, not per packet).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

from uet.fep.marking import DSCP_CONTROL, DSCP_DATA
from uet.link.impair import Impairment

__all__ = ["DSCP_CONTROL", "DSCP_DATA", "Link", "ReceiveCallback", "WrappedLink", "tos"]

# DSCP of requests (CS0) and of ACK/NACK/control packets (EF), wire-format.md §1.3: the FEP
# core marks each datagram (uet.fep.marking); links only put the values in the IP header.

#: ``callback(batch)`` with ``batch`` a sequence of ``(datagram, source FA, ecn)``.
ReceiveCallback = Callable[[Sequence[tuple[bytes, str, int]]], None]


def tos(dscp: int, ecn: int = 0) -> int:
    """The IPv4 TOS / IPv6 traffic-class byte: ``DSCP << 2 | ECN``."""
    return ((dscp & 0x3F) << 2) | (ecn & 3)


class Link(abc.ABC):
    """A way for one FEP to send and receive UET datagrams.

    Besides the three methods, every link has the attributes below, which its owner (the
    endpoint, the secure facade, the tap) reads instead of probing for them; a link that has no
    such thing keeps the class default."""

    #: The FEP's Fabric Address (IPv4 or IPv6 text).
    address: str
    #: Counters: packets/bytes sent and received, send-buffer stalls, errors.
    counters: dict[str, int]
    #: The local UDP port of the link's socket (None without one).
    port: int | None = None
    #: The UDP port every datagram is sent to and every peer's datagram comes from, when the
    #: ports are fixed (the direct link: the kernel builds UDP from the bound port); None when
    #: each datagram's entropy is its UDP source port (the fabric link) or there is no UDP.
    peer_port: int | None = None
    #: Whether the link can hand up :class:`~uet.fep.events.Datagram` records (with each
    #: datagram's UDP source port / entropy) instead of ``(datagram, source FA, ecn)`` triples.
    gives_records: bool = False
    #: Whether it hands them up now: the owner sets it on a link that :attr:`gives_records`.
    records: bool = False
    #: UET directly over IP: datagrams carry the 4-byte entropy header, not a UDP header.
    over_ip: bool = False
    #: The impairment applied to what the link sends (:mod:`uet.link.impair`), if any.
    impairment: Impairment | None = None

    @abc.abstractmethod
    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        """Send one UET datagram to the FEP at ``dst`` (never blocks; queues if the OS is full)."""

    def send_marked(self, datagrams: Sequence[tuple[bytes, str, int]], tos: Sequence[int]) -> None:
        """Send a batch of ``(datagram, dst, entropy)`` in order, datagram ``d`` with the IP TOS
        byte ``tos[d[0] >> 3]`` (the FEP core's marking by PDS type, :attr:`uet.fep.core.FepCore.tos`:
        ``DSCP << 2 | ECN``). This default hands each one to :meth:`send`; the direct link
        overrides it with one ``sendto`` per datagram and no per-datagram call, the secure link
        to seal the batch at once."""
        send = self.send
        for data, dst, entropy in datagrams:
            t = tos[data[0] >> 3]
            send(data, dst, entropy, t >> 2, t & 3)

    @abc.abstractmethod
    def set_receiver(self, callback: ReceiveCallback) -> None:
        """Install the callback that receives batches of incoming datagrams."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop receiving and release the socket(s); pending delayed datagrams are discarded."""


class WrappedLink(Link):
    """A link in front of another (``inner``): the tap, the conformance fault injector. What the
    endpoint reads of its link — address, ports, impairment — passes through; a wrapper keeps the
    base class's :meth:`~Link.send_marked`, so every datagram of a batch goes through
    :meth:`send`, which the subclass defines."""

    def __init__(self, inner: Link) -> None:
        self.inner = inner
        self.address = inner.address

    @property
    def port(self) -> int | None:  # type: ignore[override]
        return self.inner.port

    @property
    def peer_port(self) -> int | None:  # type: ignore[override]
        return self.inner.peer_port

    @property
    def impairment(self) -> Impairment | None:  # type: ignore[override]
        return self.inner.impairment

    @property
    def counters(self) -> dict[str, int]:  # type: ignore[override]
        return self.inner.counters

    def close(self) -> None:
        self.inner.close()
