"""The CRC stage of the FEP core: integrity without TSS (behaviour.md §2.16, wire-format.md §1.4).

With ``FepConfig.data_protect = "crc"`` (the spec parameter ``UET_Data_Protect`` = 1) the core
runs every datagram through a :class:`CrcStage` where a secure FEP runs its TSS stage: each
datagram sent gets the 4-byte CRC-32C trailer (:mod:`uet.wire.crc`) and each datagram received
must carry a matching one. A datagram whose trailer is missing or wrong is dropped **silently** —
it never reaches PDS, so nothing answers it — and counted (``crc_drop_bad``; ``crc_drop_short``
below 4 bytes); ``crc_ok`` counts the good ones.

The trailer covers the IP addresses and the UDP header, so the stage needs the ports the packet
carries on the wire. Sans-I/O it cannot see them; like the TSS stage's AAD entropy it takes them
from its configuration (decision):

* ``tx_ports`` / ``rx_ports`` = ``(source port, destination port)`` of what it sends / receives.
  A source port of None means "each datagram's own": the :class:`~uet.fep.events.Transmit`
  entropy on transmit and the :class:`~uet.fep.events.Datagram` ``source_port`` on receive —
  the fabric link's and the simulator's case, where the entropy value is the UDP source port.
  The default is ``(None, 4793)`` both ways. The asyncio adapter's direct link, whose every
  datagram leaves from the link's bound port, is given instead as :class:`FixedPorts` (through
  :meth:`uet.fep.core.FepCore.set_link_ports`): ``port`` (this FEP's) and ``peer_port`` (every
  peer's), read at each datagram (a test may re-point ``peer_port`` after opening).
* UET directly over IP (:class:`~uet.link.ip.IpLink`, ``over_ip`` true): the trailer covers the
  4-byte entropy header instead of a UDP header (wire-format.md §1.2, §1.4); the entropy is each
  datagram's own, the Transmit entropy on transmit and the Datagram ``source_port`` (the entropy
  header's value) on receive.
* A **trimmed** packet has lost its tail and so its trailer: it is passed on unchecked (PDS only
  reads its headers, to NACK it, behaviour.md §3) and counted in ``crc_unchecked_trimmed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from uet.tss.nonce import entropy_header
from uet.wire.crc import append_trailer, check_trailer, entropy_prefix, udp_prefix
from uet.wire.frame import MARK_TRIMMED
from uet.wire.net import as_address

__all__ = ["CrcStage", "DATA_PROTECT", "FixedPorts", "UET_PORT"]

#: the IANA UDP port of UET (wire-format.md §1.1)
UET_PORT = 4793
#: the values of ``FepConfig.data_protect`` (behaviour.md §2.16: 0 none, 1 CRC, 2 TSS)
DATA_PROTECT = ("none", "crc", "tss")

_tnew = tuple.__new__
_ECN_TRIMMED = MARK_TRIMMED  # uet.fep.core.ECN_TRIMMED


class FixedPorts(Protocol):
    """The UDP ports every datagram of a FEP carries, read at each datagram (a link whose socket
    is bound: :class:`uet.link.direct.DirectLink`); a ``port`` of None is each datagram's entropy,
    a ``peer_port`` of None the UET port."""

    @property
    def port(self) -> int | None: ...

    @property
    def peer_port(self) -> int | None: ...


class CrcStage:
    """Appends and checks the CRC-32C trailer of every datagram of one FEP (module docstring)."""

    def __init__(
        self,
        address: str,
        *,
        tx_ports: tuple[int | None, int] = (None, UET_PORT),
        rx_ports: tuple[int | None, int] = (None, UET_PORT),
    ) -> None:
        self.address = address
        self._me = as_address(address)
        self.tx_ports = tx_ports
        self.rx_ports = rx_ports
        #: the ports of a bound link (the direct link) overriding both port pairs
        self.fixed_ports: FixedPorts | None = None
        #: UET directly over IP: cover the entropy header, not a UDP header (module docstring)
        self.over_ip = False
        self._addr: dict[str, bytes] = {}
        self.counters: dict[str, int] = {
            "crc_ok": 0,
            "crc_drop_bad": 0,
            "crc_drop_short": 0,
            "crc_unchecked_trimmed": 0,
        }

    def _ip(self, addr: str) -> bytes | None:
        b = self._addr.get(addr)
        if b is None:
            try:
                b = as_address(addr)
            except (OSError, ValueError):
                return None
            if len(self._addr) >= 4096:
                self._addr.clear()
            self._addr[addr] = b
        return b

    # -- transmit ----------------------------------------------------------------------------------

    def seal(self, data: bytes, dst: str, entropy: int) -> bytes:
        """``data`` with its trailer, for ``dst`` (``entropy``: the UDP source port when the
        configured one is None)."""
        fp = self.fixed_ports
        sport, dport = self.tx_ports if fp is None else (fp.port, fp.peer_port or UET_PORT)
        ip = self._ip(dst)
        if ip is None:
            raise ValueError(f"CRC trailer needs an IP destination, not {dst!r}")
        if self.over_ip:
            return append_trailer(data, entropy_prefix(self._me, ip, entropy_header(entropy)))
        return append_trailer(data, udp_prefix(self._me, ip, entropy if sport is None else sport, dport, len(data)))

    def seal_batch(self, items: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Every ``(data, destination, entropy, ...)`` record with its trailer, other fields and
        the record type kept."""
        seal = self.seal
        return [_tnew(type(t), (seal(t[0], t[1], t[2]), *t[1:])) for t in items]

    # -- receive -----------------------------------------------------------------------------------

    def open(self, data: bytes, src: str, sport: int | None, trimmed: bool) -> bytes | None:
        """The UET bytes of ``data`` from ``src`` without the trailer, or None (counted)."""
        c = self.counters
        if trimmed:
            c["crc_unchecked_trimmed"] += 1
            return data
        if len(data) < 4:
            c["crc_drop_short"] += 1
            return None
        fp = self.fixed_ports
        port, dport = self.rx_ports if fp is None else (fp.peer_port, fp.port or UET_PORT)
        ip = self._ip(src)
        body = None
        if ip is not None and self.over_ip:
            body = check_trailer(data, entropy_prefix(ip, self._me, entropy_header(sport or 0)))
        elif ip is not None:
            body = check_trailer(data, udp_prefix(ip, self._me, (sport or 0) if port is None else port, dport,
                                                  len(data) - 4))  # fmt: skip
        if body is None:
            c["crc_drop_bad"] += 1
            return None
        c["crc_ok"] += 1
        return body

    def open_marked(self, batch: Sequence[tuple[bytes, str, int]]) -> list[tuple[bytes, str, int]]:
        """``(data, source, ecn with trim marks)`` items (the links' packed form) without their
        trailers; the ones that fail are left out."""
        out = []
        for data, src, ecn in batch:
            body = self.open(data, src, None, bool(ecn & _ECN_TRIMMED))
            if body is not None:
                out.append((body, src, ecn))
        return out

    def open_batch(self, items: Sequence[Any]) -> list[Any]:
        """:class:`~uet.fep.events.Datagram` records without their trailers (source port: each
        record's own unless configured); the ones that fail are left out."""
        out = []
        for d in items:
            body = self.open(d[0], d[1], d[5], d[3])
            if body is not None:
                out.append(_tnew(type(d), (body, *d[1:])))
        return out
