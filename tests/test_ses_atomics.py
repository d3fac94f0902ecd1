"""Atomics: every opcode × data type against an independent model (wire-format.md §10)."""

from __future__ import annotations

import math
import random
import struct
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from uet.ses import atomics
from uet.ses.errors import AmoUnaligned, AmoUnsupportedDt, AmoUnsupportedOp, AmoUnsupportedSize
from uet.wire.ses import CSWAP_OPS, AmoOp, AmoType, ReturnCode

INT_TYPES: dict[AmoType, type[np.signedinteger[Any] | np.unsignedinteger[Any]]] = {
    AmoType.INT8: np.int8,
    AmoType.UINT8: np.uint8,
    AmoType.INT16: np.int16,
    AmoType.UINT16: np.uint16,
    AmoType.INT32: np.int32,
    AmoType.UINT32: np.uint32,
    AmoType.INT64: np.int64,
    AmoType.UINT64: np.uint64,
}
WIDE_TYPES = {AmoType.INT128: True, AmoType.UINT128: False}
FLOAT_TYPES = {AmoType.FLOAT: np.float32, AmoType.DOUBLE: np.float64, AmoType.FP16: np.float16}
UNSUPPORTED_DT = [AmoType.FLOAT_COMPLEX, AmoType.DOUBLE_COMPLEX, AmoType.LONG_DOUBLE, AmoType.LONG_DOUBLE_COMPLEX]
FLOAT_ONLY_OPS = [
    AmoOp.MIN,
    AmoOp.MAX,
    AmoOp.SUM,
    AmoOp.DIFF,
    AmoOp.PROD,
    AmoOp.READ,
    AmoOp.WRITE,
    AmoOp.INVAL,
    *sorted(CSWAP_OPS),
]
BITWISE_LOGICAL = [AmoOp.LOR, AmoOp.LAND, AmoOp.BOR, AmoOp.BAND, AmoOp.LXOR, AmoOp.BXOR, AmoOp.MSWAP]
N = 3  # elements per vector


def _rand_ints(rng: random.Random, bits: int, signed: bool, n: int) -> list[int]:
    vals = []
    for _ in range(n):
        v = rng.choice([0, 1, rng.getrandbits(bits), (1 << bits) - 1, 1 << (bits - 1), rng.getrandbits(3)])
        if signed and v >= 1 << (bits - 1):
            v -= 1 << bits
        vals.append(v)
    return vals


