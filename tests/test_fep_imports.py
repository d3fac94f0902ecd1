"""The sans-I/O rule (architecture.md "Principles" 1), enforced: nothing under the protocol cores
imports asyncio, socket, selectors or time, or calls a clock — time is always a parameter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORES = ("uet/fep", "uet/pds", "uet/ses", "uet/tss", "uet/cc", "uet/roce", "fabric/model")
BANNED_MODULES = {"asyncio", "socket", "selectors", "time"}
BANNED_CALLS = {"monotonic_ns", "monotonic", "perf_counter", "perf_counter_ns", "time_ns", "process_time"}


def _files() -> list[Path]:
    out: list[Path] = []
    for d in CORES:
        out += sorted((ROOT / d).rglob("*.py"))
    return out


def violations(source: str) -> list[str]:
    """What in ``source`` breaks the rule (one line each)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [
                f"line {node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in BANNED_MODULES
            ]
        elif isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".")[0]
            if node.level == 0 and mod in BANNED_MODULES:
                bad.append(f"line {node.lineno}: from {node.module} import ...")
            bad += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in BANNED_CALLS]
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name in BANNED_CALLS:
                bad.append(f"line {node.lineno}: calls {name}()")
        elif isinstance(node, ast.Call | ast.Attribute) and getattr(node, "attr", None) in BANNED_CALLS:
            bad.append(f"line {node.lineno}: uses {node.attr}")
    return bad


def test_the_cores_exist() -> None:
    files = _files()
    assert any("uet/fep/core.py" in str(f) for f in files)
    assert len(files) > 40


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_io_or_clock_in_protocol_cores(path: Path) -> None:
    assert violations(path.read_text()) == []


def test_the_checker_catches_each_form() -> None:
    src = "import asyncio\nimport time as t\nfrom socket import socket\nfrom time import monotonic_ns\n"
    src += "import selectors.x\nx = t.perf_counter()\ny = monotonic_ns()\n"
    lines = {int(v.split(":")[0].split()[1]) for v in violations(src)}
    assert lines == {1, 2, 3, 4, 5, 6, 7}
    assert violations("import random\nfrom uet.pds import core\nnow = 5\n") == []


#: modules that once failed when imported first (an import cycle through a package __init__)
FIRST_IMPORTS = (
    "uet.fabric.topology",
    "uet.fabric.model",
    "uet.fabric.model.fabric",
    "uet.fabric.model.failover",
    "uet.fep.operations",
    "uet.pds.rudi",
    "uet.roce.qp",
    "uet.tss.channel",
    "uet.sim",
    "uet.scenario",
)


def test_each_module_imports_first_in_a_fresh_interpreter() -> None:
    """``from uet.fabric.topology import Topology`` as a program's first import failed with a
    circular import (topology → the model package → fabric.py → topology)."""
    import subprocess
    import sys

    script = (
        "import importlib, sys\n"
        "bad = []\n"
        f"for name in {FIRST_IMPORTS!r}:\n"
        "    for m in [m for m in sys.modules if m == 'uet' or m.startswith('uet.')]:\n"
        "        del sys.modules[m]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as e:\n"
        "        bad.append(f'{name}: {e}')\n"
        "print('\\n'.join(bad))\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout + r.stderr
