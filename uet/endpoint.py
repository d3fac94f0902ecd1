"""The Fabric Endpoint (FEP): the asyncio object that runs SES + PDS over a link — the public API.

``Endpoint`` composes the sans-I/O parts with one I/O part (ARCHITECTURE.md "Principles" 1):

* the SES (:class:`uet.ses.SesFep`): memory regions, resources, matching, the initiator and target
  engines for every operation (send, tagged send, RMA write/read, atomics, rendezvous and
  deferrable sends, RTR, MSG_ERROR), plus the unexpected-message fast path;
* the PDS core (:class:`uet.pds.PdsCore`): PDCs, PSNs, ACKs, retransmission;
* a :class:`uet.link.Link` (the direct UDP link by default) that only moves bytes.

Public API (issue 4; every call raises a :class:`~uet.ses.errors.SesError` subclass carrying the
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

**Peer addressing** (behaviour.md §1.1–§1.2, our choice): ``peer`` is a :class:`Peer` or an
address string. A string (or a ``Peer`` field left None) means: the same JobID, PIDonFEP and
resource index as this endpoint — the SPMD convention where every process of a job uses the same
PIDonFEP on its own FEP — with generation 0 and relative addressing. ``Peer(addr, pid=...,
ri=..., job=..., generation=..., relative=False)`` names anything else; absolute addressing
(``relative=False``) reaches a process regardless of its job (authorisation then rests on the
memory region's or receive's JobID restriction).

**Two send paths.** A plain eager send (no DC, under the rendezvous/deferrable thresholds) is
segmented by the endpoint itself into *lanes* (below), with the SES standard header, exactly the
packets :class:`~uet.ses.initiator.SesInitiator` would build (wire-identical), because that path
carries bulk data and costs a fraction of the general engine's CPU per packet. Every other
operation goes through the initiator engine. Both take message ids from one space.

Flow control of the eager path (memory stays bounded for 64 MiB messages): messages toward one
``(peer, mode, traffic class, job)`` form a *lane*; a lane submits the packets of one message at
a time (PDS requires all packets of a message on one PDC and no interleaving on a PDC, behaviour.md
§1.4) and keeps at most ``EndpointConfig.max_inflight`` packets submitted but not yet
Acked/Failed. Payloads are zero-copy slices of the caller's buffer. Engine packets are submitted
with a PDS ``msg_id`` so they queue behind a lane's open message instead of interleaving.

Completion rule for ``send`` (behaviour.md §6.9 "initiator rules"): the message is delivered when
every packet is Acked and no SES response reported an error (an ACK carrying the target's
non-guaranteed response may be lost and replaced by a cumulative ACK: implicit success). RUDI
packets are Acked by their RUDI responses; UUD packets when handed to the link (best effort,
§2.15). Errors: a return code other than OK in a response raises its ``SesError`` subclass
(``BadPid``, ``BadMkey``, ...); a packet PDS gave up on raises :class:`DeliveryError`
(``UNDELIVERABLE``, with the NACK code). The eager path does not retry ``NO_MATCH``; the engine
path retries per §6.4.

Receives: ``recv`` (no buffer) takes the first matching message from the unexpected list —
eager messages that arrived before any receive was posted — or waits for one (a message of at
least ``MessageConfig.inplace_threshold`` = 1 MiB was reassembled in place, and its ``data`` is a
read-only ``memoryview``; smaller ones are ``bytes``); ``recv_into``
posts a buffer on the expected list (truncation only with ``truncate=True``, else ``TOO_LONG``);
``post_recv`` returns a :class:`Receive` handle that can be cancelled (``CANCELLED``).
Cancelling the task awaiting ``recv``/``recv_into`` withdraws the receive.

Time: the endpoint owns one timer handle, re-armed from the PDS core's and the SES engines'
``get_timer()``, and feeds them ``time.monotonic_ns()``. Processing is batched: the link hands
over every datagram readable at once, the endpoint feeds them to the core, handles events, then
drains ``datagrams_to_send`` once and re-arms the timer.

RUDI and UUD packets are submitted to the core as SOM+EOM each (no PDC, so no message framing at
the PDS level) while their SES headers carry the message's real SOM/EOM. Read data returns in the
ACKs of the read requests (``TargetConfig.max_ack_data`` = the payload size): the endpoint does
not yet use the PDS core's return direction (read data as requests on the read's PDC, which also
needs a PDC lock held until the data is in).

Known limits (choices): an eager message that fails part-way (a packet Failed in PDS) sends no
MSG_ERROR, so its partial reassembly at the target expires after ``reassembly_timeout_ns`` (the
engine path sends MSG_ERROR, §6.4); completed fast-path messages wait on the unexpected list
without a byte limit (like the previous inbox; only messages *in progress* are bounded, by
``max_partial``, beyond which PDS NACKs ``NO_SES_MSG_AVAIL``); a :class:`Message` completed into
a posted buffer reports ``mode`` 0 (the receive completion does not carry the PDS mode).
"""

from __future__ import annotations

import asyncio
import ipaddress
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, TypeVar