def _np_int_model(op: AmoOp, t: np.ndarray, v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return {
            AmoOp.MIN: lambda: np.minimum(t, v),
            AmoOp.MAX: lambda: np.maximum(t, v),
            AmoOp.SUM: lambda: t + v,
            AmoOp.DIFF: lambda: t - v,
            AmoOp.PROD: lambda: t * v,
            AmoOp.LOR: lambda: np.logical_or(t, v).astype(t.dtype),
            AmoOp.LAND: lambda: np.logical_and(t, v).astype(t.dtype),
            AmoOp.LXOR: lambda: np.logical_xor(t, v).astype(t.dtype),
            AmoOp.BOR: lambda: t | v,
            AmoOp.BAND: lambda: t & v,
            AmoOp.BXOR: lambda: t ^ v,
            AmoOp.READ: lambda: t,
            AmoOp.INVAL: lambda: t,
            AmoOp.WRITE: lambda: v,
        }[op]()


@pytest.mark.parametrize("dtype", list(INT_TYPES))
@pytest.mark.parametrize("op", [op for op in AmoOp if op not in CSWAP_OPS and op != AmoOp.MSWAP])
def test_integer_ops_match_numpy(op: AmoOp, dtype: AmoType) -> None:
    nt = INT_TYPES[dtype]
    info = np.iinfo(nt)
    rng = random.Random(op * 100 + dtype)
    for _ in range(20):
        t = np.array(_rand_ints(rng, info.bits, info.min < 0, N), dtype=nt)
        v = np.array(_rand_ints(rng, info.bits, info.min < 0, N), dtype=nt)
        size = info.bits // 8
        off = 8 if 8 % size == 0 else size  # aligned
        mem = bytearray(off) + bytearray(t.astype(t.dtype.newbyteorder("<")).tobytes()) + bytearray(8)
        old = atomics.apply(memoryview(mem), off, op, dtype, v.astype(v.dtype.newbyteorder("<")).tobytes())
        assert old == t.astype(t.dtype.newbyteorder("<")).tobytes()
        want = _np_int_model(op, t, v).astype(nt).astype(np.dtype(nt).newbyteorder("<")).tobytes()
        assert bytes(mem[off : off + N * size]) == want, (op.name, dtype.name, t, v)
        assert mem[:off] == bytearray(off) and mem[off + N * size :] == bytearray(8)  # no spill


def _wide_model(op: AmoOp, t: int, v: int, signed: bool) -> int:
    mask = (1 << 128) - 1

    def s(x: int) -> int:
        x &= mask
        return x - (1 << 128) if signed and x >> 127 else x

    t, v = s(t), s(v)
    r = {
        AmoOp.MIN: min(t, v),
        AmoOp.MAX: max(t, v),
        AmoOp.SUM: t + v,
        AmoOp.DIFF: t - v,
        AmoOp.PROD: t * v,
        AmoOp.LOR: int(bool(t) or bool(v)),
        AmoOp.LAND: int(bool(t) and bool(v)),
        AmoOp.LXOR: int(bool(t) ^ bool(v)),
        AmoOp.BOR: t | v,
        AmoOp.BAND: t & v,
        AmoOp.BXOR: t ^ v,
        AmoOp.READ: t,
        AmoOp.INVAL: t,
        AmoOp.WRITE: v,
    }[op]
    return r & mask


@pytest.mark.parametrize("dtype", list(WIDE_TYPES))
@pytest.mark.parametrize("op", [op for op in AmoOp if op not in CSWAP_OPS and op != AmoOp.MSWAP])
def test_128bit_ops(op: AmoOp, dtype: AmoType) -> None:
    signed = WIDE_TYPES[dtype]
    rng = random.Random(op + 7 * dtype)
    for _ in range(20):
        t = [rng.choice([0, 1, rng.getrandbits(128), (1 << 128) - 1, 1 << 127]) for _ in range(2)]
        v = [rng.choice([0, 1, rng.getrandbits(128), (1 << 128) - 1, 1 << 127]) for _ in range(2)]
        mem = bytearray(b"".join(x.to_bytes(16, "little") for x in t))
        atomics.apply(memoryview(mem), 0, op, dtype, b"".join(x.to_bytes(16, "little") for x in v))
        got = [int.from_bytes(mem[i : i + 16], "little") for i in (0, 16)]
        assert got == [_wide_model(op, a, b, signed) for a, b in zip(t, v, strict=True)]


def test_wraparound_examples() -> None:
    mem = bytearray(b"\xff")
    atomics.apply(memoryview(mem), 0, AmoOp.SUM, AmoType.UINT8, b"\x02")
    assert mem == b"\x01"
    mem = bytearray(b"\x7f")
    atomics.apply(memoryview(mem), 0, AmoOp.SUM, AmoType.INT8, b"\x01")
    assert atomics.decode_values(AmoType.INT8, bytes(mem)) == [-128]
    mem = bytearray(b"\x80")  # -128 vs 1: signed MIN keeps -128, unsigned MIN picks 1
    atomics.apply(memoryview(mem), 0, AmoOp.MIN, AmoType.INT8, b"\x01")
    assert mem == b"\x80"
    atomics.apply(memoryview(mem), 0, AmoOp.MIN, AmoType.UINT8, b"\x01")
    assert mem == b"\x01"


def _cswap_model(op: AmoOp, c: Any, t: Any) -> bool:
    return {
        AmoOp.CSWAP: c == t,
        AmoOp.CSWAP_NE: c != t,
        AmoOp.CSWAP_LE: c <= t,
        AmoOp.CSWAP_LT: c < t,
        AmoOp.CSWAP_GE: c >= t,
        AmoOp.CSWAP_GT: c > t,
    }[op]


ALL_NUMERIC = [*INT_TYPES, *WIDE_TYPES, *FLOAT_TYPES, AmoType.BFLOAT16]


@pytest.mark.parametrize("dtype", ALL_NUMERIC)
@pytest.mark.parametrize("op", sorted(CSWAP_OPS))
def test_compare_and_swap_family(op: AmoOp, dtype: AmoType) -> None:
    kind = atomics.TYPE_INFO[dtype]
    samples: list[int | float]
    if kind.is_float:
        samples = [-2.5, -0.0, 0.0, 1.0, 3.0]
    else:
        lo = -(1 << (8 * kind.size - 1)) if kind.signed else 0
        samples = [lo, lo + 1, 0, 1, 5] if kind.signed else [0, 1, 5, (1 << (8 * kind.size)) - 1]
    for t in samples:
        for c in samples:
            mem = bytearray(atomics.encode_values(dtype, [t]))
            before = bytes(mem)
            old = atomics.apply(
                memoryview(mem),
                0,
                op,
                dtype,
                compare=atomics.to_wire_int(dtype, c),
                swap=atomics.to_wire_int(dtype, 7),
            )
            assert old == before
            swapped = _cswap_model(op, c, t)
            assert bytes(mem) == (atomics.encode_values(dtype, [7]) if swapped else before), (op.name, c, t)


@pytest.mark.parametrize("dtype", [*INT_TYPES, *WIDE_TYPES])
def test_mswap_as_written(dtype: AmoType) -> None:
    size = atomics.TYPE_INFO[dtype].size
    mask_all = (1 << (8 * size)) - 1
    rng = random.Random(dtype)
    for _ in range(10):
        t, i, m = (rng.getrandbits(8 * size) for _ in range(3))
        mem = bytearray(t.to_bytes(size, "little"))
        operand = i.to_bytes(size, "little") + m.to_bytes(size, "little")
        atomics.apply(memoryview(mem), 0, AmoOp.MSWAP, dtype, operand)
        assert int.from_bytes(mem, "little") == ((t & m) ^ i) & mask_all


@pytest.mark.parametrize("dtype", list(FLOAT_TYPES))
@pytest.mark.parametrize("op", [AmoOp.MIN, AmoOp.MAX, AmoOp.SUM, AmoOp.DIFF, AmoOp.PROD, AmoOp.WRITE, AmoOp.READ])
def test_float_ops_match_numpy(op: AmoOp, dtype: AmoType) -> None:
    nt = FLOAT_TYPES[dtype]
    rng = np.random.default_rng(int(op) * 31 + int(dtype))
    with np.errstate(over="ignore"):
        specials = np.array([0.0, -0.0, 1.5, -3.25, 65504.0, 1e-5, 3e38], dtype=np.float64).astype(nt)
    for _ in range(20):
        t = np.concatenate([rng.normal(0, 100, N).astype(nt), rng.choice(specials, 1)])
        v = np.concatenate([rng.normal(0, 100, N).astype(nt), rng.choice(specials, 1)])
        mem = bytearray(t.astype(np.dtype(nt).newbyteorder("<")).tobytes())
        old = atomics.apply(memoryview(mem), 0, op, dtype, v.astype(np.dtype(nt).newbyteorder("<")).tobytes())
        assert old == t.astype(np.dtype(nt).newbyteorder("<")).tobytes()  # the fetched values
        with np.errstate(over="ignore", invalid="ignore"):
            want = {
                AmoOp.MIN: np.where(v < t, v, t),
                AmoOp.MAX: np.where(v > t, v, t),
                AmoOp.SUM: t + v,
                AmoOp.DIFF: t - v,
                AmoOp.PROD: t * v,
                AmoOp.WRITE: v,
                AmoOp.READ: t,
            }[op].astype(nt)
        assert bytes(mem) == want.astype(np.dtype(nt).newbyteorder("<")).tobytes(), (op.name, t, v)


def _bf16_exact(x: Fraction) -> bytes:
    """Reference bfloat16 rounding by exact rational arithmetic (round to nearest, ties even)."""
    if x == 0:
        return b"\x00\x00"
    sign = x < 0
    a = -x if sign else x
    e = math.floor(math.log2(a))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    q = Fraction(2) ** max(e - 7, -133)
    k = a / q
    r = math.floor(k)
    if k - r > Fraction(1, 2) or (k - r == Fraction(1, 2) and r % 2):
        r += 1
    y = r * q
    if y >= Fraction(2) ** 128:
        f = math.inf
    else:
        f = float(y)
    return struct.pack("<f", -f if sign else f)[2:4]


@pytest.mark.parametrize("op", [AmoOp.SUM, AmoOp.DIFF, AmoOp.PROD, AmoOp.MIN, AmoOp.MAX])
def test_bfloat16_against_exact_rounding(op: AmoOp) -> None:
    rng = random.Random(op)
    for _ in range(200):
        tb = struct.pack("<H", rng.getrandbits(15) & 0x7F7F | (rng.getrandbits(1) << 15))
        vb = struct.pack("<H", rng.getrandbits(15) & 0x7F7F | (rng.getrandbits(1) << 15))
        t = atomics.decode_values(AmoType.BFLOAT16, tb)[0]
        v = atomics.decode_values(AmoType.BFLOAT16, vb)[0]
        mem = bytearray(tb)
        atomics.apply(memoryview(mem), 0, op, AmoType.BFLOAT16, vb)
        if op == AmoOp.MIN:
            want = vb if v < t else tb
        elif op == AmoOp.MAX:
            want = vb if v > t else tb
        else:
            ft, fv = Fraction(t), Fraction(v)
            exact = {AmoOp.SUM: ft + fv, AmoOp.DIFF: ft - fv, AmoOp.PROD: ft * fv}[op]
            want = _bf16_exact(exact)
            if exact == 0:
                want = bytes(mem)  # signed zero follows IEEE; only check the magnitude
        assert bytes(mem) == want, (op.name, t, v)


def test_float_overflow_to_infinity_and_nan() -> None:
    mem = bytearray(atomics.encode_values(AmoType.FLOAT, [3e38]))
    atomics.apply(memoryview(mem), 0, AmoOp.SUM, AmoType.FLOAT, atomics.encode_values(AmoType.FLOAT, [3e38]))
    assert atomics.decode_values(AmoType.FLOAT, bytes(mem)) == [math.inf]
    atomics.apply(memoryview(mem), 0, AmoOp.DIFF, AmoType.FLOAT, atomics.encode_values(AmoType.FLOAT, [math.inf]))
    assert math.isnan(atomics.decode_values(AmoType.FLOAT, bytes(mem))[0])
    mem = bytearray(atomics.encode_values(AmoType.FP16, [60000.0]))
    atomics.apply(memoryview(mem), 0, AmoOp.PROD, AmoType.FP16, atomics.encode_values(AmoType.FP16, [2.0]))
    assert atomics.decode_values(AmoType.FP16, bytes(mem)) == [math.inf]
    mem = bytearray(atomics.encode_values(AmoType.BFLOAT16, [3e38]))
    atomics.apply(memoryview(mem), 0, AmoOp.PROD, AmoType.BFLOAT16, atomics.encode_values(AmoType.BFLOAT16, [4.0]))
    assert atomics.decode_values(AmoType.BFLOAT16, bytes(mem)) == [math.inf]


@pytest.mark.parametrize("dtype", [*FLOAT_TYPES, AmoType.BFLOAT16])
@pytest.mark.parametrize("op", BITWISE_LOGICAL)
def test_bitwise_and_logical_on_floats_unsupported(op: AmoOp, dtype: AmoType) -> None:
    size = atomics.TYPE_INFO[dtype].size
    with pytest.raises(AmoUnsupportedOp) as ei:
        atomics.apply(memoryview(bytearray(size)), 0, op, dtype, bytes(size * 2))
    assert ei.value.return_code == ReturnCode.AMO_UNSUPPORTED_OP


@pytest.mark.parametrize("dtype", [*UNSUPPORTED_DT, 0x12, 0xFF])
def test_complex_long_double_and_unknown_types_unsupported(dtype: int) -> None:
    with pytest.raises(AmoUnsupportedDt) as ei:
        atomics.apply(memoryview(bytearray(32)), 0, AmoOp.SUM, dtype, bytes(16))
    assert ei.value.return_code == ReturnCode.AMO_UNSUPPORTED_DT


@pytest.mark.parametrize("op", [0x15, 0xE0, 0xFE, 0xFF])
def test_vendor_and_reserved_ops_unsupported(op: int) -> None:
    with pytest.raises(AmoUnsupportedOp):
        atomics.apply(memoryview(bytearray(8)), 0, op, AmoType.UINT64, bytes(8))


def test_every_op_type_pair_is_classified() -> None:
    """Every (op, type) of the tables is either supported or refused with the documented code."""
    for dtype in AmoType:
        for op in AmoOp:
            kind = atomics.TYPE_INFO.get(dtype)
            if kind is None:
                assert not atomics.supported(op, dtype)
                continue
            if kind.is_float:
                assert atomics.supported(op, dtype) == (op in FLOAT_ONLY_OPS), (op, dtype)
            else:
                assert atomics.supported(op, dtype)


@pytest.mark.parametrize(
    ("op", "dtype", "length", "offset", "exc"),
    [
        (AmoOp.SUM, AmoType.UINT64, 0, 0, AmoUnsupportedSize),
        (AmoOp.SUM, AmoType.UINT64, 12, 0, AmoUnsupportedSize),
        (AmoOp.SUM, AmoType.UINT32, 6, 0, AmoUnsupportedSize),
        (AmoOp.MSWAP, AmoType.UINT32, 4, 0, AmoUnsupportedSize),
        (AmoOp.CSWAP, AmoType.UINT64, 8, 0, AmoUnsupportedSize),
        (AmoOp.SUM, AmoType.UINT64, 8, 4, AmoUnaligned),
        (AmoOp.SUM, AmoType.UINT16, 2, 1, AmoUnaligned),
        (AmoOp.CSWAP, AmoType.UINT128, 0, 8, AmoUnaligned),
        (AmoOp.READ, AmoType.FLOAT, 4, 2, AmoUnaligned),
    ],
)
def test_size_and_alignment_errors(op: int, dtype: int, length: int, offset: int, exc: type) -> None:
    with pytest.raises(exc):
        atomics.plan(op, dtype, length, offset)


def test_plan_counts_vector_elements() -> None:
    assert atomics.plan(AmoOp.SUM, AmoType.UINT32, 12, 4) == (3, 4)
    assert atomics.plan(AmoOp.MSWAP, AmoType.UINT16, 8, 0) == (2, 2)
    assert atomics.plan(AmoOp.CSWAP_GT, AmoType.INT128, 0, 16) == (1, 16)


def test_memory_is_little_endian_and_cswap_extension_big_endian_value() -> None:
    assert atomics.encode_values(AmoType.UINT32, [0x01020304]) == b"\x04\x03\x02\x01"
    assert atomics.to_wire_int(AmoType.UINT32, 0x01020304) == 0x01020304
    assert atomics.to_wire_int(AmoType.INT16, -1) == 0xFFFF
    assert atomics.to_wire_int(AmoType.FLOAT, 1.0) == 0x3F800000


def test_inval_and_read_leave_memory() -> None:
    mem = bytearray(range(16))
    for op in (AmoOp.INVAL, AmoOp.READ):
        old = atomics.apply(memoryview(mem), 8, op, AmoType.UINT32, bytes(8))
        assert old == bytes(range(8, 16)) and mem == bytearray(range(16))
