"""The compiled code of the project's dataclass methods, kept between runs like a module's bytecode.

``@dataclass`` writes the source of each method it adds (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``) and compiles it with ``exec``
every time the class is created: about a third of a short simulator run's CPU went into parsing
and compiling those texts (about 100 classes, 450 texts), though they are the same in every run.

:func:`install` (called once by ``uet/__init__``) gives :mod:`dataclasses` an ``exec`` that looks
each text up first, for the project's own modules only (a ``uet`` module's globals): a text seen
before is run from its stored code object, a new one is compiled exactly as ``exec`` compiles it
(``<string>``, no inherited ``__future__`` flags) and stored. The classes and their methods are
the same as without the cache; only the parse and compile are skipped. Other modules' dataclasses
go to the built-in ``exec`` unchanged. The project's other generated code (the header codecs of
:mod:`uet.wire.layout`) is kept in the same store (:func:`stored_code`), by file name and text.

**inspect, when first used**: :mod:`dataclasses` imports :mod:`inspect` (and with it ast, dis,
tokenize and linecache: about 22 M instructions, 3 % of a one-flow ``uet-sim`` run) to use it once,
for the ``__doc__`` of a dataclass that has no docstring (those a simulator run makes all have one). So
unless something imported it before, ``inspect`` in ``sys.modules`` is first a stand-in that
imports the real module at the first use of one of its names, puts it in its place and takes its
names: ``import inspect`` and ``from inspect import signature`` work as before, at the cost of the
import when first used.

**Annotations read once**: for each field, :mod:`dataclasses` asks three times whether its
annotation (a string, under ``from __future__ import annotations``) names ``ClassVar``, ``InitVar``
or ``KW_ONLY`` (``dataclasses._is_type``), each time matching it against a regular expression:
about 4 k instructions a match, some 2,000 matches (8 M instructions) in a one-flow ``uet-sim``
run, for about 150 distinct texts. :func:`install` gives :mod:`dataclasses` an ``_is_type`` that
keeps the match's two groups by text (:func:`_is_type`); the rest is as the standard library's:
the same names looked up in the same modules at the same time, the same answer. Where
:mod:`dataclasses` has no such function (another Python), nothing is replaced.

**TOML tables**: the tables of the TOML files the tools read (:func:`uet.config_file.read_toml`)
are kept the same way by their text, in a second store (``toml-tables``, at most
:data:`MAX_TABLES` texts): a scenario read before is not parsed again, and a run then does not
import :mod:`tomllib` (with datetime: about 12 M instructions of a one-flow ``uet-sim`` run).
Tables :mod:`marshal` cannot write (a TOML date or time) are parsed every time.

The store is one file beside the package's bytecode (``__pycache__``, or under
``sys.pycache_prefix``), named for the interpreter's cache tag (and ``-O`` level) and checked
against its bytecode magic number; it is written at exit when a text was new, unless bytecode
writing is off (``PYTHONDONTWRITEBYTECODE``, ``-B``), atomically (a temporary file renamed), and a
store that cannot be read or written is ignored. A text is its own key, so a changed class simply compiles
anew; the store keeps at most :data:`MAX_ENTRIES` texts (beyond that, the ones this process used).
"""

from __future__ import annotations

import atexit
import builtins
import marshal
import os
import sys
from collections.abc import Callable, Iterable
from importlib import import_module
from importlib.util import MAGIC_NUMBER, cache_from_source, find_spec
from types import CodeType, ModuleType
from typing import Any


class _Deferred(ModuleType):
    """A standard module imported at the first use of one of its names (module docstring)."""

    def __getattr__(self, attr: str) -> Any:  # only for names not found: before the first use
        name = self.__name__
        if sys.modules.get(name) is self:
            del sys.modules[name]
        real = import_module(name)
        self.__dict__.update(real.__dict__)  # who imported the stand-in finds every name from now on
        return getattr(real, attr)


def _defer(name: str) -> None:
    """Put a :class:`_Deferred` stand-in for the module ``name`` in ``sys.modules``, unless it is
    imported already."""
    if name in sys.modules:
        return
    spec = find_spec(name)
    if spec is None:
        return
    stand_in = _Deferred(name)
    stand_in.__spec__ = spec
    sys.modules[name] = stand_in


_defer("inspect")
import dataclasses  # noqa: E402 - after _defer: dataclasses imports inspect

__all__ = ["MAX_ENTRIES", "MAX_TABLES", "CodeCache", "install", "stored_code", "stored_table", "write_store"]

#: texts kept in the store at most
MAX_ENTRIES = 4096
#: TOML texts whose tables are kept at most (:func:`stored_table`): tests read many generated files
MAX_TABLES = 64


