"""The virtual-time engine: many FEP cores and one fabric model in one process, no sockets.

architecture.md "Engines": the engine owns an integer-nanosecond clock and advances it to the
earliest deadline of any core (:meth:`FepCore.get_timer`) or of the fabric
(:meth:`Fabric.next_deadline`). At each instant it

1. delivers the frames the fabric hands to hosts: each frame is parsed once by the one frame
   codec (:func:`uet.wire.frame.parse_udp_frame`) into a :class:`~uet.fep.Datagram` with its named
   fields (ECN bits, trimmed, last hop, source port) and the datagrams of one host and instant go
   to its core as one batch (``receive_batch``; a FEP core without TSS, whose links may hand it
   tuples, takes them as its packed ``(data, source, ecn | trim marks)`` through ``receive_marked``,
   parsed by the codec's packed copy :func:`uet.wire.frame.parse_marked`: no record per packet;
   an instant's only frame, the common case, goes to its core without the per-host batching);
2. fires the timers of every core whose deadline has come (``handle_timer``);
3. *flushes* every core that got input or an operation: ``datagrams_to_send(now)`` → each
   :class:`~uet.fep.Transmit` (for a FEP core without TSS its packed form,
   ``datagrams_to_send_packed`` with the TOS byte of the PDS type, ``FepCore.tos``) becomes one
   Ethernet/IPv4/UDP frame (entropy in the UDP source
   port, DSCP and ECN in the TOS byte; built by the host's :class:`uet.wire.frame.FrameBuilder`,
   the codec's copy of :func:`uet.wire.frame.build_udp_frame` with the sender's share of the
   header computed once, as a new bytearray handed to the NIC, ``HostNic.send_ipv4``: no copy
   there) injected at the host's NIC; then the core's events go to the host's
   ``on_event`` callback and its timer is re-armed.

**UDP checksums** (``udp_checksums``): nothing in the simulator verifies one (step 1 parses with
``verify=False``; switches never read the UDP header's checksum), so an engine built with
``udp_checksums=False`` leaves the field 0 — "no checksum", valid for UDP over IPv4 — and saves a
one's-complement sum over every datagram (issue 28: 4.7 % of a run's CPU). Every figure of a run
is the same either way (frame lengths and every other byte are unchanged); the simulator turns
checksums on when frames are captured (a pcap tap), where the bytes must be the real ones.

Per-core deadlines sit in one heap of ``(deadline, host)`` with lazy invalidation (a host's entry
counts only while it equals the host's armed deadline), so an instant costs O(log n) per core
touched, not O(n). Nothing reads a clock and nothing random happens here: a run is a function of
the cores' seeds and the fabric's seed (one seed → byte-identical results).

:meth:`Engine.step` runs instants until a core emitted events (someone above may need to act on
them) or ``limit`` is reached; the virtual-time event loop (:mod:`uet.sim.loop`) calls it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from uet.errors import UetError
from uet.fabric.model import Fabric
from uet.fep import Datagram, FepCore
from uet.wire.frame import FrameBuilder, ip_word_sum, parse_marked, parse_udp_frame
from uet.wire.net import UET_UDP_PORT, ip_bytes

if TYPE_CHECKING:
    from uet.roce.core import RoceCore

__all__ = ["Engine", "Host", "SimulationError"]

#: C functions as Final names: the compiled build keeps them in C statics (``heapq.heappop`` is a
#: look-up of the module's attribute at every call)
heappop: Final = heapq.heappop
heappush: Final = heapq.heappush


class SimulationError(UetError):
    """The simulation cannot go on (nothing left to happen while work is waiting, a bad setup)."""


class Host:
    """One FEP core on fabric host ``index``; ``on_event(event)`` receives the core's events."""

    __slots__ = (
        "index",
        "core",
        "ip",
        "mac",
        "gateway",
        "on_event",
        "armed",
        "dirty",
        "tx_frames",
        "port",
        "udp_checksum",
        "fep",
        "frames",
    )

    def __init__(self, index: int, core: FepCore | RoceCore, ip: bytes, mac: bytes, gateway: bytes) -> None:
        self.index = index
        self.core = core
        self.ip = ip
        self.mac = mac
        self.gateway = gateway
        self.on_event: Callable[[Any], None] | None = None
        #: the deadline this host has in the engine's heap (-1: none; an int, not None, so that
        #: the compiled build compares it natively)
        self.armed = -1
        self.dirty = False
        self.tx_frames = 0
        #: the UDP port of the core's transport (4793 UET; a RoCE core says 4791 in ``udp_port``)
        self.port: int = getattr(core, "udp_port", UET_UDP_PORT)
        self.udp_checksum: bool = getattr(core, "udp_checksum", True)
        #: the core when it takes and gives the packed tuples (module docstring): a FEP core
        #: without TSS; None for the others (typed apart from ``core``, so that the compiled build,
        #: uet.compiled, calls it natively)
        self.fep: FepCore | None = core if isinstance(core, FepCore) and core.tss is None else None
        #: builds this host's frames (set by :meth:`Engine.attach`)
        self.frames: FrameBuilder | None = None


