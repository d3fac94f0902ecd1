"""Transport Security Sublayer (TSS): secure domains, key derivation, AEAD, replay protection and
key rotation (behaviour.md §5, §2.3.2; wire-format.md §3).

Sans-I/O like every core: :class:`TssContext` seals and opens packets given addresses and time;
:class:`SecureDomainTable` is a FEP's secure-domain key database, parsed from key-file text
(:func:`parse_key_file`; :func:`uet.keyfile.load_key_file` reads the file) or built per job
(:meth:`SecureDomain.generate`). The PDS core uses the Start_PSN policies of
:mod:`uet.tss.establish`; the decoder uses :func:`decrypt_for_decoder`.
:mod:`uet.tss.stage` is TSS as a stage of the FEP core (``Endpoint.open(...,
security=SecurityConfig(table))``, ``FepCore(..., security=...)``): every datagram sealed and
opened, drops counted and logged, the secure establishment hooks given to the PDS core, key
rotation; :mod:`uet.link.secure` is the asyncio adapter's link facade over it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uet.lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover
    from uet.tss.context import DropReason, Opened, TssConfig, TssContext
    from uet.tss.decoder import decrypt_for_decoder
    from uet.tss.domain import KeySlot, SdMode, SecureDomain, SecureDomainTable, SlotState
    from uet.tss.errors import (
        CounterExhaustedError,
        DomainStateError,
        KeyFileError,
        KeyRotationError,
        TssError,
        UnknownDomainError,
        UnknownPeerError,
    )
    from uet.tss.establish import (
        Expected0RttStart,
        InitiatorStartPsn,
        Random1RttStart,
        StartPsnMethod,
        start_psn_policy,
    )
    from uet.tss.keyfile import dump_key_file, parse_key_file
    from uet.tss.secret import SecretBytes

# Imported on first use (PEP 562): the AEAD modules load cryptography, which a run without TSS never
# needs, and importing a light submodule (uet.tss.nonce, uet.tss.address) runs this file first.
_LAZY = {
    "DropReason": "uet.tss.context",
    "Opened": "uet.tss.context",
    "TssConfig": "uet.tss.context",
    "TssContext": "uet.tss.context",
    "decrypt_for_decoder": "uet.tss.decoder",
    "KeySlot": "uet.tss.domain",
    "SdMode": "uet.tss.domain",
    "SecureDomain": "uet.tss.domain",
    "SecureDomainTable": "uet.tss.domain",
    "SlotState": "uet.tss.domain",
    "CounterExhaustedError": "uet.tss.errors",
    "DomainStateError": "uet.tss.errors",
    "KeyFileError": "uet.tss.errors",
    "KeyRotationError": "uet.tss.errors",
    "TssError": "uet.tss.errors",
    "UnknownDomainError": "uet.tss.errors",
    "UnknownPeerError": "uet.tss.errors",
    "Expected0RttStart": "uet.tss.establish",
    "InitiatorStartPsn": "uet.tss.establish",
    "Random1RttStart": "uet.tss.establish",
    "StartPsnMethod": "uet.tss.establish",
    "start_psn_policy": "uet.tss.establish",
    "dump_key_file": "uet.tss.keyfile",
    "parse_key_file": "uet.tss.keyfile",
    "SecretBytes": "uet.tss.secret",
}

__all__ = [
    "CounterExhaustedError",
    "DomainStateError",
    "DropReason",
    "Expected0RttStart",
    "InitiatorStartPsn",
    "KeyFileError",
    "KeyRotationError",
    "KeySlot",
    "Opened",
    "Random1RttStart",
    "SdMode",
    "SecretBytes",
    "SecureDomain",
    "SecureDomainTable",
    "SlotState",
    "StartPsnMethod",
    "TssConfig",
    "TssContext",
    "TssError",
    "UnknownDomainError",
    "UnknownPeerError",
    "decrypt_for_decoder",
    "dump_key_file",
    "parse_key_file",
    "start_psn_policy",
]


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
