"""The target SES engine (sans-I/O): performs requests and builds the responses ACKs carry (§6).

Input is one delivered request (the PDS contract's ``Delivery``: peer FA, mode, PDC, PSN,
``next_hdr``, SES header bytes, payload); output is the :class:`~uet.ses.events.SesResponse` for
its ACK, plus events (:class:`RecvCompleted`, :class:`WriteCompleted`) and outbound requests
(read-return data, and through the FEP's :class:`~uet.ses.initiator.SesInitiator` the reads of a
rendezvous and the RTRs of deferred sends).

Processing order (behaviour.md §6.3): SES version (``UNCOR``) → endpoint resolution
(:mod:`uet.ses.addressing`) → message record for later packets (same op / key / length, errors
sticky) → generation checks on the packet that opens a message → buffer or region → bounds →
placement → response.

Placement (§6.1): a packet's bytes go to ``buffer_offset + message_offset`` of the message's
destination — the region for WRITE, the matched receive buffer for sends (``buffer_offset`` is 0
from every known initiator; a receive's room is its length minus that offset).

Responses (behaviour.md §6.9, with these choices where the notes leave room):

* Packets that neither finish a message nor fail get no SES response (``None``: PDS sends a plain
  ACK / default response).
* The packet that *completes* a message (all bytes accounted — in RUD the EOM packet may arrive
  before others, so not necessarily EOM) gets ``DEFAULT_RESPONSE``/``RC_OK`` with
  ``modified_length`` = bytes placed, not guaranteed. It is a guaranteed ``RESPONSE`` instead when
  the send was truncated, used the overflow list (list = 1), or had ``DC`` set.
* **DC** (§6.8, inference): data is placed synchronously before the response is built, so the
  response always follows placement; with DC the completing response is made guaranteed. DC
  does not change matching (§6.4): a DC send that finds no posted receive is buffered on the
  overflow list like any other (its bytes are then in target memory, and the response says
  list = overflow), deferred if deferrable, and refused with ``NO_MATCH`` only when the target
  has no overflow list or it is full — as the reference completes DC sends "when all packets
  are acknowledged either way" (§6.8), a DC send never fails just because it came early.
* Every error → guaranteed ``RESPONSE`` with the code and modified length 0 (BAD_GENERATION
  carries the current generation); once a message fails, every later packet of it gets the
  same code, and a receive bound to it completes with the error when its bytes are all
  accounted for (including a MSG_ERROR's truncation).
* Deferral → guaranteed ``RESPONSE``/``RC_OK``, list overflow, modified length 0 (§6.7).
* Small reads (``request_length`` ≤ ``max_ack_data``) and RUDI reads, and fetching atomics →
  guaranteed ``RESPONSE_DATA`` in the ACK. Larger reads → ``DEFAULT_RESPONSE``/``RC_OK`` in the ACK and
  RESPONSE_DATA requests in the return direction, queued in :meth:`SesTarget.packets_to_send`
  (``return_pdc`` = the PDC the read arrived on), at most ``max_payload`` bytes each.
* A multi-packet READ message from another implementation is served packet by packet: a
  non-SOM packet asks for its ``payload_length`` at ``buffer_offset + message_offset``; a SOM
  packet asks for ``request_length`` when it is also EOM, else ``min(request_length,
  max_payload)`` (our choice: the SOM header has no length field).

SYNC_WRITE / SYNC_ATOMIC (provider extension, Δ18) run through the sync-group table of
:mod:`uet.ses.sync` (the terminating operation takes effect once the group's other members
completed). TSEND_ATOMIC / TSEND_FETCH_ATOMIC (our reading of §8.5, "an atomic carried by a tagged
send"): the tag (match bits) selects a posted *tagged receive* as a tagged send would (§6.4), the
atomic is applied to that receive's buffer at ``buffer_offset`` (the operand bytes as payload,
§9.1/§9.2), and the receive completes with the tag, the source and the operand length; the
fetching form returns the prior value in a guaranteed RESPONSE_DATA like FETCHING_ATOMIC. An
atomic needs target memory now, so there is no overflow list for it: no matching receive →
``NO_MATCH``; a buffer shorter than ``buffer_offset`` + operand → ``TOO_LONG`` (the receive stays
posted). It consumes the receive, so it is refused in RUDI/UUD (not idempotent).

Unsupported here (answered ``UNSUPPORTED_OP``): reserved opcodes, RMA with the small header (no
key; the optimized key space is not implemented). NO_OP is accepted and answered ``RC_OK``.

MSG_ERROR cancels a message in flight (``CANCELLED``; its EOM offset accounts for the unsent
rest); one for an unknown message is unsolicited → ``INITIATOR_ERR``. Codes this engine never
produces: ``AT_*`` and ``HOST_*`` (no IOMMU or host-memory model), ``AMO_FP_*`` (FP exceptions not
signalled, see :mod:`uet.ses.atomics`), ``UNCOR_TRNSNT`` (no descriptor shortage to report).

Partially received messages idle for ``reassembly_timeout_ns`` (reference: 5 s) are failed with
``DROPPED`` by :meth:`SesTarget.handle_timer`.
"""

from __future__ import annotations

import random
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uet.errors import DecodeError
from uet.ses.addressing import Resource, ResourceTable
from uet.ses.errors import NoMatch, OpViolation, SesError, TooLong, UnsupportedOp
from uet.ses.events import OutPacket, RecvCompleted, SesResponse, WriteCompleted
from uet.ses.initiator import SesAddress, SesInitiator
from uet.ses.matching import PostedReceive, Unexpected
from uet.ses.memory import Access, MemoryRegion, MemoryTable
from uet.ses.packets import (
    MAX_WIRE_PAYLOAD,
    SesRequest,
    build_response,
    build_response_data,
    parse_request,
)
from uet.ses.replay import IdRange, is_copy, widen
from uet.ses.sink import ReceiveSink, receive_view
from uet.ses.sync import SyncGroups
from uet.wire.pds import NextHeader
from uet.wire.ses import CSWAP_OPS, AmoOp, ResponseOpcode, ReturnCode, SesOpcode

