"""IP link: UET directly over IP protocol 253 (architecture.md "Link modes: ip"; wire-format.md
§1.2).

The way the UEC reference provider sends UET: no UDP header, the IP protocol (IPv6 next header) is
253 (an RFC 3692 experimental number, configurable with ``proto``), and a 4-byte **entropy
header** — ``entropy (16 bits) ‖ reserved 0 (16 bits)``, big-endian — comes first, then TSS/PDS.
Each datagram's entropy value is on the wire here (a UDP socket cannot vary its source port), so
the receiver hands it up: this link gives :class:`~uet.fep.events.Datagram` records whose
``source_port`` is the received entropy (``records`` is always true), which the TSS stage puts in
the AAD and the CRC stage in its covered bytes (:mod:`uet.fep.integrity`, ``over_ip``).

Implementation (Linux):

* One ``SOCK_RAW`` socket of protocol ``proto`` bound to the FEP's address: the kernel builds the
  IP header (no ``IP_HDRINCL``), and a bound raw socket only receives packets addressed to its
  own address, so several FEPs share a host (each on its own 127/8 address, or in its own network
  namespace). Opening it needs root or ``CAP_NET_RAW``; without, :class:`LinkError` says so in
  one line.
* IPv4 raw sockets receive the whole IP header: the link reads the source address and the TOS
  byte (so ECN) from it and skips ``IHL × 4`` bytes. IPv6 raw sockets receive the payload only:
  the source comes from ``recvmsg`` and the traffic class from ``IPV6_RECVTCLASS``.
* DSCP/ECN: the data class's TOS byte is set once (``IP_TOS``/``IPV6_TCLASS``); other classes
  carry it per datagram as a control message, as :class:`~uet.link.direct.DirectLink` does.
* A datagram shorter than the entropy header, or whose reserved half is not zero, is not UET:
  counted in ``rx_errors`` and dropped.
* When the send buffer is full, datagrams wait in order in a backlog (``tx_backlog``), never
  dropped silently.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
import sys
from collections import deque
from typing import Any

from uet.fep.events import Datagram
from uet.fep.marking import RX_ECN
from uet.link.base import DSCP_DATA, Link, ReceiveCallback, tos
from uet.link.direct import LinkError
from uet.link.impair import Impairment
from uet.link.sockio import close_socket, drain_backlog, link_counters, size_buffers
from uet.wire.net import UET_IP_PROTO

__all__ = ["IpLink", "ENTROPY_HEADER_LEN", "raw_socket_error"]

#: the bytes the entropy header puts in front of every datagram (wire-format.md §1.2)
ENTROPY_HEADER_LEN = 4

_ENTROPY = struct.Struct(">HH")
_IPV6_RECVTCLASS = getattr(socket, "IPV6_RECVTCLASS", 66)
_IPV6_TCLASS = getattr(socket, "IPV6_TCLASS", 67)


def raw_socket_error(proto: int = UET_IP_PROTO) -> str | None:
    """None when this process may open a raw socket of ``proto``, else the one-line reason."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_RAW, proto).close()
    except PermissionError:
        return f"the ip link (UET over IP protocol {proto}) needs a raw socket: run as root or grant CAP_NET_RAW"
    except OSError as e:
        return f"the ip link cannot open a raw socket of protocol {proto}: {e.strerror or e}"
    return None


