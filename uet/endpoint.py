"""The Fabric Endpoint (FEP): the asyncio object that runs SES + PDS over a link.

``Endpoint`` composes three sans-I/O parts with one I/O part (ARCHITECTURE.md "Principles" 1):

* the message layer (:mod:`uet.ses.message`): segmentation into SES standard requests and
  reassembly at the target;
* the PDS core (:class:`uet.pds.PdsCore`): PDCs, PSNs, ACKs, retransmission;
* a :class:`uet.link.Link` (the direct UDP link by default) that only moves bytes.

The endpoint owns one timer handle, re-armed from ``core.get_timer()``, and feeds the core the
time from ``time.monotonic_ns()`` (the clock asyncio's loop uses; uvloop's ``loop.time()`` is the
same monotonic clock truncated to milliseconds, too coarse for the core's RTT samples, so the
endpoint reads the clock itself and arms timers with relative delays).

Processing is batched: the link hands over every datagram readable at once, the endpoint feeds
them all to the core, then handles the core's events (completions refill the send lanes), then
drains ``datagrams_to_send`` once and re-arms the timer. Sends queued by the application in the
same loop iteration are submitted together in one such pump.

Flow control (task rule: memory stays bounded for 64 MiB messages): messages toward one
``(peer, mode, traffic class)`` form a *lane*; a lane submits the packets of one message at a time
(PDS requires all packets of a message on one PDC and no interleaving on a PDC, behaviour.md §1.4)
and keeps at most ``EndpointConfig.max_inflight`` packets submitted but not yet Acked/Failed.
Payloads are zero-copy slices of the caller's buffer, so a 64 MiB message costs its own bytes plus
``max_inflight`` small headers.

Completion rule for ``send`` (behaviour.md §6.9 "initiator rules"): the message is delivered when
every packet is Acked and no SES response reported an error; an explicit ``RESPONSE`` with
``RC_OK`` must carry ``modified_length`` equal to the message length. An ACK carrying the target's
final response may be lost and replaced by a cumulative ACK ("implicit acknowledgement by CACK
counts as success"); since the target's PDS acknowledges a packet only after SES accepted it,
all-Acked means the whole message was placed. RUDI packets are Acked by their RUDI responses; UUD
packets are Acked when handed to the link (best effort, §2.15).

Core interface details (the PDS core contract): the token of every packet is its message object
(the core reports exactly one Acked/Failed per submitted packet, so the endpoint counts them);
RUDI and UUD packets are submitted to the core as SOM+EOM each (no PDC, so no message framing at
the PDS level; the core requires it) while their SES headers carry the message's real SOM/EOM
and the target's message layer reassembles them.
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from uet.errors import UetError
from uet.eventlog import EventLog
from uet.link.base import DSCP_CONTROL, DSCP_DATA, Link
from uet.link.direct import DirectLink
from uet.link.impair import Impairment, ImpairmentConfig
from uet.pds import Acked, Failed, Mode, NackReceived, PdcClosed, PdcOpened, PdsConfig, PdsCore
from uet.ses.message import (
    Message,
    MessageConfig,
    Reassembler,
    Segmenter,
    decode_response,
    initiator_id,
)
from uet.wire.net import UET_UDP_PORT
from uet.wire.pds import NextHeader, PdsType
from uet.wire.ses import ReturnCode

__all__ = [
    "DeliveryError",
    "Endpoint",
    "EndpointClosed",
    "EndpointConfig",
    "Message",
    "Mode",
    "install_uvloop",
    "run",
]

T = TypeVar("T")

_NH_STANDARD = int(NextHeader.STANDARD)
_NH_RESPONSE = int(NextHeader.RESPONSE)
_RC_GOOD = (int(ReturnCode.NULL), int(ReturnCode.OK))
#: PDS types that carry requests (data class, DSCP 0); every other type is ACK/NACK/control.
_DATA_TYPES = frozenset(
    {
        PdsType.TSS,
        PdsType.RUD_REQ,
        PdsType.ROD_REQ,
        PdsType.RUDI_REQ,
        PdsType.UUD_REQ,
        PdsType.RUD_CC_REQ,
        PdsType.ROD_CC_REQ,
    }
)
_IS_DATA = tuple(t in _DATA_TYPES for t in range(32))


class DeliveryError(UetError):
    """A message was not delivered: a packet Failed in PDS, or the target's SES answered an error.

    Attributes: ``reason`` (words), ``nack_code`` (the PDS NACK code when one caused it),
    ``return_code`` (the SES return code when the target reported one).
    """

    def __init__(self, reason: str, *, nack_code: int | None = None, return_code: int | None = None) -> None:
        self.reason = reason
        self.nack_code = nack_code
        self.return_code = return_code
        extra = []
        if nack_code is not None:
            extra.append(f"nack {nack_code:#x}")
        if return_code is not None:
            try:
                extra.append(f"rc {ReturnCode(return_code).name}")
            except ValueError:
                extra.append(f"rc {return_code:#x}")
        super().__init__(reason + (f" ({', '.join(extra)})" if extra else ""))


class EndpointClosed(UetError):
    """The endpoint is closed (or closing): no new sends; pending ones fail with this."""


@dataclass(frozen=True)
class EndpointConfig:
    """Configuration of one FEP (CONVENTIONS.md: one dataclass per layer, defaults documented).

    Attributes:
        payload_size: payload bytes per packet (default 4096; 8192 is the reference provider's
            upper bound; ≤ 16383 conforms to the 14-bit ``payload_length``; larger values up to
            65451 use the loopback-only jumbo extension of :mod:`uet.ses.message`).
        max_message: largest message sent or reassembled (64 MiB).
        max_inflight: packets per lane submitted to the PDS core and not yet Acked/Failed. Two
            PSN windows by default, so the core always has the next window queued when ACKs
            arrive, while memory stays bounded.
        pds: the PDS core's configuration (:class:`uet.pds.PdsConfig`). The endpoint's default
            differs from the core's in two fields, for measured reasons: ``rto_ns`` = 50 ms
            (a Python receiver behind a full 128-packet window queues 5–15 ms of work, more when
            the CPU is shared; 2 ms and 10 ms RTOs retransmitted whole windows spuriously and 2 ms
            exhausted the retries of a healthy transfer), and ``ack_gen_trigger`` = 32768 bytes
            (the spec maximum, behaviour.md §2.8: half the ACKs of the 16384 default, and ACK
            processing is a large share of per-packet CPU on both sides).
        ecn_capable: mark data packets ECT(0) (the reference marks nothing, wire-format.md §1.3;
            turn on when an ECN-reacting CC is in use).
        max_partial / reassembly_timeout_ns: target reassembly limits (:class:`MessageConfig`).
        close_timeout_s: how long :meth:`Endpoint.close` waits for PDCs to close gracefully.
        housekeeping_s: period of the reassembly expiry sweep.
        max_batch: datagrams read per readiness callback (direct link).
        rcvbuf / sndbuf: socket buffer sizes requested (bounded by ``net.core.*mem_max``).
        seed: seeds the PDS core's and the message ids' random generators, mixed with the FEP's
            address (None = random).
    """

    payload_size: int = 4096
    max_message: int = 64 << 20
    max_inflight: int = 256
    pds: PdsConfig = field(default_factory=lambda: PdsConfig(rto_ns=50_000_000, ack_gen_trigger=32768))
    ecn_capable: bool = False
    max_partial: int = 1024
    reassembly_timeout_ns: int = 5_000_000_000
    close_timeout_s: float = 2.0
    housekeeping_s: float = 0.5
    max_batch: int = 64
    rcvbuf: int = 4 << 20
    sndbuf: int = 4 << 20
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        self.message_config()  # validates payload_size / max_message

    def message_config(self) -> MessageConfig:
        """The message layer's configuration derived from these fields."""
        return MessageConfig(
            payload_size=self.payload_size,
            max_message=self.max_message,
            max_partial=self.max_partial,
            reassembly_timeout_ns=self.reassembly_timeout_ns,
        )


