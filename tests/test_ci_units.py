"""tests/conftest.py's units of work: a test that uses the compiled build is a unit of its own, handed
out last, and waits for CI's build where CI names the file that says the build has ended."""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path
from typing import Any

import conftest
import pytest

ROOT = Path(conftest.__file__).resolve().parent.parent
COMPILED = "tests/test_fabric_compiled.py"
SAME_RUN = f"{COMPILED}::test_compiled_build_gives_the_same_run"


def test_the_compiled_comparison_is_a_unit_of_its_own_and_the_last() -> None:
    assert conftest._unit(SAME_RUN, ROOT) == SAME_RUN
    assert conftest._unit(f"{COMPILED}::test_a_stale_build_is_refused", ROOT) == COMPILED  # the rest: its module
    order = ["tests/test_wire_layout.py", SAME_RUN, "serial", "tests/test_delivery_exactly_once.py::test_soak"]
    ranked = sorted(order, key=lambda scope: conftest._rank(scope, ROOT))
    assert ranked == ["serial", "tests/test_delivery_exactly_once.py::test_soak", "tests/test_wire_layout.py", SAME_RUN]


class _Item:
    def __init__(self, marked: bool) -> None:
        self.marked = marked

    def get_closest_marker(self, name: str) -> Any:
        return object() if self.marked and name == "after_compiled_build" else None


def test_a_marked_test_waits_for_the_build_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    done = tmp_path / "done"
    monkeypatch.setenv(conftest.COMPILED_BUILD_DONE, str(done))
    conftest.pytest_runtest_setup(_Item(marked=False))  # type: ignore[arg-type]  # no wait: not marked
    assert not done.exists()
    ends = threading.Timer(0.2, done.touch)  # the build ends a little later
    ends.start()
    try:
        conftest.pytest_runtest_setup(_Item(marked=True))  # type: ignore[arg-type]
        assert done.exists()
    finally:
        ends.cancel()


def test_without_ci_nothing_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(conftest.COMPILED_BUILD_DONE, raising=False)
    conftest.pytest_runtest_setup(_Item(marked=True))  # type: ignore[arg-type]


def _traced_while_called(marks: tuple[str, ...]) -> object:
    """What trace function the test runs under when tests/conftest.py's pytest_runtest_call wraps it."""
    item = _Item(marked=False)
    item.get_closest_marker = lambda name: object() if name in marks else None  # type: ignore[method-assign]
    seen = []
    wrapper = conftest.pytest_runtest_call(item)  # type: ignore[arg-type]
    next(wrapper)
    seen.append(sys.gettrace())
    with contextlib.suppress(StopIteration):
        next(wrapper)
    return seen[0]


def test_a_repetition_on_more_seeds_runs_untraced_and_the_first_case_traced() -> None:
    def tracer(frame: Any, event: str, arg: Any) -> None:
        return None

    before = sys.gettrace()
    sys.settrace(tracer)
    try:
        assert _traced_while_called(("more_seeds",)) is None
        assert sys.gettrace() is tracer  # given back after the case
        assert _traced_while_called(()) is tracer
    finally:
        sys.settrace(before)
    # the soak marks every case but its first; CI's second Python leaves the marked ones out
    import test_delivery_exactly_once as soak_module

    marks = soak_module.test_soak_delivers_every_message_exactly_once.pytestmark  # type: ignore[attr-defined]
    (mark,) = [m for m in marks if m.name == "parametrize"]
    cases = [(c, []) if isinstance(c, int) else (c.values[0], [m.name for m in c.marks]) for c in mark.args[1]]
    assert cases == [(0, []), *((f, ["more_seeds"]) for f in range(10, 50, 10))]
    assert '-m "not serial and not processes and not more_seeds"' in (ROOT / ".ci" / "newest-python").read_text()
