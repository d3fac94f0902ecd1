"""The conformance suite run after run against ONE long-lived peer (``uet-conformance-soak``).

A vendor's stack under test is a long-lived process: it is started once and the suite is run
against it again and again. :func:`soak` does that with a peer it starts itself (with its agent,
so the initiator-side cases run too): it runs the suite ``runs`` times back to back (each run a
``uet-conformance`` run of its own: its own socket, session and seed, nothing shared but the
peer), then stops the peer and reads its counters of PDCs closed in error or on its idle timer.
The suite and the peer are given by the caller (``run_suite``, ``peer``): the command line's
``uet-conformance`` and ``uet-peer``.
"""

from __future__ import annotations

import contextlib
import io
import json
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from uet.errors import UetError

__all__ = ["PEER_COUNTERS", "RunSuite", "SoakError", "soak"]

#: peer counters worth reporting after the runs: PDCs closed in error or by the idle timer
PEER_COUNTERS = ("pdc_close_target", "pdc_close_target_error", "target_idle_close", "pdc_pending_expired")

#: one ``uet-conformance`` run in this process: its argument list → its exit status
RunSuite = Callable[[Sequence[str]], int]


class SoakError(UetError):
    """The soak could not be carried out: the peer did not start, or exited between runs."""


def soak(
    runs: int, *, run_suite: RunSuite, peer: Sequence[str], address: str, local: str, port: int,
    timeout: float = 5.0, keys: str | None = None, select_: Sequence[str] = (), fail_fast: bool = False,
    progress: Callable[[dict[str, Any]], None] | None = None, peer_args: Sequence[str] = (),
) -> dict[str, Any]:  # fmt: skip
    """Start one peer (``peer``: its command, ``uet-peer``'s arguments follow) on ``address`` /
    ``port``, run the suite (``run_suite``) ``runs`` times against it from ``local``, stop it; the
    record (``runs``: one dict per run, ``clean``: how many exited 0, ``peer``: its counters).
    ``progress`` is called with each run's record as it ends. Raises :class:`SoakError` when the
    peer does not start or exits between runs, ``KeyboardInterrupt`` when Ctrl-C reached a run."""
    key_args = ["--keys", keys] if keys else []
    with tempfile.TemporaryDirectory(prefix="uet-soak-") as tmp, open(Path(tmp) / "peer.err", "w+") as err:
        # stderr to a file: a pipe nobody reads while the runs go on could fill and stall the peer
        proc = subprocess.Popen(  # noqa: S603 - our own argv
            [*peer, address, "--port", str(port), "--agent", "127.0.0.1:0", *key_args, *peer_args],
            stdout=subprocess.PIPE, stderr=err, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        records: list[dict[str, Any]] = []
        try:
            r, _, _ = select.select([proc.stdout], [], [], 60.0)
            line = proc.stdout.readline() if r else ""
            if not line:
                raise SoakError(f"uet-peer did not start on {address} port {port}")
            ident = Path(tmp) / "peer.json"
            ident.write_text(line)
            sel = [a for e in select_ for a in ("-k", e)]
            for i in range(runs):
                if proc.poll() is not None:
                    raise SoakError(f"uet-peer exited (status {proc.returncode}) after {i} runs")
                rec = _one_run(run_suite, address, local, port, ident, timeout, [*key_args, *sel])
                if rec["rc"] == 130:  # Ctrl-C reached the run (uet-conformance reports it so): stop here
                    raise KeyboardInterrupt
                rec["run"] = i + 1
                records.append(rec)
                if progress is not None:
                    progress(rec)
                if fail_fast and rec["rc"] != 0:
                    break
        finally:
            counters = _stop(proc)
            err.seek(0)
            errors = [x for x in err.read().splitlines() if not x.startswith("uet-peer: warning:")]
    return {
        "peer": {
            "address": address,
            "port": port,
            "counters": {k: counters.get(k, 0) for k in PEER_COUNTERS},
            "stderr": errors[-20:],
        },
        "runs": records,
        "clean": sum(r["rc"] == 0 for r in records),
    }


def _one_run(
    run_suite: RunSuite, addr: str, local: str, port: int, ident: Path, timeout: float, extra: list[str]
) -> dict[str, Any]:
    """One ``uet-conformance`` run (in this process: its own socket, seed and session)."""
    t0 = time.monotonic()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = run_suite(["--target", addr, "--port", str(port), "--local", local, "--identity", str(ident),
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
