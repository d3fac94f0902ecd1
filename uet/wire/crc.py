"""The optional CRC-32C trailer of unencrypted UET packets (wire-format.md §1.4, Δ23; behaviour.md
§2.16).

When a packet is not protected by TSS, the reference provider appends a 4-byte CRC-32C
(Castagnoli: reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF) after the
payload, stored in host byte order — little-endian on x86, which is what this module writes and
expects. It covers everything from the IP source address to the end of the UET payload:

* the IP source and destination addresses (8 bytes for IPv4, 32 for IPv6),
* then the UDP header (8 bytes) — or, for UET directly over IP, the 4-byte entropy header,
* then the UET bytes (PDS, SES, payload).

Choices where the notes are silent (documented here):

* The UDP checksum field is counted as **zero**: §2.16 says it is sent as zero with the trailer,
  and a host stack that fills it in anyway (a UDP socket) then does not change the CRC. The UDP
  length field is the real one (8 + UET bytes + 4).
* The trailer is little-endian (the provider's x86 host order) whatever this host's order is, so
  captures from different hosts agree.

This module is pure: byte strings in, integers and byte strings out; callers supply the
addresses and ports (the FEP core's stage, :mod:`uet.fep.integrity`; ``uet-decode --crc``).

Speed: :func:`crc32c` is ``google_crc32c.extend`` (Google's maintained package: SSE4.2 / ARMv8
CRC instructions, about 0.2 µs per 4 KiB packet here against about 1 ms for a table-driven loop
in Python). :func:`crc32c_reference` is the bitwise-table definition in plain Python, kept as the
reference the golden tests hold the fast one to.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable

import google_crc32c

__all__ = [
    "extend",
    "TRAILER_LEN",
    "crc32c",
    "crc32c_reference",
    "udp_prefix",
    "entropy_prefix",
    "append_trailer",
    "check_trailer",
]

#: bytes the trailer adds to a packet
TRAILER_LEN = 4

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


@functools.cache
def _table() -> tuple[int, ...]:
    """The 256 steps of :func:`crc32c_reference`, made at its first call (about 2.5 M instructions:
    not at import, which every simulator run pays and none uses)."""
    out = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        out.append(c)
    return tuple(out)


_UDP = struct.Struct(">HHHH")
_LE32 = struct.Struct("<I")


def crc32c(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """CRC-32C of ``data``; pass a previous result as ``crc`` to continue over more bytes."""
    return extend(crc, bytes(data) if type(data) is not bytes else data)


# google_crc32c declares extend(crc, chunk) without types; this is its documented signature.
#: ``google_crc32c.extend(crc, chunk)`` itself, for per-packet callers that hold ``bytes``: it
#: refuses a ``bytearray`` or ``memoryview`` (:func:`crc32c` copies those first)
extend: Callable[[int, bytes], int] = google_crc32c.extend


def crc32c_reference(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """:func:`crc32c` in plain Python, one table step per byte (the reference; slow)."""
    t = _table()
    c = crc ^ 0xFFFFFFFF
    for b in bytes(data):
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def udp_prefix(src_ip: bytes, dst_ip: bytes, sport: int, dport: int, uet_len: int) -> bytes:
    """The covered bytes in front of the UET bytes of a UDP packet: both addresses, then the UDP
    header with the checksum counted as zero (module docstring); ``uet_len`` excludes the trailer."""
    return src_ip + dst_ip + _UDP.pack(sport, dport, 8 + uet_len + TRAILER_LEN, 0)


def entropy_prefix(src_ip: bytes, dst_ip: bytes, entropy_header: bytes) -> bytes:
    """The covered bytes in front of the UET bytes of a packet sent directly over IP: both
    addresses, then the 4-byte entropy header (wire-format.md §1.2)."""
    return src_ip + dst_ip + bytes(entropy_header)


def append_trailer(uet: bytes | bytearray | memoryview, prefix: bytes) -> bytes:
    """``uet`` followed by its little-endian CRC-32C trailer over ``prefix + uet``."""
    return bytes(uet) + _LE32.pack(crc32c(uet, crc32c(prefix)))


def check_trailer(packet: bytes | bytearray | memoryview, prefix: bytes) -> bytes | None:
    """The UET bytes of ``packet`` without its trailer, or None when it is too short to carry one
    or the trailer does not match ``prefix + UET bytes``."""
    n = len(packet) - TRAILER_LEN
    if n < 0:
        return None
    body = bytes(packet[:n])
    if _LE32.unpack_from(packet, n)[0] != extend(extend(0, prefix), body):
        return None
    return body