class IpLink(Link):
    """One raw IP socket of protocol ``proto`` bound to ``address`` on the running event loop."""

    #: the CRC stage covers the entropy header, not a UDP header (uet.fep.integrity)
    over_ip = True
    gives_records = True

    def __init__(
        self,
        address: str,
        *,
        proto: int = UET_IP_PROTO,
        impairment: Impairment | None = None,
        rcvbuf: int = 4 << 20,
        sndbuf: int = 4 << 20,
        max_batch: int = 64,
        max_rounds: int = 4,
        data_tos: int = tos(DSCP_DATA),
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not 0 < proto < 255:
            raise LinkError(f"IP protocol {proto} is not a protocol number (1..254)")
        self.loop = loop or asyncio.get_running_loop()
        ip = ipaddress.ip_address(address)
        self.address = str(ip)
        self.v6 = ip.version == 6
        self.proto = proto
        fam = socket.AF_INET6 if self.v6 else socket.AF_INET
        try:
            sock = socket.socket(fam, socket.SOCK_RAW, proto)
        except PermissionError as e:
            raise LinkError(raw_socket_error(proto) or str(e)) from e
        except OSError as e:
            raise LinkError(f"cannot open a raw socket of IP protocol {proto}: {e}") from e
        try:
            sock.setblocking(False)
            size_buffers(sock, rcvbuf, sndbuf)
            if self.v6:
                sock.setsockopt(socket.IPPROTO_IPV6, _IPV6_RECVTCLASS, 1)
                sock.setsockopt(socket.IPPROTO_IPV6, _IPV6_TCLASS, data_tos)
                self._tos_level, self._tos_opt = socket.IPPROTO_IPV6, _IPV6_TCLASS
            else:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, data_tos)
                self._tos_level, self._tos_opt = socket.IPPROTO_IP, socket.IP_TOS
            sock.bind((self.address, 0))
        except OSError as e:
            sock.close()
            raise LinkError(f"cannot bind IP protocol {proto} on {self.address}: {e}") from e
        self.sock = sock
        #: hands up Datagram records with the entropy as ``source_port`` (module docstring)
        self.records = True
        self.impairment = impairment
        self.max_batch = max_batch
        self.max_rounds = max(1, max_rounds)
        self._data_tos = data_tos
        self._cmsg: dict[int, list[tuple[int, int, bytes]]] = {}
        self._backlog: deque[tuple[bytes, tuple[str, int], int]] = deque()
        self._callback: ReceiveCallback | None = None
        self._closed = False
        self.counters: dict[str, int] = link_counters()
        self.loop.add_reader(sock.fileno(), self._on_readable)

    def __repr__(self) -> str:
        return f"IpLink({self.address!r}, proto={self.proto})"

    # -- transmit ------------------------------------------------------------------------------

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        """Send ``entropy header ‖ datagram`` to ``dst`` (after the impairment, if any)."""
        data = _ENTROPY.pack(entropy & 0xFFFF, 0) + datagram
        t = ((dscp & 0x3F) << 2) | (ecn & 3)
        addr = (dst, 0)
        imp = self.impairment
        if imp is None:
            self._tx(data, addr, t)
            return
        for out, delay in imp.apply(data):
            if delay > 0:
                self.loop.call_later(delay, self._tx, out, addr, t)
            else:
                self._tx(out, addr, t)

    def _tx(self, data: bytes, addr: tuple[str, int], t: int) -> None:
        if self._closed:
            return
        if self._backlog:
            self._backlog.append((data, addr, t))
            return
        try:
            self._sendto(data, addr, t)
        except BlockingIOError:
            self.counters["tx_backlog"] += 1
            self._backlog.append((data, addr, t))
            self.loop.add_writer(self.sock.fileno(), self._on_writable)
            return
        except OSError:
            self.counters["tx_errors"] += 1
            return
        c = self.counters
        c["tx_packets"] += 1
        c["tx_bytes"] += len(data)

    def _sendto(self, data: bytes, addr: tuple[str, int], t: int) -> int:
        if t == self._data_tos:
            return self.sock.sendto(data, addr)
        cm = self._cmsg.get(t)
        if cm is None:
            cm = self._cmsg[t] = [(self._tos_level, self._tos_opt, struct.pack("i", t))]
        return self.sock.sendmsg([data], cm, 0, addr)

    def _on_writable(self) -> None:
        drain_backlog(self.loop, self.sock, self._backlog, self.counters, lambda item: self._sendto(*item))

    @property
    def backlog(self) -> int:
        """Datagrams waiting for room in the socket's send buffer."""
        return len(self._backlog)

    # -- receive -------------------------------------------------------------------------------

    def set_receiver(self, callback: ReceiveCallback) -> None:
        self._callback = callback

    def parse(self, packet: bytes, src: str, tclass: int) -> Datagram | None:
        """One received raw-socket payload → a :class:`Datagram`, or None (not UET: counted).
        For IPv4 ``packet`` starts with the IP header (its TOS byte gives the ECN); for IPv6 it
        starts with the entropy header and ``tclass`` is the traffic class."""
        if not self.v6:
            if len(packet) < 20:
                self.counters["rx_errors"] += 1
                return None
            ihl = (packet[0] & 0x0F) * 4
            tclass = packet[1]
            packet = packet[ihl:]
        if len(packet) < ENTROPY_HEADER_LEN:
            self.counters["rx_errors"] += 1
            return None
        entropy, reserved = _ENTROPY.unpack_from(packet)
        if reserved:
            self.counters["rx_errors"] += 1
            return None
        marks = RX_ECN[tclass & 0xFF]  # ECN and a switch's trim mark (uet.fep.marking)
        return Datagram(packet[ENTROPY_HEADER_LEN:], src, marks & 3, marks > 3, marks >= 0x200, entropy)

    def _on_readable(self) -> None:
        """Drain the socket in batches of at most ``max_batch`` until EAGAIN or ``max_rounds``
        batches, so the core runs once per batch. The loop has the direct link's shape on
        purpose but its own body: each datagram is parsed here (IP and entropy headers) and
        handed up as a record, while the direct link's loop is the UDP data path's tuned copy."""
        recvmsg = self.sock.recvmsg
        parse = self.parse
        v6 = self.v6
        c = self.counters
        for _round in range(self.max_rounds):
            batch: list[Any] = []  # Datagram records (ReceiveCallback takes them too, uet.endpoint)
            nbytes = 0
            more = True
            for _ in range(self.max_batch):
                try:
                    data, anc, _flags, src = recvmsg(65536, 64)
                except BlockingIOError:
                    more = False
                    break
                except OSError:
                    c["rx_errors"] += 1
                    more = False
                    break
                tclass = int.from_bytes(anc[0][2], sys.byteorder) if (v6 and anc) else 0
                d = parse(data, src[0], tclass)
                if d is not None:
                    batch.append(d)
                    nbytes += len(d.data)
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
