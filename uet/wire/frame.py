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
from dataclasses import dataclass

from uet.errors import DecodeError
from uet.wire.net import UET_UDP_PORT, inet_checksum

__all__ = ["DSCP_TRIM_FABRIC", "DSCP_TRIM_LASTHOP", "HEADER_BYTES", "RxFrame", "build_udp_frame", "parse_udp_frame"]

#: DSCP a switch gives a packet it trimmed towards another switch / towards the host (§8.4).
DSCP_TRIM_FABRIC = 7
DSCP_TRIM_LASTHOP = 5
#: Ethernet (14) + IPv4 (20) + UDP (8): the bytes in front of the UET datagram.
HEADER_BYTES = 42
_ETH_MIN = 60
_HDR = struct.Struct("!6s6sHBBHHHBBH4s4sHHHH")
_IP_AT = 14
_UDP_AT = 34
_DF = 0x4000
_ETH_IPV4 = 0x0800
_ETH_VLAN = 0x8100


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
