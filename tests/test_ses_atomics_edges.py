"""Atomics at their edges (wire-format.md §9.2, §10; uet/ses/atomics.py).

The model tests in ``test_ses_atomics.py`` draw ordinary values; these pin the cases they miss:
bfloat16 NaN, infinity, overflow and subnormals, MSWAP on a vector, compare-and-swap extension
values wider than the element, and the value every fetching operation returns.
"""

from __future__ import annotations

import math
import struct

import pytest

from uet.ses import atomics
from uet.ses.errors import AmoUnsupportedDt
from uet.wire.ses import CSWAP_OPS, AmoOp, AmoType

BF16_MAX = struct.unpack("<f", b"\x00\x00\x7f\x7f")[0]  # 0x7F7F: (2 - 2**-7) * 2**127
BF16 = AmoType.BFLOAT16


def bf16_bits(x: float) -> int:
    return int.from_bytes(atomics.encode_values(BF16, [x]), "little")


def bf16_apply(op: AmoOp, t: float, v: float) -> int:
    mem = bytearray(atomics.encode_values(BF16, [t]))
    atomics.apply(memoryview(mem), 0, op, BF16, atomics.encode_values(BF16, [v]))
    return int.from_bytes(mem, "little")


# -- bfloat16 ---------------------------------------------------------------------------------------


def test_bfloat16_nan_is_the_quiet_nan_with_its_sign() -> None:
    assert bf16_bits(math.nan) == 0x7FC0
    assert bf16_bits(-math.nan) == 0xFFC0
    assert bf16_apply(AmoOp.SUM, 1.0, math.nan) & 0x7FFF == 0x7FC0
    assert bf16_apply(AmoOp.DIFF, math.inf, math.inf) & 0x7FFF == 0x7FC0  # inf - inf is invalid
    assert bf16_apply(AmoOp.PROD, 0.0, math.inf) & 0x7FFF == 0x7FC0


def test_bfloat16_nan_never_replaces_and_stays_in_min_max() -> None:
    assert bf16_apply(AmoOp.MIN, 2.0, math.nan) == bf16_bits(2.0)
    assert bf16_apply(AmoOp.MAX, 2.0, math.nan) == bf16_bits(2.0)
    assert bf16_apply(AmoOp.MIN, math.nan, -5.0) == 0x7FC0
    assert bf16_apply(AmoOp.MAX, math.nan, 5.0) == 0x7FC0


def test_bfloat16_infinities() -> None:
    assert bf16_bits(math.inf) == 0x7F80
    assert bf16_bits(-math.inf) == 0xFF80
    assert bf16_apply(AmoOp.SUM, math.inf, 1.0) == 0x7F80
    assert bf16_apply(AmoOp.SUM, -math.inf, 1e38) == 0xFF80
    assert bf16_apply(AmoOp.PROD, -2.0, math.inf) == 0xFF80


def test_bfloat16_overflow_rounds_to_infinity_only_past_the_halfway_point() -> None:
    half_ulp = 2.0 ** (127 - 8)  # half the spacing of the top binade
    assert bf16_bits(BF16_MAX) == 0x7F7F
    assert bf16_bits(BF16_MAX + half_ulp / 2) == 0x7F7F  # rounds down to the largest finite
    assert bf16_bits(BF16_MAX + half_ulp) == 0x7F80  # tie: to even, which is 2**128 = inf
    assert bf16_bits(-(BF16_MAX + half_ulp)) == 0xFF80
    assert bf16_bits(2.0**128) == 0x7F80
    assert bf16_apply(AmoOp.SUM, BF16_MAX, BF16_MAX) == 0x7F80
    assert bf16_apply(AmoOp.PROD, -BF16_MAX, 2.0) == 0xFF80
    assert bf16_apply(AmoOp.SUM, BF16_MAX, 1.0) == 0x7F7F  # absorbed, no overflow


