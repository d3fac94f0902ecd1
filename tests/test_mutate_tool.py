"""``uet-mutate`` itself (uet/tools/mutate.py, uet/experiments/mutants.py and mutation.py) on a tiny module.

The real mutation runs take minutes per module and stay out of the CI suite; these check that the
tool generates the mutants it documents, kills what the tests notice, reports what they do not,
and sets aside the listed equivalent mutants.
"""

from __future__ import annotations

import ast
import json
import math
import sys
import textwrap
from pathlib import Path

import pytest
from uet.tools import mutate

from uet.experiments import mutation
from uet.experiments.mutants import list_mutants
from uet.experiments.mutants import mutate as apply_mutant

SAMPLE = textwrap.dedent(
    '''
    """Docstring: never mutated."""
    from typing import TYPE_CHECKING, TypeVar

    if TYPE_CHECKING:
        import os

    __all__ = ["f"]
    T = TypeVar("T")


    def f(a, b, flag=True):
        """Neither is this docstring."""
        x = a + b * 2
        if a < b and not flag:
            return -x
        for i in range(3):
            if i == 1:
                continue
            break
        x <<= 1  # pragma: no mutate
        return x if a is None else ~x
    '''
)


def test_generates_each_documented_operator_and_skips_the_rest() -> None:
    got = [(m.line, m.description) for m in list_mutants(SAMPLE)]
    descriptions = {d for _, d in got}
    assert {"+ -> -", "* -> /", "< -> <=", "and -> or", "not x -> x", "-x -> x", "~x -> x"} <= descriptions
    assert {
        "2 -> 3",
        "True -> False",
        "== -> !=",
        "is -> is not",
        "continue -> break",
        "break -> continue",
    } <= descriptions
    assert {"assign statement -> pass", "return statement -> pass"} <= descriptions
    assert {m.scope for m in list_mutants(SAMPLE)} == {"f"}  # the enclosing def names each mutant
    lines = SAMPLE.splitlines()
    mutated_lines = {lines[line - 1].strip() for line, _ in got}
    assert not any(t.startswith(('"""', "import os", "__all__", "T = TypeVar", "x <<= 1")) for t in mutated_lines)
    assert "f(a, b, flag=True)" not in " ".join(mutated_lines) or ("True -> False" in descriptions)


def test_every_mutant_compiles_and_changes_exactly_one_thing() -> None:
    original = ast.dump(ast.parse(SAMPLE))
    seen = set()
    for m in list_mutants(SAMPLE):
        tree = apply_mutant(SAMPLE, m.index)
        compile(tree, "<sample>", "exec")
        dump = ast.dump(tree)
        assert dump != original, m
        seen.add(dump)
    assert len(seen) == len(list_mutants(SAMPLE))  # no two mutants are the same program


DEMO = textwrap.dedent(
    """
    def clamp(x, lo, hi):
        if x < lo:
            return lo
        return min(x, hi)
    """
)
DEMO_TEST = textwrap.dedent(
    """
    from mutdemo import clamp

    def test_clamp():
        assert clamp(-1, 0, 10) == 0
    """
)
EQUIVALENTS = textwrap.dedent(
    """
    [[equivalent]]
    module = "mutdemo"
    line = "if x < lo:"
    mutation = "< -> <="
    why = "x == lo returns lo either way"
    """
)


