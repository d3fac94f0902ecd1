"""TSS security header and the entropy header (wire-format.md §1.2, §3)."""

from __future__ import annotations

from uet.wire.layout import F, Item, Layout, R

#: The TSS header's type value (it shares the 5-bit PDS type space, wire-format.md §2).
TSS_TYPE = 1
#: Length of the AES-GCM integrity check value appended after the payload.
ICV_LEN = 16

_HEAD: list[Item] = [F("type", 5), F("sp", 1), R(1), F("an", 1), F("sdi", 24)]
_TAIL: list[Item] = [F("epoch", 16), F("tsc", 48)]

TSS = Layout("tss", _HEAD + _TAIL, defaults={"type": TSS_TYPE}, doc="TSS header without SSI, SP = 0 (§3): 12 bytes.")
TSS_SSI = Layout(
    "tss_ssi",
    _HEAD + [F("ssi", 32)] + _TAIL,
    defaults={"type": TSS_TYPE, "sp": 1},
    doc="TSS header with SSI, SP = 1 (§3): 16 bytes.",
)
ENTROPY = Layout("entropy", [F("entropy", 16), R(16)], doc="Entropy header of UET carried directly over IP (§1.2).")

ALL_LAYOUTS = [TSS, TSS_SSI, ENTROPY]


def tss_layout(first_byte: int) -> Layout:
    """TSS or TSS_SSI, from the header's first byte (SP is bit 2 of it)."""
    return TSS_SSI if first_byte & 0x04 else TSS