def test_bfloat16_subnormals() -> None:
    tiny = 2.0**-133  # smallest subnormal, 0x0001
    assert bf16_bits(tiny) == 0x0001
    assert bf16_bits(-tiny) == 0x8001
    assert bf16_bits(2.0**-126) == 0x0080  # smallest normal
    assert bf16_bits(2.0**-126 - tiny) == 0x007F  # largest subnormal
    assert bf16_bits(tiny / 2) == 0x0000  # tie between 0 and 0x0001: to even
    assert bf16_bits(tiny * 0.75) == 0x0001  # above the tie: up
    assert bf16_bits(tiny * 1.5) == 0x0002  # tie between 0x0001 and 0x0002: to even
    assert bf16_bits(tiny * 2.5) == 0x0002  # tie between 0x0002 and 0x0003: to even
    assert bf16_bits(-0.0) == 0x8000
    assert bf16_apply(AmoOp.SUM, tiny, tiny) == 0x0002
    assert bf16_apply(AmoOp.DIFF, 2.0**-126, tiny) == 0x007F
    assert bf16_apply(AmoOp.PROD, 2.0**-126, 0.5) == 0x0040  # normal * 0.5 becomes subnormal
    assert atomics.decode_values(BF16, (0x0003).to_bytes(2, "little")) == [3 * tiny]


def test_bfloat16_rounds_normal_values_to_eight_significant_bits() -> None:
    assert bf16_bits(1.0) == 0x3F80
    assert bf16_bits(1.0 + 2.0**-7) == 0x3F81  # exactly representable
    assert bf16_bits(1.0 + 2.0**-8) == 0x3F80  # tie: to even (down)
    assert bf16_bits(1.0 + 3 * 2.0**-8) == 0x3F82  # tie: to even (up)
    assert bf16_bits(1.0 + 2.0**-8 + 2.0**-20) == 0x3F81  # above the tie: up
    assert bf16_bits(-3.0) == 0xC040


# -- MSWAP on a vector --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [AmoType.UINT8, AmoType.INT16, AmoType.UINT32, AmoType.UINT64, AmoType.INT128])
def test_mswap_applies_each_operand_mask_pair_to_its_own_element(dtype: AmoType) -> None:
    size = atomics.TYPE_INFO[dtype].size
    bits = 8 * size
    full = (1 << bits) - 1
    targets = [0x5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A5A & full, full, 0, 0x0123456789ABCDEF0123456789ABCDEF & full]
    operands = [1, 0, full, (0xF0F0F0F0F0F0F0F0F0F0F0F0F0F0F0F0 & full)]
    masks = [full, 0, 0x0F0F0F0F0F0F0F0F0F0F0F0F0F0F0F0F & full, full >> 1]
    guard = b"\xee" * 16
    mem = bytearray(guard + b"".join(t.to_bytes(size, "little") for t in targets) + guard)
    operand = b"".join(
        i.to_bytes(size, "little") + m.to_bytes(size, "little") for i, m in zip(operands, masks, strict=True)
    )
    old = atomics.apply(memoryview(mem), 16, AmoOp.MSWAP, dtype, operand)
    assert old == b"".join(t.to_bytes(size, "little") for t in targets)
    body = mem[16 : 16 + 4 * size]
    got = [int.from_bytes(body[i : i + size], "little") for i in range(0, 4 * size, size)]
    assert got == [((t & m) ^ i) & full for t, i, m in zip(targets, operands, masks, strict=True)]
    assert mem[:16] == guard and mem[16 + 4 * size :] == guard


# -- compare-and-swap extension values wider than the element -----------------------------------------


