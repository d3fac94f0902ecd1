"""``uet-peer``: a standalone Fabric Endpoint process, the way ``iperf3 -s`` is a server.

It opens one FEP on a Fabric Address (direct UDP link, port 4793 or ``--port``) hosting process
``--pid`` of job ``--job`` with resource index ``--ri``, registers memory regions and keeps
receives posted (a peer profile, :mod:`uet.conformance.profile`: ``--config FILE`` or the built-in
one), and serves until SIGINT/SIGTERM:

* ``--mode sink`` (default): every message is received and dropped;
* ``--mode echo``: every untagged message is sent back to its source (same JobID/PIDonFEP/
  resource index convention as :class:`uet.endpoint.Peer`), for ``uet-bench rtt --peer``.

At start it prints ONE JSON line: its identity (address, port, job, pid, ri, TSS SDI) and what it
exposes (regions with keys, sizes, rights and job restriction; posted receives), which
``uet-conformance --identity`` reads. On shutdown it prints a second JSON line with its counters.

``--fabric HOST:PORT`` serves through a ``uet-fabric`` switch instead of the direct UDP link: the
peer then owns the NIC port of the fabric host whose address it serves on (the fabric link builds
the Ethernet/IPv4/UDP frames itself; ``--rate`` is that port's link rate and ``--mtu`` the fabric's IP MTU,
1500 by default like ``uet-fabric``'s: packets carry the largest payload that fits it), exactly as
a ``uet-run`` endpoint does.

``--link ip`` serves UET directly over IP protocol 253 instead of UDP (root or CAP_NET_RAW), and
``--data-protect crc`` adds the CRC-32C trailer to every packet (:mod:`uet.tools.link_options`).

``--agent ADDR`` also serves ``uet-conformance``'s driver interface (:mod:`uet.conformance.driver`)
on ``HOST:PORT`` (port 0 picks one) or ``unix:PATH``: the tester then drives this endpoint's
sending side for the initiator-side cases; the identity line names the address (``agent``).

``--keys FILE`` runs TSS with a key file (:mod:`uet.tss.keyfile`). Without it the peer is an open
memory server: anyone who reaches its address can read and write the regions it publishes. It
always says so on stderr, and on an address other hosts can reach (not loopback; with
``--fabric``, a switch that is not on loopback) it refuses to start unless ``--insecure`` says the
user means it. ``--fault NAME`` (repeatable)
is TEST-ONLY fault injection (:mod:`uet.conformance.faults`): the peer then breaks the spec on
purpose so tests can prove the conformance suite catches it.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import signal
import sys
from collections.abc import Sequence
from dataclasses import replace

from uet.tools.capture_options import add_capture_options, live_captures
from uet.tools.cli import ArgumentParser, UsageError, int_arg, port_number, rate_arg, run_main
from uet.tools.link_options import add_link_options, check_link_options, link_config
from uet.tools.run_settings import max_payload

from uet.conformance.faults import FAULTS
from uet.conformance.peer import Peer, PeerMode, PeerSettings
from uet.conformance.profile import PEER_DEFAULT_JOB, Profile, ProfileError, default_profile, load_profile
from uet.endpoint import EndpointConfig
from uet.errors import UetError
from uet.tss.establish import StartPsnMethod

__all__ = ["main"]


def _int(text: str) -> int:
    return int(text, 0)


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="uet-peer",
        description="A standalone UET endpoint to point uet-conformance or uet-bench --peer at.",
    )
    p.add_argument("address", nargs="?", default="127.0.0.1", help="Fabric Address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=port_number, default=4793, help="UET UDP port (default 4793)")
    p.add_argument("--job", type=_int, default=PEER_DEFAULT_JOB, help=f"JobID (24 bits, default {PEER_DEFAULT_JOB})")
    p.add_argument("--pid", type=_int, default=0, help="PIDonFEP (12 bits, default 0)")
    p.add_argument("--ri", type=_int, default=0, help="resource index (12 bits, default 0)")
    p.add_argument("--mode", choices=["sink", "echo"], default="sink", help="what to do with messages")
    p.add_argument("--config", metavar="FILE", help="peer profile (TOML: regions, receives); default built in")
    p.add_argument(
        "--keys", metavar="FILE", help="TSS key file (TOML: the secure domains and their keys; see the README)"
    )
    p.add_argument("--sdi", type=_int, default=None, help="secure domain to use when the key file holds several")
    p.add_argument(
        "--secure-start", choices=("1rtt", "0rtt"), default="1rtt",
        help="with --keys: how a new PDC's Start PSN is agreed (behaviour.md §2.3.2): 1rtt = RANDOM_1RTT_START "
        "(default), 0rtt = EXPECTED_0RTT_START",
    )  # fmt: skip
    p.add_argument(
        "--insecure", action="store_true",
        help="serve without --keys on a non-loopback address (anyone reaching it can read and write its regions)",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=None, help="seed PDCIDs / Start_PSNs (default random)")
    p.add_argument(
        "--fabric", type=_host_port, metavar="HOST:PORT", default=None,
        help="serve through a uet-fabric switch: the UDP address of this host's switch port",
    )  # fmt: skip
    p.add_argument(
        "--rate", type=rate_arg(1e3), default=None, metavar="RATE",
        help="with --fabric: the NIC's link rate, e.g. 10G (default: the fabric link's default)",
    )  # fmt: skip
    p.add_argument(
        "--mtu", type=int_arg(576, 65535), default=1500, metavar="BYTES",
        help="with --fabric: the fabric's IP MTU; payloads are sized to fit it (default 1500)",
    )  # fmt: skip
    p.add_argument(
        "--agent", metavar="ADDR", default=None,
        help="also serve the uet-conformance driver interface on ADDR (HOST:PORT, port 0 picks one, or unix:PATH)",
    )  # fmt: skip
    add_link_options(p)
    add_capture_options(p, per=False)
    p.add_argument(
        "--fault", action="append", default=[], choices=sorted(FAULTS), metavar="NAME",
        help="TEST ONLY: break a rule on purpose (" + ", ".join(sorted(FAULTS)) + ")",
    )  # fmt: skip
    return p


#: ``--secure-start``: how a new PDC's Start PSN is agreed under TSS (behaviour.md §2.3.2)
START_PSN = {"1rtt": StartPsnMethod.RANDOM_1RTT_START, "0rtt": StartPsnMethod.EXPECTED_0RTT_START}


def settings_from(args: argparse.Namespace) -> PeerSettings:
    """The peer the command line asks for."""
    # read the ECN field of what arrives: a CE mark is echoed as M in the ACK (behaviour.md §4.7)
    cfg = link_config(args, EndpointConfig(seed=args.seed, ecn_feedback=True))
    if args.fabric is not None:
        cfg = replace(cfg, payload_size=min(cfg.payload_size, max_payload(args.mtu)))
    return PeerSettings(
        address=args.address, job=args.job, pid=args.pid, ri=args.ri, port=args.port, mode=PeerMode(args.mode),
        config=cfg, keys=args.keys, sdi=args.sdi, start_psn=START_PSN[args.secure_start], faults=tuple(args.fault),
        fabric=args.fabric, rate=args.rate, link=args.link, ip_proto=args.ip_proto,
    )  # fmt: skip


def reachable_from_elsewhere(args: argparse.Namespace) -> bool:
    """Whether hosts other than this one can reach the peer's regions: its address is not loopback
    (through a ``uet-fabric`` switch: the switch is not on loopback)."""
    host: str = args.fabric[0] if args.fabric is not None else args.address
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: assume the worst
        return host != "localhost"


def open_memory_warning(args: argparse.Namespace) -> str:
    """The stderr line a peer without keys always prints (module docstring)."""
    where = "this host" if not reachable_from_elsewhere(args) else "the network"
    return (
        f"uet-peer: warning: no --keys: anyone on {where} who reaches {args.address} port {args.port} "
        "can read and write its published memory regions"
    )


async def _serve(args: argparse.Namespace, profile: Profile) -> int:
    peer = Peer(
        settings_from(args), profile,
        captures=lambda: live_captures(args.pcap, args.eventlog, args.capture_max, args.address),
    )  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await peer.open()
    except (UetError, OSError, ValueError) as e:
        print(f"uet-peer: {e}", file=sys.stderr)
        return 1
    ident = peer.identity()
    server = agent = None
    if args.agent is not None:  # the driver interface (uet.conformance.driver) on this endpoint
        from uet.interop.agent import Agent, serve_control

        assert peer.ep is not None
        agent = Agent(peer.ep)
        try:
            server, ident["agent"] = await serve_control(agent, args.agent)
        except (OSError, ValueError) as e:
            print(f"uet-peer: --agent {args.agent}: {e}", file=sys.stderr)
            await peer.close()
            return 1
    print(json.dumps(ident), flush=True)
    await stop.wait()
    if server is not None and agent is not None:
        server.close()
        await agent.aclose()
    print(json.dumps(await peer.close()), flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``uet-peer``: usage errors exit 2 with one line, Ctrl-C and SIGTERM stop it cleanly."""
    return run_main("uet-peer", _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rate is not None and args.fabric is None:
        parser.error("--rate needs --fabric (the direct link has no modelled rate)")
    if args.fabric is not None and any(FAULTS[f][0] is not None for f in args.fault):
        parser.error("packet-rewriting faults run on the direct link only; drop --fabric or the --fault")
    if args.link != "direct" and (args.fabric is not None or args.fault):
        parser.error("--link ip cannot be combined with --fabric or --fault")
    check_link_options(args, keys=args.keys)
    if args.agent is not None:
        from uet.conformance.driver import parse_address

        try:
            parse_address(args.agent)
        except ValueError as e:
            parser.error(f"--agent: {e}")
    if not args.keys and not args.insecure and reachable_from_elsewhere(args):
        parser.error(
            f"{args.address} is reachable from other hosts and without --keys anyone there can read and write "
            "this peer's memory regions: give --keys FILE, or --insecure if that is what you want"
        )
    for name, v, bits in (("job", args.job, 24), ("pid", args.pid, 12), ("ri", args.ri, 12)):
        if not 0 <= v < 1 << bits:
            parser.error(f"--{name} must fit in {bits} bits")
    try:
        profile = load_profile(args.config, args.job) if args.config else default_profile(args.job)
    except ProfileError as e:
        raise UsageError(str(e)) from None
    if args.keys:  # a missing or unsafe key file: one line, exit 2, before the peer opens
        from uet.keyfile import load_key_file
        from uet.tss.errors import KeyFileError

        try:
            load_key_file(args.keys, wall_ns=0)
        except KeyFileError as e:
            raise UsageError(str(e)) from None
    else:
        print(open_memory_warning(args), file=sys.stderr, flush=True)
    return asyncio.run(_serve(args, profile))


if __name__ == "__main__":
    sys.exit(main())
