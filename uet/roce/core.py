"""A host's RoCEv2 NIC and verbs provider as one sans-I/O object, with the FEP core's surface
(:mod:`uet.fep`), so engines and adapters drive it the way they drive a :class:`~uet.fep.FepCore`.

:class:`RoceCore` keeps one RC :class:`~uet.roce.qp.QueuePair` per peer, multiplexes their
datagrams by destination QP number, and offers the FEP core's operations with the same events
(:class:`~uet.fep.SendCompleted`, :class:`~uet.fep.MessageReceived` with a
:class:`~uet.ses.message.Message`, :class:`~uet.fep.OpCompleted`, :class:`~uet.fep.OpFailed`,
:class:`~uet.ses.events.WriteCompleted`, :class:`~uet.fep.Closed`).

**Decisions** (RoCE has no tags, 64-bit header data or connection setup of its own):

* Connections: the QP numbers and start PSNs are exchanged out of band, as the RDMA connection
  manager does; :meth:`RoceCore.connect` does it between two cores of one process (simulator,
  tests), and a core given a shared ``directory`` (address → core) connects on first use. Cores
  in separate processes derive them instead (``cm``, :class:`~uet.roce.cm.StaticCm`): each end
  opens its QP on its first operation towards the peer or on the peer's first datagram.
* Messages carry a 24-byte provider header before the payload, as libfabric's RxM provider does
  over verbs: flags (tag present, header data present), the 64-bit tag, the 64-bit header data.
  Receives match by tag/ignore mask and source in software; unmatched messages wait on an
  unexpected list.
* Receive credits: each QP keeps ``recv_credits`` receives posted; one consumed is re-posted only
  while fewer than ``max_unexpected`` messages wait unmatched, so a receiver that stops consuming
  pushes back on its senders with RNR NAKs — RoCE's own flow control.
* RMA: the region's 32-bit R_Key is the key, the offset is the virtual address (responder
  Decision of :mod:`uet.roce.responder`). A WRITE with header data is an RDMA WRITE with
  immediate (32 bits: larger header data is refused); the target sees a ``WriteCompleted``.
* Atomics: RoCE has fetch-and-add and compare-and-swap on 64-bit integers only; ``SUM`` and
  ``CSWAP`` on ``INT64``/``UINT64`` map onto them, everything else fails with
  :class:`UnsupportedAtomic`.
* A connection whose QP entered ERR (retries exhausted, a fatal NAK) stays dead: an operation
  or a receive bound to that peer posted later is refused at once with
  :class:`~uet.fep.errors.DeliveryError` naming the QP's error — ``UNDELIVERABLE``, what the
  FEP core raises for an operation refused before any packet left — not ``CLOSED``, which
  the contract keeps for a closed endpoint. (The verbs would complete such a work request with a
  flush error; the contract's caller wants to know the peer cannot be reached.)
"""

from __future__ import annotations

import random
import struct
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from uet.fep.errors import DeliveryError, EndpointClosed
from uet.fep.events import Closed, Datagram, MessageReceived, OpCompleted, OpFailed, SendCompleted, Transmit
from uet.roce import events as qev
from uet.roce.cm import ConnectionCollision, StaticCm

# the settings derived from the link live with the config (a run that derives them needs no queue pair)
from uet.roce.config import (
    REFERENCE_RTT_NS,
    REFERENCE_TIMEOUT,
    QpConfig,
    config_at_rate,
    config_for_link,
    timeout_for_rtt,
)
from uet.roce.errors import RoceError
from uet.roce.qp import QueuePair, icrc_contexts
from uet.roce.states import QpState
from uet.ses.events import WriteCompleted
from uet.ses.matching import tag_matches
from uet.ses.memory import Access, MemoryRegion, MemoryTable
from uet.ses.message import Message
from uet.ses.sink import ReceiveSink, receive_view
from uet.wire import net
from uet.wire.roce import ROCE_UDP_PORT, entropy_port, psn_diff
from uet.wire.ses import AmoOp, AmoType, ReturnCode

