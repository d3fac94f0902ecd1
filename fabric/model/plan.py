"""The wiring plan a :class:`uet.fabric.model.fabric.Fabric` is built from: every switch with its
ports, peers and routes, every host NIC with its link, and the links named.

A topology (:class:`uet.fabric.topology.Topology`: kinds, built-ins, addressing) produces a
:class:`Plan`; the model reads only the plan and the few topology properties
:class:`TopologyLike` declares, so it never imports the topology module (which builds on the
model's configuration).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from uet.fabric.model.config import SwitchConfig
from uet.fabric.model.switch import PortSpec

__all__ = [
    "HostPlan",
    "LinkPlan",
    "LinkSpec",
    "Plan",
    "ScaleUpSpec",
    "SwitchPlan",
    "TopologyLike",
    "plan_links",
]


@dataclass
class LinkSpec:
    """Rate in bit/s, one-way propagation delay in ns, IP MTU in bytes."""

    rate_bps: int = 1_000_000_000
    delay_ns: int = 1_000
    mtu: int = 1500

    def port(self, faces_host: bool = False) -> PortSpec:
        return PortSpec(int(self.rate_bps), int(self.delay_ns), int(self.mtu), faces_host)


@dataclass
class ScaleUpSpec:
    """The scale-up domain inside a server (NVLink/NVSwitch class): each GPU joined to the
    server's scale-up switch by one link of ``rate_bps`` (per direction) and ``delay_ns``.

    Defaults (**decision**, from the AI-fabric background material): NVLink 4 gives a GPU up to
    900 GB/s in total, i.e. 450 GB/s = 3.6 Tb/s each way; a scale-up network should stay under
    1 µs, so 250 ns a link (GPU → switch → GPU: 0.5 µs plus serialisation). ``rate_bps = 0``:
    no scale-up domain (GPUs of one server reach each other through the Ethernet fabric). The
    links carry the NIC's frames, so their MTU is the host link's."""

    rate_bps: int = 3_600_000_000_000
    delay_ns: int = 250

    def port(self, mtu: int, faces_host: bool = True) -> PortSpec:
        return PortSpec(int(self.rate_bps), int(self.delay_ns), int(mtu), faces_host)


@dataclass
class SwitchPlan:
    """One switch to build: its ports, the (node, port) at the far end of each, its routes."""

    name: str
    id: int
    tier: str
    ports: list[PortSpec] = field(default_factory=list)
    peers: list[tuple[str, int]] = field(default_factory=list)
    routes: list[tuple[str, list[int]]] = field(default_factory=list)


@dataclass
class HostPlan:
    """One host NIC: name, IPv4 address, MAC, the leaf and leaf port it hangs off, its link."""

    name: str
    ip: str
    mac: bytes
    switch: str
    port: int
    link: LinkSpec
    #: the NIC's further ports, one per further plane (``planes``): (leaf, leaf port) each
    planes: list[tuple[str, int]] = field(default_factory=list)
    #: the server this GPU's NIC belongs to (its index) and its GPU number in it (= its rail)
    server: int = 0
    gpu: int = 0
    #: the port of the server's scale-up switch this GPU hangs off (switch, port); None: none
    scale_up: tuple[str, int] | None = None


@dataclass
class Plan:
    """Everything a fabric is built from, independent of how it is run."""

    switches: list[SwitchPlan]
    hosts: list[HostPlan]


@dataclass(frozen=True)
class LinkPlan:
    """One full-duplex link of a plan, named after its ends, the lower tier first: ``h3-leaf0``,
    ``leaf3-spine1``, ``pod0-leaf1-pod0-spine0``, ``pod1-spine0-ss2``; parallel links between the
    same two switches add ``#i`` (``leaf0-spine1#1``). ``uplink``: a leaf's link to the tier
    above (what "N random uplinks" draws from)."""

    name: str
    a: str
    a_port: int
    b: str
    b_port: int
    uplink: bool


_TIER = {"scaleup": -1, "leaf": 0, "spine": 1, "superspine": 2}


def plan_links(plan: Plan) -> list[LinkPlan]:
    """Every link of ``plan`` once (host links first, in host order, then switch links in
    wiring order); see :class:`LinkPlan` for the names."""
    tier = {sp.name: _TIER[sp.tier] for sp in plan.switches}
    out = [LinkPlan(f"{h.name}-{h.switch}", h.name, 0, h.switch, h.port, False) for h in plan.hosts]
    out += [
        LinkPlan(f"{h.name}-{sw}", h.name, k, sw, port, False)
        for h in plan.hosts
        for k, (sw, port) in enumerate(h.planes, start=1)
    ]
    out += [
        LinkPlan(f"{h.name}-{h.scale_up[0]}", h.name, 1 + len(h.planes), h.scale_up[0], h.scale_up[1], False)
        for h in plan.hosts
        if h.scale_up is not None
    ]
    pairs: list[tuple[str, int, str, int]] = []
    for sp in plan.switches:
        for port, (peer, peer_port) in enumerate(sp.peers):
            if peer in tier and tier[sp.name] < tier[peer]:
                pairs.append((sp.name, port, peer, peer_port))
    count: dict[tuple[str, str], int] = {}
    for a, _, b, _ in pairs:
        count[(a, b)] = count.get((a, b), 0) + 1
    seen: dict[tuple[str, str], int] = {}
    for a, ap, b, bp in pairs:
        i = seen.get((a, b), 0)
        seen[(a, b)] = i + 1
        name = f"{a}-{b}" if count[(a, b)] == 1 else f"{a}-{b}#{i}"
        out.append(LinkPlan(name, a, ap, b, bp, tier[a] == 0))
    return out


class TopologyLike(Protocol):
    """What a fabric reads of its topology beyond the :class:`Plan` (``Topology`` is one)."""

    @property
    def kind(self) -> str: ...

    @property
    def switch(self) -> SwitchConfig: ...

    @property
    def scale_up(self) -> ScaleUpSpec: ...

    @property
    def gpus_per_server(self) -> int: ...

    @property
    def has_scale_up(self) -> bool: ...

    @property
    def cross_rail_scale_up(self) -> bool: ...

    def plan(self) -> Plan: ...
