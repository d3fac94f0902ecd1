"""uet.tools.regex_store: a tool's patterns are made from the store in a later run, the same
pattern objects :mod:`re` compiles; only a tool's own process keeps them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.processes  # each case in a fresh interpreter: install() patches re for good

_CASE = r"""
import json, re, sys
from uet.dataclass_cache import CodeCache
from uet.tools import regex_store

regex_store.store_path = lambda: sys.argv[1]
store = regex_store.install()
store.write = True  # also where bytecode writing is off (the test suite's environment)
if sys.argv[2] == "later":  # a run after the store was written: re's own compiler is never used
    def refuse(p, flags=0):
        raise AssertionError(f"compiled again: {p!r}")
    regex_store._re_compile = refuse
cases = [
    (r"(?P<num>-?\d+)(\.\d+)?", 0, ["12.5", "x", "-3"]),
    (r"[a-z]+", re.IGNORECASE, ["ABC", "12"]),
    (rb"[\x80-\xff]+", 0, [b"\x81\x82", b"ab"]),
    ("\n  (?P<a>x)  # a comment\n | (?P<b>y)\n", re.VERBOSE, ["x", "y", "z"]),
    (r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*$", 0, [" 10 µs", "1e", "3s"]),
]
out = []
for text, flags, samples in cases:
    p = re.compile(text, flags)
    seen = [p.pattern if isinstance(p.pattern, str) else p.pattern.decode("latin-1"), p.flags, p.groups,
            dict(p.groupindex)]
    for s in samples:
        m = p.match(s)
        seen.append(None if m is None else [str(g) for g in m.groups()] + [m.span()[1]])
    out.append(seen)
re.purge()
store.save()
print(json.dumps({"out": out, "hits": store.hits, "misses": store.misses}))
"""


def _run(tmp_path: Path, when: str) -> dict[str, Any]:
    r = subprocess.run(
        [sys.executable, "-c", _CASE, str(tmp_path / "store.marshal"), when],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_a_pattern_read_from_the_store_is_the_one_re_compiles(tmp_path: Path) -> None:
    first = _run(tmp_path, "first")
    assert first["misses"] == 5 and first["hits"] == 0
    later = _run(tmp_path, "later")
    assert later["hits"] == 5 and later["misses"] == 0
    assert later["out"] == first["out"]
    r = subprocess.run(
        [sys.executable, "-c", _CASE.replace("from uet.tools import regex_store", "import types as regex_store")],
        capture_output=True,
        text=True,
    )
    assert r.returncode != 0  # the case itself needs the store (a sanity check of the harness)


def test_debug_patterns_and_parsed_trees_are_compiled_as_before(tmp_path: Path) -> None:
    code = (
        "import io, re, sys, contextlib\n"
        "from uet.tools import regex_store\n"
        f"regex_store.store_path = lambda: {str(tmp_path / 's.marshal')!r}\n"
        "store = regex_store.install()\n"
        "with contextlib.redirect_stdout(io.StringIO()) as text:\n"
        "    re.compile('ab', re.DEBUG)\n"
        "assert 'LITERAL' in text.getvalue()\n"
        "s = re.Scanner([(r'[0-9]+', lambda sc, t: int(t)), (r'\\s+', None)])\n"
        "assert s.scan('1 22 333') == ([1, 22, 333], '')\n"
        "assert store.misses == 0 and store.hits == 0\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_only_a_tool_process_keeps_its_patterns() -> None:
    """``uet-sim --version`` (a tool's process) installs the store; ``import uet.tools`` elsewhere
    leaves :mod:`re` alone."""
    probe = "import re, uet.tools.sim; print(re._compiler.compile.__module__)"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.strip() == "re._compiler"
    tool = (
        "import runpy, sys, re\n"
        "sys.argv = ['uet-sim', '--version']\n"
        "try:\n"
        "    runpy.run_module('uet.tools.sim', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(re._compiler.compile.__module__)\n"
    )
    r = subprocess.run([sys.executable, "-c", tool], capture_output=True, text=True, timeout=60, check=True)
    assert r.stdout.strip().endswith("uet.tools.regex_store")
