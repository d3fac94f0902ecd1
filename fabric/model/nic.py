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
"""

from __future__ import annotations

from collections.abc import Callable

from uet.fabric.model.config import SwitchConfig
from uet.fabric.model.events import EventQueue
from uet.fabric.model.frames import IP_TOS, l3_offset, parse_pause
from uet.fabric.model.port import CTRL, Packet, Port
from uet.fabric.model.telemetry import Counters, NicBytes, PfcReceived, Telemetry

from uet.errors import DecodeError
from uet.wire.net import EtherType

_ETH_IPV4 = int(EtherType.IPV4)
_ETH_MAC_CONTROL = int(EtherType.MAC_CONTROL)


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
        #: called as ``on_deliver(host index, frame, time, is_pfc)`` for frames from the leaf
        self.on_deliver: Callable[[int, bytearray, int, bool], None] | None = None
        #: ``nic_bytes`` samples (host-side throughput) every this many ns, 0: none kept
        self._sample_ns = cfg.sample_ns if telemetry.wants("nic_bytes") else 0
        self._last_sample = -(1 << 62)

    def send(self, frame: bytes | bytearray, now: int) -> None:
        """Queue a frame for transmission at ``now`` (after everything due before it)."""
        buf = bytearray(frame)
        port = self.port
        if port.down and len(self.ports) == 1:  # the host's link failed: nothing leaves (failover)
            self._lost("link_down", len(buf))
            return
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
            port.ctrl.append(bytes(buf))
        else:
            tc = 0
            if et == _ETH_IPV4 and len(buf) > ip + IP_TOS:
                tc = pcp if (pcp >= 0 and self.cfg.trust_pcp) else self.cfg.dscp_map[buf[ip + IP_TOS] >> 2]
            cap = self.cfg.nic_queue_bytes
            if cap is not None and port.qbytes[tc] + len(buf) > cap:
                self.counters[("drop", self.name, "nic_queue_full")] += 1
                return
            port.push(Packet(buf, 0, tc, ip, now))
        self._kick(port, now)

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
        is_pfc = len(frame) >= 14 and ((frame[12] << 8) | frame[13]) == _ETH_MAC_CONTROL
        if is_pfc:
            try:
                pauses = parse_pause(frame)
            except DecodeError:
                pauses = None
            for prio, quanta in (pauses or {}).items():
                port.apply_pause(prio, quanta, now)
                self.counters[("pfc_rx", self.name, 0, prio, "xon" if quanta == 0 else "xoff")] += 1
                if self.telemetry.wants("pfc_rx"):
                    self.telemetry.add(PfcReceived(now, self.name, 0, prio, quanta))
            self._kick(port, now)
        if self.on_deliver is not None:
            self.on_deliver(self.index, frame, now, is_pfc)

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
        self._kick(port, now)

    def _on_port_free(self, port: Port, _: object, now: int) -> None:
        if port.free_at == now:
            port.free_at = -1
        self._kick(port, now)

    def _on_wake(self, port: Port, _: object, now: int) -> None:
        port.wake_at = -1
        self._kick(port, now)

    def _kick(self, port: Port, now: int) -> None:
        if port.busy_until > now:
            # the end of a frame is an event only when something waits for the link
            if (port.backlog or port.ctrl) and port.free_at != port.busy_until:
                port.free_at = port.busy_until
                self.events.schedule(port.busy_until, self._on_port_free, port)
            return
        if not (port.backlog or port.ctrl):
            return
        tc = port.pick(now)
        if tc is None:
            t = port.next_resume(now)
            if t is not None and port.wake_at != t:
                port.wake_at = t
                self.events.schedule(t, self._on_wake, port)
            return
        if tc == CTRL:
            frame = bytearray(port.ctrl.popleft())
        else:
            pkt = port.pop(tc)
            frame = pkt.frame
            port.last_tx[tc] = now
            port.tx_tc_bytes[tc] += pkt.size
        end = now + port.ser_ns(len(frame))
        port.busy_until = end
        port.tx_bytes += len(frame)
        port.tx_frames += 1
        if port.backlog or port.ctrl:
            port.free_at = end
            self.events.schedule(end, self._on_port_free, port)
        if self.on_transmit is not None:
            self.on_transmit(self, port.index, frame, now, end)
        if self._sample_ns and now - self._last_sample >= self._sample_ns:
            self._sample(now)

    def _sample(self, now: int) -> None:
        self._last_sample = now
        p = self.port
        self.telemetry.add(NicBytes(now, self.name, 0, p.tx_bytes, p.rx_bytes, p.tx_frames, p.rx_frames))
