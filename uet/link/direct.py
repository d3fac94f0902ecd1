"""Direct link: UET over the host's UDP stack (architecture.md "Link modes: direct").

The FEP's Fabric Address is a host IP address and the link binds one UDP socket to
``(address, port)`` (port 4793, wire-format.md §1.1; configurable so tests can run beside other
FEPs). Datagrams go to ``(peer FA, peer_port)``, the same port by default.

Implementation choices (measured on the project machine, Python 3.11, loopback, 8 KiB datagrams):

* A plain non-blocking socket driven by ``loop.add_reader`` rather than
  ``loop.create_datagram_endpoint``: asyncio's datagram transports never expose ancillary data, so
  they cannot read ``IP_RECVTOS``; ``recvmsg`` can, for ~1 µs more than ``recv`` per datagram
  (``read_ecn``; without it the link reads with ``recvfrom`` and reports ECN 0). The
  reader drains up to ``max_batch`` datagrams per readiness callback and hands them to the
  endpoint as one batch, so the PDS core runs once per batch (its ACK coalescing and the endpoint's
  send flush see many packets at a time); one readiness callback keeps reading batches until
  EAGAIN (at most ``max_rounds`` of them, for fairness). ``add_reader`` works the same with
  uvloop and asyncio.
* The TOS byte (``DSCP << 2 | ECN``) of the most common class (data: DSCP 0) is set once with
  ``setsockopt(IP_TOS)`` and those datagrams go out with ``sendto``; other classes (ACK/NACK/
  control: DSCP 46, TOS 0xB8) carry a per-datagram ``IP_TOS`` control message in ``sendmsg``.
  IPv6 uses ``IPV6_TCLASS`` / ``IPV6_RECVTCLASS`` the same way.
* The kernel picks the UDP source port: it is the bound port, not the packet's entropy value (a
  socket cannot vary its source port per datagram). Receivers never rely on the source port; the
  fabric link, which builds its own UDP header, carries the entropy (wire-format.md §1.1).
* :meth:`DirectLink.send_many` sends a whole ``datagrams_to_send`` batch (the endpoint's path):
  one ``sendto`` per data-class datagram without a method call, address lookup or counter update
  per datagram (~1 µs less per packet than :meth:`DirectLink.send` in a loop).
* ``udp_checksum=False`` sends UDP/IPv4 with a zero checksum (``SO_NO_CHECK``), the rule with
  the CRC trailer (behaviour.md §2.16; ``EndpointConfig.udp_checksum``). IPv6 requires a UDP
  checksum (RFC 8200), so an IPv6 link always computes it.
* ``dont_fragment=True`` (the RoCE endpoint's link) sets ``IP_MTU_DISCOVER`` to
  ``IP_PMTUDISC_PROBE`` on IPv4: every datagram leaves with DF and is never fragmented, and Linux
  then sends IP ID 0 from an unconnected socket (``ip_select_ident``), so a RoCEv2 ICRC, which
  covers the ID and the DF bit, can be computed before the kernel builds the header. No root
  needed. (IPv6 has no ID and never fragments in flight.)
* When the socket's send buffer is full, datagrams wait in order in a backlog drained by
  ``add_writer``; nothing is dropped silently (``tx_backlog`` counts stalls).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
import sys
from collections import deque
from collections.abc import Sequence

from uet.errors import UetError
from uet.fep.marking import RX_ECN
from uet.link.base import DSCP_CONTROL, DSCP_DATA, Link, ReceiveCallback, tos
from uet.link.impair import Impairment
from uet.link.sockio import close_socket, drain_backlog, link_counters, size_buffers
from uet.wire.net import UET_UDP_PORT

__all__ = ["DirectLink", "LinkError", "loopback_addresses"]

_IPV6_RECVTCLASS = getattr(socket, "IPV6_RECVTCLASS", 66)
_IPV6_TCLASS = getattr(socket, "IPV6_TCLASS", 67)
#: Linux: send UDP/IPv4 with a zero checksum (behaviour.md §2.16 with the CRC trailer)
_SO_NO_CHECK = getattr(socket, "SO_NO_CHECK", 11)
#: Linux: DF on every datagram, the path MTU not consulted (``dont_fragment``)
_IP_MTU_DISCOVER = getattr(socket, "IP_MTU_DISCOVER", 10)
_IP_PMTUDISC_PROBE = getattr(socket, "IP_PMTUDISC_PROBE", 3)


def loopback_addresses(n: int, seed: int | None = None) -> list[str]:
    """``n`` distinct random IPv4 addresses in 127.0.0.0/8 (all loopback on Linux, no root needed),
    avoiding 127.0.0.0/16 where fixed demo addresses such as 127.0.0.2 live; for tests that must not
    collide with other FEPs on the same machine."""
    import random

    rng = random.Random(seed)
    out: set[str] = set()
    while len(out) < n:
        out.add(f"127.{rng.randrange(1, 255)}.{rng.randrange(0, 256)}.{rng.randrange(1, 255)}")
    return sorted(out)


class LinkError(UetError):
    """The link could not be opened (address not local, port in use, ...)."""


class DirectLink(Link):
    """One UDP socket bound to ``(address, port)`` on the running event loop."""

    port: int
    peer_port: int

    def __init__(
        self,
        address: str,
        port: int = UET_UDP_PORT,
        *,
        peer_port: int | None = None,
        impairment: Impairment | None = None,
        rcvbuf: int = 4 << 20,
        sndbuf: int = 4 << 20,
        max_batch: int = 64,
        max_rounds: int = 4,
        data_tos: int = tos(DSCP_DATA),
        read_ecn: bool = True,
        udp_checksum: bool = True,
        dont_fragment: bool = False,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.loop = loop or asyncio.get_running_loop()
        ip = ipaddress.ip_address(address)
        self.address = str(ip)
        self.v6 = ip.version == 6
        fam = socket.AF_INET6 if self.v6 else socket.AF_INET
        sock = socket.socket(fam, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            size_buffers(sock, rcvbuf, sndbuf)
            if self.v6:
                if read_ecn:
                    sock.setsockopt(socket.IPPROTO_IPV6, _IPV6_RECVTCLASS, 1)
                sock.setsockopt(socket.IPPROTO_IPV6, _IPV6_TCLASS, data_tos)
                self._tos_level, self._tos_opt = socket.IPPROTO_IPV6, _IPV6_TCLASS
            else:
                if read_ecn:
                    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, data_tos)
                self._tos_level, self._tos_opt = socket.IPPROTO_IP, socket.IP_TOS
            if not udp_checksum and not self.v6:
                sock.setsockopt(socket.SOL_SOCKET, _SO_NO_CHECK, 1)
            if dont_fragment and not self.v6:
                sock.setsockopt(socket.IPPROTO_IP, _IP_MTU_DISCOVER, _IP_PMTUDISC_PROBE)
            sock.bind((self.address, port))
        except OSError as e:
            sock.close()
            raise LinkError(f"cannot bind UDP {self.address} port {port}: {e}") from e
        self.sock = sock
        self.port = sock.getsockname()[1]
        self.peer_port = peer_port if peer_port is not None else self.port
        self.impairment = impairment
        self.max_batch = max_batch
        self.max_rounds = max(1, max_rounds)
        #: whether received datagrams' ECN field is read (``IP_RECVTOS``); else it is reported 0
        self.read_ecn = read_ecn
        self._data_tos = data_tos
        self._cmsg: dict[int, list[tuple[int, int, bytes]]] = {}
        self._addr: dict[str, tuple[str, int]] = {}
        self._backlog: deque[tuple[bytes, tuple[str, int], int]] = deque()
        self._callback: ReceiveCallback | None = None
        self._closed = False
        self.counters: dict[str, int] = link_counters()
        self.loop.add_reader(sock.fileno(), self._on_readable)

    def __repr__(self) -> str:
        return f"DirectLink({self.address!r}, port={self.port})"

    # -- transmit ------------------------------------------------------------------------------

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        """Send (after the impairment, if any); ``entropy`` is not representable here (module doc)."""
        addr = self._addr.get(dst)
        if addr is None:
            addr = self._addr[dst] = (dst, self.peer_port)
        t = ((dscp & 0x3F) << 2) | (ecn & 3)
        imp = self.impairment
        if imp is None:
            if t == self._data_tos and not self._backlog and not self._closed:
                # fast path: the common class, nothing queued
                try:
                    self.sock.sendto(datagram, addr)
                except OSError as e:
                    self._tx_failed(e, datagram, addr, t)
                    return
                c = self.counters
                c["tx_packets"] += 1
                c["tx_bytes"] += len(datagram)
                return
            self._tx(datagram, addr, t)
            return
        for data, delay in imp.apply(datagram):
            if delay > 0:
                self.loop.call_later(delay, self._tx, data, addr, t)
            else:
                self._tx(data, addr, t)

    def send_many(self, datagrams: Sequence[tuple[bytes, str, int]], data_class: Sequence[bool], ecn: int = 0) -> None:
        """:meth:`send_marked` with the classic two classes: a datagram whose PDS type (first
        byte >> 3) is marked in ``data_class`` goes in the data class (``DSCP_DATA`` with
        ``ecn``), every other one in the control class (``DSCP_CONTROL``, ECN 0)."""
        t_data = ((DSCP_DATA & 0x3F) << 2) | (ecn & 3)
        t_ctl = (DSCP_CONTROL & 0x3F) << 2
        self.send_marked(datagrams, [t_data if c else t_ctl for c in data_class])

    def send_marked(self, datagrams: Sequence[tuple[bytes, str, int]], tos: Sequence[int]) -> None:
        """Send a batch as :meth:`send` would, one datagram at a time and in order, datagram
        ``d`` with the IP TOS byte ``tos[d[0] >> 3]`` (the FEP core's marking by PDS type,
        :attr:`uet.fep.core.FepCore.tos`). The common case (the data class, nothing queued, no
        impairment) is one ``sendto`` per datagram with no per-datagram method call, address
        lookup or counter update; other classes go through ``sendmsg`` with their TOS."""
        if self.impairment is not None or self._backlog or self._closed:
            send = self.send
            for data, dst, entropy in datagrams:
                t = tos[data[0] >> 3]
                send(data, dst, entropy, t >> 2, t & 3)
            return
        sendto = self.sock.sendto
        addrs = self._addr
        port = self.peer_port
        data_tos = self._data_tos
        npkts = nbytes = 0
        it = iter(datagrams)
        for data, dst, _entropy in it:
            addr = addrs.get(dst)
            if addr is None:
                addr = addrs[dst] = (dst, port)
            t = tos[data[0] >> 3]
            if t != data_tos:
                self._tx(data, addr, t)
                if self._backlog:
                    break
                continue
            try:
                sendto(data, addr)
            except OSError as e:
                self._tx_failed(e, data, addr, t)
                break
            npkts += 1
            nbytes += len(data)
        c = self.counters
        c["tx_packets"] += npkts
        c["tx_bytes"] += nbytes
        for data, dst, entropy in it:  # the send buffer filled up: the rest queue in order
            t = tos[data[0] >> 3]
            self.send(data, dst, entropy, t >> 2, t & 3)

    def _tx(self, data: bytes, addr: tuple[str, int], t: int) -> None:
        if self._closed:
            return
        if self._backlog:
            self._backlog.append((data, addr, t))
            return
        try:
            if t == self._data_tos:
                self.sock.sendto(data, addr)
            else:
                self.sock.sendmsg([data], self._tos_cmsg(t), 0, addr)
        except OSError as e:
            self._tx_failed(e, data, addr, t)
            return
        c = self.counters
        c["tx_packets"] += 1
        c["tx_bytes"] += len(data)

    def _tx_failed(self, exc: OSError, data: bytes, addr: tuple[str, int], t: int) -> None:
        """A send raised: queue it if the buffer was full, else count the error (and drop)."""
        if isinstance(exc, BlockingIOError):
            self.counters["tx_backlog"] += 1
            self._backlog.append((data, addr, t))
            self.loop.add_writer(self.sock.fileno(), self._on_writable)
        else:
            self.counters["tx_errors"] += 1

    def _tos_cmsg(self, t: int) -> list[tuple[int, int, bytes]]:
        cm = self._cmsg.get(t)
        if cm is None:
            cm = self._cmsg[t] = [(self._tos_level, self._tos_opt, struct.pack("i", t))]
        return cm

    def _on_writable(self) -> None:
        drain_backlog(self.loop, self.sock, self._backlog, self.counters, self._send_queued)

    def _send_queued(self, item: tuple[bytes, tuple[str, int], int]) -> int:
        data, addr, t = item
        if t == self._data_tos:
            return self.sock.sendto(data, addr)
        return self.sock.sendmsg([data], self._tos_cmsg(t), 0, addr)

    @property
    def backlog(self) -> int:
        """Datagrams waiting for room in the socket's send buffer."""
        return len(self._backlog)

    # -- receive -------------------------------------------------------------------------------

    def set_receiver(self, callback: ReceiveCallback) -> None:
        self._callback = callback

    def _on_readable(self) -> None:
        """Drain the socket: batches of at most ``max_batch`` datagrams, handed over one by one,
        until ``recvmsg`` says EAGAIN or ``max_rounds`` batches were read (then the selector
        calls again: other callbacks get their turn). One wakeup thus serves a whole burst, and
        the endpoint runs the PDS core (and sends its coalesced ACKs) once per batch."""
        read_ecn = self.read_ecn
        rx_ecn = RX_ECN
        recvmsg = self.sock.recvmsg
        recvfrom = None if read_ecn else self.sock.recvfrom
        v6 = self.v6
        c = self.counters
        cap = self.max_batch
        for _round in range(self.max_rounds):
            batch: list[tuple[bytes, str, int]] = []
            append = batch.append
            nbytes = 0
            more = True
            for _ in range(cap):
                try:
                    if recvfrom is not None:  # read_ecn off: plain recvfrom, ECN reported 0
                        data, src = recvfrom(65536)
                        append((data, src[0], 0))
                        nbytes += len(data)
                        continue
                    data, anc, _flags, src = recvmsg(65536, 64)
                except BlockingIOError:
                    more = False
                    break
                except OSError:
                    c["rx_errors"] += 1
                    more = False
                    break
                if anc:  # the TOS byte: ECN and a switch's trim mark (uet.fep.marking.RX_ECN)
                    raw = anc[0][2]
                    append((data, src[0], rx_ecn[(int.from_bytes(raw, sys.byteorder) if v6 else raw[0]) & 0xFF]))
                else:
                    append((data, src[0], 0))
                nbytes += len(data)
            if batch:
                c["rx_packets"] += len(batch)
                c["rx_bytes"] += nbytes
                c["rx_batches"] += 1
                if self._callback is not None:
                    self._callback(batch)
            if not more or self._closed:
                return

    # -- teardown ------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        close_socket(self.loop, self.sock, self._backlog)