from uet.errors import UetError
from uet.eventlog import EventLog
from uet.link.base import DSCP_CONTROL, DSCP_DATA, Link
from uet.link.direct import DirectLink
from uet.link.impair import Impairment, ImpairmentConfig
from uet.pds import Acked, AckedRun, Failed, Mode, NackReceived, PdcClosed, PdcOpened, PdsConfig, PdsCore
from uet.ses.errors import Undeliverable, error_for
from uet.ses.events import OpCompleted, OpFailed, RecvCompleted, WriteCompleted
from uet.ses.fep import SesFep
from uet.ses.initiator import InitiatorConfig, SesAddress
from uet.ses.matching import MatchLimits, PostedReceive
from uet.ses.memory import Access, MemoryRegion
from uet.ses.message import (
    MAX_WIRE_PAYLOAD,
    Message,
    MessageConfig,
    Segmenter,
    decode_response,
    initiator_id,
)
from uet.ses.target import TargetConfig
from uet.tuning import tune_allocator
from uet.wire.net import UET_UDP_PORT
from uet.wire.pds import NextHeader, PdsType
from uet.wire.ses import CSWAP_OPS, AmoOp, AmoType, ReturnCode

_tnew = tuple.__new__
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
]

T = TypeVar("T")

_NH_RESPONSE = int(NextHeader.RESPONSE)
_NH_STANDARD = int(NextHeader.STANDARD)
_RC_OK = int(ReturnCode.OK)
_RC_GOOD = (int(ReturnCode.NULL), _RC_OK)
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
_OWN: Any = object()


class DeliveryError(Undeliverable):
    """A message or operation did not reach the target: a packet Failed in PDS, or it was
    refused locally before any packet left. An :class:`~uet.ses.errors.SesError` with return code
    ``UNDELIVERABLE`` unless ``return_code`` says otherwise.

    Attributes: ``reason`` (words), ``nack_code`` (the PDS NACK code when one caused it).
    """

    def __init__(self, reason: str, *, nack_code: int | None = None, return_code: int | None = None) -> None:
        self.reason = reason
        self.nack_code = nack_code
        extra = f" (nack {nack_code:#x})" if nack_code is not None else ""
        super().__init__(reason + extra, return_code=return_code)


class EndpointClosed(UetError):
    """The endpoint is closed (or closing): no new operations; pending ones fail with this."""


@dataclass(frozen=True)
class Peer:
    """A target of operations: a FEP's Fabric Address plus the SES addressing (§1.1–§1.2).

    Fields left None take this endpoint's own value (same job, same PIDonFEP, same resource
    index: the SPMD convention). ``relative=False`` selects absolute addressing (REL clear).
    """

    address: str
    pid: int | None = None
    ri: int | None = None
    job: int | None = None
    generation: int = 0
    relative: bool = True


@dataclass(frozen=True)
class EndpointConfig:
    """Configuration of one FEP (CONVENTIONS.md: one dataclass per layer, defaults documented).

    Attributes:
        payload_size: payload bytes per packet (default 4096; 8192 is the reference provider's
            upper bound; ≤ 16383 conforms to the 14-bit ``payload_length``; larger values up to
            65451 use the loopback-only jumbo extension of :mod:`uet.ses.message`, for eager
            sends only — the SES engine segments at min(payload_size, 16383)).
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
        ecn_feedback: read the ECN field of received datagrams (``IP_RECVTOS``; a CE mark sets
            ``M`` in the ACK) on the direct link. None (default): the same as ``ecn_capable``,
            since only ECT packets can be marked and the FEPs of one fabric share the setting;
            without it the link reads with ``recvfrom``, about 0.7 µs less per datagram than
            ``recvmsg`` with ancillary data. The fabric link always carries ECN.
        rendezvous_threshold: sends longer than this use RENDEZVOUS_SEND (§6.6: eager part, the
            target reads the rest); None (default) never.
        deferrable_threshold: sends longer than this use DEFERRABLE_SEND (§6.7: the target
            defers when no receive is posted and sends an RTR later); None (default) never.
        eager_length: bytes a rendezvous send carries eagerly.
        match_limits: the unexpected-list limits of the target engine (:class:`MatchLimits`).
        max_partial / reassembly_timeout_ns: limits of the unexpected-message fast path
            (:class:`MessageConfig`): messages being reassembled at once, idle timeout.
        close_timeout_s: how long :meth:`Endpoint.close` waits for PDCs to close gracefully.
        housekeeping_s: period of the reassembly expiry sweep.
        max_batch: datagrams read per readiness callback (direct link).
        rcvbuf / sndbuf: socket buffer sizes requested (bounded by ``net.core.*mem_max``).
        seed: seeds the PDS core's and the SES engines' random generators, mixed with the FEP's
            address (None = random).
        tune_allocator: keep freed heap memory in the process (glibc ``M_TRIM_THRESHOLD`` =
            32 MiB, :func:`uet.tuning.tune_allocator`; process-wide, applied once): without it
            every burst of datagrams freed is handed back to the kernel and faulted back in by the
            next (measured 5.4 → 3.6–3.9 µs per 8 KiB packet to build and queue datagrams).
            False leaves the allocator alone.
    """

    payload_size: int = 4096
    max_message: int = 64 << 20
    max_inflight: int = 256
    pds: PdsConfig = field(default_factory=lambda: PdsConfig(rto_ns=50_000_000, ack_gen_trigger=32768))
    ecn_capable: bool = False
    ecn_feedback: bool | None = None
    rendezvous_threshold: int | None = None
    deferrable_threshold: int | None = None
    eager_length: int = 4096
    match_limits: MatchLimits = field(default_factory=MatchLimits)
    max_partial: int = 1024
    reassembly_timeout_ns: int = 5_000_000_000
    close_timeout_s: float = 2.0
    housekeeping_s: float = 0.5
    max_batch: int = 64
    rcvbuf: int = 4 << 20
    sndbuf: int = 4 << 20
    seed: int | None = None
    tune_allocator: bool = True

    def __post_init__(self) -> None:
        if self.max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        self.message_config()  # validates payload_size / max_message

    def message_config(self) -> MessageConfig:
        """The fast path's (message layer's) configuration derived from these fields."""
        return MessageConfig(
            payload_size=self.payload_size,
            max_message=self.max_message,
            max_partial=self.max_partial,
            reassembly_timeout_ns=self.reassembly_timeout_ns,
        )


