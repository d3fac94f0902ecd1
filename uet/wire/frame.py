"""The one Ethernet II / IPv4 / UDP frame codec of the data path (wire-format.md §1.1, §1.3).

Everything that puts a UET datagram into a whole frame or takes it out again uses these two
functions: the fabric link of a live endpoint (:mod:`uet.link.fabric`), the switch model's test
and tool helpers (:func:`uet.fabric.model.frames.ipv4_frame`) and the virtual-time simulator
(:mod:`uet.sim`). The decoder (:mod:`uet.wire.capture`) parses the same bytes field by field from
the construct declarations in :mod:`uet.wire.net`; ``tests/test_wire_frame.py`` proves the two
agree.

Frame built (**decisions** where §1.3 leaves a choice): Ethernet II without FCS, padded to the
60-byte minimum; IPv4 with IHL 5, DF, ID 0, TTL 64, DSCP and ECN as given, header checksum; UDP
with the entropy as source port, destination 4793 and the checksum computed (0 → 0xFFFF).

Parsed (:func:`parse_udp_frame`): an IPv4/UDP frame (one 802.1Q tag allowed) gives a
:class:`RxFrame` whose named fields carry what the switches said about the packet — the ECN bits,
``trimmed`` (DSCP 5 or 7, rocev2-and-fabric.md §8.4) and ``last_hop`` (DSCP 5: cut at the last
switch) — instead of bits packed into the ECN integer. Frames that are not IPv4/UDP to the UET
port give None; malformed ones raise :class:`~uet.errors.DecodeError` with header, offset and
reason.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from uet.errors import DecodeError
from uet.wire.net import UET_UDP_PORT, inet_checksum

__all__ = [
    "DSCP_TRIM_FABRIC",
    "DSCP_TRIM_LASTHOP",
    "HEADER_BYTES",
    "MARK_LASTHOP",
    "MARK_TRIMMED",
    "FrameBuilder",
    "RxFrame",
    "build_udp_frame",
    "ip_word_sum",
    "parse_marked",
    "parse_udp_frame",
]

#: DSCP a switch gives a packet it trimmed towards another switch / towards the host (§8.4).
DSCP_TRIM_FABRIC: Final = 7
DSCP_TRIM_LASTHOP: Final = 5
#: Ethernet (14) + IPv4 (20) + UDP (8): the bytes in front of the UET datagram.
HEADER_BYTES: Final = 42
_ETH_MIN: Final = 60
_HDR: Final = struct.Struct("!6s6sHBBHHHBBH4s4sHHHH")
_IP_AT: Final = 14
_UDP_AT: Final = 34
_DF: Final = 0x4000
_ETH_IPV4: Final = 0x0800
_ETH_VLAN: Final = 0x8100
#: the trim marks the packed form (:func:`parse_marked`) ors into the ECN value: a switch cut the
#: payload off, at the last hop (defined here once: the cores' and links' ECN_TRIMMED / ECN_LASTHOP)
MARK_TRIMMED: Final = 0x100
MARK_LASTHOP: Final = 0x200


@dataclass(frozen=True, slots=True)
class RxFrame:
    """A UET datagram taken out of a frame, with what the headers said about it."""

    #: The UDP payload (TSS or PDS header onward), cut to the IP total length.
    data: bytes
    #: IPv4 source address (the sender's Fabric Address).
    source: str
    #: UDP source port: the packet's entropy value.
    source_port: int
    dscp: int
    #: The two ECN bits (3 = CE).
    ecn: int
    #: A switch cut the payload off (DSCP 5 or 7).
    trimmed: bool
    #: ... at the last hop (DSCP 5).
    last_hop: bool


def build_udp_frame(
    datagram: bytes | bytearray | memoryview,
    src_ip: bytes,
    dst_ip: bytes,
    *,
    sport: int,
    dscp: int = 0,
    ecn: int = 0,
    src_mac: bytes = b"\x02\0\0\0\0\1",
    dst_mac: bytes = b"\x02\0\0\0\0\2",
    dport: int = UET_UDP_PORT,
    ttl: int = 64,
    udp_checksum: bool = True,
    pad: bool = True,
) -> bytes:
    """Ethernet + IPv4 + UDP + ``datagram`` (see the module docstring); addresses as 4 bytes.
    ``pad=False`` leaves a short frame unpadded (the model pads it on the wire anyway)."""
    ulen = 8 + len(datagram)
    tos = ((dscp & 0x3F) << 2) | (ecn & 3)
    sport &= 0xFFFF
    # IPv4 header checksum: the one's-complement sum of its ten words, folded
    s = (
        0x4500
        + tos
        + 20
        + ulen
        + _DF
        + (ttl << 8)
        + 17
        + int.from_bytes(src_ip[:2], "big")
        + int.from_bytes(src_ip[2:], "big")
        + int.from_bytes(dst_ip[:2], "big")
        + int.from_bytes(dst_ip[2:], "big")
    )
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    ipsum = ~s & 0xFFFF
    usum = 0
    if udp_checksum:
        pseudo = int.from_bytes(src_ip + dst_ip, "big") + 17 + ulen + (sport << 48) + (dport << 32) + (ulen << 16)
        usum = inet_checksum(datagram, pseudo) or 0xFFFF
    head = _HDR.pack(
        dst_mac,
        src_mac,
        _ETH_IPV4,
        0x45,
        tos,
        20 + ulen,
        0,
        _DF,
        ttl,
        17,
        ipsum,
        src_ip,
        dst_ip,
        sport,
        dport,
        ulen,
        usum,
    )
    frame = head + bytes(datagram)
    if pad and len(frame) < _ETH_MIN:
        frame += bytes(_ETH_MIN - len(frame))
    return frame


def parse_udp_frame(frame: bytes | bytearray, *, port: int = UET_UDP_PORT, verify: bool = True) -> RxFrame | None:
    """The UET datagram in ``frame`` (see the module docstring); ``verify`` checks the IPv4
    header checksum (the simulator, whose frames only its own code builds, may skip it)."""
    n = len(frame)
    if n < 14:
        raise DecodeError("ethernet", 0, f"frame of {n} bytes is shorter than 14")
    et = (frame[12] << 8) | frame[13]
    off = 14
    if et == _ETH_VLAN:
        if n < 18:
            raise DecodeError("vlan", 14, "truncated 802.1Q tag")
        et = (frame[16] << 8) | frame[17]
        off = 18
    if et != _ETH_IPV4:
        return None
    if n < off + 28 or frame[off] != 0x45:
        raise DecodeError("ipv4", off, "not a 20-byte IPv4 header followed by UDP")
    total = (frame[off + 2] << 8) | frame[off + 3]
    if total < 28 or off + total > n:
        raise DecodeError("ipv4", off + 2, f"total length {total} outside the frame")
    if verify and inet_checksum(memoryview(frame)[off : off + 20]) != 0:
        raise DecodeError("ipv4", off + 10, "bad header checksum")
    if frame[off + 9] != 17 or ((frame[off + 22] << 8) | frame[off + 23]) != port:
        return None
    tos = frame[off + 1]
    dscp = tos >> 2
    return RxFrame(
        bytes(frame[off + 28 : off + total]),
        f"{frame[off + 12]}.{frame[off + 13]}.{frame[off + 14]}.{frame[off + 15]}",
        (frame[off + 20] << 8) | frame[off + 21],
        dscp,
        tos & 3,
        dscp == DSCP_TRIM_FABRIC or dscp == DSCP_TRIM_LASTHOP,
        dscp == DSCP_TRIM_LASTHOP,
    )


# -- the simulator's hot-path copies ----------------------------------------------------------------
#
# The virtual-time engine builds a frame for every datagram a host sends and parses one for every
# frame a host receives (issue 28: both were a measurable share of a run's CPU). These two are
# copies of build_udp_frame / parse_udp_frame for that path, kept here beside the originals;
# tests/test_wire_frame.py proves they give the same bytes and the same fields.

_FAST: Final = struct.Struct("!15sBH6sH4s4sHHHH")
#: what parse_marked reads of bytes 12–37: EtherType, version/IHL, TOS, total length, protocol,
#: source address (as one integer: a dict key hashed at no cost, where 4 new bytes are hashed
#: anew per frame), UDP destination port (one C call: a frame is a bytearray, and the compiled
#: build reads a bytearray's bytes one by one through Python's generic item access)
_MARKED: Final = struct.Struct("!HBBH5xB2xI6xH")
# their methods bound once: the compiled build calls a method of a module constant by looking it up
# on every call (about a thousand instructions a packet each), a bound one directly
_FAST_PACK: Final = _FAST.pack
_MARKED_UNPACK: Final = _MARKED.unpack_from
#: a new bytearray of the header and the datagram, each copied once (FrameBuilder.build_array;
#: ``bytearray(header)`` and ``+=`` cost more than the bytes concatenation and copy they replace)
_ARRAY_JOIN: Final = bytearray().join
#: per datagram length n, the bound ``unpack_from`` of ``struct.Struct(f"{n}s")``: the datagram of
#: a bytearray frame as bytes in one C call and one copy (a slice of a bytearray is a bytearray,
#: and ``bytes()`` of it a second copy through a generic call: about 1,700 instructions a frame in
#: the compiled build, against about 500). At most one entry per datagram length (below the MTU).
_DATAGRAM: Final[dict[int, Callable[[bytes | bytearray, int], tuple[bytes]]]] = {}


def _datagram_reader(n: int) -> Callable[[bytes | bytearray, int], tuple[bytes]]:
    """The reader of an ``n``-byte datagram (:data:`_DATAGRAM`), made on first use."""
    rd: Callable[[bytes | bytearray, int], tuple[bytes]] = struct.Struct(f"{n}s").unpack_from
    _DATAGRAM[n] = rd
    return rd


def ip_word_sum(ip: bytes) -> int:
    """The sum of the two 16-bit words of an IPv4 address (its share of the header checksum)."""
    return ((ip[0] + ip[2]) << 8) + ip[1] + ip[3]


class FrameBuilder:
    """:func:`build_udp_frame` for one sender (source address, MACs, destination port, TTL and
    the checksum choice fixed), with the sender's share of the IPv4 header checksum computed
    once: ``build(datagram, dst_ip, dst_sum, sport, tos)`` gives the same bytes as
    ``build_udp_frame(datagram, src_ip, dst_ip, sport=sport, dscp=tos >> 2, ecn=tos & 3, ...)``
    with ``dst_sum = ip_word_sum(dst_ip)`` (a caller keeps that per destination)."""

    __slots__ = ("_head", "_mid", "_src", "_base", "_pseudo", "dport", "udp_checksum")

    def __init__(
        self,
        src_ip: bytes,
        *,
        src_mac: bytes,
        dst_mac: bytes,
        dport: int = UET_UDP_PORT,
        ttl: int = 64,
        udp_checksum: bool = True,
    ) -> None:
        self._head = dst_mac + src_mac + b"\x08\x00\x45"
        self._mid = struct.pack("!HHBB", 0, _DF, ttl, 17)
        self._src = src_ip
        self._base = 0x4500 + 20 + _DF + (ttl << 8) + 17 + ip_word_sum(src_ip)
        self._pseudo = int.from_bytes(src_ip, "big") << 32
        self.dport = dport
        self.udp_checksum = udp_checksum

    def build(self, datagram: bytes, dst_ip: bytes, dst_sum: int, sport: int, tos: int) -> bytes:
        """The frame of ``datagram`` to ``dst_ip`` (see the class docstring); ``tos`` is the IP
        TOS byte (DSCP << 2 | ECN)."""
        frame = self._header(datagram, dst_ip, dst_sum, sport, tos) + datagram
        if len(frame) < _ETH_MIN:
            frame += bytes(_ETH_MIN - len(frame))
        return frame

    def build_array(self, datagram: bytes, dst_ip: bytes, dst_sum: int, sport: int, tos: int) -> bytearray:
        """:meth:`build` as a new bytearray (the simulator's NIC model keeps it and changes it in
        place): one copy of the datagram, where bytes and a bytearray of them made two."""
        frame = _ARRAY_JOIN((self._header(datagram, dst_ip, dst_sum, sport, tos), datagram))
        if len(frame) < _ETH_MIN:
            frame += bytes(_ETH_MIN - len(frame))
        return frame

    def _header(self, datagram: bytes, dst_ip: bytes, dst_sum: int, sport: int, tos: int) -> bytes:
        """The Ethernet, IPv4 and UDP headers of :meth:`build`'s frame."""
        ulen = 8 + len(datagram)
        s = self._base + tos + ulen + dst_sum
        s = (s & 0xFFFF) + (s >> 16)
        s = (s & 0xFFFF) + (s >> 16)
        sport &= 0xFFFF
        usum = 0
        if self.udp_checksum:
            pseudo = (
                self._pseudo
                + int.from_bytes(dst_ip, "big")
                + 17
                + ulen
                + (sport << 48)
                + (self.dport << 32)
                + (ulen << 16)
            )
            usum = inet_checksum(datagram, pseudo) or 0xFFFF
        return _FAST_PACK(
            self._head, tos, 20 + ulen, self._mid, ~s & 0xFFFF, self._src, dst_ip, sport, self.dport, ulen, usum
        )


