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
get their texts compiled as the built-in ``exec`` compiles them for its caller (with the caller's
``__future__`` features, not this module's: before, another package's dataclass made after
``import uet`` had its ``__init__`` annotations as strings).

**Named tuples**: :func:`collections.namedtuple` compiles each class's ``__new__`` from a text with
``eval`` (about 0.3 M instructions each, 11 classes in a one-flow ``uet-sim`` run: 3.7 M). For a
named tuple a ``uet`` module makes (directly or through :class:`typing.NamedTuple`), that code is
kept in the store the same way (the same code object as ``eval`` makes); any other ``eval`` text
is compiled as the built-in does. The project's other generated code (the header codecs of
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

**Class plans** (a **Decision**, issue 28): even with its texts stored, building a dataclass
cost about 0.6 M instructions (some 45 M of a one-flow ``uet-sim`` run, 78 classes): making a
``Field`` per annotation (a failed ``getattr`` each), three pseudo-field checks per field, writing
each method's text, and six stored codes looked up and read one by one. For a project class of
the common shape, :func:`install` gives :mod:`dataclasses` a ``_process_class`` that builds it
from a *plan*: the method codes the standard build of a class of the same shape ran, kept in the
store under a key of everything those texts depend on (the interpreter's exact version, the
``repr``/``eq``/``frozen``/``slots`` parameters, whether the class has ``__post_init__`` or its
own ``__hash__``, and per field its name, kind of default and ``init``/``repr``/``compare``/
``hash`` flags). The build then takes the standard build's steps in its order (the same
``Field`` objects, class attributes set and deleted in the same order, the same closures, the
standard library's own helpers for ``__repr__``'s wrapper, ``__slots__`` and abstract methods);
only the texts are neither written nor looked up, and each method's function is made from the
stored ``__create_fn__`` code as the text's ``def`` makes it. A shape without a plan is built the
standard way, its texts recorded as the plan (per thread; kept only when they are one text per
method the shape makes, in the standard order, each defining only ``__create_fn__``). The common
shape: Python 3.11 (whose ``dataclasses`` this follows), a class of a ``uet`` module (a
mypyc-compiled one too: mypyc hands ``dataclass`` the class as Python would see it, then puts its
native methods back), with a docstring, no dataclass base, annotations none
of which may name ``ClassVar``, ``InitVar`` or ``KW_ONLY``, no field named ``__x__``, no mutable
default, no ``kw_only``, ``order``, ``unsafe_hash``, ``weakref_slot`` or ``match_args=False``,
``init`` on; anything else, or :data:`FAST` false, goes to the standard library (which also raises
every error, with its message). Measured: a one-flow ``uet-sim`` run 703.5 -> 680.0 M
instructions pure, 447.7 -> 426.6 M compiled (with the functions made from their ``__create_fn__``
code and the store in two files, below: 673.3 M pure, 419.8 M compiled, named tuples included).
``tests/test_dataclass_cache.py`` builds every dataclass of the project the standard way, with
plans recorded and from stored plans, and compares the classes (dictionaries key by key, methods'
code, defaults, annotations and closures, fields, parameters), and does the same for classes of
every shape, in and out of the plans.

