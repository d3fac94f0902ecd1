"""The virtual-time simulator: many FEP cores and the fabric model in one process, no sockets.

* :mod:`uet.sim.engine` — :class:`Engine`: the integer-nanosecond clock, the cores, the fabric;
* :mod:`uet.sim.loop` — :class:`VirtualTimeLoop`: asyncio on the engine's clock, so workload
  coroutines written against :mod:`uet.transport` run unchanged;
* :mod:`uet.sim.endpoint` — :class:`SimEndpoint`: a FEP core behind the transport contract;
* :mod:`uet.sim.scenario` — :func:`simulate`: a workload on a topology, with results, CPU time
  and speed;
* :mod:`uet.sim.runs` — :func:`~uet.sim.runs.simulate_runs`: a scenario's run on each of its
  transports in ``uet-run``'s result shape (``uet-sim`` and ``uet-run --engine sim``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uet.lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover
    from uet.sim.endpoint import SimEndpoint
    from uet.sim.engine import Engine, Host, SimulationError
    from uet.sim.loop import VirtualTimeLoop

# Imported on first use (PEP 562): a light submodule (uet.sim.gcpolicy, which ``uet-sim --version``
# imports) runs this file first, and these load the endpoint cores.
_LAZY = {
    "Engine": "uet.sim.engine",
    "Host": "uet.sim.engine",
    "SimEndpoint": "uet.sim.endpoint",
    "SimulationError": "uet.sim.engine",
    "VirtualTimeLoop": "uet.sim.loop",
}

__all__ = ["Engine", "Host", "SimEndpoint", "SimulationError", "VirtualTimeLoop"]

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
