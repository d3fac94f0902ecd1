"""PDS headers (wire-format.md §4–§7): value tables and one layout per header variant.

Variants with the same PDS type share their item lists; :func:`pds_layout` picks the variant from
the prologue (type and flags) and, for ACK_CC/ACK_CCX, from the ``cc_type`` nibble, exactly the
fields Wireshark's dissector switches on.
"""

from __future__ import annotations

from typing import Final

from uet.enums import IntEnum, IntFlag
from uet.wire.layout import F, Item, Layout, R


class PdsType(IntEnum):
    """PDS packet type (5 bits, wire-format.md §5). Type 1 is the TSS header."""

    TSS = 0x01
    RUD_REQ = 0x02
    ROD_REQ = 0x03
    RUDI_REQ = 0x04
    RUDI_RESP = 0x05
    UUD_REQ = 0x06
    ACK = 0x07
    ACK_CC = 0x08
    ACK_CCX = 0x09
    NACK = 0x0A
    CONTROL = 0x0B
    NACK_CCX = 0x0C
    RUD_CC_REQ = 0x0D
    ROD_CC_REQ = 0x0E


class NextHeader(IntEnum):
    """SES header selected by the PDS ``next_hdr`` nibble (wire-format.md §6.1)."""

    NONE = 0x0
    SMALL = 0x1
    MEDIUM = 0x2
    STANDARD = 0x3
    RESPONSE = 0x4
    RESPONSE_DATA = 0x5
    SMALL_RESPONSE_DATA = 0x6


class ControlType(IntEnum):
    """Control packet type, carried in place of ``next_hdr`` (wire-format.md §5.8)."""

    NOOP = 0
    ACK_REQ = 1
    CLEAR = 2
    REQ_CLEAR = 3
    CLOSE = 4
    REQ_CLOSE = 5
    PROBE = 6
    CREDIT = 7
    CREDIT_REQ = 8
    NEGOTIATION = 9


class ReqFlag(IntFlag):
    """Flags of RUD/ROD requests and control packets (wire-format.md §4)."""

    SYN = 0x04
    AR = 0x08
    RETX = 0x10
    ISROD = 0x20  # control packets only (provider) [Δ7]


class AckFlag(IntFlag):
    """Flags of ACK, ACK_CC and ACK_CCX (wire-format.md §4)."""

    REQ_CLEAR = 0x02
    REQ_CLOSE = 0x04
    P = 0x08
    RETX = 0x10
    M = 0x20
    EPSN = 0x40


class NackFlag(IntFlag):
    """Flags of NACK and NACK_CCX (wire-format.md §4)."""

    NT = 0x08
    RETX = 0x10
    M = 0x20


class RudiFlag(IntFlag):
    """Flags of RUDI requests and responses (provider meanings, wire-format.md §4)."""

    RETX = 0x10
    M = 0x20


class NackCode(IntEnum):
    """NACK codes (wire-format.md §7.1; names as the dissector spells them [Δ26])."""

    TRIMMED = 0x01
    TRIMMED_LASTHOP = 0x02
    TRIMMED_ACK = 0x03
    NO_PDC_AVAIL = 0x04
    NO_CCC_AVAIL = 0x05
    NO_BITMAP = 0x06
    NO_PKT_BUFFER = 0x07
    NO_GTD_DEL_AVAIL = 0x08
    NO_SES_MSG_AVAIL = 0x09
    NO_RESOURCE = 0x0A
    PSN_OOR_WINDOW = 0x0B
    ROD_OOO = 0x0D
    INV_DPDCID = 0x0E
    PDC_HDR_MISMATCH = 0x0F
    CLOSING = 0x10
    CLOSING_IN_ERR = 0x11
    PKT_NOT_RCVD = 0x12
    GTD_DEL_RESP_UNAVAIL = 0x13
    ACK_WITH_DATA = 0x14
    INVALID_SYN = 0x15
    PDC_MODE_MISMATCH = 0x16
    NEW_START_PSN = 0x17
    RCVD_SES_PROCG = 0x18
    UNEXP_EVENT = 0x19
    RCVR_INFER_LOSS = 0x1A
    EXP_NACK_NORMAL = 0xFD
    EXP_NACK_ERR = 0xFE
    EXP_NACK_FATAL = 0xFF


