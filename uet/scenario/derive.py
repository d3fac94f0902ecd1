"""Every default of a run, derived from the scenario's physics: one plain function, :func:`derive`.

Both engines (live processes and the simulator) and every tool (``uet-run``, ``uet-sim``,
``uet-bench sim``, the CC suite) call :func:`derive` on a :class:`~uet.scenario.model.Scenario`
and use what it returns; nothing else holds an endpoint, queue-pair or congestion-control default.
What the user gave in ``[endpoint]`` always wins; everything else follows from the topology's
host link (rate, delay, MTU), the longest path and the profile:

* **payload** (``payload_size``): the largest power of two up to 4 KiB whose data packet fits the
  smaller IP MTU of the host and fabric links (1 KiB at 1500, 4 KiB with jumbo frames; the lab
  PMTU of rocev2-and-fabric.md §8.9 and the simulator's 4 KiB);
* **base RTT**: a full data frame out and a minimum frame back over every link of the longest path
  (2 links under one leaf, 4 through a spine, 6 through a 3-tier core), with propagation
  (:meth:`Physics.path_rtt_ns`) — or, on the ``realtime`` profile, the profile's effective RTT
  (:data:`~uet.fabric.profiles.REALTIME_RTT_NS`, the Python endpoints' turnaround, which dominates);
* **window** (``max_inflight``): about 1.15 × the bandwidth-delay product in data packets plus the
  packets a target receives before it sends a coalesced ACK (``ACK_Gen_Trigger``, behaviour.md
  §2.8), at least 8 (:func:`bdp_window`: 56 packets of 4 KiB at 100 Gb/s on a 3-tier tree);
* **RTO** (``pds.rto_ns``): 64 base RTTs, at least 10 × the coalesced-ACK timer (1 ms at
  100 Gb/s on a 3-tier tree: it fires only for real losses — a trimmed header dropped when the
  trimmed class overflows — and never for a queue of one BDP per hop);
* **trim recovery**: ``pds.max_nack_retx`` at the spec's "infinite" setting (behaviour.md §2.9:
  "0–31; max = infinite"): with the spec default of 5 a sustained incast fails messages whose
  packets were trimmed 6 times; **no SACK fast retransmit** (``pds.fast_retx_threshold`` 0): with
  per-packet spraying, reordering by more than 3 packets is the norm (a 128-host permutation resent
  about one packet in two for nothing); a trimming fabric reports every loss it causes by NACK;
* **congestion control** (``pds.cc_params``, when ``pds.cc`` names an algorithm): ``link_bps`` the
  host link rate, ``base_rtt_ns`` the base RTT above, ``mtu`` the payload size (so a run with
  ``payload_size = 8192`` runs NSCC with an 8 KiB MTU, not :class:`uet.cc.CcConfig`'s 4 KiB);
* **congestion control of the rail AI fabrics** (**decision**; the spec leaves the choice of CC to
  the deployment): on a rail kind (``rail``, ``rail_only``, ``rail_pods``) whose data class trims
  (not lossless, trimming on), UET runs **RCCC with idle credit** (``pds.cc = "rccc"``,
  ``cc_params.idle_credit``) unless the user names a CC; every other fabric keeps the fixed window
  (``none``). Why (docs/collectives.md, "The double binary tree on 64 GPUs"): the collectives of
  an AI job converge several senders on one GPU's NIC by design — every interior GPU of a double
  binary tree receives three streams and *sends* three, so its uplink is as busy as its downlink.
  Fixed windows meeting there overflow the downlink's queue, and each trimmed packet, though it
  costs the downlink only its header, has cost its sender's uplink — another bottleneck — a full
  packet, and costs it again when resent: the 64-GPU tree at 16 MiB ran 12 % behind its model
  with the fixed window, 2 % ahead of it (0.978) with RCCC and idle credit. A receiver-paced
  credit keeps the convergence near the downlink's rate (the sender needs no round trips of loss
  to learn it), and idle credit lets a sender start its next message without a CREDIT_REQ round
  trip (the collectives' slices are short messages in quick succession). The ring and the
  hierarchical all-reduce keep to their models with it (16 MiB on 64 GPUs: 1.018 and 1.080, no
  trim). The scale-up path below runs RCCC with idle credit too. A lossless data class (PFC)
  keeps the fixed window: nothing is trimmed there;
* **the scale-up path** (a rail fabric whose servers have a scale-up domain; **decision**, the
  spec's CC has one link speed and base RTT per FEP, behaviour.md §4.3.1): a GPU reaches the GPUs
  of its own server over two scale-up links (GPU → scale-up switch → GPU), far faster and shorter
  than the NIC path the rest follows from, so UET's PDCs towards them get a window of their own
  (:class:`~uet.pds.config.PathWindow`, :func:`scale_up_windows`): ``max_inflight`` the
  :func:`bdp_window` of that path, and the CC parameters of that path's rate and base RTT (NSCC's
  ``MaxWnd`` is 1.5 × *that* BDP; an RCCC receiver paces credit at that rate and grants idle senders
  credit ahead, ``CcConfig.idle_credit``). Keys the user gave in ``[endpoint]`` win there too. Without it
  NSCC, seeing the scale-up path's 1 µs RTT, re-derived its ``MaxWnd`` at the NIC's 100 Gb/s: about
  4 packets, and a 4-GPU 1 MiB all-reduce inside a server took 89 µs instead of about 6;
* **RoCEv2 queue pairs**: :func:`uet.roce.core.config_for_link` — the largest PMTU that fits the
  host MTU, DCQCN scaled to the link rate — with the local ACK timeout scaled to the base RTT of a
  PMTU-sized RoCEv2 frame (rocev2-and-fabric.md §8.9);
* **switch thresholds** (ECN Kmin/Kmax, PFC XOFF/XON and headroom, buffer, watchdog): the profile's,
  from the same rate and RTT (:func:`uet.fabric.profiles.apply_profile`), part of the topology.

**Hosts** (:class:`HostModel`; **decision**): on the ``realtime`` profile the hosts are Python
processes sharing a few cores, and they — not the links — set the timing: there the window is 16
packets, the RTO adaptive (RFC 6298, floor 200 ms, backed off up to 1 s) and a target reclaims a
silent PDC after 10 s (the measured reasons: :data:`REALTIME_HOSTS`). The other profiles model
NICs that keep up with their links.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from uet.cc.config import CcConfig
from uet.cc.registry import as_config
from uet.fabric.model.config import TC_DATA
from uet.fabric.profiles import REALTIME_RTT_NS, merge
from uet.fabric.topology import RAIL_KINDS, Topology
from uet.fep import FepConfig
from uet.pds.config import PathWindow
from uet.roce.config import QpConfig, config_at_rate, config_for_link
from uet.scenario.model import Scenario, deep_update

T = TypeVar("T")

__all__ = [
    "DATA_OVERHEAD",
    "IDEAL_HOSTS",
    "MIN_WIRE",
    "REALTIME_HOSTS",
    "ROCE_DATA_OVERHEAD",
    "HostModel",
    "Physics",
    "Settings",
    "ai_fabric_trims",
    "bdp_window",
    "default_payload",
    "derive",
    "fairness_note",
    "path_window_of",
    "peer_config_of",
    "rto_floor_ns",
    "scale_up_paths",
    "scale_up_qps",
    "scale_up_windows",
]

#: Bytes each UET data packet adds to its payload on the wire: SES standard header 44 + PDS
#: request 12 + UDP 8 + IPv4 20 + Ethernet 14, plus 24 bytes of FCS, preamble and gap.
DATA_OVERHEAD = 44 + 12 + 8 + 20 + 14 + 24
#: The same for a RoCEv2 packet: BTH 12 + ICRC 4 + UDP 8 + IPv4 20 + Ethernet 14 + 24 on the wire
#: (rocev2-and-fabric.md §1.1); SEND carries no other extension header.
ROCE_DATA_OVERHEAD = 12 + 4 + 8 + 20 + 14 + 24
#: A minimum Ethernet frame on the wire (ACKs): 60 + 24.
MIN_WIRE = 84
#: IPv4 (20) + UDP (8) + SES standard (44) + PDS request (12): the IP packet around a payload.
_IP_DATA_HEADERS = 20 + 8 + 44 + 12
#: the largest derived payload (module docstring)
PAYLOAD_CAP = 4096
#: largest segment the SES engine cuts (the 14-bit ``payload_length``)
_MAX_SEGMENT = 16383
#: Max_NACK_Retx_Cnt's "infinite" setting (behaviour.md §2.9)
_INFINITE_RETX = 1 << 30


@dataclass(frozen=True)
class HostModel:
    """What the hosts contribute to the defaults (module docstring).

    Attributes:
        rtt_ns: the effective base RTT when the hosts set it (None: the path's).
        window: ``max_inflight`` (None: from the bandwidth-delay product, :func:`bdp_window`).
        pds: PDS defaults beyond the derived ones (None ``rto_ns``: :func:`rto_floor_ns`).
    """

    rtt_ns: int | None
    window: int | None
    pds: dict[str, Any] = field(default_factory=dict)


#: Hosts that keep up with their links: every timing from the path.
IDEAL_HOSTS = HostModel(None, None, {"max_nack_retx": _INFINITE_RETX, "fast_retx_threshold": 0})

#: Python endpoint processes on a shared machine, the ``realtime`` profile (**decisions**,
#: measured): with ten processes on two cores the receiver's CPU, not the fabric, is an incast's
#: bottleneck; with 32 packets in flight and a 50 ms RTO half of eight 8:1 runs collapsed into
#: spurious retransmissions, with 16 and 200 ms 6 of 6 completed. The RTO is adaptive (RFC 6298's
#: ``SRTT + 4 RTTVAR``, 200 ms floor, backed off up to 1 s): when the switch process falls behind,
#: frames wait in its kernel socket queues and the round trip grows to hundreds of ms, and a fixed
#: RTO resent delivered packets until ``all_to_all -n 16`` delivered nothing (issue 10). A target
#: reclaims a silent PDC after 10 s, not 1 s: an initiator waiting out a backed-off RTO was taken
#: for gone and its messages failed.
REALTIME_HOSTS = HostModel(
    REALTIME_RTT_NS,
    16,
    {
        "rto_ns": 200_000_000,
        "rto_adaptive": True,
        "rto_max_ns": 1_000_000_000,
        "target_idle_ns": 10_000_000_000,
        "max_nack_retx": _INFINITE_RETX,
    },
)


def host_model(profile: str) -> HostModel:
    """The hosts of ``profile``: :data:`REALTIME_HOSTS` for ``realtime``, else :data:`IDEAL_HOSTS`."""
    return REALTIME_HOSTS if profile == "realtime" else IDEAL_HOSTS


@dataclass(frozen=True)
class Physics:
    """The physics a run's defaults follow from (module docstring)."""

    kind: str
    rate_bps: int
    delay_ns: int
    #: the smaller IP MTU of the host and fabric links
    mtu: int
    #: the host link's IP MTU (the RoCEv2 PMTU is chosen from it)
    host_mtu: int
    #: links of the longest path, each way
    links: int

    @classmethod
    def of(cls, topo: Topology) -> Physics:
        h = topo.host_link
        links = topo.max_path_links
        return cls(topo.kind, int(h.rate_bps), int(h.delay_ns), min(h.mtu, topo.fabric_link.mtu), int(h.mtu), links)

    @classmethod
    def scale_up(cls, topo: Topology) -> Physics | None:
        """The path between two GPUs of one server: two scale-up links (GPU → the server's
        scale-up switch → GPU) carrying the NIC's frames; None when the servers have no
        scale-up domain."""
        if not topo.has_scale_up:
            return None
        su, mtu = topo.scale_up, int(topo.host_link.mtu)
        return cls(topo.kind, int(su.rate_bps), int(su.delay_ns), mtu, mtu, 2)

    def path_rtt_ns(self, frame: int) -> float:
        """The longest path's base RTT: a ``frame``-byte data frame (on the wire) out and a
        minimum frame back over every link, with propagation."""
        return self.links * (2 * self.delay_ns + (frame + MIN_WIRE) * 8e9 / self.rate_bps)


def default_payload(mtu: int) -> int:
    """The largest power of two up to :data:`PAYLOAD_CAP` whose UET data packet fits IP MTU ``mtu``."""
    p = PAYLOAD_CAP
    while p > 64 and p + _IP_DATA_HEADERS > mtu:
        p //= 2
    return p


def bdp_window(phys: Physics, payload: int, rtt_ns: float, ack_bytes: int = 0) -> int:
    """About 1.15 × the bandwidth-delay product of ``rtt_ns`` in ``payload``-byte data packets,
    plus the packets a target receives before it sends a coalesced ACK (``ack_bytes`` =
    ``ACK_Gen_Trigger``, behaviour.md §2.8): the sender hears of a packet up to that many packets
    late, so a window of one BDP alone leaves the link idle while it waits (a 2 MB flow across 3
    tiers with 32 KiB coalescing: 1.012 × ideal with 48 packets, 1.0016 × with 50 or more). At
    least 8."""
    frame = payload + DATA_OVERHEAD
    bdp = rtt_ns * phys.rate_bps / 8e9 / frame
    return max(8, math.ceil(1.15 * bdp) + math.ceil(ack_bytes / payload))


def rto_floor_ns(rtt_ns: float, ack_timer_ns: int) -> int:
    """The RTO of hosts that keep up with their links: 64 base RTTs, at least 10 coalesced-ACK
    timers (module docstring)."""
    return max(64 * int(rtt_ns), 10 * ack_timer_ns)


@dataclass(frozen=True)
class Settings:
    """What :func:`derive` gives: the physics, the complete UET endpoint table, the RoCEv2 queue
    pair configuration, and what the report says about them.

    Attributes:
        physics: the host link and path (:class:`Physics`).
        base_rtt_ns: the base RTT UET's window, RTO and CC follow (module docstring).
        roce_rtt_ns: the base RTT the RoCEv2 local ACK timeout is scaled to.
        endpoint: the UET endpoint table, every derived default in it, the user's keys laid over.
        defaults: the derived table alone: every default, those that depend on the payload (window,
            RTO, CC MTU) for the payload the endpoint uses.
        qp: the RoCEv2 queue pairs' configuration.
        hosts: the host model the timing came from (:func:`host_model`).
        scale_up: the window of UET's PDCs towards a GPU of the same server (module docstring),
            None when the servers have no scale-up domain or the hosts set the timing.
        scale_up_rtt_ns: the scale-up path's base RTT that window follows (0 without one).
    """

    physics: Physics
    base_rtt_ns: int
    roce_rtt_ns: int
    endpoint: dict[str, Any]
    defaults: dict[str, Any]
    qp: QpConfig
    hosts: HostModel = IDEAL_HOSTS
    scale_up: PathWindow | None = None
    scale_up_rtt_ns: int = 0

    @property
    def tuned(self) -> list[str]:
        """The UET endpoint keys the user set to something else than the derived default."""
        return tuned_keys(self.endpoint, self.defaults)

    def fep_config(self) -> FepConfig:
        """The UET endpoint table as a :class:`~uet.fep.FepConfig`."""
        return merge(FepConfig(), self.endpoint)

    def record(self) -> dict[str, Any]:
        """The derivation as a JSON-able dict (a result's ``derived``); ``scale_up`` only when
        the servers have a scale-up path of their own."""
        out = {
            "link_rate_bps": self.physics.rate_bps,
            "link_delay_ns": self.physics.delay_ns,
            "mtu": self.physics.mtu,
            "path_links": self.physics.links,
            "base_rtt_ns": self.base_rtt_ns,
            "roce_rtt_ns": self.roce_rtt_ns,
            "endpoint": self.endpoint,
            "tuned": self.tuned,
            # why a realtime run's window and RTO are not the links': the hosts set them
            "hosts": "python processes (realtime profile)" if self.hosts is REALTIME_HOSTS else "ideal NICs",
            "roce": {"pmtu": self.qp.pmtu, "timeout": self.qp.timeout, "dcqcn": _dcqcn(self.qp)},
        }
        su = self.scale_up
        if su is not None:
            out["scale_up"] = {
                "base_rtt_ns": self.scale_up_rtt_ns,
                "max_inflight": su.max_inflight,
                "cc_params": None if su.cc_params is None else _cc_record(su.cc_params),
            }
        return out


def _cc_record(cc: CcConfig) -> dict[str, Any]:
    """The fields of ``cc`` the derivation sets (those of ``pds.cc_params``)."""
    return {"base_rtt_ns": cc.base_rtt_ns, "link_bps": int(cc.link_bps), "mtu": cc.mtu, "idle_credit": cc.idle_credit}


def _dcqcn(qp: QpConfig) -> dict[str, Any] | None:
    return asdict(qp.dcqcn) if qp.dcqcn is not None else None


def _flat(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def tuned_keys(given: dict[str, Any], defaults: dict[str, Any]) -> list[str]:
    """The keys of the user's table ``given`` whose value is not the derived default."""
    d = _flat(defaults)
    return sorted(k for k, v in _flat(given).items() if k not in d or d[k] != v)


def derive(scn: Scenario, topo: Topology | None = None) -> Settings:
    """Every default of ``scn``'s run (module docstring); ``topo``: its topology when the caller
    built it already (:meth:`Scenario.fabric_topology`). A plain function of the scenario: any
    engine may call it, and every tool does."""
    topo = topo if topo is not None else scn.fabric_topology()
    phys = Physics.of(topo)
    hosts = host_model(scn.profile)
    given = scn.endpoint
    payload = int(given.get("payload_size", default_payload(phys.mtu)))
    table: dict[str, Any] = {"payload_size": payload, "ecn_capable": True, "pds": dict(hosts.pds)}
    ai_cc = hosts is IDEAL_HOSTS and ai_fabric_trims(topo)
    if ai_cc:
        table["pds"]["cc"] = "rccc"  # the rail AI fabrics' CC (module docstring); the user's wins
    if hosts.window is not None:
        table["max_inflight"] = hosts.window
    pds = merge(FepConfig(), deep_update(table, given)).pds  # the ACK settings the user's table gives
    seg = min(payload, _MAX_SEGMENT)
    rtt = float(hosts.rtt_ns) if hosts.rtt_ns is not None else phys.path_rtt_ns(seg + DATA_OVERHEAD)
    if "rto_ns" not in table["pds"]:
        table["pds"]["rto_ns"] = rto_floor_ns(rtt, pds.ack_timer_ns)
    if hosts.window is None:
        table["max_inflight"] = bdp_window(phys, seg, rtt, 0 if pds.ack_per_pkt else pds.ack_gen_trigger)
    if pds.cc != "none":
        table["pds"]["cc_params"] = {"link_bps": phys.rate_bps, "base_rtt_ns": round(rtt), "mtu": payload}
        if ai_cc and pds.cc == "rccc":
            table["pds"]["cc_params"]["idle_credit"] = True
    qp = config_for_link(phys.rate_bps, phys.host_mtu)
    roce_rtt = float(hosts.rtt_ns) if hosts.rtt_ns is not None else phys.path_rtt_ns(qp.pmtu + ROCE_DATA_OVERHEAD)
    qp = config_for_link(phys.rate_bps, phys.host_mtu, rtt_ns=roce_rtt)
    defaults = {**table, "payload_size": default_payload(phys.mtu)}
    endpoint = deep_update(table, given)
    su = Physics.scale_up(topo) if hosts is IDEAL_HOSTS else None
    tuned = tuned_keys(given, defaults)  # a table derived once already holds the defaults: not the user's
    window, su_rtt = (None, 0.0) if su is None else _path_window(su, seg, payload, pds, endpoint, tuned)
    return Settings(phys, round(rtt), round(roce_rtt), endpoint, defaults, qp, hosts, window, round(su_rtt))


def ai_fabric_trims(topo: Topology) -> bool:
    """Whether ``topo`` is a rail AI fabric whose data class trims (module docstring, "congestion
    control of the rail AI fabrics")."""
    sw = topo.switch
    return topo.kind in RAIL_KINDS and sw.trim.enabled and TC_DATA in sw.trim.tcs and not sw.tcs[TC_DATA].lossless


def _path_window(
    path: Physics, seg: int, payload: int, pds: Any, endpoint: dict[str, Any], tuned: list[str]
) -> tuple[PathWindow, float]:
    """The window of UET's PDCs over ``path`` (module docstring, "the scale-up path") and its base
    RTT: derived as the endpoint's is from the NIC path; the keys of ``endpoint`` the user
    ``tuned`` (:func:`tuned_keys`) laid over."""
    rtt = path.path_rtt_ns(seg + DATA_OVERHEAD)
    window = bdp_window(path, seg, rtt, 0 if pds.ack_per_pkt else pds.ack_gen_trigger)
    if "max_inflight" in tuned:
        window = int(endpoint["max_inflight"])
    cc = None
    if pds.cc != "none":
        params: dict[str, Any] = {"link_bps": path.rate_bps, "base_rtt_ns": round(rtt), "mtu": payload}
        params["idle_credit"] = True  # RCCC: idle senders bank credit (few share a scale-up link; uet.cc.rccc)
        given = endpoint["pds"].get("cc_params") or {}
        if isinstance(given, dict):
            params.update({k: v for k, v in given.items() if f"pds.cc_params.{k}" in tuned})
        cc = as_config(params)
    return PathWindow(window, cc), rtt


def _towards_server(
    topo: Topology, hosts: Sequence[int], ips: Sequence[str], value: T
) -> dict[str, Callable[[str], T | None]]:
    """Per address of ``hosts`` (their ``ips``), a function of a peer's address giving ``value``
    for a peer of the same server and None for every other."""
    server = {ip: topo.server_of(h) for h, ip in zip(hosts, ips, strict=True)}

    def towards(me: str) -> Callable[[str], T | None]:
        return lambda peer: value if server.get(peer) == server[me] else None

    return {ip: towards(ip) for ip in ips}


def scale_up_windows(
    topo: Topology, hosts: Sequence[int], ips: Sequence[str], settings: Settings
) -> dict[str, Callable[[str], PathWindow | None]]:
    """Per address of ``hosts`` (their ``ips``), the window of its UET PDCs towards each peer (a
    :class:`~uet.fep.core.FepCore`'s ``path_window``): :attr:`Settings.scale_up` towards a GPU of
    the same server, None (the endpoint's own) towards every other; empty without a scale-up
    path."""
    if settings.scale_up is None or not topo.has_scale_up:
        return {}
    return _towards_server(topo, hosts, ips, settings.scale_up)


def scale_up_qps(
    topo: Topology, hosts: Sequence[int], ips: Sequence[str], qp: QpConfig
) -> dict[str, Callable[[str], QpConfig | None]]:
    """Per address of ``hosts`` (their ``ips``), the RoCEv2 queue pair configuration towards each
    peer (a :class:`~uet.roce.core.RoceCore`'s ``peer_config``): towards a GPU of the same server,
    when the servers have a scale-up domain, ``qp`` with DCQCN at the scale-up link's rate
    (:func:`~uet.roce.core.config_at_rate`), since those frames leave on the scale-up link and
    never cross the NIC's Ethernet port; None (``qp``) towards every other peer. Without it a QP
    to a server neighbour was paced at the NIC's rate over a link nine times faster (**decision**:
    the scale-up domain never marks, so DCQCN there only sets the line rate; NCCL sends such
    traffic over NVLink, outside the NIC's queue pairs)."""
    if not topo.has_scale_up:
        return {}
    return _towards_server(topo, hosts, ips, config_at_rate(qp, float(topo.scale_up.rate_bps)))


def scale_up_paths(
    topo: Topology, hosts: Sequence[int], ips: Sequence[str], settings: Settings, transport: str
) -> dict[str, dict[str, Any]]:
    """Per address of ``hosts`` (their ``ips``), the settings of its path towards the GPUs of its
    own server as data an engine can hand an endpoint process (JSON-able; the live engine's
    worker spec): ``server``, the addresses among ``ips`` on its server (its own too), and ``window`` (UET:
    :func:`scale_up_windows`' :class:`~uet.pds.config.PathWindow`, every CC field) or ``qp``
    (RoCEv2: :func:`scale_up_qps`' queue pair configuration). Empty where those give nothing (no
    scale-up domain; for UET also the ``realtime`` hosts, whose timing is their own). Rebuilt by
    :func:`path_window_of` and :func:`peer_config_of`, they give each peer exactly what the
    simulator's endpoints get."""
    towards: dict[str, Callable[[str], Any]]
    if transport == "roce":
        key, towards = "qp", dict(scale_up_qps(topo, hosts, ips, settings.qp))
    else:
        key, towards = "window", dict(scale_up_windows(topo, hosts, ips, settings))
    out: dict[str, dict[str, Any]] = {}
    for ip, path in towards.items():
        server = [p for p in ips if path(p) is not None]
        if server:
            out[ip] = {"server": server, key: _path_record(path(server[0]))}
    return out


def _path_record(value: PathWindow | QpConfig) -> dict[str, Any]:
    if isinstance(value, QpConfig):
        return asdict(value)
    cc = None if value.cc_params is None else asdict(value.cc_params)
    return {"max_inflight": value.max_inflight, "cc_params": cc}


def path_window_of(paths: dict[str, Any] | None) -> Callable[[str], PathWindow | None] | None:
    """The ``path_window`` of a UET endpoint (``FepCore(path_window=...)``) from its entry of
    :func:`scale_up_paths`; None without a scale-up window."""
    if not paths or paths.get("window") is None:
        return None
    w = paths["window"]
    window = PathWindow(int(w["max_inflight"]), None if w["cc_params"] is None else as_config(w["cc_params"]))
    server = frozenset(paths["server"])
    return lambda peer: window if peer in server else None


def peer_config_of(paths: dict[str, Any] | None) -> Callable[[str], QpConfig | None] | None:
    """The ``peer_config`` of a RoCEv2 endpoint (``RoceCore(peer_config=...)``) from its entry of
    :func:`scale_up_paths`; None without a scale-up queue pair configuration."""
    if not paths or paths.get("qp") is None:
        return None
    qp = merge(QpConfig(), paths["qp"])
    server = frozenset(paths["server"])
    return lambda peer: qp if peer in server else None


def fairness_note(tuned: list[str]) -> str | None:
    """The line a UET-against-RoCEv2 comparison prints above its table when the user tuned UET's
    endpoint (``tuned``: :attr:`Settings.tuned`) while RoCEv2's queue pairs, which have no table of
    their own, run at the derived defaults; None when neither is tuned."""
    if not tuned:
        return None
    return (
        f"note: not like for like: UET runs with settings of its own ({', '.join(tuned)}); "
        "RoCEv2 runs at the defaults derived from the fabric"
    )
