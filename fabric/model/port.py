"""One egress side of a full-duplex link: eight class queues, the scheduler and the pause timers.

A :class:`Port` belongs to a switch or to a host NIC. It knows its link (rate, propagation delay,
MTU) and computes when a frame leaves and arrives (§8.1 step 6, architecture.md principle 4):

* serialisation time = ceil(wire bits × 10⁹ / rate) ns, where the wire bits count the frame
  padded to the 60-byte Ethernet minimum plus ``wire_overhead`` bytes (FCS 4 + preamble/SFD 8 +
  inter-frame gap 12 = 24 by default, rocev2-and-fabric.md §1.1: "link timing should add 20 bytes
  per frame" on top of the frame with its FCS);
* arrival at the peer = end of serialisation + propagation delay (store-and-forward).

Scheduling (§8.6): MAC-control frames (PFC) first, then the strict classes from the highest TC
down, then DWRR among the other non-empty, non-paused classes with quantum = weight × one maximum
frame; an emptied queue forgets its deficit. An optional per-port ``strict_budget`` lets the DWRR
classes send one frame after the strict classes sent that many bytes in a row (default: none).

Pause (§8.5, receiver side): a PFC frame pauses the class for quanta × 512 bit times at this
port's rate; a frame in flight finishes; a new frame overwrites the timer; 0 resumes at once.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Sequence
from math import gcd
from typing import Any, Final, Protocol, final

from uet.fabric.model.config import EcnConfig, FabricError
from uet.fabric.model.emptyqueue import UNUSED

#: Bytes a frame costs on the wire beyond its bytes without FCS: FCS 4, preamble/SFD 8, IFG 12.
WIRE_OVERHEAD: Final = 24
#: Minimum Ethernet frame without FCS; shorter frames are padded on the wire.
MIN_FRAME: Final = 60
#: Pause quantum in bit times (IEEE 802.1Qbb).
QUANTUM_BITS: Final = 512
#: Index :meth:`Port.pick` returns for the MAC-control (PFC) frame queue.
CTRL: Final = 8


@final
class Marking:
    """An :class:`~uet.fabric.model.config.EcnConfig` as a port reads it once per departing packet
    (``Port.ecn``): the same figures in plain attributes, which the compiled build keeps as native
    ints, floats and bools (a configuration dataclass is read through generic attribute look-ups).
    :meth:`probability` is the marking rule (§8.2; ``EcnConfig.probability`` asks it)."""

    __slots__ = ("kmin", "kmax", "pmax", "wred_drop", "weight_shift", "last_hop")

    def __init__(self, cfg: EcnConfig) -> None:
        self.kmin: int = cfg.kmin
        self.kmax: int = cfg.kmax
        self.pmax: float = float(cfg.pmax)
        self.wred_drop: bool = bool(cfg.wred_drop)
        self.weight_shift: int = cfg.weight_shift
        self.last_hop: bool = bool(cfg.last_hop)

    def probability(self, q: float) -> float:
        """Marking probability for a queue of ``q`` bytes (``EcnConfig.probability``)."""
        if q <= self.kmin:
            return 0.0
        if q > self.kmax:
            return 1.0
        return self.pmax * (q - self.kmin) / (self.kmax - self.kmin)


class Packet:
    """A frame held in a switch: its bytes and what ingress learned about it."""

    __slots__ = (
        "frame",
        "size",
        "in_port",
        "tc",
        "ip",
        "pool",
        "t_enq",
        "dst",
        "fcrc",
        "path",
        "hops",
        "dmap",
        "ttl",
        "uet_src",
    )

    def __init__(self, frame: bytearray, in_port: int, tc: int, ip: int, t_enq: int, dst: int = -1) -> None:
        self.frame = frame
        self.size = len(frame)
        self.in_port = in_port
        self.tc = tc
        self.ip = ip
        #: buffer pool charged: "shared", "reserve", "headroom", or "" (NIC queues: not charged)
        self.pool = ""
        self.t_enq = t_enq
        #: the IPv4 destination as an integer (the route lookup key; -1: not read), read once at
        #: the first switch; the packet travels from switch to switch with it (Switch._arrive)
        self.dst = dst
        #: the ECMP flow tuple's share of the hash (frames.flow_key), computed at the first
        #: switch that hashes the packet (-1: not yet); each switch XORs it with its seed's
        #: (LoadBalancer.choose_pkt)
        self.fcrc = -1
        #: the links crossed so far when the fabric counts per-link load, packed into one int
        #: (uet.fabric.model.linkload: the first link's id, then ``path << port bits | egress
        #: port index`` per switch); 0: not counted
        self.path = 0
        #: switches that forwarded the packet since its TTL and IPv4 checksum were last written:
        #: each takes one from the TTL, and the switch that hands the frame to a host or a tap
        #: (or re-reads or trims it) writes them all at once (frames.forward_rewrite)
        self.hops = 0
        #: the DSCP → TC table ``tc`` was read from (None: not from the frame's DSCP, e.g. a
        #: trimmed stub's class): a switch with the very same table takes ``tc`` as it is
        #: instead of reading the DSCP again (only a trim changes it, which makes a new packet)
        self.dmap: tuple[int, ...] | None = None
        #: the TTL in the frame as last written (-1: not read), kept beside it so that a switch
        #: tests ``ttl - hops`` without reading the frame (Switch._arrive)
        self.ttl = -1
        #: the IPv4 source as an integer when the first switch read a UDP packet to the UET port
        #: without IP options (-1: not known): what LinkLoad.deliver would read of the frame
        #: again, one generic call per byte in the compiled build
        self.uet_src = -1


_RR_AFTER: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...]] = {}


def _rr_after(strict: tuple[int, ...], dwrr: tuple[int, ...]) -> tuple[int, ...]:
    """:attr:`Port.rr_after` for these strict and DWRR classes, one tuple shared by every port
    that has them."""
    key = (strict, dwrr)
    t = _RR_AFTER.get(key)
    if t is None:
        t = _RR_AFTER[key] = tuple(-1 if tc in strict else (dwrr.index(tc) + 1) % len(dwrr) for tc in range(8))
    return t


_DWRR_POS: dict[tuple[int, ...], tuple[int, ...]] = {}


def _dwrr_pos(dwrr: tuple[int, ...]) -> tuple[int, ...]:
    """:attr:`Port.dwrr_pos` for these DWRR classes, one tuple shared by every port that has them."""
    t = _DWRR_POS.get(dwrr)
    if t is None:
        t = _DWRR_POS[dwrr] = tuple(dwrr.index(tc) if tc in dwrr else -1 for tc in range(8))
    return t


_SHARED: dict[tuple[str, tuple[Any, ...]], list[Any]] = {}


def shared_table(kind: str, items: list[Any]) -> list[Any]:
    """One list object for every switch whose per-class table ``kind`` holds ``items`` (equal by
    value; a list never written after it is built): the switches of a fabric read these at every
    hop, and one copy of each stays in cache where 320 copies (1,024 hosts) did not."""
    key = (kind, tuple(items))
    t = _SHARED.get(key)
    if t is None:
        t = _SHARED[key] = items
    return t


class Node(Protocol):
    """The switch or host NIC at a port's far end (:attr:`Port.peer`), as the port's users see
    it: named, with its ports, taking frames in (``Switch`` and ``HostNic`` both are one)."""

    @property
    def name(self) -> str: ...

    @property
    def ports(self) -> Sequence[Port]: ...

    def ingress(self, port: int, frame: bytearray, now: int) -> None: ...

    def __call__(self, a: Any, b: Any, now: int) -> None:
        """The node as the handler of an event ``(node, a, b)`` (:mod:`uet.fabric.model.events`):
        ``(node, port, None)``: the frame on that egress :class:`Port` ended (the node's ``_kick``);
        ``(node, port index, frame)``: a frame arrived (``ingress``); ``(switch, port index,
        packet)``: a packet another switch forwarded arrived (``Switch._arrive``)."""
        ...


class Port:
    """Egress queues, scheduler and link timing of one port; see the module docstring."""

    def __init__(
        self,
        index: int,
        rate_bps: int,
        delay_ns: int,
        mtu: int = 1500,
        *,
        mac: bytes = b"\x02\0\0\0\0\0",
        strict: tuple[int, ...] = (7, 6),
        weights: dict[int, int] | None = None,
        strict_budget: int | None = None,
        wire_overhead: int = WIRE_OVERHEAD,
    ) -> None:
        if rate_bps <= 0:
            raise FabricError("link rate must be positive")
        # The attributes a packet reads at every hop come first, in this order: the compiled
        # build lays a class's attributes out in the order of their first assignment, so these
        # share a few cache lines (at 1,024 hosts a hop finds its port's lines in no cache).
        self.down = False
        self.faulty = False
        # what a hop reads and writes of the port a packet arrives on: in the same first line
        self.rx_bytes = 0
        self.rx_frames = 0
        #: largest frame without FCS: MTU + Ethernet header + one 802.1Q tag
        self.max_frame = mtu + 18
        #: packets in all class queues
        self.backlog = 0
        self.busy_until = 0
        #: time of the last "link free" event scheduled (-1: none yet; scheduled only when work
        #: waits). Only compared with ``busy_until`` while the link is busy: a value from the past
        #: never equals it again (``busy_until`` only grows), so nothing clears it when it has run
        self.free_at = -1
        #: the latest end of a pause any class of this port was given (0: never paused): at or
        #: after it no class is paused, which the data path tests on this one attribute, in the
        #: port's first cache lines, before it reads :attr:`paused_until` (a list of its own,
        #: which a 1,024-host run finds in no cache: issue 28)
        self.pause_hi = 0
        #: bytes sent per class (:attr:`tx_tc_bytes`): the running class (-1: none) and the bytes
        #: of its current run, added to ``_tx_tc`` when another class sends (:meth:`count_tc`): an
        #: add per frame to a list made an int object and touched the list's two cache lines,
        #: which a 1,024-host run finds in no cache (issue 28)
        self.tc_run = -1
        self.tc_run_bytes = 0
        #: PFC frames waiting to go (:data:`UNUSED` until the first: :meth:`send_ctrl`)
        self.ctrl: deque[bytes] = UNUSED
        strict_t = tuple(sorted(strict, reverse=True))
        dwrr_t = tuple(tc for tc in range(8) if tc not in strict_t)
        #: per class, the round robin's position after serving it alone (-1: a strict class),
        #: for :meth:`pick_alone`
        self.rr_after = _rr_after(strict_t, dwrr_t)
        #: per class, its place in the round robin's order (-1: a strict class), for
        #: :meth:`_dwrr_pick` (``dwrr.index(tc)`` is a generic method call in the compiled build)
        self.dwrr_pos = _dwrr_pos(dwrr_t)
        self.deficit = [0] * 8
        self._rr = 0
        self._fresh = True
        self._strict_run = 0
        #: ECN marking per TC on this port (None: no marking), set by the switch
        self.ecn: list[Marking | None] = [None] * 8
        self.wire_overhead = wire_overhead
        self.ser_num = 1  # set with the rate, below (rate_bps)
        self.ser_den = 1
        self.tx_bytes = 0
        self.tx_frames = 0
        self.delay_ns = int(delay_ns)
        #: set by a Fabric: the far end, which is the handler of the events that bring it frames
        #: (``(node, port index, frame)``; ``(switch, port index, packet)`` for a packet forwarded
        #: to a switch, which keeps what ingress learned: :class:`Node`), whether it is a switch,
        #: and the far end's port index
        self.peer_node: Node | None = None
        self.peer_switch = False
        self.peer_port = 0
        self.index = index
        #: the far end is a host NIC (last hop: trimmed DSCP 5, §8.4)
        self.faces_host = False
        self.l2_rewrite = bytearray()  # set with the peer's MAC, below (peer_mac)
        # what a packet that waits reads (a queued packet, a served queue, a paused class)
        #: per class, its queue (:data:`UNUSED` until its first packet: :meth:`queue`)
        self.queues: list[deque[Packet]] = [UNUSED] * 8
        self.qbytes = [0] * 8
        self.paused_until = [0] * 8
        #: classes whose received pauses are ignored (watchdog "forward" action)
        self.ignore_pause = [False] * 8
        self.strict = strict_t
        self.dwrr = dwrr_t
        # the rest
        self._tx_tc = [0] * 8
        self.mtu = mtu
        self.rate_bps = int(rate_bps)
        self.mac = bytes(mac)
        #: (node, port index) at the far end of the link, set when the topology is wired
        self.peer: tuple[Node, int] | None = None
        self.peer_mac = b"\xff" * 6
        #: per-link accounting (uet.fabric.model.linkload), set by a Fabric: the id (from 1) of
        #: the link this port sends on, and of the link arriving at it (the peer's sending port)
        self.link_id = 0
        self.in_link = 0
        #: averaged queue per class for classic WRED (EcnConfig.weight_shift > 0)
        self.avg_q = [0.0] * 8
        self._pause_start = [0] * 8
        self._paused_acc = [0] * 8
        w = weights or {}
        self.quantum = [max(1, w.get(tc, 1)) * self.max_frame for tc in range(8)]
        self.strict_budget = strict_budget
        #: time of the last frame start per class, for the PFC watchdog's "sent nothing since":
        #: kept by a switch for its lossless classes, the ones the watchdog watches (a NIC has none)
        self.last_tx = [0] * 8
        #: time a wake-up for the end of a pause is scheduled for (-1: none)
        self.wake_at = -1
        #: last telemetry sample time per class, index 8 for the port's byte counters
        self.last_sample = [-(1 << 62)] * 9
        #: faults (uet.fabric.model.failover): the link is down (``down``: frames queued for it,
        #: started on it or arriving over it are lost); in the ECMP groups (routing's view, which
        #: follows ``down`` after the detection delay and the hold-down); frames arriving over it
        #: are lost with probability ``loss`` drawn from ``loss_rng``; ``faulty``: down or lossy
        #: (the one flag the data path tests); ``base_rate_bps``: the rate before any degradation
        self.routable = True
        self.loss = 0.0
        self.loss_rng: random.Random | None = None
        self.base_rate_bps = self.rate_bps

    @property
    def rate_bps(self) -> int:
        """The link rate in bit/s. Setting it (a degraded link: uet.fabric.model.failover) also
        sets :attr:`ser_num` and :attr:`ser_den`."""
        return self._rate_bps

    @rate_bps.setter
    def rate_bps(self, bps: int) -> None:
        self._rate_bps = bps = int(bps)
        g = gcd(8_000_000_000, bps)
        #: the link's nanoseconds per byte, 8·10⁹ / rate, as a reduced fraction: a frame of ``b``
        #: wire bytes takes ceil(b · ser_num / ser_den) ns (:meth:`ser_ns`). Small factors (100 Gb/s:
        #: 2 / 25) keep the products machine-sized, which the compiled build multiplies natively
        #: (b · 8·10⁹ it multiplies as Python ints); the quotient is the same integer.
        self.ser_num = 8_000_000_000 // g
        self.ser_den = bps // g

    @property
    def peer_mac(self) -> bytes:
        """MAC of the far end (the destination MAC of frames this port forwards)."""
        return self._peer_mac

    @peer_mac.setter
    def peer_mac(self, mac: bytes) -> None:
        self._peer_mac = bytes(mac)
        #: destination + source MAC of a forwarded frame, the 12 bytes a switch writes per hop
        #: (``frame[0:12] = l2_rewrite``). A bytearray, never changed: assigned to a slice of a
        #: bytearray, a ``bytes`` value is first copied into a new bytearray (CPython's
        #: ``bytearray_ass_subscript``), about 800 instructions per frame a switch hands a host
        self.l2_rewrite = bytearray(self._peer_mac + self.mac)

    @property
    def tx_tc_bytes(self) -> list[int]:
        """Bytes sent per class (frames without FCS; a new list)."""
        out = list(self._tx_tc)
        if self.tc_run >= 0:
            out[self.tc_run] += self.tc_run_bytes
        return out

    def count_tc(self, tc: int, nbytes: int) -> None:
        """A frame of ``nbytes`` of class ``tc`` started on the link: counted in
        :attr:`tx_tc_bytes`. The data path writes the common case, another frame of the running
        class, out (``port.tc_run_bytes += n`` when ``tc == port.tc_run``)."""
        if tc == self.tc_run:
            self.tc_run_bytes += nbytes
            return
        if self.tc_run >= 0:
            acc = self._tx_tc
            acc[self.tc_run] = acc[self.tc_run] + self.tc_run_bytes
        self.tc_run = tc
        self.tc_run_bytes = nbytes

    # -- link timing --------------------------------------------------------------------------

    def ser_ns(self, nbytes: int) -> int:
        """Serialisation time of a frame of ``nbytes`` (without FCS) on this link, rounded up."""
        return ((max(nbytes, MIN_FRAME) + self.wire_overhead) * self.ser_num + self.ser_den - 1) // self.ser_den

    def pause_ns(self, quanta: int) -> int:
        """Duration of ``quanta`` pause quanta (512 bit times each) at this link's rate."""
        return (quanta * QUANTUM_BITS * 1_000_000_000 + self.rate_bps - 1) // self.rate_bps

    # -- egress: what switches and NICs share -------------------------------------------------

    def ready(
        self,
        now: int,
        schedule: Callable[[int, Callable[[Port, None, int], None], Port], None],
        on_free: Callable[[Port, None, int], None],
        on_wake: Callable[[Port, None, int], None],
    ) -> int | None:
        """The class whose frame may start on this link at ``now`` (:data:`CTRL`: a PFC frame),
        or None. When work waits, the node is called back: ``on_free`` when the frame on the
        link ends (``free_at``: one event per frame end, only when something waits), ``on_wake``
        when the pause holding every waiting class ends (``wake_at``)."""
        if self.busy_until > now:
            if (self.backlog or self.ctrl) and self.free_at != self.busy_until:
                self.free_at = self.busy_until
                schedule(self.busy_until, on_free, self)
            return None
        if not (self.backlog or self.ctrl):
            return None
        tc = self.pick(now)
        if tc is None:
            t = self.next_resume(now)
            if t is not None and self.wake_at != t:
                self.wake_at = t
                schedule(t, on_wake, self)
        return tc

    def start(self, nbytes: int, now: int) -> int:
        """A frame of ``nbytes`` starts on the link at ``now``: the link is busy until the end of
        its serialisation (:meth:`ser_ns`, written out: once per frame a NIC sends), returned."""
        end = now + ((max(nbytes, MIN_FRAME) + self.wire_overhead) * self.ser_num + self.ser_den - 1) // self.ser_den
        self.busy_until = end
        self.tx_bytes += nbytes
        self.tx_frames += 1
        return end

    # -- pause (receiver side of PFC) ---------------------------------------------------------

    def apply_pause(self, tc: int, quanta: int, now: int) -> None:
        """Start, extend or end (``quanta`` 0) the pause of class ``tc`` at ``now``."""
        if self.paused_until[tc] > now:
            self._paused_acc[tc] += now - self._pause_start[tc]
        else:
            self._paused_acc[tc] += self.paused_until[tc] - self._pause_start[tc]
        self._pause_start[tc] = now
        until = self.paused_until[tc] = now + self.pause_ns(quanta)
        if until > self.pause_hi:
            self.pause_hi = until

    def is_paused(self, tc: int, now: int) -> bool:
        return self.paused_until[tc] > now and not self.ignore_pause[tc]

    def paused_ns(self, tc: int, now: int) -> int:
        """Total time class ``tc`` has spent paused up to ``now``."""
        return self._paused_acc[tc] + max(0, min(self.paused_until[tc], now) - self._pause_start[tc])

    def next_resume(self, now: int) -> int | None:
        """Earliest end of a pause that holds back a non-empty queue, or None."""
        if not self.backlog:
            return None
        t = None
        for tc in range(8):
            if self.queues[tc] and self.is_paused(tc, now):
                u = self.paused_until[tc]
                if t is None or u < t:
                    t = u
        return t

    # -- queues ---------------------------------------------------------------------------------

    def queue(self, tc: int) -> deque[Packet]:
        """The queue of class ``tc``, to append to (made on the class's first packet)."""
        q = self.queues[tc]
        if q is UNUSED:
            q = self.queues[tc] = deque()
        return q

    def send_ctrl(self, frame: bytes) -> None:
        """Queue a MAC-control (PFC) frame; it goes before every class (:meth:`pick`)."""
        if self.ctrl is UNUSED:
            self.ctrl = deque()
        self.ctrl.append(frame)

    def push(self, pkt: Packet) -> None:
        """Append to the queue of the packet's class."""
        self.queue(pkt.tc).append(pkt)
        self.qbytes[pkt.tc] += pkt.size
        self.backlog += 1

    def pop(self, tc: int) -> Packet:
        """Remove the head of class ``tc``."""
        pkt = self.queues[tc].popleft()
        self.qbytes[tc] -= pkt.size
        self.backlog -= 1
        return pkt

    # -- scheduler ------------------------------------------------------------------------------

    def queued_bytes(self) -> int:
        return sum(self.qbytes)

    def pick(self, now: int) -> int | None:
        """The class to serve next (:data:`CTRL` for a PFC frame), or None if nothing may go."""
        if self.ctrl:
            return CTRL
        if not self.backlog:
            return None
        queues = self.queues
        budget = self.strict_budget
        free = self.pause_hi <= now  # no class paused: the pause lists are not read
        pu, ign = self.paused_until, self.ignore_pause
        rest = self.backlog  # packets outside the strict classes (-1: not counted)
        for tc in self.strict:
            q = queues[tc]
            if q:
                if free or pu[tc] <= now or ign[tc]:
                    if budget is not None and self._strict_run >= budget and self._dwrr_eligible(now):
                        rest = -1
                        break
                    self._strict_run += q[0].size
                    return tc
                rest -= len(q)
        pick = self._dwrr_pick(now, rest)
        if pick is not None:
            self._strict_run = 0
        return pick

    def pick_alone(self, tc: int, size: int) -> None:
        """What :meth:`pick` does to the scheduler's state when it serves a ``size``-byte packet
        of class ``tc`` that is alone in this port's queues (and not paused): the caller sends
        it without queueing it (``Switch._enqueue`` on an idle port). A strict class adds to the
        strict run; a DWRR class, served alone, moves the round robin past itself with a fresh
        turn, forgets its deficit and ends the strict run."""
        nxt = self.rr_after[tc]
        if nxt < 0:
            self._strict_run += size
            return
        self._rr = nxt
        self._fresh = True
        self.deficit[tc] = 0
        self._strict_run = 0

    def _dwrr_eligible(self, now: int) -> bool:
        pu, ign = self.paused_until, self.ignore_pause
        return any(self.queues[tc] and (pu[tc] <= now or ign[tc]) for tc in self.dwrr)

    def _dwrr_pick(self, now: int, rest: int = -1) -> int | None:
        """The weighted round robin's class; ``rest``: the packets queued in its classes, when
        the caller counted them (a class holding them all is the only one eligible)."""
        queues, pu, ign = self.queues, self.paused_until, self.ignore_pause
        free = self.pause_hi <= now  # no class paused: the pause lists are not read
        first = -1
        many = False
        for c in self.dwrr:  # the eligible classes: none, one (the usual case) or several
            q = queues[c]
            if q and (free or pu[c] <= now or ign[c]):
                if first < 0:
                    first = c
                    if len(q) == rest:  # the others are empty: no need to look at them
                        break
                else:
                    many = True
                    break
        if first < 0:
            return None
        order = self.dwrr
        if not many:
            # one backlogged class: it is served alone, starting a fresh turn when others return
            tc = first
            self._rr = self.rr_after[tc] if len(queues[tc]) == 1 else self.dwrr_pos[tc]
            self._fresh = True
            self.deficit[tc] = 0
            return tc
        n = len(order)
        deficit = self.deficit
        while True:
            tc = order[self._rr]
            q = queues[tc]
            if not q or (pu[tc] > now and not ign[tc]):
                if not q:
                    deficit[tc] = 0
                self._rr = (self._rr + 1) % n
                self._fresh = True
                continue
            if self._fresh:
                deficit[tc] += self.quantum[tc]
                self._fresh = False
            size = q[0].size
            if size <= deficit[tc]:
                deficit[tc] -= size
                if len(q) == 1:
                    deficit[tc] = 0
                    self._rr = (self._rr + 1) % n
                    self._fresh = True
                return tc
            self._rr = (self._rr + 1) % n
            self._fresh = True