class CodeCache:
    """Code objects of dataclass method texts, by text, stored in ``path`` (module docstring)."""

    def __init__(self, path: str | None, *, write: bool, max_entries: int | None = None) -> None:
        self.path = path
        self.max_entries = max_entries  # None: MAX_ENTRIES
        self.write = write and path is not None
        self._stored: dict[str, bytes] = self._load()
        self._used: dict[str, bytes] = {}
        self._new = False
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, bytes]:
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                magic, entries = marshal.loads(f.read())  # noqa: S302 - the project's own store
        except (OSError, ValueError, EOFError, TypeError):
            return {}
        return entries if magic == MAGIC_NUMBER and isinstance(entries, dict) else {}

    def code(self, text: str, filename: str = "<string>") -> CodeType:
        """The code of ``text`` as ``exec(text)`` would compile it (``filename``: as
        ``compile(text, filename, "exec", dont_inherit=True)`` would)."""
        key = text if filename == "<string>" else f"{filename}\0{text}"
        data = self._stored.get(key)
        if data is not None:
            self.hits += 1
            self._used[key] = data
            return marshal.loads(data)  # type: ignore[no-any-return]  # noqa: S302
        self.misses += 1
        code = compile(text, filename, "exec", dont_inherit=True)
        self._stored[key] = self._used[key] = marshal.dumps(code)
        if self.write and not self._new:
            atexit.register(self.save)
        self._new = True
        return code

    def value(self, text: str, make: Callable[[], Any]) -> Any:
        """``make()``, a value that depends on ``text`` alone, kept by ``text`` when :mod:`marshal`
        can write it (plain dicts, lists, strings, numbers); a fresh copy at every call."""
        data = self._stored.get(text)
        if data is not None:
            self.hits += 1
            self._used[text] = data
            return marshal.loads(data)  # noqa: S302 - the project's own store
        self.misses += 1
        value = make()
        try:
            self._stored[text] = self._used[text] = marshal.dumps(value)
        except ValueError:  # not a marshal type (a TOML date or time): made every time
            return value
        if self.write and not self._new:
            atexit.register(self.save)
        self._new = True
        return value

    def save(self) -> None:
        """Write the store (when a text was new), atomically; a failure leaves it as it was."""
        if not (self.write and self._new) or self.path is None:
            return
        limit = MAX_ENTRIES if self.max_entries is None else self.max_entries
        entries = self._stored if len(self._stored) <= limit else self._used
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(marshal.dumps((MAGIC_NUMBER, entries)))
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return
        self._new = False


def _store_path(name: str = "dataclass-code") -> str | None:
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    here = cache_from_source(__file__)  # .../__pycache__/dataclass_cache.<tag>.pyc, honours pycache_prefix
    opt = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""  # as a .pyc's name says -O
    return os.path.join(os.path.dirname(here), f"{name}.{tag}{opt}.marshal")


_installed: CodeCache | None = None
_standard_is_type = getattr(dataclasses, "_is_type", None)
_identifier = getattr(dataclasses, "_MODULE_IDENTIFIER_RE", None)
#: the groups of ``dataclasses._MODULE_IDENTIFIER_RE`` in each annotation text (None: no match)
_groups: dict[str, tuple[str | None, str] | None] = {}


def _is_type(annotation: str, cls: type, a_module: Any, a_type: Any, is_type_predicate: Callable[..., bool]) -> bool:
    """``dataclasses._is_type``, the match of ``annotation`` kept (module docstring)."""
    try:
        groups = _groups[annotation]
    except KeyError:
        assert _identifier is not None
        match = _identifier.match(annotation)
        groups = _groups[annotation] = None if match is None else match.group(1, 2)
    if groups is None:
        return False
    module_name, name = groups
    ns = None
    if not module_name:
        ns = sys.modules.get(cls.__module__).__dict__  # as dataclasses does
    else:
        module = sys.modules.get(cls.__module__)
        if module and module.__dict__.get(module_name) is a_module:
            ns = sys.modules.get(a_type.__module__).__dict__
    return bool(ns and is_type_predicate(ns.get(name), a_module))


def install(cache: CodeCache | None = None) -> CodeCache:
    """Give :mod:`dataclasses` the caching ``exec`` (module docstring) and return its cache; a second
    call without ``cache`` returns the one installed."""
    global _installed
    if cache is None and _installed is not None:
        return _installed
    store = cache or CodeCache(_store_path(), write=not sys.dont_write_bytecode)
    run = builtins.exec

    def exec(source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> None:  # noqa: A001
        name = globals.get("__name__") if globals is not None else None
        if isinstance(source, str) and isinstance(name, str) and (name == "uet" or name.startswith("uet.")):
            source = store.code(source)
        run(source, globals, locals)

    dataclasses.exec = exec  # type: ignore[attr-defined]  # found before the built-in by _create_fn
    if _standard_is_type is not None and _identifier is not None:
        dataclasses._is_type = _is_type  # type: ignore[attr-defined]
    _installed = store
    return store


def stored_code(text: str, filename: str) -> CodeType:
    """``compile(text, filename, "exec", dont_inherit=True)``, kept in the store between runs like a
    dataclass method's text (module docstring): for the project's other generated code, such as
    the header codecs of :mod:`uet.wire.layout`."""
    return install().code(text, filename)


_tables: CodeCache | None = None


def stored_table(text: str, make: Callable[[], Any]) -> Any:
    """``make()``, the tables of the TOML document ``text``, kept between runs (module docstring):
    a fresh copy at every call."""
    global _tables
    if _tables is None:
        _tables = CodeCache(_store_path("toml-tables"), write=not sys.dont_write_bytecode, max_entries=MAX_TABLES)
    return _tables.value(text, make)


def write_store(modules: Iterable[str] = ()) -> str | None:
    """Import ``modules``, then write the store with every text this process has compiled or
    read, even where bytecode writing is off: what byte-compiling the package does for its
    modules (``uet-bench sim --against-htsim`` runs the simulator as installed software runs).
    Returns the store's path (None where the interpreter keeps no bytecode cache)."""
    cache = install()
    for name in modules:
        import_module(name)
    if cache.path is not None:
        cache.write = cache._new = True
        cache.save()
    return cache.path
