"""Fabric topologies: a description (dict / TOML table / built-in name) and the wiring it implies.

Kinds (rocev2-and-fabric.md §8.8):

* ``leaf_spine`` (default): L leaves, S spines, H hosts per leaf, every leaf joined to every spine
  by ``parallel_links`` links. Host h on leaf l is 10.0.l.(h+1) (§8.8 decision). Leaf routes: each
  local host's /32 → its port, everything else → all uplinks (ECMP group). Spine routes:
  10.0.l.0/24 → the link(s) to leaf l.
* ``rail``: rail-optimised leaf/spine (issue 26). ``groups`` groups of H servers of ``rails`` GPUs
  (8 by default), each GPU with its own NIC; NIC r of every server in group g attaches to rail
  leaf g·rails + r, so same-rail traffic stays under one leaf and crosses the spines only between
  rails. Hosts are named ``srv{n}-nic{r}`` and numbered server by server (server s, GPU g: host
  s·G + g). Each server has a scale-up domain (``scale_up``: a switch ``srv{s}-nvs`` joined to its
  GPUs by NVLink-class links) that carries all traffic between GPUs of one server
  (:mod:`uet.fabric.model.scaleup`); ``pxn``: cross-rail traffic too (one group only).
* ``rail_only``: the rail kind without spines (``groups = 1``: one leaf per rail); a GPU reaches
  another rail through its server's scale-up domain and the NIC of the GPU on that rail (PXN).
* ``rail_pods``: ``pods`` pods, each ``groups`` rail groups with ``spines`` pod spines, under
  ``superspines`` super-spines as ``three_tier``; host h of leaf l of pod p is 10.p.l.(h+1).
* ``three_tier``: ``pods`` pods of L leaves and S spines (a 2-tier Clos each) under ``superspines``
  super-spines arranged in S planes: spine s of every pod connects to the super-spines j with
  j mod S = s. Host h on leaf l of pod p is 10.p.l.(h+1); a pod spine routes its pod's /24s down
  and everything else up; a super-spine routes 10.p.0.0/16 to pod p.
* ``fat_tree``: the k-ary fat tree (Al-Fares et al.), a 3-tier Clos sized from a host count the
  way htsim builds one from its node count: ``k`` is the smallest even number with k³/4 ≥
  ``hosts`` (or given as ``k``); k pods of k/2 leaves (edge) and k/2 spines (aggregation), k/2
  hosts per leaf and (k/2)² super-spines (core), spine s of each pod joined to the k/2 core
  switches j ≡ s (mod k/2) — i.e. ``three_tier`` with pods = k, leaves = spines = hosts_per_leaf =
  k/2, superspines = (k/2)² (same addressing and routes). Every switch has k ports; the tree is
  built whole (k³/4 hosts), a run uses its first ``hosts``. 1,024 hosts: k = 16, 320 switches.

Up-down routing everywhere, so there is no cyclic buffer dependency (§8.8) and PFC cannot deadlock
unless a test builds a loop on purpose.

**Built-ins:** ``default`` is 2 leaves × 2 spines × 4 hosts per leaf (2:1 oversubscribed at equal
rates); ``lab`` is the §8.9 lab profile, 4 leaves × 2 hosts, 2 spines (1:1); ``rail`` is 2 groups
× 2 rails × 4 servers (8 servers of 2 GPUs); ``rail_only`` 8 servers of 4 GPUs on 4 rail leaves;
``rail_pods`` 2 pods × 2 groups × 2 rails × 2 servers (8 servers of 2 GPUs); ``three_tier`` is
2 pods × (2 leaves, 2 spines) × 2 hosts per leaf under 2 super-spines. All links default to
1 Gb/s with 1 µs propagation and a 1500-byte IP MTU.

**Scaling:** measured on one CPU core of the development machine (CPython 3.11): about 12 µs
per frame per switch hop and about 60 µs per cross-leaf frame end to end (NIC, three switches,
delivery), i.e. some 17 000 frames/s or 140 Mb/s of 1 KB frames summed over the whole fabric.
Virtual time has no such limit (a test simply runs slower than the network it models), so the
§8.9 lab profile (1 Gb/s) suits tests, simulations and demos; a real-time ``uet-fabric`` process
keeps up with 1 Gb/s links only under light load. For a real-time run at 100 Mb/s links recompute
the thresholds with the §8.9 rules: bytes in units of the BDP (see
:func:`uet.fabric.model.config.scaled`), time constants such as the flowlet gap × k_t, watchdog
≥ 100 × RTT.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from uet.fabric.model.config import FabricError, SwitchConfig
from uet.fabric.model.plan import HostPlan, LinkSpec, Plan, ScaleUpSpec, SwitchPlan

from uet.wire.net import ip_bytes

KINDS = ("leaf_spine", "rail", "rail_only", "rail_pods", "three_tier", "fat_tree")
#: the rail-optimised kinds: servers of ``rails`` GPUs, GPU i's NIC on a rail-i leaf
RAIL_KINDS = ("rail", "rail_only", "rail_pods")
#: rank placements (:meth:`Topology.placement`); an explicit list of host indices is the third way
PLACEMENTS = ("rail", "server")


@dataclass
class Topology:
    """A fabric description; see the module docstring for the kinds and built-ins."""

    kind: str = "leaf_spine"
    leaves: int = 2
    spines: int = 2
    hosts_per_leaf: int = 4
    parallel_links: int = 1
    #: rail kinds: GPUs per server, each with its own NIC on its own rail (GPU i → rail i)
    rails: int = 8
    groups: int = 2
    pods: int = 2
    superspines: int = 2
    #: ``fat_tree``: the hosts the tree must hold (k sized from it) or ``k`` itself (0: from hosts)
    hosts: int = 16
    k: int = 0
    #: ``leaf_spine``: independent copies of the leaf/spine fabric (planes); every host NIC has
    #: one port in each, with the same address (dual-plane designs, issue 27)
    planes: int = 1
    host_link: LinkSpec = field(default_factory=LinkSpec)
    fabric_link: LinkSpec = field(default_factory=LinkSpec)
    switch: SwitchConfig = field(default_factory=SwitchConfig)
    #: rail kinds: the scale-up domain inside each server (``rate_bps = 0``: none)
    scale_up: ScaleUpSpec = field(default_factory=ScaleUpSpec)
    #: rail kinds: cross-rail traffic goes over the scale-up domain to the GPU on the destination's
    #: rail and leaves on that rail (NCCL's PXN); always so on ``rail_only`` (no spines to cross)
    pxn: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FabricError(f"unknown topology kind {self.kind!r}; one of {KINDS}")
        if min(self.leaves, self.spines, self.hosts_per_leaf, self.parallel_links) < 1:
            raise FabricError("leaves, spines, hosts_per_leaf and parallel_links must be ≥ 1")
        if self.hosts_per_leaf > 254 or self.leaves > 256:
            raise FabricError("addressing 10.p.l.(h+1) allows 256 leaves and 254 hosts per leaf")
        if self.kind == "fat_tree":
            k = self.fat_k
            if k < 2 or k % 2 or k > 64:
                raise FabricError("a fat tree needs an even k in 2..64")
        if self.planes < 1 or (self.planes > 1 and self.kind != "leaf_spine") or self.planes > 8:
            raise FabricError("planes: 1..8, and more than one only for a leaf_spine topology")
        if self.kind in ("three_tier", "rail_pods") and self.superspines % self.spines:
            raise FabricError("superspines must be a multiple of spines (one plane per pod spine)")
        if self.kind in RAIL_KINDS and not 1 <= self.rails <= 64:
            raise FabricError("rails (GPUs per server): 1..64")
        if self.kind in RAIL_KINDS and self.leaves_per_pod > 256:
            raise FabricError("addressing 10.p.l.(h+1) allows 256 leaves: groups × rails ≤ 256")
        if self.kind == "rail_only" and self.groups != 1:
            raise FabricError("rail_only: one leaf per rail (groups = 1); without spines groups cannot meet")
        if self.kind == "rail_only" and not self.scale_up.rate_bps:
            raise FabricError("rail_only: cross-rail traffic needs the scale-up domain (scale_up.rate_bps > 0)")
        if self.pxn and self.kind not in ("rail", "rail_only"):
            raise FabricError("pxn: on the rail and rail_only kinds")
        if self.pxn and self.kind == "rail" and self.groups != 1:
            raise FabricError("pxn on rail: one group (a leaf per rail), as rail_only")
        if self.scale_up.rate_bps < 0 or self.scale_up.delay_ns < 0:
            raise FabricError("scale_up: rate_bps and delay_ns must be ≥ 0")

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Topology:
        """From a dict shaped like the TOML table ``[topology]``: the scalar fields above,
        ``[host_link]`` / ``[fabric_link]`` tables and a ``[switch]`` table for
        :meth:`SwitchConfig.from_dict`. ``builtin = "lab"`` starts from a built-in."""
        d = dict(d)
        base = cls.builtin(d.pop("builtin")) if "builtin" in d else cls()
        over: dict[str, Any] = {}
        for name in ("host_link", "fabric_link"):
            if name in d:
                over[name] = LinkSpec(**{**vars(getattr(base, name)), **d.pop(name)})
        if "scale_up" in d:
            over["scale_up"] = ScaleUpSpec(**{**vars(base.scale_up), **d.pop("scale_up")})
        if "switch" in d:
            over["switch"] = SwitchConfig.from_dict(d.pop("switch"))
        known = {f.name for f in fields(cls)}
        bad = set(d) - known
        if bad:
            raise FabricError(f"topology: unknown option(s) {sorted(bad)}")
        over.update(d)
        return cls(**{**{f.name: getattr(base, f.name) for f in fields(cls)}, **over})

    @classmethod
    def builtin(cls, name: str) -> Topology:
        """One of ``default``, ``lab``, ``rail``, ``rail_only``, ``rail_pods``, ``three_tier``,
        ``fat_tree`` (k = 4, 16 hosts)."""
        if name == "default":
            return cls()
        if name == "lab":
            return cls(leaves=4, spines=2, hosts_per_leaf=2)
        if name == "rail":
            return cls(kind="rail", rails=2, groups=2, hosts_per_leaf=4, spines=2)
        if name == "rail_only":
            return cls(kind="rail_only", rails=4, groups=1, hosts_per_leaf=8)
        if name == "rail_pods":
            return cls(kind="rail_pods", pods=2, groups=2, rails=2, hosts_per_leaf=2, spines=2, superspines=2)
        if name == "three_tier":
            return cls(kind="three_tier", pods=2, leaves=2, spines=2, superspines=2, hosts_per_leaf=2)
        if name == "fat_tree":
            return cls(kind="fat_tree", hosts=16)
        raise FabricError(f"unknown built-in topology {name!r}")

    @property
    def fat_k(self) -> int:
        """The fat tree's k: ``k`` when set, else sized from ``hosts``."""
        return self.k or fat_tree_k(self.hosts)

    def host_count(self) -> int:
        """How many hosts :meth:`plan` builds."""
        if self.kind == "fat_tree":
            return self.fat_k**3 // 4
        if self.kind in RAIL_KINDS:
            return self.pod_count * self.leaves_per_pod * self.hosts_per_leaf
        if self.kind == "three_tier":
            return self.pods * self.leaves * self.hosts_per_leaf
        return self.leaves * self.hosts_per_leaf

    def copy(self) -> Topology:
        return copy.deepcopy(self)

    # -- servers and placement ---------------------------------------------------------------------

    @property
    def max_path_links(self) -> int:
        """Links of the longest host-to-host path through the Ethernet fabric: 6 across the
        super-spines of the 3-tier kinds, 2 on ``rail_only`` (one rail leaf; a cross-rail hop
        adds only scale-up links), 4 through a spine otherwise."""
        if self.kind in ("three_tier", "fat_tree", "rail_pods"):
            return 6
        return 2 if self.kind == "rail_only" else 4

    @property
    def pod_count(self) -> int:
        """Pods of a rail kind (``rail_pods``: ``pods``; the others one)."""
        return self.pods if self.kind == "rail_pods" else 1

    @property
    def leaves_per_pod(self) -> int:
        """Leaves of one pod: ``groups`` × ``rails`` on the rail kinds, ``leaves`` otherwise."""
        return self.groups * self.rails if self.kind in RAIL_KINDS else self.leaves

    @property
    def gpus_per_server(self) -> int:
        """GPUs (hosts, each with its own NIC) per server: ``rails`` on the rail kinds; 1 on the
        others, whose hosts stand alone (no servers, no scale-up domain)."""
        return self.rails if self.kind in RAIL_KINDS else 1

    @property
    def has_scale_up(self) -> bool:
        """Whether servers have a scale-up domain (a rail kind, G > 1, ``scale_up.rate_bps`` > 0)."""
        return self.kind in RAIL_KINDS and self.rails > 1 and self.scale_up.rate_bps > 0

    @property
    def cross_rail_scale_up(self) -> bool:
        """Cross-rail traffic goes through the scale-up domain (``pxn``, always on ``rail_only``)."""
        return self.has_scale_up and (self.pxn or self.kind == "rail_only")

    @property
    def server_count(self) -> int:
        return self.host_count() // self.gpus_per_server

    @property
    def servers(self) -> list[list[int]]:
        """Host indices of each server, server by server: hosts are numbered server-major
        (server s, GPU g is host s·G + g), so server s is hosts s·G … s·G + G − 1."""
        g = self.gpus_per_server
        return [list(range(s * g, (s + 1) * g)) for s in range(self.server_count)]

    def server_of(self, host: int) -> int:
        """The server host ``host`` belongs to."""
        return host // self.gpus_per_server

    def placement(self, ranks: int, mode: str | Sequence[int] = "default") -> list[int]:
        """The host of each of ``ranks`` ranks (rank → host index).

        * ``server``: server-major — ranks fill a server's GPUs before the next server (rank r on
          host r), so a ring's neighbours share a server and its every G-th hop changes rail;
        * ``rail``: rail-major over the fewest servers that hold the ranks (S = ⌈ranks / G⌉):
          rank r on GPU ⌊r / S⌋ of server r mod S, so consecutive ranks sit on one rail (one leaf
          per group) and a ring follows the rails, changing rail only G times;
        * ``default``: ``rail`` on the rail kinds, ``server`` on the others (where G = 1 and both
          are rank r on host r);
        * a list: host indices, one per rank, distinct.
        """
        n = self.host_count()
        if ranks > n:
            raise FabricError(f"placement: {ranks} ranks on a topology of {n} hosts")
        if not isinstance(mode, str):
            hosts = [int(h) for h in mode]
            if len(hosts) != ranks:
                raise FabricError(f"placement: {len(hosts)} hosts for {ranks} ranks")
            if len(set(hosts)) != ranks or not all(0 <= h < n for h in hosts):
                raise FabricError(f"placement: hosts must be distinct indices in 0..{n - 1}")
            return hosts
        if mode == "default":
            mode = "rail" if self.kind in RAIL_KINDS else "server"
        if mode == "server":
            return list(range(ranks))
        if mode == "rail":
            g = self.gpus_per_server
            used = -(-ranks // g)
            return [(r % used) * g + r // used for r in range(ranks)]
        raise FabricError(f"placement {mode!r}: one of {', '.join(PLACEMENTS)} or a list of host indices")

    def rank_servers(self, hosts: Sequence[int]) -> list[list[int]]:
        """The ranks of each server that holds some (``hosts``: each rank's host, as
        :meth:`placement` gives), servers in order, ranks ascending within each."""
        by: dict[int, list[int]] = {}
        for r, h in enumerate(hosts):
            by.setdefault(self.server_of(h), []).append(r)
        return [by[s] for s in sorted(by)]

    # -- wiring ----------------------------------------------------------------------------------

    def plan(self) -> Plan:
        """Switches, ports, links, routes and hosts of this topology."""
        if self.kind == "fat_tree":
            k = self.fat_k
            h = k // 2
            clos = copy.copy(self)
            clos.kind, clos.pods, clos.leaves, clos.spines = "three_tier", k, h, h
            clos.hosts_per_leaf, clos.superspines = h, h * h
            return clos._plan_three_tier()
        if self.kind in ("three_tier", "rail_pods"):
            plan = self._plan_three_tier()
        elif self.planes > 1:
            return self._plan_planes()
        else:
            plan = self._plan_two_tier()
        if self.kind in RAIL_KINDS:
            self._add_servers(plan)
        return plan

    def _host(self, leaf: SwitchPlan, pod: int, li: int, h: int, hosts: list[HostPlan]) -> None:
        """Hang host ``h`` of leaf ``li`` (of pod ``pod``) off ``leaf``: address 10.pod.li.(h+1),
        a /32 route to it. Rail kinds name it ``srv{s}-nic{r}`` (server s, rail r), the others
        ``h{n}``."""
        H = self.hosts_per_leaf
        ip = f"10.{pod}.{li}.{h + 1}"
        if self.kind in RAIL_KINDS:
            g, r = divmod(li, self.rails)
            name = f"srv{(pod * self.groups + g) * H + h}-nic{r}"
        else:
            name = f"h{(pod * self.leaves + li) * H + h}"
        hosts.append(HostPlan(name, ip, _host_mac(ip), leaf.name, h, self.host_link))
        leaf.ports.append(self.host_link.port(faces_host=True))
        leaf.peers.append((name, 0))
        leaf.routes.append((f"{ip}/32", [h]))

    def _add_servers(self, plan: Plan) -> None:
        """Rail kinds: order the hosts server by server, NIC by NIC (srv0-nic0, srv0-nic1, …,
        srv1-nic0, …), number their server and GPU, and with a scale-up domain give each server a
        scale-up switch ``srv{s}-nvs``: port g to GPU g's NIC (its port after the planes'), a /32
        route to each GPU, and with cross-rail scale-up (PXN) a /24 to each rail leaf through the
        GPU on that rail, whose NIC puts the frame on its rail (:mod:`uet.fabric.model.scaleup`)."""
        plan.hosts.sort(key=lambda hp: tuple(int(x) for x in hp.name[3:].split("-nic")))
        G = self.rails
        for i, hp in enumerate(plan.hosts):
            hp.server, hp.gpu = divmod(i, G)
        if not self.has_scale_up:
            return
        sid = len(plan.switches)
        port = self.scale_up.port(self.host_link.mtu)
        for s in range(self.server_count):
            nvs = SwitchPlan(f"srv{s}-nvs", sid + s, "scaleup")
            for g, hp in enumerate(plan.hosts[s * G : (s + 1) * G]):
                nvs.ports.append(port)
                nvs.peers.append((hp.name, 1 + len(hp.planes)))
                nvs.routes.append((f"{hp.ip}/32", [g]))
                hp.scale_up = (nvs.name, g)
            if self.cross_rail_scale_up:  # one leaf per rail: leaf r holds rail r (groups = 1)
                nvs.routes += [(f"10.0.{r}.0/24", [r]) for r in range(G)]
            plan.switches.append(nvs)

    def _plan_planes(self) -> Plan:
        """``planes`` copies of the leaf/spine plan, switches named ``p{k}-leaf{i}`` /
        ``p{k}-spine{j}``; host h's NIC port k hangs off leaf ``p{k}-leaf{i}``, same address."""
        one = copy.copy(self)
        one.planes = 1
        base = one._plan_two_tier()
        switches: list[SwitchPlan] = []
        n = len(base.switches)
        names = {hp.name for hp in base.hosts}
        for k in range(self.planes):
            for sp in base.switches:
                c = copy.deepcopy(sp)
                c.name, c.id = f"p{k}-{sp.name}", k * n + sp.id
                c.peers = [(p, k) if p in names else (f"p{k}-{p}", pp) for p, pp in sp.peers]
                switches.append(c)
        hosts = []
        for hp in base.hosts:
            h = copy.copy(hp)
            h.switch = f"p0-{hp.switch}"
            h.planes = [(f"p{k}-{hp.switch}", hp.port) for k in range(1, self.planes)]
            hosts.append(h)
        return Plan(switches, hosts)

    def _plan_two_tier(self) -> Plan:
        nleaves = self.leaves_per_pod
        H, S, b = self.hosts_per_leaf, self.spines, self.parallel_links
        if self.kind == "rail_only":
            S = 0  # no spines: a rail's servers meet under its leaf, rails meet in the servers
        leaves = [SwitchPlan(f"leaf{li}", li, "leaf") for li in range(nleaves)]
        spines = [SwitchPlan(f"spine{s}", nleaves + s, "spine") for s in range(S)]
        hosts: list[HostPlan] = []
        for li, leaf in enumerate(leaves):
            for h in range(H):
                self._host(leaf, 0, li, h, hosts)
        if S:
            self._wire_up(leaves, spines, base=lambda li: f"10.0.{li}.0/24")
            for leaf in leaves:
                leaf.routes.append(("0.0.0.0/0", list(range(H, H + S * b))))
        return Plan(leaves + spines, hosts)

    def _wire_up(self, lower: list[SwitchPlan], upper: list[SwitchPlan], base: Any) -> None:
        """Join every switch of ``lower`` to every switch of ``upper`` with ``parallel_links``
        links; uplinks follow the lower switch's existing ports; the upper switch routes
        ``base(i)`` to the links towards lower switch i."""
        b = self.parallel_links
        for i, lo in enumerate(lower):
            for up in upper:
                down_ports = []
                for _ in range(b):
                    lp, upp = len(lo.ports), len(up.ports)
                    lo.ports.append(self.fabric_link.port())
                    up.ports.append(self.fabric_link.port())
                    lo.peers.append((up.name, upp))
                    up.peers.append((lo.name, lp))
                    down_ports.append(upp)
                up.routes.append((base(i), down_ports))

    def _plan_three_tier(self) -> Plan:
        H, L, S, K, b = self.hosts_per_leaf, self.leaves_per_pod, self.spines, self.superspines, self.parallel_links
        sid = 0
        switches: list[SwitchPlan] = []
        hosts: list[HostPlan] = []
        pod_spines: list[list[SwitchPlan]] = []
        for p in range(self.pods):
            leaves = []
            for li in range(L):
                leaf = SwitchPlan(f"pod{p}-leaf{li}", sid, "leaf")
                sid += 1
                for h in range(H):
                    self._host(leaf, p, li, h, hosts)
                leaves.append(leaf)
            spines = []
            for s in range(S):
                spines.append(SwitchPlan(f"pod{p}-spine{s}", sid, "spine"))
                sid += 1
            self._wire_up(leaves, spines, base=lambda li, p=p: f"10.{p}.{li}.0/24")
            for leaf in leaves:
                leaf.routes.append(("0.0.0.0/0", list(range(H, H + S * b))))
            switches += leaves + spines
            pod_spines.append(spines)
        supers = [SwitchPlan(f"ss{j}", sid + j, "superspine") for j in range(K)]
        for p, spines in enumerate(pod_spines):
            for s, sp in enumerate(spines):
                first_up = len(sp.ports)
                for j in range(s, K, S):
                    ss = supers[j]
                    lp, up = len(sp.ports), len(ss.ports)
                    sp.ports.append(self.fabric_link.port())
                    ss.ports.append(self.fabric_link.port())
                    sp.peers.append((ss.name, up))
                    ss.peers.append((sp.name, lp))
                    ss.routes.append((f"10.{p}.0.0/16", [up]))
                sp.routes.append(("0.0.0.0/0", list(range(first_up, len(sp.ports)))))
        return Plan(switches + supers, hosts)


def fat_tree_k(hosts: int) -> int:
    """The smallest even k whose k-ary fat tree holds ``hosts`` hosts (k³/4 ≥ hosts)."""
    k = 2
    while k**3 // 4 < hosts:
        k += 2
    return k


def _host_mac(ip: str) -> bytes:
    """Locally administered MAC derived from the host's IPv4 address (02:00:a.b.c.d)."""
    return b"\x02\x00" + ip_bytes(ip)
