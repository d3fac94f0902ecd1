"""A scenario as a run is given it — a scenario file and the settings laid over it — read and
checked once, before anything runs (issue 14), into the scenario model
(:class:`~uet.scenario.model.Scenario`), from which every default is derived
(:func:`~uet.scenario.derive.derive`). :func:`resolve` is what every engine and tool calls
(``uet-run``, ``uet-sim``, the CC suite, the RoCEv2 experiments, the differential check); a
command module only turns its options into :class:`Given` and prints.

* ``[run]`` (the file's table and the settings that override it): a key that is not a setting is
  refused, naming the valid ones; each value is type- and range-checked (sizes and rates may be
  written as ``"64KiB"`` / ``"100M"``); ``pairs`` needs an even number of endpoints; ``rate_bps``
  is refused, not ignored, where it cannot apply: on the ``lab`` profile (the model's own links),
  and on the live engine with any profile but ``realtime`` (the fabric process takes the rate of
  the realtime profile only); the simulator takes it on ``datacenter`` too.
* ``[endpoint]`` and the endpoint overrides: checked against :class:`uet.EndpointConfig` (and
  its nested :class:`uet.pds.PdsConfig`) by :func:`uet.scenario.check.check_dataclass`.
* ``[topology]``, a topology name or file and the ``KEY=VALUE`` overrides: loaded as
  ``uet-fabric`` loads them.
* the payload must fit the fabric's MTU: an IPv4 + UDP + PDS/SES data packet of ``payload_size``
  bytes must not exceed the smaller of the host and fabric links' MTU, else the switch drops every
  frame as oversize and the run would only time out.
* the workload and its own parameters (``[workload.params]``), when the caller hands in the
  workload registry (:data:`uet.workloads.WORKLOADS`: the workloads sit above the scenario model
  and are given to it, never imported by it).

Every mistake is a :class:`~uet.scenario.check.ScenarioError`: one line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from uet.fabric.profiles import PROFILES, REALTIME_RATE_BPS, overrides_to_dict
from uet.fabric.topology import Topology
from uet.scenario.check import ScenarioError, check_dataclass, describe_keys
from uet.scenario.derive import Settings, derive
from uet.scenario.model import Scenario, deep_update, profile_rate, run_defaults

__all__ = [
    "IP_UDP_BYTES",
    "RUN_LIMITS",
    "TRANSPORTS",
    "Given",
    "Resolved",
    "max_payload",
    "parse_placement",
    "read_file",
    "refuse_rate",
    "resolve",
]

#: IPv4 (20) + UDP (8) header bytes in front of every UET datagram on the fabric
IP_UDP_BYTES = 28
#: ``[run] transport``: UET, RoCEv2 (RC queue pairs with DCQCN, rocev2-and-fabric.md §6–§7), or
#: both one after the other on the same scenario
TRANSPORTS = ("uet", "roce", "both")
#: settings that are not among the engine's defaults (uet.scenario.run_defaults) but may appear in
#: ``[run]``
_EXTRA_RUN_KEYS = {
    "scenario": str,
    "overrides": list,
    "pcap": str,
    "plot": str,
    "telemetry": str,
    "workload_params": dict,  # from [workload.params] and the workload overrides
    "placement": object,  # a mode name or a list of host indices: checked against the topology
}
#: ``[run]`` keys without an engine default, so one scenario file serves both: ``timeout_s``, the
#: live engine's wall-clock limit and the simulator's virtual-time limit (uet.sim.scenario; checked
#: as a number of seconds)
_ONE_ENGINE_KEYS = {"timeout_s"}
#: the tables a scenario file may hold
_TABLES = ("endpoint", "faults", "reference", "run", "topology", "workload")

#: upper bounds of the whole-number ``[run]`` keys (**decision**: far above any run the engines
#: can finish, low enough that a typo — 10^12 messages, a 100 TB message — is refused up front
#: instead of overflowing or running for ever)
RUN_LIMITS = {"endpoints": 1 << 16, "message_bytes": 1 << 32, "messages": 1 << 20, "seed": (1 << 63) - 1}

#: A workload registry (:data:`uet.workloads.WORKLOADS`): name → the class built as
#: ``cls(n, message_bytes=, messages=, seed=, params=)``, ValueError for a bad parameter.
WorkloadRegistry = Mapping[str, Callable[..., Any]]


def read_file(path: str) -> dict[str, Any]:
    """The tables of a scenario file (``run``, ``topology``, ``endpoint``, ``workload``,
    ``faults`` (the fault schedule, uet.fabric.model.faults), and ``reference``: the published
    figures of another simulator the scenario mirrors, read only by the CC suite): an unreadable
    file, bad TOML or an unknown table is a :class:`ScenarioError`."""
    from uet.config_file import ConfigFileError, read_toml

    try:
        doc = read_toml(path)
    except ConfigFileError as e:
        raise ScenarioError(str(e)) from None
    unknown = set(doc) - set(_TABLES)
    if unknown:
        raise ScenarioError(f"{path}: unknown table {sorted(unknown)[0]!r}; valid: {', '.join(_TABLES)}")
    wl = doc.get("workload", {})
    if set(wl) - {"params"} or not isinstance(wl.get("params", {}), dict):
        raise ScenarioError(f"{path}: [workload] holds one table, [workload.params] (the workload's own parameters)")
    return doc


def max_payload(mtu: int) -> int:
    """The largest ``payload_size`` whose data packets fit an IP MTU of ``mtu`` bytes."""
    from uet.ses.message import DATA_HEADER_BYTES

    return mtu - IP_UDP_BYTES - DATA_HEADER_BYTES


def refuse_rate(profile: str, rate: int | None) -> int:
    """The realtime profile's link rate (``rate``, or its default); a rate given with another
    profile is refused, never ignored: that profile has its own links."""
    if rate is not None and profile != "realtime":
        raise ScenarioError(
            f"--rate sets the realtime profile's link rate; the {profile} profile has its own "
            "(change it with -o host_link.rate_bps=... and -o fabric_link.rate_bps=...)"
        )
    return REALTIME_RATE_BPS if rate is None else rate


def parse_placement(text: str) -> str | list[int]:
    """A placement written as text: a mode name or a comma-separated list of host indices."""
    if "," not in text and not text.strip().isdigit():
        return text.strip()
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise ScenarioError(f"--placement {text!r}: rail, server or host indices such as 0,2,4,6") from None


def _whole(key: str, value: Any, lo: int, *, size: bool = False) -> int:
    from uet.config_file import parse_size

    if size and isinstance(value, str):
        try:
            value = parse_size(value)
        except ValueError as e:
            raise ScenarioError(f"[run] {key}: {e}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"[run] {key} = {value!r}: expected a whole number")
    if value < lo:
        raise ScenarioError(f"[run] {key} = {value}: must be at least {lo}")
    hi = RUN_LIMITS.get(key)
    if hi is not None and value > hi:
        raise ScenarioError(f"[run] {key} = {value:,}: at most {hi:,}")
    return value


def _check_run(s: dict[str, Any], rate_given: bool, engine: str, workloads: WorkloadRegistry | None) -> None:
    from uet.config_file import parse_rate

    defaults = run_defaults(engine)
    valid = set(defaults) | set(_EXTRA_RUN_KEYS) | _ONE_ENGINE_KEYS
    for key in s:
        if key not in valid:
            raise ScenarioError(f"[run]: unknown key {key!r}; valid keys: {describe_keys(valid - {'scenario'})}")
    if workloads is not None and s["workload"] not in workloads:
        raise ScenarioError(f"[run] workload = {s['workload']!r}: one of {', '.join(workloads)}")
    if s["profile"] not in PROFILES:
        raise ScenarioError(f"[run] profile = {s['profile']!r}: one of {', '.join(PROFILES)}")
    if s.get("transport", "uet") not in TRANSPORTS:
        raise ScenarioError(f"[run] transport = {s['transport']!r}: one of {', '.join(TRANSPORTS)}")
    s["endpoints"] = _whole("endpoints", s["endpoints"], 2)
    s["message_bytes"] = _whole("message_bytes", s["message_bytes"], 1, size=True)
    s["messages"] = _whole("messages", s["messages"], 1)
    s["seed"] = _whole("seed", s["seed"], 0)
    t = s.get("timeout_s", 1.0)
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t < float("inf"):
        raise ScenarioError(f"[run] timeout_s = {t!r}: expected a number of seconds above 0")
    r = s["rate_bps"]
    if isinstance(r, str):
        try:
            r = parse_rate(r)
        except ValueError as e:
            raise ScenarioError(f"[run] rate_bps: {e}") from None
    if isinstance(r, bool) or not isinstance(r, int | float) or not 1 <= r < float("inf"):
        raise ScenarioError(f"[run] rate_bps = {r!r}: expected a rate of at least 1 bit/s")
    s["rate_bps"] = int(r)
    for key, default in defaults.items():  # settings added later: at least the default's type
        if (
            key in s
            and not isinstance(s[key], type(default))
            and not (isinstance(default, float) and isinstance(s[key], int))
        ):
            raise ScenarioError(f"[run] {key} = {s[key]!r}: expected a {type(default).__name__}")
    for key, kind in _EXTRA_RUN_KEYS.items():
        if key in s and not isinstance(s[key], kind):
            raise ScenarioError(f"[run] {key} = {s[key]!r}: expected a {kind.__name__}")
    if s["workload"] == "pairs" and s["endpoints"] % 2:
        raise ScenarioError(f"pairs needs an even number of endpoints, not {s['endpoints']}")
    if rate_given and (s["profile"] == "lab" or (engine == "live" and s["profile"] != "realtime")):
        refuse_rate(s["profile"], s["rate_bps"])  # the live fabric process takes a rate on realtime only


def _check_placement(s: dict[str, Any], topo: Topology) -> None:
    """``[run] placement`` (a mode or a list of host indices) fits the topology and the ranks."""
    from uet.fabric.model.config import FabricError

    pl = s.get("placement", "default")
    if not isinstance(pl, str) and not (isinstance(pl, list) and all(type(h) is int for h in pl)):
        raise ScenarioError(f"[run] placement = {pl!r}: rail, server or a list of host indices")
    try:
        topo.placement(int(s["endpoints"]), pl)
    except FabricError as e:
        raise ScenarioError(f"[run] {e}") from None  # FabricError: "placement …"


def check(
    s: dict[str, Any],
    topology: dict[str, Any],
    endpoint: dict[str, Any],
    *,
    rate_given: bool,
    engine: str = "live",
    workloads: WorkloadRegistry | None = None,
) -> tuple[Topology, Settings]:
    """Check (and normalise in place: sizes and rates as numbers) a run's tables for ``engine``
    (module docstring). Returns the run's :class:`~uet.fabric.topology.Topology` and its derived
    settings (:func:`uet.scenario.derive`: ``endpoint`` laid over every default the scenario's
    physics gives)."""
    from uet.errors import UetError
    from uet.fabric.model.config import FabricError
    from uet.fep.config import FepConfig as EndpointConfig  # the same class, without the asyncio endpoint

    _check_run(s, rate_given, engine, workloads)
    check_dataclass(EndpointConfig(), endpoint, "[endpoint]")
    scn = Scenario(engine, s, topology, endpoint)
    try:
        topo = scn.fabric_topology()
    except OSError as e:
        raise ScenarioError(f"topology {s['topology']!r}: {e.strerror or e}") from None
    except (FabricError, UetError, ValueError, TypeError) as e:
        raise ScenarioError(f"topology: {e}") from None
    try:
        derived = derive(scn, topo)
    except (UetError, ValueError, TypeError) as e:
        raise ScenarioError(f"[endpoint]: {e}") from None
    payload = int(derived.endpoint["payload_size"])
    mtu = derived.physics.mtu
    if payload > max_payload(mtu):
        raise ScenarioError(
            f"[endpoint] payload_size = {payload} does not fit the fabric's {mtu}-byte MTU "
            f"(at most {max_payload(mtu)}: IP/UDP and PDS/SES headers take the rest)"
        )
    _check_placement(s, topo)
    return topo, derived


@dataclass(frozen=True)
class Given:
    """What a run gives over its scenario file (a command line's options, or a caller's values).

    Attributes:
        run: ``[run]`` keys set (a key whose value is None is not given).
        topology: a built-in topology name or TOML file, replacing the file's ``[topology]``.
        overrides: ``KEY=VALUE`` topology overrides (``uet-fabric -o``), after the file's.
        endpoint: ``KEY=VALUE`` ``[endpoint]`` overrides (``pds.cc=nscc``).
        workload: ``KEY=VALUE`` ``[workload.params]`` overrides.
        gpus_per_server: a rail topology's GPUs per server (its rails).
        placement: rank placement as text (:func:`parse_placement`).
    """

    run: Mapping[str, Any] = field(default_factory=dict)
    topology: str | None = None
    overrides: Sequence[str] = ()
    endpoint: Sequence[str] = ()
    workload: Sequence[str] = ()
    gpus_per_server: int | None = None
    placement: str | None = None


@dataclass(frozen=True)
class Resolved:
    """A scenario read and checked (:func:`resolve`).

    Attributes:
        run: the complete ``[run]`` table.
        topology: the inline ``[topology]`` table ({}: the one ``run["topology"]`` names).
        endpoint: the complete endpoint table: every derived default, the user's keys laid over.
        fabric: the run's topology as the engines build it.
        settings: the derivation (:func:`uet.scenario.derive`).
    """

    run: dict[str, Any]
    topology: dict[str, Any]
    endpoint: dict[str, Any]
    fabric: Topology
    settings: Settings

    def tables(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(run table, inline topology table, endpoint table): what the engines take."""
        return self.run, self.topology, self.endpoint


