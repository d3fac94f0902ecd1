"""The simulator's endpoint: a :class:`~uet.fep.FepCore` behind the transport contract.

:class:`SimEndpoint` implements :class:`uet.transport.Transport` the way :class:`uet.Endpoint`
does live — handles become futures — but its "link" is the engine: an operation calls the core,
marks the host for a flush at the current virtual instant (:meth:`Engine.touch`) and awaits the
future its handle's completion event resolves. Like the live adapter it decides nothing about
protocol: every decision is the core's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uet.adapter import CoreOperations
from uet.fep import Closed, FepCore
from uet.runner import running_loop
from uet.sim.engine import Engine, Host

if TYPE_CHECKING:
    import asyncio

    from uet.roce.core import RoceCore
    from uet.transport import Transport

__all__ = ["SimEndpoint"]


class SimEndpoint(CoreOperations[str]):
    """One FEP core on one engine host (see the module docstring). Futures and operations are
    :mod:`uet.adapter`'s, as the live adapters' are; the engine is the driver."""

    def __init__(self, engine: Engine, host: Host) -> None:
        self.engine = engine
        self.host = host
        self.core: FepCore | RoceCore = host.core
        self._opcore = self.core
        self.address = host.core.address
        self._init_completions()
        self._close_future: asyncio.Future[bool] | None = None
        self._graceful = True
        host.on_event = self._on_sim_event

    def __repr__(self) -> str:
        return f"SimEndpoint({self.address!r})"

    # -- plumbing -----------------------------------------------------------------------------------

    def _on_sim_event(self, ev: Any) -> None:
        if type(ev) is Closed:
            self._graceful = ev.graceful
        self._on_event(ev)

    def _posted(self) -> None:
        self.engine.touch(self.host)

    def _finish_close(self) -> None:
        self._closed = True
        self._fail_waiting()
        if self._close_future is not None and not self._close_future.done():
            self._close_future.set_result(self._graceful)

    def _start(self) -> FepCore | RoceCore:
        core = self.core
        core.tick(self.engine.now)
        return core

    async def close(self) -> None:
        """The core's close sequence, in virtual time."""
        core = self.core
        if core.closed:
            return
        loop = running_loop()
        if self._close_future is None:
            self._close_future = loop.create_future()
            core.close(self.engine.now)
            self.engine.touch(self.host)
        await self._close_future

    @property
    def counters(self) -> dict[str, int]:
        return self.core.counters()


if TYPE_CHECKING:  # mypy checks the adapter against the transport contract (uet.transport)
    _CONTRACT: type[Transport] = SimEndpoint
