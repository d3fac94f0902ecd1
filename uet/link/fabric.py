"""Fabric link: the FEP's NIC port on a switch port (architecture.md "Link modes: fabric").

One UDP socket, connected to the switch process's port for this host (``uet-fabric``), carries
whole Ethernet frames, one per datagram. The link builds every header itself, so what the fabric
sees are real header bits (wire-format.md §1.1, §1.3; rocev2-and-fabric.md §1.4, §8.1):

* Ethernet II: source MAC derived from the FA (**decision**: ``02:00`` + the four IPv4 bytes, a
  locally administered unicast address — the same rule the topology uses for host MACs, so the
  switch's rewritten destination MAC equals ours); destination MAC the gateway (the leaf port):
  configured, else learned from the source MAC of the first frame received, else broadcast.
* IPv4: IHL 5, DF, ID 0, TTL 64, DSCP as the endpoint asks (data 0 / ACK, NACK, control 46),
  ECN: data packets the caller sends Not-ECT go out ``data_ecn`` (default **ECT(0)**, the choice
  wire-format.md §1.3 leaves open: ECN-capable when the fabric may mark), header checksum.
* UDP: source port = the packet's **entropy** (what ECMP hashes), destination 4793, checksum
  computed (wire-format.md §1.1 "our choice").

Fabric Addresses in fabric mode are the topology's IPv4 addresses (host h on leaf l is
10.0.l.(h+1), §8.8); they only label frames — the socket itself lives on 127.0.0.1.

**Receive.** Frames are read in batches; an IPv4/UDP frame to port 4793 whose header checksum is
right yields ``(datagram, source FA, ecn)`` — the UDP payload cut to the IP total length (frames
are padded to 60 bytes), the IP source address and the ECN bits (3 = CE, for congestion
control). Anything else is counted and dropped. A packet trimmed by a switch (DSCP 5 or 7,
§8.4) has lost its payload; the :class:`~uet.link.base.Link` callback has no field to say so and
the PDS core must not take a cut packet for a whole one, so by default the link drops it and counts
``rx_trimmed`` (the sender's SACK / RTO recovery resends it). With ``deliver_trimmed`` the link
passes it up with :data:`ECN_TRIMMED` (and :data:`ECN_LASTHOP` for DSCP 5) or-ed into the ``ecn``
value, for an endpoint that hands those to ``PdsCore.receive_datagram(trimmed=, last_hop=)``.

**PFC** (IEEE 802.1Qbb, §8.5) is the NIC model's (:class:`uet.fabric.model.nic.PfcTransmit`,
the rule the simulator's NICs follow): a pause frame from the leaf stops the paused priorities for
quanta × 512 bit times at ``rate_bps`` (the host link's rate, rounded up as the switch model
does); frames of a paused class wait in order and go out when an XON (0 quanta) arrives or the
pause expires; a classic 802.3x PAUSE stops every class. This adapter only hands the model the
frames and the time and fires its one timer. Time is the link's ``clock`` (a
:class:`uet.clock.DilatedClock` under time dilation: quanta are bit times of the *virtual* link
rate, so a pause lasts TDF times longer in real time). The class of a frame is the switch's: its
DSCP through the DSCP → TC table (``dscp_map``, default §8.1), TC = priority (model config decision).

On opening, the link sends one gratuitous ARP frame so the switch process learns the socket's
address before any frame must be delivered to it.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections import deque
from collections.abc import Sequence
from typing import Any

from uet.clock import DilatedClock
from uet.errors import DecodeError, UetError
from uet.fep.events import Datagram
from uet.link.base import DSCP_DATA, Link, ReceiveCallback
from uet.wire.frame import MARK_LASTHOP, MARK_TRIMMED, build_udp_frame, parse_udp_frame
from uet.wire.net import UET_UDP_PORT, ip_bytes

__all__ = ["ECN_LASTHOP", "ECN_TRIMMED", "FabricLink", "fa_mac"]

#: Or-ed into the ``ecn`` of a received trimmed packet (``deliver_trimmed``): a switch cut it.
ECN_TRIMMED = MARK_TRIMMED
#: Or-ed in besides :data:`ECN_TRIMMED` when the trim happened at the last hop (DSCP 5).
ECN_LASTHOP = MARK_LASTHOP

_ECT0 = 2
_BROADCAST = b"\xff" * 6
_ETH_ARP = 0x0806
_ETH_MAC_CONTROL = 0x8808
_ETH_VLAN = 0x8100


def fa_mac(address: str) -> bytes:
    """The MAC of the NIC with Fabric Address ``address``: ``02:00`` + its IPv4 bytes."""
    return b"\x02\x00" + ip_bytes(address)


def _default_dscp_map() -> tuple[int, ...]:
    from uet.fabric.model.config import default_dscp_map

    return default_dscp_map()


class FabricLinkError(UetError):
    """The fabric link could not be opened."""


class FabricLink(Link):
    """A NIC port on switch port ``switch`` (``(host, udp port)`` of the ``uet-fabric`` socket)."""

    gives_records = True

    def __init__(
        self,
        address: str,
        switch: tuple[str, int],
        *,
        bind: tuple[str, int] = ("127.0.0.1", 0),
        mac: bytes | None = None,
        gateway_mac: bytes | None = None,
        rate_bps: int = 100_000_000,
        udp_port: int = UET_UDP_PORT,
        data_ecn: int = _ECT0,
        udp_checksum: bool = True,
        deliver_trimmed: bool = False,
        dscp_map: Sequence[int] | None = None,
        max_batch: int = 64,
        rcvbuf: int = 4 << 20,
        sndbuf: int = 4 << 20,
        loop: asyncio.AbstractEventLoop | None = None,
        clock: DilatedClock | None = None,
    ) -> None:
        self.loop = loop or asyncio.get_running_loop()
        #: the link's time (PFC pause expiry): virtual ns under time dilation (uet.clock)
        self.clock = clock or DilatedClock()
        if ":" in address:
            raise FabricLinkError("the fabric link carries IPv4 Fabric Addresses only")
        self.address = address
        self._src_ip = ip_bytes(address)
        self.mac = mac or fa_mac(address)
        self.gateway_mac = gateway_mac
        self._learn_gateway = gateway_mac is None
        self.rate_bps = int(rate_bps)
        self.udp_port = udp_port
        self.data_ecn = data_ecn & 3
        self.udp_checksum = udp_checksum
        self.deliver_trimmed = deliver_trimmed
        #: hand up :class:`uet.fep.events.Datagram` records (trim marks as named fields, the UDP
        #: source port for TSS's AAD) instead of ``(datagram, source FA, ecn)`` triples; the
        #: endpoint sets it when the FEP core seals and opens TSS itself (uet.endpoint)
        self.records = False
        self.dscp_map = tuple(dscp_map) if dscp_map is not None else _default_dscp_map()
        self.max_batch = max_batch
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            for opt, size in ((socket.SO_RCVBUF, rcvbuf), (socket.SO_SNDBUF, sndbuf)):
                try:
                    sock.setsockopt(socket.SOL_SOCKET, opt, size)
                except OSError:  # pragma: no cover - bounded by net.core.*mem_max
                    pass
            sock.bind(bind)
            sock.connect(switch)
        except OSError as e:
            sock.close()
            raise FabricLinkError(f"cannot open a fabric link to {switch}: {e}") from e
        self.sock = sock
        self.port = sock.getsockname()[1]
        self.switch = switch
        self._callback: ReceiveCallback | None = None
        self._closed = False
        self._resume: asyncio.TimerHandle | None = None
        self._resume_at = 0
        self._backlog: deque[bytes] = deque()
        self._ip_cache: dict[str, bytes] = {}
        self.counters: dict[str, int] = {
            "tx_packets": 0,
            "tx_bytes": 0,
            "rx_packets": 0,
            "rx_bytes": 0,
            "rx_ce": 0,
            "rx_trimmed": 0,
            "rx_not_uet": 0,
            "rx_malformed": 0,
            "rx_errors": 0,
            "tx_errors": 0,
            "tx_backlog": 0,
            "tx_held": 0,
            "pfc_rx_xoff": 0,
            "pfc_rx_xon": 0,
        }
        from uet.fabric.model.nic import PfcTransmit

        #: the NIC's PFC behaviour (sans-I/O, shared with the simulator's NICs)
        self.pfc = PfcTransmit(self.rate_bps, self.dscp_map, self.counters)
        self.loop.add_reader(sock.fileno(), self._on_readable)
        self._announce()

    def __repr__(self) -> str:
        return f"FabricLink({self.address!r}, switch={self.switch})"

    def _announce(self) -> None:
        """Gratuitous ARP (RFC 5227 announcement) so the switch learns this socket's address."""
        arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, self.mac, self._src_ip, b"\0" * 6, self._src_ip)
        frame = _BROADCAST + self.mac + struct.pack("!H", _ETH_ARP) + arp
        self._raw_send(frame.ljust(60, b"\0"))

    # -- transmit ------------------------------------------------------------------------------

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        """Frame ``datagram`` for ``dst`` and send it, or hold it while its class is paused."""
        if self._closed:
            return
        if ecn == 0 and dscp == DSCP_DATA:
            ecn = self.data_ecn
        frame = self.build(datagram, dst, entropy, dscp, ecn)
        now = self.clock()
        if not self.pfc.send(frame, dscp, now):
            self._release(now)
            return
        self._raw_send(frame)

    def build(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int) -> bytes:
        """The Ethernet/IPv4/UDP frame carrying ``datagram`` (the one codec,
        :func:`uet.wire.frame.build_udp_frame`; see the module docstring)."""
        dst_ip = self._ip_cache.get(dst)
        if dst_ip is None:
            dst_ip = self._ip_cache[dst] = ip_bytes(dst)
        return build_udp_frame(
            datagram,
            self._src_ip,
            dst_ip,
            sport=entropy,
            dscp=dscp,
            ecn=ecn,
            src_mac=self.mac,
            dst_mac=self.gateway_mac or _BROADCAST,
            dport=self.udp_port,
            udp_checksum=self.udp_checksum,
        )

    def _raw_send(self, frame: bytes) -> None:
        if self._backlog:
            self._backlog.append(frame)
            return
        try:
            self.sock.send(frame)
        except BlockingIOError:
            self.counters["tx_backlog"] += 1
            self._backlog.append(frame)
            self.loop.add_writer(self.sock.fileno(), self._on_writable)
            return
        except OSError:
            self.counters["tx_errors"] += 1
            return
        c = self.counters
        c["tx_packets"] += 1
        c["tx_bytes"] += len(frame)

    def _on_writable(self) -> None:
        bl = self._backlog
        c = self.counters
        while bl:
            try:
                self.sock.send(bl[0])
            except BlockingIOError:
                return
            except OSError:
                c["tx_errors"] += 1
            else:
                c["tx_packets"] += 1
                c["tx_bytes"] += len(bl[0])
            bl.popleft()
        self.loop.remove_writer(self.sock.fileno())

    @property
    def held(self) -> int:
        """Frames waiting for a paused class to resume."""
        return self.pfc.held

    @property
    def paused_until(self) -> list[int]:
        """Per priority, the end of its pause on ``clock`` (0: not paused)."""
        return self.pfc.paused_until(self.clock())

    # -- PFC: the model decides, the adapter sends and fires its timer ---------------------------

    def _release(self, now: int) -> None:
        """Send what the model releases at ``now``; arm the timer for its next deadline."""
        for frame in self.pfc.due(now):
            if self._closed:
                break
            self._raw_send(frame)
        t = self.pfc.next_deadline(now)
        if t == self._resume_at and self._resume is not None:
            return
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        self._resume_at = t or 0
        if t is not None and not self._closed:
            self._resume = self.loop.call_later(self.clock.real_delay(t - now), self._on_resume)

    def _on_resume(self) -> None:
        self._resume = None
        self._release(self.clock())

    # -- receive -------------------------------------------------------------------------------

    def set_receiver(self, callback: ReceiveCallback) -> None:
        self._callback = callback

    def _on_readable(self) -> None:
        recv = self.sock.recv
        # (datagram, source FA, ecn) triples, or Datagram records for an owner that asked for them
        batch: list[Any] = []
        for _ in range(self.max_batch):
            try:
                frame = recv(65536)
            except BlockingIOError:
                break
            except OSError:
                self.counters["rx_errors"] += 1
                break
            item = self.parse(frame)
            if item is not None:
                batch.append(item)
        if batch and self._callback is not None and not self._closed:
            self._callback(batch)

    def parse(self, frame: bytes) -> tuple[bytes, str, int] | Datagram | None:
        """One received frame → ``(datagram, source FA, ecn)`` (a :class:`Datagram` with
        :attr:`records`), or None (consumed or dropped)."""
        c = self.counters
        if len(frame) < 14:
            c["rx_malformed"] += 1
            return None
        et = (frame[12] << 8) | frame[13]
        off = 14
        if et == _ETH_VLAN and len(frame) >= 18:
            et = (frame[16] << 8) | frame[17]
            off = 18
        if et == _ETH_MAC_CONTROL:
            now = self.clock()
            if self.pfc.receive(frame, off, now):
                self._release(now)
            else:
                c["rx_not_uet"] += 1
            return None
        try:
            rx = parse_udp_frame(frame, port=self.udp_port)
        except DecodeError:
            c["rx_malformed"] += 1
            return None
        if rx is None:
            c["rx_not_uet"] += 1
            return None
        if self._learn_gateway and self.gateway_mac is None:
            self.gateway_mac = frame[6:12]
        ecn = rx.ecn
        if rx.trimmed:
            c["rx_trimmed"] += 1
            if not self.deliver_trimmed:
                return None
            ecn |= ECN_TRIMMED | (ECN_LASTHOP if rx.last_hop else 0)
        if ecn & 3 == 3:
            c["rx_ce"] += 1
        c["rx_packets"] += 1
        c["rx_bytes"] += len(rx.data)
        if self.records:
            return Datagram(rx.data, rx.source, ecn & 3, rx.trimmed, rx.last_hop, rx.source_port)
        return rx.data, rx.source, ecn

    # -- teardown ------------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        self.pfc.clear()
        fd = self.sock.fileno()
        self.loop.remove_reader(fd)
        if self._backlog:
            self.loop.remove_writer(fd)
            self._backlog.clear()
        self.sock.close()
