"""Queue pair states: one enum and ONE explicit transition table (h11 ``_state.py`` style).

The IB verbs QP state machine as far as this model needs it (spec/rocev2-and-fabric.md §6):
RESET → INIT → RTR (ready to receive: the peer's QPN and start PSN known) → RTS (ready to send),
ERR on a fatal NAK, an exhausted retry count, or a request the responder must refuse (§6.3, §6.4),
and ERR → RESET to reuse the QP. ``transition`` returns the new state when the move is listed and
raises :class:`QpStateError` otherwise; an illegal move is never ignored.

The SQD/SQE states of the verbs are not modelled (no send-queue drain, and a send-queue error is
always a QP error here — **Decision**, as soft-RoCE does for RC).
"""

from __future__ import annotations

from uet.enums import Enum
from uet.errors import UetError
from uet.states import check_move


class QpStateError(UetError):
    """An operation or a transition the QP's current state does not allow."""


class QpState(Enum):
    RESET = "RESET"
    INIT = "INIT"
    RTR = "RTR"
    RTS = "RTS"
    ERR = "ERR"


_S = QpState

#: Allowed moves, with the event that causes each.
QP_TRANSITIONS: dict[QpState, dict[QpState, str]] = {
    _S.RESET: {_S.INIT: "modify to INIT: PMTU, access and local start PSN set", _S.ERR: "local error"},
    _S.INIT: {_S.RTR: "connect: remote address, QPN and start PSN known", _S.ERR: "local error"},
    _S.RTR: {_S.RTS: "connect: requester enabled", _S.ERR: "responder refused a request (NAK 0x61/0x62)"},
    _S.RTS: {
        _S.ERR: "fatal NAK received, retry or RNR retry exhausted, or a request refused (§6.3, §6.4)",
    },
    _S.ERR: {_S.RESET: "reset: the QP may be connected again"},
}


def transition(old: QpState, new: QpState) -> QpState:
    """Check ``old → new`` against :data:`QP_TRANSITIONS`; return ``new`` or raise."""
    return check_move(QP_TRANSITIONS, old, new, QpStateError, "QP")
