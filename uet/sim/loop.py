"""An asyncio event loop whose clock is the engine's virtual clock.

**Design** (the simulator's driver for workloads): workloads are coroutines written against
:mod:`uet.transport`; in the simulator they run on :class:`VirtualTimeLoop`, an asyncio event loop
with no I/O at all:

* ``loop.time()`` is the engine's clock (``Engine.now`` ns as seconds), so ``loop.time()``,
  ``asyncio.sleep`` and ``asyncio.wait_for`` timeouts all run in virtual time;
* where a normal loop blocks in ``select(timeout)``, this one runs the engine instead
  (:meth:`Engine.step`) up to the loop's next timer — or only the current instant when callbacks
  are ready — and stops early as soon as a core emitted events, whose callbacks
  (:class:`~uet.sim.endpoint.SimEndpoint` resolving futures) the loop then runs. So the clock
  *jumps* to the next deadline when every coroutine waits, and asyncio wakes only on completions,
  not per packet;
* when every coroutine waits and neither the engine nor the loop has anything left to happen,
  the run can never finish: :class:`~uet.sim.engine.SimulationError` is raised out of
  ``run_until_complete`` instead of hanging.

The loop subclasses :class:`asyncio.BaseEventLoop` (the selector-free base of every asyncio loop)
with a "selector" that is the engine; no socket, pipe or thread is created, and
``call_soon_threadsafe`` from another thread is not supported.
"""

from __future__ import annotations

import asyncio
import math
from asyncio import base_events
from typing import Any

from uet.sim.engine import Engine, SimulationError

__all__ = ["VirtualTimeLoop"]


class _EngineSelector:
    """Stands where a selector would: ``select(timeout)`` advances the engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def select(self, timeout: float | None) -> list[Any]:
        eng = self.engine
        if timeout is None:
            if not eng.step(None):
                raise SimulationError(f"stalled at t = {eng.now} ns: every task waits and nothing is left to happen")
            return []
        limit = eng.now + math.ceil(timeout * 1e9) if timeout > 0 else eng.now
        eng.step(limit)
        return []

    def close(self) -> None:
        pass


class VirtualTimeLoop(base_events.BaseEventLoop):
    """See the module docstring; ``engine`` supplies the clock and the work."""

    def __init__(self, engine: Engine) -> None:
        super().__init__()
        self.engine = engine
        self._selector = _EngineSelector(engine)
        self._clock_resolution = 1e-9

    def time(self) -> float:
        return self.engine.now / 1e9

    def _process_events(self, event_list: list[Any]) -> None:
        pass

    def _write_to_self(self) -> None:
        pass

    def close(self) -> None:
        super().close()
        self._selector = None  # type: ignore[assignment]


def run(engine: Engine, coro: Any) -> Any:
    """Run ``coro`` to completion on a fresh :class:`VirtualTimeLoop` over ``engine``."""
    loop = VirtualTimeLoop(engine)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
