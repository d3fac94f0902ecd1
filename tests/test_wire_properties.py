"""Property tests of every wire header: fast codec against construct codec (spec/wire-format.md §15).

For each layout of ``pds``, ``ses``, ``tss``, ``net``, ``roce`` and the fused ``datapath``
layouts the generated fast codec (``encode``,
``pack_into``, ``decode``, ``unpack``) and the independent construct definition (``build``,
``parse``) must agree on random valid values, reject what does not fit, fail on arbitrary bytes
only with a well-formed :class:`DecodeError`, and ignore reserved bits (wire-format.md §0).
Also the PSN helpers (wire-format.md §0, §5, §15): serial arithmetic and SACK bitmaps across 2^32.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_strategies import (
    ALL_WIRE_LAYOUTS,
    BLOB_SIZE,
    blobs,
    layout_values,
    psns,
    reserved_mask,
    values_from_bytes,
    values_to_bytes,
    with_bad_field,
    with_extreme,
)

from uet.errors import DecodeError, EncodeError
from uet.wire import datapath, net, pds, ses
from uet.wire.layout import F, Layout, Raw

EXAMPLES = 100  # valid values per layout (the codec agreement property)
ERROR_EXAMPLES = 50  # per layout, for the cheaper error-path properties
LAYOUT_IDS = [lay.name for lay in ALL_WIRE_LAYOUTS]
by_layout = pytest.mark.parametrize("layout", ALL_WIRE_LAYOUTS, ids=LAYOUT_IDS)


def test_layout_names_unique() -> None:
    # parametrize ids and DecodeError.header rely on them
    assert len(set(LAYOUT_IDS)) == len(LAYOUT_IDS)


# -- both codecs agree ---------------------------------------------------------------------------


@by_layout
@settings(max_examples=EXAMPLES)
@given(
    blob=blobs(),
    noise=st.binary(min_size=BLOB_SIZE, max_size=BLOB_SIZE),
    pre=st.integers(0, 9),
    extreme=st.none() | st.tuples(st.integers(0, 63), st.booleans()),
)
def test_codecs_agree_and_round_trip(
    layout: Layout, blob: bytes, noise: bytes, pre: int, extreme: tuple[int, bool] | None
) -> None:
    """encode == build == pack_into; decode == unpack == parse == the reference split; reserved
    bits are sent as 0 and ignored on receive (wire-format.md §0)."""
    values = values_from_bytes(layout, blob)
    if extreme is not None:
        values = with_extreme(layout, values, *extreme)
    wire = layout.encode(values)
    assert len(wire) == layout.size
    assert layout.build(values) == wire
    assert layout.encode(tuple(values)) == wire  # any sequence in field order, not only T
    assert wire == values_to_bytes(layout, values)  # the naive reference encoder
    mask = reserved_mask(layout)
    if extreme is None:  # the input bytes come back with the reserved bits cleared
        assert wire == bytes(b & ~m & 0xFF for b, m in zip(blob, mask, strict=False))
    layout.check(values)  # raises on a value that does not fit

    # pack_into at an offset writes exactly the same bytes and nothing else
    head, tail = noise[:pre], noise[pre : pre + 7]
    buf = bytearray(head + bytes(layout.size) + tail)
    layout.pack_into(buf, pre, values)
    assert bytes(buf) == head + wire + tail

    # decoders agree, from the exact bytes and from inside a larger buffer
    dec = layout.decode(wire)
    assert type(dec) is layout.T
    assert dec == values
    assert layout.unpack(wire) == values
    assert layout.decode(buf, pre) == values
    assert layout.unpack(memoryview(buf), pre) == values
    assert layout.parse(buf, pre) == values

    # reserved bits set at random are ignored by every decoder
    dirty = bytes(w | (n & m) for w, n, m in zip(wire, noise, mask, strict=False))
    assert layout.decode(dirty) == values
    assert layout.unpack(dirty) == values
    assert layout.parse(dirty) == values
    assert layout.encode(layout.decode(dirty)) == wire


@by_layout
@settings(max_examples=ERROR_EXAMPLES)
@given(raw=st.binary(max_size=BLOB_SIZE), cut=st.integers(0, BLOB_SIZE), off=st.integers(0, 12))
def test_decode_arbitrary_bytes(layout: Layout, raw: bytes, cut: int, off: int) -> None:
    """Any input either decodes (all decoders, same values) or raises a well-formed DecodeError."""
    raw = raw[: cut % (layout.size + 9)]  # length 0 .. size + 8
    outcomes = []
    for fn in (layout.decode, layout.unpack, layout.parse):
        try:
            outcomes.append(tuple(fn(raw, off)))
        except DecodeError as e:
            assert e.header == layout.name
            assert isinstance(e.offset, int) and off <= e.offset <= max(off, len(raw))
            assert isinstance(e.reason, str) and e.reason
            assert layout.name in str(e)
            outcomes.append(("error", e.offset))
    # fixed-size headers: decodable exactly when enough bytes are present
    if len(raw) - off >= layout.size:
        assert outcomes[0] == outcomes[1] == outcomes[2] == values_from_bytes(layout, raw[off:])
    else:
        assert outcomes == [("error", max(len(raw), off))] * 3


# -- encode errors -------------------------------------------------------------------------------


@by_layout
@settings(max_examples=ERROR_EXAMPLES)
@given(blob=blobs(), pick=st.integers(0, 63), excess=st.integers(1, 1 << 72), low=st.booleans())
def test_check_rejects_out_of_range(layout: Layout, blob: bytes, pick: int, excess: int, low: bool) -> None:
    values, name = with_bad_field(layout, values_from_bytes(layout, blob), pick, excess, low)
    with pytest.raises(EncodeError) as ei:
        layout.check(values)
    assert ei.value.header == layout.name
    assert ei.value.field == name
    with pytest.raises(EncodeError):
        layout.build(values)
    # The fast encoder does not range-check (it runs per packet): a sub-word field is masked to its
    # width, a byte field is padded/truncated as struct's "Ns" does. It must either raise
    # EncodeError or produce exactly the bytes of the value so reduced.
    f = layout.fields[name]
    i = layout.field_names.index(name)
    try:
        wire = layout.encode(values)
    except EncodeError as e:
        assert e.header == layout.name
    else:
        reduced = list(values)
        if isinstance(f, Raw):
            reduced[i] = (values[i] + bytes(f.nbytes))[: f.nbytes]
        else:
            reduced[i] = values[i] & ((1 << f.bits) - 1)
            if f.signed and reduced[i] >> (f.bits - 1):
                reduced[i] -= 1 << f.bits
        assert wire == layout.build(reduced)


@by_layout
def test_encode_wrong_length_tuple(layout: Layout) -> None:
    full = tuple(layout.make())
    for bad in (full[:-1], (*full, 0), ()):
        for fn in (layout.encode, layout.check, layout.build):
            with pytest.raises(EncodeError):
                fn(bad)
        with pytest.raises(EncodeError):
            layout.pack_into(bytearray(layout.size + 4), 0, bad)


@by_layout
def test_encode_non_integer_field(layout: Layout) -> None:
    values = list(layout.make())
    i = next(i for i, n in enumerate(layout.field_names) if isinstance(layout.fields[n], F))
    values[i] = "1"
    for fn in (layout.encode, layout.check, layout.build):
        with pytest.raises(EncodeError):
            fn(values)


@by_layout
def test_short_buffer_message(layout: Layout) -> None:
    wire = layout.encode(layout.make())
    for fn in (layout.decode, layout.unpack, layout.parse):
        with pytest.raises(DecodeError) as ei:
            fn(wire[:-1])
        assert ei.value.header == layout.name
        assert ei.value.offset == layout.size - 1
        assert "truncated" in ei.value.reason


@by_layout
def test_defaults_fit(layout: Layout) -> None:
    """The declared defaults are valid values and name real fields."""
    assert set(layout.defaults) <= set(layout.field_names)
    made = layout.make()
    layout.check(made)
    for name, v in layout.defaults.items():
        assert getattr(made, name) == v
    for name in layout.field_names:
        f = layout.fields[name]
        if name not in layout.defaults and isinstance(f, Raw):
            assert getattr(made, name) == bytes(f.nbytes)


# -- Layout.concat -------------------------------------------------------------------------------

REQ_SES = Layout.concat("rud_request_ses_som", pds.REQUEST, ses.STANDARD[(1, "none")])


def test_concat_shape() -> None:
    a, b = pds.REQUEST, ses.STANDARD[(1, "none")]
    assert REQ_SES.size == a.size + b.size == 56
    assert "ses_flags" in REQ_SES.field_names and "flags" in REQ_SES.field_names
    assert len(REQ_SES.field_names) == len(a.field_names) + len(b.field_names)
    # defaults carried over, the renamed one too
    made = REQ_SES.make()
    assert made.type == pds.PdsType.RUD_REQ
    assert made.opcode == ses.SesOpcode.SEND
    assert made.ses_flags == ses.SesFlag.SOM | ses.SesFlag.EOM


@settings(max_examples=EXAMPLES)
@given(a=layout_values(pds.REQUEST), b=layout_values(ses.STANDARD[(1, "none")]))
def test_concat_equals_concatenation(a: tuple, b: tuple) -> None:
    s = ses.STANDARD[(1, "none")]
    joined = (*a, *b)
    wire = pds.REQUEST.encode(a) + s.encode(b)
    assert REQ_SES.encode(joined) == wire
    assert REQ_SES.build(joined) == wire
    assert REQ_SES.decode(wire) == joined
    assert REQ_SES.parse(wire) == joined
    assert pds.REQUEST.decode(wire) == a
    assert s.decode(wire, pds.REQUEST.size) == b


# -- PSN helpers ---------------------------------------------------------------------------------


@given(a=psns, b=psns)
def test_psn_diff_antisymmetric(a: int, b: int) -> None:
    d = pds.psn_diff(a, b)
    assert -(1 << 31) <= d < (1 << 31)
    assert pds.psn_add(b, d) == a
    if d != -(1 << 31):  # the one distance with no positive counterpart
        assert pds.psn_diff(b, a) == -d
        assert pds.psn_after(a, b) == (not pds.psn_after(b, a)) or a == b
    assert pds.psn_after(a, b) == (d > 0)
    assert not pds.psn_after(a, a)


@given(p=psns, k=st.integers(min_value=1, max_value=(1 << 31) - 1))
def test_psn_after_wraps(p: int, k: int) -> None:
    q = pds.psn_add(p, k)
    assert pds.psn_after(q, p)
    assert not pds.psn_after(p, q)
    assert pds.psn_diff(q, p) == k


def test_psn_wrap_examples() -> None:
    assert pds.psn_add(0xFFFFFFFF, 1) == 0
    assert pds.psn_diff(0, 0xFFFFFFFF) == 1
    assert pds.psn_diff(0xFFFFFFFF, 0) == -1
    assert pds.psn_after(5, 0xFFFFFFF0)
    assert not pds.psn_after(0xFFFFFFF0, 5)
    assert pds.clear_psn(0x1000, -1) == 0xFFF  # wire-format.md §13.1
    assert pds.clear_psn(0, -1) == 0xFFFFFFFF
    assert pds.ack_psn(0xFFFFFFFF, 2) == 1
    assert pds.sack_base(3, -4) == 0xFFFFFFFF
    assert pds.start_psn(2, 5) == 0xFFFFFFFD


@given(base=psns, off=st.integers(min_value=-0x8000, max_value=0x7FFF))
def test_offset16_in_range(base: int, off: int) -> None:
    target = pds.psn_add(base, off)
    assert pds.offset16(target, base) == off
    assert pds.ack_psn(base, pds.offset16(target, base)) == target


@given(
    base=psns,
    off=st.one_of(
        st.integers(min_value=0x8000, max_value=(1 << 31) - 1), st.integers(min_value=-(1 << 31), max_value=-0x8001)
    ),
)
def test_offset16_out_of_range(base: int, off: int) -> None:
    with pytest.raises(ValueError):
        pds.offset16(pds.psn_add(base, off), base)


@given(base=psns, deltas=st.sets(st.integers(min_value=0, max_value=63), max_size=64))
def test_sack_bitmap_inverse(base: int, deltas: set[int]) -> None:
    want = {pds.psn_add(base, d) for d in deltas}
    bm = pds.psns_to_sack(base, want)
    assert 0 <= bm < (1 << 64)
    assert bin(bm).count("1") == len(want)
    assert set(pds.sack_to_psns(base, bm)) == want
    assert pds.sack_to_psns(base, bm) == sorted(want, key=lambda p: pds.psn_diff(p, base))


@given(bm=st.integers(min_value=0, max_value=(1 << 64) - 1), base=psns)
def test_sack_bitmap_inverse_from_bitmap(bm: int, base: int) -> None:
    assert pds.psns_to_sack(base, pds.sack_to_psns(base, bm)) == bm


@given(base=psns, outside=st.sets(st.integers(min_value=64, max_value=(1 << 31) - 1) | st.integers(-(1 << 31), -1)))
def test_sack_ignores_outside_window(base: int, outside: set[int]) -> None:
    assert pds.psns_to_sack(base, {pds.psn_add(base, d) for d in outside}) == 0


def test_sack_wraps_across_2_32() -> None:
    base = 0xFFFFFFFE
    got = pds.psns_to_sack(base, [0xFFFFFFFE, 0xFFFFFFFF, 0, 1, 61])
    assert got == 0b1111 | (1 << 63)
    assert pds.sack_to_psns(base, got) == [0xFFFFFFFE, 0xFFFFFFFF, 0, 1, 61]


# -- Internet checksums (RFC 1071, RFC 768; used by wire-format.md §13) --------------------------


def _rfc1071(data: bytes) -> int:
    """Textbook one's-complement sum of 16-bit words, odd byte padded with zero."""
    if len(data) % 2:
        data += b"\0"
    s = 0
    for i in range(0, len(data), 2):
        s += (data[i] << 8) | data[i + 1]
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


