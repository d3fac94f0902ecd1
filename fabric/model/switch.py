"""The sans-I/O switch: whole Ethernet frames and integer-ns times in, timed frames out.

Pipeline (rocev2-and-fabric.md §8.1), per received frame:

1. MAC-control frames (EtherType 0x8808) are consumed: PFC / PAUSE set the pause timers of this
   port's *egress* queues (§8.5); never forwarded.
2. Classify: TC from the DSCP table (or the 802.1Q PCP when ``trust_pcp``).
3. Route: longest-prefix match on the IPv4 destination, then one of the equal-cost ports (§8.7).
4. Admit: ingress policing at the link rate (host-facing ports, below), shared-buffer checks
   (§8.3) and PFC ingress accounting (§8.5); a UET data packet that fails admission is trimmed to
   its headers and queued in TC7 (§8.4).

**Ingress policing** (**decision**; §8 is silent, the model is a single-rate policer, RFC 2697's
committed rate with its burst, written as the generic cell-rate algorithm in integer ns): a
host-facing port accepts frames at most at its link rate. The port keeps the time its link would
have finished the frames accepted so far (their serialisation times added up from each arrival);
a frame whose own serialisation would have had to start more than ``police_burst_bytes`` of link
time before that is dropped and counted (``policed``) before any classification or buffer
accounting. A host whose NIC honours its link (every NIC of the model,
and the live fabric's, which inject through the NIC model) is never policed; a rogue one sending
above its rate (a NIC that ignores its link, or frames handed to the switch directly) is cut to
its link rate at the edge, so it cannot fill the shared buffer and, through PFC, pause the
unrelated flows beside it (issue 29 item 12).
5. Enqueue in (egress port, TC); XOFF upstream if the (ingress port, priority) crossed XOFF.
6. Schedule when the egress link is idle (§8.6), skipping classes the downstream peer paused.
7. Dequeue: ECN decision on the queue left behind (§8.2), TTL − 1, IPv4 checksum patched, MACs
   rewritten (source = this port, destination = the peer); release the buffer charge; XON
   upstream if the ingress PG drained below XON.

The switch takes time only from its caller. Used alone it owns an :class:`EventQueue`:
``receive(port, frame, now)`` first runs everything due up to ``now``; ``advance(now)`` runs timers;
``next_deadline()`` says when to call again; ``take_transmissions()`` returns the frames that
started on a link, each with its start, end of serialisation and arrival time at the peer. Inside
a :class:`~uet.fabric.model.fabric.Fabric` all switches share one queue and ``on_transmit`` hands
frames straight to the link.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from uet.fabric.model.buffer import Mmu
from uet.fabric.model.config import FabricError, SwitchConfig
from uet.fabric.model.emptyqueue import UNUSED
from uet.fabric.model.events import EventQueue
from uet.fabric.model.frames import (
    IP_DST,
    IP_LEN,
    IP_TOS,
    IP_TTL,
    flow_key,
    flow_key_udp,
    forward_rewrite,
    is_uet,
    l3_offset,
    parse_pause,
    pfc_frame,
    rewrite_tos_ttl,
    trim,
    uet_header_len,
)
from uet.fabric.model.lb import LoadBalancer, mix32
from uet.fabric.model.linkload import LinkLoad
from uet.fabric.model.port import CTRL, MIN_FRAME, Marking, Packet, Port, shared_table
from uet.fabric.model.telemetry import Counters, Telemetry

from uet.errors import DecodeError
from uet.wire.net import UET_UDP_PORT, ip_bytes
from uet.wire.net import EtherType as _Et

#: the shared empty queue as a Final name: the compiled build keeps it in a C static (an imported
#: name is a look-up in the module's globals at every use; read once per packet queued)
_UNUSED: Final = UNUSED
_UET_PORT: Final = UET_UDP_PORT
_ETH_IPV4: Final = int(_Et.IPV4)
_ETH_MAC_CONTROL: Final = int(_Et.MAC_CONTROL)
#: what ingress reads of an untagged frame's Ethernet and IPv4 headers, in one call: EtherType,
#: version and IHL, TOS, total length, TTL, destination address (a byte of a bytearray costs the
#: compiled build a generic call: eleven of them per frame a host sent, issue 28); and, for the
#: ECMP hash of a UDP packet without IP options (frames.flow_key_udp), the protocol, the source
#: address and the 4 bytes behind a 20-byte header (its ports), which the hash read again
_L3_UNPACK: Final = struct.Struct("!12xHBBH4xBB2xIII").unpack_from
_TRIMMABLE_REASONS: Final = ("queue_limit", "dynamic_threshold", "buffer_full")
#: the PFC watchdog's storm test: a queue paused at least this fraction of a poll interval
#: (**decision**: 0.9; the spec notes give only "paused for detect time")
STORM_PAUSED: Final = 0.9


@dataclass
class PortSpec:
    """A switch port's link: rate (bit/s), one-way propagation delay (ns), IP MTU; whether the
    peer is a host NIC (last hop for trimming); the port's MAC (default derived from the switch
    id and port number)."""

    rate_bps: int = 1_000_000_000
    delay_ns: int = 1_000
    mtu: int = 1500
    faces_host: bool = False
    mac: bytes | None = None


@dataclass(frozen=True)
class Transmission:
    """A frame that started on ``port`` at ``start``; the last bit leaves at ``end`` and reaches
    the peer at ``arrival`` (= end + propagation delay)."""

    port: int
    frame: bytes
    start: int
    end: int
    arrival: int


def _markings(kind: str, ecn: list[Marking | None]) -> list[Marking | None]:
    """:func:`~uet.fabric.model.port.shared_table` for a list of markings, equal when their
    figures are: the first switch's list (its Marking objects) for every switch with the same."""
    key = (
        kind,
        tuple(None if m is None else (m.kmin, m.kmax, m.pmax, m.wred_drop, m.weight_shift, m.last_hop) for m in ecn),
    )
    t = _MARKINGS.get(key)
    if t is None:
        t = _MARKINGS[key] = ecn
    return t


