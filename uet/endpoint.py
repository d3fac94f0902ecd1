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

The operations (typed and documented there, with ``send_nowait``, ``post_recv`` / :class:`Receive`,
``recv_nowait`` and ``cancel``) are :class:`uet.adapter.CoreOperations`', shared with the RoCE
endpoint and the simulator's: this adapter gives them its FEP core, told the time by its clock.
Peer addressing, the send protocols and their completion rule, receives, reassembly expiry and
the close sequence are the core's (:mod:`uet.fep.core`, :mod:`uet.fep.lanes`,
:mod:`uet.fep.receives`, :mod:`uet.fep.peer`). Processing is batched: the link hands over every
datagram readable at once, the adapter feeds them to the core, then drains
``datagrams_to_send`` once, completes futures from the core's events and re-arms the timer (the
pump, the timer and the futures are :class:`uet.adapter.CoreDriver`'s, shared with the RoCE
endpoint; the transmit and receive paths are this adapter's own: the link's batch transmit,
:meth:`uet.link.base.Link.send_marked`, with the core's marking table).
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
from typing import TYPE_CHECKING, Any

from uet.adapter import CoreDriver, CoreOperations, Receive
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
from uet.pds.config import PathWindow
from uet.runner import install_uvloop, run
from uet.ses.fep import SesFep
from uet.ses.message import Message
from uet.ses.segmenter import Segmenter
from uet.tuning import tune_allocator
from uet.wire.net import UET_UDP_PORT

if TYPE_CHECKING:
    from uet.transport import Transport

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


def monotonic_clock() -> int:
    """The adapter's default clock: :func:`time.monotonic_ns` (integer nanoseconds)."""
    return time.monotonic_ns()


class Endpoint(CoreOperations[Peer | str], CoreDriver):
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
        path_window: Callable[[str], PathWindow | None] | None = None,
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
        #: the link's batch transmit with the core's marking table (Link.send_marked), bound once
        self._send_marked: Callable[[Sequence[tuple[bytes, str, int]], Sequence[int]], None] = link.send_marked
        self.address = link.address
        self.job = job
        self.pid = pid
        self.resource_index = resource_index
        self.event_log = event_log
        self.fep = FepCore(
            self.address,
            job=job,
            pid=pid,
            ri=resource_index,
            config=cfg,
            security=core_security,
            event_log=event_log,
            path_window=path_window,  # towards a GPU of the same server (uet.scenario.derive.scale_up_paths)
        )
        self._opcore = self.fep
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

    # -- operations (uet.adapter.CoreOperations) ---------------------------------------------------

    def _start(self) -> FepCore:
        fep = self.fep
        fep.tick(self.clock())
        return fep

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
        if not self._core_seals:  # the data path: no record per datagram
            packed = fep.datagrams_to_send_packed(now)
            if packed:
                self._send_marked(packed, fep.tos)
        else:  # the core seals: each datagram's record carries its entropy (the fabric link)
            out = fep.datagrams_to_send(now)
            if out:
                send = self.link.send
                for data, dst, entropy, dscp, ecn in out:
                    send(data, dst, entropy, dscp, ecn)
        self._dispatch()
        if not self._closed:
            self._arm(fep.get_timer(), now)


if TYPE_CHECKING:  # mypy checks the adapter against the transport contract (uet.transport)
    _CONTRACT: type[Transport] = Endpoint
