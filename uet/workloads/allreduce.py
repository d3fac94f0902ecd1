"""``allreduce``: the all-reduce of the collective library under its historical workload name.

The run that used to be a step-synchronous ring (one message per step, each step waiting for the
whole previous one) is now the library's all-reduce (:mod:`uet.workloads.collective`): by default
NCCL's pipelined ring (channels, slices, rounds in flight), ``algorithm = "tree"`` or
``"hierarchical"`` for the others, with every parameter of the ``collective`` workload. A scenario
that says ``workload = "allreduce"`` runs as it did — every rank sends its right neighbour, one
flow per rank, the reduced vector checked on every rank — only faster.
"""

from __future__ import annotations

from uet.workloads.collective import Collective

__all__ = ["RingAllReduce"]


class RingAllReduce(Collective):
    """The ``collective`` workload with ``op = "allreduce"`` (the default op), named ``allreduce``."""

    name = "allreduce"

    def __init__(self, n: int, **kw: object) -> None:
        super().__init__(n, **kw)
        if self.op != "allreduce":
            raise ValueError(f"workload allreduce: op = {self.op!r}: use workload collective for other ops")
