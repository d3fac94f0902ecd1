"""``uet-mutate``: mutation testing of a sans-I/O module against the tests that cover it.

Usage::

    python -m uet.tools.mutate uet.tss.replay                      # tests chosen by import
    python -m uet.tools.mutate uet.ses.matching --tests tests/test_ses_matching.py
    python -m uet.tools.mutate uet.pds.states --list                # the mutants, not run

For each mutant (:mod:`uet.experiments.mutants`) a child process installs an import hook that loads the
mutated module in place of the file — the file on disk is never touched, so nothing needs restoring
after a crash or Ctrl-C and no stale bytecode can hide a mutant — and runs pytest on the selected
tests with ``-x``. A test failure, a collection error or a time-out (five times the unmutated run,
at least 30 s) kills the mutant. Survivors are then re-run against the whole suite (``--recheck``,
default ``tests``, with the same kind of time-out), so a mutant counts as surviving only when no
test anywhere notices it.

Equivalent mutants (changes no test can observe, e.g. ``<`` → ``<=`` where the two values can never
be equal) are listed with the reason in ``tests/mutation_equivalents.toml`` and set aside: the score
is ``killed / (mutants - equivalent)``. The run is too slow for the CI suite (minutes per module);
``tests/test_mutate_tool.py`` checks the tool itself on a tiny module.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import CodeType, ModuleType

from uet.tools.cli import ArgumentParser, RunFailed, UsageError, int_arg, run_main

from uet.experiments.mutants import Mutant, list_mutants, mutate

__all__ = ["Outcome", "child", "main", "run_module"]

_PYTEST = ["-x", "-q", "-p", "no:cacheprovider", "--no-header", "-o", "addopts="]
_EQUIVALENTS = Path("tests") / "mutation_equivalents.toml"


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


def _run(name: str, path: str, index: int | None, tests: Sequence[str], timeout: float | None) -> tuple[int, float]:
    """Run pytest on ``tests`` with mutant ``index`` (None: unmutated); (exit status, seconds)."""
    if index is None:
        cmd = [sys.executable, "-m", "pytest", *_PYTEST, *tests]
    else:
        entry = "from uet.tools.mutate import child; child()"
        cmd = [sys.executable, "-c", entry, name, path, str(index), *_PYTEST, *tests]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    t0 = time.monotonic()
    try:
        out = subprocess.DEVNULL
        rc = subprocess.run(cmd, env=env, stdout=out, stderr=out, timeout=timeout).returncode  # noqa: S603
    except subprocess.TimeoutExpired:
        rc = -1
    return rc, time.monotonic() - t0


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


def _load_equivalents(path: Path) -> list[dict[str, object]]:
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
    progress: bool = False,
) -> list[Outcome]:
    """Mutate module ``name`` and classify every mutant (see the module docstring)."""
    root = root or Path.cwd()
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise UsageError(f"no Python source for module {name!r}")
    path = spec.origin
    source = Path(path).read_text(encoding="utf-8")
    text_lines = source.splitlines()
    selected = list(tests) if tests else _default_tests(name, root)
    if not selected:
        raise UsageError(f"no test file names {name}; give --tests")
    rc, base = _run(name, path, None, selected, None)
    if rc != 0:
        raise RunFailed(f"the selected tests fail without any mutant (pytest exit {rc}): {' '.join(selected)}")
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
        if progress:
            print(f"\r{name}: {done}/{len(mutants)}", end="", file=sys.stderr, flush=True)
        return Outcome(m.index, m.line, m.col, m.description, text, status, why or "")

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(one, mutants))
    if progress:
        print(file=sys.stderr)
    final = []
    rtimeout: float | None = None
    for o in outcomes:
        if o.status == "survived" and recheck and list(recheck) != selected:
            if rtimeout is None:
                rtimeout = _recheck_timeout(name, path, recheck)
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


def _recheck_timeout(name: str, path: str, recheck: Sequence[str]) -> float:
    """Time-out of one survivor's recheck (five times the unmutated run, at least 30 s), or -1
    when the recheck tests fail without any mutant: then they cannot tell a survivor from a
    flaky test, and survivors stay survivors (a mutant that loops must not hang the run, and a
    failing test must not count as a kill)."""
    rc, base = _run(name, path, None, recheck, None)
    if rc != 0:
        print(f"uet-mutate: the recheck tests fail without any mutant (pytest exit {rc}): "
              f"survivors of {name} not rechecked", file=sys.stderr)  # fmt: skip
        return -1.0
    return max(30.0, 5 * base)


def score(outcomes: Sequence[Outcome]) -> tuple[int, int, int, float]:
    """(killed, survived, equivalent, killed / (mutants - equivalent))."""
    killed = sum(o.status in ("killed", "timeout") for o in outcomes)
    survived = sum(o.status == "survived" for o in outcomes)
    equivalent = sum(o.status == "equivalent" for o in outcomes)
    live = len(outcomes) - equivalent
    return killed, survived, equivalent, (killed / live if live else 1.0)


def _parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="uet-mutate",
        description="Mutation testing: mutate a module, run the tests that cover it, report survivors.",
    )
    p.add_argument("modules", nargs="+", metavar="MODULE", help="dotted module name, e.g. uet.tss.replay")
    p.add_argument("--tests", nargs="+", metavar="PATH", help="tests to run per mutant (default: files naming it)")
    p.add_argument(
        "--recheck", nargs="*", default=["tests"], metavar="PATH", help="re-run survivors here (default: tests)"
    )
    p.add_argument("--equivalents", type=Path, default=_EQUIVALENTS, help="TOML list of equivalent mutants")
    p.add_argument("-j", "--jobs", type=int_arg(1, 64), default=1, help="mutants run in parallel (default 1)")
    p.add_argument("--lines", type=int_arg(1), nargs="+", metavar="N", help="only mutants on these lines")
    p.add_argument("--list", action="store_true", help="list the mutants and stop")
    p.add_argument("--json", action="store_true", help="one JSON object per module")
    return p


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    sys.path.insert(0, str(Path.cwd()))
    equivalents = _load_equivalents(args.equivalents)
    worst = 1.0
    for name in args.modules:
        if args.list:
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.origin:
                raise UsageError(f"no Python source for module {name!r}")
            for m in list_mutants(Path(spec.origin).read_text(encoding="utf-8")):
                if args.lines and m.line not in args.lines:
                    continue
                print(f"{name}:{m.line}:{m.col}: {m.description}")
            continue
        outcomes = run_module(
            name,
            tests=args.tests,
            recheck=args.recheck,
            equivalents=equivalents,
            jobs=args.jobs,
            lines=args.lines,
            progress=not args.json and sys.stderr.isatty(),
        )
        killed, survived, equivalent, ratio = score(outcomes)
        worst = min(worst, ratio)
        if args.json:
            doc = {"module": name, "mutants": len(outcomes), "killed": killed, "survived": survived}
            doc |= {"equivalent": equivalent, "score": round(ratio, 4), "outcomes": [asdict(o) for o in outcomes]}
            print(json.dumps(doc))
            continue
        print(f"{name}: {len(outcomes)} mutants, {killed} killed, {survived} survived, {equivalent} equivalent")
        print(f"  score {100 * ratio:.1f} %")
        for o in outcomes:
            if o.status in ("survived", "equivalent"):
                print(f"  {o.status:10} line {o.line}: {o.description:24} {o.source}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    return run_main("uet-mutate", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
