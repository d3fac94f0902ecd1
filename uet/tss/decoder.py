"""Decryption for the packet decoder (``uet-decode --keys FILE``), changing no state.

The decoder shows captured traffic; it must not advance replay windows, latch domains, learn
clients or care about grace periods. :func:`decrypt_for_decoder` runs the receive processing of
behaviour.md §5.8 in that read-only form against a table loaded with
:func:`uet.keyfile.load_key_file`, and returns the plaintext (PDS header onward) or None when
the packet does not authenticate under any key of the table.
"""

from __future__ import annotations

from uet.tss.context import DropReason, Opened, TssConfig, TssContext, _open, as_address
from uet.tss.domain import SecureDomainTable

__all__ = ["decrypt_for_decoder", "open_for_decoder"]

# A decoder context: keeps no replay windows and never latches; non-TSS packets are not_secure.
_DECODER_CONFIG = TssConfig(replay_window=0, auth_fail_threshold=None, require_security=True)


def open_for_decoder(
    table: SecureDomainTable, datagram: bytes, src: bytes | str, dst: bytes | str, entropy: int
) -> Opened | DropReason:
    """The decrypted packet with its security fields, or the reason it cannot be decrypted."""
    src_b, dst_b = as_address(src), as_address(dst)
    ctx = TssContext(table, dst_b, _DECODER_CONFIG)
    return _open(ctx, datagram, src_b, dst_b, entropy, None, commit=False)


def decrypt_for_decoder(
    table: SecureDomainTable, datagram: bytes, src: bytes | str, dst: bytes | str, entropy: int
) -> bytes | None:
    """Plaintext (PDS ‖ SES ‖ payload) of a secured ``datagram`` (bytes after UDP/entropy), or None.

    ``src``/``dst`` are the IP addresses and ``entropy`` the UDP source port or entropy-header
    value of the captured packet (all enter the AAD, :mod:`uet.tss.nonce`).
    """
    got = open_for_decoder(table, datagram, src, dst, entropy)
    return None if isinstance(got, DropReason) else got.plaintext
