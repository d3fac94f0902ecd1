"""The requester half of an RC queue pair: work requests, packetization, go-back-N
(spec/rocev2-and-fabric.md §2.3, §6.1, §6.2, §6.4–§6.7).

PSNs are assigned when a work request is posted (an RDMA READ takes one PSN per expected response
packet, §6.1); a send cursor walks them and builds each packet when it leaves, so a rewind
(go-back-N) only moves the cursor back. ``una`` is the oldest PSN not yet acknowledged.

Choices where the notes leave room (**Decision**):

* A NAK, RNR NAK or read-response gap that asks for the rewind already under way (same PSN, no
  progress since) is ignored: one retry sequence at a time (§6.4 last line).
* Retransmitted bytes are the payload bytes of packets sent again below the highest PSN ever
  sent; the counter is what §9.1's "retransmitted bytes ÷ goodput" uses.
* Completions are delivered in posting order: a READ or atomic response implicitly acknowledges
  every earlier PSN (§6.5), so the work requests before it complete first.
* Besides the last packet of a message and every ``ack_req_every``-th packet (§6.5), AckReq is
  set on the first packet sent after an ACK timeout and on a packet that fills the window
  (IBTA lets the requester ask on any packet). Otherwise a requester that cannot send
  ``ack_req_every`` packets within one ACK timeout (a slow rate limiter, a slowed event loop)
  or within its window would rewind again and again without ever learning how far the
  responder got (a livelock that ends in "retry exceeded"); the first resent packet is a
  duplicate, whose ACK reports the responder's ePSN − 1 (§6.3).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from uet.roce import errors as E
from uet.roce import events as ev
from uet.roce.view import QueuePairView
from uet.wire.roce import (
    ATOMIC_ETH,
    IMMDT,
    RETH,
    NakCode,
    OpCode,
    psn_add,
    psn_diff,
    rnr_timer_ns,
)

SEND, WRITE, READ, FETCH_ADD, COMPARE_SWAP = "send", "write", "read", "fetch_add", "compare_swap"
_RESPONDED = (READ, FETCH_ADD, COMPARE_SWAP)

_FATAL: dict[int, type[E.RoceError]] = {
    NakCode.INVALID_REQUEST: E.RemoteInvalidRequest,
    NakCode.REMOTE_ACCESS_ERROR: E.RemoteAccessError,
    NakCode.REMOTE_OPERATIONAL_ERROR: E.RemoteOperationalError,
    NakCode.INVALID_RD_REQUEST: E.RemoteInvalidRequest,
}


@dataclass(eq=False)
class Wqe:
    """A posted send-side work request and its PSN range."""

    handle: int
    kind: str
    first_psn: int
    npsn: int
    data: bytes = b""
    imm: int | None = None
    solicited: bool = False
    va: int = 0
    rkey: int = 0
    length: int = 0
    swap_add: int = 0
    compare: int = 0
    resp_psn: int = 0  # READ: next response PSN expected
    read_buf: bytearray = field(default_factory=bytearray)

    @property
    def last_psn(self) -> int:
        return psn_add(self.first_psn, self.npsn - 1)


class Requester:
    """Send queue state of one QP (§6.2)."""

    def __init__(self, qp: QueuePairView, start_psn: int) -> None:
        self.qp = qp
        self.sq_psn = start_psn  # next PSN to assign
        self.una = start_psn  # oldest unacknowledged
        self.next_psn = start_psn  # send cursor
        self.high_psn = start_psn  # one past the highest PSN ever sent
        self.wqes: deque[Wqe] = deque()
        self.retries_left = qp.config.retry_cnt
        self.rnr_left = qp.config.rnr_retry
        self.rto_deadline: int | None = None
        self.rnr_deadline: int | None = None
        self._since_ackreq = 0
        self._ackreq_next = False  # the next packet asks for an ACK (set by a timeout)
        self._rewound_to: int | None = None
        self._retry_psn: int | None = None

    # -- posting -----------------------------------------------------------------------------

    def post(self, wqe: Wqe) -> None:
        wqe.first_psn = wqe.resp_psn = self.sq_psn
        self.sq_psn = psn_add(self.sq_psn, wqe.npsn)
        self.wqes.append(wqe)

    def outstanding(self) -> int:
        """PSNs assigned and not yet acknowledged."""
        return psn_diff(self.sq_psn, self.una)

    # -- sending -----------------------------------------------------------------------------

    def _find(self, psn: int) -> Wqe | None:
        for w in self.wqes:
            if psn_diff(psn, w.first_psn) >= 0 and psn_diff(psn, w.last_psn) <= 0:
                return w
        return None

    def _rd_outstanding(self) -> int:
        n = 0
        for w in self.wqes:
            if psn_diff(w.first_psn, self.next_psn) >= 0:
                break
            n += w.kind in _RESPONDED
        return n

    def can_send(self, now: int) -> bool:
        if self.next_psn == self.sq_psn:
            return False
        if self.rnr_deadline is not None and now < self.rnr_deadline:
            return False
        return psn_diff(self.next_psn, self.una) < self.qp.config.window

    def next_packet(self, now: int) -> bytes | None:
        """Build the packet at the send cursor and advance it, or None when nothing may leave."""
        if not self.can_send(now):
            return None
        self.rnr_deadline = None
        psn = self.next_psn
        w = self._find(psn)
        assert w is not None, "cursor outside every work request"
        if w.kind in _RESPONDED and psn == w.resp_psn and self._rd_outstanding() >= self.qp.config.max_rd_atomic:
            return None
        cfg = self.qp.config
        qp = self.qp
        if w.kind in (SEND, WRITE):
            i = psn_diff(psn, w.first_psn)
            payload = w.data[i * cfg.pmtu : (i + 1) * cfg.pmtu]
            first, last = i == 0, i == w.npsn - 1
            op, exts = _opcode(w, first, last)
            self._since_ackreq += 1
            ack_req = (
                last
                or self._since_ackreq >= cfg.ack_req_every
                or self._ackreq_next
                or psn_diff(psn, self.una) + 1 >= cfg.window
            )
            if ack_req:
                self._since_ackreq = 0
            data = qp.build(op, psn, exts, payload, ack_req=ack_req, se=w.solicited and last)
            span = 1
        elif w.kind == READ:
            done = psn_diff(psn, w.first_psn)
            reth = RETH.make(va=w.va + done * cfg.pmtu, rkey=w.rkey, dma_len=w.length - done * cfg.pmtu)
            data = qp.build(OpCode.RDMA_READ_REQUEST, psn, (reth,), b"", ack_req=True)
            payload = b""
            span = w.npsn - done
        else:
            op = OpCode.FETCH_ADD if w.kind == FETCH_ADD else OpCode.COMPARE_SWAP
            aeth = ATOMIC_ETH.make(va=w.va, rkey=w.rkey, swap_add=w.swap_add, compare=w.compare)
            data = qp.build(op, psn, (aeth,), b"", ack_req=True)
            payload = b""
            span = 1
        self._ackreq_next = False  # READ and atomic requests always ask
        self.next_psn = psn_add(psn, span)
        c = qp.stats
        if psn_diff(psn, self.high_psn) < 0:
            c["retransmitted_packets"] += 1
            c["retransmitted_bytes"] += len(payload)
        if psn_diff(self.next_psn, self.high_psn) > 0:
            self.high_psn = self.next_psn
        c["request_packets_sent"] += 1
        if self.rto_deadline is None and cfg.rto_ns is not None:
            self.rto_deadline = now + cfg.rto_ns
        return data

    # -- acknowledgements --------------------------------------------------------------------

    def _progress(self, now: int) -> None:
        cfg = self.qp.config
        self.retries_left = cfg.retry_cnt
        self.rnr_left = cfg.rnr_retry
        self._rewound_to = None
        sent_unacked = psn_diff(self.high_psn, self.una) > 0
        self.rto_deadline = now + cfg.rto_ns if sent_unacked and cfg.rto_ns is not None else None

    def _ack_through(self, q: int, now: int) -> None:
        """Everything up to and including PSN ``q`` is acknowledged (cumulative, §6.4)."""
        if psn_diff(q, self.una) < 0 or psn_diff(q, self.high_psn) >= 0:
            return  # old, or beyond anything sent
        moved = lost = False
        while self.wqes:
            w = self.wqes[0]
            if psn_diff(w.first_psn, q) > 0:
                break
            if w.kind in _RESPONDED:
                # acknowledged past a READ/atomic whose response never came: it was lost (§6.4)
                self.una = w.resp_psn
                lost = psn_diff(w.resp_psn, q) <= 0
                break
            if psn_diff(w.last_psn, q) > 0:
                self.una = psn_add(q, 1)  # part of a multi-packet message
                moved = True
                break
            self.wqes.popleft()
            self.una = psn_add(w.last_psn, 1)
            moved = True
            self.qp.complete(ev.SendCompleted(w.handle) if w.kind == SEND else ev.WriteCompleted(w.handle))
        # the cursor never stays behind ``una``, even when the rewind below is one already under
        # way and so ignored: the work requests it pointed into are complete and gone
        self._clamp()
        if moved:
            self._progress(now)
        if lost:
            self._rewind(self.una, now, count=True)

    def _clamp(self) -> None:
        """Keep the send cursor at or after ``una`` and, inside a READ, at its next response PSN."""
        if psn_diff(self.next_psn, self.una) < 0:
            self.next_psn = self.una
        w = self._find(self.next_psn)
        if w is not None and w.kind == READ and psn_diff(self.next_psn, w.resp_psn) < 0:
            self.next_psn = w.resp_psn

    def _rewind(self, psn: int, now: int, *, count: bool, force: bool = False) -> None:
        """Go-back-N: move the send cursor back to ``psn`` (§6.4).

        One retry sequence at a time: while the packets of a rewind are still being sent again,
        a NAK or lost-response signal at or after its start is already covered and ignored; one
        before it extends the sequence back without spending another retry. ``force`` (timeout,
        RNR) always rewinds."""
        if not force:
            if self._rewound_to == psn:
                return
            if self._retry_psn is not None and psn_diff(self.next_psn, self.high_psn) < 0:
                if psn_diff(psn, self._retry_psn) >= 0:
                    return
                count = False
        if count:
            self.retries_left -= 1
            if self.retries_left < 0:
                self.qp.stats["retry_exceeded"] += 1
                self.qp.fail_all(E.RetryExceeded(f"retry count {self.qp.config.retry_cnt} exhausted at PSN {psn}"))
                return
        self._rewound_to = self._retry_psn = psn
        self.next_psn = psn
        self._clamp()
        self.qp.stats["rewinds"] += 1
        if self.qp.log is not None:
            self.qp.log({"t": now, "ev": "rewind", "qpn": self.qp.qpn, "psn": self.next_psn, "counted": count})

    def on_ack(self, syndrome: int, psn: int, now: int) -> None:
        """An ACKNOWLEDGE: ACK, RNR NAK or NAK (§3.1, §6.4)."""
        kind = syndrome >> 5 & 3
        c = self.qp.stats
        if kind == 0:
            c["acks_received"] += 1
            self._ack_through(psn, now)
            return
        if psn_diff(psn, self.una) < 0 or psn_diff(psn, self.high_psn) >= 0:
            c["stale_naks"] += 1
            return
        self._ack_through(psn_add(psn, -1), now)
        if kind == 1:
            c["rnr_naks_received"] += 1
            if self.qp.config.rnr_retry != 7:
                self.rnr_left -= 1
                if self.rnr_left < 0:
                    self.qp.fail_all(E.RnrRetryExceeded(f"RNR retry count exhausted at PSN {psn}"))
                    return
            self.rnr_deadline = now + rnr_timer_ns(syndrome & 0x1F)
            self.rto_deadline = None  # a response came; the ACK timer restarts when sending resumes
            self._rewind(psn, now, count=False, force=True)
            return
        c["naks_received"] += 1
        if syndrome == NakCode.PSN_SEQUENCE_ERROR:
            self._rewind(psn, now, count=True)
            if self.qp.config.rto_ns is not None:
                self.rto_deadline = now + self.qp.config.rto_ns  # a response: the ACK timer restarts
            return
        err = _FATAL.get(syndrome, E.RemoteOperationalError)
        w = self._find(psn)
        if w is not None:
            self.wqes.remove(w)
            self.qp.complete(ev.OpFailed(w.handle, err(f"NAK {syndrome:#04x} for PSN {psn}")))
        self.qp.fail_all(E.Flushed(f"QP in error after NAK {syndrome:#04x}"))

    def on_read_response(self, op: int, psn: int, payload: bytes, has_aeth: bool, now: int) -> None:
        """An RDMA READ response packet (§6.7): accepted strictly in order, and only for the
        oldest outstanding request (a response implicitly acknowledges every earlier PSN)."""
        c = self.qp.stats
        w = self._find(psn)
        if w is None or w.kind != READ:
            c["stale_responses"] += 1
            return
        d = psn_diff(psn, w.resp_psn)
        if d < 0:
            c["duplicate_responses"] += 1
            return
        self._ack_through(psn_add(w.first_psn, -1), now)
        if not self.wqes or self.wqes[0] is not w:
            c["response_gaps"] += 1  # an earlier READ/atomic is still unanswered (rewound above)
            return
        if d > 0:
            c["response_gaps"] += 1
            self._rewind(w.resp_psn, now, count=True)
            return
        pmtu = self.qp.config.pmtu
        last = psn == w.last_psn
        want = w.length - psn_diff(psn, w.first_psn) * pmtu if last else pmtu
        if len(payload) != want:
            c["bad_responses"] += 1
            return
        w.read_buf += payload
        w.resp_psn = self.una = psn_add(psn, 1)
        if last:
            self.wqes.popleft()
            self.qp.complete(ev.ReadCompleted(w.handle, bytes(w.read_buf)))
        self._clamp()
        self._progress(now)

    def on_atomic_ack(self, psn: int, orig: int, now: int) -> None:
        """An ATOMIC_ACKNOWLEDGE: completes the atomic at ``psn`` if it is the oldest request."""
        w = self._find(psn)
        if w is None or w.kind not in (FETCH_ADD, COMPARE_SWAP) or w.resp_psn != psn:
            self.qp.stats["stale_responses"] += 1
            return
        self._ack_through(psn_add(psn, -1), now)
        if not self.wqes or self.wqes[0] is not w:
            self.qp.stats["response_gaps"] += 1
            return
        self.wqes.popleft()
        self.una = psn_add(psn, 1)
        self.qp.complete(ev.AtomicCompleted(w.handle, orig))
        self._clamp()
        self._progress(now)

    # -- timers ------------------------------------------------------------------------------

    def get_timer(self) -> int | None:
        ds = [d for d in (self.rto_deadline, self.rnr_deadline) if d is not None]
        return min(ds) if ds else None

    def handle_timer(self, now: int) -> None:
        if self.rnr_deadline is not None and now >= self.rnr_deadline:
            self.rnr_deadline = None  # sending may resume (not left as a past deadline in get_timer)
        if self.rto_deadline is not None and now >= self.rto_deadline:
            self.rto_deadline = None
            if psn_diff(self.high_psn, self.una) > 0:
                self.qp.stats["timeouts"] += 1
                self._rewind(self.una, now, count=True, force=True)
                self._ackreq_next = True
                if self.qp.config.rto_ns is not None and self.wqes:
                    self.rto_deadline = now + self.qp.config.rto_ns


def _opcode(w: Wqe, first: bool, last: bool) -> tuple[OpCode, tuple[Any, ...]]:
    """Opcode and extension headers of one SEND/WRITE packet (§2.2, §2.3)."""
    imm = (IMMDT.make(imm=w.imm),) if w.imm is not None and last else ()
    if w.kind == SEND:
        if first and last:
            return (OpCode.SEND_ONLY_WITH_IMMEDIATE if imm else OpCode.SEND_ONLY), imm
        if first:
            return OpCode.SEND_FIRST, ()
        if last:
            return (OpCode.SEND_LAST_WITH_IMMEDIATE if imm else OpCode.SEND_LAST), imm
        return OpCode.SEND_MIDDLE, ()
    reth = RETH.make(va=w.va, rkey=w.rkey, dma_len=len(w.data))
    if first and last:
        return (OpCode.RDMA_WRITE_ONLY_WITH_IMMEDIATE if imm else OpCode.RDMA_WRITE_ONLY), (reth, *imm)
    if first:
        return OpCode.RDMA_WRITE_FIRST, (reth,)
    if last:
        return (OpCode.RDMA_WRITE_LAST_WITH_IMMEDIATE if imm else OpCode.RDMA_WRITE_LAST), imm
    return OpCode.RDMA_WRITE_MIDDLE, ()
