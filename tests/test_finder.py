"""uet.finder: the package's modules kept as source are found without the path search, with the
spec the path search makes; everything else is left to the path search."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec, PathFinder
from pathlib import Path
from typing import Any

import pytest

from uet.finder import Finder, install


def _seen(spec: ModuleSpec | None) -> tuple[Any, ...] | None:
    if spec is None:
        return None
    loader: Any = spec.loader
    return (
        spec.name,
        spec.origin,
        type(loader),
        loader.name,
        loader.path,
        spec.has_location,
        spec.cached,
        spec.parent,
        spec.submodule_search_locations,
    )


@pytest.mark.parametrize(
    "name",
    [
        "uet.errors",
        "uet.pds.core",
        "uet.fabric.model.port",
        "uet.tools.cli",
        "uet.sim.scenario",
        "uet.pds",
        "uet.fabric.model",
        "uet.wire",
    ],
)
def test_a_module_or_package_of_the_package_gets_the_spec_of_the_path_search(name: str) -> None:
    parent = importlib.import_module(name.rpartition(".")[0])
    path = list(parent.__path__)
    got = Finder().find_spec(name, path)
    assert got is not None
    assert _seen(got) == _seen(PathFinder.find_spec(name, path))


def _folder(tmp_path: Path) -> list[str]:
    (tmp_path / "plain.py").write_text("X = 1\n")
    (tmp_path / "both.py").write_text("X = 1\n")
    (tmp_path / f"both{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg.py").write_text("X = 1\n")
    (tmp_path / "compiled_only.pyc").write_bytes(b"")
    (tmp_path / "namespace").mkdir()
    (tmp_path / "namespace" / "inside.py").write_text("X = 1\n")
    (tmp_path / "extpkg").mkdir()
    (tmp_path / "extpkg" / "__init__.py").write_text("")
    (tmp_path / "extpkg" / f"__init__{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    return [str(tmp_path)]


def test_only_plain_source_modules_and_packages_of_the_package_are_answered(tmp_path: Path) -> None:
    """An extension module beside the source or in a package's folder (the path search takes it
    first), a module kept as bytecode only, a namespace package, a missing module and a module of
    another package are left to the path search."""
    path = _folder(tmp_path)
    finder = Finder()
    for name in ("uet.x.plain", "uet.x.pkg"):  # a package folder wins over a module of its name
        assert _seen(finder.find_spec(name, path)) == _seen(PathFinder.find_spec(name, path)), name
    assert finder.find_spec("uet.x.pkg", path).submodule_search_locations == [str(tmp_path / "pkg")]  # type: ignore[union-attr]
    for name in ("uet.x.both", "uet.x.compiled_only", "uet.x.missing", "uet.x.namespace", "uet.x.extpkg"):
        assert finder.find_spec(name, path) is None, name
    assert finder.find_spec("other.plain", path) is None
    assert finder.find_spec("uet", None) is None
    assert finder.find_spec("uet.x.plain", [*path, *path]) is None
    assert finder.find_spec("uet.x.plain", ["relative/folder"]) is None
    assert finder.find_spec("uet.x.plain", [str(tmp_path / "plain.py")]) is None  # not a folder


def test_a_folder_is_listed_again_when_it_changes(tmp_path: Path) -> None:
    """As the path search does: a module added (or removed) after a folder was listed is seen
    (the folder's modification time changed); :func:`importlib.invalidate_caches` forgets every
    listing."""
    path = _folder(tmp_path)
    finder = Finder()
    assert finder.find_spec("uet.x.new", path) is None
    st = os.stat(tmp_path)
    (tmp_path / "new.py").write_text("X = 2\n")
    os.utime(tmp_path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert finder.find_spec("uet.x.new", path) is not None
    st = os.stat(tmp_path)
    (tmp_path / "plain.py").unlink()
    os.utime(tmp_path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert finder.find_spec("uet.x.plain", path) is None
    finder.invalidate_caches()
    assert finder._folders == {}


def test_the_finder_is_first_once_uet_is_imported_and_imports_the_modules() -> None:
    """In a fresh interpreter: after ``import uet`` the finder is first in ``sys.meta_path`` (once,
    however often it is installed), and the package's modules come through it with their usual
    ``__file__``, ``__cached__`` and ``__spec__``."""
    code = (
        "import sys, importlib.util, uet, uet.finder as f\n"
        "assert f.install() is f.install() and sum(isinstance(x, f.Finder) for x in sys.meta_path) == 1\n"
        "first = type(sys.meta_path[0]).__name__\n"
        "import uet.pds.core as m\n"
        "assert m.__file__.endswith('core.py') and m.__cached__ == importlib.util.cache_from_source(m.__file__)\n"
        "assert type(m.__spec__.loader).__name__ == 'SourceFileLoader' and m.__spec__.has_location\n"
        "print(first)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "UET_COMPILED"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Finder"


def test_install_puts_one_finder_first() -> None:
    finder = install()
    assert install() is finder and finder in sys.meta_path
