"""The collector settings of a simulation run (uet.sim.gcpolicy): set for the run, restored after
it, also when the run fails; and those of ``uet-sim``'s start-up and exit."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from uet.sim.gcpolicy import STARTUP_THRESHOLD, YOUNG_THRESHOLD, collector_for_run, collector_for_startup


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


def test_start_up_collects_young_objects_less_often_and_restores_the_collector() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), collector_for_startup():
        assert gc.get_threshold() == (STARTUP_THRESHOLD, *before[1:])
        with collector_for_run():  # the run's own setting inside
            assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        assert gc.get_threshold() == (STARTUP_THRESHOLD, *before[1:])
        raise RuntimeError("usage error")
    assert gc.get_threshold() == before


def test_at_exit_what_is_alive_is_frozen_before_the_interpreter_collects() -> None:
    """The exit handler runs before the interpreter's own collections: a handler registered
    before it (so run after it) sees the objects frozen."""
    probe = (
        "import atexit, gc\n"
        "atexit.register(lambda: print(gc.get_freeze_count() > 1000))\n"
        "from uet.sim.gcpolicy import collector_for_startup\n"
        "with collector_for_startup():\n"
        "    pass\n"
        "with collector_for_startup():\n"
        "    pass\n"
        "print(gc.get_freeze_count())\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "True"]
