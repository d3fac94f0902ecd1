"""The simulator's endpoint: a :class:`~uet.fep.FepCore` behind the transport contract.

:class:`SimEndpoint` implements :class:`uet.transport.Transport` the way :class:`uet.Endpoint`
does live — handles become futures — but its "link" is the engine: an operation calls the core,
marks the host for a flush at the current virtual instant (:meth:`Engine.touch`) and awaits the
future its handle's completion event resolves. Like the live adapter it decides nothing about
protocol: every decision is the core's.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from uet.fep import Closed, FepCore, MessageReceived, OpCompleted, OpFailed, SendCompleted, WriteCompleted
from uet.ses.memory import Access, MemoryRegion
from uet.ses.message import Message
from uet.sim.engine import Engine, Host

if TYPE_CHECKING:
    from uet.roce.core import RoceCore

__all__ = ["SimEndpoint"]


class SimEndpoint:
    """One FEP core on one engine host (see the module docstring)."""

    def __init__(self, engine: Engine, host: Host) -> None:
        self.engine = engine
        self.host = host
        self.core: FepCore | RoceCore = host.core
        self.address = host.core.address
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._writes: list[WriteCompleted] = []
        self._write_waiters: list[asyncio.Future[WriteCompleted]] = []
        self._closed: asyncio.Future[bool] | None = None
        host.on_event = self._on_event

    def __repr__(self) -> str:
        return f"SimEndpoint({self.address!r})"

    # -- plumbing -----------------------------------------------------------------------------------

    def _on_event(self, ev: Any) -> None:
        if isinstance(ev, Closed):
            if self._closed is not None and not self._closed.done():
                self._closed.set_result(ev.graceful)
            return
        if isinstance(ev, WriteCompleted):
            while self._write_waiters:
                w = self._write_waiters.pop(0)
                if not w.done():
                    w.set_result(ev)
                    return
            self._writes.append(ev)
            return
        fut = self._futures.pop(ev.handle, None)
        if fut is None or fut.done():
            return
        if isinstance(ev, OpFailed):
            fut.set_exception(ev.error)
        elif isinstance(ev, MessageReceived):
            fut.set_result(ev.message)
        elif isinstance(ev, OpCompleted):
            fut.set_result(ev.value)
        elif isinstance(ev, SendCompleted):
            fut.set_result(None)

    def _wait(self, handle: int) -> asyncio.Future[Any]:
        fut = asyncio.get_running_loop().create_future()
        self._futures[handle] = fut
        self.engine.touch(self.host)
        return fut

    def _start(self) -> FepCore | RoceCore:
        core = self.core
        core.tick(self.engine.now)
        return core

    # -- the transport contract ---------------------------------------------------------------------

    async def send(
        self,
        peer: str,
        data: bytes | bytearray | memoryview,
        *,
        tag: int | None = None,
        header_data: int | None = None,
        **options: Any,
    ) -> None:
        """Send one message (``options``: those of :meth:`FepCore.send`)."""
        await self._wait(self._start().send(peer, data, tag=tag, header_data=header_data, **options))

    async def recv(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message:
        core = self._start()
        m = core.recv_nowait(tag, ignore, source=source)
        if m is not None:
            return m
        return await self._wait(core.post_recv(None, tag=tag, ignore=ignore, source=source))

    async def recv_into(
        self,
        buffer: bytearray | memoryview,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> Message:
        h = self._start().post_recv(buffer, tag=tag, ignore=ignore, source=source, truncate=truncate)
        return await self._wait(h)

    def register(
        self, buffer: Any, access: Access | int = Access.ALL, *, key: int | None = None, **options: Any
    ) -> MemoryRegion:
        return self.core.register(buffer, access, key=key, **options)

    def deregister(self, region: MemoryRegion | int) -> None:
        self.core.deregister(region)

    async def write(
        self,
        peer: str,
        key: int,
        offset: int,
        data: bytes | bytearray | memoryview,
        *,
        header_data: int | None = None,
        **options: Any,
    ) -> None:
        await self._wait(self._start().write(peer, key, offset, data, header_data=header_data, **options))

    async def read(self, peer: str, key: int, offset: int, length: int, **options: Any) -> bytes | memoryview:
        return await self._wait(self._start().read(peer, key, offset, length, **options))

    async def atomic(
        self,
        peer: str,
        key: int,
        offset: int,
        op: Any,
        datatype: Any,
        operand: Any = None,
        *,
        fetch: bool = False,
        **options: Any,
    ) -> Any:
        return await self._wait(self._start().atomic(peer, key, offset, op, datatype, operand, fetch=fetch, **options))

    async def compare_swap(
        self, peer: str, key: int, offset: int, datatype: Any, compare: Any, swap: Any, **options: Any
    ) -> Any:
        return await self._wait(self._start().compare_swap(peer, key, offset, datatype, compare, swap, **options))

    async def next_write(self) -> WriteCompleted:
        """The next remote write with header data that landed here (waits in virtual time)."""
        if self._writes:
            return self._writes.pop(0)
        fut: asyncio.Future[WriteCompleted] = asyncio.get_running_loop().create_future()
        self._write_waiters.append(fut)
        return await fut

    async def close(self) -> None:
        """The core's close sequence, in virtual time."""
        core = self.core
        if core.closed:
            return
        loop = asyncio.get_running_loop()
        if self._closed is None:
            self._closed = loop.create_future()
            core.close(self.engine.now)
            self.engine.touch(self.host)
        await self._closed

    @property
    def counters(self) -> dict[str, int]:
        return self.core.counters()
