"""An asyncio event loop whose clock is the engine's virtual clock.

**Design** (the simulator's driver for workloads): workloads are coroutines written against
:mod:`uet.transport`; in the simulator they run on :class:`VirtualTimeLoop`, an asyncio event loop
that does no I/O for the workloads:

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

**Public APIs only.** The loop is a plain :class:`asyncio.SelectorEventLoop` built with a
:class:`selectors.BaseSelector` of our own (:class:`EngineSelector`) and a ``time()`` override:
both are documented extension points (``SelectorEventLoop(selector)`` and the
:mod:`selectors` interface), so no private member of asyncio is touched and a new Python minor
version cannot break it silently. The selector keeps the registrations asyncio makes (the
loop's own wake-up socket pair) but never reports one ready: ``call_soon_threadsafe`` from
another thread is therefore not supported, as no thread exists in a simulation.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Mapping
from typing import Any

from uet.sim.engine import Engine, SimulationError

__all__ = ["EngineSelector", "VirtualTimeLoop", "run"]


class _Keys(Mapping[Any, selectors.SelectorKey]):
    """The read-only file-object → key view :meth:`selectors.BaseSelector.get_map` returns."""

    def __init__(self, keys: dict[Any, selectors.SelectorKey]) -> None:
        self._keys = keys

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, fileobj: Any) -> selectors.SelectorKey:
        return self._keys[fileobj]

    def __iter__(self) -> Any:
        return iter(self._keys)


class EngineSelector(selectors.BaseSelector):
    """Stands where a selector would: ``select(timeout)`` advances the engine.

    ``timeout`` is the loop's time to its next timer in (virtual) seconds: the engine runs up to
    that instant, or only the current one for ``0``; ``None`` (no timer at all) runs the engine
    until it has something for the loop and raises :class:`SimulationError` when it has nothing
    left, since then no coroutine can ever wake. No file object is ever reported ready.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._keys: dict[Any, selectors.SelectorKey] = {}

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        if not events or events & ~(selectors.EVENT_READ | selectors.EVENT_WRITE):
            raise ValueError(f"invalid events: {events!r}")
        if fileobj in self._keys:
            raise KeyError(f"{fileobj!r} is already registered")
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fileobj] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        try:
            return self._keys.pop(fileobj)
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        eng = self.engine
        if timeout is None:
            if not eng.step(None):
                raise SimulationError(f"stalled at t = {eng.now} ns: every task waits and nothing is left to happen")
            return []
        limit = eng.now + math.ceil(timeout * 1e9) if timeout > 0 else eng.now
        eng.step(limit)
        return []

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return _Keys(self._keys)

    def close(self) -> None:
        self._keys.clear()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """See the module docstring; ``engine`` supplies the clock and the work."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(EngineSelector(engine))
        self.engine = engine

    def time(self) -> float:
        return self.engine.now / 1e9


def run(engine: Engine, coro: Any) -> Any:
    """Run ``coro`` to completion on a fresh :class:`VirtualTimeLoop` over ``engine``."""
    loop = VirtualTimeLoop(engine)
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro)
    finally:
        asyncio.set_event_loop(None)
        loop.close()
