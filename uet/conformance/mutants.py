"""Deliberate breakages of the cores against the conformance suite (``uet-conformance-mutants``).

:func:`apply` copies the installed ``uet`` packages to a scratch directory and applies one breakage
of the catalogue (:mod:`uet.conformance.breakages`) there (the checkout is never touched);
:func:`run_one` starts ``uet-peer`` (or the reference agent, :data:`IMPLS`) from the copy on a fresh
loopback address, runs the whole ``uet-conformance`` suite (unbroken) against it and returns the
:class:`Verdict`:

* ``must``: a MUST case failed — caught;
* ``should``: only SHOULD cases failed — noticed, but the suite exits 0;
* ``survived``: every case passed;
* ``peer-died``: the broken peer did not start (counts as caught: a vendor would see it too);
* ``tester-hung`` / ``tester-error``: the suite itself gave no report (no verdict);
* ``n/a``: the breakage needs a ``uet-peer``-only option the chosen implementation does not take.

Breakages of the TSS area run with a fresh key file on both sides. :func:`summary` gives the
detection rate, ``caught at MUST level / (breakages - equivalent)``: breakages marked
``equivalent`` (nothing on the wire can show them) are run but left out of it.
"""

from __future__ import annotations

import importlib.util
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

from uet.conformance.breakages import Breakage
from uet.errors import UetError

__all__ = [
    "IMPLS",
    "BreakageError",
    "Verdict",
    "apply",
    "check",
    "loopback_pair",
    "package_roots",
    "run_one",
    "summary",
]


class BreakageError(UetError):
    """A breakage of the catalogue no longer applies: its text to change does not occur as many times
    as the catalogue says (:attr:`Breakage.copies`, once unless a rule has a fast path's copy)."""


def _require_copies(b: Breakage, text: str) -> None:
    """Raise :class:`BreakageError` unless ``b.old`` occurs exactly ``b.copies`` times in ``text``."""
    n = text.count(b.old)
    if n != b.copies:
        raise BreakageError(f"breakage {b.id}: the text to change occurs {n} times in {b.path}, not {b.copies}")


#: installed package -> where its files live (``package-dir`` in pyproject: uet.tools is tools/...)
_SUBPACKAGES = ("uet.tools", "uet.fabric", "uet.interop")


def package_roots() -> dict[str, Path]:
    """Where ``uet`` and the packages mapped into it live on disk (found, not imported)."""
    out = {}
    for name in ("uet", *_SUBPACKAGES):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name  # installed with uet itself
        out[name] = Path(spec.origin).parent
    return out


def check(b: Breakage) -> None:
    """Raise :class:`BreakageError` unless ``b`` applies to the installed packages (as many times as
    the catalogue says)."""
    top, _, rest = b.path.partition("/")
    text = (package_roots()["uet"] / rest).read_text() if top == "uet" else ""
    _require_copies(b, text)


def apply(b: Breakage, root: Path) -> Path:
    """Copy the packages under ``root`` (an importable tree) with ``b`` applied; returns ``root``.
    Raises :class:`BreakageError` when ``b`` no longer applies."""
    roots = package_roots()
    shutil.copytree(roots["uet"], root / "uet", ignore=shutil.ignore_patterns("__pycache__"))
    for name in _SUBPACKAGES:
        dst = root / Path(*name.split("."))
        if dst.exists():
            shutil.rmtree(dst)
        shutil.copytree(roots[name], dst, ignore=shutil.ignore_patterns("__pycache__"))
    target = root / b.path
    text = target.read_text()
    _require_copies(b, text)
    target.write_text(text.replace(b.old, b.new))
    return root


@dataclass
class Verdict:
    """What the suite made of one breakage (the outcomes: module docstring)."""

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
    """Break, serve, test (module docstring; raises :class:`BreakageError`); ``cases``: ``-k``
    selections (default: the whole suite); ``impl``: what serves the broken cores (:data:`IMPLS`)."""
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
    """The detection rate and its parts (module docstring); ``n/a`` verdicts are left out."""
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
