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

from uet.sim.endpoint import SimEndpoint
from uet.sim.engine import Engine, Host, SimulationError
from uet.sim.loop import VirtualTimeLoop

__all__ = ["Engine", "Host", "SimEndpoint", "SimulationError", "VirtualTimeLoop"]