The store is two files beside the package's bytecode (``__pycache__``, or under
``sys.pycache_prefix``), named for the interpreter's cache tag (and ``-O`` level) and checked
against its bytecode magic number: ``dataclass-plans`` holds what a run started before needs (the
plans, the header codecs, the named tuples' constructors, the texts of classes built without a
plan), ``dataclass-code`` the method texts of the classes built from plans, read only when a text
is not found in the first (a class whose plan is being recorded): reading both cost 3.2 M
instructions of a one-flow run, the first alone 1.7 M (**Decision**). Each is read at its first
look-up and written at exit when an entry was new, unless bytecode writing is off
(``PYTHONDONTWRITEBYTECODE``, ``-B``), atomically (a temporary file renamed), and a file that
cannot be read or written is ignored. A text is its own key, so a changed class simply compiles
anew; each file keeps at most :data:`MAX_ENTRIES` entries (beyond that, the ones this process used).
"""

from __future__ import annotations
import __future__

import abc
import atexit
import builtins
import collections
import marshal
import os
import sys
import types
from _thread import get_ident
from collections.abc import Callable, Iterable
from importlib import import_module
from importlib.util import MAGIC_NUMBER, cache_from_source, find_spec
from types import CodeType, FrameType, ModuleType
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


class _Shelf:
    """One store file: its entries (read at the first look-up), and those this process used."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._entries: dict[Any, bytes] | None = None
        self.used: dict[Any, bytes] = {}
        self.new = False

    @property
    def entries(self) -> dict[Any, bytes]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> dict[Any, bytes]:
        if self.path is None:
            return {}
        try:
            with open(self.path, "rb") as f:
                magic, entries = marshal.loads(f.read())  # noqa: S302 - the project's own store
        except (OSError, ValueError, EOFError, TypeError):
            return {}
        return entries if magic == MAGIC_NUMBER and isinstance(entries, dict) else {}

    def get(self, key: Any) -> bytes | None:
        data = self.entries.get(key)
        if data is not None:
            self.used[key] = data
        return data

    def put(self, key: Any, data: bytes) -> None:
        self.entries[key] = self.used[key] = data
        self.new = True

    def save(self, limit: int, *, everything: bool = False) -> None:
        """Write the file (when an entry was new, or ``everything``: when it was read),
        atomically; a failure leaves it as it was."""
        if self.path is None or self._entries is None or not (self.new or everything):
            return
        entries = self._entries if len(self._entries) <= limit else self.used
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
        self.new = False


class CodeCache:
    """Code objects of dataclass method texts, by text, stored in ``path`` (module docstring);
    with ``texts``, the method texts of classes built from plans are kept in that second file,
    read only when a text is not found in the first (a run whose classes all have plans, or
    whose other classes' texts are in the first file, never reads it)."""

    def __init__(
        self, path: str | None, *, write: bool, max_entries: int | None = None, texts: str | None = None
    ) -> None:
        self.path = path
        self.max_entries = max_entries  # None: MAX_ENTRIES
        self.write = write and path is not None
        self._main = _Shelf(path)  # by text, or a class plan's key (a tuple)
        self._texts = _Shelf(texts) if texts is not None else self._main
        self._new = False
        self.hits = 0
        self.misses = 0
        self.plan_hits = 0

    def _added(self, shelf: _Shelf, key: Any, data: bytes) -> None:
        shelf.put(key, data)
        if self.write and not self._new:
            atexit.register(self.save)
        self._new = True

    def code(self, text: str, filename: str = "<string>", mode: str = "exec", *, planned: bool = False) -> CodeType:
        """The code of ``text`` as ``exec(text)`` would compile it (``filename``, ``mode``: as
        ``compile(text, filename, mode, dont_inherit=True)`` would). ``planned``: a method text
        of a class whose plan is being recorded, kept with the texts (``texts``), which a run
        reads only when a class has no plan; any other is kept in the first file."""
        if mode != "exec":
            key = f"{mode}\0{filename}\0{text}"
        else:
            key = text if filename == "<string>" else f"{filename}\0{text}"
        data = self._main.get(key)
        if data is None and self._texts is not self._main:
            data = self._texts.get(key)
            if data is not None and not planned:  # needed without a plan: in the first file from now on
                self._added(self._main, key, data)
        if data is not None:
            self.hits += 1
            return marshal.loads(data)  # type: ignore[no-any-return]  # noqa: S302
        self.misses += 1
        code = compile(text, filename, mode, dont_inherit=True)
        self._added(self._texts if planned else self._main, key, marshal.dumps(code))
        return code

    def value(self, text: str, make: Callable[[], Any]) -> Any:
        """``make()``, a value that depends on ``text`` alone, kept by ``text`` when :mod:`marshal`
        can write it (plain dicts, lists, strings, numbers); a fresh copy at every call."""
        data = self._main.get(text)
        if data is not None:
            self.hits += 1
            return marshal.loads(data)  # noqa: S302 - the project's own store
        self.misses += 1
        value = make()
        try:
            data = marshal.dumps(value)
        except ValueError:  # not a marshal type (a TOML date or time): made every time
            return value
        self._added(self._main, text, data)
        return value

    def plan(self, key: tuple[Any, ...]) -> tuple[CodeType, ...] | None:
        """The codes kept under ``key`` (:meth:`keep`), None when there are none."""
        data = self._main.get(key)
        if data is None:
            return None
        self.plan_hits += 1
        return marshal.loads(data)  # type: ignore[no-any-return]  # noqa: S302

    def keep(self, key: tuple[Any, ...], codes: tuple[CodeType, ...]) -> None:
        """Keep ``codes`` under ``key`` (a tuple of strings, numbers and such, as marshal writes)."""
        self._added(self._main, key, marshal.dumps(codes))

    def save(self, *, everything: bool = False) -> None:
        """Write the store's files (those with a new entry; ``everything``: those read), atomically;
        a failure leaves a file as it was."""
        if not (self.write and (self._new or everything)):
            return
        limit = MAX_ENTRIES if self.max_entries is None else self.max_entries
        for shelf in {id(self._main): self._main, id(self._texts): self._texts}.values():
            shelf.save(limit, everything=everything)
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


