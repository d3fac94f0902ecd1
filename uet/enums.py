"""The project's enum bases: the standard library's enum classes, built at a fraction of the cost.

``class ReturnCode(IntEnum)`` with :class:`IntEnum` from here makes the class that ``enum.IntEnum``
makes: a class of :class:`enum.EnumType` whose enum base is ``enum.IntEnum`` (the same
``__mro__``, the same class and member dictionaries, hence the same members, values, names,
``repr``, ``str``, iteration, ``in``, pickling and, for :class:`IntFlag`, flag operations). Only
the way it is built differs, and only on Python 3.11.

Python 3.11's :class:`enum.EnumType` is slow to build a class: about 85 k instructions a member
(an enum of 20 members about 1.7 M), some 20 M of a one-flow ``uet-sim`` run, which builds 26
enums of about 220 members. Most of it goes into checks of the class statement (each name bound in
the body goes through ``enum._EnumDict``) and into setting each member through the Python-level
machinery (a ``_proto_member`` per member, ``EnumType.__setattr__``). For a *plain* enum the bases
here build the same class directly (:func:`_build`):

- the class body is a plain ``dict`` (the namespace ``EnumType.__prepare__`` would return with
  its ``_generate_next_value_``), so a name bound twice in the body is not refused at import;
  ``tests/test_enums.py`` builds every enum of the project the standard way too, which refuses it;
- plain means: members named without a leading ``_`` (and not ``mro``, nor a name
  the enum base defines) whose values are of the member type (``int`` for ``IntEnum`` and
  ``IntFlag``, ``str`` for ``StrEnum``; ``int`` or ``str`` for ``Enum``); besides them only
  ``__dunder__`` names and descriptors (methods, properties), and no ``__new__``, ``__init__``,
  ``__init_subclass__``, ``_sunder_`` hook or class keyword;
- anything else, or :data:`FAST` false, or another Python than 3.11 (whose enum internals
  differ, 3.12 builds faster anyway), is built by :class:`enum.EnumType` itself on the standard
  base, as if the class statement had named it.

Either way the class made has the standard base and metaclass: these bases are not in its
``__mro__`` and ``isinstance(cls, type(IntEnum))`` is false. Type checkers and mypyc see a subclass
of the standard enum (the metaclass subclasses :class:`enum.EnumType`). ``tests/test_enums.py``
builds every enum of the project both ways and compares their class and member dictionaries,
pure and compiled.
"""

from __future__ import annotations

import enum
import sys
from typing import Any

__all__ = ["FAST", "Enum", "IntEnum", "IntFlag", "StrEnum"]

#: build plain enums directly (module docstring); False: with :class:`enum.EnumType` (the tests
#: compare the two)
FAST = sys.version_info[:2] == (3, 11)

#: class body names that make an enum not plain
_HOOKS = frozenset(("__new__", "__init__", "__init_subclass__", "__set_name__", "__class_getitem__", "__order__"))
#: the methods a Flag class gets from :class:`enum.Flag` unless it defines them (as EnumType does)
_FLAG_OPS = ("__or__", "__and__", "__xor__", "__ror__", "__rand__", "__rxor__", "__invert__")
_FIXUPS = ("__repr__", "__str__", "__format__", "__reduce_ex__")
#: what EnumType.__setattr__ does for a name that is not a member's
_enum_setattr = type.__setattr__
#: Enum.__init__, which does nothing (3.11)
_ENUM_INIT = enum.Enum.__init__
#: each base below and the standard enum behind it (filled once they are made)
_STANDARD: dict[type, type] = {}
#: per standard base: (new_member, use_args, value_repr, member type, value types allowed, base names)
_FACTS: dict[type, tuple[Any, bool, Any, type, tuple[type, ...], frozenset[str]]] = {}


def _facts(etype: Any) -> tuple[Any, bool, Any, type, tuple[type, ...], frozenset[str]]:
    facts = _FACTS.get(etype)
    if facts is None:
        member_type = etype._member_type_
        new, _save, use_args = enum.EnumType._find_new_({}, member_type, etype)  # type: ignore[attr-defined]
        value_repr = enum.EnumType._find_data_repr_(etype.__name__, (etype,))  # type: ignore[attr-defined]
        allowed = (int, str) if member_type is object else (member_type,)
        names = frozenset(name for base in etype.__mro__ for name in base.__dict__)
        facts = _FACTS[etype] = (new, use_args, value_repr, member_type, allowed, names)
    return facts


