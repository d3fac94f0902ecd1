"""``uet-run``'s settings checked once, in the launcher, before any process starts (issue 14).

* ``[run]`` (the scenario file's table and the options that override it): a key that is not a
  setting is refused, naming the valid ones; each value is type- and range-checked (sizes and
  rates may be written as ``"64KiB"`` / ``"100M"``); ``pairs`` needs an even number of endpoints;
  ``rate_bps`` belongs to the realtime profile and is refused, not ignored, with another.
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

import tomllib
from typing import Any

from uet.tools.cli import UsageError, parse_rate, parse_size
from uet.tools.config_check import check_dataclass, describe_keys

__all__ = ["IP_UDP_BYTES", "check_settings", "derive_cc_params", "load_scenario", "max_payload"]

#: IPv4 (20) + UDP (8) header bytes in front of every UET datagram on the fabric
IP_UDP_BYTES = 28
#: settings that are not in DEFAULT_RUN but may appear in ``[run]``
_EXTRA_RUN_KEYS = {"scenario": str, "overrides": list, "pcap": str, "plot": str, "telemetry": str}


def load_scenario(path: str) -> dict[str, Any]:
    """The tables of a scenario file (``run``, ``topology``, ``endpoint``, ``faults`` (the fault
    schedule, uet.fabric.model.faults), and ``reference``: the
    published figures of another simulator the scenario mirrors, read only by ``uet-sim
    --suite``), read the same way by ``uet-run`` and ``uet-sim``: an unreadable file, bad TOML or an unknown table is a
    :class:`UsageError` (one line, exit 2)."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: {e}") from None
    unknown = set(doc) - {"run", "topology", "endpoint", "reference", "faults"}
    if unknown:
        raise UsageError(
            f"{path}: unknown table {sorted(unknown)[0]!r}; valid: endpoint, faults, reference, run, topology"
        )
    return doc


def max_payload(mtu: int) -> int:
    """The largest ``payload_size`` whose data packets fit an IP MTU of ``mtu`` bytes."""
    from uet.ses.message import DATA_HEADER_BYTES

    return mtu - IP_UDP_BYTES - DATA_HEADER_BYTES


def derive_cc_params(s: dict[str, Any], endpoint: dict[str, Any], link_bps: int, rtt_ns: int) -> dict[str, Any]:
    """The endpoint table with the congestion control's link parameters taken from the run
    (**decision**, issue 11): when ``pds.cc`` names an algorithm and the profile is not
    ``datacenter``, ``pds.cc_params`` gets ``link_bps`` = the topology's host link rate
    (``link_bps``), ``base_rtt_ns`` = the profile's effective base RTT (``rtt_ns``: 1 ms for
    ``realtime``, whose RTT is the Python endpoints' and switch process's turnaround,
    :data:`uet.fabric.profiles.REALTIME_RTT_NS`) and
    ``mtu`` = the payload size, unless the table gives them. :class:`uet.cc.CcConfig`'s defaults
    (100 Gb/s, 12 µs, 4 KiB) are the ``datacenter`` profile's; at 100 Mb/s they make NSCC's
    window a thousand times too large to react to anything. Returns a new table."""
    pds = endpoint.get("pds") or {}
    if s.get("profile") == "datacenter" or pds.get("cc", "none") == "none":
        return endpoint
    given = pds.get("cc_params") or {}
    if not isinstance(given, dict):
        return endpoint
    derived = {
        "link_bps": int(link_bps),
        "base_rtt_ns": int(rtt_ns),
        "mtu": int(endpoint.get("payload_size", 4096)),
    }
    return {**endpoint, "pds": {**pds, "cc_params": {**derived, **given}}}


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
    return value


def _check_run(s: dict[str, Any], rate_given: bool) -> None:
    from uet.fabric.profiles import PROFILES
    from uet.tools.run import DEFAULT_RUN, TRANSPORTS, WORKLOADS

    valid = set(DEFAULT_RUN) | set(_EXTRA_RUN_KEYS)
    for key in s:
        if key not in valid:
            raise UsageError(f"[run]: unknown key {key!r}; valid keys: {describe_keys(set(DEFAULT_RUN))}")
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
    t = s["timeout_s"]
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
    for key, default in DEFAULT_RUN.items():  # settings added later: at least the default's type
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
    if rate_given and s["profile"] != "realtime":
        from uet.tools.fabric import rate_for

        rate_for(s["profile"], s["rate_bps"])


def check_settings(s: dict[str, Any], topology: dict[str, Any], endpoint: dict[str, Any], *, rate_given: bool) -> Any:
    """Check (and normalise in place: sizes and rates as numbers) a run's settings; see the
    module docstring. Returns the run's :class:`~uet.fabric.topology.Topology`. Raises
    :class:`UsageError`."""
    from uet.fabric.model.config import FabricError
    from uet.fabric.profiles import load_topology, overrides_to_dict
    from uet.tools.fabric import require_matplotlib

    from uet.endpoint import EndpointConfig
    from uet.errors import UetError

    _check_run(s, rate_given)
    cfg = check_dataclass(EndpointConfig(), endpoint, "[endpoint]")
    try:
        topo = load_topology(
            topology or s["topology"],
            profile=s["profile"],
            rate_bps=s["rate_bps"],
            overrides=overrides_to_dict(s.get("overrides", [])),
        )
    except OSError as e:
        raise UsageError(f"topology {s['topology']!r}: {e.strerror or e}") from None
    except (FabricError, UetError, ValueError, TypeError) as e:
        raise UsageError(f"topology: {e}") from None
    mtu = min(topo.host_link.mtu, topo.fabric_link.mtu)
    if cfg.payload_size > max_payload(mtu):
        raise UsageError(
            f"[endpoint] payload_size = {cfg.payload_size} does not fit the fabric's {mtu}-byte MTU "
            f"(at most {max_payload(mtu)}: IP/UDP and PDS/SES headers take the rest)"
        )
    if s.get("plot"):
        require_matplotlib()
    return topo