def _groups_of(annotation: str) -> tuple[str | None, str] | None:
    """The module and name groups of ``dataclasses``' identifier pattern for ``annotation`` (None
    when it does not match), matched once per text (module docstring)."""
    try:
        return _groups[annotation]
    except KeyError:
        assert _identifier is not None
        match = _identifier.match(annotation)
        groups = _groups[annotation] = None if match is None else match.group(1, 2)
        return groups


def _is_type(annotation: str, cls: type, a_module: Any, a_type: Any, is_type_predicate: Callable[..., bool]) -> bool:
    """``dataclasses._is_type``, the match of ``annotation`` kept (module docstring)."""
    groups = _groups_of(annotation)
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


# -- class plans: a dataclass built again from what the standard build decided -----------------

#: replay stored plans (module docstring, "Class plans"); False: every class the standard way
#: (the tests build every project dataclass both ways)
FAST = sys.version_info[:2] == (3, 11)
_standard_process_class = getattr(dataclasses, "_process_class", None)
#: the key of every plan begins with this: the interpreter's exact version, whose dataclasses
#: wrote the texts
_PLAN = ("dataclass-plan-2", sys.hexversion)
#: the parameters of __create_fn__ a plan can give values to (the others: not stored)
_KNOWN_LOCALS = frozenset(
    ("MISSING", "_HAS_DEFAULT_FACTORY", "__dataclass_builtins_object__", "_return_type", "cls", "FrozenInstanceError")
)
#: names a class finds on its metaclass ``type`` (or on ``object``): a field of one of these names
#: gets its default through ``getattr`` as dataclasses does
_TYPE_NAMES = frozenset(dir(type))
#: the compiler flags of every ``__future__`` feature (as the built-in exec and eval inherit them)
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag
#: the outer code of each method text the standard build of the class being planned ran
_recordings: dict[int, list[CodeType]] = {}  # by thread


