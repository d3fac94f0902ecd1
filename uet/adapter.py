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
* :class:`CoreOperations`: the contract's operations as "post to the core, await the handle",
  typed and documented once for the three adapters, over any core with the operations of
  :class:`OperationsCore`; :class:`Receive` is a posted receive. An adapter differs only in its
  hooks: ``_start()`` (the core told the time), ``_posted()`` (how the core gets to run),
  ``_collect()`` (completions now, where the driver can) — never in an operation.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from uet.fep.errors import EndpointClosed
from uet.fep.events import Closed, MessageReceived, OpCompleted, OpFailed, SendCompleted, WriteCompleted
from uet.pds import Mode
from uet.runner import running_loop
from uet.ses.memory import Access, MemoryRegion
from uet.ses.message import Message
from uet.ses.sink import ReceiveSink, receive_view
from uet.wire.ses import AmoOp, AmoType

if TYPE_CHECKING:
    import asyncio

    from uet.link.base import Link

__all__ = ["CompletionFutures", "CoreDriver", "CoreOperations", "OperationsCore", "Receive"]

#: How an adapter's callers name a target (:class:`CoreOperations`).
PeerT = TypeVar("PeerT")
#: How a core names a target (:class:`OperationsCore`).
PeerT_contra = TypeVar("PeerT_contra", contravariant=True)


def _cancelled_error() -> type[BaseException]:
    """``asyncio.CancelledError``, imported when a cancellation is matched: the simulator's own
    loop (uet.sim.tasks) runs this module's futures without asyncio, and raises asyncio's
    ``CancelledError`` only when a run is cancelled."""
    import asyncio

    return asyncio.CancelledError


#: ``register``'s default ``job``: the endpoint's own (the core's default), told apart from None (any job).
_OWN: Any = object()


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

    def _collect(self) -> None:
        """Complete futures from the events the core has now, where the driver can reach them
        (the live drivers, :class:`CoreDriver`); else they come with the core's next run (the
        simulator's engine hands a host's events over when it flushes the host)."""

    def _wait(self, handle: int) -> asyncio.Future[Any]:
        """The future of operation ``handle``."""
        fut: asyncio.Future[Any] = running_loop().create_future()
        self._futures[handle] = fut
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
        fut: asyncio.Future[WriteCompleted] = running_loop().create_future()
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
        from uet.clock import DilatedClock, ns_to_seconds  # here: the simulator's adapter drives no clock

        clock = self.clock
        self._real_delay: Callable[[float], float] = (
            clock.real_delay if isinstance(clock, DilatedClock) else ns_to_seconds
        )
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

    def _collect(self) -> None:
        self._dispatch()

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
        import asyncio  # the live drivers' (the simulator's loop has no shield)

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


