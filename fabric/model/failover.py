"""Applying a fault schedule to a fabric, and routing around what failed (issue 27).

What the fabric does, modelled as switches do it:

* **A link fails** (``down``, a flap's down half, ``switch_down``): both ends stop at once. The
  packets queued for it and the PFC frames waiting to go are lost, a frame on the wire is lost at
  the far end, packets the switch still routes to it are lost — all counted as drops with reason
  ``link_down`` (and their bytes under ``lost_bytes``). The PFC state tied to the dead peer is
  released (``pfc_released``): pauses it sent end, the XOFF we sent it is forgotten.
* **Routing reacts after** ``detect_ns``: every switch removes from its ECMP groups the ports
  whose link is out of routing, and the ports whose next hop can no longer reach the destination
  (a spine that lost its link to leaf 3 withdraws leaf 3's prefix; the other leaves stop sending
  leaf 3's traffic to that spine). The fabric computes this from the switches' static routes,
  destination by destination — the converged state of a routing protocol, installed everywhere
  at the same instant (**decision**: one detection delay stands for detection plus propagation
  of the update). A link that comes back is used again ``holddown_ns`` after it came up; a
  prefix no port reaches any more is withdrawn (its packets drop as ``no_route``).
* **A degraded link** serialises at its reduced rate (both directions); routing keeps it (it is
  up: seeing it is the transport's job). **A lossy link** loses each arriving frame with its
  probability, from a generator seeded per link and direction (``link_loss``).

Each event is logged (:attr:`Failover.log`: time, link, what happened) and counted
(``("fault", kind, link)``, ``("reroute", switch)`` when a switch's table changed).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Protocol

from uet.fabric.model.config import FabricError
from uet.fabric.model.events import EventQueue
from uet.fabric.model.faults import FaultConfig, FaultEvent
from uet.fabric.model.nic import HostNic
from uet.fabric.model.plan import HostPlan, LinkPlan, Plan, plan_links
from uet.fabric.model.scaleup import GpuNic

from uet.wire.net import ip_bytes

if TYPE_CHECKING:
    from uet.fabric.model.switch import Switch
    from uet.fabric.model.telemetry import Counters


class Wired(Protocol):
    """What a :class:`Failover` reads of the fabric it acts on and schedules with
    (:class:`uet.fabric.model.fabric.Fabric` is one; declared here so the two modules do not
    import each other)."""

    @property
    def plan(self) -> Plan: ...

    @property
    def switches(self) -> dict[str, Switch]: ...

    @property
    def nics(self) -> list[HostNic]: ...

    @property
    def hosts(self) -> list[HostPlan]: ...

    @property
    def events(self) -> EventQueue: ...

    @property
    def counters(self) -> Counters: ...

    def host_index(self, host: int | str) -> int: ...


def resolve(cfg: FaultConfig, plan: Plan) -> list[list[LinkPlan]]:
    """The links each event of ``cfg`` acts on in ``plan`` (``uplinks:N`` drawn with the
    schedule's seed); :class:`FabricError` for a name the topology does not have."""
    return _Names(plan).resolve(cfg)


class _Names:
    def __init__(self, plan: Plan) -> None:
        self.switches = [sp.name for sp in plan.switches]
        self.links: dict[str, LinkPlan] = {}
        self._bundles: dict[str, list[LinkPlan]] = {}
        self._of_switch: dict[str, list[LinkPlan]] = {}
        for lk in plan_links(plan):
            self.links[lk.name] = lk
            self._bundles.setdefault(lk.name.partition("#")[0], []).append(lk)
            for end in (lk.a, lk.b):
                self._of_switch.setdefault(end, []).append(lk)

    def resolve(self, cfg: FaultConfig) -> list[list[LinkPlan]]:
        rng = random.Random(f"faults/{cfg.seed}")
        return [self._resolve(ev, rng) for ev in cfg.events]

    def _resolve(self, ev: FaultEvent, rng: random.Random) -> list[LinkPlan]:
        t = ev.target
        if ev.kind == "switch_down" and t.startswith("plane:"):
            prefix = f"p{t[6:]}-"
            sws = [s for s in self.switches if s.startswith(prefix)]
            if not sws:
                raise FabricError(f"switch_down: no {t!r} in this topology (planes are numbered from 0)")
            return list({lk.name: lk for s in sws for lk in self._of_switch.get(s, [])}.values())
        if ev.kind == "switch_down":
            if t not in self.switches:
                raise FabricError(f"switch_down: no switch {t!r} (e.g. {self.switches[-1]})")
            return self._of_switch.get(t, [])
        if t.startswith("uplinks:"):
            ups = [lk for lk in self.links.values() if lk.uplink]
            try:
                n = int(t[8:])
            except ValueError:
                n = -1
            if not 1 <= n <= len(ups):
                raise FabricError(f"{ev.kind} {t}: N must be in 1..{len(ups)} (the fabric's leaf uplinks)")
            return rng.sample(ups, n)
        if t in self.links:
            return [self.links[t]]
        if t in self._bundles:
            return self._bundles[t]
        a, _, b = t.partition("-")
        flipped = next((n for n in self._bundles if n == f"{b}-{a}"), None) if b else None
        if flipped:
            return self._bundles[flipped]
        example = next((n for n, lk in self.links.items() if lk.uplink), next(iter(self.links)))
        raise FabricError(f"{ev.kind}: no link {t!r} in this topology (links are named like {example})")


class Failover:
    """The schedule ``cfg`` applied to ``fabric`` (module docstring). Built by the fabric."""

    def __init__(self, fabric: Wired, cfg: FaultConfig) -> None:
        self.fabric = fabric
        self.cfg = cfg
        #: (time ns, link or switch, what happened), in time order
        self.log: list[tuple[int, str, str]] = []
        self._down: dict[str, int] = {}
        self._gen: dict[str, int] = {}
        #: every link an event acts on, by name
        self._touched: dict[str, LinkPlan] = {}
        for ev, links in zip(cfg.events, resolve(cfg, fabric.plan), strict=True):
            self._touched.update((lk.name, lk) for lk in links)
            self._schedule(ev, links)

    def _node(self, name: str) -> Switch | HostNic:
        f = self.fabric
        return f.switches[name] if name in f.switches else f.nics[f.host_index(name)]

    def _ports(self, lk: LinkPlan) -> list[tuple[Switch | HostNic, int]]:
        return [(self._node(lk.a), lk.a_port), (self._node(lk.b), lk.b_port)]

    # -- the schedule -------------------------------------------------------------------------

    def _schedule(self, ev: FaultEvent, links: list[LinkPlan]) -> None:
        at = self.fabric.events.schedule
        start, end = ev.at_ns, ev.until_ns
        name = ev.target
        if ev.kind in ("down", "switch_down"):
            at(start, self._fail, links, name)
            if end is not None:
                at(end, self._restore, links, name)
        elif ev.kind == "flap":
            assert end is not None
            t = start
            while t < end:
                at(t, self._fail, links, name)
                at(min(t + ev.period_ns // 2, end), self._restore, links, name)
                t += ev.period_ns
        elif ev.kind == "degrade":
            at(start, self._rate, links, ev.rate)
            if end is not None:
                at(end, self._rate, links, 1.0)
        else:
            at(start, self._loss, links, ev.loss)
            if end is not None:
                at(end, self._loss, links, 0.0)

    def _fail(self, links: list[LinkPlan], what: str, now: int) -> None:
        for lk in links:
            n = self._down.get(lk.name, 0)
            self._down[lk.name] = n + 1
            if n:
                continue  # already down (a switch and one of its links, say)
            for node, p in self._ports(lk):
                node.port_down(p, now)
            self._note(now, lk.name, "down")
            gen = self._gen[lk.name] = self._gen.get(lk.name, 0) + 1
            self.fabric.events.schedule(now + self.cfg.detect_ns, self._route, lk, (gen, False))

    def _restore(self, links: list[LinkPlan], what: str, now: int) -> None:
        for lk in links:
            n = self._down.get(lk.name, 0)
            if n == 0:
                continue
            self._down[lk.name] = n - 1
            if n > 1:
                continue
            for node, p in self._ports(lk):
                node.port_up(p, now)
            self._note(now, lk.name, "up")
            gen = self._gen[lk.name] = self._gen.get(lk.name, 0) + 1
            self.fabric.events.schedule(now + self.cfg.holddown_ns, self._route, lk, (gen, True))

    def _route(self, lk: LinkPlan, state: tuple[int, bool], now: int) -> None:
        gen, routable = state
        if self._gen.get(lk.name) != gen:
            return  # the link changed again before routing saw this change
        ports = self._ports(lk)
        if all(node.ports[p].routable == routable for node, p in ports):
            return
        for node, p in ports:
            node.ports[p].routable = routable
        self._note(now, lk.name, "routed_in" if routable else "routed_out")
        self.converge(now)

    def _rate(self, links: list[LinkPlan], factor: float, now: int) -> None:
        for lk in links:
            for node, p in self._ports(lk):
                port = node.ports[p]
                port.rate_bps = max(1, int(port.base_rate_bps * factor))
            self._note(now, lk.name, f"rate {factor:g}" if factor < 1 else "rate restored")

    def _loss(self, links: list[LinkPlan], loss: float, now: int) -> None:
        for lk in links:
            for i, (node, p) in enumerate(self._ports(lk)):
                port = node.ports[p]
                port.loss = loss
                port.loss_rng = random.Random(f"loss/{self.cfg.seed}/{lk.name}/{i}") if loss else None
                port.faulty = port.down or loss > 0
            self._note(now, lk.name, f"loss {loss:g}" if loss else "loss cleared")

    def _note(self, now: int, what: str, event: str) -> None:
        self.log.append((now, what, event))
        self.fabric.counters[("fault", event.split()[0], what)] += 1

    # -- routing ------------------------------------------------------------------------------

    def converge(self, now: int) -> None:
        """Install in every switch the ECMP groups that avoid links out of routing and next hops
        that cannot reach the destination (module docstring)."""
        f = self.fabric
        statics = {name: sw.static_routes() for name, sw in f.switches.items()}
        # per switch, per static route: {host index: the ports still leading to that host}
        found: dict[str, dict[int, dict[int, tuple[int, ...]]]] = {name: {} for name in f.switches}
        for d, hp in enumerate(f.hosts):
            a = int.from_bytes(ip_bytes(hp.ip), "big")
            memo: dict[str, tuple[int, ...]] = {}

            def group(name: str, d: int = d, a: int = a, memo: dict[str, tuple[int, ...]] = memo) -> tuple[int, ...]:
                got = memo.get(name)
                if got is not None:
                    return got
                memo[name] = ()  # up-down routing has no loops; a loop would read "unreachable"
                sw = f.switches[name]
                entry = next((i for i, r in enumerate(statics[name]) if a & r[2] == r[1]), None)
                if entry is None:
                    return ()
                ok = []
                for p in statics[name][entry][3]:
                    port = sw.ports[p]
                    if not port.routable:
                        continue
                    peer, _ = port.peer  # type: ignore[misc]
                    if isinstance(peer, GpuNic) and peer.index != d:  # a PXN proxy: on through its rail
                        reach = peer.port.routable and bool(group(f.hosts[peer.index].switch))
                    else:
                        reach = peer.index == d if isinstance(peer, HostNic) else bool(group(peer.name))
                    if reach:
                        ok.append(p)
                memo[name] = out = tuple(ok)
                found[name].setdefault(entry, {})[d] = out
                return out

            for name in f.switches:
                group(name)
        for name, sw in f.switches.items():
            over: dict[tuple[int, int], tuple[int, ...]] = {}
            for entry, per_host in found[name].items():
                plen, net, _, static = statics[name][entry]
                groups = set(per_host.values())
                if groups == {static}:
                    continue
                if len(groups) == 1:
                    over[(plen, net)] = groups.pop()
                    continue
                for d, g in per_host.items():
                    if g != static:
                        over[(32, int.from_bytes(ip_bytes(f.hosts[d].ip), "big"))] = g
            if over != sw._overrides:
                sw.set_route_overrides(over)
                f.counters[("reroute", name)] += 1

    # -- reports ------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """The events as they happened and what they cost (JSON-ready)."""
        c = self.fabric.counters
        lost = {r: sum(v for k, v in c.items() if k[0] == "drop" and k[2] == r) for r in ("link_down", "link_loss")}
        return {
            "detect_ns": self.cfg.detect_ns,
            "holddown_ns": self.cfg.holddown_ns,
            "events": [{"t_ns": t, "what": w, "event": e} for t, w, e in self.log],
            "lost_packets": lost,
            "lost_bytes": c.total("lost_bytes"),
            "no_route_drops": sum(v for k, v in c.items() if k[0] == "drop" and k[2] == "no_route"),
            "pfc_released": c.total("pfc_released"),
            "route_updates": c.total("reroute"),
            "links": {name: [[lk.a, lk.a_port], [lk.b, lk.b_port]] for name, lk in self._touched.items()},
        }
