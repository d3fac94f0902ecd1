"""The TSS key-slot state table (uet.tss.domain.SLOT_TRANSITIONS): every listed move is allowed,
every other one raises, and a rotation walks a slot through its whole life by the table."""

from __future__ import annotations

import itertools

import pytest
from tss_support import slot

from uet.tss import KeyRotationError, SdMode, SecureDomain, SlotState
from uet.tss.domain import SLOT_TRANSITIONS, slot_transition

LEGAL = [(old, new) for old, moves in SLOT_TRANSITIONS.items() for new in moves]


def test_the_table_is_the_life_of_a_slot() -> None:
    assert LEGAL == [
        (SlotState.STANDBY, SlotState.ACTIVE),
        (SlotState.ACTIVE, SlotState.RETIRING),
        (SlotState.RETIRING, SlotState.RETIRED),
    ]
    assert set(SLOT_TRANSITIONS) == set(SlotState)


@pytest.mark.parametrize(("old", "new"), LEGAL, ids=lambda s: s.name)
def test_every_legal_move_is_allowed(old: SlotState, new: SlotState) -> None:
    assert slot_transition(old, new) is new


@pytest.mark.parametrize(
    ("old", "new"), [p for p in itertools.product(SlotState, SlotState) if p not in LEGAL], ids=lambda s: s.name
)
def test_every_other_move_raises(old: SlotState, new: SlotState) -> None:
    with pytest.raises(KeyRotationError, match=f"{old.name} -> {new.name}"):
        slot_transition(old, new)


def test_a_rotation_moves_the_slots_through_the_table() -> None:
    sd = SecureDomain.with_key(3, SdMode.CLUSTER, bytes(range(32)))
    assert slot(sd, 0).state is SlotState.ACTIVE  # STANDBY -> ACTIVE at set-up (tx_an 0)
    sd.install(1, bytes(32), epoch=1)
    assert slot(sd, 1).state is SlotState.STANDBY
    sd.activate(1, now_ns=1_000, grace_ns=500)
    assert (slot(sd, 0).state, slot(sd, 1).state) == (SlotState.RETIRING, SlotState.ACTIVE)
    sd.expire(1_499)
    assert slot(sd, 0).state is SlotState.RETIRING
    sd.expire(1_500)
    assert slot(sd, 0).state is SlotState.RETIRED
    with pytest.raises(KeyRotationError):  # a retired slot never becomes active again
        sd.activate(0, now_ns=2_000, grace_ns=500)
