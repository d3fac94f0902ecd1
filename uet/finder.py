"""The package's own modules found without the interpreter's path search (**decision**, issue 28).

Python finds a module by asking each finder of ``sys.meta_path`` in turn: the built-in and frozen
module importers, then the path finder, whose finder for the parent package's folder checks its
listing for a package folder, then for an extension module under three suffixes, then for the
source; the module's spec is then made by ``importlib.util.spec_from_file_location``, which
looks the loader up among every kind of file. All of it is Python code run for every module:
about 290 k instructions for the import of an empty module of the package, of which this finder
saves about 75 k — some 7 M instructions of a one-flow ``uet-sim`` run, which imports about 100
of the package's modules from their sources (more without the compiled build).

:class:`Finder`, first in ``sys.meta_path`` once :mod:`uet` is imported (:func:`install`), answers
for a module of the package (a name under ``uet.``, looked for in its parent package's one folder)
whose folder holds its source (``NAME.py``) and nothing the path search would take first: no
folder ``NAME`` and no extension module ``NAME`` with one of the interpreter's suffixes; and for a
package of it whose folder ``NAME`` holds ``__init__.py`` and no extension module ``__init__``.
Its spec is then the one the path search makes (the same loader, origin, location, cached bytecode
path, and a package's folder); any other module (one kept as bytecode only, a namespace package, a
module of another package, one the folder's listing does not show) is left to the path search as
before.
The listing of each folder is read once and read again when the folder's modification time
changes, as the path search does; :func:`importlib.invalidate_caches` forgets it.

The compiled build's finder (:mod:`uet.compiled`) goes in front of this one: a compiled module is
imported from its extension module, as before.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec, SourceFileLoader
from importlib.util import cache_from_source
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

__all__ = ["Finder", "install"]

#: a name no module of the package has, to learn where a folder's modules keep their bytecode
_PROBE = "__uet_probe__"


class _Folder:
    """What :class:`Finder` knows of one folder of the package: its listing at ``mtime``, and
    the cached bytecode path of a module ``NAME`` as ``before + NAME + after``."""

    __slots__ = ("after", "before", "mtime", "names", "prefix")

    def __init__(self, path: str, mtime: int) -> None:
        self.mtime = mtime
        self.names = frozenset(os.listdir(path))
        self.prefix = sys.pycache_prefix
        cached = cache_from_source(os.path.join(path, _PROBE + ".py"))
        at = cached.rindex(_PROBE)
        self.before, self.after = cached[:at], cached[at + len(_PROBE) :]


class Finder:
    """A meta path finder for the package's modules and packages kept as source (module docstring)."""

    def __init__(self) -> None:
        #: each folder looked in: its listing, or False when the path search is left to for it
        self._folders: dict[str, _Folder | Literal[False]] = {}

    def invalidate_caches(self) -> None:
        """Forget every folder's listing (:func:`importlib.invalidate_caches`)."""
        self._folders.clear()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if path is None or not fullname.startswith("uet.") or len(path) != 1:
            return None
        where = path[0]
        folder = self._listing(where)
        if folder is None:
            return None
        name = fullname.rpartition(".")[2]
        names = folder.names
        if name in names:  # a package, if its folder holds its source and no extension module
            where = os.path.join(where, name)
            folder = self._listing(where)
            if folder is None or not _source_only(folder.names, "__init__"):
                return None
            filename = os.path.join(where, "__init__.py")
            spec = ModuleSpec(fullname, SourceFileLoader(fullname, filename), origin=filename)
            spec.submodule_search_locations = [where]
            name = "__init__"
        elif _source_only(names, name):
            filename = os.path.join(where, name + ".py")
            spec = ModuleSpec(fullname, SourceFileLoader(fullname, filename), origin=filename)
        else:
            return None
        spec.has_location = True
        spec.cached = folder.before + name + folder.after
        return spec

    def _listing(self, where: str) -> _Folder | None:
        """What is known of the folder ``where``: read again when its modification time changed;
        None where the path search is left to (:meth:`_folder`)."""
        folder = self._folders.get(where)
        if folder is False:
            return None
        try:
            mtime = os.stat(where).st_mtime_ns
        except (OSError, TypeError, ValueError):
            return None
        if folder is None or folder.mtime != mtime or folder.prefix != sys.pycache_prefix:
            return self._folder(where, mtime)
        return folder

    def _folder(self, where: str, mtime: int) -> _Folder | None:
        """The listing of the folder ``where`` (an absolute path), kept; None for anything else (a
        relative path, a zip file, a folder that cannot be read, an interpreter that keeps no
        bytecode), which the path search is then left to, from now on."""
        try:
            if os.path.isabs(where):
                folder = self._folders[where] = _Folder(where, mtime)
                return folder
        except (OSError, ValueError, NotImplementedError):
            pass
        self._folders[where] = False
        return None


def _source_only(names: frozenset[str], name: str) -> bool:
    """The listing ``names`` holds the source of module ``name`` and no extension module of that
    name, which the path search would take first."""
    if name + ".py" not in names:
        return False
    for suffix in EXTENSION_SUFFIXES:
        if name + suffix in names:
            return False
    return True


def install() -> Finder:
    """Put a :class:`Finder` first in ``sys.meta_path`` (once: also when this module was imported
    again, as a test that clears the package from ``sys.modules`` does) and return it."""
    for f in sys.meta_path:
        if type(f).__qualname__ == "Finder" and type(f).__module__ == __name__:
            return f  # type: ignore[return-value]
    finder = Finder()
    sys.meta_path.insert(0, finder)
    return finder