__all__ = [
    "PROVIDER_HEADER",
    "REFERENCE_RTT_NS",
    "REFERENCE_TIMEOUT",
    "RoceCore",
    "UnsupportedAtomic",
    "config_at_rate",
    "config_for_link",
    "timeout_for_rtt",
]

#: The provider header before every SEND payload: flags, 7 reserved bytes, tag, header data.
PROVIDER_HEADER = struct.Struct(">B7xQQ")
_TAGGED, _HAS_HD = 1, 2
_ROCE_MODE = 0  # Message.mode: RoCE has no PDS delivery modes
#: a passive open accepts a first datagram whose PSN lies this far past the peer's start PSN (its
#: first packets may be lost or reordered; the window of an RC connection is smaller)
PASSIVE_PSN_WINDOW = 1 << 12


class UnsupportedAtomic(RoceError):
    """An atomic RoCE cannot carry (only 64-bit fetch-add and compare-swap exist)."""

    return_code = ReturnCode.AMO_UNSUPPORTED_OP


class _Waiter:
    __slots__ = ("handle", "tagged", "tag", "ignore", "source", "buffer", "truncate")

    def __init__(self, handle: int, tag: int | None, ignore: int, source: str | None, buffer: Any, truncate: bool):
        self.handle = handle
        self.tagged = tag is not None
        self.tag = tag or 0
        self.ignore = ignore
        self.source = source
        self.buffer = buffer
        self.truncate = truncate

    def matches(self, m: Message) -> bool:
        if self.source is not None and m.source != self.source:
            return False
        if m.tag is None:
            return not self.tagged
        return self.tagged and tag_matches(self.tag, m.tag, self.ignore)