class Receive:
    """A posted receive (:meth:`Endpoint.post_recv`): await it for the :class:`Message` (its
    ``data`` a view of the buffer), or :meth:`cancel` it (the await then raises ``Cancelled``)."""

    __slots__ = ("_ep", "_posted", "future", "buffer")

    def __init__(self, ep: Endpoint, future: asyncio.Future[Message], buffer: memoryview) -> None:
        self._ep = ep
        self._posted: PostedReceive | None = None
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


class _Waiter:
    """A receive without a buffer (``recv``): its filter and future."""

    __slots__ = ("tagged", "tag", "ignore", "initiator", "source", "future", "posted")

    def __init__(
        self,
        tagged: bool,
        tag: int,
        ignore: int,
        initiator: int | None,
        future: asyncio.Future,
        source: str | None = None,
    ) -> None:
        self.tagged = tagged
        self.tag = tag
        self.ignore = ignore
        self.initiator = initiator
        #: the Fabric Address a directed receive wants (checked against where a message came from)
        self.source = source
        self.future = future
        self.posted: PostedReceive | None = None


class _OutMsg:
    """An eager message being sent on a lane: its packets' progress and the caller's future."""

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
        "job",
        "generation",
        "relative",
        "tag",
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
        self.error: UetError | None = None
        self.future = future
        self.pid = 0
        self.ri = 0
        self.job = 0
        self.generation = 0
        self.relative = True
        self.tag: int | None = None
        self.header_data: int | None = None
        self.t0 = 0
        self.lane: _Lane | None = None


class _Lane:
    """Eager messages toward one (peer, mode, tc, job), submitted one message at a time."""

    __slots__ = ("key", "queue", "active", "inflight", "job_id", "tc")

    def __init__(self, key: tuple[str, Mode, int, int], job_id: int, tc: int) -> None:
        self.key = key
        self.queue: deque[_OutMsg] = deque()
        self.active: _OutMsg | None = None
        self.inflight = 0
        self.job_id = job_id
        self.tc = tc


def _now() -> int:
    return time.monotonic_ns()


def _flat(data: Any) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or view.itemsize != 1 or view.format != "B":
        view = view.cast("B")
    return view


