"""The scenario model: one run's settings, as a scenario file and the options give them.

A scenario is four tables — ``[run]`` (workload, endpoints, sizes, seed, profile, link rate,
transport), ``[topology]`` (as for ``uet-fabric``), ``[endpoint]`` (fields of
:class:`uet.fep.FepConfig`, ``[endpoint.pds]`` for the PDS core) and ``[workload]`` (the
workload's own parameter table) — read the same way by every engine and tool. :class:`Scenario`
holds them *as the user gave them*: the run table complete (the engine's defaults, then the file,
then the options; ``explicit`` says which keys the user set), the endpoint table without any
default. Every endpoint, queue-pair and congestion-control default is derived from the scenario's
physics by :func:`uet.scenario.derive.derive`, the one place that knows how.

**Defaults by engine** (:func:`run_defaults`; **decision**, stated in every report's settings):
the live engine defaults to the ``realtime`` profile (100 Mb/s links, the ``default`` 2-leaf
fabric), the rate a few Python processes on one machine can carry in real time; the simulator to
the ``datacenter`` profile (100 Gb/s, 1 µs links, jumbo MTU) on a fat tree sized from the endpoint
count. ``uet-run --engine sim`` and ``uet-sim`` are the same engine and take the same defaults.
``timeout_s`` has a default in the live engine only (its wall-clock limit; the simulator, given
one, stops at that much virtual time, uet.sim.scenario) and ``tss`` belongs to the simulator
(its secure endpoints).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from uet.fabric.model.plan import LinkSpec
from uet.fabric.profiles import (
    DATACENTER_RATE_BPS,
    REALTIME_RATE_BPS,
    fit_hosts,
    load_topology,
    merge,
    overrides_to_dict,
)
from uet.fabric.topology import Topology

__all__ = [
    "ENGINES",
    "RUN_DEFAULTS",
    "Scenario",
    "deep_update",
    "profile_rate",
    "run_defaults",
    "settings_record",
    "sizing_overrides",
    "transports",
]

#: The engines: ``live`` (endpoint processes through the software switch) and ``sim`` (virtual time).
ENGINES = ("live", "sim")

#: Run settings common to both engines.
RUN_DEFAULTS: dict[str, Any] = {
    "workload": "incast",
    "endpoints": 9,
    "message_bytes": 65536,
    "messages": 4,
    "seed": 1,
    "transport": "uet",
}

#: Run settings that differ by engine (module docstring), and the keys only one engine has.
_ENGINE_RUN: dict[str, dict[str, Any]] = {
    "live": {
        "timeout_s": 120.0,
        "profile": "realtime",
        "rate_bps": REALTIME_RATE_BPS,
        "topology": "default",
    },
    "sim": {
        "profile": "datacenter",
        "rate_bps": DATACENTER_RATE_BPS,
        "topology": "fat_tree",
        "tss": False,
    },
}


def run_defaults(engine: str) -> dict[str, Any]:
    """The ``[run]`` defaults of ``engine`` (``live`` or ``sim``): a new dict."""
    if engine not in _ENGINE_RUN:
        raise ValueError(f"engine {engine!r}: one of {', '.join(ENGINES)}")
    return {**RUN_DEFAULTS, **_ENGINE_RUN[engine]}


def profile_rate(profile: str) -> int:
    """The link rate a run on ``profile`` has when it names none: the profile's own (``lab``: the
    switch model's default links, rocev2-and-fabric.md §8.9)."""
    if profile == "realtime":
        return REALTIME_RATE_BPS
    if profile == "lab":
        return int(LinkSpec().rate_bps)
    return DATACENTER_RATE_BPS


def deep_update(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``a`` with the TOML-shaped table ``b`` laid over it, sub-table by sub-table (new dicts)."""
    out = dict(a)
    for k, v in b.items():
        cur = out.get(k)
        out[k] = deep_update(cur if isinstance(cur, dict) else {}, v) if isinstance(v, dict) else v
    return out


def sizing_overrides(topo: Topology, n: int) -> dict[str, Any]:
    """What grows ``topo`` to hold ``n`` hosts (**decision**): a fat tree grows ``hosts`` (its k
    follows), the other kinds ``hosts_per_leaf`` and the leaves' buffers with it
    (:func:`uet.fabric.profiles.fit_hosts`); empty when it already holds them."""
    return fit_hosts(topo, n)[1]


@dataclass
class Scenario:
    """One run's settings (module docstring).

    Attributes:
        engine: ``live`` or ``sim``.
        run: the complete ``[run]`` table (the engine's defaults, the file, the options).
        topology: the inline ``[topology]`` table ({}: the topology named by ``run["topology"]``).
        endpoint: the ``[endpoint]`` table as given (file, then ``--endpoint-set``), no defaults.
        workload: the ``[workload]`` table: the workload's own parameters (``params``).
        explicit: the ``[run]`` keys the user set (file or options).
    """

    engine: str
    run: dict[str, Any]
    topology: dict[str, Any] = field(default_factory=dict)
    endpoint: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    explicit: frozenset[str] = frozenset()

    @property
    def profile(self) -> str:
        return str(self.run.get("profile", "datacenter"))

    def fabric_topology(self) -> Topology:
        """The run's topology as the engine builds it: the table (or built-in name / file), the
        profile's links and switch thresholds (:func:`uet.fabric.profiles.load_topology`), the
        ``-o`` overrides, grown to hold ``endpoints`` hosts (:func:`sizing_overrides`)."""
        s = self.run
        topo = load_topology(
            self.topology or s.get("topology", "fat_tree"),
            profile=self.profile,
            rate_bps=int(s.get("rate_bps", DATACENTER_RATE_BPS)),
            overrides=overrides_to_dict(s.get("overrides", [])),
        )
        grow = sizing_overrides(topo, int(s["endpoints"]))
        return merge(topo, grow) if grow else topo

    def hosts(self, topo: Topology, ranks: int | None = None) -> list[int]:
        """Each rank's host on ``topo`` (the run's topology) for ``ranks`` ranks (default: the
        run's endpoints): ``[run] placement`` — ``rail``, ``server`` or a list of host indices; by
        default rail-major on the rail kinds (:meth:`uet.fabric.topology.Topology.placement`)."""
        n = int(self.run["endpoints"]) if ranks is None else ranks
        return topo.placement(n, self.run.get("placement", "default"))


def transports(s: dict[str, Any]) -> tuple[str, ...]:
    """The transports a scenario runs on, in order: ``both`` is UET, then RoCEv2 (here, in the
    scenario model every engine imports, not in :mod:`uet.live`, so that a simulator run imports
    none of the live engine)."""
    return ("uet", "roce") if s.get("transport") == "both" else (str(s.get("transport", "uet")),)


def settings_record(s: dict[str, Any], endpoint: dict[str, Any]) -> dict[str, Any]:
    """The run's settings as the result echoes them (``settings``): what was run, reproducibly."""
    keys = ("workload", "endpoints", "message_bytes", "messages", "seed", "timeout_s", "profile", "rate_bps")
    out = {k: s[k] for k in (*keys, "transport") if k in s}
    out["topology"] = s.get("scenario") or s.get("topology")
    out["overrides"] = list(s.get("overrides", []))
    if s.get("workload_params"):
        out["workload_params"] = s["workload_params"]
    out["endpoint"] = endpoint
    return out
