"""``uet-conformance-mutants``: how many deliberate breakages of the cores the conformance suite catches.

For each breakage of the catalogue (:mod:`uet.conformance.breakages`) it breaks a scratch copy of
the packages, serves it by ``uet-peer`` with its agent, runs the whole ``uet-conformance`` suite
against it and prints the verdict (``must``, ``should``, ``survived``, ``peer-died``...: see
:mod:`uet.conformance.mutants`), then the rate ``caught at MUST level / (breakages - equivalent)``.

``--impl agent`` serves the broken cores by the reference agent (:mod:`uet.interop.agent`, the
public ``uet.Endpoint`` API) instead of ``uet-peer``: the same breakages seen through the stack a
vendor copies (a breakage that needs a ``uet-peer``-only option is reported ``n/a``);
``--target-side`` keeps the breakages outside the ``initiator-*`` areas.

It is CPU-heavy (one peer and one suite run per breakage, about 5-10 s each): run it by hand,
``nice``'d, not in the test suite; ``tests/test_conformance_mutants.py`` checks the catalogue
still applies and runs one breakage end to end.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence

from uet.tools.cli import ArgumentParser, UsageError, run_main

from uet.conformance.breakages import BREAKAGES, Breakage
from uet.conformance.mutants import IMPLS, BreakageError, check, run_one, summary

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="uet-conformance-mutants", description=__doc__.splitlines()[0].split(": ", 1)[1])
    p.add_argument("-k", dest="select", action="append", default=[], metavar="TEXT",
                   help="run the breakages whose id or area contains TEXT (repeatable)")  # fmt: skip
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument("--check", action="store_true", help="check every breakage still applies (exactly once) and exit")
    p.add_argument("--timeout", type=float, default=0.5, help="the suite's --timeout per expected reply (default 0.5)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--seed", type=int, default=None, help="seed for the loopback addresses and ports")
    p.add_argument(
        "--impl",
        choices=sorted(IMPLS),
        default="peer",
        help="serve the broken cores by uet-peer (default) or by the reference agent (uet.interop.agent)",
    )
    p.add_argument("--target-side", action="store_true",
                   help="only the breakages of the target side (not the initiator-* areas)")  # fmt: skip
    return p


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    chosen = [b for b in BREAKAGES if not args.select or any(t in b.id or t == b.area for t in args.select)]
    if args.target_side:
        chosen = [b for b in chosen if not b.area.startswith("initiator")]
    if not chosen:
        raise UsageError(f"-k {' '.join(args.select)} selects no breakage (see --list)")
    if args.list:
        for b in chosen:
            print(
                f"{b.id:20} {b.area:11} {b.path:24} {b.what}" + (f"  [equivalent: {b.equivalent}]" * bool(b.equivalent))
            )
        return 0
    try:
        return _run(args, chosen)
    except BreakageError as e:
        raise UsageError(str(e)) from None


def _run(args: argparse.Namespace, chosen: list[Breakage]) -> int:
    """``--check``, or the run of the ``chosen`` breakages and its report."""
    if args.check:
        for b in chosen:
            check(b)
        print(f"{len(chosen)} breakages apply")
        return 0
    rng = random.Random(args.seed)
    verdicts = []
    for b in chosen:
        v = run_one(b, timeout=args.timeout, seed=rng.randrange(1 << 30), impl=args.impl)
        verdicts.append(v)
        # with --json the lines go to stderr: a run of many minutes still shows its progress
        print(f"{v.outcome:10} {v.id:20} {v.seconds:6.1f}s  {','.join(v.failed[:4])}", flush=True,
              file=sys.stderr if args.json else sys.stdout)  # fmt: skip
    s = summary(verdicts)
    if args.json:
        print(json.dumps({"summary": s, "breakages": [v.as_dict() for v in verdicts]}, indent=1))
    else:
        rate = "n/a" if s["rate"] is None else f"{100 * s['rate']:.1f} %"
        print(f"\n{s['caught_must']} of {s['breakages'] - s['equivalent']} breakages caught at MUST level ({rate}); "
              f"{s['equivalent']} equivalent; not caught: {', '.join(s['survived']) or 'none'}")  # fmt: skip
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``uet-conformance-mutants``: 0 after a run (the rate is the report), 2 for usage errors."""
    return run_main("uet-conformance-mutants", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