@given(data=st.binary(max_size=1500) | st.sampled_from([b"", b"\xff" * 2001, b"\x00" * 7, b"\xff\xff"]))
def test_inet_checksum_reference(data: bytes) -> None:
    assert net.inet_checksum(data) == _rfc1071(data)
    assert net.inet_checksum(memoryview(bytearray(data))) == _rfc1071(data)


@given(data=st.binary(min_size=2, max_size=200).filter(lambda b: len(b) % 2 == 0), where=st.integers(0, 99))
def test_inet_checksum_verifies_to_zero(data: bytes, where: int) -> None:
    i = 2 * (where % (len(data) // 2))
    zeroed = data[:i] + b"\0\0" + data[i + 2 :]
    c = net.inet_checksum(zeroed)
    assert net.inet_checksum(zeroed[:i] + c.to_bytes(2, "big") + zeroed[i + 2 :]) == 0


@given(
    v6=st.booleans(),
    addrs=st.binary(min_size=32, max_size=32),
    ports=st.tuples(st.integers(0, 0xFFFF), st.integers(0, 0xFFFF)),
    payload=st.binary(max_size=300),
)
def test_udp_checksum_verifies(v6: bool, addrs: bytes, ports: tuple[int, int], payload: bytes) -> None:
    n = 16 if v6 else 4
    src, dst = addrs[:n], addrs[16 : 16 + n]
    length = net.UDP.size + len(payload)
    hdr = net.UDP.make(src_port=ports[0], dst_port=ports[1], length=length, checksum=0)
    c = net.udp_checksum(src, dst, net.UDP.encode(hdr) + payload)
    assert 1 <= c <= 0xFFFF  # 0 means "no checksum" and is never produced (RFC 768)
    seg = net.UDP.encode(hdr._replace(checksum=c)) + payload
    pseudo = (
        src
        + dst
        + (bytes((0, 17)) + length.to_bytes(2, "big") if not v6 else length.to_bytes(4, "big") + b"\0\0\0\x11")
    )
    assert _rfc1071(pseudo + seg) == 0


@given(raw=st.binary(min_size=4, max_size=4) | st.binary(min_size=16, max_size=16))
def test_ip_text_round_trip(raw: bytes) -> None:
    assert net.ip_bytes(net.ip_str(raw)) == raw


# -- the data path's fused layouts are their parts, back to back ---------------------------------


@pytest.mark.parametrize("fused", datapath.ALL_LAYOUTS, ids=[lay.name for lay in datapath.ALL_LAYOUTS])
@settings(max_examples=ERROR_EXAMPLES)
@given(blob=blobs())
def test_fused_layout_is_its_parts_back_to_back(fused: Layout, blob: bytes) -> None:
    """uet.wire.datapath: a fused encoding is the concatenation of the separate headers', and
    decoding it gives the parts' values in order."""
    first, second = datapath.PARTS[fused.name]
    assert fused.size == first.size + second.size
    va = values_from_bytes(first, blob)
    vb = values_from_bytes(second, blob[first.size :])
    wire = first.encode(va) + second.encode(vb)
    assert fused.encode((*va, *vb)) == wire
    assert tuple(fused.unpack(wire)) == (*va, *vb)


@given(st.one_of(st.integers(0, 1 << 64), st.binary(max_size=9000).map(lambda b: int.from_bytes(b, "big"))))
def test_mod_ffff_is_the_remainder(x: int) -> None:
    # the checksum's folding remainder (net.mod_ffff) against Python's long division
    assert net.mod_ffff(x) == x % 0xFFFF
    assert net.mod_ffff(x * 0xFFFF) == 0