__all__ = ["SesTarget", "TargetConfig"]

_MODE_ROD = 1
_MODE_RUDI = 2
_MODE_UUD = 3
#: modes whose requests may reach SES more than once or unacknowledged (RUDI retransmits, UUD
#: has no PSN or duplicate filter): WRITE and ATOMIC need an idempotent-safe region (§2.14, §2.15)
_UNSAFE_MODES = (_MODE_RUDI, _MODE_UUD)

#: RMA writes: WRITE and the sync-group member SYNC_WRITE (uet.ses.sync)
_WRITES = (SesOpcode.WRITE, SesOpcode.SYNC_WRITE)

_SENDS = {
    SesOpcode.SEND: (False, "eager"),
    SesOpcode.DATAGRAM_SEND: (False, "eager"),
    SesOpcode.TAGGED_SEND: (True, "eager"),
    SesOpcode.DEFERRABLE_SEND: (False, "deferrable"),
    SesOpcode.DEFERRABLE_TSEND: (True, "deferrable"),
    SesOpcode.RENDEZVOUS_SEND: (False, "rendezvous"),
    SesOpcode.RENDEZVOUS_TSEND: (True, "rendezvous"),
}


@dataclass(frozen=True)
class TargetConfig:
    """Configuration of the target engine.

    Attributes:
        max_payload: data bytes per read-return packet (and the SOM read-request ask).
        max_ack_data: ``Max_ACK_Data_Size``: reads up to this many bytes return in the ACK
            (reference default 16, §6.5). Larger reads return as RESPONSE_DATA requests in the
            return direction of the read's PDC; over a PDS without return-direction support
            set it to at least the initiators' ``max_payload`` (each read-request packet asks
            for at most that), so every read's data travels in its ACK.
        overflow: keep unmatched sends on the unexpected (overflow) list (HPC); False answers
            ``NO_MATCH`` like the reference.
        remembered: completed/failed message ids remembered to answer RUDI duplicates and late
            packets of failed messages.
        reassembly_timeout_ns: a partially received message idle this long fails (§6.1). A
            remembered deferral (§6.7) that no receive has taken is dropped twice this long after
            it was deferred: its initiator waits for the RTR only for its idle limit (reference
            5 s, the same figure), counted from its last ACK; the margin keeps an entry while its
            initiator may still restart it, and a stranger's deferral (no initiator at all) does
            not hold one of the ``max_deferred`` places for good.
    """

    max_payload: int = 4096
    max_ack_data: int = 16
    overflow: bool = True
    remembered: int = 4096
    reassembly_timeout_ns: int = 5_000_000_000


@dataclass(eq=False)
class _Rec:
    """A message being received."""

    key: Any
    peer: str
    opcode: int
    kind: str  # eager | deferrable | rendezvous | write
    resource: Resource
    job: int
    initiator: int
    tagged: bool
    tag: int
    length: int
    span: int
    rel: bool
    dc: bool
    ext: Any = None
    recv: PostedReceive | None = None
    unexpected: Unexpected | None = None
    data: bytearray | None = None
    region: MemoryRegion | None = None
    base: int = 0
    extents: dict[int, int] = field(default_factory=dict)
    accounted: int = 0
    header_data: int | None = None
    error: int = 0
    deferred: bool = False
    src_token: int = 0
    complete: bool = False
    last_ns: int = 0
    pdc: int = 0
    #: RUDI: the range of packet ids its packets carried (uet.ses.replay)
    ids: IdRange = None


