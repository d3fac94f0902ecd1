"""The collector settings of a simulation run (uet.sim.gcpolicy): set for the run, restored after
it, also when the run fails."""

from __future__ import annotations

import gc

import pytest

from uet.sim.gcpolicy import YOUNG_THRESHOLD, collector_for_run


def test_the_run_freezes_what_exists_and_restores_the_collector() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    keep = [object() for _ in range(3)], {"a": [1]}
    with collector_for_run():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        assert gc.get_freeze_count() >= frozen + 2  # at least ``keep``'s list and dict
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert keep


def test_a_failing_run_restores_the_collector() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), collector_for_run():
        raise RuntimeError("stalled")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
