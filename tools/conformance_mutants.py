"""``uet-conformance-mutants``: how many deliberate breakages of the cores the conformance suite catches.

For each breakage of the catalogue (:mod:`uet.conformance.breakages`) it copies the installed
``uet`` packages to a scratch directory, applies that one change there (the checkout is never
touched), starts ``uet-peer`` from the copy on a fresh loopback address with its agent (``--agent``:
the initiator-side cases drive its sending side), runs the whole
``uet-conformance`` suite (unbroken) against it and records the verdict:

* ``must``: a MUST case failed — caught;
* ``should``: only SHOULD cases failed — noticed, but the run exits 0;
* ``survived``: every case passed;
* ``peer-died``: the broken peer did not start (counts as caught: a vendor would see it too).

Breakages of the TSS area run with a fresh key file on both sides. Breakages marked
``equivalent`` (nothing on the wire can show them, the reason is given) are run but left out of
the rate, which is ``caught at MUST level / (breakages - equivalent)``.

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
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uet.tools.cli import ArgumentParser, UsageError, run_main

from uet.conformance.breakages import BREAKAGES, Breakage

__all__ = ["Verdict", "apply", "loopback_pair", "main", "package_roots", "run_one"]

#: installed package -> where its files live (``package-dir`` in pyproject: uet.tools is tools/...)
_SUBPACKAGES = ("uet.tools", "uet.fabric", "uet.interop")


def package_roots() -> dict[str, Path]:
    """Where ``uet`` and the packages mapped into it live on disk."""
    import importlib

    out = {"uet": Path(importlib.import_module("uet").__file__).parent}  # type: ignore[arg-type]
    for name in _SUBPACKAGES:
        out[name] = Path(importlib.import_module(name).__file__).parent  # type: ignore[arg-type]
    return out


def apply(b: Breakage, root: Path) -> Path:
    """Copy the packages under ``root`` (an importable tree) with ``b`` applied; returns ``root``."""
    roots = package_roots()
    shutil.copytree(roots["uet"], root / "uet", ignore=shutil.ignore_patterns("__pycache__"))
    for name in _SUBPACKAGES:
        dst = root / Path(*name.split("."))
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(roots[name], dst, ignore=shutil.ignore_patterns("__pycache__"))
    target = root / b.path
    text = target.read_text()
    if text.count(b.old) != 1:
        raise UsageError(f"breakage {b.id}: the text to change occurs {text.count(b.old)} times in {b.path}")
    target.write_text(text.replace(b.old, b.new))
    return root


@dataclass
class Verdict:
    id: str
    area: str
    what: str
    outcome: str  # must | should | survived | peer-died | n/a (the implementation cannot take its options)
    failed: list[str]
    seconds: float
    equivalent: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v or k == "failed"}


def loopback_pair(rng: random.Random) -> tuple[str, str, int]:
    """A random loopback address for the endpoint, the tester's next to it, and a random port."""
    a, b, c = rng.randrange(1, 255), rng.randrange(0, 256), rng.randrange(2, 250, 2)
    return f"127.{a}.{b}.{c}", f"127.{a}.{b}.{c + 1}", rng.randrange(20000, 40000)


#: what serves the broken cores: ``uet-peer`` with its agent, or the reference agent (uet.interop.agent)
IMPLS = {
    "peer": ["-m", "uet.tools.peer", "--agent", "127.0.0.1:0"],
    "agent": ["-m", "uet.interop.agent", "--control", "127.0.0.1:0"],
}
#: uet-peer options the reference agent does not take: a breakage that needs one is not run there
_PEER_ONLY = ("--secure-start",)


