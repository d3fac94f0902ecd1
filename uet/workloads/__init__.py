"""Workloads written once against :mod:`uet.transport`, run by ``uet-run`` (live) and ``uet-sim``.

``make(name, n, message_bytes=..., messages=..., seed=..., params=...)`` builds one by name
(:data:`WORKLOADS`), ``from_spec`` from its :meth:`Workload.spec`;
:mod:`uet.workloads.report` turns the ranks' reports into per-flow and per-run results.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from importlib import import_module
from typing import TYPE_CHECKING, Any

from uet.lazy import lazy_names
from uet.workloads.base import Flow, FlowReport, RankReport, RxReport, Workload, message_data
from uet.workloads.patterns import AllToAll, Incast, IncastVictim, Pairs, Permutation

if TYPE_CHECKING:  # pragma: no cover
    from uet.workloads.allreduce import RingAllReduce
    from uet.workloads.collective import Collective
    from uet.workloads.training import Training

# Imported on first use (PEP 562, and by WORKLOADS on first lookup): the collective workloads bring
# the collective library (algorithms, schedules, their executor), which a run of another never needs.
_LAZY = {
    "Collective": "uet.workloads.collective",
    "RingAllReduce": "uet.workloads.allreduce",
    "Training": "uet.workloads.training",
}

__all__ = [
    "WORKLOADS",
    "AllToAll",
    "Collective",
    "Flow",
    "FlowReport",
    "Incast",
    "IncastVictim",
    "Pairs",
    "Permutation",
    "RankReport",
    "RingAllReduce",
    "RxReport",
    "Training",
    "Workload",
    "from_spec",
    "make",
    "message_data",
]


class _Registry(MutableMapping[str, type[Workload]]):
    """Workload classes by name, a dict to its users; an entry given as the name of a lazy class
    (:data:`_LAZY`) is imported on its first lookup."""

    def __init__(self, entries: dict[str, type[Workload] | str]) -> None:
        self._entries = entries

    def __getitem__(self, name: str) -> type[Workload]:
        cls = self._entries[name]
        if isinstance(cls, str):
            cls = self._entries[name] = getattr(import_module(_LAZY[cls]), cls)
        return cls

    def __setitem__(self, name: str, cls: type[Workload]) -> None:
        self._entries[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


#: Workload classes by name (each class's ``name``).
WORKLOADS: MutableMapping[str, type[Workload]] = _Registry(
    {
        Incast.name: Incast,
        Pairs.name: Pairs,
        Permutation.name: Permutation,
        AllToAll.name: AllToAll,
        IncastVictim.name: IncastVictim,
        "allreduce": "RingAllReduce",
        "collective": "Collective",
        "training": "Training",
    }
)


def make(
    name: str,
    n: int,
    *,
    message_bytes: int = 65536,
    messages: int = 1,
    seed: int = 0,
    params: Mapping[str, Any] | None = None,
) -> Workload:
    """The workload ``name`` over ``n`` ranks with its own ``params`` (ValueError for an unknown
    name, bad sizes or a bad parameter, naming it)."""
    cls = WORKLOADS.get(name)
    if cls is None:
        raise ValueError(f"unknown workload {name!r}; one of {', '.join(WORKLOADS)}")
    return cls(n, message_bytes=message_bytes, messages=messages, seed=seed, params=params)


def from_spec(spec: Mapping[str, Any]) -> Workload:
    """The workload :meth:`Workload.spec` describes (how the live engine hands one to its processes)."""
    wl = make(
        str(spec["name"]),
        int(spec["n"]),
        message_bytes=int(spec["message_bytes"]),
        messages=int(spec["messages"]),
        seed=int(spec["seed"]),
        params=spec.get("params"),
    )
    if spec.get("servers"):
        wl.place([[int(r) for r in s] for s in spec["servers"]])
    return wl


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