def _pseudo_field(annotation: Any, module: dict[str, Any], typing: Any) -> bool:
    """True when ``annotation`` may make a ClassVar, InitVar or KW_ONLY pseudo-field (those
    classes are built the standard way): the same look-ups dataclasses makes, erring on yes."""
    if not isinstance(annotation, str):
        return bool(
            dataclasses._is_classvar(annotation, typing)  # type: ignore[attr-defined]
            or dataclasses._is_initvar(annotation, dataclasses)  # type: ignore[attr-defined]
            or annotation is dataclasses.KW_ONLY
        )
    groups = _groups_of(annotation)
    if groups is None:
        return False
    module_name, name = groups
    if module_name:
        return module.get(module_name) in (typing, dataclasses)
    obj = module.get(name)
    return bool(
        dataclasses._is_classvar(obj, typing)  # type: ignore[attr-defined]
        or dataclasses._is_initvar(obj, dataclasses)  # type: ignore[attr-defined]
        or obj is dataclasses.KW_ONLY
    )


def _process_class(
    cls: Any,
    init: bool,
    repr: bool,  # noqa: A002 - dataclasses' own parameter names
    eq: bool,
    order: bool,
    unsafe_hash: bool,
    frozen: bool,
    match_args: bool,
    kw_only: bool,
    slots: bool,
    weakref_slot: bool,
) -> Any:
    """``dataclasses._process_class``, a project class of the common shape built from its stored
    plan (module docstring, "Class plans")."""
    standard = _standard_process_class
    assert standard is not None
    params = (init, repr, eq, order, unsafe_hash, frozen, match_args, kw_only, slots, weakref_slot)
    store = _installed
    module = sys.modules.get(cls.__module__)
    if (
        not FAST
        or store is None
        or module is None
        or not (init and match_args)
        or order
        or unsafe_hash
        or kw_only
        or weakref_slot
        or type(cls) is not type
    ):
        return standard(cls, *params)
    name = module.__name__
    if not (name == "uet" or name.startswith("uet.")):
        return standard(cls, *params)
    ns = module.__dict__
    typing = sys.modules.get("typing")
    d = cls.__dict__
    if (
        typing is None
        or getattr(cls, "__dataclass_fields__", None) is not None
        or not cls.__doc__
        or any(fname[:2] == "__" for fname in d.get("__annotations__", ()))
        or (frozen and ("__setattr__" in d or "__delattr__" in d))
    ):
        return standard(cls, *params)
    annotations = d.get("__annotations__", {})
    Field = dataclasses.Field
    MISSING = dataclasses.MISSING
    simple_bases = cls.__bases__ == (object,)
    # pass 1: what the standard build would find, checked before anything changes
    found = []
    shape = []
    for fname, ftype in annotations.items():
        groups = _groups.get(ftype, ()) if type(ftype) is str else ()
        if groups is None or (groups and not groups[0] and ns.get(groups[1]) is None):
            pass  # a text that names nothing, or a name its module does not bind: a field
        elif _pseudo_field(ftype, ns, typing):
            return standard(cls, *params)
        if simple_bases and fname not in _TYPE_NAMES:
            default = d.get(fname, MISSING)
            if default is not MISSING and hasattr(type(default), "__get__"):
                default = getattr(cls, fname, MISSING)
        else:
            default = getattr(cls, fname, MISSING)
        if isinstance(default, Field):
            f = default
            if f.kw_only is True or f.default.__class__.__hash__ is None:
                return standard(cls, *params)
            kind = 2 if f.default_factory is not MISSING else (0 if f.default is MISSING else 1)
            found.append((fname, ftype, f, True))
            shape.append((fname, kind, f.init, f.repr, f.compare, f.hash))
        else:
            if isinstance(default, types.MemberDescriptorType) or default.__class__.__hash__ is None:
                return standard(cls, *params)
            found.append((fname, ftype, default, False))
            shape.append((fname, 0 if default is MISSING else 1, True, True, True, None))
    for attr, value in d.items():
        if isinstance(value, Field) and attr not in annotations:
            return standard(cls, *params)
    class_hash = d.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in d))
    hash_action = dataclasses._hash_action[False, bool(eq), bool(frozen), explicit_hash]  # type: ignore[attr-defined]
    has_post_init = hasattr(cls, "__post_init__")
    key = (*_PLAN, repr, eq, frozen, slots, has_post_init, explicit_hash, tuple(shape))
    codes = store.plan(key)
    if codes is None:
        methods = ("__init__",) + ("__repr__",) * repr + ("__eq__",) * eq + ("__setattr__", "__delattr__") * frozen
        if hash_action is dataclasses._hash_add:  # type: ignore[attr-defined]
            methods += ("__hash__",)
        return _record(store, key, cls, params, methods)
    # pass 2: the standard build's steps, in its order, with the stored method codes
    cls.__dataclass_params__ = dataclasses._DataclassParams(init, repr, eq, order, unsafe_hash, frozen)  # type: ignore[attr-defined]
    fields: dict[str, Any] = {}
    FIELD = dataclasses._FIELD  # type: ignore[attr-defined]
    for fname, ftype, default, is_field in found:
        f = default if is_field else Field(default, MISSING, True, True, None, True, None, MISSING)  # type: ignore[arg-type]
        f.name = fname
        f.type = ftype
        f._field_type = FIELD  # type: ignore[attr-defined]
        if f.kw_only is MISSING:
            f.kw_only = False
        fields[fname] = f
    for fname, _ftype, _default, is_field in found:
        if is_field:
            f = fields[fname]
            if f.default is MISSING:
                delattr(cls, fname)
            else:
                setattr(cls, fname, f.default)
    cls.__dataclass_fields__ = fields  # type: ignore[attr-defined]
    values = {
        "MISSING": MISSING,
        "_HAS_DEFAULT_FACTORY": dataclasses._HAS_DEFAULT_FACTORY,  # type: ignore[attr-defined]
        "__dataclass_builtins_object__": object,
        "_return_type": None,
        "cls": cls,
        "FrozenInstanceError": dataclasses.FrozenInstanceError,
    }
    for fname, f in fields.items():
        values["_type_" + fname] = f.type
        values["_dflt_" + fname] = f.default if f.default_factory is MISSING else f.default_factory
    set_new = dataclasses._set_new_attribute  # type: ignore[attr-defined]
    function = types.FunctionType
    for code in codes:  # what the text's ``def __create_fn__`` makes, called as _create_fn calls it
        fn = function(code, ns)(**{k: values[k] for k in code.co_varnames[: code.co_argcount]})
        method = fn.__name__
        if method == "__repr__":
            set_new(cls, method, dataclasses._recursive_repr(fn))  # type: ignore[attr-defined]
        elif method == "__hash__":
            cls.__hash__ = dataclasses._set_qualname(cls, fn)  # type: ignore[attr-defined, method-assign]
        elif set_new(cls, method, fn) and method in ("__setattr__", "__delattr__"):
            raise TypeError(f"Cannot overwrite attribute {method} in class {cls.__name__}")
    if hash_action is dataclasses._hash_set_none:  # type: ignore[attr-defined]
        cls.__hash__ = None  # type: ignore[assignment, method-assign]
    set_new(cls, "__match_args__", tuple(f.name for f in fields.values() if f.init and not f.kw_only))
    if slots:
        cls = dataclasses._add_slots(cls, frozen, weakref_slot)  # type: ignore[attr-defined]
    abc.update_abstractmethods(cls)
    return cls


