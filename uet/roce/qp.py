"""An RC queue pair as one sans-I/O object (spec/rocev2-and-fabric.md §1–§7).

The surface is the FEP core's (aioquic-like): operations return integer handles;
:meth:`QueuePair.receive_datagram` takes a RoCE datagram (the UDP payload, BTH … ICRC) and the
time; :meth:`datagrams_to_send` returns :class:`~uet.roce.events.Transmit` records;
:meth:`get_timer` is the earliest deadline (ACK timeout, RNR wait, DCQCN timers, the rate
limiter's next departure); :meth:`handle_timer` runs due timers; :meth:`next_event` pops a
completion. Time is an integer number of nanoseconds, always a parameter.

The QP composes a :class:`~uet.roce.requester.Requester` (send queue, go-back-N) and a
:class:`~uet.roce.responder.Responder` (expected PSN, execution), a DCQCN reaction point pacing
requests and READ responses, and a notification point answering CE marks with CNPs (§5). ACKs,
NAKs, atomic acknowledgements and CNPs leave at once, unpaced; CNPs on DSCP 48, Not-ECT.

Typical use (both QPs in memory)::

    a = QueuePair("10.0.0.1", qpn=0x11, seed=1)
    b = QueuePair("10.0.0.2", qpn=0x22, seed=2)
    a.connect("10.0.0.2", 0x22, b.start_psn)
    b.connect("10.0.0.1", 0x11, a.start_psn)
    b.post_recv()
    h = a.post_send(b"hello")
    # shuttle a.datagrams_to_send(now) into b.receive_datagram(...) and back
"""

from __future__ import annotations

import random
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from uet.errors import DecodeError, UetError
from uet.roce import errors as E
from uet.roce import events as ev
from uet.roce.config import QpConfig
from uet.roce.dcqcn import NotificationPoint, ReactionPoint
from uet.roce.requester import COMPARE_SWAP, FETCH_ADD, READ, SEND, WRITE, Requester, Wqe
from uet.roce.responder import Responder
from uet.roce.states import QpState, QpStateError, transition
from uet.ses.memory import Access, MemoryRegion, MemoryTable
from uet.wire import net
from uet.wire.net import Ecn
from uet.wire.roce import BTH, PSN_MASK, QPN_MASK, OpCode, entropy_port
from uet.wire.rocepkt import IcrcContext, encode_roce, parse_roce

__all__ = ["QueuePair"]

_O = OpCode
_RESPONSES = {
    _O.RDMA_READ_RESPONSE_FIRST,
    _O.RDMA_READ_RESPONSE_MIDDLE,
    _O.RDMA_READ_RESPONSE_LAST,
    _O.RDMA_READ_RESPONSE_ONLY,
}


def icrc_contexts(
    addr: bytes, raddr: bytes, entropy: int, link_ports: tuple[int, int] | None
) -> tuple[IcrcContext, IcrcContext]:
    """The (send, receive) ICRC contexts of a connection between ``addr`` and ``raddr``: over the
    QPN fold ``entropy`` as UDP source port, or over ``link_ports`` = ``(this end's UDP port, the
    peer's)`` when the link sends from its own bound port (:meth:`QueuePair.connect`)."""
    if link_ports is None:
        return IcrcContext(addr, raddr, entropy), IcrcContext(raddr, addr, entropy)
    mine, theirs = link_ports
    return IcrcContext(addr, raddr, mine, theirs), IcrcContext(raddr, addr, theirs, mine)


