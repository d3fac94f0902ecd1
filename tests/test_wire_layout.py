"""Unit tests of the Layout machinery itself (uet/wire/layout.py), on purpose-built layouts.

The real headers are covered by test_wire_properties.py and test_wire_golden.py; here the odd
corners of the declaration language are pinned: widths that are not struct-native (24, 48, 60,
128 bits), signed fields inside packed words, word merging, declaration errors, describe() and the
DecodeError text. Expected bytes are written by hand.
"""

from __future__ import annotations

from enum import IntEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_strategies import layout_values, reserved_mask, values_from_bytes, values_to_bytes

from uet.errors import DecodeError, EncodeError, UetError
from uet.wire import pds, ses
from uet.wire.layout import F, Item, Layout, R, Raw


class Color(IntEnum):
    RED = 1
    GREEN = 2


def agree(layout: Layout, values: tuple, want: bytes) -> None:
    """Both codecs produce ``want`` and read ``values`` back from it."""
    v = layout.T(*values)
    assert layout.encode(v) == want
    assert layout.build(v) == want
    buf = bytearray(len(want) + 3)
    layout.pack_into(buf, 3, v)
    assert bytes(buf[3:]) == want
    assert layout.decode(want) == v
    assert layout.unpack(want) == v
    assert layout.parse(want) == v


# -- odd widths ----------------------------------------------------------------------------------


def test_24_bit_field() -> None:
    lay = Layout("t24", [F("a", 24), F("b", 8)])
    assert lay.size == 4
    agree(lay, (0x123456, 0x78), bytes.fromhex("12345678"))
    alone = Layout("t24_alone", [F("a", 24)])
    assert alone.size == 3
    agree(alone, (0xABCDEF,), bytes.fromhex("abcdef"))


def test_48_bit_field() -> None:
    lay = Layout("t48", [F("a", 16), F("b", 48)])
    assert lay.size == 8
    agree(lay, (0x0102, 0xA1A2A3A4A5A6), bytes.fromhex("0102 a1a2a3a4a5a6"))
    alone = Layout("t48_alone", [F("b", 48), F("c", 8)])
    agree(alone, (0xFFFFFFFFFFFF, 0x01), bytes.fromhex("ffffffffffff 01"))


def test_60_bit_field() -> None:
    lay = Layout("t60", [F("k", 4), F("v", 60)])
    assert lay.size == 8
    # 0x5 << 60 | 0x0fedcba987654321 -> 5f edcba987654321
    agree(lay, (5, 0xFEDCBA987654321), bytes.fromhex("5fedcba987654321"))
    tail = Layout("t60_tail", [F("v", 60), R(4)])
    # 0x123456789abcdef << 4
    agree(tail, (0x123456789ABCDEF,), bytes.fromhex("123456789abcdef0"))


def test_128_bit_fields() -> None:
    lay = Layout("t128", [F("x", 128), F("y", 128, signed=True)])
    assert lay.size == 32
    x = 0x000102030405060708090A0B0C0D0E0F
    agree(lay, (x, -2), bytes.fromhex("000102030405060708090a0b0c0d0e0f" + "ff" * 15 + "fe"))
    agree(lay, ((1 << 128) - 1, -(1 << 127)), bytes.fromhex("ff" * 16 + "80" + "00" * 15))
    with pytest.raises(EncodeError):
        lay.check((1 << 128, 0))
    with pytest.raises(EncodeError):
        lay.check((0, 1 << 127))


def test_wide_field_inside_a_word() -> None:
    """A 124-bit field sharing a 128-bit word with a 4-bit one."""
    lay = Layout("t124", [F("k", 4), F("v", 124)])
    agree(lay, (0xA, 1), bytes.fromhex("a0" + "00" * 14 + "01"))
    agree(lay, (0, (1 << 124) - 1), bytes.fromhex("0f" + "ff" * 15))


