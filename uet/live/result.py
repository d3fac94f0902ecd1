"""What a live run's result says beyond its flows: the settings it ran with, the endpoints'
event-loop lateness, and whether the processes were short of CPU rather than the network of
capacity (:func:`cpu_starvation`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from uet.lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover
    from uet.scenario.model import settings_record, transports

__all__ = [
    "KERNEL_QUEUE_NOTE",
    "LATE_TIMER_US",
    "cpu_starvation",
    "endpoint_lag",
    "settings_record",
    "transports",
    "written",
]

#: switch timer lateness (p99, µs) above which the fabric process is taken to be short of CPU: ten
#: frame times of a 1500-byte frame at the realtime profile's 100 Mb/s
LATE_TIMER_US = 1200.0
#: kernel receive queue of a switch host socket (bytes, largest on the sampling grid) from which
#: the report points out the queueing the model did not see: about 170 1500-byte frames, 20 ms at
#: the realtime profile's 100 Mb/s
KERNEL_QUEUE_NOTE = 256 * 1024


def cpu_starvation(result: dict[str, Any]) -> str | None:
    """On the live engine, say when the run was short of CPU rather than of network: the
    endpoints retransmitted although the fabric lost nothing (no drop, no trim: the timeouts were
    spurious, the receivers too slow to acknowledge in time), or the switch process's departure
    timer ran late (its p99 lateness above :data:`LATE_TIMER_US`), or frames waited in (or were
    dropped from) the kernel receive queues of the switch process's host sockets, the one buffer
    the model does not see (fabric/kernel_queues.py; from :data:`KERNEL_QUEUE_NOTE`). None when
    none holds."""
    fab = result.get("fabric") or {}
    kq = result.get("switch_kernel") or {}
    kdrops = int(kq.get("rx_drops", 0) or 0)
    loss = int(fab.get("drops", 0) or 0) + int(fab.get("trims", 0) or 0) + kdrops
    retx = sum(int(f.get("retransmits") or 0) for f in result.get("flows", []))
    late = float((result.get("pacing") or {}).get("p99_us") or 0.0)
    why = []
    if retx and not loss:
        why.append(f"{retx} retransmissions with no loss in the fabric (0 drops, 0 trims): spurious timeouts")
    if late > LATE_TIMER_US:
        why.append(f"the switch timer ran late (p99 {late:.0f} µs)")
    kmax = int(kq.get("rx_queue_max_bytes", 0) or 0)
    if kdrops or kmax >= KERNEL_QUEUE_NOTE:
        why.append(
            f"frames waited up to {kmax // 1024} KiB deep in the switch process's socket queues "
            f"and {kdrops} were dropped there, outside the model"
        )
    if not why:
        return None
    return (
        "CPU starvation: "
        + "; ".join(why)
        + ". The processes were short of CPU, not the network short of capacity: a larger --dilation, fewer "
        "endpoints, a lower --rate or --engine sim (virtual time) give figures of the protocol instead."
    )


def written(folder: str | None, suffix: str) -> list[str]:
    """The files of ``folder`` ending in ``suffix`` (the captures a run wrote), sorted."""
    if not folder or not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(suffix))


def endpoint_lag(lags: Iterable[dict[str, Any]], factor: float) -> dict[str, Any]:
    """The endpoints' event-loop wake-up lateness over a run (uet/live/worker.py's ``lag``
    events): the worst rank's p99 and max, in real µs and in the run's virtual µs (÷ ``factor``)."""
    got = [g for g in lags if g.get("samples")]
    p99 = max((float(g["p99_us"]) for g in got), default=0.0)
    worst = max((float(g["max_us"]) for g in got), default=0.0)
    return {
        "ranks": len(got),
        "p99_us_real": p99,
        "max_us_real": worst,
        "p99_us": round(p99 / factor, 2),
        "max_us": round(worst / factor, 2),
    }


#: :func:`~uet.scenario.model.transports` and :func:`~uet.scenario.model.settings_record`, offered
#: here as before, from the scenario model on first use (a simulator run imports them from there,
#: without this package; this module's own users do not load the scenario model for them)
__getattr__, __dir__ = lazy_names(
    __name__, {"settings_record": "uet.scenario.model", "transports": "uet.scenario.model"}
)