_MARKINGS: dict[tuple[str, tuple[tuple[int, int, float, bool, int, bool] | None, ...]], list[Marking | None]] = {}


class Switch:
    """One switch of the model; see the module docstring."""

    def __init__(
        self,
        name: str,
        switch_id: int,
        ports: Sequence[PortSpec],
        cfg: SwitchConfig | None = None,
        *,
        events: EventQueue | None = None,
        telemetry: Telemetry | None = None,
        counters: Counters | None = None,
        seed: int = 0,
    ) -> None:
        cfg = cfg or SwitchConfig()
        tel = telemetry if telemetry is not None else Telemetry()
        rng = random.Random(f"{seed}/{switch_id}")
        lb = LoadBalancer(cfg.lb, switch_id, rng)
        mmu = Mmu(cfg, len(ports))
        ecn = _markings("ecn", [None if t.ecn is None else Marking(t.ecn) for t in cfg.tcs])
        # The attributes a packet reads at every hop come first, in the order a hop reads them:
        # the compiled build lays a class's attributes out in the order of their first
        # assignment (as Port's), so a hop finds them in the object's first three cache lines,
        # where they were spread over all seven (issue 28: at 1,024 hosts a hop finds its
        # switch in no cache)
        #: ingress options that need the whole pipeline even for a forwarded packet
        self._slow_ingress = bool(cfg.latency_ns) or cfg.trust_pcp
        self.ports: list[Port] = []
        self._dscp_map = cfg.dscp_map
        #: the routing table as one exact-match dict per prefix length, longest first:
        #: ``(mask, {network: ports})`` (``()``: a withdrawn prefix); see :meth:`route`
        self._lpm: list[tuple[int, dict[int, tuple[int, ...]]]] = []
        # the per-class tables a packet reads at every hop: one list shared by every switch whose
        # table is the same (port.shared_table)
        #: per class: the load balancer hashes (ECMP), and its seed's key (Switch._arrive inlines it)
        self._lb_ecmp: list[bool] = shared_table("lb_ecmp", [m == "ecmp" for m in lb.modes])
        self._lb_key = lb.key
        self._wd_dropping: set[tuple[int, int]] = set()
        self.mmu = mmu
        #: per class: lossless (``tc in lossless`` as a list look-up, once per packet per hop)
        self._lossless: list[bool] = shared_table("lossless", [tc in mmu.lossless for tc in range(8)])
        self._ecn_avg: list[bool] = shared_table("ecn_avg", [e is not None and bool(e.weight_shift) for e in ecn])
        # queue-depth / port-byte samples cost a check per packet: none when nobody keeps them
        self._sample_ns = cfg.sample_ns if tel.wants("queue_depth") or tel.wants("port_bytes") else 0
        #: per class: arrivals update an average or a sample of its queue, so every packet
        #: enters the queue (no leaving at once from an idle port: _enqueue)
        self._queue_watch: list[bool] = shared_table(
            "queue_watch", [avg or bool(self._sample_ns) for avg in self._ecn_avg]
        )
        self.events = events if events is not None else EventQueue()
        #: called as ``on_transmit(switch, port, frame, start, end)`` when a frame starts on a link
        self.on_transmit: Callable[[Switch, int, bytearray, int, int], None] = self._to_outbox
        #: a Fabric's link hand-off; while ``on_transmit`` is this very object (nobody wrapped it,
        #: e.g. with a pcap tap) a frame goes straight onto the shared event heap (``_kick``)
        self.link_tx: object = None
        #: a packed path's marker bit and the width of a port index in it (LinkLoad.mark, .port_bits)
        self._port_bits = 0
        #: per-link accounting shared by a Fabric's switches (None: off); a packet then carries
        #: the links it crossed and the last switch reports it delivered (uet.fabric.model.linkload)
        self.link_load: LinkLoad | None = None
        self.rng = rng
        # the rest
        self.name = name
        self.id = switch_id
        self.cfg = cfg
        self._own_events = events is None
        self.telemetry = tel
        self.counters = counters if counters is not None else Counters()
        strict = tuple(tc for tc in range(8) if cfg.tcs[tc].strict)
        weights = {tc: cfg.tcs[tc].weight for tc in range(8)}
        for i, spec in enumerate(ports):
            mac = spec.mac or bytes((0x02, 0x5A, (switch_id >> 8) & 0xFF, switch_id & 0xFF, 0, i & 0xFF))
            port = Port(
                i,
                spec.rate_bps,
                spec.delay_ns,
                spec.mtu,
                mac=mac,
                strict=strict,
                weights=weights,
                strict_budget=cfg.strict_budget,
            )
            port.faces_host = spec.faces_host
            self.ports.append(port)
        #: ingress policing: per port, the theoretical arrival time (ns) and the burst tolerance
        #: (ns of link time; -1: not policed), module docstring
        self._tat = [0] * len(self.ports)
        self._police_tol = [
            (cfg.police_burst_bytes * 8_000_000_000) // p.rate_bps
            if cfg.police_burst_bytes is not None and p.faces_host
            else -1
            for p in self.ports
        ]
        self.lossless = mmu.lossless
        self.lb = lb
        self._ecn: list[Marking | None] = ecn
        # marking per egress port: a class with ``last_hop`` off is not marked towards a host
        lasthop = _markings("lasthop", [e if e is None or e.last_hop else None for e in self._ecn])
        for port in self.ports:
            port.ecn = lasthop if port.faces_host else self._ecn
        self._trim_tc = cfg.trim.tc
        #: whether records of a mark, a trim and a drop are kept, asked once here (as the samples'
        #: above): a marked packet otherwise costs a call of the (interpreted) telemetry
        self._tel_mark = tel.wants("ecn_mark")
        self._tel_trim = tel.wants("trim")
        self._tel_drop = tel.wants("drop")
        self._routes: list[tuple[int, int, int, tuple[int, ...]]] = []
        self._static: list[tuple[int, int, int, tuple[int, ...]]] = []
        self._overrides: dict[tuple[int, int], tuple[int, ...]] = {}
        self._pfc_gen = [[0] * 8 for _ in self.ports]
        self._wd_armed = False
        self._wd_prev = 0
        self._wd_since: dict[tuple[int, int], int] = {}
        self._wd_restore: dict[tuple[int, int], int] = {}
        #: per (port, priority): the last XOFF received, and the paused time at the last poll
        self._wd_last_xoff: dict[tuple[int, int], int] = {}
        self._wd_paused: dict[tuple[int, int], int] = {}
        self.outbox: list[Transmission] = []
        self._latency_ns: int = cfg.latency_ns
        self._trust_pcp: bool = bool(cfg.trust_pcp)
        #: the event handlers as bound-method objects made once (an event is ``(fn, a, b)``); the
        #: end of a frame is the event ``(self, port, None)``: the switch itself (:meth:`__call__`)
        self._wake_ev: Callable[[Port, object, int], None] = self._on_wake
        self._process_ev: Callable[[int, bytearray, int], None] = self._process
        self._schedule: Callable[..., None] = self.events.schedule
        #: a packed path's marker bit (LinkLoad.mark; its port width: ``_port_bits``, above)
        self._path_mark = 0

    # -- routing ------------------------------------------------------------------------------

    def add_route(self, prefix: str, ports: Sequence[int]) -> None:
        """Route ``prefix`` ("10.0.1.0/24") over the equal-cost egress ``ports``."""
        self.add_routes([(prefix, ports)])

    def add_routes(self, routes: Sequence[tuple[str, Sequence[int]]]) -> None:
        """:meth:`add_route` for each ``(prefix, ports)`` of ``routes`` in turn, the table built
        once at the end (a Fabric's switches take their routes this way: one build per route
        made a switch's set-up quadratic in its routes, issue 28)."""
        new = []
        for prefix, ports in routes:
            addr, _, plen_s = prefix.partition("/")
            plen = int(plen_s) if plen_s else 32
            mask = ((1 << 32) - 1) ^ ((1 << (32 - plen)) - 1)
            net = int.from_bytes(ip_bytes(addr), "big") & mask
            if not ports or any(not 0 <= p < len(self.ports) for p in ports):
                raise FabricError(f"{self.name}: bad egress ports {ports} for {prefix}")
            new.append((plen, net, mask, tuple(ports)))
        self._static.extend(new)
        self._static.sort(key=lambda r: -r[0])  # stable: routes of one length stay in their order
        self._install()

    def set_route_overrides(self, overrides: dict[tuple[int, int], tuple[int, ...]]) -> None:
        """Routing's answer to failed links (uet.fabric.model.failover): ``(prefix length,
        network)`` → the equal-cost ports that still lead there. An override replaces a static
        route of the same prefix or refines it with a longer one; an empty group withdraws the
        prefix (its packets are dropped as ``no_route``). ``{}`` restores the static table."""
        self._overrides = dict(overrides)
        self._install()

    def _install(self) -> None:
        full = (1 << 32) - 1
        over = [(plen, net, full ^ ((1 << (32 - plen)) - 1), g) for (plen, net), g in self._overrides.items()]
        # longest prefix first; at equal length an override before the static route it replaces
        merged = [(r, 0) for r in over] + [(r, 1) for r in self._static]
        merged.sort(key=lambda x: (-x[0][0], x[1]))
        self._routes = [r for r, _ in merged]
        by_len: dict[int, dict[int, tuple[int, ...]]] = {}
        for _plen, net, mask, ports in self._routes:
            by_len.setdefault(mask, {}).setdefault(net, ports)  # the first of a prefix wins
        self._lpm = list(by_len.items())  # insertion order: longest prefix first

    def static_routes(self) -> list[tuple[int, int, int, tuple[int, ...]]]:
        """The configured routes as ``(prefix length, network, mask, ports)``, longest first."""
        return list(self._static)

    def lookup(self, dst: bytes) -> tuple[int, ...] | None:
        """Equal-cost egress ports for the 4-byte destination, or None (longest prefix wins; a
        withdrawn prefix has no ports)."""
        return self.route(int.from_bytes(dst, "big"))

    def route(self, addr: int) -> tuple[int, ...] | None:
        """:meth:`lookup` for the destination as an integer: one exact-match probe per prefix
        length the table holds (a fat tree's switches hold one or two), longest first. Nothing is
        remembered per destination, so a switch's memory does not grow with the hosts it sees
        (a per-destination cache held switches × hosts entries: 10 million at 8,192 hosts)."""
        for mask, nets in self._lpm:
            group = nets.get(addr & mask)
            if group is not None:
                return group or None
        return None

    # -- public sans-I/O surface ---------------------------------------------------------------

    def receive(self, port: int, frame: bytes | bytearray, now: int) -> None:
        """A whole frame's last bit arrived on ``port`` at ``now``."""
        if self._own_events:
            if now < self.events.now:
                raise FabricError(f"{self.name}: time went backwards ({now} < {self.events.now})")
            self.events.run_until(now)
        self.ingress(port, bytearray(frame), now)

    def advance(self, now: int) -> None:
        """Run every timer due at or before ``now`` (links finishing frames, pauses ending, PFC
        refreshes, watchdog polls)."""
        self.events.run_until(now)

    def handle_timer(self, now: int) -> None:
        """The name the other sans-I/O cores give :meth:`advance` (a method of its own, not an alias:
        mypyc compiles no class-level alias of a method)."""
        self.events.run_until(now)

    def next_deadline(self) -> int | None:
        """When :meth:`advance` has something to do next, or None."""
        return self.events.next_time()

    def take_transmissions(self) -> list[Transmission]:
        """Frames started since the last call (standalone use)."""
        out, self.outbox = self.outbox, []
        return out

    def _to_outbox(self, sw: Switch, port: int, frame: bytearray, start: int, end: int) -> None:
        self.outbox.append(Transmission(port, bytes(frame), start, end, end + self.ports[port].delay_ns))

    def __call__(self, a: Any, b: Any, now: int) -> None:
        """The switch as an event handler (:class:`~uet.fabric.model.port.Node`): ``(switch, port,
        None)`` ends the frame on ``port`` (:meth:`_kick`), ``(switch, port index, packet)`` brings
        a forwarded :class:`Packet` (:meth:`_arrive`), ``(switch, port index, frame)`` a frame
        (:meth:`ingress`). ``Fabric.run_to_arrival`` makes these calls itself."""
        if b is None:
            self._kick(a, None, now)
        elif type(b) is Packet:
            self._arrive(a, b, now)
        else:
            self.ingress(a, b, now)

    # -- ingress --------------------------------------------------------------------------------

    def ingress(self, in_port: int, frame: bytearray, now: int) -> None:
        """Ingress pipeline for a frame that is fully received at ``now`` (may be mutated)."""
        pt = self.ports[in_port]
        n = len(frame)
        if pt.faulty and self._rx_fault(pt, n, now):
            return
        pt.rx_bytes += n
        pt.rx_frames += 1
        tol = self._police_tol[in_port]
        if tol >= 0:  # the frame took [now - ser, now] on the link: it may start once the last ended
            tat = (  # Port.ser_ns, inlined (once per frame a host sends)
                self._tat[in_port]
                + (((n if n > MIN_FRAME else MIN_FRAME) + pt.wire_overhead) * pt.ser_num + pt.ser_den - 1) // pt.ser_den
            )
            if tat - now > tol:  # sooner than the link could carry it, beyond the burst
                self._drop(in_port, 0, "policed", n, now)
                return
            self._tat[in_port] = tat if tat > now else now
        if n > pt.max_frame:
            self._drop(in_port, 0, "oversize", n, now)
            return
        if self._latency_ns:
            self.events.schedule(now + self._latency_ns, self._process_ev, in_port, frame)
        else:
            self._process(in_port, frame, now)

    def _process(self, in_port: int, frame: bytearray, now: int) -> None:
        h: tuple[int, int, int, int, int, int, int, int, int] | None = None
        if len(frame) >= 38:
            h = _L3_UNPACK(frame, 0)
        if h is not None and h[0] == _ETH_IPV4:
            # untagged IPv4: l3_offset's answer without the call, the header's fields in one read
            ip, pcp = 14, -1
            _et, vihl, tos, tot, ttl, proto, src, dst, ports = h
        else:
            proto = src = ports = -1  # (not read: the load balancer reads the frame if it hashes)
            try:
                et, ip, pcp = l3_offset(frame)
            except DecodeError:
                self._drop(in_port, 0, "malformed", len(frame), now)
                return
            if et == _ETH_MAC_CONTROL:
                self._on_mac_control(in_port, frame, ip, now)
                return
            if et != _ETH_IPV4 or len(frame) < ip + 20:
                self._drop(in_port, 0, "not_ipv4", len(frame), now)
                return
            vihl = frame[ip]
            tos = frame[ip + IP_TOS]
            tot = (frame[ip + IP_LEN] << 8) | frame[ip + IP_LEN + 1]
            ttl = frame[ip + IP_TTL]
            d = ip + IP_DST  # the destination address as an int, read byte by byte (no slice, no call)
            dst = (frame[d] << 24) | (frame[d + 1] << 16) | (frame[d + 2] << 8) | frame[d + 3]
        if vihl >> 4 != 4:
            self._drop(in_port, 0, "not_ipv4", len(frame), now)
            return
        # An IPv4 header shorter than 20 bytes, or a total length beyond the frame (truncated) or
        # shorter than the header: no router forwards it (RFC 1812 §5.2.2), count it as malformed.
        hl = (vihl & 0xF) << 2
        if hl < 20 or tot < hl or len(frame) < ip + tot:
            self._drop(in_port, 0, "malformed", len(frame), now)
            return
        by_pcp = pcp >= 0 and self._trust_pcp
        tc = pcp if by_pcp else self._dscp_map[tos >> 2]
        if ttl <= 1:
            self._drop(in_port, tc, "ttl_expired", len(frame), now)
            return
        group = None
        for mask, nets in self._lpm:  # Switch.route, inlined (as in _arrive)
            group = nets.get(dst & mask)
            if group is not None:
                break
        if not group:  # no route, or a withdrawn prefix
            self._drop(in_port, tc, "no_route", len(frame), now)
            return
        pkt = Packet(frame, in_port, tc, ip, now, dst)
        pkt.ttl = ttl
        if not by_pcp:
            pkt.dmap = self._dscp_map
        if self.link_load is not None:
            pkt.path = self._path_mark | self.ports[in_port].in_link
            if proto == 17 and vihl == 0x45 and ports & 0xFFFF == _UET_PORT:
                pkt.uet_src = src
        n = len(group)
        if n == 1:
            out = group[0]
        elif proto == 17 and vihl == 0x45 and self._lb_ecmp[tc]:
            # LoadBalancer.choose_pkt's ECMP (as in _arrive), the flow key (frames.flow_key) from
            # the fields read above
            c = pkt.fcrc = flow_key_udp(src, dst, ports)
            out = group[mix32(c ^ self._lb_key) % n]
        else:
            out = self.lb.choose_pkt(group, self.ports, pkt, tc, now)
        self._enqueue(pkt, out, now)

    def _arrive(self, in_port: int, pkt: Packet, now: int) -> None:
        """A packet another switch of the same :class:`Fabric` forwarded, fully received at
        ``now``: the :class:`Packet` that switch held, so what the first switch checked and
        learned stays (a well-formed untagged or tagged IPv4 frame, its IP offset, its
        destination key) and only what a hop changes is done again — counters, MTU, class from
        the DSCP (a trim may have changed it), TTL, route, admission. Frames from hosts always
        take the whole pipeline (:meth:`ingress`)."""
        pt = self.ports[in_port]
        frame = pkt.frame
        size = pkt.size
        if self._slow_ingress or size > pt.max_frame or pt.faulty:
            forward_rewrite(frame, pkt.ip, pkt.hops)  # the whole pipeline reads the frame as sent
            self.ingress(in_port, frame, now)
            return
        pt.rx_bytes += size
        pt.rx_frames += 1
        ip = pkt.ip
        dmap = self._dscp_map
        if pkt.dmap is dmap:  # the class the switch before read with this very table
            tc = pkt.tc
        else:
            tc = dmap[frame[ip + IP_TOS] >> 2]
            pkt.dmap = dmap
        ttl = pkt.ttl
        if ttl < 0:
            ttl = pkt.ttl = frame[ip + IP_TTL]
        if ttl - pkt.hops <= 1:  # the TTL the frame has left
            self._drop(in_port, tc, "ttl_expired", size, now)
            return
        addr = pkt.dst
        group = None
        for mask, nets in self._lpm:  # Switch.route, inlined
            group = nets.get(addr & mask)
            if group is not None:
                break
        if not group:  # no route, or a withdrawn prefix
            self._drop(in_port, tc, "no_route", size, now)
            return
        n = len(group)
        if n == 1:
            out = group[0]
        elif self._lb_ecmp[tc]:  # LoadBalancer.choose_pkt's ECMP, inlined (the rule is written there)
            c = pkt.fcrc
            if c < 0:
                c = pkt.fcrc = flow_key(frame, ip)
            h = c ^ self._lb_key
            h ^= h >> 16  # mix32
            lo = h & 0xFFFF
            h = (lo * 0xCA6B + (((h >> 16) * 0xCA6B + lo * 0x85EB) << 16)) & 0xFFFFFFFF
            h ^= h >> 13
            lo = h & 0xFFFF
            h = (lo * 0xAE35 + (((h >> 16) * 0xAE35 + lo * 0xC2B2) << 16)) & 0xFFFFFFFF
            out = group[(h ^ (h >> 16)) % n]
        else:
            out = self.lb.choose_pkt(group, self.ports, pkt, tc, now)
        pkt.in_port = in_port
        pkt.tc = tc
        pkt.t_enq = now
        self._enqueue(pkt, out, now)

    def _enqueue(self, pkt: Packet, out: int, now: int) -> None:
        port = self.ports[out]
        tc = pkt.tc
        if port.down:  # routing has not excluded the failed link yet (failover detection delay)
            self._lost(out, tc, "link_down", pkt.size, now)
            return
        if self._wd_dropping and (out, tc) in self._wd_dropping:
            self._drop(out, tc, "watchdog", pkt.size, now)
            return
        mmu = self.mmu
        size = pkt.size
        lossless = self._lossless[tc]
        # an idle link and nothing queued: the packet leaves at once, without passing through
        # its class queue (what _push and Port.pick would do, without the work)
        alone = (
            not port.backlog
            and port.busy_until <= now
            and not port.ctrl
            and (port.pause_hi <= now or port.paused_until[tc] <= now or port.ignore_pause[tc])
            and not self._queue_watch[tc]
        )
        reason = ""
        if lossless:
            reason = mmu.admit_lossless(pkt)
        else:
            # Mmu.admit_lossy, inlined (once per packet per hop; the rule is written there)
            qbytes = port.qbytes[tc] if port.backlog else 0  # (nothing queued: every class's is 0)
            static = mmu._static[tc]
            used = mmu.shared_used
            if static is not None and qbytes + size > static:
                reason = "queue_limit"
            elif mmu._dynamic[tc] and qbytes + size > int(mmu._alpha * (mmu.shared_size - used)):
                reason = "dynamic_threshold"
            elif used + size > mmu.shared_size:
                reason = "buffer_full"
            else:
                u = mmu.used + size
                if u > mmu.peak_used:
                    mmu.peak_used = u
                if not alone:  # one leaving at once is charged and given back in this instant:
                    pkt.pool = "shared"  # only the peak sees it (its pool stays "": _kick)
                    charged = mmu.ingress[pkt.in_port]
                    charged[tc] = charged[tc] + size
                    mmu.shared_used = used + size
                    mmu.used = u
        if reason:
            trim_cfg = self.cfg.trim
            if reason in _TRIMMABLE_REASONS and trim_cfg.enabled and tc in trim_cfg.tcs and is_uet(pkt.frame, pkt.ip):
                self._trim(pkt, port, now)
            else:
                self._drop(out, tc, reason, pkt.size, now)
            return
        if alone:
            nxt = port.rr_after[tc]  # Port.pick_alone, inlined
            if nxt < 0:
                port._strict_run += size
            else:
                port._rr = nxt
                port._fresh = True
                port.deficit[tc] = 0
                port._strict_run = 0
            self._kick(port, pkt, now)
        else:
            self._push(port, pkt, now)
        if lossless and mmu.should_xoff(pkt.in_port, tc):
            self._send_pfc(pkt.in_port, tc, now, xon=False, refresh=False)

    def _trim(self, pkt: Packet, port: Port, now: int) -> None:
        """§8.4: cut to the headers, re-mark, queue in the trimmed class or drop if that is full."""
        tcfg = self.cfg.trim
        frame, ip = pkt.frame, pkt.ip
        if pkt.hops:  # the stub is built from the frame as the switches before this one sent it
            forward_rewrite(frame, ip, pkt.hops)
            pkt.hops = 0
            pkt.ttl = -1
        keep = tcfg.trim_bytes or max(tcfg.min_bytes, uet_header_len(frame, ip))
        dscp = tcfg.dscp_lasthop if port.faces_host else tcfg.dscp_fabric
        stub = Packet(trim(frame, ip, keep, dscp), pkt.in_port, self._trim_tc, ip, now, pkt.dst)
        limit = self.cfg.tcs[self._trim_tc].limit
        mmu = self.mmu
        if (limit is not None and port.qbytes[self._trim_tc] + stub.size > limit) or (
            mmu.shared_used + stub.size > mmu.shared_size
        ):
            self._drop(port.index, self._trim_tc, "trim_queue_full", pkt.size, now)
            return
        mmu.charge_unconditional(stub)
        self.counters[("trim", self.name, port.index)] += 1
        if self._tel_trim:
            from uet.fabric.model.records import Trimmed  # records only when kept (telemetry)

            self.telemetry.add(Trimmed(now, self.name, port.index, pkt.size, stub.size, stub.frame[ip + IP_TOS] >> 2))
        self._push(port, stub, now)

    def _push(self, port: Port, pkt: Packet, now: int) -> None:
        tc = pkt.tc
        q = port.queues[tc]  # Port.push, inlined
        if q is _UNUSED:
            q = port.queue(tc)
        q.append(pkt)
        qb = port.qbytes
        qb[tc] = qb[tc] + pkt.size
        port.backlog += 1
        if self._ecn_avg[tc]:
            w = 1.0 / (1 << self._ecn[tc].weight_shift)  # type: ignore[union-attr]
            avg = port.avg_q
            avg[tc] = avg[tc] + w * (qb[tc] - avg[tc])
        if self._sample_ns and now - port.last_sample[tc] >= self._sample_ns:
            self._sample(port, tc, now)
        end = port.busy_until
        if end <= now:
            self._kick(port, None, now)
        elif port.free_at != end:
            port.free_at = end
            bucket = self.events.bucket(end)  # EventQueue.schedule, inlined (the contract is in its class)
            bucket.append(self)
            bucket.append(port)
            bucket.append(None)

    def _drop(self, port: int, tc: int, reason: str, size: int, now: int) -> None:
        c = self.counters
        c[("drop", self.name, reason)] += 1
        c[("drop_port", self.name, port, tc, reason)] += 1
        if self._tel_drop:
            from uet.fabric.model.records import Dropped  # records only when kept (telemetry)

            self.telemetry.add(Dropped(now, self.name, port, tc, reason, size))

    # -- egress ---------------------------------------------------------------------------------

    def _on_wake(self, port: Port, _: object, now: int) -> None:
        port.wake_at = -1
        self._kick(port, None, now)

    def _kick(self, port: Port, first: Packet | None, now: int) -> None:
        """Start the next frame on an idle link, if any class may send; ``first``: the packet
        :meth:`_enqueue` found alone at an idle port (the scheduler's choice already made, by
        :meth:`Port.pick_alone`), which leaves without entering its queue.

        A departing packet's buffer charge is released only after the link is marked busy: the
        XON that release may trigger can be queued on this very port and must not start a second
        frame on it. The end of a frame is an event only when something waits for the link
        (``Port.free_at``): a busy port given work schedules it then, as ``(_kick, port, None)``:
        the event is this method itself (its arguments in the event's order), no handler between.
        """
        while True:
            pkt: Packet | None
            if first is not None:
                pkt, first = first, None
                tc = pkt.tc
            else:
                if port.busy_until <= now and port.backlog and not port.ctrl:
                    c = port.pick(now)  # Port.ready's idle case, inlined
                    if c is None:  # every waiting class paused: ready() arms the wake-up (pick changes nothing then)
                        port.ready(now, self._schedule, self, self._wake_ev)
                        return
                else:
                    c = port.ready(now, self._schedule, self, self._wake_ev)  # the rule NICs share
                    if c is None:
                        return
                tc = c
                if tc == CTRL:
                    pkt = None
                    frame = bytearray(port.ctrl.popleft())
                else:
                    pkt = port.queues[tc].popleft()  # Port.pop, inlined
                    qb = port.qbytes
                    qb[tc] = qb[tc] - pkt.size
                    port.backlog -= 1
            if pkt is not None:
                size = pkt.size
                frame, ip = pkt.frame, pkt.ip
                ecn = port.ecn[tc]
                if ecn is not None:
                    # the queue left behind (compiled: a native float); nothing queued: every class's is 0
                    q: float = port.avg_q[tc] if ecn.weight_shift else (port.qbytes[tc] if port.backlog else 0)
                    if q > ecn.kmin:
                        p = ecn.probability(q)
                        if p >= 1.0 or self.rng.random() < p:
                            tos = frame[ip + IP_TOS]
                            bits = tos & 3
                            if bits == 1 or bits == 2:
                                rewrite_tos_ttl(frame, ip, tos | 3, frame[ip + IP_TTL])  # CE; the TTL waits (below)
                                self.counters[("mark", self.name, port.index, tc)] += 1
                                if self._tel_mark:
                                    from uet.fabric.model.records import EcnMarked  # records only when kept (telemetry)

                                    self.telemetry.add(EcnMarked(now, self.name, port.index, tc, int(q)))
                            elif bits == 0 and ecn.wred_drop and not self._lossless[tc]:
                                self._drop(port.index, tc, "wred", pkt.size, now)
                                if pkt.pool:  # "": never charged (left alone, _enqueue)
                                    self._release(pkt, now)
                                continue
                pkt.hops += 1  # TTL − 1, written when the frame leaves the switches (forward_rewrite)
                if self._lossless[tc]:  # only the watchdog reads it (Port.last_tx)
                    port.last_tx[tc] = now
                if tc == port.tc_run:  # Port.count_tc, inlined
                    port.tc_run_bytes += size
                else:
                    port.count_tc(tc, size)
                if self._sample_ns and (now - port.last_sample[tc] >= self._sample_ns or not port.qbytes[tc]):
                    self._sample(port, tc, now)  # and always when the queue drained: plots end at 0
            n = len(frame)
            # Port.ser_ns, inlined (the hottest line of the model)
            end = (
                now
                + (((n if n > MIN_FRAME else MIN_FRAME) + port.wire_overhead) * port.ser_num + port.ser_den - 1)
                // port.ser_den
            )
            port.busy_until = end
            port.tx_bytes += n
            port.tx_frames += 1
            ev = self.events  # EventQueue.schedule, inlined below (the contract is in its class)
            if port.backlog or port.ctrl:
                port.free_at = end
                bucket = ev.bucket(end)
                bucket.append(self)
                bucket.append(port)
                bucket.append(None)
            tx = self.on_transmit
            if tx is self.link_tx:
                # inside a Fabric, untapped: the frame reaches the far end after the propagation
                # delay (Fabric._on_transmit, inlined); a switch peer gets the packet itself
                at = end + port.delay_ns
                what: Any  # the event's third part (a flat bucket: uet.fabric.model.events)
                peer: Any = port.peer_node  # set for every port of a Fabric
                if pkt is not None and port.peer_switch:
                    # no MAC rewrite: no switch reads a forwarded packet's MACs, and the one that
                    # sends it to a host or a tap (below) writes them
                    what = pkt
                else:
                    if pkt is not None:
                        frame[0:12] = port.l2_rewrite
                        forward_rewrite(frame, pkt.ip, pkt.hops)
                        pkt.hops = 0
                        pkt.ttl = -1
                    what = frame
                peer_port: Any = port.peer_port  # boxed once (compiled build)
                bucket = ev.bucket(at)
                bucket.append(peer)
                bucket.append(peer_port)
                bucket.append(what)
            else:
                if pkt is not None:
                    frame[0:12] = port.l2_rewrite
                    forward_rewrite(frame, pkt.ip, pkt.hops)
                    pkt.hops = 0
                    pkt.ttl = -1
                tx(self, port.index, frame, now, end)
            if pkt is not None:
                path = pkt.path
                if path:
                    path = pkt.path = (path << self._port_bits) | port.index
                    load = self.link_load
                    if port.faces_host and load is not None:
                        load.deliver(frame, pkt.ip, path, port.wire_overhead, pkt.dst, pkt.uet_src)
                pool = pkt.pool
                if pool == "shared" and not self._lossless[tc]:
                    mmu = self.mmu  # Mmu.release of a lossy packet, inlined
                    charged = mmu.ingress[pkt.in_port]
                    charged[tc] = charged[tc] - size
                    mmu.used -= size
                    mmu.shared_used -= size
                    pkt.pool = ""
                elif pool:  # "": a lossy packet that left alone was never charged (_enqueue)
                    self._release(pkt, now)
            return

    def _release(self, pkt: Packet, now: int) -> None:
        self.mmu.release(pkt)
        tc = pkt.tc
        if tc in self.lossless and self.mmu.should_xon(pkt.in_port, tc):
            self._send_pfc(pkt.in_port, tc, now, xon=True, refresh=False)

    def _sample(self, port: Port, tc: int, now: int) -> None:
        last = port.last_sample
        last[tc] = now
        tel = self.telemetry
        if tel.wants("queue_depth"):
            from uet.fabric.model.records import QueueDepth  # records only when kept (telemetry)

            tel.add(QueueDepth(now, self.name, port.index, tc, port.qbytes[tc], len(port.queues[tc])))
        if now - last[8] >= self.cfg.sample_ns and tel.wants("port_bytes"):
            last[8] = now
            from uet.fabric.model.records import PortBytes  # records only when kept (telemetry)

            tel.add(PortBytes(now, self.name, port.index, port.tx_bytes, port.rx_bytes, port.tx_frames, port.rx_frames))

    # -- PFC: sender side (§8.5) ---------------------------------------------------------------

    def _send_pfc(self, p: int, tc: int, now: int, *, xon: bool, refresh: bool) -> None:
        """Queue a PFC frame for priority ``tc`` on port ``p`` (towards the upstream peer)."""
        port = self.ports[p]
        if port.down:  # nobody to pause or resume (port_down released the state)
            self.mmu.paused[p][tc] = False
            return
        pfc = self.cfg.pfc
        quanta = 0 if xon else pfc.pause_quanta
        port.send_ctrl(pfc_frame(port.mac, {tc: quanta}))
        self.mmu.paused[p][tc] = not xon
        self._pfc_gen[p][tc] += 1
        self.counters[("pfc_tx", self.name, p, tc, "xon" if xon else "xoff")] += 1
        if self.telemetry.wants("pfc_tx"):
            from uet.fabric.model.records import PfcSent  # records only when kept (telemetry)

            self.telemetry.add(PfcSent(now, self.name, p, tc, quanta, self.mmu.ingress[p][tc], refresh))
        if not xon:
            every = pfc.refresh_ns or max(1, port.pause_ns(quanta) // 2)
            self.events.schedule(now + every, self._on_pfc_refresh, (p, tc), self._pfc_gen[p][tc])
        self._kick(port, None, now)

    def _on_pfc_refresh(self, key: tuple[int, int], gen: int, now: int) -> None:
        p, tc = key
        if self._pfc_gen[p][tc] == gen and self.mmu.paused[p][tc]:
            self._send_pfc(p, tc, now, xon=False, refresh=True)

    # -- PFC: receiver side and watchdog ---------------------------------------------------------

    def _on_mac_control(self, in_port: int, frame: bytearray, off: int, now: int) -> None:
        try:
            pauses = parse_pause(frame, off)
        except DecodeError:
            self._drop(in_port, 0, "malformed", len(frame), now)
            return
        if pauses is None:
            self.counters[("mac_control_ignored", self.name, in_port)] += 1
            return
        port = self.ports[in_port]
        for prio, quanta in pauses.items():
            port.apply_pause(prio, quanta, now)
            self.counters[("pfc_rx", self.name, in_port, prio, "xon" if quanta == 0 else "xoff")] += 1
            if quanta:
                self._wd_last_xoff[(in_port, prio)] = now
                if port.ignore_pause[prio]:
                    self.counters[("watchdog_ignored", self.name, in_port, prio)] += 1
            if self.telemetry.wants("pfc_rx"):
                from uet.fabric.model.records import PfcReceived  # records only when kept (telemetry)

                self.telemetry.add(PfcReceived(now, self.name, in_port, prio, quanta))
            if quanta and prio in self.lossless and self.cfg.watchdog.enabled:
                self._wd_arm(now)
        self._kick(port, None, now)

    def _wd_arm(self, now: int) -> None:
        if not self._wd_armed:
            self._wd_armed = True
            self._wd_prev = now
            self.events.schedule(now + self.cfg.watchdog.poll_ns, self._wd_poll)

    def _wd_poll(self, _a: object, _b: object, now: int) -> None:
        """One watchdog poll (§8.5), as switch vendors' watchdogs work.

        Detect: a lossless queue holding packets is stuck when it is paused and sent nothing since
        the last poll, or when it spent at least :data:`STORM_PAUSED` of the interval paused — a
        storm of short pauses lets a frame out between two of them and used to go unseen (issue
        29 item 12: the watchdog never fired while an unrelated flow fell to a fifth). Stuck for
        ``detect_ns``: the queue stops honouring pause (and with ``drop`` flushes), counted.
        Restore: ``restore_ns`` after the storm was declared **and** after the last XOFF on that
        priority (SONiC's rule: a storm that goes on keeps the queue released instead of pausing
        it again every ``restore_ns``); the pause the storm left is cleared then."""
        wd = self.cfg.watchdog
        keep = False
        interval = now - self._wd_prev
        for port in self.ports:
            for tc in self.lossless:
                key = (port.index, tc)
                total = port.paused_ns(tc, now)
                paused_for = total - self._wd_paused.get(key, 0)
                self._wd_paused[key] = total
                until = self._wd_restore.get(key)
                if until is not None:
                    if now >= until and now - self._wd_last_xoff.get(key, 0) >= wd.restore_ns:
                        del self._wd_restore[key]
                        self._wd_dropping.discard(key)
                        port.ignore_pause[tc] = False
                        if port.paused_until[tc] > now:
                            port.apply_pause(tc, 0, now)
                        from uet.fabric.model.records import WatchdogEvent  # records only when kept (telemetry)

                        self.telemetry.add(WatchdogEvent(now, self.name, port.index, tc, "restored", wd.action, 0))
                        self._kick(port, None, now)
                    else:
                        keep = True
                        continue
                paused = port.paused_until[tc] > now
                mostly = interval > 0 and paused_for >= STORM_PAUSED * interval
                if paused or mostly:
                    keep = True
                stuck = bool(port.queues[tc]) and ((paused and port.last_tx[tc] < self._wd_prev) or mostly)
                if not stuck:
                    self._wd_since.pop(key, None)
                    continue
                since = self._wd_since.setdefault(key, self._wd_prev)
                if now - since >= wd.detect_ns:
                    self._wd_fire(port, tc, now)
                    keep = True
        self._wd_prev = now
        if keep:
            self.events.schedule(now + wd.poll_ns, self._wd_poll)
        else:
            self._wd_armed = False

    def _wd_fire(self, port: Port, tc: int, now: int) -> None:
        wd = self.cfg.watchdog
        key = (port.index, tc)
        self._wd_since.pop(key, None)
        self._wd_restore[key] = now + wd.restore_ns
        port.ignore_pause[tc] = True
        dropped = 0
        if wd.action == "drop":
            self._wd_dropping.add(key)
            while port.queues[tc]:
                pkt = port.pop(tc)
                self._release(pkt, now)
                self._drop(port.index, tc, "watchdog", pkt.size, now)
                dropped += 1
        self.counters[("watchdog", self.name, port.index, tc)] += 1
        from uet.fabric.model.records import WatchdogEvent  # records only when kept (telemetry)

        self.telemetry.add(WatchdogEvent(now, self.name, port.index, tc, "storm", wd.action, dropped))
        self._kick(port, None, now)

    # -- faults (uet.fabric.model.failover) -----------------------------------------------------

    def _rx_fault(self, pt: Port, size: int, now: int) -> bool:
        """A frame arriving over a failed or lossy link: lost (True) and counted, or not."""
        if pt.down:
            reason = "link_down"
        elif pt.loss_rng is not None and pt.loss_rng.random() < pt.loss:
            reason = "link_loss"
        else:
            return False
        self._lost(pt.index, 0, reason, size, now)
        return True

    def _lost(self, port: int, tc: int, reason: str, size: int, now: int) -> None:
        """A drop a fault caused, its bytes counted too (``lost_bytes``)."""
        self._drop(port, tc, reason, size, now)
        self.counters[("lost_bytes", self.name)] += size

    def port_down(self, p: int, now: int) -> None:
        """Port ``p``'s link failed at ``now``. What it held is lost and counted (``link_down``):
        the packets queued for it (their buffer charges are released, which may send XON on other
        ports) and the PFC frames waiting to go. The PFC state tied to the dead peer is released
        and counted (``pfc_released``): the pauses it sent us end, the XOFF we sent it is
        forgotten (no refresh, no XON towards nobody), the watchdog forgets the port. A frame
        already on the wire is lost at the far end, which is down too."""
        port = self.ports[p]
        port.down = port.faulty = True
        for tc in range(8):
            while port.queues[tc]:
                pkt = port.pop(tc)
                self._release(pkt, now)
                self._lost(p, tc, "link_down", pkt.size, now)
        while port.ctrl:
            self._lost(p, 0, "link_down", len(port.ctrl.popleft()), now)
        released = 0
        for tc in range(8):
            if port.paused_until[tc] > now:
                port.apply_pause(tc, 0, now)
                released += 1
            if self.mmu.paused[p][tc]:
                self.mmu.paused[p][tc] = False
                self._pfc_gen[p][tc] += 1
                released += 1
            key = (p, tc)
            self._wd_since.pop(key, None)
        if released:
            self.counters[("pfc_released", self.name, p)] += released

    def port_up(self, p: int, now: int) -> None:
        """Port ``p``'s link is back at ``now`` (routing takes it back after the hold-down)."""
        port = self.ports[p]
        port.down = False
        port.faulty = port.loss_rng is not None
        self._kick(port, None, now)

    # -- inspection -------------------------------------------------------------------------------

    def ingress_bytes(self, port: int, prio: int) -> int:
        """Bytes in the buffer charged to (ingress ``port``, ``prio``)."""
        return self.mmu.ingress[port][prio]

    def stats(self, now: int) -> dict[str, object]:
        """Per-port counters and buffer use at ``now`` (JSON-ready)."""
        return {
            "switch": self.name,
            "buffer_used": self.mmu.used,
            "buffer_peak": self.mmu.peak_used,
            "ports": [
                {
                    "port": p.index,
                    "tx_bytes": p.tx_bytes,
                    "rx_bytes": p.rx_bytes,
                    "tx_frames": p.tx_frames,
                    "rx_frames": p.rx_frames,
                    "queued": list(p.qbytes),
                    "paused_ns": [p.paused_ns(tc, now) for tc in range(8)],
                }
                for p in self.ports
            ],
        }
