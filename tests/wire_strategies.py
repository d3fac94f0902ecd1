"""Hypothesis strategies and reference helpers for the wire layer, importable by any test module.

Everything here is derived from a :class:`~uet.wire.layout.Layout`'s *items* (the declaration
read from spec/wire-format.md), never from the codecs under test: :func:`values_from_bytes` is a
third, deliberately naive decoder (one big integer, fields cut out MSB first) that the generated
fast codec and the construct definition are both checked against.

Values are drawn as raw bytes and cut into fields, which is several times cheaper in Hypothesis
than one integer strategy per field and still hits every width's extremes through the edge blobs
(all zeros, all ones, 0x80.../0x7f... patterns give the signed minimum and maximum).

Usage from another test module (``tests/`` is on ``sys.path`` under pytest's default import mode)::

    from wire_strategies import layout_values
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

from uet.wire import datapath, net, pds, roce, ses, tss
from uet.wire.layout import F, Layout, R, Raw

__all__ = [
    "ALL_WIRE_LAYOUTS",
    "HEADER_LAYOUTS",
    "LAYOUTS_BY_NAME",
    "BLOB_SIZE",
    "blobs",
    "field_range",
    "values_from_bytes",
    "values_to_bytes",
    "layout_values",
    "reserved_mask",
    "with_bad_field",
    "with_extreme",
    "psns",
]

#: Every fixed-size header the wire layer declares (wire-format.md §1–§11, plus the link headers);
#: with the data path's fused PDS+SES layouts (uet.wire.datapath), every layout.
HEADER_LAYOUTS: list[Layout] = [
    *pds.ALL_LAYOUTS,
    *ses.ALL_LAYOUTS,
    *tss.ALL_LAYOUTS,
    *net.ALL_LAYOUTS,
    *roce.ALL_LAYOUTS,
]
ALL_WIRE_LAYOUTS: list[Layout] = [*HEADER_LAYOUTS, *datapath.ALL_LAYOUTS]
LAYOUTS_BY_NAME: dict[str, Layout] = {lay.name: lay for lay in ALL_WIRE_LAYOUTS}

#: Large enough for any single layout above (the largest is 44 bytes).
BLOB_SIZE = 64
assert max(lay.size for lay in ALL_WIRE_LAYOUTS) <= BLOB_SIZE

#: A 32-bit PSN (wire-format.md §0: PSN arithmetic is modulo 2^32).
psns = st.integers(min_value=0, max_value=0xFFFFFFFF)


def blobs(size: int = BLOB_SIZE) -> st.SearchStrategy[bytes]:
    """``size`` random bytes, with the all-0 / all-1 / sign-bit patterns drawn often."""
    edges = [bytes([b]) * size for b in (0x00, 0xFF, 0x80, 0x7F, 0x55, 0xAA)]
    return st.one_of(st.sampled_from(edges), st.binary(min_size=size, max_size=size))


def field_range(f: F) -> tuple[int, int]:
    """Inclusive (lo, hi) that a bit field of this width and signedness can hold."""
    if f.signed:
        return -(1 << (f.bits - 1)), (1 << (f.bits - 1)) - 1
    return 0, (1 << f.bits) - 1


def values_from_bytes(layout: Layout, data: bytes) -> Any:
    """Reference decoder: the first ``layout.size`` bytes of ``data`` cut into fields, MSB first.

    Reserved bits are skipped; signed fields are two's complement (wire-format.md §0).
    """
    word = int.from_bytes(data[: layout.size], "big")
    pos = layout.size * 8
    out: list[Any] = []
    for it in layout.items:
        width = it.nbytes * 8 if isinstance(it, Raw) else it.bits
        pos -= width
        v = (word >> pos) & ((1 << width) - 1)
        if isinstance(it, Raw):
            out.append(v.to_bytes(it.nbytes, "big"))
        elif isinstance(it, F):
            if it.signed and v >> (it.bits - 1):
                v -= 1 << it.bits
            out.append(v)
    assert pos == 0, layout.name
    return layout.T(*out)


def values_to_bytes(layout: Layout, values: Any) -> bytes:
    """Reference encoder: the fields of ``values`` shifted into one big integer, MSB first,
    reserved bits 0. Values must fit (no masking, so a wrong value shows up as an exception)."""
    named = dict(zip(layout.field_names, values, strict=True))
    word = 0
    for it in layout.items:
        if isinstance(it, Raw):
            raw = named[it.name]
            assert len(raw) == it.nbytes
            word = (word << (8 * it.nbytes)) | int.from_bytes(raw, "big")
        elif isinstance(it, R):
            word <<= it.bits
        else:
            v = named[it.name]
            lo, hi = field_range(it)
            assert lo <= v <= hi, (it.name, v)
            word = (word << it.bits) | (v & ((1 << it.bits) - 1))
    return word.to_bytes(layout.size, "big")


def layout_values(layout: Layout) -> st.SearchStrategy[Any]:
    """A ``layout.T`` whose every field holds a random value that fits it."""
    return blobs(layout.size).map(lambda b: values_from_bytes(layout, b))


@cache
def reserved_mask(layout: Layout) -> bytes:
    """``layout.size`` bytes with a 1 in every bit the declaration marks reserved (``R`` items)."""
    mask = 0
    pos = layout.size * 8  # bits below the current item's most significant bit
    for it in layout.items:
        width = it.nbytes * 8 if isinstance(it, Raw) else it.bits
        pos -= width
        if isinstance(it, R):
            mask |= ((1 << width) - 1) << pos
    assert pos == 0, layout.name
    return mask.to_bytes(layout.size, "big")


def with_bad_field(layout: Layout, values: Any, pick: int, excess: int, low: bool) -> tuple[Any, str]:
    """``values`` with one field (``pick`` modulo the field count) made invalid.

    A bit field gets a value ``excess`` (>= 1) past its maximum, or below its minimum when ``low``;
    a byte field gets a length other than its own. Returns (values, field name).
    """
    assert excess >= 1
    i = pick % len(layout.field_names)
    name = layout.field_names[i]
    f = layout.fields[name]
    vals = list(values)
    if isinstance(f, Raw):
        n = excess % (f.nbytes + 5)
        vals[i] = bytes(n if n != f.nbytes else n + 1)
    else:
        lo, hi = field_range(f)
        vals[i] = lo - excess if low else hi + excess
    return layout.T(*vals), name


def with_extreme(layout: Layout, values: Any, pick: int, high: bool) -> Any:
    """``values`` with one bit field (``pick`` modulo the field count) at its minimum or maximum.

    Random bytes rarely hit a signed field's exact extremes (0x8000..., 0x7fff...); this does.
    Byte fields are left alone."""
    i = pick % len(layout.field_names)
    f = layout.fields[layout.field_names[i]]
    if isinstance(f, Raw):
        return values
    vals = list(values)
    vals[i] = field_range(f)[1 if high else 0]
    return layout.T(*vals)
