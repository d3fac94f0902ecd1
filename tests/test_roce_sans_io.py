"""uet/roce is sans-I/O: no module there imports asyncio, socket, select, selectors, threading
or time, nor reads a clock (architecture.md, Principles 1 and 4)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import uet.roce

pytestmark = pytest.mark.in_memory  # reads uet/roce's source for socket imports: no socket of its own

FORBIDDEN = {"asyncio", "socket", "select", "selectors", "threading", "time", "datetime"}


def test_roce_core_imports_no_io() -> None:
    root = Path(uet.roce.__file__).parent
    files = sorted(root.glob("*.py"))
    assert len(files) >= 7
    for f in files:
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for n in names:
                assert n.split(".")[0] not in FORBIDDEN, f"{f.name} imports {n}"