class SesTarget:
    """Target half of SES for one FEP."""

    def __init__(
        self,
        *,
        resources: ResourceTable,
        memory: MemoryTable,
        initiator: SesInitiator | None = None,
        config: TargetConfig | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.resources = resources
        self.memory = memory
        self.initiator = initiator
        self.config = config or TargetConfig()
        self._rng = rng or random.Random()
        self._recs: dict[Any, _Rec] = {}
        #: finished messages: (return code, modified length, list, PDCID, RUDI packet ids)
        self._done: OrderedDict[Any, tuple[int, int, int, int, IdRange]] = OrderedDict()
        self._reserved: dict[int, tuple[PostedReceive, str, int, Resource]] = {}
        #: per reservation: when :meth:`handle_timer` first saw it (None: not yet), and the
        #: deferred message's record
        self._reserved_at: dict[int, list[Any]] = {}
        #: remembered deferrals in the order they were made: (when, entry, resource); an entry a
        #: receive has taken meanwhile is no longer on its resource's unexpected list
        self._deferrals: deque[tuple[int, Unexpected, Resource]] = deque()
        self._next_token = 1
        self._events: deque[RecvCompleted | WriteCompleted] = deque()
        self._out: deque[OutPacket] = deque()
        self._now = 0
        #: the RUDI packet id of the request being handled (None for other modes)
        self._pkt_id: int | None = None
        #: SYNC_WRITE / SYNC_ATOMIC groups (uet.ses.sync)
        self.sync = SyncGroups()
        #: a receive reserved for a deferred message whose RTR failed goes back to its owner: this
        #: hook (the FEP's ``recv()`` waiters) takes it when it returns True, else it is reposted
        #: at the head of its list
        self.on_unreserved: Callable[[PostedReceive], bool] | None = None
        self.counters: dict[str, int] = {
            "requests": 0,
            "errors": 0,
            "duplicates": 0,
            "unexpected": 0,
            "deferred": 0,
            "expired": 0,
            "rtr_expired": 0,
            #: remembered deferrals dropped untaken (their message expired, or no receive came)
            "deferrals_expired": 0,
            #: payload bytes of request packets accepted (duplicates not counted): what a progress
            #: report counts as packets arrive, before their message completes
            "payload_bytes_received": 0,
        }

    # -- public API -----------------------------------------------------------------------------

    def on_deliver(self, delivery: Any) -> tuple[int, bytes, bool] | None:
        """Adapter for ``PdsCore.on_deliver``: handle a ``Delivery``; returns ``(next_hdr, bytes,
        guaranteed)`` (the PDS core also accepts the contract's 2-tuple and then infers
        ``guaranteed``) or None for a default response."""
        mode = int(delivery.mode)
        r = self.handle(
            delivery.peer, delivery.next_hdr, delivery.ses, delivery.payload, mode=mode, pdc=delivery.pdc,
            pkt_id=delivery.psn if mode == _MODE_RUDI else None,
        )  # fmt: skip
        return None if r is None else (r.next_hdr, r.data, r.guaranteed)

    def handle(
        self,
        peer: str,
        next_hdr: int,
        ses: bytes | memoryview,
        payload: bytes | memoryview = b"",
        *,
        mode: int = 0,
        pdc: int = 0,
        now: int = 0,
        retx: bool = False,
        pkt_id: int | None = None,
    ) -> SesResponse | None:
        """Process one delivered request and return the response for its ACK (None = default).
        ``retx`` is the PDS header's retransmission flag, ``pkt_id`` the RUDI packet id (RUDI
        copies of a finished message, see :meth:`_duplicate`)."""
        self.counters["requests"] += 1
        self._now = now
        self._pkt_id = pkt_id
        if next_hdr == NextHeader.RESPONSE_DATA:
            # read return data travelling as a request (§6.5): the FEP's initiator owns the read
            rc = (
                self.initiator.on_return_data(peer, ses, payload, now)
                if self.initiator is not None
                else ReturnCode.UNDELIVERABLE
            )
            return None if rc == ReturnCode.OK else self._err(rc, 0, 0, 0)
        try:
            req = parse_request(next_hdr, ses, payload)
        except DecodeError:
            mid = int.from_bytes(bytes(ses[2:4]), "big") if next_hdr == NextHeader.STANDARD and len(ses) >= 4 else 0
            return self._err(ReturnCode.OP_VIOLATION, mid, 0, 0)
        if req.version != 0:
            return self._err(ReturnCode.UNCOR, req.message_id, req.job_id, req.ri_generation)
        op = req.opcode
        try:
            if op == SesOpcode.DEFERRABLE_RTR:
                if self.initiator is None:
                    raise UnsupportedOp("no initiator engine for RTR")
                rc = self.initiator.on_rtr(peer, req, now)
                if rc != ReturnCode.OK:
                    return self._err(rc, req.message_id, req.job_id, req.ri_generation)
                return self._ok(req, 0)
            if op == SesOpcode.MSG_ERROR:
                return self._msg_error(peer, req)
            res = self.resources.resolve(rel=req.rel, job_id=req.job_id, pid=req.pid_on_fep, index=req.resource_index)
            if req.next_hdr != NextHeader.STANDARD and not (req.som and req.eom):
                raise OpViolation("small and medium requests are single-packet (SOM = EOM = 1)")
            if op in _SENDS or op in _WRITES or (not req.som and (peer, req.message_id) in self._recs):
                # a later packet of a message being received goes to its record whatever its
                # opcode: one that changed the opcode is refused OP_VIOLATION (§6.3 step 3, RC-023)
                return self._message(peer, req, res, mode, pdc, retx)
            if op == SesOpcode.READ:
                return self._read(peer, req, res, mode, pdc)
            if op in (SesOpcode.ATOMIC, SesOpcode.FETCHING_ATOMIC, SesOpcode.SYNC_ATOMIC):
                return self._atomic(peer, req, res, mode)
            if op in (SesOpcode.TSEND_ATOMIC, SesOpcode.TSEND_FETCH_ATOMIC):
                return self._tagged_atomic(peer, req, res, mode)
            if op == SesOpcode.NO_OP:
                ResourceTable.check_generation(res, req.ri_generation)
                return self._ok(req, 0)
            raise UnsupportedOp(f"opcode {op:#x} not supported")
        except SesError as e:
            gen = e.generation if e.generation is not None else req.ri_generation
            return self._err(e.return_code, req.message_id, req.job_id, gen)

    def post_recv(
        self,
        resource: Resource,
        buffer: bytearray | memoryview | ReceiveSink,
        *,
        tagged: bool = False,
        tag: int = 0,
        ignore: int = 0,
        initiator: int | None = None,
        job: int | None = None,
        truncate: bool = False,
        context: Any = None,
        source: str | None = None,
    ) -> PostedReceive:
        """Post a receive buffer on ``resource`` (§6.4). A matching unexpected message completes it
        at once (a :class:`RecvCompleted` event); a matching deferred send gets its RTR. A
        directed receive (``initiator``) that names its ``source`` Fabric Address takes only
        messages that arrived from it (:class:`PostedReceive`)."""
        recv = PostedReceive(receive_view(buffer), tagged, tag, ignore, initiator, job, truncate, context, source)
        resource.gen_enabled = True  # a ROD initiator's in-order retry may now match (§6.4)
        u = resource.matcher.post(recv)
        if u is not None:
            self._take_unexpected(u, recv)
        return recv

    def cancel_recv(self, resource: Resource, recv: PostedReceive) -> bool:
        """Cancel a posted receive; it completes with ``CANCELLED``. False if already matched."""
        if not resource.matcher.cancel(recv):
            return False
        self._events.append(RecvCompleted(recv.id, recv.context, ReturnCode.CANCELLED, 0, 0, "", 0, 0, None))
        return True

    def next_event(self) -> RecvCompleted | WriteCompleted | None:
        return self._events.popleft() if self._events else None

    def packets_to_send(self) -> list[OutPacket]:
        """Read-return-data requests to submit (return direction of ``return_pdc``)."""
        out = list(self._out)
        self._out.clear()
        return out

    def get_timer(self) -> int | None:
        """When the oldest partially received message or the oldest RTR reservation expires
        (``reassembly_timeout_ns``); a reservation not yet timed asks for a timer at once."""
        ts = []
        limit = self.config.reassembly_timeout_ns
        if self._recs:
            ts.append(min(r.last_ns for r in self._recs.values()) + limit)
        sync_at = self.sync.next_expiry(limit)
        if sync_at is not None:
            ts.append(sync_at)
        for at, _rec in self._reserved_at.values():
            ts.append(self._now if at is None else at + limit)
        deferrals = self._deferrals
        while deferrals and deferrals[0][1] not in deferrals[0][2].matcher.unexpected:
            deferrals.popleft()  # taken by a receive
        if deferrals:
            ts.append(deferrals[0][0] + 2 * limit)
        return min(ts) if ts else None

    def handle_timer(self, now: int) -> None:
        """Fail messages idle for ``reassembly_timeout_ns`` (reference: 5 s, behaviour.md §6.1):
        a receive bound to one completes with ``DROPPED``, an unexpected entry is discarded, and
        later packets of it are answered ``DROPPED``."""
        limit = now - self.config.reassembly_timeout_ns
        self._expire_reservations(now, limit)
        self.sync.expire(now, self.config.reassembly_timeout_ns)
        self._expire_deferrals(now - 2 * self.config.reassembly_timeout_ns)
        for rec in [r for r in self._recs.values() if r.last_ns <= limit]:
            self.counters["expired"] += 1
            rec.error = ReturnCode.DROPPED
            if rec.deferred:  # its truncation packet never came: the restart never will
                rec.deferred = False
                self._drop_deferral(rec)
            if rec.unexpected is not None and rec.unexpected in rec.resource.matcher.unexpected:
                rec.resource.matcher.unexpected.remove(rec.unexpected)
                rec.resource.matcher.unexpected_bytes -= rec.unexpected.nbytes
            if rec.recv is not None:
                self._complete_recv(rec, rec.recv, ReturnCode.DROPPED, 0)
            self._recs.pop(rec.key, None)
            self._remember(rec.key, ReturnCode.DROPPED, 0, 0, rec.pdc, rec.ids)

    def _expire_deferrals(self, limit: int) -> None:
        """Drop the remembered deferrals made at or before ``limit`` that no receive took."""
        deferrals = self._deferrals
        while deferrals and deferrals[0][0] <= limit:
            _at, entry, res = deferrals.popleft()
            if entry in res.matcher.unexpected:
                res.matcher.unexpected.remove(entry)
                self.counters["deferrals_expired"] += 1

    def _drop_deferral(self, rec: _Rec) -> None:
        """Drop the remembered deferral of a message that failed before a receive took it."""
        unexpected = rec.resource.matcher.unexpected
        for entry in unexpected:
            if entry.kind == "deferred" and entry.record is rec:
                unexpected.remove(entry)
                self.counters["deferrals_expired"] += 1
                return

    def _expire_reservations(self, now: int, limit: int) -> None:
        """A receive reserved for a deferred message (RTR sent, §6.7) whose restarted message has
        not begun within ``reassembly_timeout_ns`` completes with ``DROPPED``, as a receive bound
        to an expired partial message does: a forged or abandoned deferral cannot hold an
        application's receive for good (issue 15 item 3; inference: the notes give the RTR no
        timeout). A restart arriving later finds no reservation and is answered
        ``OP_VIOLATION`` (unknown restart token)."""
        at_map = self._reserved_at
        for token, entry in list(at_map.items()):
            if entry[0] is None:
                entry[0] = now  # first seen: the reservation's clock starts now
            elif entry[0] <= limit:
                del at_map[token]
                got = self._reserved.pop(token, None)
                if got is not None:
                    self.counters["rtr_expired"] += 1
                    self._complete_recv(entry[1], got[0], ReturnCode.DROPPED, 0, unexpected=True)

    # -- responses ------------------------------------------------------------------------------

    def _err(self, rc: int, mid: int, job: int, gen: int) -> SesResponse:
        self.counters["errors"] += 1
        return SesResponse(
            NextHeader.RESPONSE,
            build_response(int(rc), message_id=mid, job_id=job, ri_generation=gen),
            True,
        )

    def _ok(self, req: SesRequest, ml: int, *, list_: int = 0, guaranteed: bool = False) -> SesResponse:
        opcode = ResponseOpcode.RESPONSE if guaranteed else ResponseOpcode.DEFAULT_RESPONSE
        data = build_response(
            ReturnCode.OK,
            message_id=req.message_id,
            job_id=req.job_id,
            ri_generation=req.ri_generation,
            modified_length=ml,
            list_=list_,
            opcode=opcode,
        )
        return SesResponse(NextHeader.RESPONSE, data, guaranteed)

    # -- sends and writes -----------------------------------------------------------------------

    def _message(
        self, peer: str, req: SesRequest, res: Resource, mode: int, pdc: int = 0, retx: bool = False
    ) -> SesResponse | None:
        key = (peer, req.message_id) if req.next_hdr == NextHeader.STANDARD else None
        rec = self._recs.get(key) if key is not None else None
        if rec is None and key is not None and self._duplicate(key, req, mode, pdc, retx):
            return self._replay(req, key)
        deferral = False
        if rec is None:
            if req.next_hdr == NextHeader.SMALL and req.opcode == SesOpcode.WRITE:
                raise UnsupportedOp("small-header WRITE needs the optimized key space")
            ResourceTable.check_generation(res, req.ri_generation)
            rec = self._open(peer, key, req, res)
            rec.pdc = pdc
            if req.ie:
                rec.error = ReturnCode.INITIATOR_ERR
            else:
                try:
                    deferral = self._bind(rec, req, res, mode)
                except SesError as e:
                    rec.error = e.return_code
            if key is not None:
                self._recs[key] = rec
        else:
            if not rec.error:
                if req.opcode != rec.opcode or req.request_length != rec.length:
                    rec.error = ReturnCode.OP_VIOLATION
                elif rec.kind == "write" and req.match_bits != rec.region.key:  # type: ignore[union-attr]
                    rec.error = ReturnCode.PERM_VIOLATION
                elif req.ie:
                    rec.error = ReturnCode.INITIATOR_ERR
        rec.last_ns = self._now
        if mode == _MODE_RUDI:
            rec.ids = widen(rec.ids, self._pkt_id)
        # -- per-packet checks and accounting
        n = len(req.payload)
        off = req.message_offset
        truncating = rec.deferred and not req.som and req.eom and n == 0 and off < rec.span
        if not truncating:
            bad = self._packet_problem(req, rec, n, off)
            if bad:
                if not rec.error:
                    rec.error = ReturnCode.OP_VIOLATION
                if req.som and req.eom:
                    # the whole message, refused: it ends here (its unexpected entry goes with it;
                    # without a record, as a small header has, nothing would ever expire it, and a
                    # receive posted later would take it and wait for good)
                    self._finish(rec, req)
                return self._respond_error(rec, req)
            have = rec.extents.get(off)
            if have is not None:
                self.counters["duplicates"] += 1
                return None if not rec.error else self._respond_error(rec, req)
            rec.extents[off] = n
            rec.accounted += n
            self.counters["payload_bytes_received"] += n
            if not rec.error and not rec.deferred:
                try:
                    self._place(rec, off, req.payload)
                except SesError as e:
                    rec.error = e.return_code
            if req.som and req.hd:
                rec.header_data = req.header_data
        else:
            rec.extents[off] = rec.span - off
            rec.accounted += rec.span - off
        if rec.accounted > rec.span:
            if not rec.error:
                rec.error = ReturnCode.OP_VIOLATION
        done = rec.accounted == rec.span and _tiles(rec.extents, rec.span)
        final = self._finish(rec, req) if done else None
        if rec.error:
            return self._respond_error(rec, req)
        if deferral:
            return SesResponse(
                NextHeader.RESPONSE,
                build_response(
                    ReturnCode.OK,
                    message_id=req.message_id,
                    job_id=req.job_id,
                    ri_generation=req.ri_generation,
                    list_=1,
                ),
                True,
            )
        return final

    def _open(self, peer: str, key: Any, req: SesRequest, res: Resource) -> _Rec:
        if req.opcode in _WRITES:
            kind, tagged = "write", False
        else:
            tagged, kind = _SENDS[SesOpcode(req.opcode)]
        span = req.request_length
        if kind == "rendezvous":
            span = min(req.ext.eager_length, req.request_length)
        return _Rec(
            key,
            peer,
            req.opcode,
            kind,
            res,
            req.job_id,
            req.initiator,
            tagged,
            req.match_bits if tagged else 0,
            req.request_length,
            span,
            req.rel,
            req.dc,
            req.ext,
            base=req.buffer_offset if kind != "write" else 0,
            src_token=req.src_token,
        )

    def _bind(self, rec: _Rec, req: SesRequest, res: Resource, mode: int) -> bool:
        """Find where the message goes; True when the answer is a deferral (§6.7)."""
        if rec.kind == "write":
            if rec.opcode == SesOpcode.SYNC_WRITE and mode in _UNSAFE_MODES:
                raise OpViolation("sync operations need a mode with a duplicate filter (not RUDI/UUD)")
            region = self.memory.lookup(req.match_bits, req.job_id)
            region.check(Access.REMOTE_WRITE, req.buffer_offset, 0)
            if mode in _UNSAFE_MODES and not region.access & Access.IDEMPOTENT_SAFE:
                raise OpViolation("RUDI/UUD write to a region that is not idempotent-safe")
            region.check_message(req.buffer_offset, req.request_length)
            rec.region, rec.base = region, req.buffer_offset
            return False
        recv: PostedReceive | None
        if rec.kind == "deferrable" and req.dst_token:
            got = self._reserved.pop(req.dst_token, None)
            if got is None or got[1] != rec.peer or got[2] != req.src_token:
                if got is not None:
                    self._reserved[req.dst_token] = got
                raise OpViolation("unknown restart token")
            self._reserved_at.pop(req.dst_token, None)
            recv = got[0]
        else:
            recv = res.matcher.match(
                tagged=rec.tagged, tag=rec.tag, initiator=rec.initiator, job=rec.job, source=rec.peer
            )
        if recv is not None:
            self._attach(rec, recv)
            return False
        m = res.matcher
        if rec.kind == "deferrable" and m.can_buffer("deferred", 0):
            rec.deferred = True
            entry = Unexpected(
                "deferred", rec.tagged, rec.tag, rec.initiator, rec.job, rec.length, rec, source=rec.peer
            )
            m.add_unexpected(entry)
            self._deferrals.append((self._now, entry, res))
            self.counters["deferred"] += 1
            return True
        if self.config.overflow and rec.kind != "deferrable" and m.can_buffer("eager", rec.span):
            rec.data = bytearray(rec.span)
            rec.unexpected = Unexpected(
                rec.kind, rec.tagged, rec.tag, rec.initiator, rec.job, rec.length, rec, rec.span, source=rec.peer
            )
            m.add_unexpected(rec.unexpected)
            self.counters["unexpected"] += 1
            return False
        if mode == _MODE_ROD:
            res.gen_enabled = False
        raise NoMatch("no posted receive matches")

    def _attach(self, rec: _Rec, recv: PostedReceive) -> None:
        """Bind a message to a receive at arrival; too long without truncation → TOO_LONG."""
        rec.recv = recv
        if rec.length > _room(rec, recv) and not recv.truncate:
            raise TooLong(f"message of {rec.length} bytes, room for {_room(rec, recv)} at offset {rec.base}")

    def _packet_problem(self, req: SesRequest, rec: _Rec, n: int, off: int) -> bool:
        """Length rules of §6.1/§6.3 for one packet (True = malformed → OP_VIOLATION)."""
        span = rec.span
        if req.som:
            if n > span or (req.eom and n != span) or (not req.eom and n == 0):
                return True
        else:
            if req.payload_length != n and not (req.payload_length == 0 and n > MAX_WIRE_PAYLOAD):
                return True
        if off + n > span:
            return True
        if req.eom and off + n != span:
            return True
        have = rec.extents.get(off)
        if have is not None and have != n:
            return True
        return False

    def _place(self, rec: _Rec, off: int, payload: bytes | memoryview) -> None:
        n = len(payload)
        if not n:
            return
        if rec.kind == "write":
            region = rec.region
            assert region is not None
            region.check(Access.REMOTE_WRITE, rec.base + off, n)
            region.view[rec.base + off : rec.base + off + n] = payload
        elif rec.data is not None:
            rec.data[off : off + n] = payload
        elif rec.recv is not None:
            at = rec.base + off
            fit = max(0, min(n, _room(rec, rec.recv) - off))
            if fit:
                rec.recv.buffer[at : at + fit] = payload[:fit]

    def _finish(self, rec: _Rec, req: SesRequest) -> SesResponse | None:
        """All bytes of the message are accounted for."""
        rec.complete = True
        if rec.key is not None:
            self._recs.pop(rec.key, None)
        if rec.error:
            if rec.unexpected is not None and rec.unexpected in rec.resource.matcher.unexpected:
                rec.resource.matcher.unexpected.remove(rec.unexpected)
                rec.resource.matcher.unexpected_bytes -= rec.unexpected.nbytes
            if rec.deferred:  # failed after its deferral: no restart will come
                rec.deferred = False
                self._drop_deferral(rec)
            if rec.recv is not None:
                self._complete_recv(rec, rec.recv, rec.error, 0)
            self._remember(rec.key, rec.error, 0, 0, rec.pdc, rec.ids)
            return None
        if rec.deferred:
            self._remember(rec.key, ReturnCode.OK, 0, 1, rec.pdc, rec.ids)
            return None
        if rec.kind == "write":
            event = None
            if rec.header_data is not None:
                assert rec.region is not None
                event = WriteCompleted(rec.region.key, rec.base, rec.length, rec.header_data, rec.peer, rec.initiator)
            if rec.opcode == SesOpcode.SYNC_WRITE:
                try:
                    self._sync_write_done(rec, event)
                except SesError as e:
                    rec.error = e.return_code
                    self._remember(rec.key, rec.error, 0, 0, rec.pdc, rec.ids)
                    return None
            elif event is not None:
                self._events.append(event)
            self._remember(rec.key, ReturnCode.OK, rec.length, 0, rec.pdc, rec.ids)
            return self._ok(req, rec.length, guaranteed=rec.dc)
        if rec.unexpected is not None:
            # on the overflow list; a receive posted meanwhile takes it now
            if rec.recv is not None:
                self._deliver_buffered(rec, rec.recv)
            self._remember(rec.key, ReturnCode.OK, rec.length, 1, rec.pdc, rec.ids)
            return self._ok(req, rec.length, list_=1, guaranteed=True)
        assert rec.recv is not None
        placed = min(rec.length, _room(rec, rec.recv))
        if rec.kind == "rendezvous" and rec.span < rec.length:
            self._rendezvous_pull(rec, rec.recv)
        else:
            self._complete_recv(rec, rec.recv, ReturnCode.OK, placed)
        self._remember(rec.key, ReturnCode.OK, placed, 0, rec.pdc, rec.ids)
        return self._ok(req, placed, guaranteed=rec.dc or placed != rec.length)

    def _take_unexpected(self, u: Unexpected, recv: PostedReceive) -> None:
        """A receive was posted and matched an unexpected entry."""
        rec: _Rec = u.record
        if u.kind == "deferred":
            token = self._new_token()
            self._reserved[token] = (recv, rec.peer, rec.src_token, rec.resource)
            self._reserved_at[token] = [None, rec]

            def done(_result: Any, err: SesError | None, token: int = token) -> None:
                if err is not None:
                    got = self._reserved.pop(token, None)
                    self._reserved_at.pop(token, None)
                    if got is not None and not (self.on_unreserved is not None and self.on_unreserved(got[0])):
                        got[3].matcher.repost_front(got[0])

            assert self.initiator is not None
            self.initiator.rtr(
                rec.peer, job_id=rec.job, target_token=token, initiator_token=rec.src_token, on_done=done
            )
            return
        rec.recv = recv
        if rec.complete:
            self._deliver_buffered(rec, recv)
        # else: the remaining packets land in rec.data and _finish delivers it

    def _deliver_buffered(self, rec: _Rec, recv: PostedReceive) -> None:
        data = rec.data or bytearray()
        room = _room(rec, recv)
        too_long = rec.length > room and not recv.truncate
        fit = min(len(data), room)
        if not too_long:
            recv.buffer[rec.base : rec.base + fit] = data[:fit]
        rec.data = None
        if rec.kind == "rendezvous" and rec.span < rec.length:
            self._rendezvous_pull(rec, recv, failed=ReturnCode.TOO_LONG if too_long else 0)
            return
        if too_long:
            self._complete_recv(rec, recv, ReturnCode.TOO_LONG, 0, unexpected=True)
        else:
            self._complete_recv(rec, recv, ReturnCode.OK, min(rec.length, room), unexpected=True)

    def _rendezvous_pull(self, rec: _Rec, recv: PostedReceive, failed: int = 0) -> None:
        """Read the rest of a rendezvous message from the initiator (§6.6). The whole remainder
        is always read (even when the receive truncates or is too short) so the initiator's
        send completes; only what fits is kept."""
        e = rec.ext
        dest = SesAddress(rec.peer, e.read_pid_on_fep, e.read_resource_index, e.read_ri_generation, rec.job, rec.rel)
        rest = rec.length - rec.span
        unexpected = rec.unexpected is not None

        def done(result: Any, err: SesError | None) -> None:
            if err is not None:
                self._complete_recv(rec, recv, err.return_code, 0, unexpected=unexpected)
                return
            if failed:
                self._complete_recv(rec, recv, failed, 0, unexpected=unexpected)
                return
            room = _room(rec, recv)
            fit = max(0, min(rest, room - rec.span))
            at = rec.base + rec.span
            recv.buffer[at : at + fit] = result[:fit]
            self._complete_recv(rec, recv, ReturnCode.OK, min(rec.length, room), unexpected=unexpected)

        assert self.initiator is not None
        self.initiator.read(dest, e.read_match_bits, e.read_offset + rec.span, rest, on_done=done)

    def _complete_recv(self, rec: _Rec, recv: PostedReceive, rc: int, length: int, *, unexpected: bool = False) -> None:
        self._events.append(
            RecvCompleted(
                recv.id,
                recv.context,
                int(rc),
                length,
                rec.length,
                rec.peer,
                rec.initiator,
                rec.tag,
                rec.header_data,
                unexpected or rec.unexpected is not None,
            )
        )

    def _respond_error(self, rec: _Rec, req: SesRequest) -> SesResponse:
        return self._err(rec.error, req.message_id, req.job_id, req.ri_generation)

    def _duplicate(self, key: Any, req: SesRequest, mode: int, pdc: int, retx: bool) -> bool:
        """Whether a packet of no live message belongs to one already finished (issue 15,
        conformance finding SES-020). Only what PDS lets through can be a duplicate, so a new
        message reusing a message id is never mistaken for one:

        * RUD/ROD: PDS delivers each PSN once (behaviour.md §2.6 step 5) and a message finishes
          only when every packet of it was delivered, so a finished message has no duplicates at
          SES. What remains are late packets of a message that *failed* before all its packets
          came (expired with ``DROPPED``): a non-SOM packet on the same PDC gets that error again
          (answering OK would lose the message silently). A SOM packet, another PDC, or an id
          whose message succeeded always starts a new message.
        * RUDI (at least once, §2.14): no PSN, but a copy carries the packet id of the packet it
          repeats; a finished message remembers the range of its packet ids
          (:mod:`uet.ses.replay`), so a packet in it is a copy and any other starts a new message
          reusing the id.
        * UUD (§2.15): no packet id: a remembered id is a copy (uet.ses.replay says why).
        """
        done = self._done.get(key)
        if done is None:
            return False
        if mode == _MODE_UUD:
            return True
        if mode == _MODE_RUDI:
            return is_copy(done[4], self._pkt_id)
        return not req.som and done[0] != ReturnCode.OK and done[3] == pdc

    def _replay(self, req: SesRequest, key: Any) -> SesResponse | None:
        """A packet of a message already finished (RUDI duplicate or a straggler)."""
        self.counters["duplicates"] += 1
        rc, ml, list_, _pdc, _ids = self._done[key]
        if rc != ReturnCode.OK:
            return self._err(rc, req.message_id, req.job_id, req.ri_generation)
        if list_ == 1 and ml == 0:
            return None  # late packet of a deferred message
        return self._ok(req, ml, list_=list_, guaranteed=list_ == 1)

    def _remember(self, key: Any, rc: int, ml: int, list_: int, pdc: int = 0, ids: IdRange = None) -> None:
        if key is None:
            return
        self._done[key] = (int(rc), ml, list_, pdc, ids)
        self._done.move_to_end(key)
        while len(self._done) > self.config.remembered:
            self._done.popitem(last=False)

    def _new_token(self) -> int:
        while True:
            t = self._next_token
            self._next_token = t % 0xFFFF + 1
            if t not in self._reserved:
                return t

    def _msg_error(self, peer: str, req: SesRequest) -> SesResponse:
        """MSG_ERROR (§6.4, §6.9): cancels a message in flight; its EOM ``message_offset`` ends
        the message. Unsolicited (no such message) → ``INITIATOR_ERR``."""
        key = (peer, req.message_id)
        rec = self._recs.get(key)
        if rec is None:
            if key in self._done:
                return self._err(ReturnCode.INITIATOR_ERR, req.message_id, req.job_id, req.ri_generation)
            try:
                res = self.resources.resolve(
                    rel=req.rel, job_id=req.job_id, pid=req.pid_on_fep, index=req.resource_index
                )
            except SesError as e:
                return self._err(e.return_code, req.message_id, req.job_id, req.ri_generation)
            rec = _Rec(
                key,
                peer,
                req.opcode,
                "eager",
                res,
                req.job_id,
                req.initiator,
                False,
                0,
                req.request_length,
                req.request_length,
                req.rel,
                False,
            )
            rec.error = ReturnCode.INITIATOR_ERR
            self._recs[key] = rec
        elif not rec.error:
            rec.error = ReturnCode.CANCELLED
        off = req.message_offset
        if off < rec.span and off not in rec.extents:
            rec.extents[off] = rec.span - off
            rec.accounted += rec.span - off
        if rec.accounted >= rec.span and _tiles(rec.extents, rec.span):
            self._finish(rec, req)
        return self._respond_error(rec, req)

    # -- reads and atomics ----------------------------------------------------------------------

    def _read(self, peer: str, req: SesRequest, res: Resource, mode: int, pdc: int) -> SesResponse:
        if req.next_hdr == NextHeader.SMALL:
            raise UnsupportedOp("small-header READ needs the optimized key space")
        if req.som:
            ResourceTable.check_generation(res, req.ri_generation)
        if req.ie:
            return self._err(ReturnCode.INITIATOR_ERR, req.message_id, req.job_id, req.ri_generation)
        region = self.memory.lookup(req.match_bits, req.job_id)
        if req.som:
            off = 0
            ask = req.request_length if req.eom else min(req.request_length, self.config.max_payload)
        else:
            off, ask = req.message_offset, req.payload_length
        if off + ask > req.request_length:
            raise OpViolation("read asks beyond request_length")
        addr = req.buffer_offset + off
        region.check(Access.REMOTE_READ, addr, ask)
        data = bytes(region.view[addr : addr + ask])
        if region.on_remote_read is not None:
            region.on_remote_read(addr, ask)
        mid, job = req.message_id, req.job_id
        if req.request_length <= self.config.max_ack_data or mode == _MODE_RUDI:
            body = build_response_data(
                data,
                message_id=mid,
                job_id=job,
                read_request_message_id=mid,
                modified_length=req.request_length,
                message_offset=off,
            )
            return SesResponse(NextHeader.RESPONSE_DATA, body, True)
        mp = self.config.max_payload
        chunks = range(0, ask, mp) if ask else range(1)
        for i, c in enumerate(chunks):
            part = data[c : c + mp]
            hdr = build_response_data(
                part,
                message_id=mid,
                job_id=job,
                read_request_message_id=mid,
                modified_length=req.request_length,
                message_offset=off + c,
                header_only=True,
            )
            self._out.append(
                OutPacket(
                    peer,
                    mode,
                    NextHeader.RESPONSE_DATA,
                    hdr,
                    part,
                    i == 0,
                    i == len(chunks) - 1,
                    ("read_return", peer, mid, off + c),
                    job,
                    pdc,
                )
            )
        return self._ok(req, ask)

    def _sync_write_done(self, rec: _Rec, event: WriteCompleted | None) -> None:
        """A SYNC_WRITE message is placed: a member counts; the terminating one (with header
        data) posts its completion once the group's members are done (uet.ses.sync)."""
        key = (rec.peer, rec.job, rec.ext.group)
        if event is None:
            self.sync.member_done(key, rec.ext.count, self._now)
        else:
            self.sync.terminate(key, rec.ext.count, lambda: self._events.append(event), self._now)

    def _atomic(self, peer: str, req: SesRequest, res: Resource, mode: int) -> SesResponse:
        from uet.ses import atomics  # the AMO code (enums, codecs) only where atomics are used

        ResourceTable.check_generation(res, req.ri_generation)
        if req.ie:
            return self._err(ReturnCode.INITIATOR_ERR, req.message_id, req.job_id, req.ri_generation)
        if not (req.som and req.eom):
            raise OpViolation("atomics are single-packet")
        ext, sync = req.ext, None
        if req.opcode == SesOpcode.SYNC_ATOMIC:
            sync, ext = ext
            if mode in _UNSAFE_MODES:
                raise OpViolation("sync operations need a mode with a duplicate filter (not RUDI/UUD)")
        if ext is None:
            raise OpViolation("atomic without extension")
        amo, dtype = ext.atomic_opcode, ext.atomic_datatype
        region = self.memory.lookup(req.match_bits, req.job_id)
        fetch = req.opcode == SesOpcode.FETCHING_ATOMIC
        need = Access.REMOTE_ATOMIC
        if amo not in (AmoOp.READ, AmoOp.INVAL):
            need |= Access.REMOTE_WRITE
        if fetch or amo == AmoOp.READ:
            need |= Access.REMOTE_READ
        region.check(need, 0, 0)
        if mode in _UNSAFE_MODES and not region.access & Access.IDEMPOTENT_SAFE:
            raise OpViolation("RUDI/UUD atomic on a region that is not idempotent-safe")
        n, size = atomics.plan(amo, dtype, len(req.payload), req.buffer_offset)
        region.check(need, req.buffer_offset, n * size)
        compare = getattr(ext, "compare_value", 0) if amo in CSWAP_OPS else 0
        swap = getattr(ext, "swap_value", 0) if amo in CSWAP_OPS else 0
        if sync is not None:
            view, at, operand = region.view, req.buffer_offset, bytes(req.payload)

            def apply() -> None:
                atomics.apply(view, at, amo, dtype, operand, compare=compare, swap=swap)

            self.sync.terminate((peer, req.job_id, sync.group), sync.count, apply, self._now)
            return self._ok(req, n * size)
        old = atomics.apply(region.view, req.buffer_offset, amo, dtype, req.payload, compare=compare, swap=swap)
        if fetch:
            body = build_response_data(
                old, message_id=req.message_id, job_id=req.job_id, read_request_message_id=req.message_id
            )
            return SesResponse(NextHeader.RESPONSE_DATA, body, True)
        return self._ok(req, n * size)

    def _tagged_atomic(self, peer: str, req: SesRequest, res: Resource, mode: int) -> SesResponse:
        """TSEND_ATOMIC / TSEND_FETCH_ATOMIC: the atomic applies to the buffer of the posted
        tagged receive its tag matches (module docstring)."""
        from uet.ses import atomics  # the AMO code (enums, codecs) only where atomics are used

        ResourceTable.check_generation(res, req.ri_generation)
        if req.ie:
            return self._err(ReturnCode.INITIATOR_ERR, req.message_id, req.job_id, req.ri_generation)
        if not (req.som and req.eom):
            raise OpViolation("atomics are single-packet")
        if mode in _UNSAFE_MODES:
            raise OpViolation("a tagged atomic consumes a receive: not idempotent, refused in RUDI/UUD")
        ext = req.ext
        amo, dtype = ext.atomic_opcode, ext.atomic_datatype
        n, size = atomics.plan(amo, dtype, len(req.payload), req.buffer_offset)
        recv = res.matcher.match(tagged=True, tag=req.match_bits, initiator=req.initiator, job=req.job_id, source=peer)
        if recv is None:
            raise NoMatch("no posted tagged receive for the atomic")
        end = req.buffer_offset + n * size
        buf = recv.buffer
        if isinstance(buf, ReceiveSink):  # write-only memory (uet.ses.sink) holds no operand to combine
            res.matcher.repost_front(recv)
            raise UnsupportedOp("a tagged atomic into a receive sink")
        if end > len(buf):
            res.matcher.repost_front(recv)
            raise TooLong(f"atomic of {n * size} bytes at {req.buffer_offset}, receive of {len(buf)}")
        old = atomics.apply(
            buf,
            req.buffer_offset,
            amo,
            dtype,
            req.payload,
            compare=getattr(ext, "compare_value", 0) if amo in CSWAP_OPS else 0,
            swap=getattr(ext, "swap_value", 0) if amo in CSWAP_OPS else 0,
        )
        rec = _Rec(None, peer, req.opcode, "atomic", res, req.job_id, req.initiator, True, req.match_bits,
                   n * size, n * size, req.rel, req.dc)  # fmt: skip
        self._complete_recv(rec, recv, ReturnCode.OK, n * size)
        if req.opcode == SesOpcode.TSEND_FETCH_ATOMIC:
            body = build_response_data(
                old, message_id=req.message_id, job_id=req.job_id, read_request_message_id=req.message_id
            )
            return SesResponse(NextHeader.RESPONSE_DATA, body, True)
        return self._ok(req, n * size, guaranteed=req.dc)


def _room(rec: _Rec, recv: PostedReceive) -> int:
    """Bytes a receive can take for a send placed at its ``buffer_offset`` (§6.1)."""
    return max(0, len(recv.buffer) - rec.base)


def _tiles(extents: dict[int, int], span: int) -> bool:
    pos = 0
    for off in sorted(extents):
        if off != pos:
            return False
        pos += extents[off]
    return pos == span
