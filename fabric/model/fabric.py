"""A whole Clos fabric in one sans-I/O object: switches, links and host NIC ports in virtual time.

Surface (the seam for the asyncio ``uet-fabric`` process and for a virtual-time simulator):

* ``inject(host, frame, now)``: host ``host`` (index into :attr:`Fabric.hosts`, or its name or IP)
  hands its NIC a whole Ethernet frame at ``now``. The NIC serialises it at the host link rate.
* ``poll(now) -> [(host, frame)]``: run everything due up to ``now`` and return the frames that
  reached hosts (``poll_timed`` also gives each arrival time).
* ``next_deadline()``: when something is due next (None when the fabric is idle).
* ``telemetry`` (records) and ``counters`` (event counts) shared by every switch and NIC;
  ``stats(now)`` gives per-port bytes, queue and pause figures.

Internal links are modelled in-process: a frame that starts on a link at t reaches the far end at
t + serialisation + propagation, and the far end processes it then (store-and-forward).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uet.fabric.model.config import FabricError, check_thresholds
from uet.fabric.model.events import _DONE, EventQueue
from uet.fabric.model.faults import FaultConfig
from uet.fabric.model.flowmeter import FlowMeter
from uet.fabric.model.linkload import LinkLoad
from uet.fabric.model.nic import FrameSink, HostNic
from uet.fabric.model.plan import HostPlan, TopologyLike
from uet.fabric.model.port import Packet, Port
from uet.fabric.model.scaleup import GpuNic, scale_up_config
from uet.fabric.model.switch import Switch
from uet.fabric.model.telemetry import Counters, Telemetry

from uet.wire.net import ip_bytes

if TYPE_CHECKING:
    from uet.fabric.model.failover import Failover


class Fabric(FrameSink):
    """Switches and host NICs of ``topology`` wired together; see the module docstring.

    ``deliver_pfc``: also hand PFC frames the leaf sends to a host to ``poll`` (the NIC model
    always obeys them). ``seed`` seeds every switch's random generator (WRED draws, random
    spraying, adaptive tie-breaks) together with the switch id. ``faults``: a schedule of link
    and switch failures the fabric applies as its time passes (:mod:`uet.fabric.model.failover`).
    ``link_load``: count the flows
    and distinct data bytes of every directed link (:attr:`link_load`,
    :mod:`uet.fabric.model.linkload`); refused when a switch re-parses forwarded frames
    (``latency_ns`` or ``trust_pcp``), which would lose the path a packet carries.
    """

    def __init__(
        self,
        topology: TopologyLike | dict[str, Any] | str | None = None,
        *,
        seed: int = 0,
        telemetry: Telemetry | None = None,
        deliver_pfc: bool = False,
        link_load: bool = False,
        faults: FaultConfig | None = None,
    ) -> None:
        from uet.fabric.topology import Topology  # here, not above: topology imports this package

        if topology is None:
            topology = Topology()
        elif isinstance(topology, str):
            topology = Topology.builtin(topology)
        elif isinstance(topology, dict):
            topology = Topology.from_dict(topology)
        self.topology: TopologyLike = topology
        self.plan = plan = topology.plan()
        links = {(int(sp.rate_bps), int(sp.delay_ns)) for s in plan.switches if s.tier != "scaleup" for sp in s.ports}
        #: what the configuration rules let pass with a warning (config.check_thresholds)
        self.warnings = check_thresholds(topology.switch, sorted(links))
        self.events = EventQueue()
        self.telemetry = telemetry if telemetry is not None else Telemetry()
        self.counters = Counters()
        self.deliver_pfc = deliver_pfc
        #: every NIC's ``on_deliver``: one bound-method object, which HostNic.ingress compares by
        #: identity to call :meth:`_on_deliver` directly
        self.deliver_hook = self._on_deliver
        self.switches: dict[str, Switch] = {}
        cfg = topology.switch
        up_cfg = scale_up_config(cfg) if topology.has_scale_up else cfg
        for sp in plan.switches:
            sw = Switch(
                sp.name,
                sp.id,
                sp.ports,
                up_cfg if sp.tier == "scaleup" else cfg,
                events=self.events,
                telemetry=self.telemetry,
                counters=self.counters,
                seed=seed,
            )
            sw.add_routes(sp.routes)
            sw.on_transmit = self._on_transmit
            self.switches[sp.name] = sw
        self.hosts: list[HostPlan] = plan.hosts
        self.nics: list[HostNic] = []
        self._host_ids: dict[str, int] = {}
        mates: frozenset[int] = frozenset()
        strict = tuple(tc for tc in range(8) if cfg.tcs[tc].strict)
        weights = {tc: cfg.tcs[tc].weight for tc in range(8)}
        for i, hp in enumerate(plan.hosts):
            link = hp.link
            port = Port(0, link.rate_bps, link.delay_ns, link.mtu, mac=hp.mac, strict=strict, weights=weights)
            nic_class = HostNic if hp.scale_up is None else GpuNic
            nic = nic_class(i, hp.name, port, cfg, self.events, self.telemetry, self.counters)
            for k in range(1, len(hp.planes) + 1):  # one more NIC port per further plane
                nic.ports.append(
                    Port(k, link.rate_bps, link.delay_ns, link.mtu, mac=hp.mac, strict=strict, weights=weights)
                )
            if isinstance(nic, GpuNic):  # and one into the server's scale-up switch
                su, k = topology.scale_up, len(nic.ports)
                nic.ports.append(
                    Port(k, su.rate_bps, su.delay_ns, link.mtu, mac=hp.mac, strict=strict, weights=weights)
                )
                g = topology.gpus_per_server
                if hp.gpu == 0:  # one set of addresses per server, shared by its GPUs
                    mates = frozenset(_ip_int(h.ip) for h in plan.hosts[hp.server * g : (hp.server + 1) * g])
                nic.setup(_ip_int(hp.ip), mates, hp.gpu, g, topology.cross_rail_scale_up)
            nic.on_deliver = self.deliver_hook
            nic.fabric = self
            self.nics.append(nic)
            self._host_ids[hp.name] = i
            self._host_ids[hp.ip] = i
        nodes: dict[str, Switch | HostNic] = {**self.switches, **{n.name: n for n in self.nics}}
        link_tx = self._on_transmit  # one bound-method object: Switch._kick compares identity
        for nic in self.nics:
            nic.on_transmit = nic.link_tx = link_tx
        for sp in plan.switches:
            sw = self.switches[sp.name]
            sw.on_transmit = sw.link_tx = link_tx
            for port, (peer_name, peer_port) in zip(sw.ports, sp.peers, strict=True):
                peer = nodes[peer_name]
                port.peer = (peer, peer_port)
                port.peer_mac = peer.ports[peer_port].mac
                port.peer_node = peer
                port.peer_switch = isinstance(peer, Switch)
                port.peer_port = peer_port
                peer.ports[peer_port].peer = (sw, port.index)
                peer.ports[peer_port].peer_mac = port.mac
                if not isinstance(peer, Switch):  # a NIC's port hands its frames to this one (HostNic._kick)
                    peer.ports[peer_port].peer_node = sw
                    peer.ports[peer_port].peer_switch = True
                    peer.ports[peer_port].peer_port = port.index
        #: the frames that reached hosts, as ``(time, host, frame)``: the frame is the fabric's own
        #: bytearray, which nothing in the fabric holds or changes once it is delivered
        self._delivered: list[tuple[int, int, bytearray]] = []
        #: per-link flows and distinct data bytes (None unless ``link_load``)
        self.link_load: LinkLoad | None = None
        if link_load:
            if cfg.latency_ns or cfg.trust_pcp:
                raise FabricError("link_load: switches with latency_ns or trust_pcp re-parse every frame")
            self.link_load = self._number_links()
        #: per-flow delivery record (uet.fabric.model.flowmeter), None unless a caller sets one
        self.flow_meter: FlowMeter | None = None
        #: the fault schedule being applied (None: a perfect fabric)
        self.failover: Failover | None = None
        if faults:  # the module only when there are faults: a fault-free run never needs it
            from uet.fabric.model.failover import Failover

            self.failover = Failover(self, faults)

    def _number_links(self) -> LinkLoad:
        """Give every directed link an id (host NIC ports first, in host order, then each switch's
        ports) and tell each port the id of the link arriving at it."""
        load = LinkLoad()
        for nic in self.nics:
            nic.port.link_id = load.add_link(f"{nic.name}>{self.hosts[nic.index].switch}", nic.port)
            for port in nic.ports[1:]:  # a further plane's port, or the scale-up port of a GPU
                peer, _ = port.peer  # type: ignore[misc]
                port.link_id = load.add_link(f"{nic.name}:{port.index}>{peer.name}", port)
        for sw in self.switches.values():
            sw.link_load = load
            for port in sw.ports:
                peer, _ = port.peer  # type: ignore[misc]
                port.link_id = load.add_link(f"{sw.name}:{port.index}>{peer.name}", port)
        nodes: list[Any] = [*self.switches.values(), *self.nics]  # switches and NICs alike
        for node in nodes:
            out = [port.link_id for port in node.ports]
            for port in node.ports:
                peer, peer_port = port.peer
                port.in_link = peer.ports[peer_port].link_id
                load.set_next(port.in_link, out)
        for sw in self.switches.values():
            sw._path_mark = load.mark
            sw._port_bits = load.port_bits
        return load

    # -- the sans-I/O surface --------------------------------------------------------------------

    def host_index(self, host: int | str) -> int:
        """Index of a host given its index, name (``h3``) or IPv4 address."""
        if isinstance(host, int):
            if not 0 <= host < len(self.hosts):
                raise KeyError(f"no host {host}")
            return host
        return self._host_ids[host]

    def inject(self, host: int | str, frame: bytes | bytearray, now: int) -> None:
        """Host ``host`` transmits ``frame`` (a whole Ethernet frame without FCS) at ``now``."""
        if now < self.events.now:
            raise FabricError(f"inject at {now} after the fabric reached {self.events.now}")
        self.events.run_until(now)
        self.nics[self.host_index(host)].send(frame, now)

    def poll(self, now: int) -> list[tuple[int, bytes]]:
        """Advance to ``now``; frames delivered to hosts since the last poll as (host, frame)."""
        return [(h, f) for _, h, f in self.poll_timed(now)]

    def poll_timed(self, now: int) -> list[tuple[int, int, bytes]]:
        """Like :meth:`poll`, as ``(arrival time, host, frame)`` in arrival order."""
        self.events.run_until(now)
        out, self._delivered = self._delivered, []
        return [(t, h, bytes(f)) for t, h, f in out]

    def run_to_arrival(self, limit: int | None) -> int | None:
        """Run events in time order up to ``limit`` (None: no bound) but stop once frames reached
        hosts: after every event of that instant ran, return its time (take the frames with
        :meth:`take_arrivals`). None when nothing reached a host by ``limit`` (the fabric then
        stands at ``limit``) or, without a limit, when the fabric went idle.

        The simulator's loop: one call crosses all the instants at which only the fabric works
        (a frame moving between switches), instead of one poll per instant. Each instant is run
        as :meth:`EventQueue.run_instant` runs it, written out here (one call fewer per instant:
        about one per packet-hop in an incast, where most instants hold a single event), and the
        data path's events, whose handler is a switch or a NIC (``(node, a, b)``:
        :class:`~uet.fabric.model.port.Node`), are dispatched here as their ``__call__`` does:
        a direct call of the method (the compiled build calls it natively, without a call through
        a bound-method object and the parsing of its arguments)."""
        ev = self.events
        near = ev._near
        nb = ev._nb
        delivered = self._delivered
        if delivered:
            return ev.now
        bound = (1 << 62) if limit is None else limit
        while ev._head < len(near) or ev.refill():  # (the call only when no near time is left)
            head = ev._head
            t = near[head]
            if t > bound:
                break
            # EventQueue.run_instant, inlined: the head near time (the earliest) and its bucket,
            # which stay at the head while the instant runs (events it schedules for itself join
            # the bucket)
            ev.now = t
            bucket = nb[head]
            i = 0
            while i < len(bucket):  # a flat bucket (uet.fabric.model.events), its length read each
                fn = bucket[i]  # time: events the instant schedules for itself run in turn
                a = bucket[i + 1]
                b = bucket[i + 2]
                i += 3
                if type(fn) is Switch:  # Switch.__call__, written out (by frequency)
                    if type(b) is Packet:
                        fn._arrive(a, b, t)
                    elif b is None:
                        fn._kick(a, None, t)
                    else:
                        fn.ingress(a, b, t)
                elif isinstance(fn, HostNic):  # HostNic.__call__, written out
                    if b is None:
                        fn._kick(a, None, t)
                    else:
                        fn.ingress(a, b, t)
                else:
                    fn(a, b, t)
            # EventQueue.done, inlined (a call per instant costs pure Python more than its work)
            nb[head] = _DONE
            if ev._c1 == t:
                ev._c1 = -1
                ev._q1 = _DONE
            elif ev._c2 == t:
                ev._c2 = -1
                ev._q2 = _DONE
            head += 1
            if head == len(near):
                near.clear()
                nb.clear()
                head = 0
            elif head >= 32:
                del near[:head]
                del nb[:head]
                head = 0
            ev._head = head
            if delivered:
                return t
        if delivered:
            return ev.now
        if limit is not None and limit > ev.now:
            ev.now = limit
        return None

    def take_arrivals(self) -> list[tuple[int, int, bytearray]]:
        """The frames that reached hosts since the last call, as ``(time, host, frame)``; each
        frame is the bytearray the fabric carried, handed over (the fabric neither holds nor
        changes it any more; :meth:`poll_timed` gives copies as bytes).

        **Decision** (issue 28): the simulator parses each frame once and copies only its datagram
        out (``uet.wire.frame.parse_marked`` reads a bytearray in one C call), so a ``bytes`` copy
        of the whole frame per delivery was one copy too many: about 1,100 instructions a frame of
        the compiled build (a 4 KiB payload), 1 M of a one-flow run."""
        out, self._delivered = self._delivered, []
        return out

    def next_deadline(self) -> int | None:
        """Time of the next internal event (a frame arriving or finishing, a timer), or None."""
        return self.events.next_time()

    @property
    def now(self) -> int:
        """The latest time the fabric has been advanced to."""
        return self.events.now

    # -- wiring -----------------------------------------------------------------------------------

    def _on_transmit(self, node: Switch | HostNic, port_index: int, frame: bytearray, start: int, end: int) -> None:
        port = node.ports[port_index]
        peer, peer_port = port.peer  # type: ignore[misc]
        self.events.schedule(end + port.delay_ns, peer.ingress, peer_port, frame)

    def _on_deliver(self, host: int, frame: bytearray, now: int, is_pfc: bool) -> None:
        if self.flow_meter is not None and not is_pfc:
            self.flow_meter.deliver(now, frame)
        if not is_pfc or self.deliver_pfc:
            self._delivered.append((now, host, frame))

    # -- inspection --------------------------------------------------------------------------------

    def host_ip(self, host: int | str) -> str:
        return self.hosts[self.host_index(host)].ip

    def host_mac(self, host: int | str) -> bytes:
        return self.hosts[self.host_index(host)].mac

    def gateway_mac(self, host: int | str) -> bytes:
        """MAC of the leaf port a host is attached to (the destination MAC hosts send to)."""
        hp = self.hosts[self.host_index(host)]
        return self.switches[hp.switch].ports[hp.port].mac

    def stats(self, now: int | None = None) -> dict[str, Any]:
        """Per-switch and per-NIC byte, queue and pause figures at ``now`` (JSON-ready)."""
        t = self.now if now is None else now
        return {
            "switches": [sw.stats(t) for sw in self.switches.values()],
            "hosts": [
                {
                    "host": n.name,
                    "tx_bytes": n.port.tx_bytes,
                    "rx_bytes": n.port.rx_bytes,
                    "queued": list(n.port.qbytes),
                    "paused_ns": [n.port.paused_ns(tc, t) for tc in range(8)],
                }
                for n in self.nics
            ],
            "counters": {"/".join(map(str, k)): v for k, v in sorted(self.counters.items(), key=str)},
        }


def _ip_int(ip: str) -> int:
    return int.from_bytes(ip_bytes(ip), "big")
