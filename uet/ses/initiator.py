"""The initiator SES engine (sans-I/O): builds request packets, interprets responses (behaviour.md §6).

Each operation (send, tagged send, write, read, atomic, rendezvous and deferrable send, and the
internal RTR / MSG_ERROR packets) becomes one or more *messages*; each message becomes packets
(:class:`~uet.ses.events.OutPacket`) that the owner submits to PDS with their ``token``. PDS
reports ``Acked(token, next_hdr, response)`` / ``Failed(token, ...)`` per packet; the owner feeds
them to :meth:`SesInitiator.on_ack` / :meth:`SesInitiator.on_failed`, and one
:class:`~uet.ses.events.OpCompleted` or :class:`~uet.ses.events.OpFailed` comes out of
:meth:`SesInitiator.next_event` per operation. Time is a parameter (``now`` in ns) and
:meth:`get_timer`/:meth:`handle_timer` drive retry backoff and the RTR wait.

Header choice (wire-format.md §8.2–§8.4, our choice): multi-packet messages, reads, atomics,
deferrable, rendezvous, RTR and MSG_ERROR use the **standard** header; a single-packet SEND,
TAGGED_SEND or WRITE (no header data with a non-zero buffer offset) uses the **medium** header
when ``use_medium`` is set — it carries everything such a request needs, and responses are
matched to packets by the PDS token, not by message id. The **small** header is never emitted: it
has no memory key, and the optimized key space it relies on is not implemented.

Segmentation: ``max_payload`` bytes per packet; the SOM packet carries header data (HD) and
``request_length``; later packets carry ``payload_length`` and ``message_offset`` (§8.2). This is
the same segmentation as ``uet.ses.segmenter.Segmenter`` (plain sends, standard header, REL set)
generalised to every opcode; the endpoint can switch to this engine without changing the wire.

Reads (our choice): a READ longer than ``max_payload`` is issued as consecutive single-packet
READ messages of at most ``max_payload`` bytes each (each "read-request packet asks for at most
one MTU", §6.1, and a SOM packet has no ``payload_length`` field to say how much it asks for).
Each returns its data in the ACK (≤ ``Max_ACK_Data_Size`` or RUDI) or as RESPONSE_DATA requests
in the return direction (:meth:`on_return_data`); the read completes when every request packet
is acknowledged and all its data has arrived (§6.5).

Retries (§6.4): ``NO_MATCH``/``DISABLED_GEN`` stop the message (a MSG_ERROR with EOM at the next
unsent offset if some packets were already out), wait for its outstanding ACKs, then resend the
whole message under a new message id after a random backoff in [50, 100] ms doubling per retry,
at most ``max_message_retries`` times; ``BAD_GENERATION`` adopts the generation from the response
and resends at once (counted as a retry). Other codes fail the operation.

Deferrable send (§6.7): the "deferred" response (``RC_OK``, list overflow, modified length 0)
stops the message (a DEFERRABLE packet with EOM, no payload, at the next offset truncates it at
the target), then the operation waits for the target's RTR (:meth:`on_rtr`, at most
``rtr_timeout_ns``) and resends the whole message with ``restart token = initiator ‖ target``.

Rendezvous send (§6.6, inference): the buffer is registered for remote read (restricted to the
destination's JobID); the first ``eager_length`` bytes travel as a RENDEZVOUS_SEND message whose
extension names this FEP's read-back resource and the key; ``request_length`` is the full length.
The send completes when the eager message is acknowledged **and** the target has read the rest,
then the registration is removed.

Sync groups (behaviour.md §6.5, wire-format.md §9.4, provider extension Δ18): ``write(...,
sync=(group, count))`` sends SYNC_WRITE and ``atomic(..., sync=(group, count))`` SYNC_ATOMIC,
each carrying the 4-byte sync extension (``group ‖ count``; SYNC_ATOMIC then its atomic one). A
group is ``count`` operations toward one target; its *terminating* operation — the SYNC_ATOMIC,
or the SYNC_WRITE with header data — takes effect at the target only once the ``count − 1``
others have completed there (:mod:`uet.ses.sync`). SYNC_ATOMIC is non-fetching (no fetching
opcode exists for it).

Tagged atomics (TSEND_ATOMIC / TSEND_FETCH_ATOMIC, our reading of §8.5): ``atomic(...,
tagged=True)`` carries the *tag* where an atomic carries the memory key; the target applies the
atomic to the buffer of a posted tagged receive that matches it (:mod:`uet.ses.sync` documents
the target side).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from uet.errors import DecodeError
from uet.ses.errors import Dropped, OpViolation, SesError, Undeliverable, error_for
from uet.ses.events import OpCompleted, OpFailed, OutPacket
from uet.ses.memory import Access, MemoryTable, byte_view
from uet.ses.opstate import OpState, op_transition
from uet.ses.packets import MAX_WIRE_PAYLOAD, Response, SesRequest, build_request, parse_response
from uet.wire.pds import NextHeader
from uet.wire.ses import (
    ATOMIC_EXT,
    CSWAP_EXT,
    CSWAP_OPS,
    RENDEZVOUS_EXT,
    SYNC_EXT,
    ResponseOpcode,
    ReturnCode,
    SesFlag,
    SesOpcode,
)

__all__ = ["InitiatorConfig", "SesAddress", "SesInitiator"]

_RETRYABLE = (ReturnCode.NO_MATCH, ReturnCode.DISABLED_GEN)


@dataclass(frozen=True)
class SesAddress:
    """Where a request goes (behaviour.md §1.1): the target FEP's Fabric Address, the process
    (PIDonFEP), resource index and its generation, the JobID, and relative/absolute addressing."""

    fa: str
    pid_on_fep: int = 0
    resource_index: int = 0
    ri_generation: int = 0
    job_id: int = 0
    relative: bool = True


@dataclass(frozen=True)
class InitiatorConfig:
    """Configuration of the initiator engine.

    Attributes:
        initiator_id: 32-bit initiator ID carried in standard/medium requests (§1.1).
        max_payload: payload bytes per packet (reference default 1024, bound 8192; ≤ 16383).
        use_medium: use the medium header for single-packet SEND/TAGGED_SEND/WRITE.
        deferrable_threshold: sends longer than this use DEFERRABLE_SEND/TSEND (reference: 8192
            on RUD, §6.7); None disables.
        rendezvous_threshold: sends longer than this use RENDEZVOUS_SEND/TSEND (§6.6); None
            disables. Checked before the deferrable threshold.
        eager_length: bytes sent eagerly by a rendezvous send.
        max_message_retries: whole-message retries after NO_MATCH/DISABLED_GEN/BAD_GENERATION.
        retry_backoff_ns: first retry's backoff range (doubles per retry, §6.4).
        rtr_timeout_ns: how long a deferred send waits for its RTR (reference idle limit: 5 s).
        mode: PDS delivery mode for requests (an int equal to ``uet.pds.Mode``; 0 = RUD).
        local_pid / local_index / local_generation: this FEP's resource the rendezvous read-back
            descriptor names (the target reads the rest of the message from it).
    """

    initiator_id: int = 0
    max_payload: int = 4096
    use_medium: bool = True
    deferrable_threshold: int | None = 8192
    rendezvous_threshold: int | None = None
    eager_length: int = 4096
    max_message_retries: int = 5
    retry_backoff_ns: tuple[int, int] = (50_000_000, 100_000_000)
    rtr_timeout_ns: int = 5_000_000_000
    mode: int = 0
    local_pid: int = 0
    local_index: int = 0
    local_generation: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.max_payload <= MAX_WIRE_PAYLOAD:
            raise ValueError(f"max_payload must be 1..{MAX_WIRE_PAYLOAD}")


@dataclass(eq=False)
class _Op:
    """One operation the initiator runs (a send, a write, a read, an atomic) and its state."""

    id: int
    kind: str
    opcode: int
    dest: SesAddress
    mode: int
    data: memoryview | None = None
    length: int = 0
    tag: int = 0
    header_data: int | None = None
    dc: bool = False
    key: int = 0
    offset: int = 0
    ext: bytes = b""
    atomic_type: int = 0
    fetch: bool = False
    into: memoryview | None = None
    context: Any = None
    on_done: Callable[[Any, SesError | None], None] | None = None
    retries: int = 0
    msgs: dict[int, _Msg] = field(default_factory=dict)
    timer: int | None = None
    state: OpState = OpState.ACTIVE  # uet.ses.opstate: moved only through op_transition
    my_token: int = 0
    target_token: int = 0
    rtr_tokens: tuple[int, int] = (0, 0)
    eager: int = 0
    region: Any = None
    remote_read: int = 0
    eager_done: bool = False
    modified_length: int | None = None
    result: Any = None
    pending_chunks: int = 0


@dataclass(eq=False)
class _Msg:
    """One message of an operation: its packets waiting and in flight."""

    op: _Op
    msg_id: int
    data_off: int
    length: int
    pending: deque[OutPacket] = field(default_factory=deque)
    outstanding: set[Any] = field(default_factory=set)
    next_offset: int = 0
    error: SesError | None = None
    deferred: bool = False
    stopped: bool = False
    got_data: int = 0


class SesInitiator:
    """Initiator half of SES for one FEP."""

    def __init__(
        self,
        config: InitiatorConfig | None = None,
        *,
        memory: MemoryTable | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config or InitiatorConfig()
        self.memory = memory if memory is not None else MemoryTable(rng=rng)
        self._rng = rng or random.Random()
        self._next_op = 1
        self._next_msg = self._rng.getrandbits(16)
        self._next_token = 1
        self._pkt_seq = 0
        self._ops: dict[int, _Op] = {}
        self._msgs: dict[int, _Msg] = {}
        self._tokens: dict[int, _Op] = {}
        self._ready: deque[_Msg] = deque()
        self._events: deque[OpCompleted | OpFailed] = deque()
        self.counters: dict[str, int] = {
            "ops": 0,
            "messages": 0,
            "packets": 0,
            "retries": 0,
            "deferred": 0,
            "rtr_received": 0,
            "msg_errors_sent": 0,
        }

    # -- operations -----------------------------------------------------------------------------

    def send(
        self,
        dest: SesAddress,
        data: bytes | bytearray | memoryview,
        *,
        tag: int | None = None,
        header_data: int | None = None,
        dc: bool = False,
        protocol: str | None = None,
        mode: int | None = None,
        context: Any = None,
    ) -> int:
        """Send (``tag`` None) or tagged-send ``data``; returns the operation id.

        ``protocol`` forces ``"eager"``, ``"deferrable"`` or ``"rendezvous"``; by default the
        thresholds of the configuration decide.
        """
        view = byte_view(data)
        cfg = self.config
        n = len(view)
        if protocol is None:
            protocol = self.protocol_for(n)
        tagged = tag is not None
        opcode = {
            "eager": (SesOpcode.SEND, SesOpcode.TAGGED_SEND),
            "deferrable": (SesOpcode.DEFERRABLE_SEND, SesOpcode.DEFERRABLE_TSEND),
            "rendezvous": (SesOpcode.RENDEZVOUS_SEND, SesOpcode.RENDEZVOUS_TSEND),
        }[protocol][tagged]
        op = self._new_op(protocol if protocol != "eager" else "send", opcode, dest, mode, context)
        op.data, op.length, op.tag, op.header_data, op.dc = view, n, tag or 0, header_data, dc
        if protocol == "deferrable":
            op.my_token = self._alloc_token(op)
        elif protocol == "rendezvous":
            op.eager = min(cfg.eager_length, n)
            op.region = self.memory.register(
                view,
                Access.REMOTE_READ,
                job=dest.job_id,
                on_remote_read=lambda _o, n: self._rndv_read(op, n),  # op is bound once in send()
            )
            op.ext = RENDEZVOUS_EXT.encode(
                (op.eager, cfg.local_generation, cfg.local_pid, cfg.local_index, 0, op.region.key)
            )
        self._start(op)
        return op.id

    def protocol_for(self, length: int) -> str:
        """The send protocol the configuration picks for a message of ``length`` bytes:
        ``"rendezvous"`` above ``rendezvous_threshold`` (and above the eager part), else
        ``"deferrable"`` above ``deferrable_threshold``, else ``"eager"`` (§6.6, §6.7). The one
        copy of this rule: the FEP core asks it before choosing its eager lanes."""
        cfg = self.config
        if cfg.rendezvous_threshold is not None and length > cfg.rendezvous_threshold and length > cfg.eager_length:
            return "rendezvous"
        if cfg.deferrable_threshold is not None and length > cfg.deferrable_threshold:
            return "deferrable"
        return "eager"

    def write(
        self,
        dest: SesAddress,
        key: int,
        offset: int,
        data: bytes | bytearray | memoryview,
        *,
        header_data: int | None = None,
        dc: bool = False,
        mode: int | None = None,
        context: Any = None,
        sync: tuple[int, int] | None = None,
    ) -> int:
        """RMA write of ``data`` at ``offset`` of the region with ``key`` (§6.5); with ``sync =
        (group, count)`` a SYNC_WRITE member of that sync group (module docstring)."""
        op = self._new_op("write", SesOpcode.WRITE if sync is None else SesOpcode.SYNC_WRITE, dest, mode, context)
        if sync is not None:
            op.ext = _sync_ext(sync)
        op.data = byte_view(data)
        op.length, op.key, op.offset, op.header_data, op.dc = len(op.data), key, offset, header_data, dc
        self._start(op)
        return op.id

    def read(
        self,
        dest: SesAddress,
        key: int,
        offset: int,
        length: int,
        *,
        into: bytearray | memoryview | None = None,
        mode: int | None = None,
        context: Any = None,
        on_done: Callable[[Any, SesError | None], None] | None = None,
    ) -> int:
        """RMA read of ``length`` bytes at ``offset`` of region ``key``; the result is the bytes
        (or written to ``into``, then the result is ``into``)."""
        op = self._new_op("read", SesOpcode.READ, dest, mode, context)
        op.key, op.offset, op.length, op.on_done = key, offset, length, on_done
        op.into = byte_view(into) if into is not None else memoryview(bytearray(length))
        if len(op.into) < length:
            raise ValueError("read target buffer shorter than length")
        self._start(op)
        return op.id

    def atomic(
        self,
        dest: SesAddress,
        key: int,
        offset: int,
        amo_op: int,
        datatype: int,
        operands: list[int | float] | tuple[int | float, ...] | bytes = (),
        *,
        compare: int | float = 0,
        swap: int | float = 0,
        fetch: bool = False,
        mode: int | None = None,
        context: Any = None,
        sync: tuple[int, int] | None = None,
        tagged: bool = False,
    ) -> int:
        """Atomic ``amo_op`` on ``datatype`` at ``offset`` of region ``key`` (§6.5, §10).

        ``operands`` are values (encoded little-endian, see :mod:`uet.ses.atomics`) or raw
        bytes; MSWAP takes ``[operand, mask, ...]`` pairs, READ/INVAL placeholders for the
        element count. The compare-and-swap family uses ``compare``/``swap`` (one element).
        A fetching atomic's result is the prior value (a tuple for several elements).

        ``sync = (group, count)``: SYNC_ATOMIC, the terminating operation of that sync group
        (non-fetching). ``tagged``: TSEND_ATOMIC / TSEND_FETCH_ATOMIC, ``key`` is then the tag
        of the posted receive whose buffer the atomic applies to (module docstring).
        """
        from uet.ses import atomics  # the AMO code (enums, codecs) only where atomics are used

        if sync is not None and (fetch or tagged):
            raise ValueError("SYNC_ATOMIC is a plain (non-fetching, untagged) atomic")
        if sync is not None:
            opcode = SesOpcode.SYNC_ATOMIC
        elif tagged:
            opcode = SesOpcode.TSEND_FETCH_ATOMIC if fetch else SesOpcode.TSEND_ATOMIC
        else:
            opcode = SesOpcode.FETCHING_ATOMIC if fetch else SesOpcode.ATOMIC
        op = self._new_op("atomic", opcode, dest, mode, context)
        op.key, op.offset, op.fetch, op.atomic_type = key, offset, fetch, datatype
        if amo_op in CSWAP_OPS:
            payload = b""
            op.ext = CSWAP_EXT.encode(
                (
                    amo_op,
                    datatype,
                    0,
                    atomics.to_wire_int(datatype, compare),
                    atomics.to_wire_int(datatype, swap),
                )
            )
            op.length = atomics.TYPE_INFO[datatype].size if datatype in atomics.TYPE_INFO else 0
        else:
            payload = (
                bytes(operands)
                if isinstance(operands, bytes | bytearray)
                else atomics.encode_values(datatype, operands)
            )
            op.ext = ATOMIC_EXT.encode((amo_op, datatype, 0))
            op.length = len(payload)
        if sync is not None:
            op.ext = _sync_ext(sync) + op.ext
        op.data = memoryview(payload)
        self._start(op)
        return op.id

    def rtr(
        self,
        peer: str,
        *,
        job_id: int,
        target_token: int,
        initiator_token: int,
        on_done: Callable[[Any, SesError | None], None] | None = None,
        mode: int | None = None,
    ) -> int:
        """Send DEFERRABLE_RTR (used by the target engine, §6.7): a single-packet request whose
        restart token is ``target token ‖ initiator token``. It is routed by that token at the
        peer, so PIDonFEP/RI are sent as 0 (our choice: the deferrable send does not carry the
        initiator's own PIDonFEP/RI)."""
        op = self._new_op("rtr", SesOpcode.DEFERRABLE_RTR, SesAddress(peer, job_id=job_id, relative=False), mode, None)
        op.rtr_tokens, op.on_done = (target_token, initiator_token), on_done
        op.data = memoryview(b"")
        self._start(op)
        return op.id

    # -- PDS side -------------------------------------------------------------------------------

    def packets_to_send(self, limit: int | None = None) -> list[OutPacket]:
        """Packets ready for PDS, message by message (messages do not interleave)."""
        out: list[OutPacket] = []
        ready = self._ready
        while ready and (limit is None or len(out) < limit):
            msg = ready[0]
            while msg.pending and (limit is None or len(out) < limit):
                pkt = msg.pending.popleft()
                msg.outstanding.add(pkt.token)
                msg.next_offset = _pkt_end(pkt, msg)
                out.append(pkt)
            if not msg.pending:
                ready.popleft()
        self.counters["packets"] += len(out)
        return out

    def on_ack(self, token: Any, response_next_hdr: int = 0, response: bytes = b"", now: int = 0) -> None:
        """A packet was acknowledged, carrying ``response`` (empty: implicit / default)."""
        msg = self._msg_for(token)
        if msg is None:
            return
        msg.outstanding.discard(token)
        if response_next_hdr and response:
            try:
                resp = parse_response(response_next_hdr, response)
            except DecodeError as exc:
                self._msg_error(msg, OpViolation(f"undecodable response: {exc}"))
            else:
                self._apply_response(msg, resp, token)
        self._check_msg(msg, now)

    def on_failed(self, token: Any, reason: str = "", nack_code: int | None = None, now: int = 0) -> None:
        """PDS gave up on a packet: the message (and the operation) fails as UNDELIVERABLE."""
        msg = self._msg_for(token)
        if msg is None:
            return
        msg.outstanding.discard(token)
        if msg.error is None:
            self._msg_error(msg, Undeliverable(f"PDS: {reason} (nack {nack_code})"))
        self._check_msg(msg, now)

    def on_return_data(self, peer: str, ses: bytes | memoryview, payload: bytes | memoryview, now: int = 0) -> int:
        """A RESPONSE_DATA *request* (read return data, §6.5) arrived from ``peer``; returns the
        return code the ACK's response carries (``UNDELIVERABLE`` for an unknown read)."""
        try:
            r = parse_response(NextHeader.RESPONSE_DATA, ses, payload)
        except DecodeError:
            return ReturnCode.OP_VIOLATION
        msg = self._msgs.get(r.read_request_message_id)
        if msg is None or msg.op.kind != "read" or msg.op.dest.fa != peer:
            return ReturnCode.UNDELIVERABLE
        if not self._place_read(msg, r):
            return ReturnCode.OP_VIOLATION
        self._check_msg(msg, now)
        return ReturnCode.OK

    def on_rtr(self, peer: str, req: SesRequest, now: int = 0) -> int:
        """A DEFERRABLE_RTR arrived (§6.7); returns the return code to answer it with."""
        self.counters["rtr_received"] += 1
        op = self._tokens.get(req.dst_token)
        if op is None or op.dest.fa != peer or op.state is OpState.DONE:
            return ReturnCode.OP_VIOLATION
        op.target_token = req.src_token
        if op.state is OpState.WAIT_RTR:
            op.timer = None
            op.state = op_transition(op.state, OpState.ACTIVE)
            self._new_message(op)
        return ReturnCode.OK

    # -- events and timers ----------------------------------------------------------------------

    def next_event(self) -> OpCompleted | OpFailed | None:
        return self._events.popleft() if self._events else None

    def get_timer(self) -> int | None:
        ts = [op.timer for op in self._ops.values() if op.timer is not None]
        return min(ts) if ts else None

    def handle_timer(self, now: int) -> None:
        for op in list(self._ops.values()):
            if op.timer is None or op.timer > now:
                continue
            op.timer = None
            if op.state is OpState.BACKOFF:
                op.state = op_transition(op.state, OpState.ACTIVE)
                self._new_message(op)
            elif op.state is OpState.WAIT_RTR:
                self._finish(op, Dropped("no RTR within the deferral idle limit"))

    def idle(self) -> bool:
        """No operation in progress."""
        return not self._ops

    # -- internals ------------------------------------------------------------------------------

    def _new_op(self, kind: str, opcode: int, dest: SesAddress, mode: int | None, context: Any) -> _Op:
        op = _Op(self._next_op, kind, opcode, dest, self.config.mode if mode is None else mode, context=context)
        self._next_op += 1
        self._ops[op.id] = op
        self.counters["ops"] += 1
        return op

    def _alloc_token(self, op: _Op) -> int:
        for _ in range(0x10000):
            t = self._next_token
            self._next_token = t % 0xFFFF + 1
            if t not in self._tokens:
                self._tokens[t] = op
                return t
        raise Dropped("no free restart token")  # pragma: no cover - 65535 deferred sends

    def _alloc_msg_id(self) -> int:
        for _ in range(0x10000):
            m = self._next_msg
            self._next_msg = (m + 1) & 0xFFFF
            if m not in self._msgs:
                return m
        raise Dropped("no free message id")  # pragma: no cover

    def _start(self, op: _Op) -> None:
        if op.kind == "read":
            mp = self.config.max_payload
            chunks = range(0, op.length, mp) if op.length else range(1)
            op.pending_chunks = len(chunks)
            for off in chunks:
                self._new_message(op, off, min(mp, op.length - off))
        else:
            self._new_message(op)

    def _new_message(self, op: _Op, data_off: int = 0, length: int | None = None) -> None:
        msg = _Msg(op, self._alloc_msg_id(), data_off, op.length if length is None else length)
        self._msgs[msg.msg_id] = msg
        op.msgs[msg.msg_id] = msg
        msg.pending.extend(self._packets(op, msg))
        self._ready.append(msg)
        self.counters["messages"] += 1

    def _fields(self, op: _Op, msg: _Msg) -> dict[str, Any]:
        d = op.dest
        return {
            "message_id": msg.msg_id,
            "ri_generation": d.ri_generation,
            "job_id": d.job_id,
            "pid_on_fep": d.pid_on_fep,
            "resource_index": d.resource_index,
            "initiator": self.config.initiator_id,
        }

    def _packets(self, op: _Op, msg: _Msg) -> list[OutPacket]:
        cfg = self.config
        base = (SesFlag.REL if op.dest.relative else 0) | (SesFlag.DC if op.dc else 0)
        f = self._fields(op, msg)
        if op.kind == "read":
            hdr = build_request(
                SesOpcode.READ,
                flags=base | SesFlag.SOM | SesFlag.EOM,
                buffer_offset=op.offset + msg.data_off,
                match_bits=op.key,
                request_length=msg.length,
                **f,
            )
            return [self._pkt(op, msg, hdr, b"", True, True)]
        if op.kind == "rtr":
            hdr = build_request(
                SesOpcode.DEFERRABLE_RTR,
                flags=base | SesFlag.SOM | SesFlag.EOM,
                src_token=op.rtr_tokens[0],
                dst_token=op.rtr_tokens[1],
                **f,
            )
            return [self._pkt(op, msg, hdr, b"", True, True)]
        if op.kind == "atomic":
            hdr = build_request(
                op.opcode,
                flags=base | SesFlag.SOM | SesFlag.EOM,
                buffer_offset=op.offset,
                match_bits=op.key,
                request_length=op.length,
                ext=op.ext,
                **f,
            )
            return [self._pkt(op, msg, hdr, bytes(op.data or b""), True, True)]
        # send family and write
        data = op.data if op.data is not None else memoryview(b"")
        total = op.length
        span = op.eager if op.kind == "rendezvous" else total
        mp = cfg.max_payload
        n = max(1, -(-span // mp))
        if op.kind == "write":
            bo, mb = op.offset, op.key
        else:
            bo, mb = 0, op.tag
        src_tok, dst_tok = op.my_token, op.target_token
        hd = op.header_data is not None
        medium = (
            cfg.use_medium
            and n == 1
            and op.opcode in (SesOpcode.SEND, SesOpcode.TAGGED_SEND, SesOpcode.WRITE)
            and not (hd and bo)
        )
        out = []
        for i in range(n):
            off = i * mp
            end = min(off + mp, span)
            som, eom = i == 0, i == n - 1
            flags = base | (SesFlag.SOM if som else 0) | (SesFlag.EOM if eom else 0) | (SesFlag.HD if som and hd else 0)
            hdr = build_request(
                op.opcode,
                flags=flags,
                buffer_offset=bo,
                match_bits=mb,
                header_data=op.header_data or 0,
                payload_length=end - off,
                message_offset=off,
                request_length=total,
                src_token=src_tok,
                dst_token=dst_tok,
                header=NextHeader.MEDIUM if medium else NextHeader.STANDARD,
                ext=op.ext,
                **f,
            )
            out.append(self._pkt(op, msg, hdr, data[off:end], som, eom, NextHeader.MEDIUM if medium else None))
        return out

    def _pkt(
        self, op: _Op, msg: _Msg, hdr: bytes, payload: Any, som: bool, eom: bool, nh: int | None = None
    ) -> OutPacket:
        self._pkt_seq += 1
        token = (op.id, msg.msg_id, self._pkt_seq)
        return OutPacket(op.dest.fa, op.mode, nh or NextHeader.STANDARD, hdr, payload, som, eom, token, op.dest.job_id)

    def _msg_for(self, token: Any) -> _Msg | None:
        if not isinstance(token, tuple) or len(token) != 3:
            return None
        msg = self._msgs.get(token[1])
        if msg is None or msg.op.id != token[0] or token not in msg.outstanding:
            return None
        return msg

    def _apply_response(self, msg: _Msg, r: Response, token: Any) -> None:
        op = msg.op
        rc = r.return_code
        if rc not in (ReturnCode.NULL, ReturnCode.OK):
            self._msg_error(msg, error_for(rc, f"{op.kind} response", generation=r.ri_generation))
            return
        if r.opcode == ResponseOpcode.DEFAULT_RESPONSE and rc == ReturnCode.NULL:
            return
        if r.next_hdr in (NextHeader.RESPONSE_DATA, NextHeader.SMALL_RESPONSE_DATA):
            if op.kind == "read":
                if not self._place_read(msg, r):
                    self._msg_error(msg, OpViolation("read response outside the request"))
                return
            if op.kind == "atomic" and op.fetch:
                from uet.ses import atomics  # the AMO code (enums, codecs) only where atomics are used

                vals = atomics.decode_values(op.atomic_type, r.data)
                op.result = vals[0] if len(vals) == 1 else tuple(vals)
                op.modified_length = len(r.data)
            return
        if op.kind == "read":
            # data follows in the return direction
            if r.modified_length != msg.length and r.modified_length:
                self._msg_error(msg, OpViolation("truncated read"))
            return
        if (
            op.kind == "deferrable"
            and r.list == 1
            and r.modified_length == 0
            and op.length > 0
            and rc == ReturnCode.OK
            and not msg.deferred
        ):
            msg.deferred = True
            self.counters["deferred"] += 1
            self._stop(msg, SesOpcode(op.opcode))
            return
        if rc == ReturnCode.OK:
            op.modified_length = r.modified_length

    def _place_read(self, msg: _Msg, r: Response) -> bool:
        data = r.data
        if r.modified_length and r.modified_length != msg.length:
            return False
        if r.message_offset + len(data) > msg.length:
            return False
        base = msg.data_off + r.message_offset
        assert msg.op.into is not None
        msg.op.into[base : base + len(data)] = data
        msg.got_data += len(data)
        return True

    def _msg_error(self, msg: _Msg, err: SesError) -> None:
        if msg.error is None:
            msg.error = err
            self._stop(msg, SesOpcode.MSG_ERROR)

    def _stop(self, msg: _Msg, opcode: int) -> None:
        """Stop sending a message: drop unsent packets; if some were sent, end the message at the
        target with an EOM packet (MSG_ERROR, or the DEFERRABLE truncation packet) at the next
        offset (§6.4, §6.7)."""
        if msg.stopped:
            return
        msg.stopped = True
        if not msg.pending:
            return
        sent_any = bool(msg.outstanding) or msg.next_offset > 0
        msg.pending.clear()
        if msg in self._ready:
            self._ready.remove(msg)
        op = msg.op
        if not sent_any or op.kind in ("read", "atomic", "rtr"):
            return
        f = self._fields(op, msg)
        hdr = build_request(
            opcode,
            flags=(SesFlag.REL if op.dest.relative else 0) | SesFlag.EOM,
            buffer_offset=op.offset if op.kind == "write" else 0,
            match_bits=op.key if op.kind == "write" else op.tag,
            payload_length=0,
            message_offset=msg.next_offset,
            request_length=op.length,
            src_token=op.my_token,
            dst_token=op.target_token,
            ext=op.ext if opcode != SesOpcode.MSG_ERROR else b"",
            **f,
        )
        msg.pending.append(self._pkt(op, msg, hdr, b"", False, True))
        self._ready.append(msg)
        if opcode == SesOpcode.MSG_ERROR:
            self.counters["msg_errors_sent"] += 1

    def _check_msg(self, msg: _Msg, now: int) -> None:
        if msg.pending or msg.outstanding:
            return
        if msg.error is None and not msg.deferred and msg.op.kind == "read" and msg.got_data < msg.length:
            return
        del self._msgs[msg.msg_id]
        op = msg.op
        op.msgs.pop(msg.msg_id, None)
        if op.state is OpState.DONE:
            return
        err = msg.error
        if err is not None:
            rc = err.return_code
            if op.retries < self.config.max_message_retries and op.kind != "rtr":
                if rc == ReturnCode.BAD_GENERATION and err.generation is not None:
                    # nothing was executed: adopt the generation and resend at once (§6.4)
                    op.retries += 1
                    self.counters["retries"] += 1
                    op.dest = replace(op.dest, ri_generation=err.generation)
                    if op.kind == "read":
                        self._new_message(op, msg.data_off, msg.length)
                    else:
                        self._new_message(op)
                    return
                if rc in _RETRYABLE and op.kind in ("send", "deferrable", "rendezvous"):
                    op.retries += 1
                    self.counters["retries"] += 1
                    lo, hi = self.config.retry_backoff_ns
                    op.state = op_transition(op.state, OpState.BACKOFF)
                    op.timer = now + (self._rng.randint(lo, hi) << (op.retries - 1))
                    return
            self._finish(op, err)
            return
        if msg.deferred:
            if op.target_token:
                self._new_message(op)  # the RTR already arrived
            else:
                op.state = op_transition(op.state, OpState.WAIT_RTR)
                op.timer = now + self.config.rtr_timeout_ns
            return
        if op.kind == "read":
            op.pending_chunks -= 1
            if op.pending_chunks == 0:
                op.result = bytes(op.into[: op.length]) if op.on_done is None else op.into  # type: ignore[index]
                self._finish(op, None)
            return
        if op.kind == "rendezvous":
            op.eager_done = True
            self._rndv_check(op)
            return
        self._finish(op, None)

    def _rndv_read(self, op: _Op, length: int) -> None:
        op.remote_read += length
        self._rndv_check(op)

    def _rndv_check(self, op: _Op) -> None:
        if op.state is not OpState.DONE and op.eager_done and op.remote_read >= op.length - op.eager:
            self._finish(op, None)

    def _finish(self, op: _Op, err: SesError | None) -> None:
        if op.state is OpState.DONE:
            return
        op.state = op_transition(op.state, OpState.DONE)
        op.timer = None
        self._ops.pop(op.id, None)
        for m in list(op.msgs.values()):
            # forget the rest: later ACKs for its packets are ignored
            self._msgs.pop(m.msg_id, None)
            if m in self._ready:
                self._ready.remove(m)
        op.msgs.clear()
        if op.my_token:
            self._tokens.pop(op.my_token, None)
        if op.region is not None and op.region.registered:
            self.memory.deregister(op.region)
        if op.on_done is not None:
            op.on_done(op.result, err)
            return
        if err is None:
            ml = op.modified_length if op.modified_length is not None else op.length
            self._events.append(OpCompleted(op.id, op.kind, op.result, ml, op.context))
        else:
            self._events.append(OpFailed(op.id, op.kind, err, op.context))


def _pkt_end(pkt: OutPacket, msg: _Msg) -> int:
    return msg.next_offset + len(pkt.payload)


def _sync_ext(sync: tuple[int, int]) -> bytes:
    """The sync extension ``group ‖ count`` (wire-format.md §9.4); a count of 0 is refused here
    (the target would answer OP_VIOLATION)."""
    group, count = sync
    if not (0 <= group <= 0xFFFF and 1 <= count <= 0xFFFF):
        raise ValueError(f"sync group must fit 16 bits and count be 1..65535, not {sync!r}")
    return bytes(SYNC_EXT.encode((group, count)))
