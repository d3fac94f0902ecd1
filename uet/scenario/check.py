"""Validation of a scenario's tables against the configuration dataclasses, once, in the
launching process (issue 14: a bad ``[endpoint]`` key used to crash every endpoint process
with a traceback; a typo in ``[run]`` was silently ignored).

:func:`check_dataclass` follows the dataclass itself (``dataclasses.fields`` and the field's type
hint), so a field added to :class:`uet.EndpointConfig` or :class:`uet.pds.PdsConfig` is accepted
and checked without a change here:

* a key that is not a field is refused, naming the key and the valid ones;
* a nested dataclass field takes a table and is checked the same way;
* a value must have the field's type (``bool`` for bool, a whole number for int — ``100e6`` is
  accepted for an int field, TOML writes it as a float —, a number for float, text for str;
  ``None`` only where the hint allows it); fields whose hint is another kind (a callable, a
  mapping) are passed as they are;
* a whole-number field is never negative (**decision**: every integer of these configurations is
  a size, a count, a time or an identifier);
* then the dataclass is built, so its own ``__post_init__`` range checks run here too, and their
  message becomes the error.

Every error is a :class:`ScenarioError` (one line; a tool prints it and exits with status 2).
"""

from __future__ import annotations

import builtins
import dataclasses
import sys
import types
import typing
from typing import Any

from uet.errors import UetError

__all__ = ["ScenarioError", "check_dataclass", "describe_keys"]


class ScenarioError(UetError, ValueError):
    """A mistake in a scenario (its file, tables or the options laid over them), in one line that
    names the table and key."""


def describe_keys(names: typing.Iterable[str]) -> str:
    """``a, b, c`` (sorted), for "valid keys: ..." messages."""
    return ", ".join(sorted(names))


def type_hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, the same hints, without compiling the annotations' texts when
    each is a name or names joined by ``|`` that are classes (``int``, ``int | None``,
    ``PdsConfig``): those are looked up as ``get_type_hints`` evaluates them (the defining module's
    names, then the class's, then the builtins) and joined as ``|`` joins them. ``get_type_hints``
    compiles each text it evaluates (``typing.ForwardRef``), and the first ``compile()`` of a
    process sets up the syntax tree's types (about 9 M instructions, with the compiles about a
    fiftieth of a one-flow ``uet-sim`` run, issue 28). A class with any other annotation, or one
    whose lookup fails, gets ``get_type_hints`` itself (which then raises as it does)."""
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        ann = base.__dict__.get("__annotations__", {})
        if not isinstance(ann, dict):
            return typing.get_type_hints(cls)
        module = getattr(sys.modules.get(base.__module__, None), "__dict__", {})
        names = vars(base)
        for name, text in ann.items():
            hint = _simple_hint(text, module, names) if isinstance(text, str) else None
            if hint is None:
                return typing.get_type_hints(cls)
            hints[name] = hint
    return hints


def _simple_hint(text: str, module: dict[str, Any], names: Any) -> Any:
    """The class or union of classes ``text`` names (:func:`type_hints`), or None."""
    values: list[Any] = []
    for word in text.split(" | "):
        if word == "None":
            values.append(None)
            continue
        if not word.isidentifier():
            return None
        for space in (module, names, builtins.__dict__):
            if word in space:
                value = space[word]
                if type(value) is not type:
                    return None
                values.append(value)
                break
        else:
            return None
    if len(values) == 1:
        return type(None) if values[0] is None else values[0]
    out = values[0]
    for value in values[1:]:
        out = out | value  # as the text's ``A | B | C`` evaluates, left to right
    return out


def _hint_types(hint: Any) -> tuple[set[type], bool] | None:
    """(accepted scalar types, None allowed) of a field's type hint; None when not a scalar hint."""
    allow_none = False
    args: tuple[Any, ...]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
    else:
        args = (hint,)
    out: set[type] = set()
    for a in args:
        if a is type(None):
            allow_none = True
        elif a in (bool, int, float, str):
            out.add(a)
        else:
            return None
    return out, allow_none


def _check_value(where: str, value: Any, hint: Any) -> Any:
    spec = _hint_types(hint)
    if spec is None:
        return value
    kinds, allow_none = spec
    if value is None:
        if allow_none:
            return None
        raise ScenarioError(f"{where}: a value is required")
    if bool in kinds and isinstance(value, bool):
        return value
    if int in kinds and not isinstance(value, bool):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int):
            if value < 0:
                raise ScenarioError(f"{where} = {value}: must not be negative")
            return value
    if float in kinds and isinstance(value, int | float) and not isinstance(value, bool):
        if value != value or value in (float("inf"), float("-inf")) or value < 0:
            raise ScenarioError(f"{where} = {value}: must be a finite number, not negative")
        return float(value)
    if str in kinds and isinstance(value, str):
        return value
    names = " or ".join(
        {"bool": "true/false", "int": "a whole number", "float": "a number", "str": "text"}[k.__name__]
        for k in sorted(kinds, key=lambda k: k.__name__)
    )
    raise ScenarioError(f"{where} = {value!r}: expected {names}")


def check_dataclass(obj: Any, table: dict[str, Any], where: str) -> Any:
    """``obj`` (a dataclass instance: the defaults) with ``table`` applied, every key and value
    checked (module docstring); ``where`` names the table in messages (``[endpoint]``)."""
    if not isinstance(table, dict):
        raise ScenarioError(f"{where} must be a table of keys, not {table!r}")
    fields = {f.name: f for f in dataclasses.fields(obj) if f.init}
    try:
        hints = type_hints(type(obj))
    except Exception:  # a hint naming a type only imported for type checking: no type checks
        hints = {}
    changes: dict[str, Any] = {}
    for key, value in table.items():
        if key not in fields:
            raise ScenarioError(f"{where}: unknown key {key!r}; valid keys: {describe_keys(fields)}")
        cur = getattr(obj, key)
        sub = f"{where[:-1]}.{key}]" if where.endswith("]") else f"{where}.{key}"
        if dataclasses.is_dataclass(cur) and not isinstance(cur, type):
            changes[key] = check_dataclass(cur, value, sub)
        else:
            changes[key] = _check_value(f"{where} {key}", value, hints.get(key))
    try:
        return dataclasses.replace(obj, **changes)
    except (ValueError, TypeError, OverflowError) as e:
        raise ScenarioError(f"{where}: {e}") from None
    except UetError as e:
        raise ScenarioError(f"{where}: {e}") from None
