"""Hand-written codecs of the PDS headers every packet of a run carries, for the compiled build.

The layouts of :mod:`uet.wire.pds` generate their fast codecs as Python source run with ``exec``
(:mod:`uet.wire.layout`), so the optional compiled build (:mod:`uet.compiled`) cannot compile
them: every data packet, ACK and credit of a simulated run called them as interpreted code from
compiled code (issue 28: 14–22 k calls per incast run, about 3–4 k instructions each). These are
the same codecs written out for the headers of the data path — the request, the CC request, the
ACK_CC with its raw state (decoded by the sender), the ACK_CC / ACK_CCX with the NSCC state (built
by the receiver) and the control packet — in a module the compiled build compiles, with
positional arguments instead of a tuple of values.

Each is the generic codec of its layout, field for field: the same ``struct`` format (taken from
the layout, so the widths stay declared once), the same masks on the sub-word fields, the same
values left to ``struct`` to range-check, the same errors (a short buffer raises the layout's
:class:`~uet.errors.DecodeError`, a value that does not fit its :class:`~uet.errors.EncodeError`).
``tests/test_wire_pdsfast.py`` compares each with its layout's codec over random and hostile
values. Arguments are ints (the compiled build checks that at the call).
"""

from __future__ import annotations

import struct
from typing import Final

from uet.wire.pds import ACK_CC, ACK_CCX, CC_REQUEST, CONTROL, REQUEST

__all__ = [
    "ack_cc_nscc",
    "ack_ccx_nscc",
    "cc_request",
    "control",
    "request",
    "unpack_ack_cc_raw",
    "unpack_cc_request",
    "unpack_control",
]

_RAW_CC: Final = ACK_CC[(False, "raw")]
_NSCC_CC: Final = ACK_CC[(False, "nscc")]
_NSCC_CCX: Final = ACK_CCX[(False, "nscc")]

_REQ_S: Final = struct.Struct(REQUEST._struct.format)  # >HhIHH
_CC_REQ_S: Final = struct.Struct(CC_REQUEST._struct.format)  # >HhIHHI
_RAW_CC_S: Final = struct.Struct(_RAW_CC._struct.format)  # >HhIHHBBhQQ
_NSCC_CC_S: Final = struct.Struct(_NSCC_CC._struct.format)  # >HhIHHBBhQHIH
_NSCC_CCX_S: Final = struct.Struct(_NSCC_CCX._struct.format)  # >HhIHHBBhQHIHQ
_CONTROL_S: Final = struct.Struct(CONTROL._struct.format)  # >HHIHHI

_REQ_PACK: Final = _REQ_S.pack
_CC_REQ_PACK: Final = _CC_REQ_S.pack
_CC_REQ_UNPACK: Final = _CC_REQ_S.unpack_from
_RAW_CC_UNPACK: Final = _RAW_CC_S.unpack_from
_NSCC_CC_PACK: Final = _NSCC_CC_S.pack
_NSCC_CCX_PACK: Final = _NSCC_CCX_S.pack
_CONTROL_PACK: Final = _CONTROL_S.pack
_CONTROL_UNPACK: Final = _CONTROL_S.unpack_from


def _prologue(t: int, nh: int, flags: int) -> int:
    """The first 16 bits of a PDS header: type (5), next header or control type (4), flags (7)."""
    return ((t & 0x1F) << 11) | ((nh & 0xF) << 7) | (flags & 0x7F)


# -- the request (wire-format.md §5.1, SYN = 0) ---------------------------------------------------


def request(t: int, nh: int, flags: int, cpo: int, psn: int, spdcid: int, dpdcid: int) -> bytes:
    """``REQUEST.encode((t, nh, flags, cpo, psn, spdcid, dpdcid))``: the header of every RUD/ROD
    data packet after the first."""
    try:
        return _REQ_PACK(_prologue(t, nh, flags), cpo, psn, spdcid, dpdcid)
    except (struct.error, TypeError, ValueError) as e:
        raise REQUEST._enc_error((t, nh, flags, cpo, psn, spdcid, dpdcid), e) from None


# -- the CC request (wire-format.md §5.2, SYN = 0) ------------------------------------------------


def cc_request(
    t: int, nh: int, flags: int, cpo: int, psn: int, spdcid: int, dpdcid: int, ccc_id: int, credit_target: int
) -> bytes:
    """``CC_REQUEST.encode((t, nh, flags, cpo, psn, spdcid, dpdcid, ccc_id, credit_target))``."""
    try:
        return _CC_REQ_PACK(
            _prologue(t, nh, flags), cpo, psn, spdcid, dpdcid, ((ccc_id & 0xFF) << 24) | (credit_target & 0xFFFFFF)
        )
    except (struct.error, TypeError, ValueError) as e:
        raise CC_REQUEST._enc_error((t, nh, flags, cpo, psn, spdcid, dpdcid, ccc_id, credit_target), e) from None


