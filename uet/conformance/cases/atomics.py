"""Atomics: operations × data types, compare-and-swap, fetch semantics, alignment and the AMO
return codes (behaviour.md §6.5; wire-format.md §9.1, §9.2, §10).

Each case writes a known target value, applies one FETCHING_ATOMIC (or ATOMIC), checks the value
fetched is the old one, then READs the element back and compares it with the result computed here
by an independent model of §10.1.

Readings where the notes are silent (stated so a target built otherwise knows why it fails):
target memory holds elements little-endian (the reference provider on x86 hosts) and operands
travel as they sit in memory; the compare-and-swap extension's 128-bit ``compare_value`` /
``swap_value`` are big-endian wire integers holding the element's bit pattern in their low bits;
conditional swaps compare the *compare operand* with the target (libfabric ``FI_CSWAP_*``:
CSWAP_LE swaps when compare ≤ target).
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable
from functools import partial
from itertools import count

from uet.conformance.case import case
from uet.conformance.cases._util import OP, RC, F, check, expect_rc, need_region, op, opened, rc_name, read_back
from uet.conformance.session import Session
from uet.wire import ses as S

A = "atomic"
AO = S.AmoOp
AT = S.AmoType
_slot = count()
#: (bits, signed) of each integer datatype
_INT: dict[int, tuple[int, bool]] = {
    AT.INT8: (8, True), AT.UINT8: (8, False), AT.INT16: (16, True), AT.UINT16: (16, False),
    AT.INT32: (32, True), AT.UINT32: (32, False), AT.INT64: (64, True), AT.UINT64: (64, False),
}  # fmt: skip
_FLT: dict[int, str] = {AT.FLOAT: "<f", AT.DOUBLE: "<d"}


def _size(dt: int) -> int:
    return _INT[dt][0] // 8 if dt in _INT else struct.calcsize(_FLT[dt])


def _enc(dt: int, v: float | int) -> bytes:
    if dt in _FLT:
        return struct.pack(_FLT[dt], v)
    bits, _signed = _INT[dt]
    return (int(v) & ((1 << bits) - 1)).to_bytes(bits // 8, "little")


def _dec(dt: int, b: bytes) -> float | int:
    if dt in _FLT:
        return float(struct.unpack(_FLT[dt], b)[0])
    bits, signed = _INT[dt]
    return int.from_bytes(b[: bits // 8], "little", signed=signed)


def _model(o: int, dt: int, t: float | int, i: float | int) -> float | int:
    """§10.1 on one element (T = target, I = operand); wrap-around for integers."""
    # the bitwise operators through ``operator``: they reach here with integer datatypes only
    f: Callable[[], float | int] = {
        AO.MIN: lambda: min(t, i), AO.MAX: lambda: max(t, i), AO.SUM: lambda: t + i, AO.DIFF: lambda: t - i,
        AO.PROD: lambda: t * i, AO.LOR: lambda: int(bool(t) or bool(i)), AO.LAND: lambda: int(bool(t) and bool(i)),
        AO.BOR: lambda: operator.or_(t, i), AO.BAND: lambda: operator.and_(t, i),
        AO.LXOR: lambda: int(bool(t) != bool(i)), AO.BXOR: lambda: operator.xor(t, i), AO.READ: lambda: t,
        AO.WRITE: lambda: i,
    }[AO(o)]  # fmt: skip
    r = f()
    return _dec(dt, _enc(dt, r)) if dt in _INT else r


def _ext(o: int, dt: int) -> bytes:
    return S.ATOMIC_EXT.encode(S.ATOMIC_EXT.make(atomic_opcode=o, atomic_datatype=dt))


def _run(s: Session, o: int, dt: int, t: float | int, i: float | int, *, fetch: bool = True) -> None:
    reg = need_region(s, "rwa", min_size=16384)
    off = 8192 + 16 * (next(_slot) % 500)
    p = opened(s)
    n = _size(dt)
    r = op(s, p, OP.WRITE, _enc(dt, t), match_bits=reg.key, buffer_offset=off)
    check(r.is_ack and r.rc in (RC.OK, RC.NULL), "the WRITE of the initial value succeeds", r)
    r = op(s, p, OP.FETCHING_ATOMIC if fetch else OP.ATOMIC, _enc(dt, i), _ext(o, dt), match_bits=reg.key,
           buffer_offset=off)  # fmt: skip
    expect_rc(r, RC.OK, f" for {AO(o).name} on {AT(dt).name}")
    if fetch:
        check(r.data[:n] == _enc(dt, t), f"the fetched value is the old target value {t!r}", r)
    want = _model(o, dt, t, i)
    got = _dec(dt, read_back(s, p, reg.key, off, n))
    check(got == want, f"{AO(o).name}({t!r}, {i!r}) on {AT(dt).name} leaves {want!r} in memory", f"{got!r}")


def _reg(cid: str, title: str, o: int, dt: int, t: float | int, i: float | int, fetch: bool = True) -> None:
    case(cid, A, title, "wire-format.md §10.1")(lambda s: _run(s, o, dt, t, i, fetch=fetch))


_n = count(1)
# every integer operation on uint64
for _o, _t, _i in [
    (AO.MIN, 500, 42), (AO.MAX, 500, 4242), (AO.SUM, 1 << 40, 77), (AO.DIFF, 1000, 1), (AO.PROD, 12345, 1000),
    (AO.LOR, 0, 9), (AO.LAND, 3, 0), (AO.BOR, 0xF0F0, 0x0F0F), (AO.BAND, 0xFF00FF, 0x0FF0F0),
    (AO.LXOR, 5, 6), (AO.BXOR, 0xAAAA, 0xFFFF), (AO.READ, 0xC0FFEE, 0), (AO.WRITE, 1, 0xDEADBEEFCAFE),
]:  # fmt: skip
    _reg(f"AMO-{next(_n):03d}", f"{_o.name} on UINT64", _o, AT.UINT64, _t, _i)
# SUM on every integer type, with wrap-around
for _dt in (AT.INT8, AT.UINT8, AT.INT16, AT.UINT16, AT.INT32, AT.UINT32, AT.INT64):
    _bits = _INT[_dt][0]
    _reg(f"AMO-{next(_n):03d}", f"SUM on {_dt.name} wraps modulo 2^{_bits}", AO.SUM, _dt,
         (1 << (_bits - 1)) - 1 if _INT[_dt][1] else (1 << _bits) - 2, 3)  # fmt: skip
# signed compares, floating point
_reg(f"AMO-{next(_n):03d}", "MIN on INT32 compares signed (−5 < 3)", AO.MIN, AT.INT32, 3, -5)
_reg(f"AMO-{next(_n):03d}", "MAX on INT64 compares signed (−1 < 7)", AO.MAX, AT.INT64, -1, 7)
_reg(f"AMO-{next(_n):03d}", "MAX on UINT32 compares unsigned (0xFFFFFFFF > 7)", AO.MAX, AT.UINT32, 0xFFFFFFFF, 7)
_reg(f"AMO-{next(_n):03d}", "SUM on DOUBLE", AO.SUM, AT.DOUBLE, 1.5, 2.25)
_reg(f"AMO-{next(_n):03d}", "SUM on FLOAT", AO.SUM, AT.FLOAT, 0.5, 0.25)
_reg(f"AMO-{next(_n):03d}", "MIN on DOUBLE", AO.MIN, AT.DOUBLE, -2.5, 1.0)
_reg(f"AMO-{next(_n):03d}", "PROD on DOUBLE", AO.PROD, AT.DOUBLE, 3.0, -0.5)
_reg(f"AMO-{next(_n):03d}", "non-fetching ATOMIC SUM applies without returning data", AO.SUM, AT.UINT64, 10, 5,
     fetch=False)  # fmt: skip


# -- compare-and-swap ------------------------------------------------------------------------------------


def _cswap(s: Session, o: int, t: int, c: int, w: int, swapped: bool) -> None:
    reg = need_region(s, "rwa", min_size=16384)
    off = 8192 + 16 * (next(_slot) % 500)
    p = opened(s)
    op(s, p, OP.WRITE, _enc(AT.UINT64, t), match_bits=reg.key, buffer_offset=off)
    ext = S.CSWAP_EXT.encode(S.CSWAP_EXT.make(atomic_opcode=o, atomic_datatype=AT.UINT64, compare_value=c,
                                              swap_value=w))  # fmt: skip
    r = expect_rc(op(s, p, OP.FETCHING_ATOMIC, b"", ext, match_bits=reg.key, buffer_offset=off), RC.OK)
    check(r.data[:8] == _enc(AT.UINT64, t), f"the fetched value is the old target value {t}", r)
    got = _dec(AT.UINT64, read_back(s, p, reg.key, off, 8))
    want = w if swapped else t
    check(got == want, f"{AO(o).name}(compare {c}, swap {w}) on target {t} leaves {want}", f"{got}")


for _o, _t, _c, _sw in [
    (AO.CSWAP, 7, 7, True), (AO.CSWAP, 7, 8, False), (AO.CSWAP_NE, 7, 8, True), (AO.CSWAP_NE, 7, 7, False),
    (AO.CSWAP_LE, 7, 5, True), (AO.CSWAP_LE, 7, 9, False), (AO.CSWAP_LT, 7, 6, True), (AO.CSWAP_LT, 7, 7, False),
    (AO.CSWAP_GE, 7, 7, True), (AO.CSWAP_GE, 7, 6, False), (AO.CSWAP_GT, 7, 8, True), (AO.CSWAP_GT, 7, 7, False),
]:  # fmt: skip
    case(f"AMO-{next(_n):03d}", A, f"{_o.name} with compare {_c} on target {_t} {'swaps' if _sw else 'does not swap'}",
         "wire-format.md §9.2")(partial(_cswap, o=_o, t=_t, c=_c, w=0x5157, swapped=_sw))  # fmt: skip


# -- errors --------------------------------------------------------------------------------------------


def _amo_err(s: Session, ext: bytes, payload: bytes, off: int, rc: tuple[int, ...], flags: int | None = None) -> None:
    reg = need_region(s, "rwa", min_size=16384)
    kw = {} if flags is None else {"flags": flags, "request_length": len(payload)}
    r = op(s, None, OP.FETCHING_ATOMIC, payload, ext, match_bits=reg.key, buffer_offset=off, **kw)
    check(r.is_ack and r.rc in rc, "return code " + " or ".join(rc_name(x) for x in rc), r)


_E = [
    ("an 8-byte atomic at an offset not a multiple of 8 → AMO_UNALIGNED", _ext(AO.SUM, AT.UINT64), b"\1" + bytes(7),
     8196, (RC.AMO_UNALIGNED,), None),
    ("an unknown data type (0x12) → AMO_UNSUPPORTED_DT", _ext(AO.SUM, 0x12), bytes(8), 8192,
     (RC.AMO_UNSUPPORTED_DT,), None),
    ("a bitwise operation on DOUBLE → AMO_UNSUPPORTED_OP", _ext(AO.BOR, AT.DOUBLE), bytes(8), 8192,
     (RC.AMO_UNSUPPORTED_OP, RC.UNSUPPORTED_OP), None),
    ("an operand length not a multiple of the type size → AMO_UNSUPPORTED_SIZE", _ext(AO.SUM, AT.UINT64), bytes(5),
     8192, (RC.AMO_UNSUPPORTED_SIZE,), None),
    ("a vendor atomic opcode the target does not know (0xE5) → AMO_UNSUPPORTED_OP", _ext(0xE5, AT.UINT64),
     bytes(8), 8192, (RC.AMO_UNSUPPORTED_OP, RC.UNSUPPORTED_OP), None),
    ("an atomic that is not single-packet (SOM without EOM) → OP_VIOLATION", _ext(AO.SUM, AT.UINT64), bytes(8),
     8192, (RC.OP_VIOLATION,), F.SOM | F.REL),
    ("an atomic on an offset past the region → BAD_ADDR", _ext(AO.SUM, AT.UINT64), bytes(8), 1 << 40,
     (RC.BAD_ADDR,), None),
]  # fmt: skip
for _title, _x, _pl, _off, _rc, _fl in _E:
    case(f"AMO-{next(_n):03d}", A, _title, "behaviour.md §6.5")(
        partial(_amo_err, ext=_x, payload=_pl, off=_off, rc=_rc, flags=_fl)
    )


def _mswap(s: Session, t: int, v: int, m: int) -> None:
    """MSWAP on one UINT64: the operand is an (operand, mask) pair, operand first (the reference's
    reading, uet.ses.atomics); the target becomes ``(T & mask) ^ operand`` (§10.1 as written)."""
    reg = need_region(s, "rwa", min_size=16384)
    off = 8192 + 16 * (next(_slot) % 500)
    p = opened(s)
    op(s, p, OP.WRITE, _enc(AT.UINT64, t), match_bits=reg.key, buffer_offset=off)
    r = op(s, p, OP.FETCHING_ATOMIC, _enc(AT.UINT64, v) + _enc(AT.UINT64, m), _ext(AO.MSWAP, AT.UINT64),
           match_bits=reg.key, buffer_offset=off)  # fmt: skip
    expect_rc(r, RC.OK, " for MSWAP on UINT64")
    check(r.data[:8] == _enc(AT.UINT64, t), f"the fetched value is the old target value {t:#x}", r)
    want = (t & m) ^ v
    got = _dec(AT.UINT64, read_back(s, p, reg.key, off, 8))
    check(got == want, f"MSWAP(operand {v:#x}, mask {m:#x}) on {t:#x} leaves {want:#x}", f"{got:#x}")


for _t, _v, _m in [(0xFFFF0000FFFF0000, 0x00000000000000FF, 0xFF00FF00FF00FF00), (0x1234, 0xF0F0, 0)]:
    case(f"AMO-{next(_n):03d}", A, f"MSWAP(operand {_v:#x}, mask {_m:#x}) on {_t:#x}", "wire-format.md §10.1")(
        partial(_mswap, t=_t, v=_v, m=_m)
    )


_reg(f"AMO-{next(_n):03d}", "DIFF on DOUBLE (target − operand)", AO.DIFF, AT.DOUBLE, 5.5, 2.0)
