"""What the adapters of the sans-I/O cores share: futures completed from a core's events, the
one pump and one timer of an asyncio driver, and the transport contract's operations
(architecture.md "FEP core: one sans-I/O object, two drivers"; :mod:`uet.transport`).

:class:`uet.Endpoint` drives a :class:`~uet.fep.FepCore`, :class:`~uet.roce_endpoint.RoceEndpoint`
a :class:`~uet.roce.core.RoceCore`, both the same way: an operation posts to the core and waits
on the future of its handle; a batch from the link, a wake-up of the timer or a scheduled pump
lets the core run, sends what it hands out (each adapter's own ``_transmit``, the part that
differs), completes futures from its events and re-arms the one timer from ``get_timer()``. The
simulator's :class:`~uet.sim.endpoint.SimEndpoint` completes futures the same way, its engine
being the driver. None of them decides anything about packets or protocol timers.

* :class:`CompletionFutures`: the futures by operation handle, target-side ``WriteCompleted`` for
  :meth:`~CompletionFutures.next_write`, and ``Closed``; the events are the FEP core's
  (:mod:`uet.fep.events`), which :class:`~uet.roce.core.RoceCore` emits too.
* :class:`CoreDriver`: the asyncio pump and timer around a core's ``get_timer()`` /
  ``handle_timer(now)`` / ``next_event()``.
* :class:`CoreOperations`: the contract's operations as "post to the core, await the handle".
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uet.clock import ns_to_seconds
from uet.fep.errors import EndpointClosed
from uet.fep.events import Closed, MessageReceived, OpCompleted, OpFailed, SendCompleted, WriteCompleted
from uet.ses.memory import Access, MemoryRegion
from uet.ses.message import Message

if TYPE_CHECKING:
    from uet.link.base import Link
    from uet.ses.sink import ReceiveSink

__all__ = ["CompletionFutures", "CoreDriver", "CoreOperations"]


class CompletionFutures:
    """Futures of a core's operations, completed from its events (module docstring).

    A subclass calls :meth:`_init_completions`, says in :meth:`_posted` how the core gets to run
    after an operation was posted, and in :meth:`_finish_close` what the ``Closed`` event ends."""

    def _init_completions(self) -> None:
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._writes: deque[WriteCompleted] = deque()
        self._write_waiters: deque[asyncio.Future[WriteCompleted]] = deque()
        self._closed = False

    def _posted(self) -> None:
        """An operation was posted: make the core run soon."""
        raise NotImplementedError

    def _finish_close(self) -> None:
        """The core's close sequence ended (its ``Closed`` event)."""
        raise NotImplementedError

    def _wait(self, handle: int) -> asyncio.Future[Any]:
        """The future of operation ``handle``."""
        fut = self._futures[handle] = asyncio.get_running_loop().create_future()
        self._posted()
        return fut

    def _on_event(self, ev: Any) -> None:
        """Complete the future one event names (dispatched on its exact type: the core's event
        classes are final)."""
        t = type(ev)
        if t is WriteCompleted:
            self._on_write(ev)
        elif t is Closed:
            self._finish_close()
        else:
            fut = self._futures.pop(ev.handle, None)
            if fut is not None and not fut.done():
                if t is SendCompleted:
                    fut.set_result(None)
                elif t is MessageReceived:
                    fut.set_result(ev.message)
                elif t is OpCompleted:
                    fut.set_result(ev.value)
                elif t is OpFailed:
                    fut.set_exception(ev.error)

    def _on_write(self, ev: WriteCompleted) -> None:
        while self._write_waiters:
            f = self._write_waiters.popleft()
            if not f.done():
                f.set_result(ev)
                return
        self._writes.append(ev)

    def _fail_waiting(self) -> None:
        """Fail every future still waiting with :class:`EndpointClosed` (after ``Closed``)."""
        err = EndpointClosed(f"{self} closed")
        for f in (*self._futures.values(), *self._write_waiters):
            if not f.done():
                f.set_exception(err)
        self._futures.clear()
        self._write_waiters.clear()

    async def next_write(self) -> WriteCompleted:
        """The next remote WRITE with header data (immediate) that landed here."""
        if self._writes:
            return self._writes.popleft()
        if self._closed:
            raise EndpointClosed(f"{self} is closed")
        fut: asyncio.Future[WriteCompleted] = asyncio.get_running_loop().create_future()
        self._write_waiters.append(fut)
        return await fut