class Engine:
    """Cores on the hosts of ``fabric`` (see the module docstring)."""

    def __init__(self, fabric: Fabric, *, udp_checksums: bool = True) -> None:
        self.fabric = fabric
        #: compute the UDP checksum of every frame built (module docstring)
        self.udp_checksums = udp_checksums
        self.now = 0
        self.hosts: list[Host | None] = [None] * len(fabric.hosts)
        self._heap: list[tuple[int, int]] = []
        #: destination address → its 4 bytes and their share of the IPv4 header checksum, one
        #: table for every host (a table per host grew with the peers each talks to: hosts²
        #: entries in an all-to-all); and the reverse, address (an integer) → text, for the frames delivered
        self._ips: dict[str, tuple[bytes, int]] = {}
        self._names: dict[int, str] = {}
        self._dirty: list[Host] = []
        self._events_out = False
        self._same = 0
        #: called as ``on_progress(now)`` every 16 instants (a progress display, which decides
        #: itself how often to show anything: at 1,024 hosts an instant can take 40 ms of CPU)
        self.on_progress: Callable[[int], None] | None = None
        #: statistics: instants run, frames injected and delivered, packet-hops (frames × links)
        self.instants = 0
        self.frames_in = 0
        self.frames_out = 0

    # -- setup --------------------------------------------------------------------------------------

    def attach(self, host: int, core: FepCore | RoceCore) -> Host:
        """Put ``core`` on fabric host ``host`` (its Fabric Address must be that host's IPv4)."""
        hp = self.fabric.hosts[host]
        if core.address != hp.ip:
            raise SimulationError(f"core {core.address} on host {hp.name} whose address is {hp.ip}")
        if self.hosts[host] is not None:
            raise SimulationError(f"host {hp.name} already has a core")
        h = Host(host, core, ip_bytes(hp.ip), hp.mac, self.fabric.gateway_mac(host))
        h.udp_checksum = h.udp_checksum and self.udp_checksums
        h.frames = FrameBuilder(h.ip, src_mac=h.mac, dst_mac=h.gateway, dport=h.port, udp_checksum=h.udp_checksum)
        self.hosts[host] = h
        core.tick(self.now)
        return h

    def touch(self, h: Host) -> None:
        """``h``'s core got an operation: flush it at the current instant."""
        if not h.dirty:
            h.dirty = True
            self._dirty.append(h)

    # -- running ------------------------------------------------------------------------------------

    def _core_deadline(self) -> int | None:
        """The earliest armed core deadline; stale heap entries (a host re-armed since) go."""
        heap = self._heap
        hosts = self.hosts
        while heap:
            t, i = heap[0]
            h = hosts[i]
            if h is not None and h.armed == t:
                return t
            heappop(heap)
        return None

    def next_time(self) -> int | None:
        """The next instant anything is due (a dirty core: now), or None when all is idle."""
        if self._dirty:
            return self.now
        t_core = self._core_deadline()
        t_fab = self.fabric.next_deadline()
        if t_core is None:
            return t_fab
        if t_fab is None or t_core < t_fab:
            return t_core
        return t_fab

    def step(self, limit: int | None) -> bool:
        """Run instants up to ``limit`` (None: no limit) until one emitted core events; True if
        events were emitted, False when idle or at ``limit`` (the clock then stands at
        ``limit``, or where the last work was when nothing is left).

        An instant is a time at which a core has something to do: frames reach it
        (:meth:`Fabric.run_to_arrival` runs the fabric alone up to there) or its timer is due."""
        self._events_out = False
        fabric = self.fabric
        hosts = self.hosts
        heap = self._heap
        while True:
            if self._dirty:
                self._flush()
                if self._events_out:
                    return True
            t_core = self._core_deadline()
            if t_core is not None and (limit is None or t_core <= limit):
                lim: int | None = t_core
            else:
                lim = limit
            t_arr = fabric.run_to_arrival(lim)
            if t_arr is not None:
                t = t_arr
            elif t_core is not None and lim == t_core:
                t = t_core
            else:
                # nothing for a core up to ``limit``: the fabric stands at ``limit`` (or went idle)
                if limit is not None and limit > self.now:
                    self.now = limit
                elif fabric.now > self.now:
                    self.now = fabric.now
                return False
            if t == self.now:
                self._same += 1
                if self._same > 100_000:
                    raise SimulationError(f"no progress at t = {t} ns: a core keeps asking for this instant")
            else:
                self._same = 0
            self.now = t
            self.instants += 1
            if not self.instants & 0xF and self.on_progress is not None:
                self.on_progress(t)
            if t_arr is not None:
                self._deliver(fabric.take_arrivals(), t)
            while heap and heap[0][0] <= t:
                at, i = heappop(heap)
                h = hosts[i]
                if h is not None and h.armed == at:
                    h.armed = -1
                    h.core.handle_timer(t)
                    if not h.dirty:
                        h.dirty = True
                        self._dirty.append(h)

    def _deliver(self, arrivals: list[tuple[int, int, bytearray]], now: int) -> None:
        """Hand ``arrivals`` to their hosts' cores (step 1 of the module docstring)."""
        if len(arrivals) == 1:
            self._deliver_one(arrivals[0][1], arrivals[0][2], now)
        else:
            self._deliver_many(arrivals, now)

    def _deliver_many(self, arrivals: list[tuple[int, int, bytearray]], now: int) -> None:
        """The general delivery: every frame parsed, one batch per host in first-arrival order."""
        hosts = self.hosts
        names = self._names
        batch: dict[int, list[Any]] = {}
        for _t, hi, frame in arrivals:
            h = hosts[hi]
            if h is None:
                continue
            d: Datagram | tuple[bytes, str, int] | None
            try:
                if h.fep is not None:  # (data, source, ecn | trim marks)
                    d = parse_marked(frame, h.port, names)
                else:
                    rx = parse_udp_frame(frame, port=h.port, verify=False)
                    d = (
                        None
                        if rx is None
                        else Datagram(rx.data, rx.source, rx.ecn, rx.trimmed, rx.last_hop, rx.source_port)
                    )
            except UetError:
                continue
            if d is None:
                continue
            self.frames_out += 1
            b = batch.get(hi)
            if b is None:
                batch[hi] = [d]
            else:
                b.append(d)
        for hi, items in batch.items():
            h = hosts[hi]
            assert h is not None
            fep = h.fep
            if fep is not None:
                fep.receive_marked(items, now)
            else:
                h.core.receive_batch(items, now)
            if not h.dirty:
                h.dirty = True
                self._dirty.append(h)

    def _deliver_one(self, hi: int, frame: bytearray, now: int) -> None:
        """:meth:`_deliver_many` of one frame to host ``hi`` (most instants deliver one frame):
        the same parse, the same one-item batch to the same core method and the same dirty
        mark, without the per-host batch dict and its loop. ``tests/test_sim_fastpaths.py``
        checks that runs give the same results through either."""
        h = self.hosts[hi]
        if h is None:
            return
        fep = h.fep
        if fep is None:  # a TSS or RoCEv2 host: the general path, not the hot one
            self._deliver_many([(now, hi, frame)], now)
            return
        try:
            d = parse_marked(frame, h.port, self._names)
        except UetError:
            return
        if d is None:
            return
        self.frames_out += 1
        fep.receive_marked([d], now)
        if not h.dirty:
            h.dirty = True
            self._dirty.append(h)

    def _flush(self) -> None:
        now = self.now
        nics = self.fabric.nics
        ips = self._ips
        while self._dirty:
            dirty, self._dirty = self._dirty, []
            for h in dirty:
                h.dirty = False
                core = h.core
                fep = h.fep
                # the builder and the NIC as typed objects, their methods called on them: the
                # compiled build calls those natively (a bound method kept in a local is a generic
                # call that parses its arguments, and getting it makes an object, per frame)
                fb = h.frames
                assert fb is not None  # set by attach
                nic = nics[h.index]
                if fep is not None:  # (data, destination, entropy), the TOS byte by the PDS type
                    out = fep.datagrams_to_send_packed(now)
                    if out:
                        tos = fep.tos
                        for d, dst, e in out:
                            ip = ips.get(dst)
                            if ip is None:
                                b = ip_bytes(dst)
                                ip = ips[dst] = (b, ip_word_sum(b))
                            tb = tos[d[0] >> 3]
                            nic.send_ipv4(fb.build_array(d, ip[0], ip[1], e, tb), tb, now)
                        h.tx_frames += len(out)
                        self.frames_in += len(out)
                else:
                    tx = core.datagrams_to_send(now)
                    if tx:
                        for t in tx:
                            ip = ips.get(t[1])
                            if ip is None:
                                b = ip_bytes(t[1])
                                ip = ips[t[1]] = (b, ip_word_sum(b))
                            tb = ((t[3] & 0x3F) << 2) | (t[4] & 3)
                            nic.send_ipv4(fb.build_array(bytes(t[0]), ip[0], ip[1], t[2], tb), tb, now)
                        h.tx_frames += len(tx)
                        self.frames_in += len(tx)
                ev = core.next_event()
                if ev is not None:
                    cb = h.on_event
                    while ev is not None:
                        if cb is not None:
                            cb(ev)
                        ev = core.next_event()
                    self._events_out = True
                timer = core.get_timer()
                at = -1 if timer is None else timer
                if at != h.armed:
                    h.armed = at
                    if at >= 0:
                        heappush(self._heap, (at, h.index))