def test_odd_runs_merged_with_neighbours() -> None:
    """24-bit run + 16-bit field + 8-bit flags + 3 bytes: word merging must keep every offset."""
    lay = Layout("tmix", [F("a", 24), F("b", 16), F("c", 3), R(5), F("d", 24), Raw("e", 2), F("f", 8)])
    assert lay.size == 12
    assert lay.field_offset == {"a": 0, "b": 3, "c": 5, "d": 6, "e": 9, "f": 11}
    # c = 5 in the top 3 bits of byte 5 -> 0xa0
    agree(lay, (0x010203, 0x0405, 5, 0x060708, b"\x09\x0a", 0x0B), bytes.fromhex("010203 0405 a0 060708 090a 0b"))


@pytest.mark.parametrize("width", range(1, 131))
def test_every_width_round_trips(width: int) -> None:
    """A field of every width 1..130, padded to a byte boundary, at both ends of its range."""
    pad = (-width) % 8
    items: list[Item] = [F("v", width), R(pad)] if pad else [F("v", width)]
    lay = Layout(f"w{width}", items)
    assert lay.size == (width + pad) // 8
    for v in (0, 1, (1 << width) - 1, (1 << (width - 1))):
        want = (v << pad).to_bytes(lay.size, "big")
        agree(lay, (v,), want)
    signed = Layout(f"s{width}", [F("v", width, signed=True), *([R(pad)] if pad else [])])
    for v in (-1, -(1 << (width - 1)), (1 << (width - 1)) - 1, 0):
        want = ((v & ((1 << width) - 1)) << pad).to_bytes(lay.size, "big")
        agree(signed, (v,), want)


# -- signed sub-word fields ----------------------------------------------------------------------


def test_signed_sub_word_fields() -> None:
    lay = Layout("tsig", [F("a", 4, signed=True), F("b", 12, signed=True), F("c", 8, signed=True), F("d", 8)])
    # a = -1 -> f; b = -2048 -> 800; c = -128 -> 80; d = 0x7f
    agree(lay, (-1, -2048, -128, 0x7F), bytes.fromhex("f800 80 7f"))
    # a = 7 -> 7; b = 2047 -> 7ff; c = 127 -> 7f
    agree(lay, (7, 2047, 127, 0), bytes.fromhex("77ff 7f 00"))
    # a = -8 -> 8; b = -1 -> fff; c = -1 -> ff
    agree(lay, (-8, -1, -1, 0xFF), bytes.fromhex("8fff ff ff"))
    with pytest.raises(EncodeError) as ei:
        lay.check((8, 0, 0, 0))
    assert ei.value.field == "a"
    with pytest.raises(EncodeError) as ei:
        lay.check((0, -2049, 0, 0))
    assert ei.value.field == "b"


def test_signed_field_merged_into_odd_word() -> None:
    """A signed native-width field joined to an odd run (24 + 16 bits = one 40-bit word)."""
    lay = Layout("tsig40", [F("a", 24), F("b", 16, signed=True)])
    agree(lay, (0xABCDEF, -3), bytes.fromhex("abcdef fffd"))
    agree(lay, (0, -0x8000), bytes.fromhex("000000 8000"))


@settings(max_examples=150)
@given(data=st.data())
def test_random_custom_layouts(data: st.DataObject) -> None:
    """Random declarations (widths 1..70, signed or not, reserved runs, byte fields) agree with the
    reference split in wire_strategies and with construct."""
    items: list = []
    bits = 0
    n = data.draw(st.integers(1, 8))
    for i in range(n):
        kind = data.draw(st.sampled_from(["f", "f", "r", "raw"]))
        if kind == "raw" and bits % 8 == 0:
            items.append(Raw(f"x{i}", data.draw(st.integers(1, 6))))
            continue
        w = data.draw(st.integers(1, 70))
        items.append(R(w) if kind == "r" else F(f"f{i}", w, signed=data.draw(st.booleans())))
        bits += w
    if bits % 8:
        items.append(F("last", 8 - bits % 8))
    if not any(isinstance(it, (F, Raw)) for it in items):
        items.append(F("only", 8))
    lay = Layout("rand", items)
    blob = data.draw(st.binary(min_size=lay.size, max_size=lay.size))
    v = values_from_bytes(lay, blob)
    wire = lay.encode(v)
    assert wire == bytes(b & ~m & 0xFF for b, m in zip(blob, reserved_mask(lay), strict=True))
    assert lay.build(v) == wire == values_to_bytes(lay, v)
    assert lay.decode(blob) == lay.unpack(blob) == lay.parse(blob) == v
    w = data.draw(layout_values(lay))
    assert lay.decode(lay.encode(w)) == lay.parse(lay.build(w)) == w


