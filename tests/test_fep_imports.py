"""The sans-I/O rule (architecture.md "Principles" 1), enforced: nothing under the protocol cores
imports asyncio, socket, selectors or time, or calls a clock — time is always a parameter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes  # a Python child that only imports: no network (tests/conftest.py)

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
        elif isinstance(node, ast.Attribute) and node.attr in BANNED_CALLS:
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


# -- the layering ------------------------------------------------------------------------------------

#: Where each installed package's modules live in the repository (pyproject.toml's package-dir).
PACKAGE_DIRS = {"uet": "uet", "uet.fabric": "fabric", "uet.tools": "tools", "uet.interop": "interop"}

#: The layers, lowest first: a module imports only from its own layer or those below it. Each entry
#: is a layer's name and the packages or modules in it (the longest matching prefix decides).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "uet.errors",
            "uet.lazy",
            "uet.compiled",
            "uet.finder",
            "uet.dataclass_cache",
            "uet.enums",
            "uet.wire",
            "uet.pcap",
            "uet.stats",
            "uet.config_file",
            "uet.states",
        ),
    ),
    ("congestion control", ("uet.cc",)),
    ("fabric model", ("uet.fabric.model", "uet.fabric.topology")),
    ("PDS", ("uet.pds",)),
    ("SES and TSS", ("uet.ses", "uet.tss")),
    ("FEP core", ("uet.fep",)),
    ("RoCEv2 core", ("uet.roce",)),
    (
        "adapters",
        (
            "uet.clock",
            "uet.runner",
            "uet.eventlog",
            "uet.tuning",
            "uet.transport",
            "uet.keyfile",
            "uet.link",
            "uet.adapter",
            "uet.endpoint",
            "uet.roce_endpoint",
            "uet.fabric",
        ),
    ),
    ("scenario model", ("uet.scenario",)),
    ("workloads", ("uet.workloads",)),
    ("engines and suites", ("uet.sim", "uet.live", "uet.experiments", "uet.conformance")),
    ("public API", ("uet",)),
    ("tools", ("uet.tools", "uet.interop")),
)

#: Import cycles allowed to remain: none. (The fabric model's ports, switches and NICs used to
#: name each other, and the model and the topology too; a port's peer is now a
#: :class:`uet.fabric.model.port.Node` and the model reads a topology through
#: :mod:`uet.fabric.model.plan`.) A cycle fails the test.
KNOWN_CYCLES: tuple[set[str], ...] = ()


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for pkg, d in PACKAGE_DIRS.items():
        for f in sorted((ROOT / d).rglob("*.py")):
            parts = list(f.relative_to(ROOT / d).with_suffix("").parts)
            if pkg == "uet" and parts[0] in ("fabric", "tools", "interop"):
                continue  # the repository's links for mypy, if any: the folders above are the source
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([pkg, *parts])] = f
    return out


def _imports(name: str, path: Path, mods: dict[str, Path], top_level: bool) -> set[str]:
    """The project modules ``name`` imports: every import statement, or (``top_level``) those
    run when the module is imported or type-checked — not the ones inside functions — plus the
    parent packages those imports run."""
    tree = ast.parse(path.read_text())
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    nodes: list[ast.stmt] = []
    if top_level:
        todo = list(tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, ast.If | ast.Try):
                for block in ("body", "orelse", "finalbody"):
                    todo += getattr(node, block, [])
                todo += [s for h in getattr(node, "handlers", []) for s in h.body]
            else:
                nodes.append(node)
    else:
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if not t:
                continue
            found.add(t)
            if top_level:  # importing a.b.c runs a/__init__.py and a/b/__init__.py first
                found |= {p for p in (".".join(t.split(".")[:i]) for i in range(1, t.count(".") + 1)) if p in mods}
    return {m for m in found if m != name and not name.startswith(m + ".")}


def _layer(name: str) -> int:
    best, best_len = -1, -1
    for i, (_, members) in enumerate(LAYERS):
        for p in members:
            if (name == p or name.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def test_every_module_has_a_layer() -> None:
    assert [m for m in _modules() if _layer(m) < 0] == []


def test_no_import_reaches_up_a_layer() -> None:
    """Every import, also one inside a function: a core never reaches an adapter, an adapter never
    a workload or a tool (architecture.md "Layout")."""
    mods = _modules()
    up = [
        f"{m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})"
        for m, path in mods.items()
        for t in sorted(_imports(m, path, mods, top_level=False))
        if _layer(t) > _layer(m)
    ]
    assert up == []


def test_no_import_cycles() -> None:
    """Imports run at import time or read by the type checker (``TYPE_CHECKING`` blocks included;
    an import inside a function defers on purpose and is left out), with the package
    ``__init__`` modules they run: no cycle beyond the known ones."""
    mods = _modules()
    graph = {m: _imports(m, path, mods, top_level=True) for m, path in mods.items()}
    assert [sorted(c) for c in _cycles(graph) if c not in KNOWN_CYCLES] == []


def test_the_checks_see_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    assert _layer("uet.tss.stage") < _layer("uet.link.secure") < _layer("uet.tools.run")
    src = tmp_path / "probe.py"
    src.write_text(
        "from uet.link.base import Link\n"
        "if TYPE_CHECKING:\n    from uet.tss.context import TssContext\n"
        "def f():\n    from uet.tools import cli\n"
    )
    mods = _modules()
    assert _imports("uet.tss.probe", src, mods, top_level=False) >= {"uet.link.base", "uet.tools.cli"}
    top = _imports("uet.tss.probe", src, mods, top_level=True)
    assert {"uet.link", "uet.link.base", "uet.tss.context"} <= top and "uet.tools.cli" not in top
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    assert _cycles({"a": {"b"}, "b": set()}) == []
