"""The Fabric Endpoint (FEP) for asyncio: the public API, a thin adapter over a :class:`FepCore`.

``Endpoint`` drives one sans-I/O :class:`~uet.fep.core.FepCore` (SES + PDS + TSS, where every
protocol decision is made) with one I/O part, a :class:`uet.link.Link` (the direct UDP link by
default), and one timer (architecture.md "FEP core: one sans-I/O object, two drivers"). It maps
the core's operation handles to futures, feeds it datagrams and the time, sends what it hands
out, and re-arms its timer from ``get_timer()``. It decides nothing about packets, messages,
responses or timers; the clock is read through one function (``clock``, by default
:func:`time.monotonic_ns`), so another loop — a virtual-time one — can drive it too, and a
time-dilated live run (:class:`uet.clock.DilatedClock`: the core sees virtual ``now``, the timer
waits the real time a virtual delay lasts) runs the same code.

Public API (every call raises a :class:`~uet.ses.errors.SesError` subclass carrying the
:class:`~uet.wire.ses.ReturnCode` when the target or PDS reports a failure)::

    ep = await Endpoint.open("127.0.0.2", job=42, pid=1)
    mr = ep.register(buf, access=Access.REMOTE_READ | Access.REMOTE_WRITE | Access.REMOTE_ATOMIC)
    await ep.send(peer, data, tag=None)          # tagged when tag is an int
    msg = await ep.recv(tag=None, ignore=0)      # msg.data, msg.source, msg.tag
    msg = await ep.recv_into(buffer, tag=7)      # posted receive with a buffer
    await ep.write(peer, key, offset, data)
    data = await ep.read(peer, key, offset, length)
    old = await ep.atomic(peer, key, offset, AmoOp.SUM, AmoType.UINT64, operand, fetch=True)
    old = await ep.compare_swap(peer, key, offset, AmoType.UINT64, compare, swap)
    await ep.close()

Peer addressing, the send protocols and their completion rule, receives, reassembly expiry and
the close sequence are the core's (:mod:`uet.fep.core`, :mod:`uet.fep.lanes`,
:mod:`uet.fep.receives`, :mod:`uet.fep.peer`). Processing is batched: the link hands over every
datagram readable at once, the adapter feeds them to the core, then drains
``datagrams_to_send`` once, completes futures from the core's events and re-arms the timer (the
pump, the timer and the futures are :class:`uet.adapter.CoreDriver`'s, shared with the RoCE
endpoint; the transmit and receive paths are this adapter's own).
With ``security`` the link is wrapped in a :class:`~uet.link.secure.SecureLink` facade over the
core's TSS stage (``ep.link`` then shows the plaintext side, ``ep.link.inner`` the wire).

``install_uvloop``/``run`` (:mod:`uet.runner`) and ``with_config`` (:mod:`uet.fep.config`) are
re-exported here for existing callers; they are not part of the adapter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from uet.adapter import CoreDriver
from uet.eventlog import EventLog
from uet.fep.config import FepConfig, with_config
from uet.fep.core import FepCore
from uet.fep.errors import DeliveryError, EndpointClosed
from uet.fep.lanes import Lane
from uet.fep.peer import Peer
from uet.link.base import Link
from uet.link.impair import Impairment, ImpairmentConfig
from uet.link.select import open_link
from uet.pds import Mode, PdsCore
from uet.runner import install_uvloop, run
from uet.ses.fep import SesFep
from uet.ses.memory import Access, MemoryRegion
from uet.ses.message import Message
from uet.ses.segmenter import Segmenter
from uet.ses.sink import ReceiveSink, receive_view
from uet.tuning import tune_allocator
from uet.wire.net import UET_UDP_PORT
from uet.wire.ses import AmoOp, AmoType

__all__ = [
    "DeliveryError",
    "Endpoint",
    "EndpointClosed",
    "EndpointConfig",
    "Message",
    "Mode",
    "Peer",
    "Receive",
    "install_uvloop",
    "run",
    "with_config",
]


#: The endpoint's configuration: the FEP core's (:class:`uet.fep.config.FepConfig`).
EndpointConfig = FepConfig
_OWN: Any = object()


def monotonic_clock() -> int:
    """The adapter's default clock: :func:`time.monotonic_ns` (integer nanoseconds)."""
    return time.monotonic_ns()


