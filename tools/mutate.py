"""``uet-mutate``: mutation testing of a sans-I/O module against the tests that cover it.

Usage::

    python -m uet.tools.mutate uet.tss.replay                      # tests chosen by import
    python -m uet.tools.mutate uet.ses.matching --tests tests/test_ses_matching.py
    python -m uet.tools.mutate uet.pds.states --list                # the mutants, not run

Each mutant (:mod:`uet.experiments.mutants`) runs in a child process against the selected tests
(:mod:`uet.experiments.mutation`: an import hook, the file on disk never touched); a test failure, a
collection error or a time-out kills it. Survivors are then re-run against the whole suite
(``--recheck``, default ``tests``), so a mutant counts as surviving only when no test anywhere
notices it.

Equivalent mutants (changes no test can observe, e.g. ``<`` → ``<=`` where the two values can never
be equal) are listed with the reason in ``tests/mutation_equivalents.toml`` and set aside: the score
is ``killed / (mutants - equivalent)``. The run is too slow for the CI suite (minutes per module);
``tests/test_mutate_tool.py`` checks the tool itself on a tiny module.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from uet.tools.cli import ArgumentParser, RunFailed, UsageError, int_arg, run_main

from uet.experiments.mutants import list_mutants
from uet.experiments.mutation import BaselineError, TargetError, load_equivalents, module_path, run_module, score

__all__ = ["main"]

_EQUIVALENTS = Path("tests") / "mutation_equivalents.toml"


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
    equivalents = load_equivalents(args.equivalents)
    worst = 1.0
    for name in args.modules:
        try:
            if args.list:
                _list(name, args.lines)
                continue
            progress = not args.json and sys.stderr.isatty()
            outcomes = run_module(
                name,
                tests=args.tests,
                recheck=args.recheck,
                equivalents=equivalents,
                jobs=args.jobs,
                lines=args.lines,
                on_progress=_progress(name) if progress else None,
                on_note=lambda note: print(f"uet-mutate: {note}", file=sys.stderr),
            )
        except TargetError as e:
            raise UsageError(str(e)) from None
        except BaselineError as e:
            raise RunFailed(str(e)) from None
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


def _list(name: str, lines: Sequence[int] | None) -> None:
    """``--list``: print the mutants of module ``name`` (on ``lines``, if given)."""
    for m in list_mutants(Path(module_path(name)).read_text(encoding="utf-8")):
        if lines and m.line not in lines:
            continue
        print(f"{name}:{m.line}:{m.col}: {m.description}")


def _progress(name: str) -> Callable[[int, int], None]:
    """The progress line on a terminal: ``name: done/total``, ended when the last mutant is done."""

    def show(done: int, total: int) -> None:
        print(f"\r{name}: {done}/{total}", end="\n" if done == total else "", file=sys.stderr, flush=True)

    return show


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point."""
    return run_main("uet-mutate", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
