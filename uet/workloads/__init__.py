"""Workloads written once against :mod:`uet.transport`, run by ``uet-run`` (live) and ``uet-sim``.

``make(name, n, message_bytes=..., messages=..., seed=..., params=...)`` builds one by name
(:data:`WORKLOADS`), ``from_spec`` from its :meth:`Workload.spec`;
:mod:`uet.workloads.report` turns the ranks' reports into per-flow and per-run results.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uet.workloads.allreduce import RingAllReduce
from uet.workloads.base import Flow, FlowReport, RankReport, RxReport, Workload, message_data
from uet.workloads.collective import Collective
from uet.workloads.patterns import AllToAll, Incast, IncastVictim, Pairs, Permutation
from uet.workloads.training import Training

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

#: Workload classes by name.
WORKLOADS: dict[str, type[Workload]] = {
    w.name: w for w in (Incast, Pairs, Permutation, AllToAll, IncastVictim, RingAllReduce, Collective, Training)
}


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
