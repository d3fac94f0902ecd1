"""The settings of ``uet-run`` and ``uet-sim``, read and checked once, before any process starts
(issue 14), into the scenario model (:mod:`uet.scenario`), from which every default is derived.

* ``[run]`` (the scenario file's table and the options that override it): a key that is not a
  setting is refused, naming the valid ones; each value is type- and range-checked (sizes and
  rates may be written as ``"64KiB"`` / ``"100M"``); ``pairs`` needs an even number of endpoints;
  ``rate_bps`` is refused, not ignored, where it cannot apply: on the ``lab`` profile (the model's
  own links), and on the live engine with any profile but ``realtime`` (the fabric process takes
  the rate of the realtime profile only); the simulator takes it on ``datacenter`` too.
* ``[endpoint]`` and ``--endpoint-set``: checked against :class:`uet.EndpointConfig` (and its
  nested :class:`uet.pds.PdsConfig`) by :func:`uet.tools.config_check.check_dataclass`.
* ``[topology]``, ``--topology`` and ``-o``: loaded as ``uet-fabric`` will load them.
* the payload must fit the fabric's MTU: an IPv4 + UDP + PDS/SES data packet of ``payload_size``
  bytes must not exceed the smaller of the host and fabric links' MTU, else the switch drops every
  frame as oversize and the run would only time out.
* ``--plot`` needs matplotlib.

Every mistake is a :class:`uet.tools.cli.UsageError`: one line, exit status 2.
"""

from __future__ import annotations

from typing import Any

from uet.tools.cli import UsageError, int_arg, parse_rate, parse_size
from uet.tools.config_check import check_dataclass, describe_keys

__all__ = ["IP_UDP_BYTES", "add_workload_option", "check_settings", "load_scenario", "max_payload", "read_settings"]

#: IPv4 (20) + UDP (8) header bytes in front of every UET datagram on the fabric
IP_UDP_BYTES = 28
#: settings that are not among the engine's defaults (uet.scenario.run_defaults) but may appear in
#: ``[run]``
_EXTRA_RUN_KEYS = {
    "scenario": str,
    "overrides": list,
    "pcap": str,
    "plot": str,
    "telemetry": str,
    "workload_params": dict,  # from [workload.params] and --workload-set
    "placement": object,  # a mode name or a list of host indices: checked against the topology
}
#: ``[run]`` keys without an engine default, so one scenario file serves both: ``timeout_s``, the
#: live engine's wall-clock limit and the simulator's virtual-time limit (uet.sim.scenario; checked
#: as a number of seconds)
_ONE_ENGINE_KEYS = {"timeout_s"}


def load_scenario(path: str) -> dict[str, Any]:
    """The tables of a scenario file (``run``, ``topology``, ``endpoint``, ``faults`` (the fault
    schedule, uet.fabric.model.faults), and ``reference``: the
    published figures of another simulator the scenario mirrors, read only by ``uet-sim
    --suite``), read the same way by ``uet-run`` and ``uet-sim``: an unreadable file, bad TOML or an unknown table is a
    :class:`UsageError` (one line, exit 2)."""
    from uet.config_file import ConfigFileError, read_toml

    try:
        doc = read_toml(path)
    except ConfigFileError as e:
        raise UsageError(str(e)) from None
    unknown = set(doc) - {"run", "topology", "endpoint", "reference", "faults", "workload"}
    if unknown:
        raise UsageError(
            f"{path}: unknown table {sorted(unknown)[0]!r}; valid: endpoint, faults, reference, run, topology, workload"
        )
    wl = doc.get("workload", {})
    if set(wl) - {"params"} or not isinstance(wl.get("params", {}), dict):
        raise UsageError(f"{path}: [workload] holds one table, [workload.params] (the workload's own parameters)")
    return doc


def max_payload(mtu: int) -> int:
    """The largest ``payload_size`` whose data packets fit an IP MTU of ``mtu`` bytes."""
    from uet.ses.message import DATA_HEADER_BYTES

    return mtu - IP_UDP_BYTES - DATA_HEADER_BYTES


#: upper bounds of the whole-number ``[run]`` keys (**decision**: far above any run the engines
#: can finish, low enough that a typo — 10^12 messages, a 100 TB message — is refused up front
#: instead of overflowing or running for ever)
RUN_LIMITS = {"endpoints": 1 << 16, "message_bytes": 1 << 32, "messages": 1 << 20, "seed": (1 << 63) - 1}