# -- declaration errors --------------------------------------------------------------------------


def test_not_byte_aligned_raises() -> None:
    with pytest.raises(ValueError, match="byte boundary"):
        Layout("bad", [F("a", 7)])
    with pytest.raises(ValueError, match="byte boundary"):
        Layout("bad", [F("a", 8), F("b", 3), R(4)])


def test_raw_inside_bit_word_raises() -> None:
    with pytest.raises(ValueError, match="inside a bit word"):
        Layout("bad", [F("a", 4), Raw("r", 2), F("b", 4)])


def test_non_positive_width_raises() -> None:
    with pytest.raises(ValueError, match="width"):
        Layout("bad", [F("a", 0), F("b", 8)])
    with pytest.raises(ValueError, match="width"):
        Layout("bad", [R(-8), F("b", 16)])


def test_duplicate_field_raises() -> None:
    with pytest.raises(ValueError, match="duplicate field a"):
        Layout("bad", [F("a", 8), F("a", 8)])
    with pytest.raises(ValueError, match="duplicate field a"):
        Layout("bad", [F("a", 8), Raw("a", 2)])


# -- values, defaults, describe ------------------------------------------------------------------


def test_make_defaults_and_namedtuple() -> None:
    lay = Layout("demo_hdr", [F("a", 4, enum=Color), F("b", 4), Raw("c", 2)], defaults={"a": Color.GREEN})
    v = lay.make(b=3)
    assert v == (2, 3, b"\0\0")
    assert type(v.a) is int  # defaults stored as plain ints
    assert lay.T.__name__ == "DemoHdr"
    assert lay.field_names == ("a", "b", "c")
    assert lay.encode(v) == bytes.fromhex("23 0000")
    with pytest.raises(TypeError):
        lay.make(zz=1)


def test_describe_shows_enum_names() -> None:
    lay = Layout("demo", [F("color", 8, enum=Color), F("n", 8), Raw("mac", 2)])
    d = lay.describe(lay.T(2, 7, b"\xab\xcd"))
    assert d == [("color", 2, "GREEN (0x2)"), ("n", 7, "7"), ("mac", b"\xab\xcd", "abcd")]
    assert lay.describe(lay.T(9, 0, b"\0\0"))[0] == ("color", 9, "unknown (0x9)")
    # the real headers: PDS type and NACK code by name
    nack = pds.NACK.make(nack_code=pds.NackCode.NEW_START_PSN)
    shown = dict((n, disp) for n, _, disp in pds.NACK.describe(nack))
    assert shown["type"] == "NACK (0xa)"
    assert shown["nack_code"] == "NEW_START_PSN (0x17)"
    assert dict((n, d) for n, _, d in ses.RESPONSE.describe(ses.RESPONSE.make()))["return_code"] == "OK (0x1)"


# -- errors from decoding and encoding -----------------------------------------------------------


def test_decode_error_text() -> None:
    lay = Layout("my_hdr", [F("a", 16), F("b", 32)])
    for fn in (lay.decode, lay.unpack, lay.parse):
        with pytest.raises(DecodeError) as ei:
            fn(b"\x00\x01\x02", 0)
        e = ei.value
        assert isinstance(e, UetError)
        assert (e.header, e.offset) == ("my_hdr", 3)
        assert "truncated" in e.reason and "6 bytes needed, 3 present" in e.reason
        assert "field b" in e.reason  # the first field that does not fit
        msg = str(e)
        assert "my_hdr" in msg and "3" in msg and "truncated" in msg
    # offsets count from the start of the buffer handed in
    with pytest.raises(DecodeError) as ei:
        lay.decode(bytes(10), 7)
    assert ei.value.offset == 10
    assert "3 present" in ei.value.reason
    with pytest.raises(DecodeError) as ei:
        lay.parse(bytes(10), 12)
    assert ei.value.offset == 12 and "0 present" in ei.value.reason


