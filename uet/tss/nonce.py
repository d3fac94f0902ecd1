"""GCM IV and additional authenticated data of a secured packet (behaviour.md §5.5, wire-format.md §3).

**IV** (12 bytes) = ``source id (4)`` ‖ ``epoch (2) ‖ TSC (6)`` — the 8-byte epoch/TSC word of the
security header, big-endian. The source id is the SSI when ``SP`` is set, else the IPv4 source
address, else (IPv6 without SSI, cluster mode only) the 24-bit SDI as a 4-byte big-endian value.
In the key-derivation modes (cluster, server) the IV is XORed with the 12-byte mask the KDF
returned; direct mode uses it as is.

**AAD** = IP source address ‖ IP destination address ‖ 4-byte entropy header ‖ security header
(12 or 16 bytes). The reference provider secures only UET directly over IP, where the entropy
header is on the wire. For UDP encapsulation (our choice, differing from the spec notes' inference
that the 8-byte UDP header would take its place): the AAD carries the same 4 bytes
``entropy (16) ‖ 0 (16)`` built from the UDP source port, which *is* the entropy value
(wire-format.md §1.1). The AAD is then identical in both encapsulations, a packet can be
re-encapsulated by a gateway without re-encryption, and the mutable UDP length and checksum stay
out of the AAD just as the mutable IP fields do.
"""

from __future__ import annotations

import struct

__all__ = ["aad", "entropy_header", "iv", "iv_source_id", "xor12"]

_ENTROPY = struct.Struct(">HH")
_IV = struct.Struct(">IHHI")  # source id, epoch, TSC high 16 bits, TSC low 32 bits


def entropy_header(entropy: int) -> bytes:
    """The 4-byte entropy header ``entropy ‖ 0`` (wire-format.md §1.2), as it enters the AAD."""
    return _ENTROPY.pack(entropy & 0xFFFF, 0)


def iv_source_id(ssi: int | None, src: bytes, sdi: int) -> int:
    """The IV's first word: SSI if present, else the IPv4 source, else (IPv6, no SSI) the SDI."""
    if ssi is not None:
        return ssi
    if len(src) == 4:
        return int.from_bytes(src, "big")
    return sdi


def iv(source_id: int, epoch: int, tsc: int, mask: bytes | None = None) -> bytes:
    """The 12-byte GCM IV, XORed with ``mask`` when one is given (cluster and server modes)."""
    raw = _IV.pack(source_id & 0xFFFFFFFF, epoch & 0xFFFF, (tsc >> 32) & 0xFFFF, tsc & 0xFFFFFFFF)
    return raw if mask is None else xor12(raw, mask)


def xor12(a: bytes, b: bytes) -> bytes:
    """Bytewise XOR of two 12-byte strings."""
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(12, "big")


def aad(src: bytes, dst: bytes, entropy: int, tss_header: bytes) -> bytes:
    """Additional authenticated data: ``src ‖ dst ‖ entropy header ‖ security header`` (§5.5)."""
    return b"".join((src, dst, _ENTROPY.pack(entropy & 0xFFFF, 0), tss_header))