def parse_marked(
    frame: bytes | bytearray, port: int = UET_UDP_PORT, names: dict[int, str] | None = None
) -> tuple[bytes, str, int] | None:
    """:func:`parse_udp_frame` with ``verify=False`` in the packed form the cores take:
    ``(data, source, ecn)`` with :data:`MARK_TRIMMED` (DSCP 5 or 7) and :data:`MARK_LASTHOP`
    (DSCP 5) or-ed into ``ecn``; None and :class:`DecodeError` exactly where it gives them.
    ``names``: a cache of source addresses' text forms (the address as a big-endian integer →
    text) the caller keeps."""
    n = len(frame)
    if n >= 42:
        h: tuple[int, int, int, int, int, int, int] = _MARKED_UNPACK(frame, 12)
        et, vihl, tos, total, proto, sip, dport = h
        # an untagged IPv4/UDP frame (anything else below)
        if et == 0x0800 and vihl == 0x45 and proto == 17 and total >= 28 and total + 14 <= n:
            if dport != port:
                return None
            ecn = tos & 3
            dscp = tos >> 2
            if dscp == DSCP_TRIM_FABRIC:
                ecn |= MARK_TRIMMED
            elif dscp == DSCP_TRIM_LASTHOP:
                ecn |= MARK_TRIMMED | MARK_LASTHOP
            if type(frame) is bytes:
                fb: bytes = frame
                data = fb[42 : 14 + total]
            else:  # a bytearray (every frame a switch forwarded): see _DATAGRAM
                rd = _DATAGRAM.get(total - 28)
                if rd is None:
                    rd = _datagram_reader(total - 28)
                data = rd(frame, 42)[0]
            if names is None:
                src = f"{sip >> 24}.{(sip >> 16) & 255}.{(sip >> 8) & 255}.{sip & 255}"
            else:
                cached = names.get(sip)  # (not assigned to src: the compiled build checks its type)
                if cached is None:
                    src = names[sip] = f"{sip >> 24}.{(sip >> 16) & 255}.{(sip >> 8) & 255}.{sip & 255}"
                else:
                    src = cached
            return (data, src, ecn)
    rx = parse_udp_frame(frame, port=port, verify=False)
    if rx is None:
        return None
    mark = (MARK_TRIMMED | (MARK_LASTHOP if rx.last_hop else 0)) if rx.trimmed else 0
    return (rx.data, rx.source, rx.ecn | mark)