class QueuePair:
    """One RC queue pair; see the module docstring."""

    def __init__(
        self,
        address: str,
        qpn: int,
        *,
        config: QpConfig | None = None,
        memory: MemoryTable | None = None,
        seed: int | None = None,
        start_psn: int | None = None,
        log: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if not 0 < qpn <= QPN_MASK:
            raise ValueError("QPN must be a non-zero 24-bit number")
        self.config = config or QpConfig()
        self.address = address
        self._addr = net.ip_bytes(address)
        self.qpn = qpn
        self.rng = random.Random(seed)
        self.memory = memory if memory is not None else MemoryTable(rng=self.rng)
        self.start_psn = self.rng.getrandbits(24) if start_psn is None else start_psn & PSN_MASK
        self.state = transition(QpState.RESET, QpState.INIT)
        #: why the QP entered ERR (the error its send-side work requests failed with), else None
        self.error: UetError | None = None
        self.remote: str | None = None
        self.remote_qpn = 0
        self._raddr = b""
        self.entropy = 0
        self.stats: Counter[str] = Counter()
        self._events: deque[ev.QpEvent] = deque()
        self._ctrl: deque[ev.Transmit] = deque()
        self._handles = 0
        self._now = 0  # the latest time a caller handed in (for log records)
        self._paced = False  # data waits for the rate limiter (not for the window or an ACK)
        self.requester = Requester(self, self.start_psn)
        self.responder = Responder(self, 0)
        d = self.config.dcqcn
        self.rp = ReactionPoint(d) if d is not None else None
        self.np = NotificationPoint(d.cnp_holdoff_ns) if d is not None else None
        #: optional JSON-lines sink (:class:`uet.eventlog.EventLog` or any callable taking a dict):
        #: records ``tx``, ``rx``, ``rewind``, ``rate`` and ``qp_error``, ``t`` in ns
        self.log = log
        if log is not None and self.rp is not None:
            self.rp.on_rate = self._log_rate

    # -- connection ----------------------------------------------------------------------------

    def connect(
        self,
        remote: str,
        remote_qpn: int,
        remote_start_psn: int,
        *,
        entropy: int | None = None,
        link_ports: tuple[int, int] | None = None,
    ) -> None:
        """INIT → RTR → RTS: the peer's address, QPN and start PSN, exchanged out of band.

        ``entropy`` overrides the UDP source port (§1.2 Decision: the Linux fold of the two QPNs,
        the same at both ends); both ends must use the same value, since it is covered by the
        ICRC (see :mod:`uet.wire.rocepkt`). ``link_ports`` = ``(this end's UDP port, the peer's)``
        when the link sends every datagram from its own bound port instead (the direct link): the
        ICRC then covers those ports, as they leave, in both directions."""
        self.state = transition(self.state, QpState.RTR)
        self.remote = remote
        self._raddr = net.ip_bytes(remote)
        if len(self._raddr) != len(self._addr):
            raise ValueError("local and remote addresses of different families")
        self.remote_qpn = remote_qpn & QPN_MASK
        self.responder.epsn = remote_start_psn & PSN_MASK
        self.entropy = entropy_port(self.qpn, self.remote_qpn) if entropy is None else entropy & 0xFFFF
        self._tx_icrc, self._rx_icrc = icrc_contexts(self._addr, self._raddr, self.entropy, link_ports)
        self.state = transition(self.state, QpState.RTS)

    def reset(self) -> None:
        """ERR → RESET → INIT with a fresh start PSN, ready to be connected again."""
        self.state = transition(self.state, QpState.RESET)
        self.error = None
        self.start_psn = self.rng.getrandbits(24)
        self.requester = Requester(self, self.start_psn)
        self.responder = Responder(self, 0)
        self._ctrl.clear()
        self.state = transition(self.state, QpState.INIT)

    # -- operations ----------------------------------------------------------------------------

    def register(self, buffer: Any, access: Access | int = Access.ALL) -> MemoryRegion:
        """Register ``buffer`` for remote access; the region's ``key`` (32 bits) is its R_Key."""
        while True:
            key = self.rng.getrandbits(32)
            if key and self.memory.get(key) is None:
                return self.memory.register(buffer, access, key=key)

    def _handle(self) -> int:
        self._handles += 1
        return self._handles

    def _post(self, wqe: Wqe) -> int:
        if self.state is not QpState.RTS:
            raise QpStateError(f"cannot post a send-side work request in state {self.state.name}")
        self.requester.post(wqe)
        return wqe.handle

    def _npkts(self, length: int) -> int:
        return max(1, -(-length // self.config.pmtu))

    def post_send(self, data: bytes, *, imm: int | None = None, solicited: bool = False) -> int:
        """SEND (with immediate if ``imm`` is given); completes with ``SendCompleted``."""
        data = bytes(data)
        n = self._npkts(len(data))
        return self._post(Wqe(self._handle(), SEND, 0, n, data=data, imm=_u32(imm), solicited=solicited))

    def post_write(self, data: bytes, va: int, rkey: int, *, imm: int | None = None) -> int:
        """RDMA WRITE of ``data`` at ``va`` in the peer's region ``rkey``; ``WriteCompleted``."""
        data = bytes(data)
        n = self._npkts(len(data))
        return self._post(Wqe(self._handle(), WRITE, 0, n, data=data, imm=_u32(imm), va=va, rkey=rkey))

    def post_read(self, length: int, va: int, rkey: int) -> int:
        """RDMA READ of ``length`` bytes at ``va``; ``ReadCompleted`` carries the data."""
        if not 0 <= length < 1 << 31:
            raise ValueError("READ length must fit 31 bits")
        return self._post(Wqe(self._handle(), READ, 0, self._npkts(length), va=va, rkey=rkey, length=length))

    def fetch_add(self, va: int, rkey: int, add: int) -> int:
        """Atomic 64-bit fetch-and-add; ``AtomicCompleted`` carries the original value."""
        return self._post(Wqe(self._handle(), FETCH_ADD, 0, 1, va=va, rkey=rkey, swap_add=add & (2**64 - 1)))

    def compare_swap(self, va: int, rkey: int, compare: int, swap: int) -> int:
        """Atomic 64-bit compare-and-swap; ``AtomicCompleted`` carries the original value."""
        m = 2**64 - 1
        return self._post(
            Wqe(self._handle(), COMPARE_SWAP, 0, 1, va=va, rkey=rkey, swap_add=swap & m, compare=compare & m)
        )

    def post_recv(self, max_length: int | None = None) -> int:
        """Post a receive for one incoming SEND (or WRITE with immediate); ``MessageReceived``."""
        if self.state is QpState.ERR:
            raise QpStateError("cannot post a receive in state ERR")
        h = self._handle()
        self.responder.recv_queue.append((h, max_length))
        return h

    # -- input ---------------------------------------------------------------------------------

    def receive_datagram(self, data: bytes, now: int, *, source: str | None = None, ecn: int = 0) -> None:
        """One RoCE datagram (UDP payload: BTH … ICRC) from ``source`` with IP ECN ``ecn``.

        Malformed, wrongly addressed or corrupted (ICRC) datagrams are counted and dropped."""
        self._now = now
        c = self.stats
        c["datagrams_received"] += 1
        if self.state is not QpState.RTS:
            c["dropped_not_ready"] += 1
            return
        if source is not None and source != self.remote:
            c["dropped_wrong_source"] += 1
            return
        if self.config.check_icrc and not self._rx_icrc.verify(data):
            c["icrc_errors"] += 1
            return
        try:
            pkt = parse_roce(data)
        except DecodeError:
            c["malformed"] += 1
            return
        b = pkt.bth
        if b.dest_qp != self.qpn:
            c["dropped_wrong_qp"] += 1
            return
        op = b.opcode
        if self.log is not None:
            self.log({"t": now, "ev": "rx", "qpn": self.qpn, "op": op, "psn": b.psn, "len": len(data), "ecn": ecn})
        if ecn == Ecn.CE and self.np is not None and op != _O.CNP and self.np.on_ce(now):
            self._send_cnp()
        if op == _O.CNP:
            c["cnps_received"] += 1
            if self.rp is not None:
                self.rp.on_cnp(now)
        elif op == _O.ACKNOWLEDGE:
            aeth = pkt.aeth
            assert aeth is not None  # parse_roce: the opcode's headers are all present
            self.requester.on_ack(aeth.syndrome, b.psn, now)
        elif op == _O.ATOMIC_ACKNOWLEDGE:
            ack = pkt.atomic_ack
            assert ack is not None  # parse_roce: the opcode's headers are all present
            self.requester.on_atomic_ack(b.psn, ack.orig, now)
        elif op in _RESPONSES:
            self.requester.on_read_response(op, b.psn, pkt.payload, pkt.aeth is not None, now)
        else:
            self.responder.on_request(pkt, now)

    # -- output --------------------------------------------------------------------------------

    def build(
        self,
        op: int,
        psn: int,
        exts: tuple[Any, ...] = (),
        payload: bytes = b"",
        *,
        ack_req: bool = False,
        se: bool = False,
    ) -> bytes:
        """A sealed datagram to the peer QP (BTH, extension headers, payload, pad, ICRC)."""
        bth = BTH.make(opcode=op, se=int(se), dest_qp=self.remote_qpn, ack_req=int(ack_req), psn=psn)
        return self._tx_icrc.seal(encode_roce(bth, exts, payload))

    def send_ctrl(self, op: int, psn: int, exts: tuple[Any, ...]) -> None:
        """Queue an ACK/NAK/atomic acknowledgement: it leaves at the next poll, unpaced, unless
        READ responses are still queued, which it must not overtake (it then follows them)."""
        data = self.build(op, psn, exts)
        if self.responder.jobs:
            self.responder.jobs.append(data)
            return
        self._ctrl.append(ev.Transmit(data, self.remote or "", self.entropy, self.config.dscp, self.config.ecn))

    def _send_cnp(self) -> None:
        bth = BTH.make(opcode=_O.CNP, becn=1, dest_qp=self.remote_qpn)
        data = self._tx_icrc.seal(encode_roce(bth))
        self._ctrl.append(ev.Transmit(data, self.remote or "", self.entropy, self.config.cnp_dscp, Ecn.NOT_ECT))
        self.stats["cnps_sent"] += 1

    def _has_data(self, now: int) -> bool:
        return bool(self.responder.jobs) or self.requester.can_send(now)

    def datagrams_to_send(self, now: int) -> list[ev.Transmit]:
        """Everything that may leave at ``now``: control packets, then requests and READ
        responses as the rate limiter allows (READ responses first)."""
        self._now = now
        out = list(self._ctrl)
        self._ctrl.clear()
        if self.state is not QpState.RTS:
            return out
        cfg = self.config
        rp = self.rp
        self._paced = False
        while True:
            if rp is not None and rp.next_send_time() > now:
                self._paced = self._has_data(now)
                break
            data = self.responder.next_response() or self.requester.next_packet(now)
            if data is None:
                break
            out.append(ev.Transmit(data, self.remote or "", self.entropy, cfg.dscp, cfg.ecn))
            if rp is not None:
                rp.on_sent(len(data) + cfg.wire_overhead, now)
        self.stats["datagrams_sent"] += len(out)
        if self.log is not None:
            for tx in out:
                d = tx.data
                psn = int.from_bytes(d[9:12], "big")
                self.log(
                    {"t": now, "ev": "tx", "qpn": self.qpn, "op": d[0], "psn": psn, "len": len(d), "dscp": tx.dscp}
                )
        return out

    def _log_rate(self, now: int, rp: ReactionPoint) -> None:
        if self.log is not None:
            a = rp.current_alpha(now)
            self.log({"t": now, "ev": "rate", "qpn": self.qpn, "rate": rp.rate, "target": rp.target, "alpha": a})

    def get_timer(self) -> int | None:
        """Earliest deadline: ACK timeout, RNR wait, DCQCN timers, next paced departure."""
        ds = []
        if self.state is QpState.RTS:
            t = self.requester.get_timer()
            if t is not None:
                ds.append(t)
            if self.rp is not None:
                t = self.rp.get_timer()
                if t is not None:
                    ds.append(t)
                if self._paced:
                    ds.append(self.rp.next_send_time())
        return min(ds) if ds else None

    def handle_timer(self, now: int) -> None:
        self._now = now
        if self.state is not QpState.RTS:
            return
        self.requester.handle_timer(now)
        if self.rp is not None:
            self.rp.handle_timer(now)

    def next_event(self) -> ev.QpEvent | None:
        return self._events.popleft() if self._events else None

    def counters(self) -> dict[str, int]:
        """Packet, byte and error counters (ACKs, NAKs by kind, timeouts, retransmissions, CNPs)."""
        return dict(self.stats)

    # -- shared by the requester and the responder ---------------------------------------------

    def complete(self, event: ev.QpEvent) -> None:
        self._events.append(event)

    def fail_all(self, error: UetError) -> None:
        """Complete every outstanding send-side work request with ``error`` and enter ERR."""
        for w in self.requester.wqes:
            self._events.append(ev.OpFailed(w.handle, error))
        self.requester.wqes.clear()
        self.error = self.error or error
        self.to_error(str(error))

    def to_error(self, reason: str) -> None:
        """Enter ERR (§6.3, §6.4): flush every work request, both queues."""
        if self.state is QpState.ERR:
            return
        self.state = transition(self.state, QpState.ERR)
        flushed = E.Flushed(reason)
        if self.error is None:
            self.error = flushed
        if self.log is not None:
            self.log({"t": self._now, "ev": "qp_error", "qpn": self.qpn, "reason": reason})
        for w in self.requester.wqes:
            self._events.append(ev.OpFailed(w.handle, flushed))
        self.requester.wqes.clear()
        for h, _ in self.responder.recv_queue:
            self._events.append(ev.OpFailed(h, flushed))
        self.responder.recv_queue.clear()
        for data in self.responder.take_control():
            self._ctrl.append(ev.Transmit(data, self.remote or "", self.entropy, self.config.dscp, self.config.ecn))
        self._events.append(ev.QpErrored(reason))


def _u32(v: int | None) -> int | None:
    if v is not None and not 0 <= v < 1 << 32:
        raise ValueError("immediate data is 32 bits")
    return v
