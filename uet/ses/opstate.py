"""The life of one initiator operation of SES (:mod:`uet.ses.initiator`): a named state and ONE
explicit transition table, in the pattern of the PDC tables (:mod:`uet.pds.states`); an illegal
move raises :class:`OpStateError` (a bug, never ignored).

Where the notes are silent (spec/behaviour.md §6.4, §6.7 only give the events), the states are the
initiator's own bookkeeping: an operation's messages are in flight (ACTIVE), it waits out a retry
back-off after a retryable return code (BACKOFF), a deferrable send whose first message was
deferred waits for the target's RTR (WAIT_RTR), or it completed or failed (DONE).
"""

from __future__ import annotations

from uet.enums import Enum
from uet.errors import UetError
from uet.states import check_move

__all__ = ["OP_TRANSITIONS", "OpState", "OpStateError", "op_transition"]


class OpStateError(UetError):
    """An illegal operation state transition was attempted (a bug, never ignored)."""


class OpState(Enum):
    """States of an initiator operation (module docstring)."""

    ACTIVE = "active"
    BACKOFF = "backoff"
    WAIT_RTR = "wait_rtr"
    DONE = "done"


_O = OpState

#: Allowed moves, with the event that causes each.
OP_TRANSITIONS: dict[OpState, dict[OpState, str]] = {
    _O.ACTIVE: {
        _O.BACKOFF: "a retryable return code (§6.4): resend after a random back-off",
        _O.WAIT_RTR: "the deferrable send's message was deferred and no RTR has come yet (§6.7)",
        _O.DONE: "the operation completed, or failed for good",
    },
    _O.BACKOFF: {_O.ACTIVE: "the back-off timer fired: a new message"},
    _O.WAIT_RTR: {
        _O.ACTIVE: "the RTR arrived: the message again, with the target's token",
        _O.DONE: "no RTR within the deferral idle limit: Dropped",
    },
    _O.DONE: {},
}


def op_transition(old: OpState, new: OpState) -> OpState:
    """``new`` when ``old → new`` is in :data:`OP_TRANSITIONS`, else raise :class:`OpStateError`."""
    return check_move(OP_TRANSITIONS, old, new, OpStateError, "SES operation")
