"""The project's enum bases (uet.enums) make the classes the standard library makes: every enum
of the project built both ways (``uet.enums.FAST``) has the same class and member dictionaries and
behaves the same, pure and compiled; and so do enums of other shapes (aliases, flags, methods, the
shapes left to the standard library)."""

from __future__ import annotations

import enum
import json
import pickle
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from compiled_child import have_current_build, run_child

from uet import enums

ROOT = Path(__file__).resolve().parent.parent


def _value(cls: type, x: Any) -> Any:
    """``x`` (from the dictionary of ``cls`` or of one of its members) as plain data: a member by
    its name, a function or descriptor by what it is, anything else by its repr."""
    if isinstance(x, enum.Enum) and type(x) is cls:
        return ["member", x._name_]
    if x is cls:
        return ["the class"]
    if isinstance(x, dict):
        return [[_value(cls, k), _value(cls, v)] for k, v in x.items()]
    if isinstance(x, list):
        return [_value(cls, v) for v in x]
    if isinstance(x, property):
        return ["property", _value(cls, x.fget), _value(cls, x.fset)]
    if callable(x) or hasattr(x, "__get__"):
        return [type(x).__name__, getattr(x, "__module__", None), getattr(x, "__qualname__", None)]
    return repr(x)


def _pickled(member: Any, protocol: int) -> str:
    try:
        data = pickle.dumps(member, protocol)
    except (AttributeError, pickle.PicklingError) as e:  # a class defined in a function
        return type(e).__name__
    assert pickle.loads(data) is member  # noqa: S301 - made here
    return data.hex()


def describe(cls: Any) -> dict[str, Any]:
    """All that can tell two builds of the enum ``cls`` apart, as plain data."""
    members = list(cls._member_map_.values())
    out: dict[str, Any] = {
        "type": [type(cls).__module__, type(cls).__qualname__],
        "mro": [[b.__module__, b.__qualname__] for b in cls.__mro__],
        "name": [cls.__module__, cls.__qualname__, cls.__doc__],
        "dict": [[k, _value(cls, v)] for k, v in cls.__dict__.items()],
        "members": [[m._name_, [[k, _value(cls, v)] for k, v in m.__dict__.items()]] for m in members],
        "list": [repr(m) for m in cls],
        "shown": [[repr(m), str(m), format(m), f"{m!r:>5}", hash(m) == hash(m._value_)] for m in members],
        "pickled": [[_pickled(m, p) for p in range(2, pickle.HIGHEST_PROTOCOL + 1)] for m in members],
        "by_value": [repr(cls(m._value_)) for m in members],
        "by_name": [repr(cls[name]) for name in cls.__members__],
        "contains": [m in cls for m in members],
        "len": len(cls),
    }
    if issubclass(cls, enum.Flag):
        pairs = [(a, b) for a in members for b in members]
        out["flags"] = [[repr(a | b), repr(a & b), repr(a ^ b), repr(~a), repr(list(a | b))] for a, b in pairs]
        out["values"] = [repr(cls(v)) for v in range(cls._all_bits_ + 2)]
    return out


def _users() -> list[str]:
    """The project's modules that build their enums on uet.enums."""
    names = []
    for folder, package in (("uet", "uet"), ("fabric", "uet.fabric"), ("tools", "uet.tools")):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if re.search(r"^from uet\.enums import", path.read_text(encoding="utf-8"), re.M):
                rel = path.relative_to(ROOT / folder).with_suffix("")
                names.append(".".join((package, *rel.parts)).removesuffix(".__init__"))
    return names


_CHILD = """
import enum, importlib, json, sys
import uet.enums
uet.enums.FAST = {fast}
sys.path.insert(0, {tests!r})
from test_enums import describe
out = {{}}
for name in {modules!r}:
    module = importlib.import_module(name)
    for value in vars(module).values():
        if isinstance(value, enum.EnumType) and value.__module__ == name:
            out[name + "." + value.__qualname__] = describe(value)
print(json.dumps({{"enums": out, "fast": uet.enums.FAST, "compiled": "uet.compiled" in sys.modules and
                  sys.modules["uet.compiled"].active()}}))
"""


def _project_enums(fast: bool, flag: str) -> dict[str, Any]:
    code = _CHILD.format(fast=fast, tests=str(ROOT / "tests"), modules=_users())
    return run_child(code, flag, 300)