def _build(etype: Any, cls: str, classdict: dict[str, Any]) -> Any:
    """The class ``class cls(etype)`` with the body ``classdict`` as 3.11's :class:`enum.EnumType`
    makes it, for a plain enum (module docstring); None for any other."""
    new_member, use_args, value_repr, member_type, allowed, base_names = _facts(etype)
    body: dict[str, Any] = {}
    members: list[tuple[str, Any]] = []
    for name, value in classdict.items():
        if name[:2] == "__" and name[-2:] == "__" and len(name) > 4 and name[2] != "_" and name[-3] != "_":
            if name in _HOOKS:
                return None
            body[name] = value
        elif name == "_generate_next_value_":
            if value is not etype._generate_next_value_:
                return None
            body[name] = value
        elif name[:1] == "_" or name == "mro" or name in base_names:
            return None
        elif type(value) in allowed:
            members.append((name, value))
        elif hasattr(value, "__get__") or hasattr(value, "__set__") or hasattr(value, "__delete__"):
            if isinstance(value, type):  # a class nested in an enum: EnumType warns
                return None
            body[name] = value
        else:
            return None
    is_flag = issubclass(etype, enum.Flag)
    member_names: list[str] = []
    member_map: dict[str, Any] = {}
    value2member: dict[Any, Any] = {}
    body["_new_member_"] = new_member
    body["_use_args_"] = use_args
    body["_member_names_"] = member_names
    body["_member_map_"] = member_map
    body["_value2member_map_"] = value2member
    body["_unhashable_values_"] = []
    body["_member_type_"] = member_type
    body["_value_repr_"] = value_repr
    if is_flag:
        body["_boundary_"] = etype._boundary_
        body["_flag_mask_"] = body["_singles_mask_"] = body["_all_bits_"] = 0
        body["_inverted_"] = None
    enum_class: Any = type.__new__(enum.EnumType, cls, (etype,), body)
    flag_mask = singles = 0
    is_object = member_type is object
    noop_init = enum_class.__init__ is _ENUM_INIT
    for name, given in members:
        member = new_member(enum_class, given) if use_args else new_member(enum_class)
        attrs = member.__dict__  # as setattr would (no class of these bases has _value_ or __setattr__)
        if "_value_" not in attrs:
            attrs["_value_"] = given if is_object else member_type(given)
        value = attrs["_value_"]
        attrs["_name_"] = name
        attrs["__objclass__"] = enum_class
        if not noop_init:
            member.__init__(given)
        attrs["_sort_order_"] = len(member_names)
        if is_flag:
            flag_mask |= value
            single = value != 0 and value & (value - 1) == 0
            if single:
                singles |= value
        canonical = value2member.get(value)
        if canonical is not None:
            member = canonical
        elif not is_flag or single:
            member_names.append(name)
        _enum_setattr(enum_class, name, member)
        member_map[name] = member
        value2member.setdefault(value, member)
    if is_flag:
        _enum_setattr(enum_class, "_flag_mask_", flag_mask)
        _enum_setattr(enum_class, "_singles_mask_", singles)
        _enum_setattr(enum_class, "_all_bits_", 2 ** (flag_mask.bit_length()) - 1)
    own = enum_class.__dict__
    for name in _FIXUPS:
        if name not in own:
            found = getattr(enum_class, name)
            if found is getattr(member_type, name) or found is getattr(object, name):
                _enum_setattr(enum_class, name, getattr(etype, name))
    if is_flag:
        for name in _FLAG_OPS:
            if name not in own:
                _enum_setattr(enum_class, name, getattr(enum.Flag, name))
    _enum_setattr(enum_class, "__new__", enum.Enum.__new__)
    if is_flag:
        values = [m._value_ for m in enum_class]
        if values != sorted(values):
            _enum_setattr(enum_class, "_iter_member_", enum_class._iter_member_by_def_)
    return enum_class


class _EnumType(enum.EnumType):
    """The metaclass of this module's bases: builds a subclass of one of them as a subclass of the
    standard enum behind it (module docstring)."""

    @classmethod
    def __prepare__(metacls, cls: str, bases: tuple[type, ...], **kwds: Any) -> Any:  # type: ignore[override]
        std = tuple(_STANDARD.get(b, b) for b in bases)
        if not FAST or kwds or len(std) != 1 or std == bases:
            return enum.EnumType.__prepare__(cls, std if std != bases else bases, **kwds)
        base: Any = std[0]
        return {"_generate_next_value_": base._generate_next_value_}

    def __new__(metacls, cls: str, bases: tuple[type, ...], classdict: Any, **kwds: Any) -> Any:
        std = tuple(_STANDARD.get(b, b) for b in bases)
        if std == bases:  # one of the bases below
            return super().__new__(metacls, cls, bases, classdict, **kwds)
        if type(classdict) is dict:  # a plain body (__prepare__)
            made = _build(std[0], cls, classdict)
            if made is not None:
                return made
            standard = enum.EnumType.__prepare__(cls, std, **kwds)
            for name, value in classdict.items():
                if name != "_generate_next_value_":
                    standard[name] = value
            classdict = standard
        return enum.EnumType.__new__(enum.EnumType, cls, std, classdict, **kwds)


class Enum(enum.Enum, metaclass=_EnumType):
    """``enum.Enum``, built faster (module docstring)."""


class IntEnum(enum.IntEnum, metaclass=_EnumType):
    """``enum.IntEnum``, built faster (module docstring)."""


class IntFlag(enum.IntFlag, metaclass=_EnumType):
    """``enum.IntFlag``, built faster (module docstring)."""


class StrEnum(enum.StrEnum, metaclass=_EnumType):
    """``enum.StrEnum``, built faster (module docstring)."""


_STANDARD.update({Enum: enum.Enum, IntEnum: enum.IntEnum, IntFlag: enum.IntFlag, StrEnum: enum.StrEnum})