class Receive:
    """A posted receive (:meth:`Endpoint.post_recv`): await it for the :class:`Message` (its
    ``data`` a view of the buffer), or :meth:`cancel` it (the await then raises ``Cancelled``)."""

    __slots__ = ("_ep", "handle", "future", "buffer")

    def __init__(
        self, ep: Endpoint, handle: int, future: asyncio.Future[Message], buffer: memoryview | ReceiveSink
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

    def __await__(self) -> Any:
        return self.future.__await__()


class Endpoint(CoreDriver):
    """A Fabric Endpoint: ``await Endpoint.open(address, job=..., pid=...)``, then operations
    (module docstring), then ``close``. An async context manager (closes on exit).

    Attributes: ``address`` (the Fabric Address), ``job``, ``pid``, ``resource_index``, ``fep``
    (the :class:`~uet.fep.core.FepCore`), ``ses`` and ``core`` (its SES and PDS core), ``link``.
    ``counters`` merges the PDS core's, the link's (``link_`` prefix), the SES layer's (``ses_``
    prefix) and the FEP's own.
    """

    def __init__(
        self,
        link: Link,
        *,
        job: int = 0,
        pid: int = 0,
        resource_index: int = 0,
        config: EndpointConfig | None = None,
        event_log: EventLog | Callable[[dict[str, Any]], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        security: Any = None,
        clock: Callable[[], int] = monotonic_clock,
    ) -> None:
        self.config = cfg = config or EndpointConfig()
        self.loop = loop or asyncio.get_running_loop()
        self.clock = clock
        if cfg.tune_allocator:
            tune_allocator()
        core_security: Any = None
        #: whether the core seals (TSS over a link without fixed ports); else there is no TSS or
        #: a SecureLink facade seals, through the core's stage
        self._core_seals = False
        #: the link hands up Datagram records (the ip link always: each carries its entropy)
        records = link.records
        if security is not None:
            if link.peer_port is None and link.gives_records:
                # a link whose UDP source port is each datagram's entropy (the fabric link): the
                # core seals and opens, with the entropy / source port of every datagram
                link.records = True
                records = True
                core_security = security
                self._core_seals = True
            else:  # the direct link: the facade keeps ep.link's plaintext side (uet.link.secure)
                from uet.link.secure import SecureLink

                link = SecureLink(link, security, event_log=event_log, clock=clock)
                core_security = link.stage
        self.link = link
        #: the link's batch transmit with the core's marking table (DirectLink.send_marked)
        self._send_marked: Callable[[list[tuple[bytes, str, int]], Sequence[int]], None] | None = getattr(
            link, "send_marked", None
        )
        self.address = link.address
        self.job = job
        self.pid = pid
        self.resource_index = resource_index
        self.event_log = event_log
        self.fep = FepCore(
            self.address, job=job, pid=pid, ri=resource_index, config=cfg, security=core_security, event_log=event_log
        )
        # the CRC trailer covers the ports of a bound link, or the entropy header over IP
        self.fep.set_link_ports(link if link.peer_port is not None else None, over_ip=link.over_ip)
        self._receive: Callable[[Any, int], None] = (
            self.fep.receive_batch if records else partial(self.fep.receive_marked, opened=True)
        )
        self._init_driver(self.fep)
        link.set_receiver(self._on_batch)
        if event_log is not None:
            event_log({"t": clock(), "ev": "open", "fep": self.address, "job": job, "pid": pid,
                       "port": link.port})  # fmt: skip

    # -- construction --------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        address: str,
        job: int = 0,
        pid: int = 0,
        *,
        port: int = UET_UDP_PORT,
        peer_port: int | None = None,
        resource_index: int = 0,
        config: EndpointConfig | None = None,
        impairment: Impairment | ImpairmentConfig | None = None,
        event_log: EventLog | Callable[[dict[str, Any]], None] | None = None,
        link: Link | str | None = None,
        security: Any = None,
    ) -> Endpoint:
        """Open a FEP at ``address`` (binding UDP ``port``, 4793 by default) on the running loop,
        hosting process ``pid`` of job ``job`` with resource index ``resource_index``.

        ``peer_port`` is where peers listen (default: the same port). ``impairment`` (an
        :class:`Impairment` or its config) impairs everything this FEP transmits. Pass ``link``
        to run over another :class:`Link` (the fabric link), or a link mode by name (``"direct"``,
        the default, or ``"ip"``: UET over IP protocol 253, :mod:`uet.link.select`). ``security`` (a
        :class:`uet.tss.stage.SecurityConfig` or a secure-domain table) runs TSS on every datagram.
        """
        cfg = config or EndpointConfig()
        if isinstance(impairment, ImpairmentConfig):
            impairment = Impairment(impairment)
        if link is None or isinstance(link, str):
            link = open_link(link or "direct", address, config=cfg, port=port, peer_port=peer_port,
                             impairment=impairment)  # fmt: skip
        return cls(
            link, job=job, pid=pid, resource_index=resource_index, config=cfg, event_log=event_log, security=security
        )

    async def __aenter__(self) -> Endpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Endpoint({self.address!r}, job={self.job}, pid={self.pid})"

    # -- the core's parts, for tools and tests -----------------------------------------------------

    @property
    def core(self) -> PdsCore:
        """The PDS core of this FEP."""
        return self.fep.pds

    @property
    def ses(self) -> SesFep:
        """The SES of this FEP."""
        return self.fep.ses

    @property
    def segmenter(self) -> Segmenter:
        """The eager path's segmenter (packet counts of a message: ``segmenter.count(n)``)."""
        return self.fep.segmenter

    @property
    def initiator_id(self) -> int:
        return self.fep.initiator_id

    @property
    def _lanes(self) -> dict[tuple[str, Mode, int, int], Lane]:
        return self.fep.lanes

    # -- memory ----------------------------------------------------------------------------------

    def register(
        self, buffer: Any, access: Access | int = Access.ALL, *, key: int | None = None, job: int | None = _OWN
    ) -> MemoryRegion:
        """Register ``buffer`` (bytearray, memoryview, mmap, array... any buffer; read-only ones
        only for ``REMOTE_READ``) for remote access; returns the :class:`MemoryRegion` whose
        ``key`` peers use. ``job`` restricts it to one JobID (default: this endpoint's job; None
        = any job); requests from other jobs get ``BAD_MKEY`` (§6.5 "treated as unknown").
        Raises :class:`~uet.ses.errors.RegistrationError`."""
        if job is _OWN:
            return self.fep.register(buffer, access, key=key)
        return self.fep.register(buffer, access, key=key, job=job)

    def deregister(self, region: MemoryRegion | int) -> None:
        """Remove a registration (a region or its key); later requests get ``BAD_MKEY``."""
        self.fep.deregister(region)

    # -- operations --------------------------------------------------------------------------------

    def _future(self, handle: int) -> asyncio.Future[Any]:
        fut = self._futures[handle] = self.loop.create_future()
        self._schedule_pump()
        return fut

    async def send(
        self,
        peer: Peer | str,
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

        Returns when the target has the whole message (:mod:`uet.fep.lanes`); raises a
        :class:`~uet.ses.errors.SesError` subclass on failure (:class:`DeliveryError` when PDS
        gave up) and :class:`EndpointClosed` if the endpoint closes first. ``data`` must not
        change until the call returns (packets are zero-copy slices of it). ``mode`` is the PDS
        delivery mode; ``header_data`` 64-bit immediate data; ``dc`` asks for delivery-complete
        semantics (§6.8: the target answers after placing the data; it does not change matching,
        so a DC send that comes before its receive is buffered there, §6.4); ``protocol`` forces
        ``"eager"``, ``"rendezvous"`` or ``"deferrable"`` (default: by the configured thresholds).
        """
        await self.send_nowait(
            peer, data, tag=tag, mode=mode, header_data=header_data, dc=dc, protocol=protocol,
            pid=pid, resource_index=resource_index, tc=tc,
        )  # fmt: skip

    def send_nowait(
        self,
        peer: Peer | str,
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
        """Queue a message and return the future that :meth:`send` awaits (for pipelining)."""
        fep = self.fep
        fep.tick(self.clock())
        h = fep.send(
            peer, data, tag=tag, mode=mode, header_data=header_data, dc=dc, protocol=protocol, pid=pid,
            resource_index=resource_index, tc=tc,
        )  # fmt: skip
        return self._future(h)

    async def write(
        self,
        peer: Peer | str,
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
        ``header_data`` the target sees a remote-write completion (:meth:`next_write`). Errors:
        ``BAD_MKEY``, ``PERM_VIOLATION``, ``UNSUPPORTED_SIZE`` / ``BAD_ADDR`` (bounds), ...
        ``sync = (group, count)`` makes it a SYNC_WRITE of that sync group: the group's
        terminating operation (a write with ``header_data``, or :meth:`atomic` with ``sync``)
        takes effect at the target only after its ``count - 1`` other writes (uet.ses.sync)."""
        h = self.fep.write(peer, key, offset, data, header_data=header_data, dc=dc, mode=mode, sync=sync)
        await self._future(h)

    async def read(
        self,
        peer: Peer | str,
        key: int,
        offset: int,
        length: int,
        *,
        into: bytearray | memoryview | None = None,
        mode: Mode = Mode.RUD,
    ) -> bytes | memoryview:
        """RMA read of ``length`` bytes at ``offset`` of the peer's region ``key`` (§6.5);
        returns the bytes (or fills ``into`` and returns a view of it)."""
        return await self._future(self.fep.read(peer, key, offset, length, into=into, mode=mode))  # type: ignore[no-any-return]

    async def atomic(
        self,
        peer: Peer | str,
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

        ``sync = (group, count)``: SYNC_ATOMIC, the terminating operation of a sync group (see
        :meth:`write`; non-fetching). ``tagged``: TSEND_ATOMIC / TSEND_FETCH_ATOMIC — ``key`` is
        then a *tag*: the atomic applies at ``offset`` of the buffer of the peer's posted receive
        (:meth:`post_recv` with that tag), which completes (``NO_MATCH`` when none is posted).
        """
        h = self.fep.atomic(
            peer, key, offset, op, datatype, operand, fetch=fetch, compare=compare, swap=swap, mode=mode,
            sync=sync, tagged=tagged,
        )  # fmt: skip
        return await self._future(h)

    async def compare_swap(
        self,
        peer: Peer | str,
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
        h = self.fep.compare_swap(peer, key, offset, datatype, compare, swap, op=op, fetch=fetch, mode=mode)
        return await self._future(h)

    # -- receives --------------------------------------------------------------------------------

    async def recv(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message:
        """The next message matching the filter (waits for one): untagged when ``tag`` is None,
        else a tagged message whose match bits equal ``tag`` outside the ``ignore`` mask (so
        ``tag=0, ignore=~0`` takes any tagged message); from ``source`` only, or any source. A
        directed receive checks the Fabric Address the message arrived from as well as the
        initiator ID its SES header claims: a copy of ``source``'s packet sent by anyone else does
        not match.
        Raises :class:`EndpointClosed` when the endpoint closes while waiting."""
        h = self.fep.post_recv(None, tag=tag, ignore=ignore, source=source)
        fut = self._future(h)
        self._dispatch()
        if fut.done():
            return fut.result()  # type: ignore[no-any-return]
        try:
            return await fut  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            self._futures.pop(h, None)
            self.fep.cancel(h)
            raise

    def recv_nowait(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message | None:
        """A matching message already on the unexpected list (fast path), or None."""
        return self.fep.recv_nowait(tag, ignore, source=source)

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
        if buffer is None:
            h = self.fep.post_recv(None, tag=tag, ignore=ignore, source=source)
            fut = self._future(h)
            self._dispatch()
            return Receive(self, h, fut, memoryview(b""))
        view = receive_view(buffer)
        h = self.fep.post_recv(view, tag=tag, ignore=ignore, source=source, truncate=truncate)
        return Receive(self, h, self._future(h), view)

    async def recv_into(
        self,
        buffer: bytearray | memoryview | ReceiveSink,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> Message:
        """Post ``buffer`` and wait for its message (``data`` is a view of ``buffer``); raises the
        receive's error (``TOO_LONG``, ``CANCELLED``...). Cancelling the awaiting task withdraws
        the receive."""
        h = self.post_recv(buffer, tag=tag, ignore=ignore, source=source, truncate=truncate)
        try:
            return await asyncio.shield(h.future)
        except asyncio.CancelledError:
            if not h.future.done():
                self.cancel(h)
            raise

    def cancel(self, receive: Receive) -> bool:
        """Cancel a posted receive: True if it was still posted (it then fails with
        ``Cancelled``), False when a message already took it."""
        if receive.future.done():
            return False
        ok = self.fep.cancel(receive.handle)
        self._schedule_pump()
        return ok

    @property
    def pending_messages(self) -> int:
        """Delivered messages waiting on the unexpected list for :meth:`recv`."""
        return self.fep.pending_messages

    @property
    def counters(self) -> dict[str, int]:
        """A snapshot of every counter (core, ``link_*``, ``ses_*``, endpoint)."""
        fep = self.fep
        out = dict(fep.pds.counters)
        out.update({"link_" + k: v for k, v in self.link.counters.items()})
        out.update({"ses_" + k: v for k, v in fep.ses.counters.items()})
        imp = self.link.impairment
        if imp is not None:
            out.update({"impair_" + k: v for k, v in imp.counters.items()})
        if fep.tss is not None and self._core_seals:  # TSS in the core (else in link_tss_*)
            out.update(fep.tss.counters)
        if fep.crc is not None:
            out.update(fep.crc.counters)
        out.update(fep.stats)
        return out

    # -- close -----------------------------------------------------------------------------------

    async def close_pdcs(self, peer: str) -> int:
        """Close this endpoint's initiator PDCs toward the Fabric Address ``peer`` gracefully
        (behaviour.md §2.12: each quiesces, waits for its ACKs, sends CLOSE) and wait, at most
        ``close_timeout_s``, until they are gone; returns how many were asked. The next operation
        toward ``peer`` opens a new PDC. The wait polls the core's PDC table every millisecond (a
        close takes one round trip, a lost CLOSE its RTOs)."""
        fa = self.fep.peers.fa(peer)
        core = self.core
        mine = [p for p in core.pdcs.values() if p.role == "initiator" and p.peer == fa]
        now = self.clock()
        for p in mine:
            core.request_close(p.lpdcid, now)
        self._schedule_pump()
        deadline = time.monotonic() + self.config.close_timeout_s
        while any(core.pdcs.get(p.lpdcid) is p for p in mine) and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        return len(mine)

    async def close(self) -> None:
        """Close gracefully (the core's close sequence, at most ``close_timeout_s``), then
        release the link. Operations still pending then fail with :class:`EndpointClosed`."""
        await self._close_driven(self.fep.close)

    def _finish_close(self) -> None:
        super()._finish_close()
        if isinstance(self.event_log, EventLog):
            self.event_log.flush()

    # -- driving the core ----------------------------------------------------------------------------

    def _on_batch(self, batch: Any) -> None:
        """A batch from the link: ``(datagram, source FA, ecn with the link's trim marks)``
        triples (a secure link opened them already through the core's TSS stage), or
        :class:`~uet.fep.events.Datagram` records from a link that gives them.

        The core takes the batch and its completions go to their futures at once; what it has
        to send (ACKs above all) goes with the pump, queued behind the callbacks those
        completions scheduled. So an application that answers a message at once (a reply, the
        next send) has its packets leave in the same flush as the ACK, and the peer takes both
        in one batch (measured: 64-byte ping-pong p50 193 → 180 µs)."""
        if self._closed:
            return
        if self._pump_scheduled:
            # a batch read earlier in this wake-up still waits for its flush: send it first, so
            # that one flush never answers more than one link batch (at most ``max_batch``
            # datagrams). The PDS core coalesces the ACKs of what it received since its last
            # flush, and its SACK bitmap covers 64 PSNs above CACK: answering several batches at
            # once while CACK is held by an uncleared guaranteed response left received packets
            # unreported, and the sender resent them (measured: 1 MiB unexpected messages, 12 ->
            # 277 fast retransmits per 64 MiB).
            self._transmit(self.clock())
        self._receive(batch, self.clock())
        self._dispatch()
        self._schedule_pump()

    def _transmit(self, now: int) -> None:
        """Send what the core hands out, complete futures from its events, re-arm the timer."""
        fep = self.fep
        send_marked = self._send_marked
        if send_marked is not None and not self._core_seals:  # the data path: no record per datagram
            packed = fep.datagrams_to_send_packed(now)
            if packed:
                send_marked(packed, fep.tos)
        else:
            out = fep.datagrams_to_send(now, sealed=self._core_seals)
            if out:
                send = self.link.send
                for data, dst, entropy, dscp, ecn in out:
                    send(data, dst, entropy, dscp, ecn)
        self._dispatch()
        if not self._closed:
            self._arm(fep.get_timer(), now)