def _record(
    store: CodeCache, key: tuple[Any, ...], cls: Any, params: tuple[bool, ...], methods: tuple[str, ...]
) -> Any:
    """The standard build of ``cls``; the method texts it ran (which must make ``methods``, in
    this order) are stored as the plan of ``key``."""
    assert _standard_process_class is not None
    thread = get_ident()
    outer = _recordings.get(thread)
    codes = _recordings[thread] = []
    try:
        made = _standard_process_class(cls, *params)
    finally:
        if outer is None:
            del _recordings[thread]
        else:
            _recordings[thread] = outer
    if len(codes) != len(methods):
        return made
    plan = []
    for code, method in zip(codes, methods, strict=True):
        # the text only defines __create_fn__, with neither defaults nor annotations nor free
        # variables: the function it makes is FunctionType(its code, the globals)
        inner = code.co_consts[0] if code.co_consts else None
        if not (
            isinstance(inner, CodeType)
            and code.co_consts == (inner, None)
            and code.co_names == ("__create_fn__",)
            and inner.co_name == "__create_fn__"
            and not inner.co_freevars
            and not inner.co_kwonlyargcount
            and [c.co_name for c in inner.co_consts if isinstance(c, CodeType)] == [method]
        ):
            return made
        names = inner.co_varnames[: inner.co_argcount]
        if not all(name in _KNOWN_LOCALS or name.startswith(("_type_", "_dflt_")) for name in names):
            return made
        plan.append(inner)
    store.keep(key, tuple(plan))
    return made