class OperationsCore(Protocol[PeerT_contra]):
    """What :class:`CoreOperations` asks of a sans-I/O core: the operations of
    :class:`~uet.fep.core.FepCore` (:mod:`uet.fep.operations`), which
    :class:`~uet.roce.core.RoceCore` has too. Each operation returns a handle whose completion
    comes back as an event (:mod:`uet.fep.events`); operations take no ``now``, the core uses the
    last one it was given (``tick``). ``PeerT_contra``: how the core names a target (a Fabric
    Address for both; the FEP core also takes a :class:`~uet.fep.peer.Peer`)."""

    def tick(self, now: int) -> None: ...

    def register(
        self, buffer: Any, access: Access | int = ..., *, key: int | None = ..., job: int | None = ...
    ) -> MemoryRegion: ...

    def deregister(self, region: MemoryRegion | int) -> None: ...

    def send(
        self,
        peer: PeerT_contra,
        data: bytes | bytearray | memoryview,
        *,
        tag: int | None = ...,
        mode: Mode = ...,
        header_data: int | None = ...,
        dc: bool = ...,
        protocol: str | None = ...,
        pid: int | None = ...,
        resource_index: int | None = ...,
        tc: int = ...,
    ) -> int: ...

    def write(
        self,
        peer: PeerT_contra,
        key: int,
        offset: int,
        data: bytes | bytearray | memoryview,
        *,
        header_data: int | None = ...,
        dc: bool = ...,
        mode: Mode = ...,
        sync: tuple[int, int] | None = ...,
    ) -> int: ...

    def read(
        self,
        peer: PeerT_contra,
        key: int,
        offset: int,
        length: int,
        *,
        into: bytearray | memoryview | None = ...,
        mode: Mode = ...,
    ) -> int: ...

    def atomic(
        self,
        peer: PeerT_contra,
        key: int,
        offset: int,
        op: AmoOp | int,
        datatype: AmoType | int,
        operand: Any = ...,
        *,
        fetch: bool = ...,
        compare: int | float = ...,
        swap: int | float = ...,
        mode: Mode = ...,
        sync: tuple[int, int] | None = ...,
        tagged: bool = ...,
    ) -> int: ...

    def compare_swap(
        self,
        peer: PeerT_contra,
        key: int,
        offset: int,
        datatype: AmoType | int,
        compare: int | float,
        swap: int | float,
        *,
        op: AmoOp | int = ...,
        fetch: bool = ...,
        mode: Mode = ...,
    ) -> int: ...

    def post_recv(
        self,
        buffer: bytearray | memoryview | ReceiveSink | None,
        *,
        tag: int | None = ...,
        ignore: int = ...,
        source: str | None = ...,
        truncate: bool = ...,
    ) -> int: ...

    def recv_nowait(self, tag: int | None = ..., ignore: int = ..., *, source: str | None = ...) -> Message | None: ...

    def cancel(self, handle: int) -> bool: ...


class Receive:
    """A posted receive (:meth:`CoreOperations.post_recv`): await it for the :class:`Message` (its
    ``data`` a view of the buffer), or :meth:`cancel` it (the await then raises ``Cancelled``)."""

    __slots__ = ("_ep", "handle", "future", "buffer")

    def __init__(
        self,
        ep: CoreOperations[Any],
        handle: int,
        future: asyncio.Future[Message],
        buffer: memoryview | ReceiveSink,
    ) -> None:
        self._ep = ep
        self.handle = handle
        self.future = future
        self.buffer = buffer

    def cancel(self) -> bool:
        """Withdraw the receive if no message took it yet; True when it was withdrawn."""
        return self._ep.cancel(self)

    def done(self) -> bool:
        """Whether the receive has completed (or failed, or was cancelled)."""
        return self.future.done()

    def __await__(self) -> Generator[Any, None, Message]:
        return self.future.__await__()


