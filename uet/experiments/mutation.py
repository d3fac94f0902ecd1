"""Mutation runs: each mutant of a module (:mod:`uet.experiments.mutants`) against the tests that
cover it, classified ``killed``, ``timeout``, ``survived`` or ``equivalent`` (``uet-mutate``).

For each mutant a child process (:func:`child`) installs an import hook that loads the mutated
module in place of the file — the file on disk is never touched, so nothing needs restoring after a
crash or Ctrl-C and no stale bytecode can hide a mutant — and runs pytest on the selected tests with
``-x``. A test failure, a collection error or a time-out (five times the unmutated run, at least
30 s) kills the mutant. Survivors are then re-run against the recheck tests (the whole suite, say)
with the same kind of time-out, so a mutant counts as surviving only when no test anywhere notices it.

Equivalent mutants (changes no test can observe, e.g. ``<`` → ``<=`` where the two values can never
be equal) are listed with the reason in a TOML file (:func:`load_equivalents`) and set aside: the
score is ``killed / (mutants - equivalent)`` (:func:`score`).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import math
import os
import resource
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import CodeType, ModuleType

from uet.errors import UetError
from uet.experiments.mutants import Mutant, list_mutants, mutate

__all__ = [
    "BaselineError",
    "MutationError",
    "Outcome",
    "TargetError",
    "child",
    "load_equivalents",
    "module_path",
    "run_module",
    "score",
]

_PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts="]


class MutationError(UetError):
    """A mutation run that cannot be carried out."""


class TargetError(MutationError):
    """The module to mutate has no Python source, or no test covers it (the caller's mistake)."""


class BaselineError(MutationError):
    """The selected tests fail without any mutant: they cannot tell a mutant from a failing test."""


@dataclass(frozen=True)
class Outcome:
    """What happened to one mutant: ``killed``, ``timeout``, ``survived`` or ``equivalent``."""

    index: int
    line: int
    col: int
    description: str
    source: str
    status: str
    why: str = ""


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Meta-path finder and loader serving one module from a precompiled (mutated) code object."""

    def __init__(self, name: str, path: str, code: CodeType) -> None:
        self.name, self.path, self.code = name, path, code

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        search = [str(Path(self.path).parent)] if Path(self.path).name == "__init__.py" else None
        return importlib.util.spec_from_file_location(
            fullname, self.path, loader=self, submodule_search_locations=search
        )

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self.code, module.__dict__)  # noqa: S102 - the mutated module is our own source


def child() -> None:
    """Child-process entry: ``python -c '…child()' MODULE FILE INDEX PYTEST-ARGS…``."""
    name, path, index = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if name in sys.modules:
        sys.exit(f"uet-mutate: {name} was imported before the mutant could be installed")
    source = Path(path).read_text(encoding="utf-8")
    tree = mutate(source, index, path)
    sys.meta_path.insert(0, _MutantFinder(name, path, compile(tree, path, "exec")))
    import pytest

    sys.exit(pytest.main(sys.argv[4:]))


#: a child's wall-clock limit, in multiples of its CPU-time limit (:func:`_run`)
WALL_FACTOR = 10


def _run(name: str, path: str, index: int | None, tests: Sequence[str], timeout: float | None) -> tuple[int, float]:
    """Run pytest on ``tests`` with mutant ``index`` (None: unmutated); (exit status, seconds)."""
    if index is None:
        cmd = [sys.executable, "-m", "pytest", *_PYTEST, *tests]
    else:
        entry = "from uet.experiments.mutation import child; child()"
        cmd = [sys.executable, "-c", entry, name, path, str(index), *_PYTEST, *tests]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    t0 = time.monotonic()
    out = subprocess.DEVNULL
    with subprocess.Popen(cmd, env=env, stdout=out, stderr=out) as proc:  # noqa: S603
        if timeout is not None and hasattr(resource, "prlimit"):
            # The limit is the child's CPU time: a mutant that loops burns CPU and is stopped by
            # SIGXCPU, while a child a loaded machine starves of CPU is not judged a timeout. The
            # wall-clock limit, WALL_FACTOR times longer, is left for a mutant that blocks.
            cpu = max(1, math.ceil(timeout))
            with contextlib.suppress(OSError):
                resource.prlimit(proc.pid, resource.RLIMIT_CPU, (cpu, cpu + 5))
        try:
            rc = proc.wait(timeout=None if timeout is None else WALL_FACTOR * timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = -1
    if rc in (-signal.SIGXCPU, -signal.SIGKILL):
        rc = -1
    return rc, time.monotonic() - t0


def module_path(name: str) -> str:
    """The Python source file of module ``name`` (found without importing it); raises
    :class:`TargetError` when there is none (no such module, a built-in or compiled one)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a parent package that does not exist, an empty name
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise TargetError(f"no Python source for module {name!r}")
    return spec.origin


def _default_tests(name: str, root: Path) -> list[str]:
    """Test files that name the module (``uet.tss.replay`` or ``from uet.tss import replay``) or
    are named for it (``test_tss_replay*.py``); failing that, those that name its package."""
    parent, _, leaf = name.rpartition(".")
    files = sorted((root / "tests").glob("test_*.py"))
    texts = {f: f.read_text(encoding="utf-8") for f in files}
    stem = f"test_{parent.rpartition('.')[2]}_{leaf}"
    hits = [
        f
        for f, t in texts.items()
        if name in t or (parent and f"from {parent} import {leaf}" in t) or f.stem.startswith(stem)
    ]
    if not hits and parent:
        hits = [f for f, t in texts.items() if parent in t]
    return [str(f.relative_to(root)) for f in hits]


def load_equivalents(path: Path) -> list[dict[str, object]]:
    """The entries of the equivalents file: ``module``, ``line`` (stripped source), ``mutation``,
    ``why``, and optionally ``col`` and ``scope`` (``Class.def``) to tell apart identical
    mutations of identical lines."""
    if not path.exists():
        return []
    with path.open("rb") as f:
        return list(tomllib.load(f).get("equivalent", []))


def _equivalent(entries: Sequence[dict[str, object]], name: str, text: str, m: Mutant) -> str | None:
    for e in entries:
        if (e["module"], str(e["line"]).strip(), e["mutation"]) != (name, text, m.description):
            continue
        if e.get("col", m.col) == m.col and e.get("scope", m.scope) == m.scope:
            return str(e["why"])
    return None


def run_module(
    name: str,
    *,
    tests: Sequence[str] | None = None,
    recheck: Sequence[str] = ("tests",),
    equivalents: Sequence[dict[str, object]] = (),
    jobs: int = 1,
    lines: Sequence[int] | None = None,
    root: Path | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[Outcome]:
    """Mutate module ``name`` and classify every mutant (see the module docstring).

    ``tests`` default to the files under ``root``/tests that name the module; ``on_progress(done,
    total)`` follows the mutants; ``on_note`` hears why survivors are not rechecked. Raises
    :class:`TargetError` (no source, no tests) and :class:`BaselineError`."""
    root = root or Path.cwd()
    path = module_path(name)
    source = Path(path).read_text(encoding="utf-8")
    text_lines = source.splitlines()
    selected = list(tests) if tests else _default_tests(name, root)
    if not selected:
        raise TargetError(f"no test file names {name}; give --tests")
    rc, base = _run(name, path, None, selected, None)
    if rc != 0:
        raise BaselineError(f"the selected tests fail without any mutant (pytest exit {rc}): {' '.join(selected)}")
    timeout = max(30.0, 5 * base)
    mutants = [m for m in list_mutants(source, path) if not lines or m.line in lines]
    done = 0

    def one(m: Mutant) -> Outcome:
        nonlocal done
        text = text_lines[m.line - 1].strip()
        why = _equivalent(equivalents, name, text, m)
        if why is not None:
            status = "equivalent"
        else:
            rc, _ = _run(name, path, m.index, selected, timeout)
            status = "timeout" if rc == -1 else "survived" if rc == 0 else "killed"
        done += 1
        if on_progress:
            on_progress(done, len(mutants))
        return Outcome(m.index, m.line, m.col, m.description, text, status, why or "")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(one, mutants))
    final = []
    rtimeout: float | None = None
    for o in outcomes:
        if o.status == "survived" and recheck and list(recheck) != selected:
            if rtimeout is None:
                rtimeout = _recheck_timeout(name, path, recheck, on_note)
            if rtimeout < 0:
                final.append(o)
                continue
            rc, _ = _run(name, path, o.index, recheck, rtimeout)
            if rc == -1:
                o = replace(o, status="timeout", why="timed out in the recheck tests")
            elif rc != 0:
                o = replace(o, status="killed", why="killed by the whole suite")
        final.append(o)
    return final


def _recheck_timeout(name: str, path: str, recheck: Sequence[str], on_note: Callable[[str], None] | None) -> float:
    """Time-out of one survivor's recheck (five times the unmutated run, at least 30 s), or -1
    when the recheck tests fail without any mutant: then they cannot tell a survivor from a
    flaky test, and survivors stay survivors (a mutant that loops must not hang the run, and a
    failing test must not count as a kill)."""
    rc, base = _run(name, path, None, recheck, None)
    if rc != 0:
        if on_note:
            on_note(f"the recheck tests fail without any mutant (pytest exit {rc}): survivors of {name} not rechecked")
        return -1.0
    return max(30.0, 5 * base)


def score(outcomes: Sequence[Outcome]) -> tuple[int, int, int, float]:
    """(killed, survived, equivalent, killed / (mutants - equivalent))."""
    killed = sum(o.status in ("killed", "timeout") for o in outcomes)
    survived = sum(o.status == "survived" for o in outcomes)
    equivalent = sum(o.status == "equivalent" for o in outcomes)
    live = len(outcomes) - equivalent
    return killed, survived, equivalent, (killed / live if live else 1.0)