class RoceCore:
    """One host's RoCE endpoint; see the module docstring."""

    #: UDP destination port of everything this core sends and receives (an engine builds and
    #: parses frames with it; FEP cores use 4793)
    udp_port = ROCE_UDP_PORT
    #: RoCEv2 sends UDP checksum 0 on IPv4 (rocev2-and-fabric.md §1.2 Decision)
    udp_checksum = False

    def __init__(
        self,
        address: str,
        *,
        config: QpConfig | None = None,
        seed: int | None = None,
        directory: dict[str, RoceCore] | None = None,
        cm: StaticCm | None = None,
        recv_credits: int = 64,
        max_unexpected: int = 1024,
        max_qps: int = 4096,
        log: Callable[[dict[str, Any]], None] | None = None,
        peer_config: Callable[[str], QpConfig | None] | None = None,
    ) -> None:
        self.address = address
        self.config = config or QpConfig()
        #: the queue pair configuration towards a given peer, where it differs from ``config``
        #: (None: ``config``): an engine whose host reaches some peers over a link of another rate
        #: (a server's scale-up domain) gives those QPs a rate limiter at that link's rate
        self.peer_config = peer_config
        self.rng = random.Random(seed)
        self.memory = MemoryTable(rng=self.rng)
        self.directory = directory
        self.cm = cm
        if directory is not None:
            directory[address] = self
        self.recv_credits = recv_credits
        self.max_unexpected = max_unexpected
        #: queue pairs a peer's first datagram may open at most (:meth:`_passive_open`)
        self.max_qps = max_qps
        self._addr = net.ip_bytes(address)
        self.log = log
        self.qps: dict[str, QueuePair] = {}  # peer address -> QP
        self._by_qpn: dict[int, QueuePair] = {}
        self._ops: dict[tuple[int, int], tuple[int, str, Any]] = {}  # (qpn, qp handle) -> (handle, kind, info)
        self._recv_handles: set[tuple[int, int]] = set()
        self._waiters: deque[_Waiter] = deque()
        self._unexpected: deque[Message] = deque()
        self._events: deque[Any] = deque()
        self._handles = 0
        self._now = 0
        self._closing = False
        self._closed = False
        self._starved: list[QueuePair] = []  # QPs owed re-posted receives
        self._stats: dict[str, int] = {"messages_sent": 0, "unexpected": 0}  # received: the QPs count them
        #: set by an adapter whose link sends every datagram from its own bound UDP port (the direct
        #: link): any object with ``port`` (this end's) and ``peer_port`` (every peer's), read when a
        #: connection opens; the ICRC then covers those ports (QueuePair.connect ``link_ports``)
        self.link_ports: Any = None

    def __repr__(self) -> str:
        return f"RoceCore({self.address!r})"

    # -- connections -----------------------------------------------------------------------------

    def connect(self, peer: RoceCore) -> QueuePair:
        """Create the RC connection with ``peer`` at both ends (out-of-band exchange of QPNs and
        start PSNs, the RDMA CM's job); returns this end's QP. Idempotent."""
        qp = self.qps.get(peer.address)
        if qp is not None:
            return qp
        a = self._new_qp(peer.address)
        b = peer._new_qp(self.address)
        a.connect(peer.address, b.qpn, b.start_psn, link_ports=self._link_ports())
        b.connect(self.address, a.qpn, a.start_psn, link_ports=peer._link_ports())
        self._attach(peer.address, a)
        peer._attach(self.address, b)
        return a

    def _config_for(self, peer: str) -> QpConfig:
        """The configuration of this end's QP towards ``peer`` (:attr:`peer_config`)."""
        return (self.peer_config(peer) if self.peer_config is not None else None) or self.config

    def _new_qp(self, peer: str) -> QueuePair:
        while True:
            qpn = self.rng.randrange(0x100, 1 << 24)
            if qpn not in self._by_qpn:
                break
        cfg = self._config_for(peer)
        return QueuePair(self.address, qpn, config=cfg, memory=self.memory, seed=self.rng.getrandbits(32), log=self.log)

    def _attach(self, peer: str, qp: QueuePair) -> None:
        self.qps[peer] = qp
        self._by_qpn[qp.qpn] = qp
        for _ in range(self.recv_credits):
            self._recv_handles.add((qp.qpn, qp.post_recv(self.config.max_message)))

    def connect_static(self, peer: str) -> QueuePair:
        """Open this end of the connection to ``peer`` with the parameters both ends derive
        (:class:`~uet.roce.cm.StaticCm`); the peer opens its end on its first datagram from us or
        its first operation towards us. Idempotent."""
        qp = self.qps.get(peer)
        if qp is not None:
            return qp
        if self.cm is None:
            raise EndpointClosed(f"{self.address}: no connection manager to reach {peer}")
        qpn, psn, rqpn, rpsn = self.cm.params(self.address, peer)
        if qpn in self._by_qpn:
            raise ConnectionCollision(f"{self.address}: QPN {qpn:#x} towards {peer} is already in use")
        qp = QueuePair(
            self.address,
            qpn,
            config=self._config_for(peer),
            memory=self.memory,
            seed=self.rng.getrandbits(32),
            start_psn=psn,
            log=self.log,
        )
        qp.connect(peer, rqpn, rpsn, link_ports=self._link_ports())
        self._attach(peer, qp)
        return qp

    def _link_ports(self) -> tuple[int, int] | None:
        lp = self.link_ports
        return None if lp is None else (lp.port, lp.peer_port)

    def _passive_open(self, data: bytes, source: str) -> QueuePair | None:
        """Open our end of the connection ``source`` opened first (:meth:`connect_static`), from
        its first datagram — only if that datagram is what the connection manager's parameters
        say ``source``'s first packets are, checked before any state is made (issue 29 item 11:
        one datagram per spoofed source made a QP, even with a bad ICRC): its ICRC is right for
        the pair (with ``check_icrc``), its PSN lies in the first ``PASSIVE_PSN_WINDOW`` PSNs of
        ``source``'s start PSN (both are secret-keyed, :mod:`uet.roce.cm`), and fewer than
        ``max_qps`` QPs exist. Anything else is counted and dropped."""
        st = self._stats
        cm = self.cm
        assert cm is not None
        if len(self.qps) >= self.max_qps:
            st["dropped_qp_limit"] = st.get("dropped_qp_limit", 0) + 1
            return None
        qpn, _psn, rqpn, rpsn = cm.params(self.address, source)
        if not 0 <= psn_diff(int.from_bytes(data[9:12], "big"), rpsn) < PASSIVE_PSN_WINDOW:
            st["dropped_passive_psn"] = st.get("dropped_passive_psn", 0) + 1  # (the cheap check first)
            return None
        try:
            rx = icrc_contexts(self._addr, net.ip_bytes(source), entropy_port(qpn, rqpn), self._link_ports())[1]
            if self.config.check_icrc and not rx.verify(data):
                st["dropped_passive_icrc"] = st.get("dropped_passive_icrc", 0) + 1
                return None
        except ValueError:
            st["dropped_unknown_qp"] = st.get("dropped_unknown_qp", 0) + 1
            return None
        try:
            return self.connect_static(source)
        except (ConnectionCollision, ValueError):
            return None

    def _qp(self, peer: str) -> QueuePair:
        qp = self.qps.get(peer)
        if qp is None:
            other = self.directory.get(peer) if self.directory is not None else None
            if other is not None:
                qp = self.connect(other)
            elif self.cm is not None:
                qp = self.connect_static(peer)
            else:
                raise EndpointClosed(f"{self.address}: no RoCE connection to {peer}")
        if qp.state is not QpState.RTS:
            raise self._refusal(qp, peer)
        return qp

    def _refusal(self, qp: QueuePair, peer: str | None) -> Exception:
        """Why an operation towards ``peer`` whose QP is not ready is refused (module docstring)."""
        if qp.state is QpState.ERR:
            why = f": {qp.error}" if qp.error is not None else ""
            return DeliveryError(f"{self.address}: the connection to {peer} failed{why}")
        return EndpointClosed(f"{self.address}: the connection to {peer} is in state {qp.state.name}")

    # -- memory ----------------------------------------------------------------------------------

    def register(
        self, buffer: Any, access: Access | int = Access.ALL, *, key: int | None = None, **_ignored: Any
    ) -> MemoryRegion:
        """Register ``buffer``; its ``key`` is a 32-bit R_Key (chosen at random unless given). The
        UET-only ``job`` restriction is ignored, as the operations' UET-only options are: a RoCE
        region is guarded by its R_Key alone."""
        if key is None:
            while True:
                key = self.rng.getrandbits(32)
                if key and self.memory.get(key) is None:
                    break
        elif not 0 < key < 1 << 32:
            raise ValueError("a RoCE R_Key is a non-zero 32-bit value")
        return self.memory.register(buffer, access, key=key)

    def deregister(self, region: MemoryRegion | int) -> None:
        self.memory.deregister(region)

    # -- operations ------------------------------------------------------------------------------

    def _handle(self) -> int:
        self._handles += 1
        return self._handles

    def _admit(self) -> None:
        if self._closing:
            raise EndpointClosed(f"{self} is closed")

    def _track(self, qp: QueuePair, qh: int, kind: str, info: Any = None) -> int:
        h = self._handle()
        self._ops[(qp.qpn, qh)] = (h, kind, info)
        return h

    def send(
        self,
        peer: str,
        data: bytes | bytearray | memoryview,
        *,
        tag: int | None = None,
        header_data: int | None = None,
        **_ignored: Any,
    ) -> int:
        """Send one message (tagged when ``tag`` is given); ``SendCompleted`` when acknowledged."""
        self._admit()
        qp = self._qp(peer)
        flags = (_TAGGED if tag is not None else 0) | (_HAS_HD if header_data is not None else 0)
        head = PROVIDER_HEADER.pack(flags, (tag or 0) & (2**64 - 1), (header_data or 0) & (2**64 - 1))
        self._stats["messages_sent"] += 1
        return self._track(qp, qp.post_send(head + bytes(data)), "send")

    def write(
        self,
        peer: str,
        key: int,
        offset: int,
        data: bytes | bytearray | memoryview,
        *,
        header_data: int | None = None,
        **_ignored: Any,
    ) -> int:
        """RDMA WRITE (with immediate when ``header_data`` is given: at most 32 bits)."""
        self._admit()
        if header_data is not None and not 0 <= header_data < 1 << 32:
            raise ValueError("RoCE immediate data is 32 bits")
        qp = self._qp(peer)
        return self._track(qp, qp.post_write(bytes(data), offset, key, imm=header_data), "write", (key, offset))

    def read(
        self,
        peer: str,
        key: int,
        offset: int,
        length: int,
        *,
        into: bytearray | memoryview | None = None,
        **_ignored: Any,
    ) -> int:
        """RDMA READ; the ``OpCompleted`` value is the bytes (or the filled view of ``into``)."""
        self._admit()
        qp = self._qp(peer)
        return self._track(qp, qp.post_read(length, offset, key), "read", into)

    def atomic(
        self,
        peer: str,
        key: int,
        offset: int,
        op: AmoOp | int,
        datatype: AmoType | int,
        operand: Any = None,
        *,
        fetch: bool = False,
        compare: int | float = 0,
        swap: int | float = 0,
        **_ignored: Any,
    ) -> int:
        """``SUM`` → fetch-and-add, ``CSWAP`` → compare-and-swap, on 64-bit integers (``compare``
        and ``swap`` taken as integers); other operations or types complete with
        ``OpFailed(UnsupportedAtomic)``."""
        self._admit()
        signed = datatype == AmoType.INT64
        if datatype not in (AmoType.INT64, AmoType.UINT64) or op not in (AmoOp.SUM, AmoOp.CSWAP):
            h = self._handle()
            self._events.append(OpFailed(h, UnsupportedAtomic(f"RoCE has no atomic {op!r} on {datatype!r}")))
            return h
        qp = self._qp(peer)
        m = 2**64 - 1
        if op == AmoOp.SUM:
            v = operand[0] if isinstance(operand, list | tuple) else (operand or 0)
            qh = qp.fetch_add(offset, key, int(v) & m)
        else:
            qh = qp.compare_swap(offset, key, int(compare) & m, int(swap) & m)
        return self._track(qp, qh, "atomic", (fetch, signed))

    def compare_swap(
        self,
        peer: str,
        key: int,
        offset: int,
        datatype: AmoType | int,
        compare: int | float,
        swap: int | float,
        *,
        op: AmoOp | int = AmoOp.CSWAP,
        fetch: bool = True,
        **_ignored: Any,
    ) -> int:
        """Compare-and-swap of one 64-bit element; another ``op`` of the family (CSWAP_NE...)
        completes with ``OpFailed(UnsupportedAtomic)``, as :meth:`atomic` says."""
        return self.atomic(peer, key, offset, op, datatype, None, fetch=fetch, compare=compare, swap=swap)

    # -- receives --------------------------------------------------------------------------------

    def post_recv(
        self,
        buffer: bytearray | memoryview | ReceiveSink | None,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> int:
        """Post a receive (software matching, module docstring); ``MessageReceived``."""
        if self._closed:
            raise EndpointClosed(f"{self} is closed")
        h = self._handle()
        w = _Waiter(h, tag, ignore, source, buffer, truncate)
        for m in self._unexpected:
            if w.matches(m):
                self._unexpected.remove(m)
                self._deliver(w, m)
                self._repost()
                return h
        qp = self.qps.get(source) if source is not None else None
        if qp is not None and qp.state is not QpState.RTS:
            raise self._refusal(qp, source)
        self._waiters.append(w)
        return h

    def recv_nowait(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message | None:
        w = _Waiter(0, tag, ignore, source, None, False)
        for m in self._unexpected:
            if w.matches(m):
                self._unexpected.remove(m)
                self._repost()
                return m
        return None

    def cancel(self, handle: int) -> bool:
        for w in self._waiters:
            if w.handle == handle:
                self._waiters.remove(w)
                return True
        return False

    def _deliver(self, w: _Waiter, m: Message) -> None:
        if w.buffer is not None:
            view = receive_view(w.buffer)
            n = m.nbytes
            if n > len(view) and not w.truncate:
                from uet.ses.errors import TooLong

                self._events.append(OpFailed(w.handle, TooLong(f"{n}-byte message, {len(view)}-byte buffer")))
                return
            n = min(n, len(view))
            view[:n] = m.data[:n]
            m = Message(
                view[:n], m.source, _ROCE_MODE, 0, header_data=m.header_data, tag=m.tag, message_length=m.nbytes
            )
        self._events.append(MessageReceived(w.handle, m))

    def _on_message(self, qp: QueuePair, data: bytes) -> None:
        if len(data) < PROVIDER_HEADER.size:
            self._stats["bad_messages"] = self._stats.get("bad_messages", 0) + 1
            self._starved.append(qp)
            return
        flags, tag, hd = PROVIDER_HEADER.unpack_from(data)
        payload = data[PROVIDER_HEADER.size :]
        m = Message(
            payload,
            qp.remote or "",
            _ROCE_MODE,
            0,
            header_data=hd if flags & _HAS_HD else None,
            tag=tag if flags & _TAGGED else None,
        )
        for w in self._waiters:
            if w.matches(m):
                self._waiters.remove(w)
                self._deliver(w, m)
                self._starved.append(qp)
                return
        self._unexpected.append(m)
        self._stats["unexpected"] += 1
        self._starved.append(qp)

    def _fail_bound(self, qp: QueuePair) -> None:
        """``qp`` entered ERR: its connection can bring no more messages, so every receive
        bound to its peer (``source``) fails with the QP's error instead of waiting forever
        (issue 12); receives from anyone keep waiting for the other connections."""
        err = qp.error or EndpointClosed(f"{self.address}: the connection to {qp.remote} failed")
        for w in [w for w in self._waiters if w.source is not None and w.source == qp.remote]:
            self._waiters.remove(w)
            self._events.append(OpFailed(w.handle, err))

    def _repost(self) -> None:
        while self._starved and len(self._unexpected) < self.max_unexpected:
            qp = self._starved.pop(0)
            if qp.state is QpState.RTS:
                self._recv_handles.add((qp.qpn, qp.post_recv(self.config.max_message)))

    # -- datagrams -------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        self._now = now

    def receive_datagram(self, data: bytes, now: int, *, source: str, ecn: int = 0, **_ignored: Any) -> None:
        """One RoCE datagram (UDP payload to port 4791); dispatched by destination QP."""
        self._now = now
        if len(data) < 12:
            self._stats["dropped"] = self._stats.get("dropped", 0) + 1
            return
        qpn = int.from_bytes(data[5:8], "big")
        qp = self._by_qpn.get(qpn)
        if qp is None and self.cm is not None and source not in self.qps and self.cm.qpn(self.address, source) == qpn:
            qp = self._passive_open(data, source)
        if qp is None:
            self._stats["dropped_unknown_qp"] = self._stats.get("dropped_unknown_qp", 0) + 1
            return
        qp.receive_datagram(data, now, source=source, ecn=ecn)
        self._drain(qp)

    def receive_batch(self, items: Sequence[Datagram], now: int) -> None:
        for d in items:
            self.receive_datagram(d.data, now, source=d.source, ecn=d.ecn)

    def _drain(self, qp: QueuePair) -> None:
        ops = self._ops
        while (e := qp.next_event()) is not None:
            if isinstance(e, qev.MessageReceived):
                self._recv_handles.discard((qp.qpn, e.handle))
                if e.write_length is not None:
                    # WRITE with immediate: the target-side completion (key/offset are unknown to
                    # RoCE's receive completion; the length and immediate are reported)
                    self._events.append(WriteCompleted(0, 0, e.write_length, e.imm or 0, qp.remote or "", 0))
                    self._starved.append(qp)
                else:
                    self._on_message(qp, e.data)
                continue
            if isinstance(e, qev.QpErrored):
                self._fail_bound(qp)
                continue
            entry = ops.pop((qp.qpn, e.handle), None)
            if entry is None:
                self._recv_handles.discard((qp.qpn, e.handle))
                continue  # a flushed provider receive
            h, kind, info = entry
            if isinstance(e, qev.OpFailed):
                self._events.append(OpFailed(h, e.error))
            elif isinstance(e, qev.SendCompleted):
                self._events.append(SendCompleted(h))
            elif isinstance(e, qev.WriteCompleted):
                self._events.append(OpCompleted(h, None))
            elif isinstance(e, qev.ReadCompleted):
                value: Any = e.data
                if info is not None:
                    view = memoryview(info).cast("B")
                    view[: len(e.data)] = e.data
                    value = view[: len(e.data)]
                self._events.append(OpCompleted(h, value))
            elif isinstance(e, qev.AtomicCompleted):
                fetch, signed = info
                v = e.value - (1 << 64) if signed and e.value >> 63 else e.value
                self._events.append(OpCompleted(h, v if fetch else None))
        self._repost()

    def datagrams_to_send(self, now: int) -> list[Transmit]:
        self._now = now
        out: list[Transmit] = []
        for qp in self.qps.values():
            for t in qp.datagrams_to_send(now):
                out.append(Transmit(t.data, t.destination, t.entropy, t.dscp, t.ecn))
            self._drain(qp)
        self._check_closed()
        return out

    def get_timer(self) -> int | None:
        best = None
        for qp in self.qps.values():
            t = qp.get_timer()
            if t is not None and (best is None or t < best):
                best = t
        return best

    def handle_timer(self, now: int) -> None:
        self._now = now
        for qp in self.qps.values():
            t = qp.get_timer()
            if t is not None and t <= now:
                qp.handle_timer(now)
                self._drain(qp)

    def next_event(self) -> Any:
        return self._events.popleft() if self._events else None

    # -- close and counters ----------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        return self._closing

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def now(self) -> int:
        return self._now

    def busy(self) -> bool:
        return any(qp.requester.wqes for qp in self.qps.values() if qp.state is QpState.RTS)

    def close(self, now: int) -> None:
        """No new operations; :class:`~uet.fep.Closed` once every queued one completed."""
        self._now = now
        self._closing = True
        self._check_closed()

    def _check_closed(self) -> None:
        if self._closing and not self._closed and not self.busy():
            self._closed = True
            err = EndpointClosed(f"{self} closed")
            for w in self._waiters:
                self._events.append(OpFailed(w.handle, err))
            self._waiters.clear()
            self._events.append(Closed(True))

    def counters(self) -> dict[str, int]:
        """Sums of every QP's counters, the provider's own, and ``retransmits_to:<peer>`` (the
        packets each connection sent again, what the workloads report per flow)."""
        out: dict[str, int] = dict(self._stats)
        for peer, qp in self.qps.items():
            for k, v in qp.stats.items():
                out[k] = out.get(k, 0) + v
            out["retransmits_to:" + peer] = qp.stats.get("retransmitted_packets", 0)  # per flow
        out["retransmits"] = out.get("retransmitted_packets", 0)
        return out
