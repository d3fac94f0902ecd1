"""Data-path aliases shared by the PDS modules: enum members and flag bits as plain module
constants, defined once here (an ``Enum`` class attribute lookup costs ~0.2 µs per use on 3.11,
a module global a few ns), and the 32-bit PSN mask."""

from __future__ import annotations

from typing import Final

from uet.cc.base import ResendPolicy
from uet.pds.config import Mode
from uet.pds.states import InitiatorState, TargetState
from uet.wire.pds import (
    CC_REQUEST,
    CONTROL,
    NACK,
    REQUEST,
    AckFlag,
    ControlType,
    NackAction,
    NackCode,
    NackFlag,
    PdsType,
    ReqFlag,
)

_AR: Final = int(ReqFlag.AR)
_A_CLR: Final = int(AckFlag.REQ_CLEAR)
_A_EPSN: Final = int(AckFlag.EPSN)
_A_M: Final = int(AckFlag.M)
_A_P: Final = int(AckFlag.P)
_A_RETX: Final = int(AckFlag.RETX)
_CT_ACK_REQ: Final = ControlType.ACK_REQ
_GATED: Final = ResendPolicy.GATED
_CT_CLEAR: Final = ControlType.CLEAR
_CT_CLOSE: Final = ControlType.CLOSE
_CT_CREDIT: Final = ControlType.CREDIT
_CT_CREDIT_REQ: Final = ControlType.CREDIT_REQ
_CT_NOOP: Final = ControlType.NOOP
_CT_PROBE: Final = ControlType.PROBE
_CT_REQ_CLEAR: Final = ControlType.REQ_CLEAR
_CT_REQ_CLOSE: Final = ControlType.REQ_CLOSE
#: the counters' names of the control types and the NACK codes by value (an enum member's
#: ``.name``, and a member looked up by value, run Python code at every control packet and NACK)
_CT_NAMES: Final = tuple(ControlType(i).name for i in range(len(ControlType)))  # values 0.. in order
#: the received-control counters' names, made once: a name put together per packet is a new
#: string, hashed again by the counters' dict (every RCCC grant is a control packet)
_CT_RX_KEYS: Final = tuple("ctl_rx_" + n for n in _CT_NAMES)
_NC_NAMES: Final = {int(c): c.name for c in NackCode}
_ISROD: Final = int(ReqFlag.ISROD)
_M32: Final = 0xFFFFFFFF
# PDS types (wire-format.md §5) as plain ints: the header's 5-bit type field
_P_TSS: Final = int(PdsType.TSS)
_P_RUD_REQ: Final = int(PdsType.RUD_REQ)
_P_ROD_REQ: Final = int(PdsType.ROD_REQ)
_P_RUDI_REQ: Final = int(PdsType.RUDI_REQ)
_P_RUDI_RESP: Final = int(PdsType.RUDI_RESP)
_P_UUD_REQ: Final = int(PdsType.UUD_REQ)
_P_ACK: Final = int(PdsType.ACK)
_P_ACK_CC: Final = int(PdsType.ACK_CC)
_P_ACK_CCX: Final = int(PdsType.ACK_CCX)
_P_NACK: Final = int(PdsType.NACK)
_P_CONTROL: Final = int(PdsType.CONTROL)
_P_NACK_CCX: Final = int(PdsType.NACK_CCX)
_P_RUD_CC_REQ: Final = int(PdsType.RUD_CC_REQ)
_P_ROD_CC_REQ: Final = int(PdsType.ROD_CC_REQ)
#: header lengths (the layouts' own sizes, wire-format.md §5)
_REQUEST_LEN: Final = REQUEST.size
_CC_REQUEST_LEN: Final = CC_REQUEST.size
_NACK_LEN: Final = NACK.size
_CONTROL_LEN: Final = CONTROL.size
#: a CC request's type is its plain request's type plus this (RUD 2 → 13, ROD 3 → 14)
_P_CC_REQ_DELTA: Final = _P_RUD_CC_REQ - _P_RUD_REQ
_MODE_ROD: Final = Mode.ROD
_MODE_RUD: Final = Mode.RUD
_MODE_RUDI: Final = Mode.RUDI
_MODE_UUD: Final = Mode.UUD
_NA_IGNORE: Final = NackAction.IGNORE
_NC_CLOSING: Final = NackCode.CLOSING
_NC_INV_DPDCID: Final = NackCode.INV_DPDCID
_NC_NEW_START_PSN: Final = NackCode.NEW_START_PSN
_NC_NO_PDC_AVAIL: Final = NackCode.NO_PDC_AVAIL
_NC_NO_RESOURCE: Final = NackCode.NO_RESOURCE
_NC_NO_SES_MSG_AVAIL: Final = NackCode.NO_SES_MSG_AVAIL
_NC_PDC_HDR_MISMATCH: Final = NackCode.PDC_HDR_MISMATCH
_NC_PKT_NOT_RCVD: Final = NackCode.PKT_NOT_RCVD
_NC_PSN_OOR_WINDOW: Final = NackCode.PSN_OOR_WINDOW
_NC_ROD_OOO: Final = NackCode.ROD_OOO
_NC_TRIMMED: Final = NackCode.TRIMMED
_NC_TRIMMED_LASTHOP: Final = NackCode.TRIMMED_LASTHOP
_NC_UNEXP_EVENT: Final = NackCode.UNEXP_EVENT
_N_M: Final = int(NackFlag.M)
_N_RETX: Final = int(NackFlag.RETX)
_RETX: Final = int(ReqFlag.RETX)
_S = InitiatorState
_SYN: Final = int(ReqFlag.SYN)
_S_CLOSED: Final = InitiatorState.CLOSED
_S_CLOSE_ACK_WAIT: Final = InitiatorState.CLOSE_ACK_WAIT
_S_ESTABLISHED: Final = InitiatorState.ESTABLISHED
_S_SYN_SENT: Final = InitiatorState.SYN_SENT
_T = TargetState
_T_CLOSED: Final = TargetState.CLOSED
_T_CLOSE_WAIT: Final = TargetState.CLOSE_WAIT
_T_CLOSING: Final = TargetState.CLOSING
_T_ESTABLISHED: Final = TargetState.ESTABLISHED
_T_PENDING: Final = TargetState.PENDING