class NackAction(IntEnum):
    """What an initiator does on a NACK (wire-format.md §7.1, "sender action")."""

    RETRANSMIT = 0
    CLOSE = 1
    REESTABLISH = 2
    IGNORE = 3


NACK_ACTION: dict[int, NackAction] = {
    **{c: NackAction.RETRANSMIT for c in NackCode},
    NackCode.INV_DPDCID: NackAction.CLOSE,
    NackCode.PDC_HDR_MISMATCH: NackAction.CLOSE,
    NackCode.CLOSING: NackAction.CLOSE,
    NackCode.CLOSING_IN_ERR: NackAction.CLOSE,
    NackCode.GTD_DEL_RESP_UNAVAIL: NackAction.CLOSE,
    NackCode.INVALID_SYN: NackAction.CLOSE,
    NackCode.PDC_MODE_MISMATCH: NackAction.CLOSE,
    NackCode.UNEXP_EVENT: NackAction.CLOSE,
    NackCode.EXP_NACK_FATAL: NackAction.CLOSE,
    NackCode.NEW_START_PSN: NackAction.REESTABLISH,
    NackCode.RCVD_SES_PROCG: NackAction.IGNORE,
}


class CcType(IntEnum):
    """``cc_type`` nibble of ACK_CC / ACK_CCX (wire-format.md §5.4)."""

    NSCC = 0
    CREDIT = 1


# -- shared item lists ---------------------------------------------------------------------------


def _prologue(second: str = "next_hdr", enum: type[IntEnum] = NextHeader) -> list[Item]:
    return [F("type", 5, enum=PdsType), F(second, 4, enum=enum), F("flags", 7)]


_REQ_BASE: list[Item] = [F("clear_psn_offset", 16, signed=True), F("psn", 32), F("spdcid", 16)]
_DPDCID: list[Item] = [F("dpdcid", 16)]
_SYN_INFO: list[Item] = [F("use_rsv_pdc", 1), R(3), F("psn_offset", 12)]
_REQ_CC_STATE: list[Item] = [F("ccc_id", 8), F("credit_target", 24)]
_ACK_TAIL: list[Item] = [F("cack_psn", 32), F("spdcid", 16), F("dpdcid", 16)]
_ACK_PSN: list[Item] = [F("ack_psn_offset", 16, signed=True)]
_PROBE: list[Item] = [F("probe_opaque", 16)]
_EPSN: list[Item] = [F("expected_psn", 32)]
_ACK_CC_EXT: list[Item] = [
    F("cc_type", 4, enum=CcType),
    F("cc_flags", 4),
    F("mpr", 8),
    F("sack_psn_offset", 16, signed=True),
    F("sack_bitmap", 64),
]
_CC_STATE: dict[str, list[Item]] = {
    "nscc": [F("service_time", 16), F("rc", 1), F("rcv_cwnd_pend", 7), F("rcvd_bytes", 24), F("ooo_count", 16)],
    "credit": [F("credit", 24), R(24), F("ooo_count", 16)],
    "raw": [F("ack_cc_state", 64)],
}
_CCX_STATE: list[Item] = [F("ack_ccx_state", 64)]
_NACK: list[Item] = [
    F("nack_code", 8, enum=NackCode),
    F("vendor_code", 8),
    F("nack_psn", 32),
    F("spdcid", 16),
    F("dpdcid", 16),
    F("payload", 32),
]
_NACK_CCX: list[Item] = [F("nccx_type", 4), F("nack_ccx_state1", 60), F("nack_ccx_state2", 64)]
_CONTROL: list[Item] = [F("probe_opaque", 16), F("psn", 32), F("spdcid", 16)]
_CONTROL_TAIL: list[Item] = [F("payload", 32)]


