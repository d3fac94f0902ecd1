"""The installed package layout: one top-level name, every sub-package declared."""

from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys
import tomllib

import pytest

pytestmark = pytest.mark.processes  # ruff, no network (tests/conftest.py)

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAPPED = {"uet": "uet", "fabric": "uet.fabric", "tools": "uet.tools", "interop": "uet.interop"}


def _declared() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(data["tool"]["setuptools"]["packages"])


def test_every_package_folder_is_declared() -> None:
    """find() cannot follow package-dir mappings, so pyproject lists packages by hand: keep it whole."""
    found = set()
    for top, name in MAPPED.items():
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((name, *rel)) if rel else name)
    assert found == _declared()


def test_packages_import_under_uet() -> None:
    for name in sorted(_declared()):
        importlib.import_module(name)


def test_console_scripts_resolve() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for script, target in data["project"]["scripts"].items():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func)), script


def test_ruff_clean() -> None:
    """The lint configuration in pyproject.toml holds for the whole tree."""
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--quiet", str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