def test_the_project_builds_its_enums_on_uet_enums() -> None:
    users = _users()
    assert "uet.wire.pds" in users and "uet.ses.memory" in users and "uet.pds.states" in users
    for path in sorted(ROOT.glob("uet/**/*.py")) + sorted(ROOT.glob("fabric/**/*.py")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*class \w+\(enum\.\w*(Enum|Flag)\)", text, re.M), path
        for line in re.findall(r"^from enum import (.*)$", text, re.M):
            for name in line.split(","):
                assert not re.search(rf"^\s*class \w+\({name.strip()}\)", text, re.M), path


def test_every_enum_of_the_project_is_the_standard_one() -> None:
    standard, fast = _project_enums(False, "0"), _project_enums(True, "0")
    assert standard["fast"] is False and fast["fast"] is enums.FAST
    assert len(fast["enums"]) >= 30
    assert list(fast["enums"]) == list(standard["enums"])
    for name, described in standard["enums"].items():
        assert fast["enums"][name] == described, name


@pytest.mark.after_compiled_build  # CI builds beside the tests: this waits for it (tests/conftest.py)
def test_every_enum_of_the_compiled_build_is_the_standard_one() -> None:
    """The same in the compiled modules (mypyc gives their classes a docstring of its own and
    ``__annotations__``: the standard build of the same class has them too)."""
    if not have_current_build():
        pytest.skip("no current compiled build (.ci/build-compiled)")
    standard, fast = _project_enums(False, "1"), _project_enums(True, "1")
    assert standard["compiled"] is True and fast["compiled"] is True
    assert json.dumps(fast["enums"], sort_keys=True) == json.dumps(standard["enums"], sort_keys=True)


def _shapes(base: Any) -> list[Any]:
    """Enums of every shape the project uses, and of shapes left to the standard library."""

    class Code(base.IntEnum):
        """Codes, one an alias."""

        OK = 0
        BAD = 1
        WORSE = 2
        ALSO_BAD = 1

        def describe(self) -> str:
            return self.name.lower()

        @property
        def fatal(self) -> bool:
            return self is Code.WORSE

    class Bits(base.IntFlag):
        """Flags out of order, a multi-bit alias and a zero."""

        A = 1
        C = 4
        B = 2
        AB = 3
        NONE = 0

    class Sorted(base.IntFlag):
        """Flags in order."""

        X = 1
        Y = 2
        Z = 8

    class Word(base.StrEnum):
        """Words."""

        YES = "yes"
        NO = "no"

    class State(base.Enum):
        """States of mixed values."""

        IDLE = 1
        BUSY = "busy"
        DONE = 1

    class Auto(base.Enum):
        """auto(): left to the standard library."""

        ONE = enum.auto()
        TWO = enum.auto()

    class Missing(base.IntEnum):
        """A _missing_ hook: left to the standard library."""

        A = 1

        @classmethod
        def _missing_(cls, value: object) -> Any:
            return cls.A

    class NoDoc(base.IntEnum):
        A = 1
        B = 2

    class Tupled(base.Enum):
        """Tuple values: left to the standard library."""

        A = (1, 2)
        B = (3, 4)

    class Inited(base.Enum):
        """An __init__: left to the standard library."""

        A = 1

        def __init__(self, value: int) -> None:
            self.double = 2 * value

    class Kept(base.Enum):
        """A nonmember: left to the standard library."""

        A = 1
        LIMIT = enum.nonmember(9)

    return [Code, Bits, Sorted, Word, State, Auto, Missing, NoDoc, Tupled, Inited, Kept]


def test_enums_of_every_shape_are_the_standard_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(enums, "FAST", False)
    standard = [describe(c) for c in _shapes(enums)]
    monkeypatch.setattr(enums, "FAST", sys.version_info[:2] == (3, 11))
    fast_classes = _shapes(enums)
    fast = [describe(c) for c in fast_classes]
    for a, b in zip(standard, fast, strict=True):
        assert b == a, a["name"]
    plain = [describe(c) for c in _shapes(enum)]  # the stdlib's own, named directly
    for a, b in zip(plain, fast, strict=True):
        a["mro"], b["mro"] = a["mro"][1:], b["mro"][1:]  # the class itself: another qualname
        assert [k for k, _ in a["dict"]] == [k for k, _ in b["dict"]]
        assert a["list"] == b["list"] and a["shown"] == b["shown"] and a.get("flags") == b.get("flags")
    code: Any = fast_classes[0]
    bits: Any = fast_classes[1]
    word: Any = fast_classes[3]
    state: Any = fast_classes[4]
    assert type(fast_classes[0]) is enum.EnumType
    assert code.__mro__[1] is enum.IntEnum and code.__bases__ == (enum.IntEnum,)
    assert code(1) is code.BAD and code.ALSO_BAD is code.BAD and code["ALSO_BAD"] is code.BAD
    assert code.BAD == 1 and code.BAD.describe() == "bad" and code.WORSE.fatal and not code.OK.fatal
    assert list(code) == [code.OK, code.BAD, code.WORSE] and 2 in code.__members__.values()
    assert bits.A | bits.B is bits.AB and list(bits) == [bits.A, bits.C, bits.B] and bits(0) is bits.NONE
    assert repr(bits(5)) == "<Bits.A|C: 5>" and repr(bits(16)) == "<Bits: 16>" and ~bits.A == bits.C | bits.B
    assert word.YES == "yes" and f"{word.NO}" == "no" and state("busy") is state.BUSY and state.DONE is state.IDLE
    assert fast_classes[6](5) is fast_classes[6].A and fast_classes[9].A.double == 2


@pytest.mark.parametrize("body", ["A = 1\n    A = 2", "mro = 1", "_sunder_ = 1"])
def test_a_body_the_standard_library_refuses_is_refused_by_the_tests(body: str) -> None:
    """The quick build does not check a class body as the class statement does (uet.enums): the
    standard build, which the project's enums also go through in these tests, refuses it."""
    source = f"class Bad(IntEnum):\n    '''Bad.'''\n    {body}\n"
    with pytest.raises((TypeError, ValueError)):
        exec(source, {"IntEnum": enum.IntEnum})  # noqa: S102