class _OutMsg:
    """A message being sent: its packets' progress and the caller's future."""

    __slots__ = (
        "peer",
        "mode",
        "data",
        "length",
        "mid",
        "npkts",
        "it",
        "submitted",
        "done",
        "eom_submitted",
        "abandoned",
        "error",
        "future",
        "pid",
        "ri",
        "header_data",
        "t0",
        "lane",
    )

    def __init__(self, peer: str, mode: Mode, data: memoryview, mid: int, npkts: int, future: asyncio.Future) -> None:
        self.peer = peer
        self.mode = mode
        self.data = data
        self.length = len(data)
        self.mid = mid
        self.npkts = npkts
        self.it: Any = None
        self.submitted = 0
        self.done = 0
        self.eom_submitted = False
        self.abandoned = False
        self.error: DeliveryError | None = None
        self.future = future
        self.pid = 0
        self.ri = 0
        self.header_data: int | None = None
        self.t0 = 0
        self.lane: _Lane | None = None


class _Lane:
    """Messages toward one (peer, mode, tc), submitted one message at a time."""

    __slots__ = ("key", "queue", "active", "inflight", "job_id", "tc")

    def __init__(self, key: tuple[str, Mode, int], job_id: int, tc: int) -> None:
        self.key = key
        self.queue: deque[_OutMsg] = deque()
        self.active: _OutMsg | None = None
        self.inflight = 0
        self.job_id = job_id
        self.tc = tc