def unpack_cc_request(buf: bytes | bytearray | memoryview) -> tuple[int, int, int, int, int, int, int, int, int]:
    """``CC_REQUEST.unpack(buf)``: type, next header, flags, clear PSN offset, PSN, SPDCID,
    DPDCID, CCC ID, credit target."""
    try:
        v: tuple[int, int, int, int, int, int] = _CC_REQ_UNPACK(buf, 0)
    except struct.error:
        raise CC_REQUEST._short(buf, 0) from None
    w, cpo, psn, sp, dp, cc = v
    return (w >> 11, (w >> 7) & 0xF, w & 0x7F, cpo, psn, sp, dp, cc >> 24, cc & 0xFFFFFF)


# -- ACK_CC / ACK_CCX (wire-format.md §5.4–5.5, P = 0) --------------------------------------------


def unpack_ack_cc_raw(
    buf: bytes | bytearray | memoryview,
) -> tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]:
    """``ACK_CC[(False, "raw")].unpack(buf)``: type, next header, flags, ACK PSN offset, CACK
    PSN, SPDCID, DPDCID, cc_type, cc_flags, MPR, SACK PSN offset, SACK bitmap, the raw CC state."""
    try:
        v: tuple[int, int, int, int, int, int, int, int, int, int] = _RAW_CC_UNPACK(buf, 0)
    except struct.error:
        raise _RAW_CC._short(buf, 0) from None
    w, off, cack, sp, dp, cc, mpr, soff, bm, st = v
    return (w >> 11, (w >> 7) & 0xF, w & 0x7F, off, cack, sp, dp, cc >> 4, cc & 0xF, mpr, soff, bm, st)


def ack_cc_nscc(
    t: int,
    nh: int,
    flags: int,
    off: int,
    cack: int,
    spdcid: int,
    dpdcid: int,
    cc_type: int,
    cc_flags: int,
    mpr: int,
    soff: int,
    bitmap: int,
    service_time: int,
    rc: int,
    pend: int,
    rcvd_bytes: int,
    ooo: int,
) -> bytes:
    """``ACK_CC[(False, "nscc")].encode(...)`` of the same 17 values in field order."""
    try:
        return _NSCC_CC_PACK(
            _prologue(t, nh, flags),
            off,
            cack,
            spdcid,
            dpdcid,
            ((cc_type & 0xF) << 4) | (cc_flags & 0xF),
            mpr,
            soff,
            bitmap,
            service_time,
            ((rc & 0x1) << 31) | ((pend & 0x7F) << 24) | (rcvd_bytes & 0xFFFFFF),
            ooo,
        )
    except (struct.error, TypeError, ValueError) as e:
        values = (t, nh, flags, off, cack, spdcid, dpdcid, cc_type, cc_flags, mpr, soff, bitmap)
        raise _NSCC_CC._enc_error((*values, service_time, rc, pend, rcvd_bytes, ooo), e) from None


def ack_ccx_nscc(
    t: int,
    nh: int,
    flags: int,
    off: int,
    cack: int,
    spdcid: int,
    dpdcid: int,
    cc_type: int,
    cc_flags: int,
    mpr: int,
    soff: int,
    bitmap: int,
    service_time: int,
    rc: int,
    pend: int,
    rcvd_bytes: int,
    ooo: int,
    ccx_state: int,
) -> bytes:
    """``ACK_CCX[(False, "nscc")].encode(...)`` of the same 18 values in field order."""
    try:
        return _NSCC_CCX_PACK(
            _prologue(t, nh, flags),
            off,
            cack,
            spdcid,
            dpdcid,
            ((cc_type & 0xF) << 4) | (cc_flags & 0xF),
            mpr,
            soff,
            bitmap,
            service_time,
            ((rc & 0x1) << 31) | ((pend & 0x7F) << 24) | (rcvd_bytes & 0xFFFFFF),
            ooo,
            ccx_state,
        )
    except (struct.error, TypeError, ValueError) as e:
        values = (t, nh, flags, off, cack, spdcid, dpdcid, cc_type, cc_flags, mpr, soff, bitmap)
        raise _NSCC_CCX._enc_error((*values, service_time, rc, pend, rcvd_bytes, ooo, ccx_state), e) from None


# -- the control packet (wire-format.md §5.8, SYN = 0) --------------------------------------------


def control(t: int, ctl: int, flags: int, opaque: int, psn: int, spdcid: int, dpdcid: int, payload: int) -> bytes:
    """``CONTROL.encode((t, ctl, flags, opaque, psn, spdcid, dpdcid, payload))``."""
    try:
        return _CONTROL_PACK(_prologue(t, ctl, flags), opaque, psn, spdcid, dpdcid, payload)
    except (struct.error, TypeError, ValueError) as e:
        raise CONTROL._enc_error((t, ctl, flags, opaque, psn, spdcid, dpdcid, payload), e) from None


def unpack_control(buf: bytes | bytearray | memoryview) -> tuple[int, int, int, int, int, int, int, int]:
    """``CONTROL.unpack(buf)``: type, control type, flags, probe opaque, PSN, SPDCID, DPDCID,
    payload."""
    try:
        v: tuple[int, int, int, int, int, int] = _CONTROL_UNPACK(buf, 0)
    except struct.error:
        raise CONTROL._short(buf, 0) from None
    w, opq, psn, sp, dp, pl = v
    return (w >> 11, (w >> 7) & 0xF, w & 0x7F, opq, psn, sp, dp, pl)
