"""The virtual time a simulator run needs, estimated as the run goes (:func:`estimate_ns`).

The estimate is the larger of the lower bound from the workload's bytes and the bottleneck rates
(:func:`uet.sim.scenario.virtual_bound_ns`: the busiest host link's frames at its rate, or the
longest flow's ideal completion time) and the extrapolation from the payload received so far
(virtual time × total bytes / bytes received: messages completed / total when nothing better is
known), once :data:`EXTRAPOLATE_FROM` of the payload arrived or the run is past the bound. Once the
run is past every estimate it is None (no estimate rather than a wrong one). The progress display
(``uet-sim``'s line on stderr) is in tools/sim_progress.py.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["EXTRAPOLATE_FROM", "Progress", "estimate_ns"]


class Progress(NamedTuple):
    """What ``simulate``'s ``on_progress`` is told as the run goes: the virtual clock, the messages
    and payload bytes received whole so far and in all, and
    :func:`~uet.sim.scenario.virtual_bound_ns`."""

    now_ns: int
    messages: int
    messages_total: int
    bytes: int
    bytes_total: int
    bound_ns: int


#: the share of the payload received from which the extrapolation counts while the run is still
#: within the bound (before, the first messages' start-up latency inflates it many times)
EXTRAPOLATE_FROM = 0.05


def estimate_ns(p: Progress) -> int | None:
    """The virtual time the run needs (module docstring), or None once the run is past it."""
    est = p.bound_ns
    if p.bytes_total and p.bytes:
        done = p.bytes / p.bytes_total
    elif p.messages_total:
        done = p.messages / p.messages_total
    else:
        done = 0.0
    if done >= EXTRAPOLATE_FROM or (done > 0 and est <= p.now_ns):
        est = max(est, round(p.now_ns / done))
    return est if est > p.now_ns else None
