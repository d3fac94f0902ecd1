"""The live adapters' clock: real time mapped to virtual time by one time-dilation factor.

A live run of many Python processes on a few cores cannot forward a fabric's packets at its link
rates in real time: the processes fall behind, frames wait in kernel socket queues outside the
model, timers fire late, and the figures measure the CPU instead of the network. Time dilation
(Gupta et al., "To Infinity and Beyond: Time-Warped Network Emulation", NSDI 2006; DieCast, NSDI
2008) slows the emulated world down instead: every process of a run maps real time to virtual time
with one factor ``TDF`` (time-dilation factor) from one shared start instant,

    virtual = start + (real − start) / TDF,

so one virtual second lasts TDF real seconds; link rates, delays and protocol timers are virtual,
and the CPU only has to keep up with the packet rate divided by TDF.

:class:`DilatedClock` is that mapping, written once. The sans-I/O cores never see it: they take
virtual ``now`` as they always did. The adapters (:class:`uet.Endpoint`,
:class:`uet.roce_endpoint.RoceEndpoint` through :class:`uet.adapter.CoreDriver`,
:class:`uet.link.fabric.FabricLink`, the switch process :class:`uet.fabric.switch.FabricProcess`)
read virtual ``now`` from it and turn a virtual deadline into the real instant (or real delay) at
which to fire their timer. With the factor 1 it is the plain monotonic clock. Every process of a
``uet-run`` gets the same ``start_ns`` and factor from the launcher (:meth:`DilatedClock.spec`);
``CLOCK_MONOTONIC`` is one clock for every process of a machine, so their virtual times agree.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["DilatedClock", "ns_to_seconds"]


def ns_to_seconds(ns: float) -> float:
    """A duration in nanoseconds as seconds: the undilated clock's real delay."""
    return ns / 1e9


class DilatedClock:
    """``virtual = start + (real − start) / factor`` in integer nanoseconds (module docstring).

    ``factor``: the time-dilation factor (≥ 1 in practice; 1 = real time). ``start_ns``: the
    shared start instant on ``real``'s scale (default: now). ``real``: the real clock, integer
    nanoseconds (default :func:`time.monotonic_ns`; a test passes a fake one). Calling the clock
    gives virtual now, so it stands wherever an adapter takes a ``clock`` function.
    """

    __slots__ = ("factor", "start_ns", "real")

    def __init__(
        self, factor: float = 1.0, start_ns: int | None = None, real: Callable[[], int] = time.monotonic_ns
    ) -> None:
        if not factor > 0:
            raise ValueError(f"time-dilation factor {factor!r}: must be above 0")
        self.factor = float(factor)
        self.real = real
        self.start_ns = real() if start_ns is None else int(start_ns)

    def __call__(self) -> int:
        """Virtual now (ns)."""
        return self.virtual(self.real())

    def __repr__(self) -> str:
        return f"DilatedClock(factor={self.factor:g}, start_ns={self.start_ns})"

    def virtual(self, real_ns: int) -> int:
        """The virtual instant of real instant ``real_ns``."""
        s = self.start_ns
        return s + round((real_ns - s) / self.factor)

    def real_at(self, virtual_ns: int) -> int:
        """The real instant at which virtual instant ``virtual_ns`` comes (a timer's expiry)."""
        s = self.start_ns
        return s + round((virtual_ns - s) * self.factor)

    def real_delay(self, virtual_ns: float) -> float:
        """Real seconds that a virtual duration of ``virtual_ns`` nanoseconds lasts."""
        return virtual_ns * self.factor / 1e9

    def virtual_seconds(self, real_s: float) -> float:
        """The virtual duration of ``real_s`` real seconds."""
        return real_s / self.factor

    def seconds(self) -> float:
        """Virtual now in seconds (the workloads' clock, :meth:`uet.workloads.Workload.run`)."""
        return self() / 1e9

    def spec(self) -> dict[str, Any]:
        """What the launcher hands every process: ``{"start_ns", "factor"}``."""
        return {"start_ns": self.start_ns, "factor": self.factor}

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> DilatedClock:
        """The clock :meth:`spec` describes (None: real time, factor 1, started now)."""
        if not spec:
            return cls()
        return cls(float(spec.get("factor", 1.0)), int(spec["start_ns"]) if "start_ns" in spec else None)