def run_one(
    b: Breakage, *, timeout: float = 0.5, max_time: float = 90.0, seed: int | None = None, cases: Sequence[str] = (),
    impl: str = "peer",
) -> Verdict:  # fmt: skip
    """Break, serve, test (module docstring); ``cases``: ``-k`` selections (default: the whole suite);
    ``impl``: what serves the broken cores (:data:`IMPLS`)."""
    rng = random.Random(seed)
    addr, local, port = loopback_pair(rng)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="uet-breakage-") as tmp:
        root = apply(b, Path(tmp) / "pkg")
        keys: list[str] = []
        if b.area == "tss":
            from uet.keyfile import write_key_file
            from uet.tss.domain import SdMode, SecureDomain

            kf = Path(tmp) / "sd.toml"
            write_key_file(kf, [SecureDomain.generate(0x51, SdMode.CLUSTER)])
            keys = ["--keys", str(kf)]
        env = {**os.environ, "PYTHONPATH": str(root)}
        if impl != "peer" and any(o in b.peer for o in _PEER_ONLY):
            return Verdict(b.id, b.area, b.what, "n/a", [], 0.0, f"needs uet-peer {' '.join(b.peer)}")
        peer = subprocess.Popen(  # noqa: S603 - our own argv
            [sys.executable, *IMPLS[impl][:2], addr, "--port", str(port), *IMPLS[impl][2:], *keys, *b.peer],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp,
        )  # fmt: skip
        assert peer.stdout is not None
        try:
            r, _, _ = select.select([peer.stdout], [], [], 60.0)
            line = peer.stdout.readline() if r else ""
            if not line:
                return Verdict(b.id, b.area, b.what, "peer-died", [], time.monotonic() - t0, b.equivalent)
            ident = Path(tmp) / "peer.json"
            ident.write_text(line)
            sel = [a for c in (cases or b.suite) for a in ("-k", c)] or (["-k", "TSS"] if keys else [])
            try:
                out = subprocess.run(  # noqa: S603 - our own argv
                    [sys.executable, "-m", "uet.tools.conformance", "--target", addr, "--port", str(port), "--local",
                     local, "--identity", str(ident), "--json", "--timeout", str(timeout), "--max-time", str(max_time),
                     *keys, *sel],
                    capture_output=True, text=True, timeout=max_time + 120, cwd=tmp,
                )  # fmt: skip
            except subprocess.TimeoutExpired:  # the tester itself hung: no verdict, reported as such
                return Verdict(b.id, b.area, b.what, "tester-hung", [], time.monotonic() - t0, b.equivalent)
        finally:
            if peer.poll() is None:
                peer.send_signal(signal.SIGINT)
                try:
                    peer.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    peer.kill()
                    peer.wait()
    try:
        report = json.loads(out.stdout)
    except ValueError:
        return Verdict(b.id, b.area, b.what, "tester-error", [out.stderr.strip()[-200:]], time.monotonic() - t0)
    bad = [c for c in report["cases"] if c["outcome"] in ("fail", "error", "timeout")]
    must = [c["id"] for c in bad if c["level"] == "MUST"]
    outcome = "must" if must else "should" if bad else "survived"
    return Verdict(b.id, b.area, b.what, outcome, must or [c["id"] for c in bad], time.monotonic() - t0, b.equivalent)


def summary(verdicts: list[Verdict]) -> dict[str, Any]:
    verdicts = [v for v in verdicts if v.outcome != "n/a"]
    counted = [v for v in verdicts if not v.equivalent]
    caught = [v for v in counted if v.outcome in ("must", "peer-died")]
    return {
        "breakages": len(verdicts),
        "equivalent": len(verdicts) - len(counted),
        "caught_must": len(caught),
        "should_only": sum(v.outcome == "should" for v in counted),
        "survived": [v.id for v in counted if v.outcome in ("survived", "should", "tester-error", "tester-hung")],
        "rate": round(len(caught) / len(counted), 4) if counted else None,
    }


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
    if args.check:
        roots = package_roots()
        for b in chosen:
            top, _, rest = b.path.partition("/")
            n = (roots["uet"] / rest).read_text().count(b.old) if top == "uet" else 0
            if n != 1:
                raise UsageError(f"breakage {b.id}: the text to change occurs {n} times in {b.path}")
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
