"""PDC state machines: one enum and ONE explicit transition table per role (h11 ``_state.py``).

Tables follow spec/behaviour.md §2.2. ``transition(table, old, new)`` returns ``new`` when the
move is listed and raises :class:`PdcStateError` otherwise; it never ignores an illegal move.

Choices where the notes are silent (inference):

- A close requested while the initiator is still in SYN_SENT is remembered and applied on the
  first ACK (SYN_SENT → ESTABLISHED → QUIESCE), so QUIESCE always knows the peer's PDCID.
- Close in error frees the PDC at once from any non-CLOSED state (→ CLOSED); the peer's half is
  reclaimed by its own idle/CLOSE_REQ timers.
- The target keeps a closed PDC in CLOSING for ``close_linger_ns`` (a short MSL, §2.12) to re-ACK
  a retransmitted CLOSE and to NACK ``CLOSING`` requests newer than the CLOSE, then frees it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

from uet.enums import Enum
from uet.pds.config import PdcStateError
from uet.states import check_move


class InitiatorState(Enum):
    """Initiator-role PDC states (spec/behaviour.md §2.2)."""

    CLOSED = "CLOSED"
    SYN_SENT = "SYN_SENT"
    ESTABLISHED = "ESTABLISHED"
    QUIESCE = "QUIESCE"
    ACK_WAIT = "ACK_WAIT"
    CLOSE_ACK_WAIT = "CLOSE_ACK_WAIT"


class TargetState(Enum):
    """Target-role PDC states (spec/behaviour.md §2.2)."""

    CLOSED = "CLOSED"
    PENDING = "PENDING"
    ESTABLISHED = "ESTABLISHED"
    CLOSE_WAIT = "CLOSE_WAIT"
    CLOSING = "CLOSING"


_I = InitiatorState
_T = TargetState

#: Initiator: allowed moves, with the event that causes each.
INITIATOR_TRANSITIONS: dict[InitiatorState, dict[InitiatorState, str]] = {
    _I.CLOSED: {_I.SYN_SENT: "SES SOM with no usable PDC: allocate PDCID and Start_PSN"},
    _I.SYN_SENT: {
        _I.ESTABLISHED: "first valid ACK (DPDCID := ack.spdcid)",
        _I.SYN_SENT: "NACK NEW_START_PSN: shift PSNs, re-stamp and resend",
        _I.CLOSED: "fatal NACK or retry exhaustion: close in error",
    },
    _I.ESTABLISHED: {
        _I.QUIESCE: "close decision (idle, CLOSE_REQ, ACK req=close, owner close)",
        _I.CLOSED: "fatal NACK or retry exhaustion: close in error",
    },
    _I.QUIESCE: {
        _I.ACK_WAIT: "active message finished (EOM sent)",
        _I.CLOSED: "close in error",
    },
    _I.ACK_WAIT: {
        _I.CLOSE_ACK_WAIT: "all PSNs acknowledged: CLOSE CP sent",
        _I.CLOSED: "close in error",
    },
    _I.CLOSE_ACK_WAIT: {
        _I.CLOSED: "ACK of the CLOSE PSN, or CLOSE retries exhausted / close in error",
    },
}

#: Target: allowed moves, with the event that causes each.
TARGET_TRANSITIONS: dict[TargetState, dict[TargetState, str]] = {
    _T.CLOSED: {
        _T.ESTABLISHED: "valid SYN request: PDC allocated, 0-RTT delivery",
        _T.PENDING: "Start_PSN refused by the policy hook: NACK NEW_START_PSN",
    },
    _T.PENDING: {
        _T.ESTABLISHED: "SYN carrying the assigned Start_PSN",
        _T.CLOSED: "New_PDC_Time elapsed: freed silently",
    },
    _T.ESTABLISHED: {
        _T.CLOSING: "CLOSE CP: ACK it, linger, free",
        _T.CLOSE_WAIT: "target wants to close: CLOSE_REQ sent",
        _T.CLOSED: "close in error",
    },
    _T.CLOSE_WAIT: {
        _T.CLOSING: "CLOSE CP: ACK it, linger, free",
        _T.CLOSED: "Close_REQ_Time expired: close in error (NACK CLOSING_IN_ERR)",
    },
    _T.CLOSING: {_T.CLOSED: "linger time over: PDC freed"},
}


_State = TypeVar("_State", bound=enum.Enum)


def transition(table: Mapping[_State, Mapping[_State, str]], old: _State, new: _State) -> _State:
    """Check ``old → new`` against ``table``; return ``new`` or raise :class:`PdcStateError`."""
    return check_move(table, old, new, PdcStateError, "PDC")