def _as_builtin(source: str, mode: str) -> CodeType:
    """``source`` compiled as the built-in ``exec``/``eval`` compiles a text for the function that
    called the wrapper (with that function's ``__future__`` features, not this module's)."""
    flags = sys._getframe(2).f_code.co_flags & _FUTURE_FLAGS
    code: CodeType = compile(source, "<string>", mode, flags, True)
    return code


def _from_project() -> bool:
    """Whether the named tuple whose ``__new__`` is being made is made by a ``uet`` module (the
    first caller outside :mod:`collections` and :mod:`typing`)."""
    frame: FrameType | None = sys._getframe(3)  # _from_project <- eval <- namedtuple <- its caller
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if name not in ("collections", "typing"):
            return isinstance(name, str) and (name == "uet" or name.startswith("uet."))
        frame = frame.f_back
    return False


def install(cache: CodeCache | None = None) -> CodeCache:
    """Give :mod:`dataclasses` the caching ``exec`` (module docstring) and return its cache; a second
    call without ``cache`` returns the one installed."""
    global _installed
    if cache is None and _installed is not None:
        return _installed
    store = cache or CodeCache(
        _store_path("dataclass-plans"), write=not sys.dont_write_bytecode, texts=_store_path("dataclass-code")
    )
    run, evaluate = builtins.exec, builtins.eval

    def exec(source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> None:  # noqa: A001
        if isinstance(source, str):
            name = globals.get("__name__") if globals is not None else None
            if isinstance(name, str) and (name == "uet" or name.startswith("uet.")):
                recording = _recordings.get(get_ident()) if _recordings else None
                source = store.code(source, planned=recording is not None)
                if recording is not None:
                    recording.append(source)
            else:
                source = _as_builtin(source, "exec")
        if globals is None:
            caller = sys._getframe(1)
            globals, locals = caller.f_globals, caller.f_locals if locals is None else locals
        run(source, globals, locals)

    def eval(source: Any, globals: dict[str, Any] | None = None, locals: Any = None, /) -> Any:  # noqa: A001
        if isinstance(source, str):
            name = globals.get("__name__") if globals is not None else None
            if (
                isinstance(name, str)
                and name.startswith("namedtuple_")
                and source[:1] not in (" ", "\t")
                and _from_project()
            ):
                source = store.code(source, mode="eval")
            else:
                source = _as_builtin(source.lstrip(" \t"), "eval")  # the built-in strips these
        if globals is None:
            caller = sys._getframe(1)
            globals, locals = caller.f_globals, caller.f_locals if locals is None else locals
        return evaluate(source, globals, locals)

    dataclasses.exec = exec  # type: ignore[attr-defined]  # found before the built-in by _create_fn
    collections.eval = eval  # type: ignore[attr-defined]  # found before the built-in by namedtuple
    if _standard_is_type is not None and _identifier is not None:
        dataclasses._is_type = _is_type  # type: ignore[attr-defined]
        if _standard_process_class is not None:
            dataclasses._process_class = _process_class  # type: ignore[attr-defined]
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
        cache.write = True
        cache.save(everything=True)
    return cache.path