def test_encode_errors() -> None:
    lay = Layout("enc", [F("a", 16), F("b", 4), F("c", 4), Raw("d", 2)])
    good = lay.T(1, 2, 3, b"xy")
    assert lay.encode(good) == bytes.fromhex("0001 23 7879")
    with pytest.raises(EncodeError) as ei:
        lay.encode((1, 2, 3))
    assert ei.value.header == "enc" and ei.value.field == "*"
    with pytest.raises(EncodeError) as ei:
        lay.encode(good._replace(a=0x10000))  # a whole 16-bit word: struct range-checks it
    assert ei.value.field == "a"
    with pytest.raises(EncodeError) as ei:
        lay.encode(good._replace(a=None))
    assert ei.value.field == "a"
    # sub-word fields are masked by the fast path, rejected by check/build
    assert lay.encode(good._replace(b=0x12)) == bytes.fromhex("0001 23 7879")
    for fn in (lay.check, lay.build):
        with pytest.raises(EncodeError) as ei:
            fn(good._replace(b=0x12))
        assert ei.value.field == "b"
        with pytest.raises(EncodeError) as ei:
            fn(good._replace(d=b"xyz"))
        assert ei.value.field == "d"
        with pytest.raises(EncodeError) as ei:
            fn(good._replace(c=-1))
        assert ei.value.field == "c"


def test_concat_renames_collisions() -> None:
    a = Layout("alpha_hdr", [F("flags", 8), F("x", 8)], defaults={"flags": 1})
    b = Layout("beta_hdr", [F("flags", 8), F("y", 8)], defaults={"flags": 2})
    ab = Layout.concat("ab", a, b)
    assert ab.field_names == ("flags", "x", "beta_flags", "y")
    assert ab.make() == (1, 0, 2, 0)
    assert ab.field_offset["beta_flags"] == 2
    agree(ab, (0x11, 0x22, 0x33, 0x44), bytes.fromhex("11223344"))
    assert ab.doc == "alpha_hdr + beta_hdr"


def test_fast_codec_source_is_straight_line() -> None:
    """The generated codec is plain Python around one struct (no loops per field)."""
    src = pds.REQUEST.source
    assert "for " not in src and "while " not in src
    assert pds.REQUEST._struct.size == pds.REQUEST.size


def _merge_reference(groups: list[list[F | R] | Raw]) -> list[list[F | R] | Raw]:
    """The rule of uet.wire.layout._merge written plainly, every width summed when needed."""
    native = (8, 16, 32, 64)

    def width(g: list[F | R]) -> int:
        return sum(i.bits for i in g)

    def plain(g: list[F | R]) -> bool:
        return len(g) == 1 and isinstance(g[0], F) and width(g) in native

    out: list[list[F | R] | Raw] = []
    for g in groups:
        prev = out[-1] if out else None
        if isinstance(g, list) and isinstance(prev, list):
            pw, gw = width(prev), width(g)
            if (
                (pw not in native and pw + gw <= 64)
                or (gw not in native and pw + gw in native)
                or (pw + gw in native and not plain(prev) and not plain(g))
            ):
                out[-1] = prev + g
                continue
        out.append(list(g) if isinstance(g, list) else g)
    return out


_RUN_ITEM = st.one_of(
    st.builds(F, st.sampled_from(["a", "b"]), st.sampled_from([1, 2, 3, 4, 5, 8, 12, 16, 24, 32, 48, 64])),
    st.builds(R, st.sampled_from([1, 3, 4, 8, 16])),
)
_GROUP = st.one_of(st.lists(_RUN_ITEM, min_size=1, max_size=3), st.builds(Raw, st.just("raw"), st.integers(1, 8)))


@settings(max_examples=300, deadline=None)
@given(st.lists(_GROUP, min_size=1, max_size=8))
def test_runs_are_joined_into_words_as_the_rule_says(groups: list[list[F | R] | Raw]) -> None:
    """_merge keeps each run's width as it joins runs; the words are those of the plain rule."""
    from uet.wire.layout import _merge

    assert _merge(groups) == _merge_reference(groups)