def _d(t: PdsType, nh: int = 0, flags: int = 0) -> dict[str, int]:
    return {"type": int(t), "next_hdr": nh, "flags": flags}


# -- layouts -------------------------------------------------------------------------------------

REQUEST = Layout(
    "rud_rod_request",
    _prologue() + _REQ_BASE + _DPDCID,
    defaults=_d(PdsType.RUD_REQ, NextHeader.STANDARD),
    doc="RUD/ROD request, SYN = 0 (wire-format.md §5.1).",
)
REQUEST_SYN = Layout(
    "rud_rod_request_syn",
    _prologue() + _REQ_BASE + _SYN_INFO,
    defaults=_d(PdsType.RUD_REQ, NextHeader.STANDARD, ReqFlag.SYN),
    doc="RUD/ROD request, SYN = 1: pdc_info/psn_offset replace DPDCID (§5.1).",
)
CC_REQUEST = Layout(
    "rud_rod_cc_request",
    _prologue() + _REQ_BASE + _DPDCID + _REQ_CC_STATE,
    defaults=_d(PdsType.RUD_CC_REQ, NextHeader.STANDARD),
    doc="RUD/ROD CC request, SYN = 0 (§5.2).",
)
CC_REQUEST_SYN = Layout(
    "rud_rod_cc_request_syn",
    _prologue() + _REQ_BASE + _SYN_INFO + _REQ_CC_STATE,
    defaults=_d(PdsType.RUD_CC_REQ, NextHeader.STANDARD, ReqFlag.SYN),
    doc="RUD/ROD CC request, SYN = 1 (§5.2).",
)
ACK: Final = Layout("ack", _prologue() + _ACK_PSN + _ACK_TAIL, defaults=_d(PdsType.ACK), doc="ACK (§5.3).")
ACK_PROBE = Layout(
    "ack_probe",
    _prologue() + _PROBE + _ACK_TAIL,
    defaults=_d(PdsType.ACK, 0, AckFlag.P),
    doc="ACK answering a probe, P = 1: bytes 2–3 echo the probe's opaque value [Δ27].",
)
ACK_EPSN = Layout(
    "ack_epsn",
    _prologue() + _ACK_PSN + _ACK_TAIL + _EPSN,
    defaults=_d(PdsType.ACK, 0, AckFlag.EPSN),
    doc="Closing ACK carrying the Expected-PSN word, EPSN = 1 [Δ6].",
)
ACK_PROBE_EPSN = Layout(
    "ack_probe_epsn",
    _prologue() + _PROBE + _ACK_TAIL + _EPSN,
    defaults=_d(PdsType.ACK, 0, AckFlag.EPSN | AckFlag.P),
    doc="ACK with P = 1 and EPSN = 1.",
)

ACK_CC: dict[tuple[bool, str], Layout] = {}
ACK_CCX: dict[tuple[bool, str], Layout] = {}
for _probe in (False, True):
    for _kind, _state in _CC_STATE.items():
        _head = _prologue() + (_PROBE if _probe else _ACK_PSN) + _ACK_TAIL + _ACK_CC_EXT + _state
        _sfx = ("_probe" if _probe else "") + "_" + _kind
        _fl = int(AckFlag.P) if _probe else 0
        _ct = {"credit": CcType.CREDIT}.get(_kind, CcType.NSCC)
        ACK_CC[(_probe, _kind)] = Layout(
            "ack_cc" + _sfx,
            _head,
            defaults={**_d(PdsType.ACK_CC, 0, _fl), "cc_type": _ct, "mpr": 1},
            doc=f"ACK_CC with {_kind} state (§5.4).",
        )
        if _kind == "credit":
            continue  # credit is an ACK_CC cc_type only: an ACK_CCX type 1 state stays opaque
        ACK_CCX[(_probe, _kind)] = Layout(
            "ack_ccx" + _sfx,
            _head + _CCX_STATE,
            defaults={**_d(PdsType.ACK_CCX, 0, _fl), "cc_type": _ct, "mpr": 1},
            doc=f"ACK_CCX with {_kind} state (§5.5, provider split [Δ11]).",
        )