def _now() -> int:
    return time.monotonic_ns()


class Endpoint:
    """A Fabric Endpoint: ``await Endpoint.open(address)``, then ``send`` / ``recv``, then ``close``.

    Use as an async context manager to close automatically. ``counters`` merges the PDS core's,
    the link's (``link_`` prefix), the message layer's (``ses_`` prefix) and the endpoint's own.
    """

    def __init__(
        self,
        link: Link,
        *,
        job: int = 0,
        pid: int = 0,
        resource_index: int = 0,
        config: EndpointConfig | None = None,
        event_log: EventLog | Callable[[dict], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.config = cfg = config or EndpointConfig()
        self.loop = loop or asyncio.get_running_loop()
        self.link = link
        self.address = link.address
        self.job = job
        self.pid = pid
        self.resource_index = resource_index
        self.event_log = event_log
        # Seeded runs stay reproducible, yet two FEPs given the same seed draw different PDCIDs,
        # Start_PSNs and message ids.
        rng = random.Random(None if cfg.seed is None else f"{cfg.seed}/{self.address}")
        self.core = PdsCore(self.address, cfg.pds, rng=random.Random(rng.getrandbits(64)), log=event_log)
        self.core.on_deliver = self._on_deliver
        self.segmenter = Segmenter(
            job_id=job,
            initiator=initiator_id(self.address),
            payload_size=cfg.payload_size,
            max_message=cfg.max_message,
            rng=random.Random(rng.getrandbits(64)),
        )
        self.reassembler = Reassembler(
            job_id=job, pid_on_fep=pid, resource_index=resource_index, config=cfg.message_config()
        )
        self._lanes: dict[tuple[str, Mode, int], _Lane] = {}
        self._inbox: deque[Message] = deque()
        self._waiters: deque[asyncio.Future[Message]] = deque()
        self._peers: dict[str, str] = {}
        self._unfinished: set[_OutMsg] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._pump_scheduled = False
        self._dirty: set[_Lane] = set()
        self._closing = False
        self._closed = False
        self._idle_event: asyncio.Event | None = None
        self._data_ecn = 2 if cfg.ecn_capable else 0
        self._stats: dict[str, int] = {
            "messages_sent": 0,
            "messages_failed": 0,
            "messages_received": 0,
            "bytes_sent": 0,
            "bytes_received": 0,
            "pdcs_opened": 0,
            "pdcs_closed": 0,
            "pdcs_closed_in_error": 0,
            "nacks_received": 0,
            "packets_acked": 0,
            "timer_fires": 0,
            "pumps": 0,
        }
        self._housekeeping = self.loop.call_later(cfg.housekeeping_s, self._sweep)
        link.set_receiver(self._on_batch)
        self._log("open", job=job, pid=pid, port=getattr(link, "port", None))

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
        event_log: EventLog | Callable[[dict], None] | None = None,
        link: Link | None = None,
    ) -> Endpoint:
        """Open a FEP at ``address`` (binding UDP ``port``, 4793 by default) on the running loop.

        ``peer_port`` is where peers listen (default: the same port). ``impairment`` (an
        :class:`Impairment` or its config) impairs everything this FEP transmits. Pass ``link``
        to run over another :class:`Link` (the fabric link).
        """
        cfg = config or EndpointConfig()
        if isinstance(impairment, ImpairmentConfig):
            impairment = Impairment(impairment)
        if link is None:
            link = DirectLink(
                address,
                port,
                peer_port=peer_port,
                impairment=impairment,
                rcvbuf=cfg.rcvbuf,
                sndbuf=cfg.sndbuf,
                max_batch=cfg.max_batch,
            )
        return cls(link, job=job, pid=pid, resource_index=resource_index, config=cfg, event_log=event_log)

    async def __aenter__(self) -> Endpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Endpoint({self.address!r}, job={self.job}, pid={self.pid})"

    # -- public API ----------------------------------------------------------------------------

    async def send(
        self,
        peer: str,
        data: bytes | bytearray | memoryview,
        *,
        mode: Mode = Mode.RUD,
        pid: int = 0,
        resource_index: int = 0,
        header_data: int | None = None,
        tc: int = 0,
    ) -> None:
        """Send ``data`` as one message to the FEP at ``peer`` (its process ``pid``).

        Returns when the target has the whole message (see the module docstring); raises
        :class:`DeliveryError` if a packet failed or the target answered an error, and
        :class:`EndpointClosed` if the endpoint closes first. ``data`` must not change until the
        call returns (packets are zero-copy slices of it).
        """
        await self.send_nowait(
            peer, data, mode=mode, pid=pid, resource_index=resource_index, header_data=header_data, tc=tc
        )

    def send_nowait(
        self,
        peer: str,
        data: bytes | bytearray | memoryview,
        *,
        mode: Mode = Mode.RUD,
        pid: int = 0,
        resource_index: int = 0,
        header_data: int | None = None,
        tc: int = 0,
    ) -> asyncio.Future[None]:
        """Queue a message and return the future that :meth:`send` awaits (for pipelining)."""
        if self._closing:
            raise EndpointClosed(f"{self} is closed")
        fa = self._peers.get(peer)
        if fa is None:
            fa = self._peers[peer] = str(ipaddress.ip_address(peer))
        peer = fa
        mode = Mode(mode)
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        if len(view) > self.config.max_message:
            raise DeliveryError(f"message of {len(view)} bytes exceeds max_message {self.config.max_message}")
        fut: asyncio.Future[None] = self.loop.create_future()
        seg = self.segmenter
        msg = _OutMsg(peer, mode, view, seg.next_message_id(), seg.count(len(view)), fut)
        msg.pid, msg.ri, msg.header_data = pid, resource_index, header_data
        msg.t0 = _now()
        key = (peer, mode, tc)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(key, self.job, tc)
        msg.lane = lane
        self._unfinished.add(msg)
        lane.queue.append(msg)
        self._dirty.add(lane)
        self._log("msg_tx", peer=peer, mode=mode.name, msg_id=msg.mid, bytes=msg.length, pkts=msg.npkts)
        self._schedule_pump()
        return fut

    async def recv(self) -> Message:
        """The next message delivered to this FEP (waits for one; raises :class:`EndpointClosed`
        when the endpoint closes while waiting)."""
        if self._inbox:
            return self._inbox.popleft()
        if self._closed:
            raise EndpointClosed(f"{self} is closed")
        fut: asyncio.Future[Message] = self.loop.create_future()
        self._waiters.append(fut)
        return await fut

    def recv_nowait(self) -> Message | None:
        """The next delivered message, or None when none is waiting."""
        return self._inbox.popleft() if self._inbox else None

    @property
    def pending_messages(self) -> int:
        """Delivered messages waiting for :meth:`recv`."""
        return len(self._inbox)

    @property
    def counters(self) -> dict[str, int]:
        """A snapshot of every counter (core, ``link_*``, ``ses_*``, endpoint)."""
        out = dict(self.core.counters)
        out.update({"link_" + k: v for k, v in self.link.counters.items()})
        out.update({"ses_" + k: v for k, v in self.reassembler.counters.items()})
        imp = getattr(self.link, "impairment", None)
        if imp is not None:
            out.update({"impair_" + k: v for k, v in imp.counters.items()})
        out.update(self._stats)
        return out

    async def close(self) -> None:
        """Close gracefully: stop admitting sends, let queued messages finish and PDCs close
        (CLOSE control packets, behaviour.md §2.12) for at most ``close_timeout_s``, then release
        the link. Sends still pending then fail with :class:`EndpointClosed`."""
        if self._closed:
            return
        self._closing = True
        deadline = self.loop.time() + self.config.close_timeout_s
        # First let what was already queued go out and be acknowledged.
        while any(lane.queue or lane.active or lane.inflight for lane in self._lanes.values()):
            if self.loop.time() >= deadline:
                break
            await self._wait_idle_change(deadline)
        self.core.close(_now())
        self._pump()
        while not self.core.idle() and self.loop.time() < deadline:
            await self._wait_idle_change(deadline)
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._housekeeping.cancel()
        for lane in self._lanes.values():
            lane.queue.clear()
            lane.active = None
        for m in self._unfinished:
            if not m.future.done():
                self._stats["messages_failed"] += 1
                m.future.set_exception(EndpointClosed(f"{self} closed before message {m.mid} was delivered"))
        self._unfinished.clear()
        while self._waiters:
            w = self._waiters.popleft()
            if not w.done():
                w.set_exception(EndpointClosed(f"{self} closed"))
        self._log("close", **{k: v for k, v in self._stats.items() if v})
        self.link.close()
        if isinstance(self.event_log, EventLog):
            self.event_log.flush()

    async def _wait_idle_change(self, deadline: float) -> None:
        ev = self._idle_event = asyncio.Event()
        try:
            await asyncio.wait_for(ev.wait(), max(0.0, deadline - self.loop.time()))
        except TimeoutError:
            pass
        finally:
            self._idle_event = None

    # -- the pump ------------------------------------------------------------------------------

    def _schedule_pump(self) -> None:
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self.loop.call_soon(self._pump)

    def _on_batch(self, batch: Sequence[tuple[bytes, str, int]]) -> None:
        if self._closed:
            return
        now = _now()
        self.reassembler.now = now
        rx = self.core.receive_datagram
        for data, src, ecn in batch:
            rx(data, src, now, ecn=ecn)
        self._pump(now)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if self._closed:
            return
        now = _now()
        self._stats["timer_fires"] += 1
        self.reassembler.now = now
        self.core.handle_timer(now)
        self._pump(now)

    def _pump(self, now: int | None = None) -> None:
        """Events → refill lanes → transmit → re-arm the timer."""
        self._pump_scheduled = False
        if self._closed:
            return
        if now is None:
            now = _now()
        self._stats["pumps"] += 1
        core = self.core
        self._drain_events()
        if self._dirty:
            dirty = self._dirty
            self._dirty = set()
            for lane in dirty:
                self._refill(lane, now)
        out = core.datagrams_to_send(now)
        if out:
            send = self.link.send
            is_data = _IS_DATA
            ecn = self._data_ecn
            for data, dst, entropy in out:
                if is_data[data[0] >> 3]:
                    send(data, dst, entropy, DSCP_DATA, ecn)
                else:
                    send(data, dst, entropy, DSCP_CONTROL, 0)
            # UUD packets are Acked when handed out: their events are ready now.
            self._drain_events()
            if self._dirty:
                self._schedule_pump()
        self._arm_timer(now)
        if self._idle_event is not None:
            self._idle_event.set()

    def _arm_timer(self, now: int) -> None:
        at = self.core.get_timer()
        if at is None:
            return
        if self._timer is not None:
            if self._timer_at is not None and self._timer_at <= at:
                return  # an earlier (or equal) wake-up is already armed; it re-arms when it fires
            self._timer.cancel()
        self._timer_at = at
        self._timer = self.loop.call_later(max(0, at - now) / 1e9, self._on_timer)

    def _sweep(self) -> None:
        if self._closed:
            return
        self.reassembler.expire(_now())
        self._housekeeping = self.loop.call_later(self.config.housekeeping_s, self._sweep)

    # -- initiator side ------------------------------------------------------------------------

    def _refill(self, lane: _Lane, now: int) -> None:
        limit = self.config.max_inflight
        submit = self.core.submit
        peer, mode, tc = lane.key
        unreliable = mode == Mode.RUDI or mode == Mode.UUD
        while lane.inflight < limit:
            msg = lane.active
            if msg is None:
                if not lane.queue:
                    return
                msg = lane.active = lane.queue.popleft()
                msg.it = self.segmenter.packets(
                    msg.data, msg.mid, pid_on_fep=msg.pid, resource_index=msg.ri, header_data=msg.header_data
                )
            if msg.abandoned:
                lane.active = None
                self._maybe_finish(msg)
                continue
            item = next(msg.it, None)
            if item is None:  # pragma: no cover - EOM always ends the iterator first
                lane.active = None
                continue
            ses, payload, som, eom = item
            try:
                # RUDI/UUD have no PDC, so every packet is its own PDS request (the core takes
                # them as SOM+EOM); the SES header still carries the message's real SOM/EOM.
                pds_whole = unreliable
                submit(
                    peer, mode, _NH_STANDARD, ses, payload, token=msg, som=som or pds_whole,
                    eom=eom or pds_whole, now=now, job_id=lane.job_id, tc=tc,
                )  # fmt: skip
            except UetError as e:
                msg.abandoned = True
                msg.error = msg.error or DeliveryError(f"PDS refused the packet: {e}")
                lane.active = None
                self._maybe_finish(msg)
                continue
            msg.submitted += 1
            lane.inflight += 1
            if eom:
                msg.eom_submitted = True
                lane.active = None

    def _drain_events(self) -> None:
        """Handle every pending core event; Acked (one per packet) takes an inlined fast path."""
        next_event = self.core.next_event
        dirty = self._dirty
        acked = 0
        ev = next_event()
        while ev is not None:
            if type(ev) is Acked and not ev.response_next_hdr:
                msg = ev.token
                msg.done += 1
                lane = msg.lane
                lane.inflight -= 1
                dirty.add(lane)
                acked += 1
                if msg.done >= msg.submitted:
                    self._maybe_finish(msg)
            else:
                self._on_event(ev)
            ev = next_event()
        self._stats["packets_acked"] += acked

    def _on_event(self, ev: Any) -> None:
        t = type(ev)
        if t is Acked:
            msg = ev.token
            self._packet_done(msg)
            if ev.response_next_hdr == _NH_RESPONSE and ev.response and msg.error is None:
                _op, rc, _mid, mlen = decode_response(ev.response)
                if rc not in _RC_GOOD:
                    msg.error = DeliveryError("target SES reported an error", return_code=rc)
                    msg.abandoned = True
                elif rc == ReturnCode.OK and mlen != msg.length:
                    msg.error = DeliveryError(f"target placed {mlen} of {msg.length} bytes", return_code=rc)
                    msg.abandoned = True
            self._maybe_finish(msg)
        elif t is Failed:
            msg = ev.token
            self._packet_done(msg)
            if msg.error is None:
                msg.error = DeliveryError(f"packet failed: {ev.reason}", nack_code=ev.nack_code)
            msg.abandoned = True
            self._maybe_finish(msg)
        elif t is PdcOpened:
            self._stats["pdcs_opened"] += 1
        elif t is PdcClosed:
            self._stats["pdcs_closed"] += 1
            if ev.error:
                self._stats["pdcs_closed_in_error"] += 1
        elif t is NackReceived:
            self._stats["nacks_received"] += 1

    def _packet_done(self, msg: _OutMsg) -> None:
        msg.done += 1
        self._stats["packets_acked"] += 1
        lane = msg.lane
        lane.inflight -= 1  # type: ignore[union-attr]
        self._dirty.add(lane)  # type: ignore[arg-type]

    def _maybe_finish(self, msg: _OutMsg) -> None:
        fut = msg.future
        if fut.done():
            return
        if msg.done < msg.submitted or not (msg.eom_submitted or msg.abandoned):
            return
        self._unfinished.discard(msg)
        if msg.abandoned and msg.error is None:  # pragma: no cover - abandon always sets an error
            msg.error = DeliveryError("message abandoned")
        elapsed = _now() - msg.t0
        if msg.error is not None:
            self._stats["messages_failed"] += 1
            self._log("msg_fail", peer=msg.peer, msg_id=msg.mid, reason=str(msg.error), ns=elapsed)
            fut.set_exception(msg.error)
        else:
            self._stats["messages_sent"] += 1
            self._stats["bytes_sent"] += msg.length
            self._log("msg_done", peer=msg.peer, msg_id=msg.mid, bytes=msg.length, ns=elapsed)
            fut.set_result(None)
        msg.data = memoryview(b"")  # release the caller's buffer

    # -- target side ---------------------------------------------------------------------------

    def _on_deliver(self, d: Any) -> tuple[int, bytes] | None:
        r = self.reassembler
        resp = r.deliver(d.peer, d.mode, d.next_hdr, d.ses, d.payload)
        if r.completed:
            st = self._stats
            while r.completed:
                m = r.completed.popleft()
                st["messages_received"] += 1
                st["bytes_received"] += m.nbytes
                if self.event_log is not None:
                    self._log("msg_rx", peer=m.source, msg_id=m.message_id, bytes=m.nbytes, mode=Mode(m.mode).name)
                waiters = self._waiters
                while waiters:
                    w = waiters.popleft()
                    if not w.done():
                        w.set_result(m)
                        break
                else:
                    self._inbox.append(m)
        return resp

    def _log(self, ev: str, **fields: Any) -> None:
        log = self.event_log
        if log is not None:
            log({"t": _now(), "ev": ev, "fep": self.address, **fields})


def install_uvloop() -> bool:
    """Make uvloop the event loop policy when it is installed; True if it was. Never required."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a default dependency on Linux
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def run(main: Coroutine[Any, Any, T] | Awaitable[T], *, use_uvloop: bool = True) -> T:
    """``asyncio.run`` on uvloop when it is installed (and ``use_uvloop``), else the default loop."""
    factory = None
    if use_uvloop:
        try:
            import uvloop

            factory = uvloop.new_event_loop
        except ImportError:  # pragma: no cover
            factory = None

    async def _wrap() -> T:
        return await main

    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_wrap())


def with_config(config: EndpointConfig, **changes: Any) -> EndpointConfig:
    """A copy of ``config`` with fields changed (``dataclasses.replace``; PDS fields by name too)."""
    pds_fields = {k: v for k, v in changes.items() if k in PdsConfig.__dataclass_fields__}
    ep_fields = {k: v for k, v in changes.items() if k not in pds_fields}
    if pds_fields:
        ep_fields["pds"] = replace(config.pds, **pds_fields)
    return replace(config, **ep_fields)
