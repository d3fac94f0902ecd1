"""The SES operation state table (uet.ses.opstate): every listed move is allowed, every other one
raises, and the initiator moves its operations only through it."""

from __future__ import annotations

import itertools

import pytest

from uet.ses import initiator
from uet.ses.opstate import OP_TRANSITIONS, OpState, OpStateError, op_transition

LEGAL = [(old, new) for old, moves in OP_TRANSITIONS.items() for new in moves]


def test_the_table_lists_the_moves_of_the_initiator() -> None:
    assert set(LEGAL) == {
        (OpState.ACTIVE, OpState.BACKOFF),
        (OpState.ACTIVE, OpState.WAIT_RTR),
        (OpState.ACTIVE, OpState.DONE),
        (OpState.BACKOFF, OpState.ACTIVE),
        (OpState.WAIT_RTR, OpState.ACTIVE),
        (OpState.WAIT_RTR, OpState.DONE),
    }
    assert set(OP_TRANSITIONS) == set(OpState)  # every state has its row (DONE's is empty)


@pytest.mark.parametrize(("old", "new"), LEGAL, ids=lambda s: s.name)
def test_every_legal_move_is_allowed(old: OpState, new: OpState) -> None:
    assert op_transition(old, new) is new


@pytest.mark.parametrize(
    ("old", "new"),
    [p for p in itertools.product(OpState, OpState) if p not in LEGAL],
    ids=lambda s: s.name,
)
def test_every_other_move_raises(old: OpState, new: OpState) -> None:
    with pytest.raises(OpStateError, match=f"{old.name} -> {new.name}"):
        op_transition(old, new)


def test_a_finished_operation_cannot_be_revived() -> None:
    op = initiator._Op(1, "deferrable", 0, initiator.SesAddress("10.0.0.2"), 0)
    op.state = op_transition(op.state, OpState.DONE)
    with pytest.raises(OpStateError):
        op_transition(op.state, OpState.ACTIVE)