class Endpoint:
    """A Fabric Endpoint: ``await Endpoint.open(address, job=..., pid=...)``, then operations
    (module docstring), then ``close``. An async context manager (closes on exit).

    Attributes: ``address`` (the Fabric Address), ``job``, ``pid``, ``resource_index``, ``ses``
    (the :class:`~uet.ses.SesFep`), ``core`` (the :class:`~uet.pds.PdsCore`), ``link``.
    ``counters`` merges the PDS core's, the link's (``link_`` prefix), the SES layer's (``ses_``
    prefix) and the endpoint's own.
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
        security: Any = None,
    ) -> None:
        self.config = cfg = config or EndpointConfig()
        self.loop = loop or asyncio.get_running_loop()
        if cfg.tune_allocator:
            tune_allocator()
        if security is not None:  # TSS: seal/open every datagram (uet.tss.link)
            from uet.tss.link import SecureLink

            link = SecureLink(link, security, event_log=event_log)
        self.link = link
        #: the link's batch transmit (DirectLink.send_many), when it has one
        self._send_many: Callable[[Sequence[tuple[bytes, str, int]], Sequence[bool], int], None] | None = getattr(
            link, "send_many", None
        )
        self.address = link.address
        self.job = job
        self.pid = pid
        self.resource_index = resource_index
        self.event_log = event_log
        # Seeded runs stay reproducible, yet two FEPs given the same seed draw different PDCIDs,
        # Start_PSNs and message ids.
        rng = random.Random(None if cfg.seed is None else f"{cfg.seed}/{self.address}")
        self.core = PdsCore(self.address, cfg.pds, rng=random.Random(rng.getrandbits(64)), log=event_log)
        #: SDI of this FEP's PDCs (TSS): given to the core with every packet it sends and receives, so
        #: its PDCs are secure PDCs (Expected_PSN reuse, PSN-range limit, SDI checks, §2.3.2)
        self._sdi: int | None = None
        self._rx_sdi: int | None = None
        if security is not None:
            link.attach(self.core)  # type: ignore[attr-defined]  # secure Start_PSN policy (§2.3.2)
            self._sdi = link.sdi  # type: ignore[attr-defined]
            # with accept_any_sdi the link opens several domains and a packet's SDI is not passed up
            self._rx_sdi = None if link.config.accept_any_sdi else self._sdi  # type: ignore[attr-defined]
        self.initiator_id = initiator_id(self.address)
        ses_payload = min(cfg.payload_size, MAX_WIRE_PAYLOAD)
        self.ses = SesFep(
            self.address,
            initiator=InitiatorConfig(
                initiator_id=self.initiator_id,
                max_payload=ses_payload,
                deferrable_threshold=cfg.deferrable_threshold,
                rendezvous_threshold=cfg.rendezvous_threshold,
                eager_length=cfg.eager_length,
                local_pid=pid,
                local_index=resource_index,
            ),
            target=TargetConfig(max_payload=ses_payload, max_ack_data=ses_payload),
            limits=cfg.match_limits,
            rng=random.Random(rng.getrandbits(64)),
            fast=cfg.message_config(),
            default=(pid, resource_index, job),
        )
        self.core.on_deliver = self.ses.on_deliver  # directly: one Python frame less per packet
        self.core.payload_views = True  # the fast path copies payloads into reassembly buffers
        self.core.acked_runs = True  # implicitly acknowledged packets of a message: one event per run
        if self.ses.fast is not None:  # predicted in-order runs go straight to the message layer
            self.core.on_data = self.ses.fast.deliver_datagram
        self.segmenter = Segmenter(
            job_id=job,
            initiator=self.initiator_id,
            payload_size=cfg.payload_size,
            max_message=cfg.max_message,
            rng=random.Random(rng.getrandbits(64)),
        )
        self._lanes: dict[tuple[str, Mode, int, int], _Lane] = {}
        self._waiters: deque[_Waiter] = deque()
        self._writes: deque[WriteCompleted] = deque()
        self._write_waiters: deque[asyncio.Future[WriteCompleted]] = deque()
        self._ops: set[asyncio.Future] = set()
        self._peers: dict[str, str] = {}
        self._dests: dict[str, SesAddress] = {}
        self.ses.on_unexpected = self._offer
        self.ses.receive_waiting = self._receive_waiting
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
            "ops_completed": 0,
            "ops_failed": 0,
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
        security: Any = None,
    ) -> Endpoint:
        """Open a FEP at ``address`` (binding UDP ``port``, 4793 by default) on the running loop,
        hosting process ``pid`` of job ``job`` with resource index ``resource_index``.

        ``peer_port`` is where peers listen (default: the same port). ``impairment`` (an
        :class:`Impairment` or its config) impairs everything this FEP transmits. Pass ``link``
        to run over another :class:`Link` (the fabric link). ``security`` (a
        :class:`uet.tss.link.SecurityConfig` or a secure-domain table) runs TSS on every datagram.
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
                read_ecn=cfg.ecn_capable if cfg.ecn_feedback is None else cfg.ecn_feedback,
            )
        return cls(
            link, job=job, pid=pid, resource_index=resource_index, config=cfg, event_log=event_log, security=security
        )

    async def __aenter__(self) -> Endpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"Endpoint({self.address!r}, job={self.job}, pid={self.pid})"

    # -- addressing ------------------------------------------------------------------------------

    def _fa(self, address: str) -> str:
        fa = self._peers.get(address)
        if fa is None:
            fa = self._peers[address] = str(ipaddress.ip_address(address))
        return fa

    def _dest(self, peer: Peer | str, pid: int | None = None, ri: int | None = None) -> SesAddress:
        """The SES address of ``peer`` (None fields: this endpoint's own job / pid / index)."""
        if isinstance(peer, str):
            if pid is None and ri is None:
                d = self._dests.get(peer)
                if d is None:
                    d = self._dests[peer] = self._dest(Peer(peer))
                return d
            peer = Peer(peer)
        pid = peer.pid if pid is None else pid
        ri = peer.ri if ri is None else ri
        return SesAddress(
            self._fa(peer.address),
            self.pid if pid is None else pid,
            self.resource_index if ri is None else ri,
            peer.generation,
            self.job if peer.job is None else peer.job,
            peer.relative,
        )

    # -- memory ----------------------------------------------------------------------------------

    def register(
        self,
        buffer: Any,
        access: Access | int = Access.ALL,
        *,
        key: int | None = None,
        job: int | None = _OWN,
    ) -> MemoryRegion:
        """Register ``buffer`` (bytearray, memoryview, mmap, array... any buffer; read-only ones
        only for ``REMOTE_READ``) for remote access; returns the :class:`MemoryRegion` whose
        ``key`` peers use. ``job`` restricts it to one JobID (default: this endpoint's job; None
        = any job); requests from other jobs get ``BAD_MKEY`` (§6.5 "treated as unknown").
        Raises :class:`~uet.ses.errors.RegistrationError`."""
        return self.ses.memory.register(buffer, access, key=key, job=self.job if job is _OWN else job)

    def deregister(self, region: MemoryRegion | int) -> None:
        """Remove a registration (a region or its key); later requests get ``BAD_MKEY``."""
        self.ses.memory.deregister(region)

    # -- sends -----------------------------------------------------------------------------------

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

        Returns when the target has the whole message (module docstring); raises a
        :class:`~uet.ses.errors.SesError` subclass on failure (:class:`DeliveryError` when PDS
        gave up) and :class:`EndpointClosed` if the endpoint closes first. ``data`` must not
        change until the call returns (packets are zero-copy slices of it). ``mode`` is the PDS
        delivery mode; ``header_data`` 64-bit immediate data; ``dc`` asks for delivery-complete
        semantics (§6.8); ``protocol`` forces ``"eager"``, ``"rendezvous"`` or ``"deferrable"``
        (default: by the configured thresholds).
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
        if self._closing:
            raise EndpointClosed(f"{self} is closed")
        dest = self._dest(peer, pid, resource_index)
        mode = Mode(mode)
        view = _flat(data)
        n = len(view)
        if n > self.config.max_message:
            raise DeliveryError(f"message of {n} bytes exceeds max_message {self.config.max_message}")
        cfg = self.config
        if protocol is None:
            if cfg.rendezvous_threshold is not None and n > cfg.rendezvous_threshold and n > cfg.eager_length:
                protocol = "rendezvous"
            elif cfg.deferrable_threshold is not None and n > cfg.deferrable_threshold:
                protocol = "deferrable"
            else:
                protocol = "eager"
        if protocol != "eager" or dc:
            return self._engine_op(
                lambda fut: self.ses.initiator.send(
                    dest, view, tag=tag, header_data=header_data, dc=dc, protocol=protocol, mode=int(mode), context=fut
                )
            )
        fut: asyncio.Future[None] = self.loop.create_future()
        seg = self.segmenter
        msg = _OutMsg(dest.fa, mode, view, self.ses.alloc_message_id(), seg.count(n), fut)
        msg.pid, msg.ri, msg.job, msg.generation, msg.relative = (
            dest.pid_on_fep, dest.resource_index, dest.job_id, dest.ri_generation, dest.relative,
        )  # fmt: skip
        msg.tag = tag
        msg.header_data = header_data
        msg.t0 = _now()
        key = (dest.fa, mode, tc, dest.job_id)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(key, dest.job_id, tc)
        msg.lane = lane
        self._unfinished.add(msg)
        lane.queue.append(msg)
        self._dirty.add(lane)
        if self.event_log is not None:
            self._log("msg_tx", peer=dest.fa, mode=mode.name, msg_id=msg.mid, bytes=n, pkts=msg.npkts)
        self._schedule_pump()
        return fut

    # -- RMA and atomics -------------------------------------------------------------------------

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
    ) -> None:
        """RMA write of ``data`` at ``offset`` of the peer's region ``key`` (§6.5). With
        ``header_data`` the target sees a remote-write completion (:meth:`next_write`). Errors:
        ``BAD_MKEY``, ``PERM_VIOLATION``, ``UNSUPPORTED_SIZE`` / ``BAD_ADDR`` (bounds), ..."""
        dest = self._dest(peer)
        view = _flat(data)
        await self._engine_op(
            lambda fut: self.ses.initiator.write(
                dest, key, offset, view, header_data=header_data, dc=dc, mode=int(mode), context=fut
            )
        )

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
        dest = self._dest(peer)
        out = _flat(into) if into is not None else None
        result = await self._engine_op(
            lambda fut: self.ses.initiator.read(dest, key, offset, length, into=out, mode=int(mode), context=fut)
        )
        return out[:length] if out is not None else result

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
    ) -> Any:
        """Atomic ``op`` on ``datatype`` at ``offset`` of the peer's region ``key`` (§6.5, §10).

        ``operand`` is one value or a sequence (vector atomics; MSWAP takes ``[value, mask]``
        pairs; READ needs no operand); raw bytes are sent as they are. The compare-and-swap
        family takes ``compare``/``swap`` (see :meth:`compare_swap`). With ``fetch`` the result
        is the prior value (a tuple for several elements), else None. Errors:
        ``AMO_UNSUPPORTED_OP/DT/SIZE``, ``AMO_UNALIGNED``, ``BAD_MKEY``, ``PERM_VIOLATION``...
        """
        dest = self._dest(peer)
        if operand is None:
            operands: Any = [] if op in CSWAP_OPS else [0]
        elif isinstance(operand, bytes | bytearray | list | tuple):
            operands = operand
        else:
            operands = [operand]
        return await self._engine_op(
            lambda fut: self.ses.initiator.atomic(
                dest,
                key,
                offset,
                int(op),
                int(datatype),
                operands,
                compare=compare,
                swap=swap,
                fetch=fetch,
                mode=int(mode),
                context=fut,
            )  # fmt: skip
        )

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
        if op not in CSWAP_OPS:
            raise ValueError(f"{op!r} is not a compare-and-swap operation")
        return await self.atomic(peer, key, offset, op, datatype, None, fetch=fetch, compare=compare, swap=swap,
                                 mode=mode)  # fmt: skip

    def _engine_op(self, start: Callable[[asyncio.Future], int]) -> asyncio.Future:
        if self._closing:
            raise EndpointClosed(f"{self} is closed")
        fut = self.loop.create_future()
        start(fut)
        self._ops.add(fut)
        self._schedule_pump()
        return fut

    # -- receives --------------------------------------------------------------------------------

    async def recv(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message:
        """The next message matching the filter (waits for one): untagged when ``tag`` is None,
        else a tagged message whose match bits equal ``tag`` outside the ``ignore`` mask (so
        ``tag=0, ignore=~0`` takes any tagged message); from ``source`` only, or any source. A
        directed receive checks the Fabric Address the message arrived from as well as the
        initiator ID its SES header claims: a copy of ``source``'s packet sent by anyone else does
        not match.
        Raises :class:`EndpointClosed` when the endpoint closes while waiting."""
        if self._closed:
            raise EndpointClosed(f"{self} is closed")
        tagged = tag is not None
        init = None if source is None else initiator_id(source)
        fut: asyncio.Future[Message] = self.loop.create_future()
        w = _Waiter(tagged, tag or 0, ignore, init, fut, source)
        self._waiters.append(w)
        if self.ses.has_unexpected():
            self._serve_waiters()
            if fut.done():
                return fut.result()
        try:
            return await fut
        except asyncio.CancelledError:
            if w in self._waiters:
                self._waiters.remove(w)
            raise

    def recv_nowait(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message | None:
        """A matching message already on the unexpected list (fast path), or None."""
        init = None if source is None else initiator_id(source)
        for m in self.ses.unexpected_messages:
            if (m.tag is not None) == (tag is not None) and (
                tag is None or not ((m.tag or 0) ^ tag) & ~ignore & 0xFFFFFFFFFFFFFFFF
            ):
                if init is None or (init == m.initiator and m.source == source):
                    self.ses.unexpected_messages.remove(m)
                    return self._delivered(m)
        return None

    def post_recv(
        self,
        buffer: bytearray | memoryview,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> Receive:
        """Post ``buffer`` on the expected list (§6.4) and return its :class:`Receive` handle.
        Matching as in :meth:`recv`; a longer message is truncated with ``truncate``, else the
        receive fails with ``TOO_LONG``."""
        if self._closed:
            raise EndpointClosed(f"{self} is closed")
        view = _flat(buffer)
        h = Receive(self, self.loop.create_future(), view)
        init = None if source is None else initiator_id(source)
        h._posted = self.ses.post_recv(
            view, tagged=tag is not None, tag=tag or 0, ignore=ignore, initiator=init, truncate=truncate, context=h
        )
        self._ops.add(h.future)
        self._schedule_pump()
        return h

    async def recv_into(
        self,
        buffer: bytearray | memoryview,
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
        if receive._posted is None or receive.future.done():
            return False
        return self.ses.cancel_recv(receive._posted)

    async def next_write(self) -> WriteCompleted:
        """The next remote WRITE with header data that landed in one of this FEP's regions (the
        target-side completion with immediate data, §6.5)."""
        if self._writes:
            return self._writes.popleft()
        if self._closed:
            raise EndpointClosed(f"{self} is closed")
        fut: asyncio.Future[WriteCompleted] = self.loop.create_future()
        self._write_waiters.append(fut)
        return await fut

    @property
    def pending_messages(self) -> int:
        """Delivered messages waiting on the unexpected list for :meth:`recv`."""
        return len(self.ses.unexpected_messages)

    @property
    def counters(self) -> dict[str, int]:
        """A snapshot of every counter (core, ``link_*``, ``ses_*``, endpoint)."""
        out = dict(self.core.counters)
        out.update({"link_" + k: v for k, v in self.link.counters.items()})
        out.update({"ses_" + k: v for k, v in self.ses.counters.items()})
        imp = getattr(self.link, "impairment", None)
        if imp is not None:
            out.update({"impair_" + k: v for k, v in imp.counters.items()})
        out.update(self._stats)
        return out

    def _delivered(self, m: Message) -> Message:
        st = self._stats
        st["messages_received"] += 1
        st["bytes_received"] += m.nbytes
        if self.event_log is not None:
            self._log("msg_rx", peer=m.source, msg_id=m.message_id, bytes=m.nbytes, mode=Mode(m.mode).name)
        return m

    # -- close -----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close gracefully: stop admitting operations, let queued ones finish and PDCs close
        (CLOSE control packets, behaviour.md §2.12) for at most ``close_timeout_s``, then release
        the link. Operations still pending then fail with :class:`EndpointClosed`."""
        if self._closed:
            return
        self._closing = True
        deadline = self.loop.time() + self.config.close_timeout_s
        # First let what was already queued go out and be acknowledged.
        while any(lane.queue or lane.active or lane.inflight for lane in self._lanes.values()) or not (
            self.ses.initiator.idle()
        ):
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
        for f in self._ops:
            if not f.done():
                f.set_exception(EndpointClosed(f"{self} closed"))
        self._ops.clear()
        for fw in [w.future for w in self._waiters] + list(self._write_waiters):
            if not fw.done():
                fw.set_exception(EndpointClosed(f"{self} closed"))
        self._waiters.clear()
        self._write_waiters.clear()
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
        """A batch from the link: feed the core, then one pump. ``ecn`` is the IP ECN field, with
        the fabric link's trim marks or-ed in (``ECN_TRIMMED`` 0x100, ``ECN_LASTHOP`` 0x200,
        ``deliver_trimmed``): a trimmed request is NACKed TRIMMED at once (behaviour.md §2.6)
        instead of waiting for the initiator's RTO."""
        if self._closed:
            return
        now = _now()
        self.ses.now = now
        # a secure FEP: every packet was opened under this FEP's SDI (None without TSS)
        self.core.receive_batch(batch, now, sdi=self._rx_sdi)
        self._pump(now)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if self._closed:
            return
        now = _now()
        self._stats["timer_fires"] += 1
        self.ses.now = now
        self.core.handle_timer(now)
        self.ses.handle_timer(now)
        self._pump(now)

    def _pump(self, now: int | None = None) -> None:
        """Events → refill lanes and submit engine packets → transmit → re-arm the timer."""
        self._pump_scheduled = False
        if self._closed:
            return
        if now is None:
            now = _now()
        self._stats["pumps"] += 1
        core = self.core
        self._drain_events(now)
        if self._dirty:
            dirty = self._dirty
            self._dirty = set()
            for lane in dirty:
                self._refill(lane, now)
        self._submit_engine(now)
        out = core.datagrams_to_send(now)
        if out:
            send_many = self._send_many
            if send_many is not None:  # the direct link: one call per batch
                send_many(out, _IS_DATA, self._data_ecn)
            else:
                send = self.link.send
                is_data = _IS_DATA
                ecn = self._data_ecn
                for data, dst, entropy in out:
                    if is_data[data[0] >> 3]:
                        send(data, dst, entropy, DSCP_DATA, ecn)
                    else:
                        send(data, dst, entropy, DSCP_CONTROL, 0)
            # UUD packets are Acked when handed out: their events are ready now.
            self._drain_events(now)
            if self._dirty or self._ses_pending():
                self._schedule_pump()
        self._arm_timer(now)
        if self._idle_event is not None:
            self._idle_event.set()

    def _ses_pending(self) -> bool:
        return self.ses.has_packets()

    def _arm_timer(self, now: int) -> None:
        at = self.core.get_timer()
        st = self.ses.get_timer()
        if st is not None and (at is None or st < at):
            at = st
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
        self.ses.expire(_now())
        if self.ses.has_events():  # receives bound to expired messages fail (DROPPED)
            self._schedule_pump()
        self._housekeeping = self.loop.call_later(self.config.housekeeping_s, self._sweep)

    # -- initiator side ------------------------------------------------------------------------

    def _refill(self, lane: _Lane, now: int) -> None:
        """Submit the lane's packets to the core until ``max_inflight`` are outstanding. A RUD/ROD
        message's SOM packet goes through ``submit`` (it picks the PDC), the rest in runs through
        ``submit_run`` (one call per refill); its segmenter resumes where the last call stopped."""
        limit = self.config.max_inflight
        submit = self.core.submit
        submit_run = self.core.submit_run
        sdi = self._sdi
        peer, mode, tc, _job = lane.key
        job_id = lane.job_id
        # RUDI/UUD have no PDC, so every packet is its own PDS request (the core takes them as
        # SOM+EOM); the SES header still carries the message's real SOM/EOM.
        whole = mode == Mode.RUDI or mode == Mode.UUD
        while lane.inflight < limit:
            msg = lane.active
            if msg is None:
                if not lane.queue:
                    return
                msg = lane.active = lane.queue.popleft()
                msg.it = self.segmenter.packets(
                    msg.data, msg.mid, pid_on_fep=msg.pid, resource_index=msg.ri, header_data=msg.header_data,
                    tag=msg.tag, job_id=msg.job, generation=msg.generation, relative=msg.relative,
                )  # fmt: skip
            if msg.abandoned:
                lane.active = None
                self._maybe_finish(msg)
                continue
            room = limit - lane.inflight
            n = 0
            done = True  # the message is fully submitted (EOM) or failed
            try:
                if whole:
                    for ses, payload, _som, eom in msg.it:
                        submit(
                            peer, mode, _NH_STANDARD, ses, payload, token=msg, som=True, eom=True, now=now,
                            job_id=job_id, tc=tc, sdi=sdi,
                        )  # fmt: skip
                        n += 1
                        if eom:
                            msg.eom_submitted = True
                            break
                        if n >= room:
                            done = False
                            break
                else:
                    if not msg.submitted:  # the SOM packet opens the message on a PDC
                        ses, payload, som, eom = next(msg.it)
                        submit(
                            peer, mode, _NH_STANDARD, ses, payload, token=msg, som=som, eom=eom, now=now,
                            job_id=job_id, tc=tc, sdi=sdi,
                        )  # fmt: skip
                        n = 1
                        msg.eom_submitted = eom
                    if not msg.eom_submitted:
                        if n < room:  # the rest of the message, up to the room, in one call
                            n += submit_run(
                                peer, mode, _NH_STANDARD, islice(msg.it, room - n), token=msg, now=now,
                                job_id=job_id, tc=tc, sdi=sdi,
                            )  # fmt: skip
                        if msg.submitted + n >= msg.npkts:
                            msg.eom_submitted = True
                        else:
                            done = False
            except UetError as e:
                msg.abandoned = True
                msg.error = msg.error or DeliveryError(f"PDS refused the packet: {e}")
                done = True
            msg.submitted += n
            lane.inflight += n
            if done:
                lane.active = None
                if msg.abandoned:
                    self._maybe_finish(msg)

    def _submit_engine(self, now: int) -> None:
        """Hand every packet the SES engines have ready to the PDS core."""
        ses = self.ses
        if not ses.has_packets():
            return
        submit = self.core.submit
        for p in ses.packets_to_send():
            mode = Mode(p.mode)
            whole = mode == Mode.RUDI or mode == Mode.UUD
            tok = p.token
            try:
                submit(
                    p.peer, mode, p.next_hdr, p.ses, p.payload, token=tok, som=p.som or whole, eom=p.eom or whole,
                    now=now, job_id=p.job_id, msg_id=("ses", tok[1]) if tok[0] != "read_return" else tok,
                    sdi=self._sdi,
                )  # fmt: skip
            except UetError as e:
                ses.on_failed(tok, f"PDS refused the packet: {e}", None, now)

    def _drain_events(self, now: int) -> None:
        """Handle every pending core event; an eager packet's plain Acked takes an inlined fast
        path; then the SES engines' completions."""
        take = self.core.take_events
        dirty = self._dirty
        acked = 0
        evs = take()
        while evs:
            for ev in evs:
                t = type(ev)
                if t is AckedRun:  # (core.acked_runs) count packets of one token, implicitly Acked
                    msg, cnt = ev
                    if type(msg) is _OutMsg:
                        msg.done += cnt
                        lane = msg.lane
                        lane.inflight -= cnt
                        dirty.add(lane)
                        acked += cnt
                        if msg.done >= msg.submitted:
                            self._maybe_finish(msg)
                        continue
                    for _ in range(cnt):
                        self._on_event(_tnew(Acked, (msg, 0, b"")), now)
                    continue
                if t is Acked:
                    msg, rnh, _resp = ev
                    if not rnh and type(msg) is _OutMsg:
                        msg.done += 1
                        lane = msg.lane
                        lane.inflight -= 1
                        dirty.add(lane)
                        acked += 1
                        if msg.done >= msg.submitted:
                            self._maybe_finish(msg)
                        continue
                self._on_event(ev, now)
            evs = take()  # (handlers never queue core events today; drained again to be sure)
        self._stats["packets_acked"] += acked
        self._drain_ses()

    def _on_event(self, ev: Any, now: int) -> None:
        t = type(ev)
        if t is Acked:
            msg = ev.token
            if type(msg) is not _OutMsg:
                self._stats["packets_acked"] += 1
                self.ses.on_ack(msg, ev.response_next_hdr, ev.response, now)
                return
            self._packet_done(msg)
            if ev.response_next_hdr == _NH_RESPONSE and ev.response and msg.error is None:
                _op, rc, _mid, mlen = decode_response(ev.response)
                if rc not in _RC_GOOD:
                    msg.error = error_for(rc, f"send of {msg.length} bytes to {msg.peer}")
                    msg.abandoned = True
                elif rc == _RC_OK and mlen > msg.length:
                    msg.error = error_for(ReturnCode.OP_VIOLATION, f"target placed {mlen} of {msg.length} bytes")
                    msg.abandoned = True
            self._maybe_finish(msg)
        elif t is Failed:
            msg = ev.token
            if type(msg) is not _OutMsg:
                self.ses.on_failed(msg, ev.reason, ev.nack_code, now)
                return
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
            if self.event_log is not None:
                self._log("msg_done", peer=msg.peer, msg_id=msg.mid, bytes=msg.length, ns=elapsed)
            fut.set_result(None)
        msg.data = memoryview(b"")  # release the caller's buffer

    # -- SES completions -------------------------------------------------------------------------

    def _drain_ses(self) -> None:
        ses = self.ses
        if not ses.has_events():
            if self._waiters and ses.has_unexpected():
                self._serve_waiters()
            return
        ev = ses.next_event()
        while ev is not None:
            t = type(ev)
            if t is RecvCompleted:
                self._on_recv_completed(ev)
            elif t is OpCompleted:
                fut = ev.context
                self._stats["ops_completed"] += 1
                if ev.kind in ("send", "deferrable", "rendezvous"):
                    self._stats["messages_sent"] += 1
                self._ops.discard(fut)
                if fut is not None and not fut.done():
                    fut.set_result(ev.result)
            elif t is OpFailed:
                fut = ev.context
                self._stats["ops_failed"] += 1
                self._ops.discard(fut)
                if fut is not None and not fut.done():
                    fut.set_exception(ev.error)
            elif t is WriteCompleted:
                self._on_write(ev)
            ev = ses.next_event()
        if self._waiters and ses.has_unexpected():
            self._serve_waiters()

    def _on_recv_completed(self, ev: RecvCompleted) -> None:
        ctx = ev.context
        if isinstance(ctx, Receive):
            h = ctx
            self._ops.discard(h.future)
            if h.future.done():
                return
            if ev.return_code != _RC_OK:
                h.future.set_exception(error_for(ev.return_code, "receive"))
                return
            m = Message(
                h.buffer[: ev.length], ev.source, 0, 0, 0, ev.initiator, ev.header_data,
                tag=ev.tag if h._posted is not None and h._posted.tagged else None, message_length=ev.message_length,
            )  # fmt: skip
            h.future.set_result(self._delivered(m))
        elif isinstance(ctx, _Waiter):
            w = ctx
            posted = w.posted
            assert posted is not None
            m = Message(
                bytes(posted.buffer[: ev.length]), ev.source, 0, 0, 0, ev.initiator, ev.header_data,
                tag=ev.tag if w.tagged else None, message_length=ev.message_length,
            )  # fmt: skip
            if w.future.done():  # the recv() was cancelled: give the message to the next receive
                if ev.return_code == _RC_OK:
                    self.ses.unexpected_messages.appendleft(m)
                return
            if ev.return_code != _RC_OK:
                w.future.set_exception(error_for(ev.return_code, "receive"))
            else:
                w.future.set_result(self._delivered(m))

    def _waiter_for(self, tagged: bool, tag: int, initiator: int, source: str) -> _Waiter | None:
        """The first waiting ``recv()`` (no buffer) that takes a message with these fields."""
        for w in self._waiters:
            if w.posted is None and not w.future.done() and w.tagged == tagged:
                if tagged and (tag ^ w.tag) & ~w.ignore & 0xFFFFFFFFFFFFFFFF:
                    continue
                if w.initiator is not None and (w.initiator != initiator or w.source != source):
                    continue
                return w
        return None

    def _receive_waiting(self, tagged: bool, tag: int, initiator: int, source: str) -> bool:
        """SesFep.receive_waiting: a ``recv()`` waits for a message arriving with these fields."""
        return self._waiter_for(tagged, tag, initiator, source) is not None

    def _offer(self, m: Message) -> bool:
        """A fast-path message no posted receive took: give it to the first waiting ``recv()``
        it matches (called synchronously from ``on_deliver``, like the old inbox). A directed
        receive also checks the Fabric Address the message came from."""
        w = self._waiter_for(m.tag is not None, m.tag or 0, m.initiator, m.source)
        if w is None:
            return False
        self._waiters.remove(w)
        w.future.set_result(self._delivered(m))
        return True

    def _serve_waiters(self) -> None:
        """Give unexpected messages to waiting ``recv()`` calls, in the order they were made."""
        ses = self.ses
        keep: deque[_Waiter] = deque()
        while self._waiters:
            w = self._waiters.popleft()
            if w.future.done():
                continue
            if not ses.has_unexpected():
                keep.append(w)
                continue
            got = ses.take_unexpected(
                tagged=w.tagged, tag=w.tag, ignore=w.ignore, initiator=w.initiator, context=w, source=w.source
            )
            if got is None:
                keep.append(w)
            elif isinstance(got, Message):
                w.future.set_result(self._delivered(got))
            else:
                w.posted = got  # sized receive posted for a target-engine entry (RTR / rendezvous)
                self._schedule_pump()
        self._waiters = keep

    def _on_write(self, ev: WriteCompleted) -> None:
        while self._write_waiters:
            f = self._write_waiters.popleft()
            if not f.done():
                f.set_result(ev)
                return
        self._writes.append(ev)

    # -- target side ---------------------------------------------------------------------------

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
