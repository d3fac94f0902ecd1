"""The Fabric Endpoint core: one FEP's SES + PDS (+ TSS), sans-I/O (architecture.md "FEP core").

:class:`FepCore` decides everything a Fabric Endpoint decides; its drivers (the asyncio adapter
:class:`uet.Endpoint`, the virtual-time engine) only move bytes, read a clock and map handles to
whatever they wait with. The surface is aioquic's ``QuicConnection``:

* input: :meth:`FepCore.receive_datagram` / :meth:`FepCore.receive_batch` (:class:`Datagram`
  records), each with ``now``; :meth:`FepCore.handle_timer`;
* output: :meth:`FepCore.datagrams_to_send` (:class:`Transmit` records: bytes, destination,
  entropy, DSCP, ECN), :meth:`FepCore.get_timer` (the earliest of every deadline: PDS, the SES
  engines, the reassembly-expiry sweep, TSS key grace, the close timeout, and "now" while
  submitted work waits for the next pump), :meth:`FepCore.next_event`;
* operations (:meth:`send`, :meth:`post_recv`, :meth:`write`, :meth:`read`, :meth:`atomic`,
  :meth:`compare_swap`, :meth:`register`, :meth:`close`) return int handles; completions come
  back as events carrying the handle (:mod:`uet.fep.events`).

**Driving it.** After any input (a batch of datagrams, a timer, an operation) call
:meth:`datagrams_to_send` — it first runs the *pump*: takes the PDS events (ACKs complete
packets; see :mod:`uet.fep.lanes` for the sender's completion rule), refills the eager lanes,
hands the SES engines' packets to PDS; the datagrams PDS then has ready go out with their
destinations served round-robin (:mod:`uet.fep.scheduler`) — then drain :meth:`next_event` and
re-arm the timer from :meth:`get_timer`. Operations do not take ``now``: they use the latest time
the core was given.

**Sends.** The protocol (eager, rendezvous, deferrable) is the SES initiator's rule
(:meth:`~uet.ses.initiator.SesInitiator.protocol_for`). A plain eager send (no DC) goes on a lane
(:mod:`uet.fep.lanes`); everything else through the SES initiator engine. Both take message ids
from one space. Engine packets are submitted with a PDS ``msg_id`` so they queue behind a lane's
open message instead of interleaving.

**Receives.** ``post_recv(buffer)`` posts on the expected list (truncation only with
``truncate``, else ``TOO_LONG``); ``post_recv(None)`` waits for the first matching message
without a buffer (:mod:`uet.fep.receives`; a message of at least
``MessageConfig.inplace_threshold`` bytes was reassembled in place and its ``data`` is a
read-only ``memoryview``). ``cancel(handle)`` withdraws either.

**Reassembly expiry.** Idle partial fast-path messages are dropped after
``reassembly_timeout_ns`` by a sweep every ``housekeeping_s`` while any are held (a deadline in
:meth:`get_timer`, not a separate timer).

**Close** (behaviour.md §2.12): :meth:`close` stops admitting operations; queued sends finish
first, then every PDC closes gracefully (CLOSE / CLOSE_REQ), for at most ``close_timeout_s`` in
all; then every operation still pending fails with :class:`EndpointClosed` and a :class:`Closed`
event ends the sequence. Receives may still be posted while closing.

Known limits (choices, as before this core existed): an eager message that fails part-way (a
packet Failed in PDS) sends no MSG_ERROR, so its partial reassembly at the target expires after
``reassembly_timeout_ns`` (the engine path sends MSG_ERROR, §6.4); the unexpected list's byte
limit (``MatchLimits.max_unexpected_bytes``, NACK ``NO_SES_MSG_AVAIL`` beyond it) is checked when
a message begins, against the messages already whole on it (messages in progress are bounded by
the reassembly budget, :mod:`uet.ses.fep`); a message completed into a posted
buffer reports ``mode`` 0 (the receive completion does not carry the PDS mode); read data returns
in the ACKs of the read requests (``TargetConfig.max_ack_data`` = the payload size) when the whole
read fits one payload, otherwise as RESPONSE_DATA requests in the return direction of the read's
own PDC (``PdsCore.submit_return``, behaviour.md §1.4, §6.5).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from uet.errors import UetError
from uet.fep.config import FepConfig
from uet.fep.errors import EndpointClosed
from uet.fep.events import (
    Closed,
    Datagram,
    Event,
    OpFailed,
    Transmit,
)
from uet.fep.integrity import CrcStage, FixedPorts
from uet.fep.lanes import Lane, OutMessage, refill
from uet.fep.marking import classes
from uet.fep.operations import Operations
from uet.fep.peer import PeerBook
from uet.fep.receives import Waiters, _Posted
from uet.fep.scheduler import interleave
from uet.pds import Mode, PathWindow, PdsCore
from uet.ses.fep import SesFep
from uet.ses.initiator import InitiatorConfig
from uet.ses.message import MAX_WIRE_PAYLOAD, initiator_id
from uet.ses.segmenter import Segmenter
from uet.ses.target import TargetConfig
from uet.wire.crc import TRAILER_LEN
from uet.wire.frame import MARK_LASTHOP, MARK_TRIMMED
from uet.wire.net import UDP
from uet.wire.tss import ENTROPY, ICV_LEN, TSS, TSS_SSI

if TYPE_CHECKING:
    from uet.cc.base import SenderCc
    from uet.tss.stage import TssStage

__all__ = ["FepCore"]

_tnew: Final = tuple.__new__  # (Final: a C static in the compiled build, not a globals look-up)
#: ``receive_marked`` ecn marks (the links' packed form): trimmed, trimmed at the last hop
ECN_TRIMMED: Final = MARK_TRIMMED
ECN_LASTHOP: Final = MARK_LASTHOP


class FepCore(Operations):
    """One Fabric Endpoint, sans-I/O (module docstring).

    ``FepCore(address, job=..., pid=..., ri=0, config=None, security=None, seed=None)``: the FEP
    at Fabric Address ``address`` hosting process ``pid`` of job ``job`` with resource index
    ``ri``. ``seed`` (default ``config.seed``) seeds the one :class:`random.Random` every random
    choice comes from, mixed with the address (None: random). ``security``: a
    :class:`~uet.tss.stage.SecurityConfig` or a secure-domain table, or a ready
    :class:`~uet.tss.stage.TssStage` (TSS seals and opens every datagram, :mod:`uet.tss.stage`).

    Attributes: ``pds`` (the :class:`~uet.pds.PdsCore`), ``ses`` (the
    :class:`~uet.ses.fep.SesFep`), ``segmenter``, ``lanes``, ``tss`` (the TSS stage or None).
    """

    def __init__(
        self,
        address: str,
        *,
        job: int,
        pid: int,
        ri: int = 0,
        config: FepConfig | None = None,
        security: Any = None,
        seed: int | None = None,
        event_log: Callable[[dict[str, Any]], None] | None = None,
        path_window: Callable[[str], PathWindow | None] | None = None,
    ) -> None:
        self.config = cfg = config or FepConfig()
        #: the window of the path towards a peer where it differs from ``config``'s (None: the
        #: same everywhere): a lane's limit and the CCC's parameters (uet.pds.config.PathWindow)
        self.path_window = path_window
        self.address = address
        self.job = job
        self.pid = pid
        self.resource_index = ri
        self.event_log = event_log
        if seed is None:
            seed = cfg.seed
        # Seeded runs stay reproducible, yet two FEPs given the same seed draw different PDCIDs,
        # Start_PSNs and message ids.
        rng = random.Random(None if seed is None else f"{seed}/{address}")
        self.pds = PdsCore(
            address, cfg.pds, rng=random.Random(rng.getrandbits(64)), log=event_log, path_window=path_window
        )
        self.initiator_id = initiator_id(address)
        ses_payload = min(cfg.payload_size, MAX_WIRE_PAYLOAD)
        self.ses = SesFep(
            address,
            initiator=InitiatorConfig(
                initiator_id=self.initiator_id,
                max_payload=ses_payload,
                deferrable_threshold=cfg.deferrable_threshold,
                rendezvous_threshold=cfg.rendezvous_threshold,
                eager_length=cfg.eager_length,
                local_pid=pid,
                local_index=ri,
            ),
            target=TargetConfig(
                max_payload=ses_payload, max_ack_data=ses_payload, reassembly_timeout_ns=cfg.reassembly_timeout_ns
            ),
            limits=cfg.match_limits,
            rng=random.Random(rng.getrandbits(64)),
            fast=cfg.message_config(),
            default=(pid, ri, job),
        )
        pds = self.pds
        pds.on_deliver = self.ses.on_deliver  # directly: one Python frame less per packet
        pds.payload_views = True  # the fast path copies payloads into reassembly buffers
        pds.acked_runs = True  # implicitly acknowledged packets of a message: one event per run
        if self.ses.fast is not None:  # predicted in-order runs go straight to the message layer
            pds.on_data = self.ses.fast.deliver_datagram
            pds.on_cc_data = self.ses.fast.deliver_cc_datagram
        self.segmenter = Segmenter(
            job_id=job,
            initiator=self.initiator_id,
            payload_size=cfg.payload_size,
            max_message=cfg.max_message,
        )
        self.peers = PeerBook(job, pid, ri)
        self.lanes: dict[tuple[str, Mode, int, int], Lane] = {}
        #: lanes to refill, in the order they became dirty (a dict, not a set: a set of objects
        #: iterates in address order, which differs between runs and broke the simulator's
        #: one-seed-one-result rule)
        self._dirty: dict[Lane, None] = {}
        self._unfinished: dict[int, OutMessage] = {}
        #: engine operations in progress: handle -> the view a read fills (None otherwise)
        self._ops: dict[int, memoryview | None] = {}
        self._recvs: dict[int, _Posted] = {}
        self.waiters = Waiters(self.ses, self._waiter_got)
        # its queue, held here too: Waiters is an interpreted class, each attribute of it a generic
        # look-up in the compiled build, and the queue is tested at every drain (issue 28)
        self._wq = self.waiters.queue
        self.ses.on_unexpected = self.waiters.offer
        self.ses.reserve = self.waiters.reserve
        self.ses.on_reserved = self.waiters.reserved_done
        self.ses.on_engine_unexpected = self.waiters.serve_now
        self.ses.target.on_unreserved = self.waiters.unbind
        self._events: deque[Event] = deque()
        self._next_handle = 1
        self._now = 0
        self._dscp, self._ecn = classes(cfg.ecn_capable)
        #: the IP TOS byte (DSCP << 2 | ECN) of a datagram, by PDS type (``first_byte >> 3``)
        self.tos: tuple[int, ...] = tuple((d << 2) | e for d, e in zip(self._dscp, self._ecn, strict=True))
        self._sweep_at: int | None = None
        self._sweep_ns = int(cfg.housekeeping_s * 1e9)
        self._closing = False
        self._closed = False
        self._close_phase = 0
        self._close_at: int | None = None
        #: TSS (uet.fep.secure): SDI of this FEP's PDCs, given to PDS with every packet it sends
        #: and receives so its PDCs are secure PDCs (Expected_PSN reuse, PSN-range limit, §2.3.2)
        #: bytes per datagram beyond a UDP-encapsulated clear packet's (behaviour.md §4.2): the
        #: integrity layer's (``_wire_overhead``) and the encapsulation's (``set_link_ports``)
        self._integrity_bytes = 0
        self._encap_bytes = 0
        self._gate_wrapped = False
        self.tss: TssStage | None = None
        self._sdi: int | None = None
        self._rx_sdi: int | None = None
        if security is not None:
            from uet.tss.stage import TssStage

            if not isinstance(security, TssStage):
                security = TssStage(address, security, rng=random.Random(rng.getrandbits(64)))
            stage = security
            self._attach_tss(stage)
        #: the CRC stage (``config.data_protect == "crc"``, uet.fep.integrity) or None
        self.crc: CrcStage | None = CrcStage(address) if cfg.data_protect == "crc" else None
        if self.crc is not None:
            self._wire_overhead(TRAILER_LEN)
        if cfg.data_protect == "crc" and security is not None:
            raise ValueError("data_protect 'crc' and TSS exclude each other (behaviour.md §2.16)")
        if cfg.data_protect == "tss" and security is None:
            raise ValueError("data_protect 'tss' needs a security configuration")
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
        self._n_pumps = self._n_acked = self._n_timer_fires = 0

    def __repr__(self) -> str:
        return f"FepCore({self.address!r}, job={self.job}, pid={self.pid})"

    def _attach_tss(self, stage: TssStage) -> None:
        self.tss = stage
        stage.attach(self.pds)  # secure Start_PSN policy (§2.3.2)
        if stage.event_log is None:
            stage.event_log = self.event_log
        self._sdi = stage.sdi
        # with accept_any_sdi several domains open and a packet's SDI is not passed up
        self._rx_sdi = None if stage.config.accept_any_sdi else stage.sdi
        sd = stage.config.table.get(stage.sdi)
        self._wire_overhead((TSS_SSI if sd is not None and sd.use_ssi else TSS).size + ICV_LEN)

    def set_link_ports(self, ports: FixedPorts | None = None, *, over_ip: bool = False) -> None:
        """Say what the link around this core puts on the wire that the integrity layer covers
        (the CRC stage, :mod:`uet.fep.integrity`; nothing without it): ``ports``, the fixed UDP
        ports of a bound link (its ``port`` and ``peer_port``, read at each datagram), else each
        datagram's entropy is its source port; ``over_ip``, UET directly over IP, the trailer
        covering the 4-byte entropy header instead of a UDP header.

        ``over_ip`` also changes every datagram's nominal size (behaviour.md §4.2: the transport
        size + 40, where the transport size is the UDP length over UDP but the bytes from the
        4-byte entropy header to the end of the trailer directly over IP): 4 bytes less than over
        UDP's 8-byte header, so a clear packet's nominal size is its PDS bytes + 44, not + 48."""
        if self.crc is not None:
            self.crc.fixed_ports = ports
            self.crc.over_ip = over_ip
        self._encap_bytes = ENTROPY.size - UDP.size if over_ip else 0
        self._apply_overhead()

    def _wire_overhead(self, extra: int) -> None:
        """Every datagram carries ``extra`` bytes of the integrity layer (TSS security header and
        ICV, or the CRC-32C trailer): part of its nominal size (UDP length + 40, behaviour.md
        §4.2), so the target's ACK_CC ``rcvd_bytes`` counts them (``PdsCore.wire_overhead``) and
        every CCC of this FEP adds them to its per-packet overhead, the two ends agreeing."""
        self._integrity_bytes = extra
        self._apply_overhead()

    def _apply_overhead(self) -> None:
        """Give the PDS (the target's count) and every congestion context made from now on (the
        sender's sizes) this FEP's bytes per datagram beyond a clear packet over UDP."""
        pds = self.pds
        pds.wire_overhead = self._integrity_bytes + self._encap_bytes
        if self._gate_wrapped or not pds.wire_overhead:
            return
        self._gate_wrapped = True
        make = pds.gate_factory

        def gate(peer: str, tc: int) -> SenderCc:
            g = make(peer, tc)
            g.overhead += pds.wire_overhead
            return g

        pds.gate_factory = gate

    def _handle(self) -> int:
        h = self._next_handle
        self._next_handle = h + 1
        return h

    # -- state --------------------------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        """:meth:`close` was called (no new sends, writes, reads or atomics)."""
        return self._closing

    @property
    def closed(self) -> bool:
        """The close sequence ended (:class:`Closed` was emitted)."""
        return self._closed

    @property
    def now(self) -> int:
        """The latest time (ns) the core was given."""
        return self._now

    def tick(self, now: int) -> None:
        """Tell the core the time without any input (operations are stamped with it)."""
        self._now = now
        self.ses.now = now

    @property
    def stats(self) -> dict[str, int]:
        """The FEP's own counters (messages, bytes, operations, PDC events, timer fires, pumps,
        buffer-less receives given back because their message never completed)."""
        return dict(self._counts(), recvs_given_back=self.waiters.given_back)

    def _counts(self) -> dict[str, int]:
        """``_stats`` with the counters kept as ints (uet.fep.state) added in, in its order."""
        out = dict(self._stats)
        out["packets_acked"] += self._n_acked
        out["timer_fires"] += self._n_timer_fires
        out["pumps"] += self._n_pumps
        return out

    @property
    def pending_messages(self) -> int:
        """Delivered messages waiting on the unexpected list for a receive."""
        return len(self.ses.unexpected_messages)

    def counters(self) -> dict[str, int]:
        """A snapshot of every counter: PDS, TSS (``tss_*``, when secure), SES (``ses_*``), FEP."""
        out = dict(self.pds.counters)
        if self.tss is not None:
            out.update(self.tss.counters)
        if self.crc is not None:
            out.update(self.crc.counters)
        out.update({"ses_" + k: v for k, v in self.ses.counters.items()})
        out.update(self.stats)
        return out

    def busy(self) -> bool:
        """Sends or engine operations in progress (lanes not empty or the initiator not idle)."""
        return any(lane.busy() for lane in self.lanes.values()) or not self.ses.initiator.idle()

    # -- datagrams ----------------------------------------------------------------------------------

    def receive_datagram(
        self,
        data: bytes,
        now: int,
        *,
        source: str,
        ecn: int = 0,
        trimmed: bool = False,
        last_hop: bool = False,
        source_port: int = 0,
    ) -> None:
        """One datagram (fields as in :class:`Datagram`)."""
        self.receive_batch((Datagram(data, source, ecn, trimmed, last_hop, source_port),), now)

    def receive_batch(self, items: Sequence[Datagram], now: int) -> None:
        """Datagrams received together, in order (PDS runs once over the batch)."""
        if self._closed:
            return
        if self.tss is not None:
            items = self.tss.open_batch(items, now)
        elif self.crc is not None:
            items = self.crc.open_batch(items)
        self._receive(
            [
                (d[0], d[1], d[2] | ECN_TRIMMED | (ECN_LASTHOP if d[4] else 0)) if d[3] else (d[0], d[1], d[2])
                for d in items
            ],
            now,
        )

    def receive_marked(self, batch: Sequence[tuple[bytes, str, int]], now: int, *, opened: bool = False) -> None:
        """The links' packed form of :meth:`receive_batch`: ``(data, source, ecn)`` with the
        trim marks or-ed into ``ecn`` (:data:`ECN_TRIMMED`, :data:`ECN_LASTHOP`) and the peers'
        configured UDP port as source port. ``opened``: TSS already opened them (the secure link
        of the asyncio adapter does, through this core's stage)."""
        if self._closed:
            return
        if self.tss is not None and not opened:
            batch = self.tss.open_marked(batch, now)
        elif self.crc is not None:
            batch = self.crc.open_marked(batch)
        self._receive(batch, now)

    def _receive(self, batch: Sequence[tuple[bytes, str, int]], now: int) -> None:
        """PDS over the batch, then its completions at once (messages received, sends the ACKs
        finished), so :meth:`next_event` has them before :meth:`datagrams_to_send`: a driver can
        hand them to the application first, and what the application sends in answer leaves with
        the ACKs of the same flush (uet.endpoint)."""
        self._now = now
        self.ses.now = now
        self.pds.receive_batch(batch, now, sdi=self._rx_sdi)
        if not self._closed:
            self._drain_events(now)

    def datagrams_to_send(self, now: int, *, sealed: bool = True) -> list[Transmit]:
        """Run the pump and return every datagram ready (:class:`Transmit`). ``sealed=False``
        returns them before TSS sealing (for a driver whose link seals through :attr:`tss`)."""
        out = self.datagrams_to_send_packed(now)
        if not out:
            return []
        dscp, ecn = self._dscp, self._ecn
        tx = [_tnew(Transmit, (d, dst, e, dscp[(k := d[0] >> 3)], ecn[k])) for d, dst, e in out]
        if self.tss is not None and sealed:
            tx = self.tss.seal_batch(tx, now)
        return tx

    def datagrams_to_send_packed(self, now: int) -> list[tuple[bytes, str, int]]:
        """:meth:`datagrams_to_send` without the per-datagram records, for a driver whose link
        applies this core's marking itself (the asyncio adapter's direct link, where a record per
        datagram is a measurable share of the per-packet CPU): ``(data, destination, entropy)``,
        before TSS sealing; datagram ``d`` goes with the IP TOS byte ``tos[d[0] >> 3]``
        (:attr:`tos`, DSCP and ECN per PDS type, :mod:`uet.fep.marking`)."""
        self._now = now
        if not self._closed:
            self._pump(now)
            if self._closing:
                self._close_progress(now)
        out = self.pds.datagrams_to_send(now)
        if len(out) > 2:  # (interleave leaves two or fewer as they are)
            out = interleave(out)  # destinations round-robin
        if self.crc is not None and out:
            out = self.crc.seal_batch(out)  # the CRC-32C trailer (uet.fep.integrity)
        if not self._closed:
            if self._sweep_at is None:
                fast = self.ses.fast  # the fast path holds partial or completed messages to sweep
                if fast is not None and (fast.partial_count or fast._done):
                    self._sweep_at = now + self._sweep_ns
            if out:
                self._drain_events(now)  # UUD packets are Acked when handed out
        return out

    # -- time ---------------------------------------------------------------------------------------

    def get_timer(self) -> int | None:
        """The earliest deadline (ns) at which :meth:`handle_timer` has work, or None."""
        if self._closed:
            return None
        at = self.pds.get_timer()
        st = self.ses.get_timer()
        if st is not None and (at is None or st < at):
            at = st
        if self._dirty or self.ses.has_packets():
            at = self._now if at is None or self._now < at else at
        t = self._sweep_at
        if t is not None and (at is None or t < at):
            at = t
        t = self._close_at
        if t is not None and (at is None or t < at):
            at = t
        if self.tss is not None:
            t = self.tss.get_timer()
            if t is not None and (at is None or t < at):
                at = t
        return at

    def handle_timer(self, now: int) -> None:
        """Run every timer due at ``now`` (then call :meth:`datagrams_to_send`)."""
        if self._closed:
            return
        self._now = now
        self._n_timer_fires += 1
        self.ses.now = now
        self.pds.handle_timer(now)
        self.ses.handle_timer(now)
        if self._sweep_at is not None and now >= self._sweep_at:
            self._sweep_at = None
            self.ses.expire(now)  # receives bound to expired messages fail (DROPPED)
        if self.tss is not None:
            self.tss.handle_timer(now)
        if self._closing:
            self._close_progress(now)

    # -- events -------------------------------------------------------------------------------------

    def next_event(self) -> Event | None:
        """The oldest pending event, or None (drain after :meth:`datagrams_to_send`)."""
        return self._events.popleft() if self._events else None

    def _log(self, ev: str, **fields: Any) -> None:
        log = self.event_log
        if log is not None:
            log({"t": self._now, "ev": ev, "fep": self.address, **fields})

    # -- close --------------------------------------------------------------------------------------

    def close(self, now: int) -> None:
        """Start the close sequence (module docstring); :class:`Closed` ends it."""
        if self._closing:
            return
        self._closing = True
        self._now = now
        self._close_phase = 1
        self._close_at = now + int(self.config.close_timeout_s * 1e9)

    def _close_progress(self, now: int) -> None:
        if self._close_phase == 1 and not self.busy():
            self.pds.close(now)
            self._close_phase = 2
        if self._close_phase == 2 and self.pds.idle():
            self._finish_close(now, True)
        elif self._close_at is not None and now >= self._close_at:
            if self._close_phase == 1:
                self.pds.close(now)  # the CLOSE packets leave once, unacknowledged
            self._finish_close(now, False)

    def _finish_close(self, now: int, graceful: bool) -> None:
        self._closed = True
        self._close_at = None
        self._sweep_at = None
        ev = self._events
        for lane in self.lanes.values():
            lane.queue.clear()
            lane.active = None
        for h, m in self._unfinished.items():
            if not m.finished:
                m.finished = True
                self._stats["messages_failed"] += 1
                ev.append(OpFailed(h, EndpointClosed(f"{self} closed before message {m.mid} was delivered")))
        self._unfinished.clear()
        for h in list(self._ops) + list(self._recvs) + list(self.waiters.by_handle):
            ev.append(OpFailed(h, EndpointClosed(f"{self} closed")))
        self._ops.clear()
        self._recvs.clear()
        self.waiters.queue.clear()
        self.waiters.by_handle.clear()
        self._log("close", **{k: v for k, v in self._counts().items() if v})
        ev.append(Closed(graceful))

    # -- the pump -----------------------------------------------------------------------------------

    def _pump(self, now: int) -> None:
        """PDS events -> refill lanes -> submit engine packets."""
        self._n_pumps += 1
        self._drain_events(now)
        if self._dirty:
            dirty = self._dirty
            self._dirty = {}
            for lane in dirty:
                for msg in refill(lane, self.pds, self.segmenter, lane.limit, now, self._sdi):
                    self._maybe_finish(msg)
        if self.ses.has_packets():  # (:meth:`_submit_engine` has nothing to do otherwise)
            self._submit_engine(now)

    def _submit_engine(self, now: int) -> None:
        """Hand every packet the SES engines have ready to the PDS core."""
        ses = self.ses
        if not ses.has_packets():
            return
        submit = self.pds.submit
        for p in ses.packets_to_send():
            mode = Mode(p.mode)
            whole = mode == Mode.RUDI or mode == Mode.UUD
            tok = p.token
            if p.return_pdc is not None:  # read data: the return direction of the read's PDC (§6.5)
                self.pds.submit_return(
                    p.return_pdc, p.next_hdr, p.ses, p.payload, token=tok, som=p.som, eom=p.eom, now=now
                )
                continue
            ret = tok[0] == "read_return"  # read data answering a request: verifies no one
            try:
                submit(
                    p.peer, mode, p.next_hdr, p.ses, p.payload, token=tok, som=p.som or whole, eom=p.eom or whole,
                    now=now, job_id=p.job_id, msg_id=tok if ret else ("ses", tok[1]), sdi=self._sdi, reply=ret,
                )  # fmt: skip
            except UetError as e:
                ses.on_failed(tok, f"PDS refused the packet: {e}", None, now)