NACK: Final = Layout("nack", _prologue() + _NACK, defaults=_d(PdsType.NACK), doc="NACK (§5.6).")
NACK_CCX = Layout(
    "nack_ccx",
    _prologue() + _NACK + _NACK_CCX,
    defaults=_d(PdsType.NACK_CCX),
    doc="NACK_CCX (§5.7, provider layout [Δ13]).",
)
_CTL_D: Final = {"type": int(PdsType.CONTROL), "ctl_type": 0, "flags": 0}
CONTROL = Layout(
    "control",
    _prologue("ctl_type", ControlType) + _CONTROL + _DPDCID + _CONTROL_TAIL,
    defaults=_CTL_D,
    doc="Control packet, SYN = 0 (§5.8).",
)
CONTROL_SYN = Layout(
    "control_syn",
    _prologue("ctl_type", ControlType) + _CONTROL + _SYN_INFO + _CONTROL_TAIL,
    defaults={**_CTL_D, "flags": int(ReqFlag.SYN)},
    doc="Control packet with SYN = 1: pdc_info/psn_offset replace DPDCID (provider [Δ8]).",
)
RUDI = Layout(
    "rudi",
    _prologue() + [R(16), F("pkt_id", 32)],
    defaults=_d(PdsType.RUDI_REQ, NextHeader.STANDARD),
    doc="RUDI request or response (§5.9); the type field tells which.",
)
UUD = Layout(
    "uud", _prologue() + [R(16)], defaults=_d(PdsType.UUD_REQ, NextHeader.STANDARD), doc="UUD request (§5.10)."
)

PROLOGUE: Final = Layout("pds_prologue", _prologue(), doc="The first 16 bits of every PDS header (§4).")

ALL_LAYOUTS: list[Layout] = [
    REQUEST,
    REQUEST_SYN,
    CC_REQUEST,
    CC_REQUEST_SYN,
    ACK,
    ACK_PROBE,
    ACK_EPSN,
    ACK_PROBE_EPSN,
    *ACK_CC.values(),
    *ACK_CCX.values(),
    NACK,
    NACK_CCX,
    CONTROL,
    CONTROL_SYN,
    RUDI,
    UUD,
]

_REQ_TYPES: Final = (int(PdsType.RUD_REQ), int(PdsType.ROD_REQ))
_CC_REQ_TYPES: Final = (int(PdsType.RUD_CC_REQ), int(PdsType.ROD_CC_REQ))
# plain ints: ``flags & IntFlag member`` goes through the enum's Python-level operator
_SYN_BIT, _P_BIT, _EPSN_BIT = int(ReqFlag.SYN), int(AckFlag.P), int(AckFlag.EPSN)
_ACK, _ACK_CC, _ACK_CCX, _NSCC = int(PdsType.ACK), int(PdsType.ACK_CC), int(PdsType.ACK_CCX), int(CcType.NSCC)
_CC_KIND: Final = {_NSCC: "nscc", int(CcType.CREDIT): "credit"}
_FIXED: dict[int, Layout] = {
    PdsType.NACK: NACK,
    PdsType.NACK_CCX: NACK_CCX,
    PdsType.RUDI_REQ: RUDI,
    PdsType.RUDI_RESP: RUDI,
    PdsType.UUD_REQ: UUD,
}


