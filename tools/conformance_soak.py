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
import contextlib
import io
import json
import random
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from uet.tools.cli import ArgumentParser, RunFailed, UsageError, int_arg, run_main
from uet.tools.conformance_mutants import loopback_pair

__all__ = ["main", "soak"]

#: peer counters worth reporting after the runs: PDCs closed in error or by the idle timer
PEER_COUNTERS = ("pdc_close_target", "pdc_close_target_error", "target_idle_close", "pdc_pending_expired")


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


def soak(
    runs: int, *, timeout: float = 5.0, address: str | None = None, port: int | None = None, keys: str | None = None,
    select_: Sequence[str] = (), fail_fast: bool = False, progress: Any = None, peer_args: Sequence[str] = (),
) -> dict[str, Any]:  # fmt: skip
    """Start one ``uet-peer``, run the suite ``runs`` times against it, stop it; the record
    (``runs``: one dict per run, ``clean``: how many exited 0, ``peer``: its counters)."""
    addr, local, port = _addresses(address, port)
    key_args = ["--keys", keys] if keys else []
    with tempfile.TemporaryDirectory(prefix="uet-soak-") as tmp, open(Path(tmp) / "peer.err", "w+") as err:
        # stderr to a file: a pipe nobody reads while the runs go on could fill and stall the peer
        peer = subprocess.Popen(  # noqa: S603 - our own argv
            [sys.executable, "-m", "uet.tools.peer", addr, "--port", str(port), "--agent", "127.0.0.1:0", *key_args,
             *peer_args],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
        assert peer.stdout is not None
        records: list[dict[str, Any]] = []
        try:
            r, _, _ = select.select([peer.stdout], [], [], 60.0)
            line = peer.stdout.readline() if r else ""
            if not line:
                raise RunFailed(f"uet-peer did not start on {addr} port {port}")
            ident = Path(tmp) / "peer.json"
            ident.write_text(line)
            sel = [a for e in select_ for a in ("-k", e)]
            for i in range(runs):
                if peer.poll() is not None:
                    raise RunFailed(f"uet-peer exited (status {peer.returncode}) after {i} runs")
                rec = _one_run(addr, local, port, ident, timeout, [*key_args, *sel])
                if rec["rc"] == 130:  # Ctrl-C reached the run (uet-conformance reports it so): stop here
                    raise KeyboardInterrupt
                rec["run"] = i + 1
                records.append(rec)
                if progress is not None:
                    progress(rec)
                if fail_fast and rec["rc"] != 0:
                    break
        finally:
            counters = _stop(peer)
            err.seek(0)
            errors = [x for x in err.read().splitlines() if not x.startswith("uet-peer: warning:")]
    return {
        "peer": {
            "address": addr,
            "port": port,
            "counters": {k: counters.get(k, 0) for k in PEER_COUNTERS},
            "stderr": errors[-20:],
        },
        "runs": records,
        "clean": sum(r["rc"] == 0 for r in records),
    }


def _one_run(addr: str, local: str, port: int, ident: Path, timeout: float, extra: list[str]) -> dict[str, Any]:
    """One ``uet-conformance`` run (in this process: its own socket, seed and session)."""
    from uet.tools import conformance

    t0 = time.monotonic()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = conformance.main(["--target", addr, "--port", str(port), "--local", local, "--identity", str(ident),
                               "--json", "--timeout", str(timeout), *extra])  # fmt: skip
    rec: dict[str, Any] = {"rc": rc, "seconds": round(time.monotonic() - t0, 1)}
    try:
        report = json.loads(out.getvalue())
    except ValueError:
        rec["error"] = err.getvalue().strip().splitlines()[-1:] or ["no report"]
        return rec
    rec["seed"] = report["target"]["seed"]
    rec["summary"] = {k: report["summary"][k] for k in ("total", "passed", "failed", "skipped", "warnings")}
    rec["not_passed"] = {c["id"]: c["outcome"] + (" (SHOULD)" if c["level"] != "MUST" else "")
                         for c in report["cases"] if c["outcome"] in ("fail", "error", "timeout")}  # fmt: skip
    return rec


def _stop(peer: subprocess.Popen[str]) -> dict[str, int]:
    """SIGINT the peer; its counters (the last line it prints), or {} when it printed none."""
    if peer.poll() is None:
        peer.send_signal(signal.SIGINT)
    try:
        out, _ = peer.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        peer.kill()
        out, _ = peer.communicate()
    try:
        return dict(json.loads(out.strip().splitlines()[-1]).get("counters", {}))
    except (ValueError, IndexError, AttributeError):
        return {}


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
    res = soak(args.runs, timeout=args.timeout, address=args.address, port=args.port, keys=args.keys,
               select_=args.select, fail_fast=args.fail_fast, progress=progress, peer_args=args.peer_arg)  # fmt: skip
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
