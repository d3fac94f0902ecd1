"""Workloads written once against :mod:`uet.transport`, run by ``uet-run`` (live) and ``uet-sim``.

``make(name, n, message_bytes=..., messages=..., seed=...)`` builds one by name (:data:`WORKLOADS`);
:mod:`uet.workloads.report` turns the ranks' reports into per-flow and per-run results.
"""

from __future__ import annotations

from uet.workloads.allreduce import RingAllReduce
from uet.workloads.base import Flow, FlowReport, RankReport, RxReport, Workload, message_data
from uet.workloads.patterns import AllToAll, Incast, IncastVictim, Pairs, Permutation

__all__ = [
    "WORKLOADS",
    "AllToAll",
    "Flow",
    "FlowReport",
    "Incast",
    "IncastVictim",
    "Pairs",
    "Permutation",
    "RankReport",
    "RingAllReduce",
    "RxReport",
    "Workload",
    "make",
    "message_data",
]

#: Workload classes by name.
WORKLOADS: dict[str, type[Workload]] = {
    w.name: w for w in (Incast, Pairs, Permutation, AllToAll, IncastVictim, RingAllReduce)
}


def make(name: str, n: int, *, message_bytes: int = 65536, messages: int = 1, seed: int = 0) -> Workload:
    """The workload ``name`` over ``n`` ranks (ValueError for an unknown name or bad sizes)."""
    cls = WORKLOADS.get(name)
    if cls is None:
        raise ValueError(f"unknown workload {name!r}; one of {', '.join(WORKLOADS)}")
    return cls(n, message_bytes=message_bytes, messages=messages, seed=seed)