class CoreOperations(CompletionFutures, Generic[PeerT]):
    """The transport contract's operations (:class:`uet.transport.Transport`, and the UET options
    beyond it) as "post to the core, await the handle's future", declared once for
    :class:`uet.Endpoint`, :class:`~uet.roce_endpoint.RoceEndpoint` and
    :class:`~uet.sim.endpoint.SimEndpoint` (module docstring).

    An adapter gives ``_opcore`` (the :class:`OperationsCore` the operations post to) and
    :meth:`_start`; the futures are :class:`CompletionFutures`'. ``PeerT``: how the adapter's
    callers name a target — a Fabric Address, or for :class:`uet.Endpoint` also a
    :class:`~uet.fep.peer.Peer` (SES addressing: job, PIDonFEP, resource index).

    Every operation raises a :class:`~uet.ses.errors.SesError` subclass carrying the
    :class:`~uet.wire.ses.ReturnCode` when the target or the PDS reports a failure (the RoCE
    endpoint maps its syndromes onto the same names, :func:`uet.transport.error_name`), and
    :class:`~uet.fep.errors.EndpointClosed` when the endpoint is closing or closes first. The
    options that only UET has (``mode``, ``dc``, ``protocol``, ``pid``, ``resource_index``,
    ``tc``, ``sync``, ``tagged``, ``job``) are ignored by the RoCE core, which has one delivery
    mode (a reliable connection) and no SES addressing."""

    #: the sans-I/O core the operations post to (uet.fep.FepCore, uet.roce.core.RoceCore)
    _opcore: OperationsCore[PeerT]

    def _start(self) -> OperationsCore[PeerT]:
        """``_opcore`` told the current time (the adapter's clock or the engine's ``now``), ready
        for an operation; raises :class:`~uet.fep.errors.EndpointClosed` where the adapter
        refuses new operations itself."""
        raise NotImplementedError

    # -- memory ------------------------------------------------------------------------------------

    def register(
        self, buffer: Any, access: Access | int = Access.ALL, *, key: int | None = None, job: int | None = _OWN
    ) -> MemoryRegion:
        """Register ``buffer`` (bytearray, memoryview, mmap, array... any buffer; read-only ones
        only for ``REMOTE_READ``) for remote access; returns the :class:`MemoryRegion` whose
        ``key`` peers use (a random 32-bit R_Key on RoCE unless given). ``job`` restricts it to
        one JobID (default: this endpoint's job; None = any job); requests from other jobs get
        ``BAD_MKEY`` (§6.5 "treated as unknown"). Raises
        :class:`~uet.ses.errors.RegistrationError`."""
        if job is _OWN:
            return self._opcore.register(buffer, access, key=key)
        return self._opcore.register(buffer, access, key=key, job=job)

    def deregister(self, region: MemoryRegion | int) -> None:
        """Remove a registration (a region or its key); later requests get ``BAD_MKEY``."""
        self._opcore.deregister(region)

    # -- operations --------------------------------------------------------------------------------

    async def send(
        self,
        peer: PeerT,
        data: bytes | bytearray | memoryview,
        *,
        tag: int | None = None,
        mode: Mode = Mode.RUD,
        header_data: int | None = None,
        dc: bool = False,
        protocol: str | None = None,
        pid: int | None = None,
        resource_index: int | None = None,
        tc: int = 0,
    ) -> None:
        """Send ``data`` as one message to ``peer`` (tagged with 64-bit ``tag`` when given).

        Returns when the target has the whole message (:mod:`uet.fep.lanes`); raises
        :class:`~uet.fep.errors.DeliveryError` when PDS gave up. ``data`` must not change until
        the call returns (packets are zero-copy slices of it). ``mode`` is the PDS delivery mode;
        ``header_data`` 64-bit immediate data; ``dc`` asks for delivery-complete semantics (§6.8:
        the target answers after placing the data; it does not change matching, so a DC send
        that comes before its receive is buffered there, §6.4); ``protocol`` forces ``"eager"``,
        ``"rendezvous"`` or ``"deferrable"`` (default: by the configured thresholds); ``pid`` and
        ``resource_index`` override the target process of a Fabric Address (:mod:`uet.fep.peer`);
        ``tc`` is the traffic class (a lane of its own)."""
        await self.send_nowait(
            peer, data, tag=tag, mode=mode, header_data=header_data, dc=dc, protocol=protocol,
            pid=pid, resource_index=resource_index, tc=tc,
        )  # fmt: skip

    def send_nowait(
        self,
        peer: PeerT,
        data: bytes | bytearray | memoryview,
        *,
        tag: int | None = None,
        mode: Mode = Mode.RUD,
        header_data: int | None = None,
        dc: bool = False,
        protocol: str | None = None,
        pid: int | None = None,
        resource_index: int | None = None,
        tc: int = 0,
    ) -> asyncio.Future[None]:
        """Queue a message as :meth:`send` does and return the future it awaits (for pipelining)."""
        h = self._start().send(
            peer, data, tag=tag, mode=mode, header_data=header_data, dc=dc, protocol=protocol, pid=pid,
            resource_index=resource_index, tc=tc,
        )  # fmt: skip
        return self._wait(h)

    async def write(
        self,
        peer: PeerT,
        key: int,
        offset: int,
        data: bytes | bytearray | memoryview,
        *,
        header_data: int | None = None,
        dc: bool = False,
        mode: Mode = Mode.RUD,
        sync: tuple[int, int] | None = None,
    ) -> None:
        """RMA write of ``data`` at ``offset`` of the peer's region ``key`` (§6.5). With
        ``header_data`` the target sees a remote-write completion (:meth:`next_write`; 32 bits of
        immediate data on RoCE). Errors: ``BAD_MKEY``, ``PERM_VIOLATION``, ``UNSUPPORTED_SIZE`` /
        ``BAD_ADDR`` (bounds), ... ``sync = (group, count)`` makes it a SYNC_WRITE of that sync
        group: the group's terminating operation (a write with ``header_data``, or
        :meth:`atomic` with ``sync``) takes effect at the target only after its ``count - 1``
        other writes (:mod:`uet.ses.sync`)."""
        h = self._start().write(peer, key, offset, data, header_data=header_data, dc=dc, mode=mode, sync=sync)
        await self._wait(h)

    async def read(
        self,
        peer: PeerT,
        key: int,
        offset: int,
        length: int,
        *,
        into: bytearray | memoryview | None = None,
        mode: Mode = Mode.RUD,
    ) -> bytes | memoryview:
        """RMA read of ``length`` bytes at ``offset`` of the peer's region ``key`` (§6.5);
        returns the bytes (or fills ``into`` and returns a view of it)."""
        data: bytes | memoryview = await self._wait(self._start().read(peer, key, offset, length, into=into, mode=mode))
        return data

    async def atomic(
        self,
        peer: PeerT,
        key: int,
        offset: int,
        op: AmoOp | int,
        datatype: AmoType | int,
        operand: Any = None,
        *,
        fetch: bool = False,
        compare: int | float = 0,
        swap: int | float = 0,
        mode: Mode = Mode.RUD,
        sync: tuple[int, int] | None = None,
        tagged: bool = False,
    ) -> Any:
        """Atomic ``op`` on ``datatype`` at ``offset`` of the peer's region ``key`` (§6.5, §10).

        ``operand`` is one value or a sequence (vector atomics; MSWAP takes ``[value, mask]``
        pairs; READ needs no operand); raw bytes are sent as they are. The compare-and-swap
        family takes ``compare``/``swap`` (see :meth:`compare_swap`). With ``fetch`` the result
        is the prior value (a tuple for several elements), else None. Errors:
        ``AMO_UNSUPPORTED_OP/DT/SIZE``, ``AMO_UNALIGNED``, ``BAD_MKEY``, ``PERM_VIOLATION``...
        RoCE has 64-bit fetch-add (``SUM``) and ``CSWAP`` only
        (:class:`~uet.roce.core.UnsupportedAtomic` otherwise).

        ``sync = (group, count)``: SYNC_ATOMIC, the terminating operation of a sync group (see
        :meth:`write`; non-fetching). ``tagged``: TSEND_ATOMIC / TSEND_FETCH_ATOMIC — ``key`` is
        then a *tag*: the atomic applies at ``offset`` of the buffer of the peer's posted receive
        (:meth:`post_recv` with that tag), which completes (``NO_MATCH`` when none is posted)."""
        h = self._start().atomic(
            peer, key, offset, op, datatype, operand, fetch=fetch, compare=compare, swap=swap, mode=mode,
            sync=sync, tagged=tagged,
        )  # fmt: skip
        return await self._wait(h)

    async def compare_swap(
        self,
        peer: PeerT,
        key: int,
        offset: int,
        datatype: AmoType | int,
        compare: int | float,
        swap: int | float,
        *,
        op: AmoOp | int = AmoOp.CSWAP,
        fetch: bool = True,
        mode: Mode = Mode.RUD,
    ) -> Any:
        """Compare-and-swap (or another ``op`` of the family: CSWAP_NE, CSWAP_LE, ...) of one
        element; returns the prior value when ``fetch`` (the default), so success is
        ``result == compare`` for plain CSWAP."""
        h = self._start().compare_swap(peer, key, offset, datatype, compare, swap, op=op, fetch=fetch, mode=mode)
        return await self._wait(h)

    # -- receives ----------------------------------------------------------------------------------

    async def recv(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message:
        """The next message matching the filter (waits for one): untagged when ``tag`` is None,
        else a tagged message whose match bits equal ``tag`` outside the ``ignore`` mask (so
        ``tag=0, ignore=~0`` takes any tagged message); from ``source`` only, or any source. A
        directed receive checks the Fabric Address the message arrived from as well as the
        initiator ID its SES header claims: a copy of ``source``'s packet sent by anyone else does
        not match. A message that begins but never arrives whole (expired, failed, a deferral
        whose restart never comes) takes no receive: the ``recv()`` waits for the next one (its
        sender's send fails; counted ``recvs_given_back``). Raises
        :class:`~uet.fep.errors.EndpointClosed` when the endpoint closes while waiting;
        cancelling the awaiting task withdraws the receive (:meth:`_received`)."""
        core = self._start()
        m = core.recv_nowait(tag, ignore, source=source)
        if m is not None:
            return m
        return await self._received(core.post_recv(None, tag=tag, ignore=ignore, source=source))

    def recv_nowait(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message | None:
        """A matching message already on the unexpected list (fast path), or None."""
        return self._opcore.recv_nowait(tag, ignore, source=source)

    async def recv_into(
        self,
        buffer: bytearray | memoryview | ReceiveSink,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> Message:
        """Post ``buffer`` and wait for its message (``data`` is a view of ``buffer``); matching as
        in :meth:`recv`, truncation as in :meth:`post_recv`. Raises the receive's error
        (``TOO_LONG``, ``CANCELLED``...); cancelling the awaiting task withdraws the receive."""
        h = self._start().post_recv(buffer, tag=tag, ignore=ignore, source=source, truncate=truncate)
        return await self._received(h)

    def post_recv(
        self,
        buffer: bytearray | memoryview | ReceiveSink | None,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> Receive:
        """Post ``buffer`` on the expected list (§6.4) and return its :class:`Receive` handle.
        Matching as in :meth:`recv`; a longer message is truncated with ``truncate``, else the
        receive fails with ``TOO_LONG``. ``buffer=None`` posts :meth:`recv`'s buffer-less receive
        now (the message lands in the endpoint's memory): a receive posted before the message
        comes takes it on the expected list, so an early message is not buffered on the overflow
        list, whose guaranteed response costs the initiator a CLEAR (``uet.ses.reassembly``)."""
        core = self._start()
        if buffer is None:
            h = core.post_recv(None, tag=tag, ignore=ignore, source=source)
            fut = self._wait(h)
            self._collect()  # a message already waiting completes it now
            return Receive(self, h, fut, memoryview(b""))
        view = receive_view(buffer)
        h = core.post_recv(view, tag=tag, ignore=ignore, source=source, truncate=truncate)
        return Receive(self, h, self._wait(h), view)

    def cancel(self, receive: Receive) -> bool:
        """Cancel a posted receive: True if it was still posted (it then fails with
        ``Cancelled``), False when a message already took it."""
        if receive.future.done():
            return False
        ok = self._opcore.cancel(receive.handle)
        self._posted()  # the core has an event (the receive's CANCELLED) to hand out
        return ok

    async def _received(self, handle: int) -> Message:
        """Await receive ``handle``; cancelling the awaiting task withdraws the receive from the core
        (``cancel``), so it cannot take a message for nobody: a sized receive's message goes back
        to the unexpected list, and the next receive gets it. A message that completed the receive
        before the cancellation was seen is lost with the task, as with any awaited result."""
        fut = self._wait(handle)
        try:
            got: Message = await fut
        except _cancelled_error():
            self._futures.pop(handle, None)
            if self._opcore.cancel(handle):
                self._posted()  # the core has an event (the receive's CANCELLED) to hand out
            raise
        return got
