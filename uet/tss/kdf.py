"""Key derivation for the cluster and server secure-domain modes (behaviour.md §5.3, §5.4).

NIST SP 800-108 counter-mode KDF with AES-256-CMAC as PRF, exactly as the reference provider
builds it::

    fixed = label ‖ 0x00 ‖ context ‖ L (32-bit big-endian, L = 352 bits)
    K(i)  = AES256-CMAC(K_in, i (one byte) ‖ fixed)     for i = 1, 2, 3
    out   = first 44 bytes of K(1) ‖ K(2) ‖ K(3)
    derived key = out[0:32], IV mask = out[32:44]

The implementation is ``cryptography``'s :class:`KBKDFCMAC` (counter before the fixed data,
``rlen = 1``, ``llen = 4``), which produces exactly this input layout; the known-answer test in
``tests/test_tss_kat.py`` recomputes it from plain CMAC calls to check the composition.

Contexts (§5.4): *small* (IPv4 or SSI sender id, 10 bytes) ``epoch (2) ‖ rekey (4) ‖ id (4)``;
*large* (IPv6 source, 26 bytes) ``0x00000000 ‖ epoch (2) ‖ rekey (4) ‖ IPv6 source (16)``.
Labels are configuration (``"U1"`` cluster, ``"U2"`` server by default): an older provider
revision used ``"UE1"``/``"UE2"`` (behaviour.md §5.4, §8 item 5).
"""

from __future__ import annotations

import struct

from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.kdf.kbkdf import KBKDFCMAC, CounterLocation, Mode

__all__ = [
    "DERIVED_LEN",
    "IV_MASK_LEN",
    "KEY_LEN",
    "LABEL_CLUSTER",
    "LABEL_SERVER",
    "kdf",
    "kdf_context",
    "large_context",
    "small_context",
]

#: AES-256 key length (behaviour.md §5.3).
KEY_LEN = 32
#: Length of the IV mask the KDF produces after the key.
IV_MASK_LEN = 12
#: KDF output length: key ‖ IV mask = 44 bytes (L = 352 bits).
DERIVED_LEN = KEY_LEN + IV_MASK_LEN
#: Default label of cluster-mode per-sender keys.
LABEL_CLUSTER = b"U1"
#: Default label of server-mode client keys.
LABEL_SERVER = b"U2"

_SMALL = struct.Struct(">HII")
_LARGE = struct.Struct(">IHI16s")


def small_context(epoch: int, rekey: int, source_id: int | bytes) -> bytes:
    """The 10-byte context for an SSI or IPv4 sender id: ``epoch ‖ rekey ‖ id`` (§5.4)."""
    if isinstance(source_id, bytes | bytearray):
        if len(source_id) != 4:
            raise ValueError("small KDF context needs a 4-byte source id")
        source_id = int.from_bytes(source_id, "big")
    return _SMALL.pack(epoch & 0xFFFF, rekey & 0xFFFFFFFF, source_id & 0xFFFFFFFF)


def large_context(epoch: int, rekey: int, ipv6_source: bytes) -> bytes:
    """The 26-byte context for an IPv6 sender: ``0x00000000 ‖ epoch ‖ rekey ‖ IPv6 source`` (§5.4)."""
    if len(ipv6_source) != 16:
        raise ValueError("large KDF context needs a 16-byte IPv6 address")
    return _LARGE.pack(0, epoch & 0xFFFF, rekey & 0xFFFFFFFF, bytes(ipv6_source))


def kdf_context(epoch: int, rekey: int, ssi: int | None, address: bytes) -> bytes:
    """The context for a sender (cluster) or client (server) identity.

    The identity is the SSI when the secure domain uses SSIs (small context, whatever the address
    family), else the IP address: IPv4 → small context, IPv6 → large context (§5.4).
    """
    if ssi is not None:
        return small_context(epoch, rekey, ssi)
    if len(address) == 4:
        return small_context(epoch, rekey, address)
    return large_context(epoch, rekey, address)


def kdf(key_in: bytes, label: bytes, context: bytes, length: int = DERIVED_LEN) -> bytes:
    """SP 800-108 counter-mode AES-CMAC KDF of §5.4; returns ``length`` bytes (default 44)."""
    return KBKDFCMAC(
        algorithm=algorithms.AES,
        mode=Mode.CounterMode,
        length=length,
        rlen=1,
        llen=4,
        location=CounterLocation.BeforeFixed,
        label=label,
        context=context,
        fixed=None,
    ).derive(key_in)