class CoreDriver(CompletionFutures):
    """The asyncio pump and timer of an adapter (module docstring).

    A subclass sets ``loop``, ``clock`` and ``link``, calls :meth:`_init_driver` with its core and
    implements ``_transmit(now)``: send what the core hands out, then :meth:`_dispatch` and, unless
    closed, :meth:`_arm` with the core's ``get_timer()``. ``clock`` gives the core's ``now`` (ns);
    a dilated one (:class:`uet.clock.DilatedClock`) also says how long a virtual delay lasts in
    real time (``real_delay``), which the timer waits; a plain function is real time."""

    loop: asyncio.AbstractEventLoop
    clock: Callable[[], int]
    link: Link

    def _init_driver(self, core: Any) -> None:
        self._init_completions()
        #: the sans-I/O core: ``get_timer``, ``handle_timer``, ``next_event``
        self._driven = core
        #: real seconds a virtual delay (ns) lasts: the clock's mapping (uet.clock)
        self._real_delay: Callable[[float], float] = getattr(self.clock, "real_delay", ns_to_seconds)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._pump_scheduled = False
        self._closed_future: asyncio.Future[None] | None = None

    def _transmit(self, now: int) -> None:
        raise NotImplementedError

    def _posted(self) -> None:
        self._schedule_pump()

    def _schedule_pump(self) -> None:
        """Let the core send at the next loop iteration."""
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self.loop.call_soon(self._pump)

    def _pump(self) -> None:
        self._pump_scheduled = False
        if not self._closed:
            self._transmit(self.clock())

    def _on_timer(self) -> None:
        """The wake-up: run the core's timers and send what they produced — unless the core's
        earliest deadline is still ahead (it moved later since the wake-up was armed: :meth:`_arm`
        keeps an earlier wake-up rather than re-arming per batch), then only re-arm for it. A
        receiver's coalesced-ACK deadline moves with every batch, so most wake-ups of a bulk
        transfer are such early ones (measured: 855 of 948 at 8 KiB); under uvloop, whose timers
        have millisecond resolution, a deadline under half a millisecond away wakes at the next
        loop iteration, so this path runs repeatedly until the deadline and must stay cheap."""
        self._timer = None
        self._timer_at = None
        if self._closed:
            return
        now = self.clock()
        core = self._driven
        at = core.get_timer()
        if at is None or at > now:
            if at is not None:
                self._timer_at = at
                self._timer = self.loop.call_later(self._real_delay(at - now), self._on_timer)
            return
        core.handle_timer(now)
        self._transmit(now)

    def _arm(self, at: int | None, now: int) -> None:
        """Wake up at the core's earliest deadline ``at``. An earlier or equal wake-up already
        armed is kept (it re-arms when it fires), so a deadline that moves with every batch does
        not cost a timer per batch."""
        if at is None:
            return
        timer = self._timer
        if timer is not None:
            if self._timer_at is not None and self._timer_at <= at:
                return
            timer.cancel()
        self._timer_at = at
        self._timer = self.loop.call_later(self._real_delay(max(0, at - now)), self._on_timer)

    def _dispatch(self) -> None:
        """Complete futures from every event the core has."""
        next_event = self._driven.next_event
        on_event = self._on_event
        ev = next_event()
        while ev is not None:
            on_event(ev)
            ev = next_event()

    async def _close_driven(self, close: Callable[[int], Any]) -> None:
        """Start the core's close sequence once (``close(now)``) and wait until it ended."""
        if self._closed:
            return
        if self._closed_future is None:
            self._closed_future = self.loop.create_future()
            close(self.clock())
            self._schedule_pump()
        await asyncio.shield(self._closed_future)

    def _finish_close(self) -> None:
        """The close sequence ended: stop the timer, fail what still waits, release the link,
        wake :meth:`_close_driven`."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._fail_waiting()
        self.link.close()
        if self._closed_future is not None and not self._closed_future.done():
            self._closed_future.set_result(None)


class CoreOperations:
    """The transport contract's operations (:class:`uet.transport.Transport`) as "post to the
    core, await the handle": a subclass gives ``_start()`` (the core, told the time, or an error
    when closed), ``_wait(handle)`` (:class:`CompletionFutures`) and ``core``. ``options`` go to the
    core's operation as they are (the FEP core's mode, protocol...; the RoCE core has none)."""

    core: Any
    _start: Callable[[], Any]
    _wait: Callable[[int], asyncio.Future[Any]]
    _futures: dict[int, asyncio.Future[Any]]
    _posted: Callable[[], None]

    async def _received(self, core: Any, handle: int) -> Message:
        """Await receive ``handle``; cancelling the awaiting task withdraws the receive from the core
        (``core.cancel``), so it cannot take a message for nobody: a sized receive's message goes
        back to the unexpected list, and the next receive gets it. A message that completed the
        receive before the cancellation was seen is lost with the task, as with any awaited result."""
        fut = self._wait(handle)
        try:
            got: Message = await fut
        except asyncio.CancelledError:
            self._futures.pop(handle, None)
            if core.cancel(handle):
                self._posted()  # the core has an event (the receive's CANCELLED) to hand out
            raise
        return got

    async def send(
        self,
        peer: str,
        data: bytes | bytearray | memoryview,
        *,
        tag: int | None = None,
        header_data: int | None = None,
        **options: Any,
    ) -> None:
        """Send one message; returns when the core completed it."""
        await self._wait(self._start().send(peer, data, tag=tag, header_data=header_data, **options))

    async def recv(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message:
        core = self._start()
        # the core's completions are typed by the operation, not by the handle: say them here
        m: Message | None = core.recv_nowait(tag, ignore, source=source)
        if m is not None:
            return m
        return await self._received(core, core.post_recv(None, tag=tag, ignore=ignore, source=source))

    async def recv_into(
        self,
        buffer: bytearray | memoryview | ReceiveSink,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> Message:
        core = self._start()
        return await self._received(
            core, core.post_recv(buffer, tag=tag, ignore=ignore, source=source, truncate=truncate)
        )

    def register(
        self, buffer: Any, access: Access | int = Access.ALL, *, key: int | None = None, **options: Any
    ) -> MemoryRegion:
        region: MemoryRegion = self.core.register(buffer, access, key=key, **options)
        return region

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
        data: bytes | memoryview = await self._wait(self._start().read(peer, key, offset, length, **options))
        return data

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
