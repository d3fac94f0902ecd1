"""The RoCEv2 invariant CRC (spec/rocev2-and-fabric.md §4).

CRC-32 (the Ethernet FCS algorithm, :func:`zlib.crc32`) over 8 bytes of 0xFF standing for the
masked InfiniBand LRH, then the IP packet from its first byte to the last pad byte with the
variant fields overwritten by ones: for IPv4 the TOS byte, TTL and header checksum; for IPv6 the
traffic class, flow label and hop limit; in both the UDP checksum and BTH byte 4 (FECN, BECN,
Resv6a). The value goes on the wire least significant byte first (§4.1 step 5).

The CRC register after the 8-byte prefix is precomputed once, which is what soft-RoCE's start
value 0xDEBB20E3 expresses (§4.1 "Equivalent forms").
"""

from __future__ import annotations

import zlib

from uet.errors import DecodeError

__all__ = ["icrc", "icrc_bytes", "check_icrc", "headers_crc", "body_icrc", "ICRC_LEN", "RESIDUE"]

ICRC_LEN = 4
#: ``zlib.crc32`` over the covered bytes followed by a correct ICRC (§4.1 receiver check).
RESIDUE = 0x2144DF1C
_PREFIX_CRC = zlib.crc32(b"\xff" * 8)


def _masked(ip_packet: bytes | bytearray | memoryview) -> bytearray:
    buf = bytearray(ip_packet)
    if not buf:
        raise DecodeError("icrc", 0, "empty IP packet")
    ver = buf[0] >> 4
    if ver == 4:
        ihl = (buf[0] & 0x0F) * 4
        if ihl < 20 or len(buf) < ihl + 8 + 12:
            raise DecodeError("icrc", len(buf), "truncated: no room for IPv4, UDP and BTH")
        buf[1] = 0xFF
        buf[8] = 0xFF
        buf[10] = buf[11] = 0xFF
        udp = ihl
    elif ver == 6:
        if len(buf) < 40 + 8 + 12:
            raise DecodeError("icrc", len(buf), "truncated: no room for IPv6, UDP and BTH")
        buf[0] |= 0x0F
        buf[1] = buf[2] = buf[3] = 0xFF
        buf[7] = 0xFF
        udp = 40
    else:
        raise DecodeError("icrc", 0, f"IP version {ver} is neither 4 nor 6")
    buf[udp + 6] = buf[udp + 7] = 0xFF
    buf[udp + 8 + 4] = 0xFF
    return buf


def icrc(ip_packet: bytes | bytearray | memoryview) -> int:
    """The ICRC value of ``ip_packet`` (IP header … last pad byte, ICRC *not* included)."""
    return zlib.crc32(_masked(ip_packet), _PREFIX_CRC)


def icrc_bytes(ip_packet: bytes | bytearray | memoryview) -> bytes:
    """The 4 ICRC bytes as they are appended on the wire (least significant byte first)."""
    return icrc(ip_packet).to_bytes(4, "little")


def check_icrc(ip_packet_with_icrc: bytes | bytearray | memoryview) -> bool:
    """True when the last 4 bytes are the ICRC of the rest (a whole RoCEv2 IP packet)."""
    mv = memoryview(ip_packet_with_icrc)
    if len(mv) < ICRC_LEN:
        return False
    return icrc_bytes(mv[:-ICRC_LEN]) == bytes(mv[-ICRC_LEN:])


def headers_crc(ip_udp: bytes | bytearray) -> int:
    """CRC register after the 8-byte prefix and the masked IP and UDP headers ``ip_udp`` (IPv4
    without options or IPv6, then UDP): the part of the ICRC a queue pair can compute once per
    datagram length (:func:`body_icrc` finishes it)."""
    buf = bytearray(ip_udp)
    if buf[0] >> 4 == 4:
        buf[1] = buf[8] = buf[10] = buf[11] = 0xFF
    else:
        buf[0] |= 0x0F
        buf[1] = buf[2] = buf[3] = buf[7] = 0xFF
    buf[-2] = buf[-1] = 0xFF
    return zlib.crc32(buf, _PREFIX_CRC)


def body_icrc(head_crc: int, body: bytes | bytearray | memoryview) -> int:
    """The ICRC of a datagram whose headers gave ``head_crc`` and whose BTH … pad is ``body``
    (BTH byte 4 masked without copying the body)."""
    mv = memoryview(body)
    return zlib.crc32(mv[5:], zlib.crc32(b"\xff", zlib.crc32(mv[:4], head_crc)))
