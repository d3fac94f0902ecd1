"""The host end of a host↔leaf link, as the fabric models it.

An endpoint hands the fabric whole frames whenever it likes; the NIC port serialises them onto its
link at the link rate (its queues are the NIC's transmit queues, each class bounded by
``SwitchConfig.nic_queue_bytes``: a host sending far above its link rate loses the excess at its
own NIC, counted as ``drop``/``nic_queue_full``, rather than growing the model without bound),
classifies them by DSCP into the same eight classes as the switches, and honours PFC: a pause
frame from the leaf stops the paused class, which is how pause reaches the sender in an incast
(§8.5: "a host NIC pauses every QP mapped to that priority"). Frames arriving from the leaf are
handed to the host through ``on_deliver``; PFC frames are consumed here and, when the fabric is
asked to, passed on as well.

The NIC's PFC rule is written once, here, for the simulator and the live fabric link
(uet/link/fabric.py): :func:`receive_pause` applies a MAC-control frame (parsed by the one codec,
:func:`uet.fabric.model.frames.parse_pause`) to a :class:`~uet.fabric.model.port.Port`'s pause
timers (quanta × 512 bit times at the port's rate, rounded up as the switch model's ports do; a
classic 802.3x PAUSE pauses every class); frames of a paused class wait in order in the port's
class queue. :class:`HostNic` serialises its port at the link rate; :class:`PfcTransmit` is the same
transmit side without a link model, for the live link, whose socket and switch process serialise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from uet.fabric.model.config import SwitchConfig
from uet.fabric.model.events import EventQueue
from uet.fabric.model.frames import ETH_LEN, IP_TOS, l3_offset, parse_pause
from uet.fabric.model.port import CTRL, Packet, Port
from uet.fabric.model.telemetry import Counters, Telemetry

from uet.errors import DecodeError
from uet.wire.net import EtherType

_ETH_IPV4: Final = int(EtherType.IPV4)
_ETH_MAC_CONTROL: Final = int(EtherType.MAC_CONTROL)


def receive_pause(port: Port, frame: bytes | bytearray, now: int, off: int = ETH_LEN) -> dict[int, int] | None:
    """A NIC port receives the MAC-control frame whose body starts at ``frame[off]`` at ``now``:
    its pauses start, extend or end (0 quanta) the pause of each named class of ``port``
    (:meth:`Port.apply_pause <uet.fabric.model.port.Port.apply_pause>`). Returns the pauses applied,
    ``{priority: quanta}``; None for a MAC-control opcode that is neither PFC nor PAUSE or a
    truncated frame (nothing applied)."""
    try:
        pauses = parse_pause(frame, off)
    except DecodeError:
        return None
    for prio, quanta in (pauses or {}).items():
        port.apply_pause(prio, quanta, now)
    return pauses


class PfcTransmit:
    """The transmit side of a NIC port that honours PFC, without a link model (sans-I/O).

    The live fabric link (uet/link/fabric.py) hands every frame to :meth:`send` with its DSCP
    and the time: a frame whose class (the DSCP → TC table, as the switch classifies) is paused,
    or still has frames held, is held in order; :meth:`receive` takes a MAC-control frame;
    :meth:`due` hands the frames whose class may go again; :meth:`next_deadline` says when to ask.
    Times are integer ns on the caller's clock (virtual time under dilation). Counters, in the
    dict handed in: ``pfc_rx_xoff`` / ``pfc_rx_xon`` per class a frame paused or resumed,
    ``tx_held`` per frame held.
    """

    def __init__(self, rate_bps: int, dscp_map: tuple[int, ...], counters: dict[str, int] | None = None) -> None:
        #: the queues and pause timers (propagation delay and serialisation unused)
        self.port = Port(0, rate_bps, 0)
        self.dscp_map = dscp_map
        self.counters = counters if counters is not None else {}
        for k in ("pfc_rx_xoff", "pfc_rx_xon", "tx_held"):
            self.counters.setdefault(k, 0)

    def send(self, frame: bytes, dscp: int, now: int) -> bool:
        """True: ``frame`` may leave now. False: it is held; :meth:`due` releases it (at once
        when its class's pause has already run out)."""
        tc = self.dscp_map[dscp & 0x3F]
        port = self.port
        if port.queues[tc] or port.is_paused(tc, now):
            port.push(Packet(bytearray(frame), 0, tc, 0, now))
            self.counters["tx_held"] += 1
            return False
        return True

    def receive(self, frame: bytes | bytearray, off: int, now: int) -> bool:
        """A MAC-control frame (body at ``frame[off]``) arrived at ``now``: True when it was a PFC
        or PAUSE frame (applied), False when it is something else."""
        pauses = receive_pause(self.port, frame, now, off)
        if pauses is None:
            return False
        for quanta in pauses.values():
            self.counters["pfc_rx_xon" if quanta == 0 else "pfc_rx_xoff"] += 1
        return True

    def due(self, now: int) -> list[bytes]:
        """The held frames that may leave at ``now``, in order within each class."""
        port = self.port
        out = []
        while port.backlog:
            tc = port.pick(now)
            if tc is None:
                break
            out.append(bytes(port.pop(tc).frame))
        return out

    def next_deadline(self, now: int) -> int | None:
        """When a held class's pause ends (call :meth:`due` then), or None: nothing waits."""
        return self.port.next_resume(now)

    @property
    def held(self) -> int:
        """Frames waiting for their class to resume."""
        return self.port.backlog

    def paused_until(self, now: int) -> list[int]:
        """Per class, the end of its pause at ``now`` (0: not paused)."""
        return [u if u > now else 0 for u in self.port.paused_until]

    def clear(self) -> None:
        """Forget every held frame (the link closed)."""
        port = self.port
        for tc in range(8):
            while port.queues[tc]:
                port.pop(tc)


class FrameSink:
    """What a :class:`HostNic` hands the frames it receives to while nobody wrapped its
    ``on_deliver``: the :class:`~uet.fabric.model.fabric.Fabric`, which subclasses this. A base
    class here rather than the Fabric's own type, so that this module need not name the fabric's
    module, which imports it (an import cycle), while the compiled build still calls
    :meth:`_on_deliver` natively (a method of a compiled class, through its method table)."""

    #: the bound method set as every NIC's ``on_deliver`` (compared by identity)
    deliver_hook: Callable[[int, bytearray, int, bool], None]

    def _on_deliver(self, host: int, frame: bytearray, now: int, is_pfc: bool) -> None:
        """Take a frame the NIC of host index ``host`` received at ``now``."""
        raise NotImplementedError


class HostNic:
    """Host ``index`` (named ``name``) attached by one link; ``port`` is its transmit side."""

    def __init__(
        self,
        index: int,
        name: str,
        port: Port,
        cfg: SwitchConfig,
        events: EventQueue,
        telemetry: Telemetry,
        counters: Counters,
    ) -> None:
        self.index = index
        self.name = name
        self.port = port
        self.ports = [port]
        self.cfg = cfg
        self.events = events
        self.telemetry = telemetry
        self.counters = counters
        #: called as ``on_transmit(nic, 0, frame, start, end)`` when a frame starts on the link
        self.on_transmit: Callable[[HostNic, int, bytearray, int, int], None] | None = None
        #: a Fabric's link hand-off; while ``on_transmit`` is this very object (nobody wrapped it)
        #: a frame's arrival at the leaf goes straight onto the event queue (:meth:`_kick`)
        self.link_tx: object = None
        #: called as ``on_deliver(host index, frame, time, is_pfc)`` for frames from the leaf
        self.on_deliver: Callable[[int, bytearray, int, bool], None] | None = None
        #: the Fabric that set ``on_deliver``: while ``on_deliver`` is still its ``deliver_hook``
        #: (nobody wrapped it) the NIC calls ``Fabric._on_deliver`` directly, which the compiled
        #: build does natively (a callable attribute is a generic call that parses its arguments,
        #: once per frame a host receives)
        self.fabric: FrameSink | None = None
        #: ``nic_bytes`` samples (host-side throughput) every this many ns, 0: none kept
        self._sample_ns = cfg.sample_ns if telemetry.wants("nic_bytes") else 0
        self._last_sample = -(1 << 62)
        #: what :meth:`send` reads of the configuration per frame, read once here
        self._trust_pcp: bool = bool(cfg.trust_pcp)
        self._dscp_map: tuple[int, ...] = tuple(cfg.dscp_map)
        self._queue_cap: int | None = cfg.nic_queue_bytes
        #: the event handler of a pause's end as a bound-method object made once (an event is
        #: ``(fn, a, b)``); the end of a frame is the event ``(self, port, None)``: the NIC itself
        #: (:meth:`__call__`)
        self._wake_ev: Callable[[Port, object, int], None] = self._on_wake
        #: the queue's ``schedule`` as a bound-method object made once (as the switch's), handed
        #: to ``Port.ready`` when a frame ends and the port has more to send
        self._schedule: Callable[..., None] = events.schedule

    def send(self, frame: bytes | bytearray, now: int) -> None:
        """Queue a frame for transmission at ``now`` (after everything due before it)."""
        buf = bytearray(frame)
        port = self.port
        if port.down and len(self.ports) == 1:  # the host's link failed: nothing leaves (failover)
            self._lost("link_down", len(buf))
            return
        if len(buf) >= 34 and buf[12] == 8 and buf[13] == 0:
            et, ip, pcp = _ETH_IPV4, 14, -1  # untagged IPv4: l3_offset's answer without the call
        else:
            try:
                et, ip, pcp = l3_offset(buf)
            except DecodeError:
                self.counters[("nic_malformed", self.name)] += 1
                return
        if len(self.ports) > 1 and et == _ETH_IPV4:
            chosen = self._plane_port(buf, ip)
            if chosen is None:
                return
            port = chosen
        if et == _ETH_MAC_CONTROL:
            port.send_ctrl(bytes(buf))
        else:
            tc = 0
            if et == _ETH_IPV4 and len(buf) > ip + IP_TOS:
                tc = pcp if (pcp >= 0 and self._trust_pcp) else self._dscp_map[buf[ip + IP_TOS] >> 2]
            self._queue(port, buf, tc, ip, now)
            return
        self._kick(port, None, now)

    def send_ipv4(self, buf: bytearray, tos: int, now: int) -> None:
        """:meth:`send` of a frame its caller made and hands over (the NIC keeps and changes this
        very object): an untagged IPv4 frame of at least 34 bytes whose TOS byte is ``tos``.

        **Decision** (issue 28): the simulator builds each frame as a new bytearray and knows its
        TOS byte, so :meth:`send`'s copy (a 4 KiB frame: about 1,100 instructions of the compiled
        build) and its three reads of the frame's bytes (a generic call each, compiled) are not
        needed; a NIC with more than one port, or whose link is down, takes the general path."""
        port = self.port
        if len(self.ports) > 1 or port.down:
            self.send(buf, now)
            return
        self._queue(port, buf, self._dscp_map[tos >> 2], 14, now)

    def _queue(self, port: Port, buf: bytearray, tc: int, ip: int, now: int) -> None:
        """Queue the IPv4 frame ``buf`` of class ``tc`` (its IP header at ``ip``) on ``port``, or
        start it at once on an idle link; dropped and counted when the class's queue is full."""
        cap = self._queue_cap
        if cap is not None and (port.qbytes[tc] if port.backlog else 0) + len(buf) > cap:
            self.counters[("drop", self.name, "nic_queue_full")] += 1
            return
        if (
            not port.backlog
            and port.busy_until <= now
            and not port.ctrl
            and (port.pause_hi <= now or port.paused_until[tc] <= now or port.ignore_pause[tc])
        ):
            # an idle link and nothing queued: the frame leaves at once (as Switch._enqueue)
            port.pick_alone(tc, len(buf))
            self._kick(port, buf, now, tc)
            return
        port.push(Packet(buf, 0, tc, ip, now))
        self._kick(port, None, now)

    def _plane_port(self, buf: bytearray, ip: int) -> Port | None:
        """A NIC with a port in each plane: the port the frame's entropy (its UDP source port)
        hashes to among the ports routing still uses (a failed port leaves them after the
        detection delay: uet.fabric.model.failover), so a sprayed UET flow uses every plane and a
        RoCE QP keeps one until its port fails (**decision**: the NIC's own ECMP over its
        planes). None (dropped, counted) when no port is left or the chosen one is down."""
        up = [p for p in self.ports if p.routable]
        if not up:
            self._lost("link_down", len(buf))
            return None
        sport = (buf[ip + 20] << 8) | buf[ip + 21] if len(buf) >= ip + 22 and buf[ip + 9] == 17 else 0
        port = up[sport % len(up)]
        if port.down:
            self._lost("link_down", len(buf))
            return None
        return port

    def __call__(self, a: Any, b: Any, now: int) -> None:
        """The NIC as an event handler (:class:`~uet.fabric.model.port.Node`): ``(nic, port, None)``
        ends the frame on ``port`` (:meth:`_kick`), ``(nic, port index, frame)`` brings a frame
        (:meth:`ingress`). ``Fabric.run_to_arrival`` makes these calls itself."""
        if b is None:
            self._kick(a, None, now)
        else:
            self.ingress(a, b, now)

    def ingress(self, _port: int, frame: bytearray, now: int) -> None:
        """A frame from the leaf arrived completely at ``now``."""
        port = self.ports[_port]
        if port.faulty and (port.down or (port.loss_rng is not None and port.loss_rng.random() < port.loss)):
            self._lost("link_down" if port.down else "link_loss", len(frame))
            return
        port.rx_bytes += len(frame)
        port.rx_frames += 1
        if self._sample_ns and now - self._last_sample >= self._sample_ns:
            self._sample(now)
        # the EtherType byte by byte, the second only when the first is MAC control's: one read
        # (a generic call in the compiled build) per data frame
        is_pfc = len(frame) >= 14 and frame[12] == _ETH_MAC_CONTROL >> 8 and frame[13] == _ETH_MAC_CONTROL & 0xFF
        if is_pfc:
            for prio, quanta in (receive_pause(port, frame, now) or {}).items():
                self.counters[("pfc_rx", self.name, 0, prio, "xon" if quanta == 0 else "xoff")] += 1
                if self.telemetry.wants("pfc_rx"):
                    from uet.fabric.model.records import PfcReceived  # records only when kept (telemetry)

                    self.telemetry.add(PfcReceived(now, self.name, 0, prio, quanta))
            self._kick(port, None, now)
        deliver = self.on_deliver
        if deliver is not None:
            fab = self.fabric
            if fab is not None and deliver is fab.deliver_hook:
                fab._on_deliver(self.index, frame, now, is_pfc)
            else:
                deliver(self.index, frame, now, is_pfc)

    def port_down(self, p: int, now: int) -> None:
        """The host's link failed at ``now``: the frames in the NIC's queues are lost and counted
        (``link_down``) and the pauses the leaf sent end (``pfc_released``)."""
        port = self.ports[p]
        port.down = port.faulty = True
        for tc in range(8):
            while port.queues[tc]:
                self._lost("link_down", port.pop(tc).size)
        while port.ctrl:
            self._lost("link_down", len(port.ctrl.popleft()))
        released = 0
        for tc in range(8):
            if port.paused_until[tc] > now:
                port.apply_pause(tc, 0, now)
                released += 1
        if released:
            self.counters[("pfc_released", self.name, p)] += released

    def _lost(self, reason: str, size: int) -> None:
        self.counters[("drop", self.name, reason)] += 1
        self.counters[("lost_bytes", self.name)] += size

    def port_up(self, p: int, now: int) -> None:
        """The host's link is back at ``now``."""
        port = self.ports[p]
        port.down = False
        port.faulty = port.loss_rng is not None
        self._kick(port, None, now)

    def _on_wake(self, port: Port, _: object, now: int) -> None:
        port.wake_at = -1
        self._kick(port, None, now)

    def _kick(self, port: Port, first: bytearray | None, now: int, tc: int = CTRL) -> None:
        """Start the next frame on an idle link, if any class may send; ``first``: a frame of
        class ``tc`` that :meth:`send` found alone at an idle port (the scheduler's choice made
        by :meth:`Port.pick_alone`), which leaves without entering its queue. The end of a frame
        that leaves work waiting is the event ``(_kick, port, None)``: this method itself.

        Inside a :class:`~uet.fabric.model.fabric.Fabric`, while nobody wrapped ``on_transmit``
        (a pcap tap does), the frame's arrival at the leaf goes straight onto the event queue
        (``link_tx``, as ``Switch._kick`` does): the event ``Fabric._on_transmit`` would have
        scheduled, at the same point, without the two calls between."""
        if first is not None:
            frame = first
        else:
            if port.busy_until <= now and port.backlog and not port.ctrl:
                c = port.pick(now)  # Port.ready's idle case, inlined (as Switch._kick does)
                if c is None:  # every waiting class paused: ready() arms the wake-up (pick changes nothing then)
                    port.ready(now, self._schedule, self, self._wake_ev)
                    return
            else:
                c = port.ready(now, self._schedule, self, self._wake_ev)
                if c is None:
                    return
            tc = c
            if tc == CTRL:
                frame = bytearray(port.ctrl.popleft())
            else:
                frame = port.pop(tc).frame
        n = len(frame)
        if tc != CTRL:
            if tc == port.tc_run:  # Port.count_tc, inlined (a NIC's Packet.size: its frame is never changed)
                port.tc_run_bytes += n
            else:
                port.count_tc(tc, n)
        end = port.start(n, now)
        ev = self.events
        if port.backlog or port.ctrl:
            port.free_at = end
            ev.schedule(end, self, port)
        tx = self.on_transmit
        if tx is self.link_tx:
            at = end + port.delay_ns  # EventQueue.schedule, inlined (its contract)
            peer: Any = port.peer_node  # set for every port of a Fabric
            peer_port: Any = port.peer_port  # boxed once (compiled build)
            bucket = ev.bucket(at)
            bucket.append(peer)
            bucket.append(peer_port)
            bucket.append(frame)
        elif tx is not None:
            tx(self, port.index, frame, now, end)
        if self._sample_ns and now - self._last_sample >= self._sample_ns:
            self._sample(now)

    def _sample(self, now: int) -> None:
        self._last_sample = now
        p = self.port
        from uet.fabric.model.records import NicBytes  # records only when kept (telemetry)

        self.telemetry.add(NicBytes(now, self.name, 0, p.tx_bytes, p.rx_bytes, p.tx_frames, p.rx_frames))
