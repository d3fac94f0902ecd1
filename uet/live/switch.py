"""The live engine's switch process (``uet-fabric``): every switch of a topology in one process
behind UDP sockets (:class:`uet.fabric.switch.FabricProcess`, the adapter), checked before a
socket is opened (:func:`check_switch`) and run until SIGINT/SIGTERM (:func:`run_switch`).

Output: one JSON line ``{"event": "ready", "hosts": [...]}`` once the sockets are bound (host name,
IP, leaf, UDP port: what a launcher needs); on the signal the pcaps and telemetry are flushed and
one JSON line ``{"event": "summary", ...}`` follows. tools/fabric.py parses the options into a
:class:`~uet.fabric.switch.ProcessConfig` and draws the ``--live`` table.
"""

from __future__ import annotations

import asyncio
import json
import signal
import tomllib
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from uet.errors import UetError
from uet.fabric.profiles import REALTIME_RATE_BPS, load_topology, overrides_to_dict
from uet.fabric.switch import FabricProcess, ProcessConfig
from uet.fabric.telemetry_io import plot, switch_thresholds
from uet.scenario.check import ScenarioError

if TYPE_CHECKING:
    from uet.fabric.topology import Topology

__all__ = ["check_switch", "host_addrs", "run_switch", "switch_topology"]


def switch_topology(topology: str, profile: str, rate_bps: int | None, overrides: Sequence[str]) -> Topology:
    """The topology the switch process models: ``topology`` (a built-in name or a TOML file) under
    ``profile`` at ``rate_bps`` (the realtime profile's default when None), with the ``-o``
    ``overrides`` (KEY=VALUE)."""
    rate = int(rate_bps or REALTIME_RATE_BPS)
    return load_topology(topology, profile=profile, rate_bps=rate, overrides=overrides_to_dict(list(overrides)))


def host_addrs(items: Sequence[str]) -> dict[int, tuple[str, int]]:
    """Fixed NIC addresses ``I=IP:PORT`` → {host index: (IP, UDP port)}; :class:`ScenarioError`."""
    out = {}
    for item in items:
        idx, _, addr = item.partition("=")
        ip, _, port = addr.rpartition(":")
        try:
            out[int(idx)] = (ip, int(port))
            if not ip or not 0 <= int(port) <= 65535 or int(idx) < 0:
                raise ValueError
        except ValueError:
            raise ScenarioError(f"--host-addr {item!r}: give I=IP:PORT (host index, address, UDP port)") from None
    return out


def check_switch(
    topology: str,
    profile: str,
    rate_bps: int | None,
    overrides: Sequence[str],
    *,
    base_port: int,
    addrs: Sequence[str],
) -> tuple[Topology, int]:
    """Everything checked before a socket is opened: the topology and the realtime profile's
    link rate (:func:`uet.scenario.read.refuse_rate`: a rate with another profile is refused),
    the host ports from ``base_port`` and the fixed addresses; :class:`ScenarioError` (one line)."""
    from uet.fabric.model.config import FabricError
    from uet.scenario.read import refuse_rate

    rate = refuse_rate(profile, rate_bps)
    try:
        topo = load_topology(topology, profile=profile, rate_bps=rate, overrides=overrides_to_dict(list(overrides)))
    except (FabricError, UetError, ValueError, TypeError, OSError, tomllib.TOMLDecodeError) as e:
        raise ScenarioError(str(e) or type(e).__name__) from None
    nhosts = len(topo.plan().hosts)
    if base_port and base_port + nhosts - 1 > 65535:
        raise ScenarioError(f"--base-port {base_port}: {nhosts} hosts need ports up to {base_port + nhosts - 1}")
    host_addrs(addrs)
    return topo, rate


async def run_switch(
    topo: Topology,
    cfg: ProcessConfig,
    out: TextIO,
    *,
    plot_dir: str | None = None,
    plot_label: str = "",
    watch: Callable[[FabricProcess, asyncio.Event], Coroutine[Any, Any, None]] | None = None,
) -> dict[str, Any]:
    """Run the fabric until SIGINT/SIGTERM (module docstring) and return the summary; ``watch``
    runs beside it until the signal (``--live``), ``plot_dir`` gets the PNG plots at exit."""
    fp = FabricProcess(topo, cfg)
    await fp.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    hosts = [
        {"host": h.name, "ip": h.ip, "leaf": h.switch, "leaf_port": h.port, "udp": list(fp.ports[i])}
        for i, h in enumerate(fp.fabric.hosts)
    ]
    out.write(json.dumps({"event": "ready", "timer": fp.timer.backend, "hosts": hosts}) + "\n")
    out.flush()
    watch_task = None
    if watch is not None:
        watch_task = asyncio.ensure_future(watch(fp, stop))
    summary = await fp.run(stop)
    if watch_task is not None:
        await watch_task
    if plot_dir:
        summary["plots"] = plot(fp.sink.kept, plot_dir, thresholds=switch_thresholds(topo.switch), label=plot_label)
    out.write(json.dumps({"event": "summary", **summary}) + "\n")
    out.flush()
    return summary
