"""``uet-fabric``: run a leaf/spine fabric (all switches in one process) behind UDP sockets.

Each host-facing port is a UDP socket on ``--bind`` (127.0.0.1) at ``--base-port`` + host index
(0: ephemeral); each datagram is one Ethernet frame (fabric/switch.py). The model's settings come
from the topology, never from parallel options: ``--topology`` names a built-in (``default``,
``lab``, ``rail``, ``rail_only``, ``rail_pods``, ``three_tier``, ``fat_tree``) or a TOML file (its
``[topology]`` table: the fields of ``uet.fabric.topology.Topology``, ``[topology.host_link]``,
``[topology.switch.pfc]`` ...);
``--profile realtime`` (default, fabric/profiles.py: 100 Mb/s links, thresholds scaled per §8.9)
or ``lab`` (the model's 1 Gb/s defaults) is applied first, then the file, then ``-o KEY=VALUE``
overrides with dotted keys into the same tables (``-o switch.lb.mode=spray_rr``,
``-o hosts_per_leaf=5``, ``-o switch.tcs.0.ecn.kmin=4096``).

Output: one JSON line ``{"event": "ready", "hosts": [...]}`` on stdout once the sockets are bound
(host name, IP, leaf, UDP port: what a launcher needs); on SIGINT/SIGTERM the pcaps and telemetry
are flushed and one JSON line ``{"event": "summary", ...}`` follows (fabric counters, I/O stats,
timer pacing). ``--telemetry FILE`` writes JSON-lines records; ``--plot DIR`` renders PNG plots at
exit; ``--pcap DIR`` writes one pcap per switch port; ``--live`` shows a ``rich`` table of ports and
queues on stderr. Exit status 0, or 2 on a usage/configuration error (one line, no traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from uet.fabric.profiles import PROFILES, REALTIME_RATE_BPS
from uet.fabric.switch import FabricProcess, ProcessConfig
from uet.tools.cli import ArgumentParser, UsageError, float_arg, format_rate, int_arg, rate_arg, run_main, size_arg
from uet.tools.fault_options import add_fault_options, faults_from

from uet.errors import UetError
from uet.live.switch import check_switch, host_addrs, run_switch, switch_topology

__all__ = ["build_parser", "main", "serve"]


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="uet-fabric", description=__doc__.split("\n\n")[0])
    p.add_argument("--topology", "-t", default="default", help="built-in name or TOML file (default: default)")
    p.add_argument("--profile", choices=PROFILES, default="realtime", help="parameter profile applied first")
    p.add_argument(
        "--rate",
        type=rate_arg(1),
        default=None,
        help=f"link rate of the realtime profile, bit/s: 100M, 1G, 25Gbit (default {format_rate(REALTIME_RATE_BPS)})",
    )
    p.add_argument("-o", "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--bind", default="127.0.0.1", help="address the host-port sockets bind to")
    p.add_argument(
        "--base-port", type=int_arg(0, 65535), default=0, help="UDP port of host 0 (others follow); 0 = ephemeral"
    )
    p.add_argument("--host-addr", action="append", default=[], metavar="I=IP:PORT", help="fixed NIC address")
    p.add_argument("--telemetry", metavar="FILE", help="write telemetry records as JSON lines")
    p.add_argument("--plot", metavar="DIR", help="render PNG plots at exit")
    p.add_argument("--plot-label", metavar="TEXT", default="", help="begin each plot's title with TEXT (e.g. UET)")
    p.add_argument("--pcap", metavar="DIR", help="one pcap per switch port (or per host: --pcap-per host)")
    p.add_argument("--pcap-per", choices=("port", "host"), default="port", help="one pcap per switch port or host")
    p.add_argument(
        "--capture-max", type=size_arg(1024), metavar="SIZE", help="bytes each pcap may hold (default: no bound)"
    )
    p.add_argument("--live", action="store_true", help="live table of ports and queues (stderr)")
    p.add_argument("--timer", choices=("auto", "timerfd", "loop"), default="auto")
    p.add_argument(
        "--sample-ms", type=float_arg(0.0, open_lo=True), default=50.0, help="port byte snapshot / flush period"
    )
    p.add_argument("--seed", type=int_arg(0), default=0)
    p.add_argument(
        "--dilation",
        type=float_arg(1.0),
        default=1.0,
        metavar="TDF",
        help="time-dilation factor: model time runs TDF times slower than real time (uet.clock; 1)",
    )
    p.add_argument("--start-ns", type=int_arg(0), default=None, help=argparse.SUPPRESS)  # the run's start (uet-run)
    p.add_argument("--faults", metavar="FILE", help="apply the [faults] table of this scenario file")
    add_fault_options(p)
    p.add_argument("--no-uvloop", action="store_true", help="use the default asyncio loop")
    return p


def rate_for(profile: str, rate: int | None) -> int:
    """The realtime profile's link rate; ``--rate`` with another profile is refused, never ignored
    (:func:`uet.scenario.read.refuse_rate`)."""
    from uet.tools.run_settings import usage_errors

    from uet.scenario.read import refuse_rate

    with usage_errors():
        return refuse_rate(profile, rate)


def require_matplotlib(option: str = "--plot") -> None:
    """``--plot`` needs matplotlib: say so before the run instead of failing after it."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise UsageError(f"{option} needs matplotlib: pip install 'uet[plot]'")


