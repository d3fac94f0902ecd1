"""The responder half of an RC queue pair: expected PSN, execution, ACK/NAK
(spec/rocev2-and-fabric.md §2.3, §3.1, §6.3, §6.5, §6.7).

Choices where the notes leave room (**Decision**):

* A virtual address in RETH/AtomicETH is the byte offset into the region its R_Key names
  (zero-based addressing, as UET's buffer offsets), so regions are any Python buffer.
* Atomics act on 64-bit little-endian integers in memory (the usual host byte order), values on
  the wire are big-endian as every header field.
* A duplicate SEND/WRITE packet is answered with the coalesced ACK (PSN = ePSN − 1) only when it
  asks for an ACK (AckReq): a go-back-N burst of duplicates then costs one ACK per AckReq packet,
  not one per packet, and the last packet of every message still gets one.
* A READ arriving while ``max_rd_atomic`` READs are still being answered is refused with NAK
  invalid request (§6.3 "too many reads"), so a peer cannot queue unbounded work.
* A SEND longer than the posted receive buffer (or than ``QpConfig.max_message`` for a receive
  posted without a length) is refused with NAK invalid request (and the QP
  goes to the error state), the receive completing with :class:`LocalLengthError`.
* READ state for duplicates is kept for the last ``max_rd_atomic`` READs, atomic results for the
  last ``max_rd_atomic`` atomics; an older duplicate is dropped (the requester's timeout recovers).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from uet.roce import errors as E
from uet.roce import events as ev
from uet.roce.view import QueuePairView
from uet.ses.errors import SesError
from uet.ses.memory import Access, MemoryRegion
from uet.wire.roce import (
    AETH,
    ATOMIC_ACK_ETH,
    SYNDROME_ACK,
    SYNDROME_RNR,
    NakCode,
    OpCode,
    psn_add,
    psn_diff,
)
from uet.wire.rocepkt import RocePacket

_O = OpCode
_SEND_OPS = frozenset(range(_O.SEND_FIRST, _O.SEND_ONLY_WITH_IMMEDIATE + 1)) | {
    _O.SEND_LAST_WITH_INVALIDATE,
    _O.SEND_ONLY_WITH_INVALIDATE,
}
_WRITE_OPS = frozenset(range(_O.RDMA_WRITE_FIRST, _O.RDMA_WRITE_ONLY_WITH_IMMEDIATE + 1))
_FIRST = {_O.SEND_FIRST, _O.RDMA_WRITE_FIRST}
_MIDDLE = {_O.SEND_MIDDLE, _O.RDMA_WRITE_MIDDLE}
_LAST = {
    _O.SEND_LAST,
    _O.SEND_LAST_WITH_IMMEDIATE,
    _O.SEND_LAST_WITH_INVALIDATE,
    _O.RDMA_WRITE_LAST,
    _O.RDMA_WRITE_LAST_WITH_IMMEDIATE,
}
_ONLY = {
    _O.SEND_ONLY,
    _O.SEND_ONLY_WITH_IMMEDIATE,
    _O.SEND_ONLY_WITH_INVALIDATE,
    _O.RDMA_WRITE_ONLY,
    _O.RDMA_WRITE_ONLY_WITH_IMMEDIATE,
}
_WITH_IMM_RECV = {_O.RDMA_WRITE_LAST_WITH_IMMEDIATE, _O.RDMA_WRITE_ONLY_WITH_IMMEDIATE}


class _Refuse(Exception):
    """Internal: answer the packet with this NAK syndrome and move the QP to ERR."""

    def __init__(self, syndrome: int, reason: str) -> None:
        super().__init__(reason)
        self.syndrome = syndrome
        self.reason = reason


@dataclass(eq=False)
class _ReadJob:
    """READ responses still to send: PSNs ``next_psn`` … ``last_psn`` from ``region`` at ``offset``."""

    first_psn: int
    next_psn: int
    last_psn: int
    region: MemoryRegion
    offset: int  # of next_psn's data
    remaining: int
    started: bool = False  # the (sub-)range's FIRST/ONLY response has left


class Responder:
    """Receive side of one QP (§6.3)."""

    def __init__(self, qp: QueuePairView, epsn: int) -> None:
        self.qp = qp
        self.epsn = epsn
        self.msn = 0
        self.nak_sent = False
        self.recv_queue: deque[tuple[int, int | None]] = deque()  # (handle, max length)
        # message in progress
        self._kind: str | None = None  # "send" / "write"
        self._recv: tuple[int, int | None] | None = None
        self._buf = bytearray()
        self._region: MemoryRegion | None = None
        self._offset = 0
        self._left = 0
        self._written = 0
        n = qp.config.max_rd_atomic
        self._reads: deque[tuple[int, int]] = deque(maxlen=n)  # (first_psn, npsn)
        self._atomics: deque[tuple[int, int]] = deque(maxlen=n)  # (psn, original value)
        #: the responder's output in PSN order: READ response jobs, and the ACKs/NAKs created while
        #: responses were still queued (an ACK of a later PSN must not overtake them, §6.5)
        self.jobs: deque[_ReadJob | bytes] = deque()

    # -- entry ---------------------------------------------------------------------------------

    def on_request(self, pkt: RocePacket, now: int) -> None:
        b = pkt.bth
        p, op = b.psn, b.opcode
        c = self.qp.stats
        d = psn_diff(p, self.epsn)
        if d > 0:
            c["sequence_errors"] += 1
            if not self.nak_sent:
                self.nak_sent = True
                self._nak(NakCode.PSN_SEQUENCE_ERROR, self.epsn)
            return
        if d < 0:
            c["duplicate_requests"] += 1
            self._duplicate(pkt)
            return
        self.nak_sent = False
        try:
            self._execute(pkt, now)
        except _Refuse as r:
            c["requests_refused"] += 1
            self._nak(r.syndrome, p)
            self.qp.to_error(f"responder refused PSN {p} ({OpCode(op).name}): {r.reason}")

    # -- duplicates ----------------------------------------------------------------------------

    def _duplicate(self, pkt: RocePacket) -> None:
        b = pkt.bth
        p = b.psn
        if b.opcode == _O.RDMA_READ_REQUEST:
            for first, n in self._reads:
                if 0 <= psn_diff(p, first) < n:
                    reth = pkt.reth
                    assert reth is not None  # parse_roce: the opcode's headers are all present
                    try:
                        region = self._check(reth.rkey, Access.REMOTE_READ, reth.va, reth.dma_len)
                    except _Refuse:
                        return
                    pmtu = self.qp.config.pmtu
                    length = min(reth.dma_len, (n - psn_diff(p, first)) * pmtu)
                    last = psn_add(p, max(1, -(-length // pmtu)) - 1)
                    self.jobs = deque(j for j in self.jobs if isinstance(j, bytes) or j.first_psn != first)
                    self.jobs.append(_ReadJob(first, p, last, region, reth.va, length))
                    self.qp.stats["read_replays"] += 1
                    return
            return
        if b.opcode in (_O.FETCH_ADD, _O.COMPARE_SWAP):
            for psn, orig in self._atomics:
                if psn == p:
                    self._atomic_ack(p, orig)
                    return
            return
        if b.ack_req:
            self._ack(psn_add(self.epsn, -1))

    # -- execution -----------------------------------------------------------------------------

    def _execute(self, pkt: RocePacket, now: int) -> None:
        b = pkt.bth
        op, p = b.opcode, b.psn
        pmtu = self.qp.config.pmtu
        n = len(pkt.payload)
        if self._kind is not None:
            ok = op in (_MIDDLE | _LAST) and (op in _SEND_OPS) == (self._kind == "send")
            if not ok:
                raise _Refuse(NakCode.INVALID_REQUEST, f"{self._kind} message in progress")
        elif op in _MIDDLE or op in _LAST:
            raise _Refuse(NakCode.INVALID_REQUEST, "MIDDLE/LAST without FIRST")
        if op in _FIRST or op in _MIDDLE:
            if n != pmtu:
                raise _Refuse(NakCode.INVALID_REQUEST, f"{n}-byte payload, PMTU {pmtu} required")
        elif op in _LAST and not 1 <= n <= pmtu:
            raise _Refuse(NakCode.INVALID_REQUEST, f"{n}-byte LAST payload")
        elif op in _ONLY and n > pmtu:
            raise _Refuse(NakCode.INVALID_REQUEST, f"{n}-byte ONLY payload")

        if op in _SEND_OPS:
            if op in _FIRST or op in _ONLY:
                if not self.recv_queue:
                    self._rnr(p)
                    return
                self._recv = self.recv_queue.popleft()
                self._buf = bytearray()
                self._kind = "send"
            assert self._recv is not None
            limit = self._recv[1]
            if limit is None:
                limit = self.qp.config.max_message
            if limit is not None and len(self._buf) + n > limit:
                handle = self._recv[0]
                self._recv, self._kind = None, None
                self.qp.complete(ev.OpFailed(handle, E.LocalLengthError(f"message longer than {limit} bytes")))
                raise _Refuse(NakCode.INVALID_REQUEST, "receive buffer too small")
            self._buf += pkt.payload
            self.qp.stats["payload_bytes_received"] += n  # progress, as packets arrive
            if op in _LAST or op in _ONLY:
                imm = pkt.immdt.imm if pkt.immdt is not None else None
                handle = self._recv[0]
                self._recv, self._kind = None, None
                self.msn = (self.msn + 1) & 0xFFFFFF
                self.qp.complete(ev.MessageReceived(handle, bytes(self._buf), imm))
                self.qp.stats["messages_received"] += 1
        elif op in _WRITE_OPS:
            if op in _WITH_IMM_RECV and not self.recv_queue:
                self._rnr(p)  # before any state changes: the retry repeats this very packet
                return
            if op in _FIRST or op in _ONLY:
                reth = pkt.reth
                assert reth is not None  # parse_roce: the opcode's headers are all present
                self._region = self._check(reth.rkey, Access.REMOTE_WRITE, reth.va, reth.dma_len)
                self._offset, self._left, self._written = reth.va, reth.dma_len, 0
                self._kind = "write"
            if n > self._left or ((op in _LAST or op in _ONLY) and n != self._left):
                self._kind = None
                raise _Refuse(NakCode.INVALID_REQUEST, f"payload does not match the DMA length ({self._left} left)")
            assert self._region is not None
            self._region.view[self._offset : self._offset + n] = pkt.payload
            self._offset += n
            self._left -= n
            self._written += n
            if op in _LAST or op in _ONLY:
                self._kind = None
                self.msn = (self.msn + 1) & 0xFFFFFF
                if op in _WITH_IMM_RECV:
                    handle, _ = self.recv_queue.popleft()
                    imm = pkt.immdt
                    assert imm is not None  # parse_roce: the opcode's headers are all present
                    self.qp.complete(ev.MessageReceived(handle, b"", imm.imm, self._written))
        elif op == _O.RDMA_READ_REQUEST:
            if self.reads_queued() >= self.qp.config.max_rd_atomic:
                raise _Refuse(NakCode.INVALID_REQUEST, "too many READs outstanding")
            reth = pkt.reth
            assert reth is not None  # parse_roce: the opcode's headers are all present
            region = self._check(reth.rkey, Access.REMOTE_READ, reth.va, reth.dma_len)
            npsn = max(1, -(-reth.dma_len // pmtu))
            self._reads.append((p, npsn))
            last = psn_add(p, npsn - 1)
            self.jobs.append(_ReadJob(p, p, last, region, reth.va, reth.dma_len))
            self.epsn = psn_add(p, npsn)
            self.msn = (self.msn + 1) & 0xFFFFFF
            return
        elif op in (_O.FETCH_ADD, _O.COMPARE_SWAP):
            a = pkt.atomic_eth
            assert a is not None  # parse_roce: the opcode's headers are all present
            if a.va % 8:
                raise _Refuse(NakCode.INVALID_REQUEST, f"atomic address {a.va:#x} not 8-byte aligned")
            region = self._check(a.rkey, Access.REMOTE_ATOMIC, a.va, 8)
            view = region.view[a.va : a.va + 8]
            orig = int.from_bytes(view, "little")
            if op == _O.FETCH_ADD:
                new = (orig + a.swap_add) & 0xFFFFFFFFFFFFFFFF
            else:
                new = a.swap_add if orig == a.compare else orig
            view[:] = new.to_bytes(8, "little")
            self._atomics.append((p, orig))
            self.epsn = psn_add(p, 1)
            self.msn = (self.msn + 1) & 0xFFFFFF
            self._atomic_ack(p, orig)
            return
        else:
            raise _Refuse(NakCode.INVALID_REQUEST, f"opcode {op:#04x} is not a request")
        self.epsn = psn_add(p, 1)
        if b.ack_req:
            self._ack(p)

    def _check(self, rkey: int, need: Access, va: int, length: int) -> MemoryRegion:
        """R_Key, access right and bounds (§6.3): remote access error otherwise."""
        try:
            region = self.qp.memory.lookup(rkey, 0)
            region.check(need, va, length)
        except SesError as e:
            raise _Refuse(NakCode.REMOTE_ACCESS_ERROR, str(e)) from None
        return region

    # -- responses -----------------------------------------------------------------------------

    def _ack(self, psn: int) -> None:
        self.qp.stats["acks_sent"] += 1
        self.qp.send_ctrl(_O.ACKNOWLEDGE, psn, (AETH.make(syndrome=SYNDROME_ACK, msn=self.msn),))

    def _nak(self, syndrome: int, psn: int) -> None:
        self.qp.stats["naks_sent"] += 1
        self.qp.send_ctrl(_O.ACKNOWLEDGE, psn, (AETH.make(syndrome=syndrome, msn=self.msn),))

    def _rnr(self, psn: int) -> None:
        self.qp.stats["rnr_naks_sent"] += 1
        code = self.qp.config.min_rnr_timer
        self.qp.send_ctrl(_O.ACKNOWLEDGE, psn, (AETH.make(syndrome=SYNDROME_RNR | code, msn=self.msn),))

    def _atomic_ack(self, psn: int, orig: int) -> None:
        self.qp.stats["atomic_acks_sent"] += 1
        exts = (AETH.make(syndrome=SYNDROME_ACK, msn=self.msn), ATOMIC_ACK_ETH.make(orig=orig))
        self.qp.send_ctrl(_O.ATOMIC_ACKNOWLEDGE, psn, exts)

    def reads_queued(self) -> int:
        return sum(1 for j in self.jobs if not isinstance(j, bytes))

    def take_control(self) -> list[bytes]:
        """Remove and return the queued ACKs/NAKs (the QP is entering ERR: they still go)."""
        out = [j for j in self.jobs if isinstance(j, bytes)]
        self.jobs.clear()
        return out

    def next_response(self) -> bytes | None:
        """The next READ response packet (paced like requests: the responder is the reaction
        point of READ traffic, §1.4)."""
        if not self.jobs:
            return None
        j = self.jobs[0]
        if isinstance(j, bytes):
            self.jobs.popleft()
            return j
        n = min(self.qp.config.pmtu, j.remaining)
        last = j.next_psn == j.last_psn
        if not j.started:
            op = _O.RDMA_READ_RESPONSE_ONLY if last else _O.RDMA_READ_RESPONSE_FIRST
        else:
            op = _O.RDMA_READ_RESPONSE_LAST if last else _O.RDMA_READ_RESPONSE_MIDDLE
        exts = () if op == _O.RDMA_READ_RESPONSE_MIDDLE else (AETH.make(syndrome=SYNDROME_ACK, msn=self.msn),)
        payload = bytes(j.region.view[j.offset : j.offset + n])
        data = self.qp.build(op, j.next_psn, exts, payload)
        j.started = True
        j.offset += n
        j.remaining -= n
        j.next_psn = psn_add(j.next_psn, 1)
        if last:
            self.jobs.popleft()
        self.qp.stats["read_response_packets"] += 1
        return data