@pytest.mark.unit_each  # long: a unit of work of its own, started early (tests/conftest.py)
def test_runs_mutants_in_children_and_scores_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mutdemo.py").write_text(DEMO)
    (tmp_path / "test_mutdemo.py").write_text(DEMO_TEST)
    (tmp_path / "equivalent.toml").write_text(EQUIVALENTS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mutdemo", None)
    args = ["mutdemo", "--tests", "test_mutdemo.py", "--recheck", "--equivalents", "equivalent.toml", "--json"]
    assert mutate.main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    status = {(o["line"], o["description"]): o["status"] for o in doc["outcomes"]}
    assert status == {
        (3, "< -> <="): "equivalent",  # set aside
        (4, "return statement -> pass"): "killed",  # clamp(-1, 0, 10) would be -1
        (5, "return statement -> pass"): "survived",  # the test never reaches the upper bound
    }
    assert (doc["mutants"], doc["killed"], doc["survived"], doc["equivalent"], doc["score"]) == (3, 1, 1, 1, 0.5)
    assert "mutdemo" not in sys.modules  # the parent never imported the module it mutates


def test_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert mutate.main(["no_such_module_xyz", "--recheck"]) == 2
    assert "no Python source" in capsys.readouterr().err
    for name in ("no_such_package_xyz.mod", "builtins"):  # these were tracebacks under --list
        assert mutate.main([name, "--list"]) == 2
        assert capsys.readouterr().err == f"uet-mutate: error: no Python source for module {name!r}\n"
    assert mutate.main(["uet.tss.replay", "--list", "--lines", "56"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out and all(line.startswith("uet.tss.replay:56:") for line in out)


@pytest.mark.parametrize("recheck_ok", [True, False])
def test_recheck_has_a_time_out_and_needs_passing_tests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recheck_ok: bool
) -> None:
    """A survivor that loops forever under the recheck tests is stopped (it hung the run before)
    and counts as a time-out; if the recheck tests fail without any mutant, no survivor is
    counted as killed by them. The pytest child runs are replaced by their recorded answers."""
    (tmp_path / "mutdemo.py").write_text(DEMO)
    calls: list[tuple[int | None, tuple[str, ...], float | None]] = []

    def fake_run(name: str, path: str, index: int | None, tests, timeout):  # noqa: ANN001, ANN202
        calls.append((index, tuple(tests), timeout))
        if tests == ["sel.py"]:
            return 0, 1.0  # the selected test notices nothing: all three survive it
        if index is None:
            return (0 if recheck_ok else 1), 10.0
        return (-1 if index == 0 else 1 if index == 1 else 0), 1.0

    monkeypatch.setattr(mutation, "_run", fake_run)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mutdemo", None)
    out = mutation.run_module("mutdemo", tests=["sel.py"], recheck=["all"], root=tmp_path)
    status = [o.status for o in out]
    if recheck_ok:
        assert status == ["timeout", "killed", "survived"]
        assert [c for c in calls if c[1] == ("all",)] == [(None, ("all",), None)] + [
            (i, ("all",), 50.0) for i in range(3)
        ]
    else:
        assert status == ["survived"] * 3
        assert [c for c in calls if c[1] == ("all",)] == [(None, ("all",), None)]


def test_a_child_is_timed_out_by_its_cpu_time_not_by_a_starved_wall_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child that waits without using CPU (as one a loaded machine starves does) outlives its
    limit in wall-clock time and still passes; a child that loops is stopped by its CPU limit.

    The limit must cover pytest's own start-up in the child (which writes no bytecode, so it
    compiles every module it imports: over 2 CPU s on a fresh Python 3.13 venv), so it is set from
    a child measured in the same run, and the waiting child sleeps past it."""
    import resource

    from uet.experiments import mutation

    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    (tmp_path / "test_loops.py").write_text("def test_loops():\n    while True:\n        pass\n")
    monkeypatch.chdir(tmp_path)

    def children_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    before = children_cpu()
    assert mutation._run("x", "x.py", None, ["test_nothing.py"], None)[0] == 0
    limit = math.ceil(1.5 * (children_cpu() - before) + 0.5)
    (tmp_path / "test_waits.py").write_text(f"import time\n\ndef test_waits():\n    time.sleep({limit + 1})\n")
    rc, took = mutation._run("x", "x.py", None, ["test_waits.py"], limit)
    assert (rc, took > limit + 1) == (0, True)
    rc, _ = mutation._run("x", "x.py", None, ["test_loops.py"], 1.0)
    assert rc == -1
