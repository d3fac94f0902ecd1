"""Package names imported on first use (PEP 562), written once for every package that offers them.

A package whose ``__init__`` re-exports names from heavy modules (cryptography behind TSS, the RoCEv2
queue pair, the asyncio endpoint) lists them as ``{name: module}`` and sets::

    __getattr__, __dir__ = lazy_names(__name__, _LAZY)

so ``from package import Name`` works exactly as before while ``import package.light_module`` (and
every tool start-up that needs only that module) no longer loads the others. The names stay visible
to type checkers through ``if TYPE_CHECKING:`` imports of the same names.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package`` that import each of ``names``
    (name → defining module) on first use and keep it in the package's namespace."""
    space = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        mod = names.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(mod), name)
        space[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(space) | set(names))

    return __getattr__, __dir__
