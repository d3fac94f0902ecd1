"""``python -m uet.tools.conformance_soak``: the conformance suite run after run against ONE ``uet-peer``.

A vendor's stack under test is a long-lived process: it is started once and ``uet-conformance``
is run against it again and again (CI, a bisect, a flaky case hunted down). This command does
exactly that with the project's own endpoint: it starts one ``uet-peer`` (with its agent, so the
initiator-side cases run too) on a loopback address, runs the whole suite ``--runs`` times against
it back to back (each run a ``uet-conformance`` run of its own: its own socket, session and seed,
nothing shared but the peer), prints one line per run (its exit status, its seed, the cases that did not pass)
and then the peer's own counters of PDCs it had to close in error or on its idle timer.

Exit status 0 when every run exited 0 (every MUST case passed), 1 otherwise, 2 for usage errors.
It is CPU-heavy (about 10 s per full run): run it by hand, ``nice``'d; the tests run two short
runs against one peer.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from uet.tools.cli import ArgumentParser, RunFailed, UsageError, int_arg, run_main

from uet.conformance.mutants import loopback_pair
from uet.conformance.soak import SoakError, soak

__all__ = ["main"]

#: the peer every run is pointed at: this project's ``uet-peer``
PEER = (sys.executable, "-m", "uet.tools.peer")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="uet-conformance-soak", description=__doc__.splitlines()[0].split(": ")[1])
    p.add_argument("--runs", type=int_arg(1, 10_000), default=50, help="full runs against the one peer (default 50)")
    p.add_argument("--timeout", type=float, default=5.0, help="each run's --timeout (default 5 s: a busy machine)")
    p.add_argument("--address", default=None, help="the peer's loopback address (default: a random 127.x.y.z)")
    p.add_argument("--port", type=int_arg(1, 65535), default=None, help="its UET port (default: a random one)")
    p.add_argument("--keys", metavar="FILE", help="a TSS key file for the peer and every run")
    p.add_argument("-k", dest="select", action="append", default=[], metavar="EXPR",
                   help="pass -k EXPR to every run (default: the whole suite)")  # fmt: skip
    p.add_argument("--fail-fast", action="store_true", help="stop after the first run that exits non-zero")
    p.add_argument("--peer-arg", action="append", default=[], metavar="ARG",
                   help="an extra uet-peer argument (repeatable), e.g. --peer-arg=--eventlog=events.jsonl")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the lines")
    return p


def _addresses(address: str | None, port: int | None) -> tuple[str, str, int]:
    rng = random.SystemRandom()
    if address is None:
        address, local, any_port = loopback_pair(rng)
        return address, local, port if port is not None else any_port
    parts = address.split(".")
    if len(parts) != 4 or parts[0] != "127" or not all(x.isdigit() and 0 <= int(x) < 255 for x in parts[1:]):
        raise UsageError(f"--address {address}: give an IPv4 loopback address 127.a.b.c (c below 254)")
    local = ".".join([*parts[:3], str(int(parts[3]) + 1)])
    return address, local, port if port is not None else rng.randrange(20000, 40000)


def _line(rec: dict[str, Any]) -> str:
    if "error" in rec:
        return f"run {rec['run']:3}: exit {rec['rc']}  {rec['error'][0]}"
    s = rec["summary"]
    bad = ", ".join(f"{k} {v}" for k, v in rec["not_passed"].items()) or "-"
    return (f"run {rec['run']:3}: exit {rec['rc']}  {s['passed']} passed, {s['skipped']} skipped  "
            f"{rec['seconds']:5.1f} s  seed {rec['seed']}  not passed: {bad}")  # fmt: skip


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.keys and not Path(args.keys).is_file():
        raise UsageError(f"--keys {args.keys}: no such file")
    progress = None if args.json else (lambda rec: print(_line(rec), flush=True))
    from uet.tools import conformance

    address, local, port = _addresses(args.address, args.port)
    try:
        res = soak(args.runs, run_suite=conformance.main, peer=PEER, address=address, local=local, port=port,
                   timeout=args.timeout, keys=args.keys, select_=args.select, fail_fast=args.fail_fast,
                   progress=progress, peer_args=args.peer_arg)  # fmt: skip
    except SoakError as e:
        raise RunFailed(str(e)) from None
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        c = res["peer"]["counters"]
        print(f"\n{res['clean']} of {len(res['runs'])} runs exited 0 against one uet-peer "
              f"({res['peer']['address']} port {res['peer']['port']}); its PDCs closed by CLOSE "
              f"{c['pdc_close_target']}, in error {c['pdc_close_target_error']}, "
              f"by its idle timer {c['target_idle_close']}")  # fmt: skip
        for line in res["peer"]["stderr"]:
            print(f"uet-peer: {line}")
    return 0 if res["clean"] == len(res["runs"]) == args.runs else 1


def main(argv: Sequence[str] | None = None) -> int:
    """0 when every run exited 0, 1 otherwise, 2 for usage errors."""
    return run_main("uet-conformance-soak", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