def resolve(
    engine: str,
    path: str | None = None,
    given: Given | None = None,
    *,
    workloads: WorkloadRegistry | None = None,
) -> Resolved:
    """A run's settings: ``engine``'s defaults (:func:`uet.scenario.run_defaults`), then the
    scenario file ``path``, then ``given``, checked (module docstring). When the run names no rate,
    the profile's own rate; ``pairs`` without an endpoint count runs 8 (it needs an even number;
    the default 9 is the incast's). ``workloads``: the workload registry the run's workload and
    its ``[workload.params]`` are checked against (None: not checked here; the engine refuses them
    when it builds the workload)."""
    g = given if given is not None else Given()
    s = run_defaults(engine)
    topo: dict[str, Any] = {}
    ep: dict[str, Any] = {}
    wparams: dict[str, Any] = {}
    explicit: set[str] = set()
    if path:
        doc = read_file(path)
        run = doc.get("run", {})
        s.update(run)
        explicit |= set(run)
        topo = doc.get("topology", {})
        ep = deep_update(ep, doc.get("endpoint", {}))
        wparams = dict(doc.get("workload", {}).get("params", {}))
        s["scenario"] = path
    for k, v in g.run.items():
        if v is not None:
            s[k] = v
            explicit.add(k)
    if g.topology:
        s["topology"] = g.topology
        topo = {}
    s["overrides"] = list(s.get("overrides", [])) + list(g.overrides)
    if g.gpus_per_server is not None:  # a rail topology's GPUs per server are its rails
        s["overrides"].append(f"rails={g.gpus_per_server}")
    if g.placement is not None:
        s["placement"] = parse_placement(g.placement)
        explicit.add("placement")
    try:
        ep = deep_update(ep, overrides_to_dict(list(g.endpoint)))
    except ValueError as e:
        raise ScenarioError(f"--endpoint-set: {e}") from None
    try:
        wparams.update(overrides_to_dict(list(g.workload)))
    except ValueError as e:
        raise ScenarioError(f"--workload-set: {e}") from None
    if wparams:
        s["workload_params"] = wparams
    if "rate_bps" not in explicit:  # the profile's own rate
        s["rate_bps"] = profile_rate(str(s.get("profile")))
    if s.get("workload") == "pairs" and "endpoints" not in explicit:
        s["endpoints"] = 8
    fabric, derived = check(s, topo, ep, rate_given="rate_bps" in explicit, engine=engine, workloads=workloads)
    if g.gpus_per_server is not None and fabric.gpus_per_server != g.gpus_per_server:
        raise ScenarioError(
            f"--gpus-per-server {g.gpus_per_server}: servers of several GPUs are modelled on the rail topologies "
            f"(kind rail, rail_only or rail_pods), not on {fabric.kind}"
        )
    if wparams and workloads is not None:
        try:  # the workload's own parameters, checked once (one line naming the key)
            workloads[s["workload"]](s["endpoints"], message_bytes=s["message_bytes"], seed=s["seed"], params=wparams)
        except ValueError as e:
            raise ScenarioError(f"[workload.params]: {e}") from None
    return Resolved(s, topo, derived.endpoint, fabric, derived)
