"""The stored code of the project's dataclass methods (uet.dataclass_cache): the classes are the
same as without it, a stored text is not compiled again, and a plain ``uet-sim`` run started a
second time compiles none."""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
import re
import subprocess
import sys
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType, FunctionType, ModuleType
from typing import Any

import pytest
from compiled_child import have_current_build

import uet.dataclass_cache as dc
from uet.dataclass_cache import CodeCache, install

TEXT = "def __create_fn__(x):\n def f(self):\n  return x + self\n return f"

#: a module of the package (its globals' ``__name__``) and one outside it
CLASS = """
from dataclasses import dataclass, field

@dataclass(frozen=True)
class Point:
    x: int
    y: int = 2
    tags: list[int] = field(default_factory=list)
"""


#: a plain ``uet-sim`` run that says at exit how many method texts it found stored and compiled
RUN = (
    "import atexit, json, sys\n"
    "import uet.dataclass_cache as dc\n"
    "from uet.tools.sim import main\n"
    "c = dc.install()\n"
    "atexit.register(lambda: sys.stderr.write(json.dumps([c.hits, c.misses, c.plan_hits, c._texts._entries is None])"
    " + '\\n'))\n"
    "main(['-n', '2', '--messages', '1', '--size', '4096', '--json'])\n"
)


def _make(module: str) -> Any:
    mod = ModuleType(module)
    sys.modules[module] = mod
    try:
        exec(compile(CLASS, module, "exec", dont_inherit=True), mod.__dict__)  # noqa: S102 - the test's own class
    finally:
        del sys.modules[module]
    return mod.Point