def _whole(key: str, value: Any, lo: int, *, size: bool = False) -> int:
    if size and isinstance(value, str):
        try:
            value = parse_size(value)
        except ValueError as e:
            raise UsageError(f"[run] {key}: {e}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"[run] {key} = {value!r}: expected a whole number")
    if value < lo:
        raise UsageError(f"[run] {key} = {value}: must be at least {lo}")
    hi = RUN_LIMITS.get(key)
    if hi is not None and value > hi:
        raise UsageError(f"[run] {key} = {value:,}: at most {hi:,}")
    return value


def _check_run(s: dict[str, Any], rate_given: bool, engine: str) -> None:
    from uet.fabric.profiles import PROFILES
    from uet.tools.run import TRANSPORTS, WORKLOADS

    from uet.scenario import run_defaults

    defaults = run_defaults(engine)
    valid = set(defaults) | set(_EXTRA_RUN_KEYS) | _ONE_ENGINE_KEYS
    for key in s:
        if key not in valid:
            raise UsageError(f"[run]: unknown key {key!r}; valid keys: {describe_keys(valid - {'scenario'})}")
    if s["workload"] not in WORKLOADS:
        raise UsageError(f"[run] workload = {s['workload']!r}: one of {', '.join(WORKLOADS)}")
    if s["profile"] not in PROFILES:
        raise UsageError(f"[run] profile = {s['profile']!r}: one of {', '.join(PROFILES)}")
    if s.get("transport", "uet") not in TRANSPORTS:
        raise UsageError(f"[run] transport = {s['transport']!r}: one of {', '.join(TRANSPORTS)}")
    s["endpoints"] = _whole("endpoints", s["endpoints"], 2)
    s["message_bytes"] = _whole("message_bytes", s["message_bytes"], 1, size=True)
    s["messages"] = _whole("messages", s["messages"], 1)
    s["seed"] = _whole("seed", s["seed"], 0)
    t = s.get("timeout_s", 1.0)
    if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t < float("inf"):
        raise UsageError(f"[run] timeout_s = {t!r}: expected a number of seconds above 0")
    r = s["rate_bps"]
    if isinstance(r, str):
        try:
            r = parse_rate(r)
        except ValueError as e:
            raise UsageError(f"[run] rate_bps: {e}") from None
    if isinstance(r, bool) or not isinstance(r, int | float) or not 1 <= r < float("inf"):
        raise UsageError(f"[run] rate_bps = {r!r}: expected a rate of at least 1 bit/s")
    s["rate_bps"] = int(r)
    for key, default in defaults.items():  # settings added later: at least the default's type
        if (
            key in s
            and not isinstance(s[key], type(default))
            and not (isinstance(default, float) and isinstance(s[key], int))
        ):
            raise UsageError(f"[run] {key} = {s[key]!r}: expected a {type(default).__name__}")
    for key, kind in _EXTRA_RUN_KEYS.items():
        if key in s and not isinstance(s[key], kind):
            raise UsageError(f"[run] {key} = {s[key]!r}: expected a {kind.__name__}")
    if s["workload"] == "pairs" and s["endpoints"] % 2:
        raise UsageError(f"pairs needs an even number of endpoints, not {s['endpoints']}")
    if rate_given and (s["profile"] == "lab" or (engine == "live" and s["profile"] != "realtime")):
        from uet.tools.fabric import rate_for  # the live fabric process takes --rate on realtime only

        rate_for(s["profile"], s["rate_bps"])


def check_settings(
    s: dict[str, Any], topology: dict[str, Any], endpoint: dict[str, Any], *, rate_given: bool, engine: str = "live"
) -> tuple[Any, Any]:
    """Check (and normalise in place: sizes and rates as numbers) a run's settings for ``engine``;
    see the module docstring. Returns the run's :class:`~uet.fabric.topology.Topology` and its
    derived settings (:func:`uet.scenario.derive`: ``endpoint`` laid over every default the
    scenario's physics gives). Raises :class:`UsageError`."""
    from uet.fabric.model.config import FabricError
    from uet.tools.fabric import require_matplotlib

    from uet.endpoint import EndpointConfig
    from uet.errors import UetError
    from uet.scenario import Scenario, derive

    _check_run(s, rate_given, engine)
    check_dataclass(EndpointConfig(), endpoint, "[endpoint]")
    scn = Scenario(engine, s, topology, endpoint)
    try:
        topo = scn.fabric_topology()
    except OSError as e:
        raise UsageError(f"topology {s['topology']!r}: {e.strerror or e}") from None
    except (FabricError, UetError, ValueError, TypeError) as e:
        raise UsageError(f"topology: {e}") from None
    try:
        derived = derive(scn, topo)
    except (UetError, ValueError, TypeError) as e:
        raise UsageError(f"[endpoint]: {e}") from None
    payload = int(derived.endpoint["payload_size"])
    mtu = derived.physics.mtu
    if payload > max_payload(mtu):
        raise UsageError(
            f"[endpoint] payload_size = {payload} does not fit the fabric's {mtu}-byte MTU "
            f"(at most {max_payload(mtu)}: IP/UDP and PDS/SES headers take the rest)"
        )
    _check_placement(s, topo)
    if s.get("plot"):
        require_matplotlib()
    return topo, derived


def add_placement_options(p: Any) -> None:
    """``--gpus-per-server`` and ``--placement`` (``uet-run`` and ``uet-sim``): servers and ranks."""
    p.add_argument(
        "--gpus-per-server",
        type=int_arg(1),
        metavar="G",
        help="rail topologies: GPUs per server, one NIC and one rail each (sets the topology's rails)",
    )
    p.add_argument(
        "--placement",
        metavar="HOW",
        help="rank → host: rail (rail-major, the default on rail topologies), server (server-major) "
        "or a comma-separated list of host indices",
    )


def parse_placement(text: str) -> str | list[int]:
    """``--placement``: a mode name or a comma-separated list of host indices."""
    if "," not in text and not text.strip().isdigit():
        return text.strip()
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--placement {text!r}: rail, server or host indices such as 0,2,4,6") from None


def _check_placement(s: dict[str, Any], topo: Any) -> None:
    """``[run] placement`` (a mode or a list of host indices) fits the topology and the ranks."""
    from uet.fabric.model.config import FabricError

    pl = s.get("placement", "default")
    if not isinstance(pl, str) and not (isinstance(pl, list) and all(type(h) is int for h in pl)):
        raise UsageError(f"[run] placement = {pl!r}: rail, server or a list of host indices")
    try:
        topo.placement(int(s["endpoints"]), pl)
    except FabricError as e:
        raise UsageError(f"[run] {e}") from None  # FabricError: "placement …"


def add_workload_option(p: Any) -> None:
    """``--workload-set KEY=VALUE`` (``uet-run`` and ``uet-sim``): a parameter of the workload's own."""
    p.add_argument(
        "--workload-set",
        dest="wl_overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of the workload's own ([workload.params]), e.g. senders=8 for incast",
    )


def read_settings(
    args: Any, engine: str, keys: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(run settings, inline topology table, endpoint table) of ``uet-run`` and ``uet-sim`` alike:
    ``engine``'s defaults (:func:`uet.scenario.run_defaults`), then the scenario file
    (``args.scenario``), then the options (``keys``: the option attributes that set ``[run]``
    keys; ``args.topology``, ``args.overrides``, ``args.ep_overrides``; ``args.wl_overrides``, the
    ``--workload-set`` parameters over the file's ``[workload.params]``, in ``workload_params``), checked
    (:func:`check_settings`). When the run names no rate, the profile's own rate; ``pairs``
    without an endpoint count runs 8 (it needs an even number; the default 9 is the incast's).
    The endpoint table returned is complete: every default derived from the scenario's physics
    (:func:`uet.scenario.derive`) with the user's keys laid over. Raises :class:`UsageError`."""
    from uet.fabric.profiles import overrides_to_dict

    from uet.scenario.model import deep_update, profile_rate, run_defaults

    s = run_defaults(engine)
    topo: dict[str, Any] = {}
    ep: dict[str, Any] = {}
    wparams: dict[str, Any] = {}
    explicit: set[str] = set()
    if args.scenario:
        doc = load_scenario(args.scenario)
        run = doc.get("run", {})
        s.update(run)
        explicit |= set(run)
        topo = doc.get("topology", {})
        ep = deep_update(ep, doc.get("endpoint", {}))
        wparams = dict(doc.get("workload", {}).get("params", {}))
        s["scenario"] = args.scenario
    for k in keys:
        v = getattr(args, k, None)
        if v is not None:
            s[k] = v
            explicit.add(k)
    if args.topology:
        s["topology"] = args.topology
        topo = {}
    s["overrides"] = list(s.get("overrides", [])) + args.overrides
    gpus = getattr(args, "gpus_per_server", None)
    if gpus is not None:  # a rail topology's GPUs per server are its rails
        s["overrides"].append(f"rails={gpus}")
    if getattr(args, "placement", None) is not None:
        s["placement"] = parse_placement(args.placement)
        explicit.add("placement")
    try:
        ep = deep_update(ep, overrides_to_dict(args.ep_overrides))
    except ValueError as e:
        raise UsageError(f"--endpoint-set: {e}") from None
    try:
        wparams.update(overrides_to_dict(getattr(args, "wl_overrides", [])))
    except ValueError as e:
        raise UsageError(f"--workload-set: {e}") from None
    if wparams:
        s["workload_params"] = wparams
    if "rate_bps" not in explicit:  # the profile's own rate
        s["rate_bps"] = profile_rate(str(s.get("profile")))
    if s.get("workload") == "pairs" and "endpoints" not in explicit:
        s["endpoints"] = 8
    _topo, derived = check_settings(s, topo, ep, rate_given="rate_bps" in explicit, engine=engine)
    if gpus is not None and _topo.gpus_per_server != gpus:
        raise UsageError(
            f"--gpus-per-server {gpus}: servers of several GPUs are modelled on the rail topologies "
            f"(kind rail, rail_only or rail_pods), not on {_topo.kind}"
        )
    from uet.workloads import make

    try:  # the workload's own parameters, checked once (one line naming the key)
        if wparams:
            make(s["workload"], s["endpoints"], message_bytes=s["message_bytes"], seed=s["seed"], params=wparams)
    except ValueError as e:
        raise UsageError(f"[workload.params]: {e}") from None
    return s, topo, derived.endpoint
