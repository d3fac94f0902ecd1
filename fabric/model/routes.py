"""Static ECMP routes: the links a flow crosses, computed from the switches' tables and hash
without running anything (issue 11: how evenly does our ECMP spread single-path flows?).

:func:`ecmp_path` walks a :class:`~uet.fabric.model.Fabric` from the source host's NIC: at each
switch the route lookup (:meth:`Switch.lookup`) gives the equal-cost group and the switch's own
:meth:`LoadBalancer.ecmp_index` picks in it — the very functions the data path calls, so a frame
with that UDP source port takes exactly this path when the switches hash (``ecmp`` mode; the
spraying modes choose per packet and have no static route). :func:`link_flows` counts the flows on
every directed link for a set of (source, destination, entropy) flows.

:func:`uniform_fat_tree_max` is the reference the hash is judged against: the same permutation on
a k-ary fat tree whose every upward hop picks uniformly at random (a host's edge switch picks one
of its k/2 aggregation switches, which picks one of its k/2 core switches; the way down is then
fixed), the "uniform random uplink choices" of the issue's Monte Carlo.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from uet.fabric.model.fabric import Fabric
from uet.fabric.model.nic import HostNic
from uet.fabric.model.scaleup import GpuNic
from uet.fabric.model.switch import Switch

from uet.wire.net import UET_UDP_PORT, ip_bytes

__all__ = ["ecmp_path", "link_flows", "uniform_fat_tree_max"]


def ecmp_path(fabric: Fabric, src: int, dst: int, sport: int, dport: int = UET_UDP_PORT) -> list[str]:
    """Names of the directed links (``sender>receiver``, as :mod:`~uet.fabric.model.linkload`
    names them) a UDP frame from host ``src`` to host ``dst`` with source port ``sport`` crosses
    when every switch hashes it."""
    sip, dip = ip_bytes(fabric.host_ip(src)), ip_bytes(fabric.host_ip(dst))
    tup = sip + dip + bytes((17,)) + sport.to_bytes(2, "big") + dport.to_bytes(2, "big")
    path: list[str] = []
    node = _leave(fabric.nics[src], dip, path)
    for _ in range(64):
        group = node.lookup(dip)
        if group is None:
            raise KeyError(f"{node.name}: no route to {fabric.host_ip(dst)}")
        port = group[0] if len(group) == 1 else group[node.lb.ecmp_index(tup, len(group))]
        peer, _ = node.ports[port].peer  # type: ignore[misc]
        path.append(f"{node.name}:{port}>{peer.name}")
        if isinstance(peer, HostNic):
            if peer.index == dst:
                return path
            node = _leave(peer, dip, path)  # a GPU's NIC forwarding for its server (PXN)
            continue
        assert isinstance(peer, Switch)  # a port faces a switch or a host NIC
        node = peer
    raise KeyError(f"no path from host {src} to host {dst} within 64 hops")


def _leave(nic: HostNic, dip: bytes, path: list[str]) -> Switch:
    """The switch a frame to ``dip`` reaches from ``nic``, its link appended to ``path``: a GPU's
    NIC picks its scale-up port for its server and, with PXN, for other rails
    (:meth:`GpuNic.port_for`); links named as :mod:`~uet.fabric.model.linkload` names them."""
    k = nic.port_for(int.from_bytes(dip, "big")) if isinstance(nic, GpuNic) else 0
    peer, _ = nic.ports[k].peer  # type: ignore[misc]
    assert isinstance(peer, Switch)  # a NIC port always faces a switch
    path.append(f"{nic.name}>{peer.name}" if k == 0 else f"{nic.name}:{k}>{peer.name}")
    return peer


def link_flows(fabric: Fabric, flows: Iterable[tuple[int, int, int]]) -> dict[str, int]:
    """Directed link name → how many of ``flows`` ((source, destination, entropy) each, one
    path per flow) cross it."""
    out: dict[str, int] = {}
    for src, dst, sport in flows:
        for name in ecmp_path(fabric, src, dst, sport):
            out[name] = out.get(name, 0) + 1
    return out


def uniform_fat_tree_max(k: int, pairs: Sequence[tuple[int, int]], rng: random.Random) -> int:
    """The most flows on one directed link when each flow of ``pairs`` (host indices of a k-ary
    fat tree, k/2 hosts per edge switch, k/2 edge switches per pod) picks its upward hops
    uniformly at random (module docstring)."""
    h = k // 2
    load: dict[tuple[object, ...], int] = {}

    def add(*link: object) -> None:
        load[link] = load.get(link, 0) + 1

    for s, d in pairs:
        es, ed = s // h, d // h
        ps, pd = es // h, ed // h
        add("host", s)
        add("down", d)
        if es == ed:
            continue
        a = rng.randrange(h)
        add("e-a", es, a)
        add("a-e", pd, a, ed)
        if ps == pd:
            continue
        c = rng.randrange(h)
        add("a-c", ps, a, c)
        add("c-a", a, c, pd)
    return max(load.values(), default=0)
