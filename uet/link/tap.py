"""A capture tap around any :class:`~uet.link.base.Link`: the live endpoints' ``--pcap``.

A live endpoint's link hands datagrams to the kernel (or a raw socket, or the fabric link's
socket), so there are no frames to copy. :class:`TapLink` builds one at the tap instead, for every
datagram sent and received, with :func:`uet.wire.build.build_frame` (Ethernet, IPv4/IPv6, UDP or
the entropy header of IP protocol 253; checksums computed) and the wall-clock time, and writes it
to a :class:`~uet.fabric.telemetry_io.PcapTaps` file named after the endpoint's address.

What the frame says (**decisions**): the addresses, DSCP and ECN the datagram had; UDP from the
link's bound port to its peer port on a link that sends from a fixed port (the direct link),
else from the datagram's entropy to 4793 (the fabric link, as it sends); IP ID 0 and TTL 64 (the
kernel's own choices are not visible here). The UET bytes are exactly the datagram's. Received
datagrams carry the source port they arrived with when the link hands up records
(:class:`~uet.fep.events.Datagram`), else the peer port; their DSCP is not handed up by the
links, so the frame shows the provider's default for the PDS type (wire-format.md §1.3).

The tap keeps the base class's batch transmit (:meth:`uet.link.base.Link.send_marked`), which
hands an endpoint's datagrams to :meth:`TapLink.send` one at a time (slower: a capture is for
looking, not for benchmarks).
"""

from __future__ import annotations

import time
from typing import Any

from uet.fep.events import Datagram
from uet.link.base import Link, ReceiveCallback, WrappedLink
from uet.wire.build import build_frame
from uet.wire.net import UET_UDP_PORT

__all__ = ["TapLink"]


class TapLink(WrappedLink):
    """``inner`` with every datagram it sends and receives written to ``taps`` (module docstring)."""

    def __init__(self, inner: Link, taps: Any, *, clock: Any = time.time_ns) -> None:
        super().__init__(inner)
        self.taps = taps
        self.clock = clock
        self._name = inner.address.replace(":", "_")

    # -- what the endpoint reads of its link -----------------------------------------------------

    @property
    def over_ip(self) -> bool:  # type: ignore[override]
        return self.inner.over_ip

    @property
    def gives_records(self) -> bool:  # type: ignore[override]
        return self.inner.gives_records

    @property
    def records(self) -> bool:
        return self.inner.records

    @records.setter
    def records(self, value: bool) -> None:
        self.inner.records = value

    # -- the tap -----------------------------------------------------------------------------------

    def _write(self, data: bytes, src: str, dst: str, sport: int, dport: int, dscp: int | None, ecn: int) -> None:
        encap = "ip" if self.over_ip else "udp"
        frame = build_frame(data, src, dst, entropy=sport, dport=dport, dscp=dscp, ecn=ecn & 3, encap=encap)
        self.taps.write(self._name, None, frame, self.clock())

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        fixed = isinstance(self.peer_port, int) and not self.over_ip
        sport = self.port if fixed else entropy
        dport = self.peer_port if fixed else UET_UDP_PORT
        self._write(datagram, self.address, dst, sport or 0, dport or UET_UDP_PORT, dscp, ecn)
        self.inner.send(datagram, dst, entropy, dscp, ecn)

    def set_receiver(self, callback: ReceiveCallback) -> None:
        def tapped(batch: Any) -> None:
            for item in batch:
                sport = (item.source_port if isinstance(item, Datagram) else 0) or self.peer_port or UET_UDP_PORT
                port = self.port or UET_UDP_PORT
                self._write(bytes(item[0]), item[1], self.address, sport, port, None, item[2])
            callback(batch)

        self.inner.set_receiver(tapped)