def check_outputs(args: argparse.Namespace) -> None:
    """``--plot``/``--pcap`` folders made and ``--telemetry``'s folder checked before the run
    (shared by ``uet-fabric``, ``uet-run`` and ``uet-sim``)."""
    from uet.tools.cli import output_dir, output_file

    for opt in ("plot", "pcap"):
        if getattr(args, opt, None):
            output_dir(getattr(args, opt), f"--{opt}")
    for opt in ("telemetry", "csv"):
        if getattr(args, opt, None):
            output_file(getattr(args, opt), f"--{opt}")


def check_args(args: argparse.Namespace) -> Any:
    """Validate everything before a socket is opened (:func:`uet.live.switch.check_switch`);
    returns the topology."""
    from uet.tools.run_settings import usage_errors

    if args.plot:
        require_matplotlib()
    check_outputs(args)
    with usage_errors():
        topo, args.rate = check_switch(
            args.topology, args.profile, args.rate, args.overrides, base_port=args.base_port, addrs=args.host_addr
        )
    return topo


def _live_table(fp: FabricProcess, prev: dict[tuple[str, int], int], dt: float) -> Any:
    from rich.table import Table
    from uet.fabric.switch import fabric_counters

    c = fabric_counters(fp.fabric)
    t = Table(
        title=f"uet-fabric  t={fp.now() / 1e9:.1f}s  marks={c['ecn_marks']} trims={c['trims']} "
        f"drops={c['drops']} pauses={c['pauses']}",
        expand=False,
    )
    for col in (
        "port",
        "peer",
        "tx Mb/s",
        "tx frames",
        "rx frames",
        "queued B (tc0/3/6/7)",
        "paused",
        "marks",
        "trims",
    ):
        t.add_column(col, justify="right" if col not in ("port", "peer") else "left")
    now = fp.fabric.now
    for sw in fp.fabric.switches.values():
        for p in sw.ports:
            key = (sw.name, p.index)
            rate = (p.tx_bytes - prev.get(key, p.tx_bytes)) * 8 / dt / 1e6 if dt > 0 else 0.0
            prev[key] = p.tx_bytes
            peer = p.peer[0].name if p.peer else "-"
            q = p.qbytes
            paused = ",".join(str(tc) for tc in range(8) if p.paused_until[tc] > now) or "-"
            name = f"{sw.name}:{p.index}"
            t.add_row(
                name,
                peer,
                f"{rate:.1f}",
                str(p.tx_frames),
                str(p.rx_frames),
                f"{q[0]}/{q[3]}/{q[6]}/{q[7]}",
                paused,
                str(c["marks_by_port"].get(name, 0)),
                str(c["trims_by_port"].get(name, 0)),
            )
    return t


async def serve(args: argparse.Namespace, ready_out: Any = None) -> dict[str, Any]:
    """Run the fabric of the options until SIGINT/SIGTERM (:func:`uet.live.switch.run_switch`);
    returns the summary."""
    from uet.tools.run_settings import usage_errors

    topo = switch_topology(args.topology, args.profile, args.rate, args.overrides)
    table = None
    if args.faults:
        from uet.tools.run_settings import load_scenario

        table = load_scenario(args.faults).get("faults")
    with usage_errors():
        addrs = host_addrs(args.host_addr)
    cfg = ProcessConfig(
        faults=faults_from(args, table, args.seed),
        host=args.bind,
        base_port=args.base_port,
        host_addrs=addrs,
        telemetry=args.telemetry,
        keep_telemetry=bool(args.plot),
        sample_ns=int(args.sample_ms * 1e6),
        pcap_dir=args.pcap,
        pcap_per=args.pcap_per,
        pcap_max=args.capture_max,
        timer=args.timer,
        seed=args.seed,
        dilation=args.dilation,
        start_ns=args.start_ns,
    )
    return await run_switch(
        topo,
        cfg,
        ready_out or sys.stdout,
        plot_dir=args.plot,
        plot_label=args.plot_label,
        watch=_live if args.live else None,
    )


async def _live(fp: FabricProcess, stop: asyncio.Event) -> None:
    from rich.console import Console
    from rich.live import Live

    prev: dict[tuple[str, int], int] = {}
    period = 0.5
    with Live(_live_table(fp, prev, 0), console=Console(stderr=True), refresh_per_second=4) as live:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), period)
            except TimeoutError:
                pass
            live.update(_live_table(fp, prev, period))


def _body(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    from uet.endpoint import run
    from uet.live.worker import die_with_parent

    die_with_parent()
    try:
        run(serve(args), use_uvloop=not args.no_uvloop)
    except (UetError, ValueError, OSError) as e:
        raise UsageError(str(e)) from None
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``uet-fabric``: 0, 2 on a usage/configuration error, 130 on Ctrl-C."""
    return run_main("uet-fabric", _body, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
