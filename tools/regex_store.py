"""The regular expressions a tool compiles, kept between runs like a module's bytecode (**decision**,
issue 28).

:mod:`re` compiles a pattern in Python (its parser and compiler, :mod:`re._compiler`) before the C
engine (``_sre.compile``) makes the pattern object from the result; the standard modules a tool
imports compile theirs as they load (``gettext``'s plural-form tokens, ``json``'s six, ``argparse``'s
as it builds and uses a parser), and so do the package's: about 6 M instructions of a one-flow
``uet-sim`` run, for a dozen patterns that are the same in every run.

In a tool's own process (:func:`uet.tools.is_tool_process`), :func:`install` gives
:mod:`re._compiler` a ``compile`` that looks each pattern up first (by its text, type and flags, in
a store beside this package's bytecode, :class:`uet.dataclass_cache.CodeCache`): a pattern seen
before is made by ``_sre.compile`` from the arguments :mod:`re` gave it then, with no parse; a new
one is compiled by :mod:`re` as before, and the arguments its ``_sre.compile`` call received are
kept. The pattern objects are the same (pattern, flags, groups, group names and compiled code).
What is not kept: a pattern compiled with ``re.DEBUG`` (which prints as it compiles), a pattern
given as a parsed tree (``re.Scanner``). As with bytecode, a warning :mod:`re` gives while
compiling a pattern (a ``FutureWarning`` about a possible set operation) is given when the pattern
is compiled, not again when it is read from the store. Any other program importing ``uet.tools``
(a test suite) compiles as usual.

The store is written at exit when a pattern was new, unless bytecode writing is off, and holds at
most :data:`MAX_PATTERNS` (beyond that, the ones this process used); one that cannot be read is
ignored.
"""

from __future__ import annotations

import _sre  # type: ignore[import-not-found]  # the C engine re is written over (no stubs)
import os
import sys
from _thread import get_ident
from importlib.util import cache_from_source
from re import _compiler  # type: ignore[attr-defined]  # re's compiler (no stubs)
from typing import Any

from uet.dataclass_cache import CodeCache

__all__ = ["MAX_PATTERNS", "install", "store_path"]

#: patterns kept at most
MAX_PATTERNS = 256

#: re's own debugging flag: such a pattern prints its parse as it is compiled
_DEBUG = 128

_store: CodeCache | None = None
#: the arguments ``_sre.compile`` received, by thread, while :func:`_compile` compiles a new pattern
_seen: dict[int, tuple[Any, ...]] = {}
_sre_compile = _sre.compile
_re_compile = _compiler.compile


def store_path() -> str | None:
    """Where the store is kept (beside this package's bytecode), None without a bytecode cache."""
    if sys.implementation.cache_tag is None:
        return None
    here = os.path.dirname(cache_from_source(__file__))
    opt = f".opt-{sys.flags.optimize}" if sys.flags.optimize else ""
    return os.path.join(here, f"regex-patterns.{sys.implementation.cache_tag}{opt}.marshal")


def _seen_compile(pattern: Any, flags: int, code: list[int], groups: int, groupindex: Any, indexgroup: Any) -> Any:
    """``_sre.compile``, its arguments noted for the thread's :func:`_compile`."""
    # the code's opcodes are named ints (re._constants), which marshal does not write: kept as ints
    _seen[get_ident()] = (int(flags), list(map(int, code)), int(groups), dict(groupindex), tuple(indexgroup))
    return _sre_compile(pattern, flags, code, groups, groupindex, indexgroup)


def _compile(p: Any, flags: int = 0) -> Any:
    """``re._compiler.compile``, a pattern's text looked up in the store first (module docstring)."""
    store = _store
    kind = type(p)
    if store is None or (kind is not str and kind is not bytes) or flags & _DEBUG:
        return _re_compile(p, flags)
    key = f"{flags}\0{'b' if kind is bytes else 's'}\0{p if kind is str else p.decode('latin-1')}"
    made: list[Any] = []

    def make() -> tuple[Any, ...]:
        me = get_ident()
        _seen.pop(me, None)
        made.append(_re_compile(p, flags))
        return _seen.pop(me)

    args = store.value(key, make)
    return made[0] if made else _sre_compile(p, *args)


def install() -> CodeCache:
    """Give :mod:`re` the store's ``compile`` (module docstring), once; return the store."""
    global _store
    if _store is None:
        _store = CodeCache(store_path(), write=not sys.dont_write_bytecode, max_entries=MAX_PATTERNS)
        _sre.compile = _seen_compile
        _compiler.compile = _compile
    return _store
