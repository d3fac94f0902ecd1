"""The one rule of the project's state tables (h11 ``_state.py``): a move ``old → new`` is legal
only when ``table[old]`` lists ``new`` (with the cause written beside it); anything else raises,
it is never ignored. The tables live beside their state machines (:mod:`uet.pds.states`,
:mod:`uet.ses.opstate`, :mod:`uet.tss.domain`), each layer raising its own error."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

__all__ = ["check_move"]

_State = TypeVar("_State", bound=enum.Enum)


def check_move(
    table: Mapping[_State, Mapping[_State, str]], old: _State, new: _State, error: type[Exception], what: str
) -> _State:
    """``new`` when ``table`` allows ``old → new``, else raise ``error("illegal <what> transition ...")``."""
    if new not in table.get(old, ()):
        raise error(f"illegal {what} transition {old.name} -> {new.name}")
    return new
