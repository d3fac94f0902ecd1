"""Atomic operations on target memory (wire-format.md §9.1–§9.2, §10; behaviour.md §6.5).

Every opcode of §10.1 is defined on every data type of §10.2 where it makes sense:

======================  ==========================================  =================================
opcode                  integers (int8 … uint128)                   float, double, bfloat16, FP16
======================  ==========================================  =================================
MIN MAX                 signed or unsigned compare                  numeric compare (see NaN below)
SUM DIFF PROD           wrap-around modulo 2^bits                   IEEE, round to nearest even
LOR LAND LXOR           result 1/0 from ``T != 0`` and ``I != 0``   ``AMO_UNSUPPORTED_OP``
BOR BAND BXOR           bitwise                                     ``AMO_UNSUPPORTED_OP``
READ                    fetch only, T unchanged                     same
WRITE                   T = I                                       same (bit pattern copied)
CSWAP … CSWAP_GT        T = swap if ``compare OP T``                numeric compare
MSWAP                   T = (T & mask) ^ I  (§10.1 as written)      ``AMO_UNSUPPORTED_OP``
INVAL                   accepted, no effect (no cache to flush)     same
vendor 0xE0–0xFE, other ``AMO_UNSUPPORTED_OP``
======================  ==========================================  =================================

Decisions where the notes are silent (documented choices):

* **Byte order.** Target memory holds values little-endian, like the reference provider on x86
  hosts; operand payloads are copied as they sit in memory, so they are little-endian on the wire
  too. The compare-and-swap extension's 128-bit ``compare_value``/``swap_value`` are big-endian
  wire integers (wire-format.md §9.2) holding the element's bit pattern in their low bits.
* **Conditional swaps** follow libfabric's ``FI_CSWAP_*``: the condition compares the *compare
  operand* with the target, e.g. ``CSWAP_LE`` swaps when ``compare <= T``.
* **Vectors.** A payload of ``n`` elements applies the operation element-wise to ``n``
  consecutive elements (one atomic request, applied atomically as a whole since the engine is
  single-threaded). READ and INVAL carry ``n`` elements of ignored operand bytes so the length
  says how many; MSWAP carries ``n`` (operand, mask) pairs, operand first. Compare-and-swap
  operates on exactly one element; its payload is empty (Δ25).
* **Sizes.** A payload that is empty or not a whole number of elements → ``AMO_UNSUPPORTED_SIZE``;
  a target offset not a multiple of the element size → ``AMO_UNALIGNED`` (offsets are checked
  relative to the region start, which is treated as naturally aligned).
* **Unsupported types.** Complex types and long double (x87 80-bit, no portable arithmetic here)
  → ``AMO_UNSUPPORTED_DT``; unknown type codes too.
* **Floating point.** Arithmetic is done in binary64 and rounded once to the target format (exact
  for +, −, × since binary64 has more than twice the significand bits of every format here);
  overflow gives ±inf and invalid operations NaN. FP exceptions are not signalled, so the
  ``AMO_FP_*`` codes are never produced (signalling is an option the notes call "enabled").
  MIN/MAX replace T only when ``I < T`` / ``I > T``: a NaN operand never replaces T and a NaN
  target stays (C ``(I < T) ? I : T``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from uet.ses.errors import AmoUnaligned, AmoUnsupportedDt, AmoUnsupportedOp, AmoUnsupportedSize
from uet.wire.ses import CSWAP_OPS, AmoOp, AmoType

__all__ = [
    "AmoKind",
    "TYPE_INFO",
    "apply",
    "decode_values",
    "encode_values",
    "plan",
    "supported",
    "to_wire_int",
]


@dataclass(frozen=True)
class AmoKind:
    """What a data type is: element ``size`` in bytes, integer or float, signedness."""

    size: int
    is_float: bool
    signed: bool = False


TYPE_INFO: dict[int, AmoKind] = {
    AmoType.INT8: AmoKind(1, False, True),
    AmoType.UINT8: AmoKind(1, False),
    AmoType.INT16: AmoKind(2, False, True),
    AmoType.UINT16: AmoKind(2, False),
    AmoType.INT32: AmoKind(4, False, True),
    AmoType.UINT32: AmoKind(4, False),
    AmoType.INT64: AmoKind(8, False, True),
    AmoType.UINT64: AmoKind(8, False),
    AmoType.INT128: AmoKind(16, False, True),
    AmoType.UINT128: AmoKind(16, False),
    AmoType.FLOAT: AmoKind(4, True, True),
    AmoType.DOUBLE: AmoKind(8, True, True),
    AmoType.BFLOAT16: AmoKind(2, True, True),
    AmoType.FP16: AmoKind(2, True, True),
}

_INT_OPS = frozenset(AmoOp)
_FLOAT_OPS = frozenset(
    {AmoOp.MIN, AmoOp.MAX, AmoOp.SUM, AmoOp.DIFF, AmoOp.PROD, AmoOp.READ, AmoOp.WRITE, AmoOp.INVAL} | set(CSWAP_OPS)
)


def supported(op: int, dtype: int) -> bool:
    """True when ``op`` on ``dtype`` is implemented."""
    k = TYPE_INFO.get(dtype)
    return k is not None and op in (_FLOAT_OPS if k.is_float else _INT_OPS)


def plan(op: int, dtype: int, operand_len: int, offset: int) -> tuple[int, int]:
    """Validate an atomic request; returns ``(elements, element_size)``.

    Check order: data type (``AMO_UNSUPPORTED_DT``), operation on that type
    (``AMO_UNSUPPORTED_OP``), operand length (``AMO_UNSUPPORTED_SIZE``), alignment
    (``AMO_UNALIGNED``). Bounds are the caller's (``BAD_ADDR`` on ``elements * size`` bytes).
    """
    k = TYPE_INFO.get(dtype)
    if k is None:
        raise AmoUnsupportedDt(f"data type {dtype:#x} not supported")
    if op not in (_FLOAT_OPS if k.is_float else _INT_OPS):
        raise AmoUnsupportedOp(f"atomic op {op:#x} not defined on data type {dtype:#x}")
    size = k.size
    if op in CSWAP_OPS:
        if operand_len:
            raise AmoUnsupportedSize("compare-and-swap operands travel in the extension; payload must be empty")
        n = 1
    else:
        per = size * 2 if op == AmoOp.MSWAP else size
        if operand_len == 0 or operand_len % per:
            raise AmoUnsupportedSize(f"operand length {operand_len} is not a multiple of {per}")
        n = operand_len // per
    if offset % size:
        raise AmoUnaligned(f"offset {offset} not aligned to {size}")
    return n, size


# -- float conversions ---------------------------------------------------------------------------


def _pack_rounded(fmt: str, x: float) -> bytes:
    try:
        return struct.pack(fmt, x)
    except OverflowError:
        return struct.pack(fmt, math.copysign(math.inf, x))


def _bf16_from_float(x: float) -> bytes:
    """Round a binary64 value once to bfloat16 (round to nearest even)."""
    if math.isnan(x):
        bits = 0x7FC0 | (0x8000 if math.copysign(1.0, x) < 0 else 0)
        return bits.to_bytes(2, "little")
    if x == 0 or math.isinf(x):
        y = x
    else:
        _m, e = math.frexp(x)  # x = m * 2**e, 0.5 <= |m| < 1
        q = 2.0 ** max(e - 8, -133)  # quantum: 8 significant bits, subnormal floor 2**-133
        y = math.copysign(round(x / q) * q, x)  # exact scaling; round() is half-to-even
        if abs(y) >= 2.0**128:
            y = math.copysign(math.inf, x)
    return struct.pack("<f", y)[2:4]


def _bf16_to_float(b: bytes) -> float:
    return float(struct.unpack("<f", b"\x00\x00" + bytes(b))[0])


_FLOAT_CODEC: dict[int, tuple[Callable[[bytes], float], Callable[[float], bytes]]] = {
    AmoType.FLOAT: (lambda b: struct.unpack("<f", b)[0], lambda x: _pack_rounded("<f", x)),
    AmoType.DOUBLE: (lambda b: struct.unpack("<d", b)[0], lambda x: struct.pack("<d", x)),
    AmoType.FP16: (lambda b: struct.unpack("<e", b)[0], lambda x: _pack_rounded("<e", x)),
    AmoType.BFLOAT16: (_bf16_to_float, _bf16_from_float),
}


def encode_values(dtype: int, values: Iterable[int | float]) -> bytes:
    """Operand bytes (little-endian memory order) for ``values`` of ``dtype``; integers are
    reduced modulo 2^bits, floats rounded to the format."""
    k = TYPE_INFO.get(dtype)
    if k is None:
        raise AmoUnsupportedDt(f"data type {dtype:#x} not supported")
    if k.is_float:
        enc = _FLOAT_CODEC[dtype][1]
        return b"".join(enc(float(v)) for v in values)
    mask = (1 << (8 * k.size)) - 1
    return b"".join((int(v) & mask).to_bytes(k.size, "little") for v in values)


def decode_values(dtype: int, data: bytes | memoryview) -> list[int | float]:
    """Values of ``dtype`` stored in ``data`` (little-endian memory order)."""
    k = TYPE_INFO.get(dtype)
    if k is None:
        raise AmoUnsupportedDt(f"data type {dtype:#x} not supported")
    s = k.size
    data = bytes(data)
    if k.is_float:
        dec = _FLOAT_CODEC[dtype][0]
        return [dec(data[i : i + s]) for i in range(0, len(data) - s + 1, s)]
    return [int.from_bytes(data[i : i + s], "little", signed=k.signed) for i in range(0, len(data) - s + 1, s)]


def to_wire_int(dtype: int, value: int | float) -> int:
    """The 128-bit compare/swap extension value for ``value`` (its bit pattern, §9.2)."""
    return int.from_bytes(encode_values(dtype, [value]), "little")


def _from_wire_int(dtype: int, v: int) -> bytes:
    size = TYPE_INFO[dtype].size
    return (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


# -- the operation --------------------------------------------------------------------------------

_CMP: dict[int, Callable[[object, object], bool]] = {
    AmoOp.CSWAP: lambda c, t: c == t,
    AmoOp.CSWAP_NE: lambda c, t: c != t,
    AmoOp.CSWAP_LE: lambda c, t: c <= t,  # type: ignore[operator]
    AmoOp.CSWAP_LT: lambda c, t: c < t,  # type: ignore[operator]
    AmoOp.CSWAP_GE: lambda c, t: c >= t,  # type: ignore[operator]
    AmoOp.CSWAP_GT: lambda c, t: c > t,  # type: ignore[operator]
}


def apply(
    memory: memoryview,
    offset: int,
    op: int,
    dtype: int,
    operand: bytes | memoryview = b"",
    *,
    compare: int = 0,
    swap: int = 0,
) -> bytes:
    """Apply an atomic at ``memory[offset:]`` and return the prior bytes (the fetch result).

    ``operand`` is the request payload; ``compare``/``swap`` the extension values of the
    compare-and-swap family. Raises the ``AMO_*`` errors of :func:`plan`; the caller has checked
    bounds and permissions.
    """
    n, size = plan(op, dtype, len(operand), offset)
    end = offset + n * size
    old = bytes(memory[offset:end])
    if op in (AmoOp.READ, AmoOp.INVAL):
        return old
    k = TYPE_INFO[dtype]
    operand = bytes(operand)
    if op in CSWAP_OPS:
        cmp_b = _from_wire_int(dtype, compare)
        if k.is_float:
            dec = _FLOAT_CODEC[dtype][0]
            c, t = dec(cmp_b), dec(old)
        else:
            c = int.from_bytes(cmp_b, "little", signed=k.signed)
            t = int.from_bytes(old, "little", signed=k.signed)
        if _CMP[op](c, t):
            memory[offset:end] = _from_wire_int(dtype, swap)
        return old
    if op == AmoOp.WRITE:
        memory[offset:end] = operand
        return old
    out = bytearray(old)
    if k.is_float:
        dec, enc = _FLOAT_CODEC[dtype]
        for i in range(0, n * size, size):
            tb = old[i : i + size]
            ib = operand[i : i + size]
            t, v = dec(tb), dec(ib)
            if op == AmoOp.MIN:
                out[i : i + size] = ib if v < t else tb
            elif op == AmoOp.MAX:
                out[i : i + size] = ib if v > t else tb
            elif op == AmoOp.SUM:
                out[i : i + size] = enc(t + v)
            elif op == AmoOp.DIFF:
                out[i : i + size] = enc(t - v)
            else:  # PROD
                out[i : i + size] = enc(t * v)
    else:
        bits = 8 * size
        mask = (1 << bits) - 1
        signed = k.signed
        for j in range(n):
            i = j * size
            t = int.from_bytes(old[i : i + size], "little", signed=signed)
            if op == AmoOp.MSWAP:
                v = int.from_bytes(operand[2 * i : 2 * i + size], "little")
                m = int.from_bytes(operand[2 * i + size : 2 * i + 2 * size], "little")
                r = ((t & mask) & m) ^ v
            else:
                v = int.from_bytes(operand[i : i + size], "little", signed=signed)
                r = _int_op(op, t, v)
            out[i : i + size] = (r & mask).to_bytes(size, "little")
    memory[offset:end] = out
    return old


def _int_op(op: int, t: int, v: int) -> int:
    if op == AmoOp.MIN:
        return v if v < t else t
    if op == AmoOp.MAX:
        return v if v > t else t
    if op == AmoOp.SUM:
        return t + v
    if op == AmoOp.DIFF:
        return t - v
    if op == AmoOp.PROD:
        return t * v
    if op == AmoOp.LOR:
        return int(t != 0 or v != 0)
    if op == AmoOp.LAND:
        return int(t != 0 and v != 0)
    if op == AmoOp.LXOR:
        return int((t != 0) != (v != 0))
    if op == AmoOp.BOR:
        return t | v
    if op == AmoOp.BAND:
        return t & v
    if op == AmoOp.BXOR:
        return t ^ v
    raise AmoUnsupportedOp(f"atomic op {op:#x}")  # pragma: no cover - plan() filters