def test_a_stored_text_is_read_back_not_compiled(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    first = CodeCache(path, write=True)
    code = first.code(TEXT)
    assert (first.hits, first.misses) == (0, 1)
    assert code.co_filename == "<string>"
    assert code.co_code == compile(TEXT, "<string>", "exec", dont_inherit=True).co_code
    first.save()
    again = CodeCache(path, write=True)
    assert marshal.dumps(again.code(TEXT)) == marshal.dumps(code)
    assert (again.hits, again.misses) == (1, 0)


def test_a_header_codec_is_stored_under_its_file_name(tmp_path: Path) -> None:
    """The layout codecs (uet.wire.layout) keep their file name in tracebacks, and a text stored
    under one name is not taken for another's."""
    from uet.wire.layout import F, Layout

    path = str(tmp_path / "store")
    first = CodeCache(path, write=True)
    code = first.code(TEXT, "<layout x>")
    assert code.co_filename == "<layout x>" and first.misses == 1
    assert first.code(TEXT).co_filename == "<string>" and first.misses == 2
    first.save()
    again = CodeCache(path, write=False)
    assert again.code(TEXT, "<layout x>").co_filename == "<layout x>" and (again.hits, again.misses) == (1, 0)
    installed = install()
    try:
        mine = install(CodeCache(path, write=False))
        hdr = Layout("store_test", [F("a", 8), F("b", 8)])
        hdr.compile()
        # the codec's text and its record's constructor (a named tuple)
        assert mine.misses == 2 and hdr.decode(b"\x01\x02") == hdr.T(1, 2) and hdr.encode((3, 4)) == b"\x03\x04"
        Layout("store_test", [F("a", 8), F("b", 8)]).compile()  # the same header again: from the store
        assert (mine.hits, mine.misses) == (2, 2)
    finally:
        install(installed)


def test_nothing_is_written_without_permission_or_news(tmp_path: Path) -> None:
    path = tmp_path / "store"
    off = CodeCache(str(path), write=False)
    off.code(TEXT)
    off.save()
    assert not path.exists()
    on = CodeCache(str(path), write=True)
    on.save()  # nothing new
    assert not path.exists()


@pytest.mark.parametrize(
    "content",
    [b"garbage", marshal.dumps((b"\0\0\r\n", {TEXT: b"x"})), marshal.dumps([1, 2]), b""],
    ids=["not-marshal", "other-python", "wrong-shape", "empty"],
)
def test_an_unreadable_or_foreign_store_is_ignored(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "store"
    path.write_bytes(content)
    cache = CodeCache(str(path), write=False)
    cache.code(TEXT)
    assert cache.misses == 1


def test_a_store_that_cannot_be_written_is_left_alone(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = CodeCache(str(blocker / "sub" / "store"), write=True)  # a directory under a file
    cache.code(TEXT)
    cache.save()
    assert blocker.read_text() == "" and list(tmp_path.iterdir()) == [blocker]


def test_the_store_keeps_what_was_used_when_it_is_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "store"
    monkeypatch.setattr(dc, "MAX_ENTRIES", 2)
    old = {f"# {i}\n": marshal.dumps(compile(f"# {i}\n", "<string>", "exec")) for i in range(2)}
    path.write_bytes(marshal.dumps((MAGIC_NUMBER, old)))
    cache = CodeCache(str(path), write=True)
    cache.code("# 0\n")
    cache.code(TEXT)
    cache.save()
    _magic, kept = marshal.loads(path.read_bytes())
    assert sorted(kept) == sorted(["# 0\n", TEXT])


def test_the_package_classes_are_the_same_with_the_cache(tmp_path: Path) -> None:
    installed = install()
    assert install() is installed  # once
    try:
        install(CodeCache(str(tmp_path / "store"), write=False))
        cached = _make("uet.example")
        mine = dc._installed
        assert mine is not None and mine.misses > 0
        again = _make("uet.example")  # the texts again: from the cache
        assert mine.hits == mine.misses
        outside = _make("example")  # another package's class: not looked up
        assert mine.hits == mine.misses
    finally:
        install(installed)
    for cls in (cached, again, outside):
        p = cls(1)
        assert repr(p) == "Point(x=1, y=2, tags=[])"
        assert p == cls(1, 2) and p != cls(1, 3) and hash(cls(1, 2, ())) == hash(cls(1, 2, ()))
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.x = 3
        assert [f.name for f in dataclasses.fields(cls)] == ["x", "y", "tags"]
        assert cls.__init__.__code__.co_filename == "<string>"


@pytest.mark.parametrize("build", ["pure", pytest.param("compiled", marks=pytest.mark.after_compiled_build)])
def test_a_second_plain_run_compiles_no_dataclass_method(tmp_path: Path, build: str) -> None:
    """Each process reports the store's hits and misses at exit; the stores go under a pycache
    prefix of the test's own. Compiled, the compiled modules' dataclasses (built the standard way)
    find their texts in the first file too."""
    if build == "compiled" and not have_current_build():
        pytest.skip("no current compiled build (.ci/build-compiled)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path)
    env["UET_COMPILED"] = "1" if build == "compiled" else "0"
    seen = []
    for _ in range(2):
        r = subprocess.run(
            [sys.executable, "-W", "error::UserWarning", "-c", RUN],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["ok"]
        seen.append(json.loads(r.stderr.strip().splitlines()[-1]))
    (hits0, misses0, plans0, unread0), (hits1, misses1, plans1, unread1) = seen
    assert misses0 > 50 and plans0 == 0 and not unread0
    assert misses1 == 0 and plans1 > 40 and unread1  # the dataclasses from their plans: no method text read
    assert list(tmp_path.rglob("dataclass-code.*"))


def test_the_benchmark_stores_a_run_s_methods_where_bytecode_writing_is_off(tmp_path: Path) -> None:
    """``uet-bench sim --against-htsim`` byte-compiles the package, and stores the dataclass
    methods and header codecs of a simulator run (tools/bench/htsim.py): the run then compiles
    none, although ``PYTHONDONTWRITEBYTECODE`` forbids it to write the store itself."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(tmp_path)}
    store = "from uet.tools.bench.htsim import store_run_code\nprint(store_run_code())\n"
    r = subprocess.run([sys.executable, "-c", store], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).is_file()
    r = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    hits, misses, plans, unread = json.loads(r.stderr.strip().splitlines()[-1])
    assert plans > 40 and misses == 0 and unread


def test_a_toml_text_s_tables_are_kept_by_the_text(tmp_path: Path) -> None:
    """uet.dataclass_cache.stored_table's store: the tables again, a fresh copy, without parsing;
    tables marshal cannot write (a TOML date) are parsed every time; at most max_entries texts."""
    import datetime
    import tomllib

    path = str(tmp_path / "tables")
    text = 'a = 1\n[b]\nc = [1.5, "x", true]\n'
    calls: list[str] = []

    def parse(t: str) -> Any:
        calls.append(t)
        return tomllib.loads(t)

    first = CodeCache(path, write=True, max_entries=2)
    assert first.value(text, lambda: parse(text)) == {"a": 1, "b": {"c": [1.5, "x", True]}}
    first.save()
    again = CodeCache(path, write=True, max_entries=2)
    got = again.value(text, lambda: parse(text))
    got["b"]["c"].append(2)  # a copy: the next one is as stored
    assert again.value(text, lambda: parse(text)) == {"a": 1, "b": {"c": [1.5, "x", True]}}
    assert calls == [text] and (again.hits, again.misses) == (2, 0)
    dated = "d = 2026-01-02\n"
    for _ in range(2):
        assert again.value(dated, lambda: parse(dated)) == {"d": datetime.date(2026, 1, 2)}
    assert calls == [text, dated, dated]
    for t in ("x = 1\n", "x = 2\n"):
        again.value(t, lambda t=t: parse(t))  # type: ignore[misc]
    again.save()
    _magic, kept = marshal.loads(Path(path).read_bytes())
    assert sorted(kept) == sorted([text, "x = 1\n", "x = 2\n"])  # over 2: those this process used


def test_a_scenario_read_before_needs_no_toml_parser(tmp_path: Path) -> None:
    """The second run of a scenario file finds its tables stored (uet.config_file.read_toml) and
    does not import tomllib."""
    scenario = tmp_path / "s.toml"
    scenario.write_text('[run]\nworkload = "pairs"\nendpoints = 2\nmessage_bytes = 4096\nmessages = 1\n')
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path / "cache")
    run = (
        "import contextlib, io, json, sys\n"
        "from uet.tools.sim import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    rc = main([{str(scenario)!r}, '--json'])\n"
        "print(json.dumps([rc, json.loads(out.getvalue())['ok'], 'tomllib' in sys.modules]))\n"
    )
    seen = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", run], env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        seen.append(json.loads(r.stdout))
    assert seen == [[0, True, True], [0, True, False]]


ANNOTATIONS = [
    "int",
    "int | None",
    "ClassVar[int]",
    "ClassVar",
    " ClassVar [int]",
    "typing.ClassVar[int]",
    "t.ClassVar[int]",
    "typing . ClassVar",
    "CV[int]",
    "InitVar[int]",
    "dataclasses.InitVar[str]",
    "dc.InitVar",
    "KW_ONLY",
    "dataclasses.KW_ONLY",
    "'int'",
    "(int)",
    "",
    "list[ClassVar[int]]",
    "Missing.ClassVar",
    "typing.Missing",
]


def test_an_annotation_is_read_as_the_standard_library_reads_it() -> None:
    """``_is_type`` keeps each annotation's match; its answers are those of dataclasses' own, for
    annotations of every form and a module binding the names several ways."""
    import typing

    assert dc._standard_is_type is not None and dataclasses._is_type is dc._is_type  # type: ignore[attr-defined]
    module = ModuleType("uet.annotations_probe")
    module.__dict__.update(
        typing=typing, t=typing, dataclasses=dataclasses, dc=dataclasses, CV=typing.ClassVar, Missing=None
    )
    module.__dict__.update(ClassVar=typing.ClassVar, InitVar=dataclasses.InitVar, KW_ONLY=dataclasses.KW_ONLY)
    bare = ModuleType("uet.annotations_bare")
    checks = [
        (typing, typing.ClassVar, dataclasses._is_classvar),  # type: ignore[attr-defined]
        (dataclasses, dataclasses.InitVar, dataclasses._is_initvar),  # type: ignore[attr-defined]
        (dataclasses, dataclasses.KW_ONLY, dataclasses._is_kw_only),  # type: ignore[attr-defined]
    ]
    seen = 0
    for mod in (module, bare):
        sys.modules[mod.__name__] = mod
        try:
            cls = type("Probe", (), {"__module__": mod.__name__})
            for text in ANNOTATIONS * 2:  # the second time from what was kept
                for a_module, a_type, predicate in checks:
                    want = dc._standard_is_type(text, cls, a_module, a_type, predicate)
                    assert dc._is_type(text, cls, a_module, a_type, predicate) is want, (text, a_type, mod)
                    seen += want
        finally:
            del sys.modules[mod.__name__]
    assert seen > 10  # a few of each kind were found


def test_classvar_initvar_and_kw_only_fields_are_the_standard_ones() -> None:
    source = (
        "from __future__ import annotations\n"
        "import dataclasses, typing\n"
        "from dataclasses import KW_ONLY, InitVar, dataclass\n"
        "from typing import ClassVar\n"
        "@dataclass\n"
        "class Mixed:\n"
        "    '''Fields of every kind.'''\n"
        "    a: int\n"
        "    limit: ClassVar[int] = 3\n"
        "    other: typing.ClassVar[str] = 'x'\n"
        "    seed: InitVar[int] = 0\n"
        "    _: KW_ONLY\n"
        "    b: int = 1\n"
        "    c: dataclasses.InitVar[int] = 2\n"
        "    def __post_init__(self, seed: int, c: int) -> None:\n"
        "        self.total = self.a + self.b + seed + c\n"
    )

    def build(is_type: Any) -> Any:
        module = ModuleType("uet.annotations_mixed")
        sys.modules[module.__name__] = module
        saved = dataclasses._is_type  # type: ignore[attr-defined]
        dataclasses._is_type = is_type  # type: ignore[attr-defined]
        try:
            exec(compile(source, "<mixed>", "exec"), module.__dict__)  # noqa: S102
        finally:
            dataclasses._is_type = saved  # type: ignore[attr-defined]
            del sys.modules[module.__name__]
        return module.Mixed

    fast, standard = build(dc._is_type), build(dc._standard_is_type)
    kinds = {name: (f._field_type, f.kw_only, f.default) for name, f in fast.__dataclass_fields__.items()}
    assert kinds == {name: (f._field_type, f.kw_only, f.default) for name, f in standard.__dataclass_fields__.items()}
    assert [f.name for f in dataclasses.fields(fast)] == ["a", "b"]
    assert fast(1, 5, b=2, c=3).total == standard(1, 5, b=2, c=3).total == 11


# -- class plans: every dataclass of the project built the standard way and from its plan ---------

_ROOT = Path(__file__).resolve().parent.parent
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def _code(code: CodeType) -> list[Any]:
    """All of a code object, as plain data."""
    consts = [_code(c) if isinstance(c, CodeType) else repr(c) for c in code.co_consts]
    return [
        code.co_name,
        code.co_qualname,
        code.co_filename,
        code.co_firstlineno,
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags,
        code.co_stacksize,
        list(code.co_varnames),
        list(code.co_freevars),
        list(code.co_cellvars),
        list(code.co_names),
        consts,
        code.co_code.hex(),
        code.co_linetable.hex(),
        code.co_exceptiontable.hex(),
    ]


def _describe_value(x: Any, cls: type, depth: int = 0) -> Any:
    """``x`` (found in the dataclass ``cls``) as plain data: what tells two builds apart."""
    if depth > 4:
        return "..."
    if x is cls:
        return ["the class"]
    if isinstance(x, type):
        return ["type", x.__module__, x.__qualname__, x is not cls and x.__name__ == cls.__name__]
    if isinstance(x, FunctionType):
        cells = [_describe_value(c.cell_contents, cls, depth + 1) for c in x.__closure__ or ()]
        return [
            "function",
            x.__name__,
            x.__qualname__,
            x.__module__,
            x.__doc__,
            _code(x.__code__),
            x.__globals__.get("__name__") == cls.__module__,
            _describe_value(x.__defaults__, cls, depth + 1),
            _describe_value(x.__kwdefaults__, cls, depth + 1),
            _describe_value(x.__annotations__, cls, depth + 1),
            cells,
            _describe_value(x.__dict__, cls, depth + 1),
        ]
    if isinstance(x, dataclasses.Field):
        return ["field", *[_describe_value(getattr(x, s), cls, depth + 1) for s in dataclasses.Field.__slots__]]
    if isinstance(x, dict):
        return [
            "dict",
            [[_describe_value(k, cls, depth + 1), _describe_value(v, cls, depth + 1)] for k, v in x.items()],
        ]
    if isinstance(x, tuple | list):
        return [type(x).__name__, [_describe_value(v, cls, depth + 1) for v in x]]
    return [type(x).__module__, type(x).__qualname__, _ADDRESS.sub(" at 0x", repr(x))]


def describe_dataclass(cls: type) -> Any:
    """All that can tell two builds of the dataclass ``cls`` apart, as plain data."""
    return [
        [type(cls).__module__, type(cls).__qualname__],
        [[b.__module__, b.__qualname__] for b in cls.__mro__],
        [cls.__module__, cls.__qualname__, cls.__name__, cls.__doc__],
        [[k, _describe_value(v, cls)] for k, v in cls.__dict__.items()],
        [f.name for f in dataclasses.fields(cls)],
        repr(cls.__dataclass_params__),  # type: ignore[attr-defined]
    ]


def _dataclass_modules() -> list[str]:
    """The project's modules that make dataclasses."""
    names = []
    for folder, package in (("uet", "uet"), ("fabric", "uet.fabric"), ("tools", "uet.tools")):
        for path in sorted((_ROOT / folder).rglob("*.py")):
            if "_native" in path.parts:
                continue
            if re.search(r"^\s*@(dataclasses\.)?dataclass\b", path.read_text(encoding="utf-8"), re.M):
                rel = path.relative_to(_ROOT / folder).with_suffix("")
                names.append(".".join((package, *rel.parts)).removesuffix(".__init__"))
    return names


_PLAN_CHILD = """
import dataclasses, importlib, json, sys
import uet.dataclass_cache as dc
dc.FAST = {fast}
sys.path.insert(0, {tests!r})
from test_dataclass_cache import describe_dataclass
out, failed = {{}}, []
for name in {modules!r}:
    try:
        module = importlib.import_module(name)
    except ImportError as e:  # an optional dependency
        failed.append(name)
        continue
    for value in list(vars(module).values()):
        for cls in [value, *vars(value).values()] if isinstance(value, type) else []:
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == name:
                out[name + "." + cls.__qualname__] = describe_dataclass(cls)
print(json.dumps({{"classes": out, "failed": failed, "plans": dc.install().plan_hits}}))
"""


def _project_dataclasses(fast: bool, prefix: Path, compiled: str = "0") -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    env["UET_COMPILED"] = compiled
    code = _PLAN_CHILD.format(fast=fast, tests=str(_ROOT / "tests"), modules=_dataclass_modules())
    r = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    res: dict[str, Any] = json.loads(r.stdout)
    return res


def test_every_dataclass_of_the_project_is_the_standard_one(tmp_path: Path) -> None:
    """Built the standard way, then from scratch with plans recorded, then from the plans stored:
    each class, its dictionary (key order, methods' code, defaults, closures), its fields and
    parameters are the same three times."""
    standard = _project_dataclasses(False, tmp_path / "standard")
    assert standard["plans"] == 0
    recorded = _project_dataclasses(True, tmp_path / "fast")
    replayed = _project_dataclasses(True, tmp_path / "fast")
    assert len(standard["classes"]) > 120 and replayed["plans"] > 100, (len(standard["classes"]), replayed["plans"])
    assert standard["failed"] == recorded["failed"] == replayed["failed"]
    for other in (recorded, replayed):
        assert list(other["classes"]) == list(standard["classes"])
        for name, described in standard["classes"].items():
            assert other["classes"][name] == described, name


SHAPES = '''
from __future__ import annotations
import dataclasses
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any, ClassVar


@dataclass
class Plain:
    """Defaults of every kind."""

    a: int
    b: str = "x"
    c: list[int] = field(default_factory=list)
    d: int = field(default=3, repr=False, compare=False)
    e: int = field(default=4, init=False)
    f: dict[str, int] = field(default_factory=dict, init=False, hash=True, metadata={"m": 1})
    g: Any = None


@dataclass(frozen=True, slots=True)
class FrozenSlots:
    """Frozen with slots, a default and a factory."""

    a: int
    b: tuple[int, ...] = ()
    c: list[int] = field(default_factory=list, compare=False)


@dataclass(frozen=True)
class Frozen:
    """A field named self, a hash switched off and on."""

    self: int
    x: int = field(default=0, hash=False)
    y: int = field(default=0, compare=False, hash=True)


@dataclass(slots=True)
class Slots:
    """Mutable with slots, a field without init that has a default."""

    a: int
    b: int = field(default=5, init=False)


@dataclass(eq=False)
class NoEq:
    """No equality."""

    a: int = 0


@dataclass(repr=False, eq=False)
class Bare:
    """Neither repr nor equality."""

    a: int = 0


@dataclass
class Own:
    """Methods of its own: kept."""

    a: int

    def __repr__(self) -> str:
        return "own"

    def __eq__(self, other: object) -> bool:
        return True

    def __post_init__(self) -> None:
        self.seen = True


@dataclass
class OwnHash:
    """An explicit hash."""

    a: int

    def __hash__(self) -> int:
        return 1


@dataclass(frozen=True)
class Empty:
    """No field."""


@dataclass
class Meta:
    """Annotations as objects, one a pseudo-field: built the standard way."""

    a: int
    limit: ClassVar[int] = 3


@dataclass
class Child(Plain):
    """A dataclass base: built the standard way."""

    z: int = 0


@dataclass(order=True)
class Ordered:
    """order=True: built the standard way."""

    a: int


@dataclass
class Undocumented:
    a: int


@dataclass
class WithInitVar:
    """An InitVar: built the standard way."""

    a: int
    seed: InitVar[int] = 0
    _: KW_ONLY
    b: int = 1

    def __post_init__(self, seed: int) -> None:
        self.a += seed
'''

BROKEN = [
    "@dataclass\nclass M:\n    '''d'''\n    a: list = []\n",
    "@dataclass\nclass M:\n    '''d'''\n    a: int = 0\n    b: int\n",
    "@dataclass(frozen=True)\nclass M:\n    '''d'''\n    a: int\n    def __setattr__(self, n, v): pass\n",
    "@dataclass\nclass M:\n    '''d'''\n    a = field(default=1)\n",
]


def _build(source: str, fast: bool, cache: CodeCache) -> dict[str, Any]:
    module = ModuleType("uet.shapes_probe")
    sys.modules[module.__name__] = module
    installed = install()
    saved = dc.FAST
    try:
        install(cache)
        dc.FAST = fast
        exec(compile(source, "<shapes>", "exec"), module.__dict__)  # noqa: S102 - the test's own classes
    finally:
        dc.FAST = saved
        install(installed)
        del sys.modules[module.__name__]
    return {k: v for k, v in vars(module).items() if isinstance(v, type) and dataclasses.is_dataclass(v)}


def test_dataclasses_of_every_shape_are_the_standard_ones(tmp_path: Path) -> None:
    """Fields with factories, without init, without repr or compare, slots, frozen, explicit
    methods: the same classes from the plans as the standard way; shapes outside the plans (a
    pseudo-field, a dataclass base, order, no docstring) go the standard way and are the same too."""
    cache = CodeCache(str(tmp_path / "store"), write=False)
    standard = _build(SHAPES, False, cache)
    assert cache.plan_hits == 0
    recorded = _build(SHAPES, True, cache)
    replayed = _build(SHAPES, True, cache)
    assert cache.plan_hits == 9  # Plain .. Empty: Meta, Child, Ordered, Undocumented and WithInitVar are not planned
    for name, cls in standard.items():
        want = describe_dataclass(cls)
        assert describe_dataclass(recorded[name]) == want, name
        assert describe_dataclass(replayed[name]) == want, name
    p = replayed["Plain"](1)
    assert (
        repr(p) == "Plain(a=1, b='x', c=[], e=4, f={}, g=None)"
        and p == replayed["Plain"](1)
        and p != replayed["Plain"](2)
    )
    fs = replayed["FrozenSlots"](1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fs.a = 2
    import pickle

    globals()["FrozenSlots"] = replayed["FrozenSlots"]  # pickle finds it by name
    try:
        replayed["FrozenSlots"].__module__ = __name__
        assert pickle.loads(pickle.dumps(fs)) == fs  # noqa: S301 - made here
    finally:
        del globals()["FrozenSlots"]


@pytest.mark.parametrize("source", BROKEN, ids=["mutable-default", "default-order", "frozen-setattr", "no-annotation"])
def test_a_class_dataclasses_refuses_is_refused_the_same(tmp_path: Path, source: str) -> None:
    cache = CodeCache(str(tmp_path / "store"), write=False)
    errors = []
    for fast in (False, True, True):
        with pytest.raises((TypeError, ValueError)) as info:
            _build("from dataclasses import dataclass, field\n" + source, fast, cache)
        errors.append((type(info.value), str(info.value)))
    assert errors[0] == errors[1] == errors[2] and cache.plan_hits == 0


NAMED = """
from collections import namedtuple
from typing import NamedTuple

Pair = namedtuple("Pair", "a b", defaults=(2,))


class Typed(NamedTuple):
    '''A typed named tuple.'''

    x: int
    y: str = "y"
"""


def _named(module: str, cache: CodeCache) -> dict[str, Any]:
    mod = ModuleType(module)
    sys.modules[module] = mod
    installed = install()
    try:
        install(cache)
        exec(compile(NAMED, module, "exec", dont_inherit=True), mod.__dict__)  # noqa: S102 - the test's own classes
    finally:
        install(installed)
        del sys.modules[module]
    return {"Pair": mod.Pair, "Typed": mod.Typed}


def test_a_named_tuple_s_constructor_is_stored_for_the_package_only(tmp_path: Path) -> None:
    """namedtuple compiles each class's ``__new__`` from a text (``eval``): for the project's
    modules (typing.NamedTuple's too) that code is stored like a dataclass method's, the same code."""
    cache = CodeCache(str(tmp_path / "store"), write=False)
    outside = _named("example_named", cache)
    assert (cache.hits, cache.misses) == (0, 0)
    first = _named("uet.example_named", cache)
    assert (cache.hits, cache.misses) == (0, 2)
    again = _named("uet.example_named", cache)
    assert (cache.hits, cache.misses) == (2, 2)
    for name in ("Pair", "Typed"):
        want = outside[name].__new__
        for got in (first[name].__new__, again[name].__new__):
            assert _code(got.__code__) == _code(want.__code__)
            assert (got.__name__, got.__qualname__, got.__doc__, got.__defaults__) == (
                want.__name__,
                want.__qualname__.replace("example_named", "uet.example_named"),
                want.__doc__,
                want.__defaults__,
            )
            assert got.__globals__.keys() == want.__globals__.keys()
    p = again["Pair"](1)
    assert p == (1, 2) and repr(p) == "Pair(a=1, b=2)" and again["Typed"](3) == (3, "y")


def test_another_package_s_methods_are_compiled_as_the_built_in_compiles_them() -> None:
    """Outside the package, the texts of dataclasses and namedtuple are compiled as the built-in
    exec and eval compile them for their caller: not with this module's ``__future__`` import
    (which made another package's dataclass ``__init__`` annotations strings)."""
    code = (
        "import json, uet\n"
        "from collections import namedtuple\n"
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class A:\n"
        "    x: int\n"
        "P = namedtuple('P', 'a b')\n"
        "print(json.dumps([repr(A.__init__.__annotations__), A.__init__.__code__.co_flags,"
        " P.__new__.__code__.co_flags, repr(eval('  1 + 1', {}))]))\n"
    )
    got = [
        subprocess.run([sys.executable, "-c", c], capture_output=True, text=True, check=True).stdout
        for c in (
            code,
            code.replace("import json, uet", "import json"),
        )
    ]
    assert json.loads(got[0]) == json.loads(got[1])
    assert "<class 'int'>" in json.loads(got[0])[0]


@pytest.mark.after_compiled_build  # CI builds beside the tests: this waits for it (tests/conftest.py)
def test_every_dataclass_of_the_compiled_build_is_the_standard_one(tmp_path: Path) -> None:
    """The same with the compiled modules, whose dataclasses mypyc hands to ``dataclass``."""
    if not have_current_build():
        pytest.skip("no current compiled build (.ci/build-compiled)")
    standard = _project_dataclasses(False, tmp_path / "standard", "1")
    _project_dataclasses(True, tmp_path / "fast", "1")
    replayed = _project_dataclasses(True, tmp_path / "fast", "1")
    assert replayed["plans"] > 100
    assert json.dumps(replayed["classes"], sort_keys=True) == json.dumps(standard["classes"], sort_keys=True)
    native = [name for name in standard["classes"] if name.startswith("uet.fabric.model.switch.")]
    assert native  # compiled classes among them