@pytest.mark.parametrize("dtype", [AmoType.UINT8, AmoType.INT16, AmoType.UINT32, AmoType.INT64, AmoType.FLOAT])
def test_cswap_uses_only_the_low_bits_of_wide_extension_values(dtype: AmoType) -> None:
    size = atomics.TYPE_INFO[dtype].size
    high = 0xA5 << (8 * size)  # junk just above the element: must be ignored both ways
    t, swap = (5.0, 9.0) if dtype == AmoType.FLOAT else (5, 9)
    guard = b"\xcc" * 8
    for op in map(AmoOp, sorted(CSWAP_OPS)):
        for compare in (t, 6.0 if dtype == AmoType.FLOAT else 6):
            mem = bytearray(guard + atomics.encode_values(dtype, [t]) + guard)
            old = atomics.apply(
                memoryview(mem),
                8,
                op,
                dtype,
                compare=atomics.to_wire_int(dtype, compare) | high,
                swap=atomics.to_wire_int(dtype, swap) | high,
            )
            assert old == atomics.encode_values(dtype, [t])
            swapped = {
                AmoOp.CSWAP: compare == t,
                AmoOp.CSWAP_NE: compare != t,
                AmoOp.CSWAP_LE: compare <= t,
                AmoOp.CSWAP_LT: compare < t,
                AmoOp.CSWAP_GE: compare >= t,
                AmoOp.CSWAP_GT: compare > t,
            }[op]
            assert mem[8 : 8 + size] == atomics.encode_values(dtype, [swap if swapped else t]), (op.name, compare)
            assert mem[:8] == guard and mem[8 + size :] == guard  # no spill of the wide value


def test_signed_cswap_compares_as_signed() -> None:
    mem = bytearray(atomics.encode_values(AmoType.INT8, [-1]))
    atomics.apply(
        memoryview(mem), 0, AmoOp.CSWAP_LT, AmoType.INT8, compare=atomics.to_wire_int(AmoType.INT8, -2), swap=7
    )
    assert mem == b"\x07"  # -2 < -1
    mem = bytearray(atomics.encode_values(AmoType.UINT8, [0xFF]))
    atomics.apply(memoryview(mem), 0, AmoOp.CSWAP_GT, AmoType.UINT8, compare=0xFE, swap=7)
    assert mem == b"\xff"  # 254 > 255 is false unsigned


# -- what fetching operations return --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [AmoType.UINT32, AmoType.INT64, AmoType.DOUBLE, AmoType.FP16, BF16])
@pytest.mark.parametrize("op", [AmoOp.READ, AmoOp.SUM, AmoOp.WRITE, AmoOp.MAX])
def test_fetch_returns_the_prior_values_of_every_element(op: AmoOp, dtype: AmoType) -> None:
    prior = atomics.encode_values(dtype, [1, 2, 3])
    mem = bytearray(prior)
    old = atomics.apply(memoryview(mem), 0, op, dtype, atomics.encode_values(dtype, [10, 20, 30]))
    assert old == prior
    assert atomics.decode_values(dtype, old) == [1, 2, 3]
    if op == AmoOp.READ:
        assert mem == prior
    else:
        assert mem != prior


def test_decode_values_ignores_a_trailing_partial_element() -> None:
    assert atomics.decode_values(AmoType.UINT16, b"\x01\x00\x02\x00\x03") == [1, 2]
    assert atomics.decode_values(AmoType.FLOAT, b"\x00\x00\x80\x3f\x00\x00\x00") == [1.0]
    assert atomics.decode_values(BF16, b"\x80\x3f\x00") == [1.0]


@pytest.mark.parametrize("dtype", [0x12, AmoType.LONG_DOUBLE])
def test_value_codecs_refuse_unsupported_types(dtype: int) -> None:
    with pytest.raises(AmoUnsupportedDt):
        atomics.encode_values(dtype, [1])
    with pytest.raises(AmoUnsupportedDt):
        atomics.decode_values(dtype, bytes(16))


def test_compare_and_swap_extension_values_default_to_zero() -> None:
    mem = bytearray(b"\x00\x05")
    atomics.apply(memoryview(mem), 0, AmoOp.CSWAP, AmoType.UINT8, swap=7)  # compare 0 == 0
    assert mem == b"\x07\x05"
    atomics.apply(memoryview(mem), 1, AmoOp.CSWAP, AmoType.UINT8, compare=5)  # swap in 0
    assert mem == b"\x07\x00"