def pds_layout(first: int, flags: int, cc_byte: int | None = None) -> Layout | None:
    """The layout of a PDS header whose prologue has type ``first`` and ``flags``.

    ``cc_byte`` is byte 12 of the header (the ``cc_type`` nibble) for ACK_CC/ACK_CCX; pass None to
    get the raw-state variant. Returns None for reserved or unassigned types.
    """
    if first in _REQ_TYPES:
        return REQUEST_SYN if flags & _SYN_BIT else REQUEST
    if first in _CC_REQ_TYPES:
        return CC_REQUEST_SYN if flags & _SYN_BIT else CC_REQUEST
    if first == _ACK:
        p, e = flags & _P_BIT, flags & _EPSN_BIT
        return (ACK_PROBE_EPSN if e else ACK_PROBE) if p else (ACK_EPSN if e else ACK)
    if first == _ACK_CC or first == _ACK_CCX:
        kind = "raw"
        if first == _ACK_CC:
            if cc_byte is not None:
                kind = _CC_KIND.get(cc_byte >> 4, "raw")
            return ACK_CC[(bool(flags & _P_BIT), kind)]
        # ACK_CCX: the nibble is the CCX type; the notes define NSCC's state only (§5.5, Δ11),
        # any other CCX type keeps bytes 24-39 opaque so a re-encode loses no bit
        if cc_byte is not None and cc_byte >> 4 == _NSCC:
            kind = "nscc"
        return ACK_CCX[(bool(flags & _P_BIT), kind)]
    if first == PdsType.CONTROL:
        return CONTROL_SYN if flags & _SYN_BIT else CONTROL
    return _FIXED.get(first)


# -- PSN helpers (wire-format.md §15) ------------------------------------------------------------

PSN_MOD: Final = 1 << 32


def psn_add(psn: int, delta: int) -> int:
    """``psn + delta`` modulo 2^32."""
    return (psn + delta) & 0xFFFFFFFF


def psn_diff(a: int, b: int) -> int:
    """Signed distance ``a - b`` in serial-number arithmetic (range −2^31 .. 2^31−1)."""
    d = (a - b) & 0xFFFFFFFF
    return d - PSN_MOD if d & 0x80000000 else d


def psn_after(a: int, b: int) -> bool:
    """True when PSN ``a`` is newer than ``b`` (behaviour.md §0)."""
    return psn_diff(a, b) > 0


def offset16(target: int, base: int) -> int:
    """The signed 16-bit offset with ``base + offset == target`` (mod 2^32); raises if too far."""
    d = psn_diff(target, base)
    if not -0x8000 <= d <= 0x7FFF:
        raise ValueError(f"PSN {target} is {d} from {base}: beyond a 16-bit offset")
    return d


def clear_psn(psn: int, clear_psn_offset: int) -> int:
    """Clear PSN of a request (§5.1)."""
    return psn_add(psn, clear_psn_offset)


def ack_psn(cack_psn: int, ack_psn_offset: int) -> int:
    """ACK PSN of an ACK (§5.3)."""
    return psn_add(cack_psn, ack_psn_offset)


def sack_base(cack_psn: int, sack_psn_offset: int) -> int:
    """SACK base PSN of an ACK_CC (§5.4)."""
    return psn_add(cack_psn, sack_psn_offset)


def start_psn(psn: int, psn_offset: int) -> int:
    """Start PSN of a PDC from a SYN packet (§5.1)."""
    return psn_add(psn, -psn_offset)


def sack_to_psns(base: int, bitmap: int) -> list[int]:
    """PSNs whose bit is set in a 64-bit SACK bitmap (bit 0 = ``base``)."""
    out = []
    i = 0
    while bitmap:
        if bitmap & 1:
            out.append(psn_add(base, i))
        bitmap >>= 1
        i += 1
    return out


def psns_to_sack(base: int, psns: list[int] | set[int]) -> int:
    """The 64-bit SACK bitmap for ``psns`` relative to ``base``; PSNs outside 64 are ignored."""
    bm = 0
    for p in psns:
        d = psn_diff(p, base)
        if 0 <= d < 64:
            bm |= 1 << d
    return bm
