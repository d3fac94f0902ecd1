"""``uet-conformance``: a black-box conformance tester for any UET endpoint.

It sends hand-built packets (:mod:`uet.conformance.wirekit`) from a UDP socket on its own Fabric
Address (``--local``, bound on the same UDP port as the target) to the endpoint at ``--target``
and judges the replies, case by case (``--list`` shows every case and the spec section it checks).

What the tester must know of the target: its JobID / PIDonFEP / resource index (``--job --pid
--ri``), the memory regions it exposes (``--region KEY:SIZE:RIGHTS[:JOB]``) and the receives it
keeps posted (``--receive SIZE[:TAG[:trunc]]``), or all of that at once from a ``uet-peer``
identity line (``--identity FILE``) or a peer profile (``--config FILE``). ``--link ip`` talks to
the target directly over IP protocol 253 (a raw socket: root or CAP_NET_RAW). A case whose
precondition is missing is skipped with the reason. ``--keys FILE`` (a TSS key file) seals every
packet and enables the TSS cases.

Before the first case the tester sends one liveness probe: a target that does not answer it is
reported at once (exit status 1) instead of failing every case after its timeout. After the run
it says so when the target's SES responses carried a JobID other than ``--job`` (the usual cause
of a suite full of failures: the wrong ``--job``).

Exit status: 0 when every MUST case passed, 1 otherwise, 2 for usage errors (``-k`` matching no
case is one). A MUST case skipped for a missing precondition (a region or receive the tester was
not told of) counts as not passed, so exit status 1: the run did not show conformance. Cases that
do not apply to the target do not count: the TSS cases of a plaintext target (no ``--keys``;
**decision**: the spec notes make TSS optional), a secure target's fixed Start PSNs.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from uet.tools.cli import ArgumentParser, RunFailed, UsageError, output_file, run_main
from uet.tools.link_options import add_link_options, check_link_options

from uet.conformance import all_cases
from uet.conformance.case import CaseRun
from uet.conformance.profile import (
    PEER_DEFAULT_JOB,
    ProfileError,
    load_profile,
    parse_receive,
    parse_region,
    profile_from_identity,
)
from uet.conformance.report import list_cases, summary, table, to_json, write_junit, write_tap
from uet.conformance.selection import select
from uet.conformance.session import Session, Target, default_local
from uet.conformance.verdict import foreign_jobs, must_skipped

__all__ = ["main"]


def _int(text: str) -> int:
    return int(text, 0)


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="uet-conformance", description="Black-box conformance tests for a UET endpoint.")
    p.add_argument("--target", metavar="ADDR", help="Fabric Address of the endpoint under test")
    p.add_argument("--port", type=int, default=4793, help="UET UDP port of the target (default 4793)")
    p.add_argument("--local", metavar="ADDR", help="the tester's own address (default: chosen next to the target)")
    p.add_argument(
        "--job", type=_int, default=None, help="the target's JobID (default: --identity's, else 1 as uet-peer)"
    )
    p.add_argument("--pid", type=_int, default=None, help="the target's PIDonFEP")
    p.add_argument("--ri", type=_int, default=None, help="the target's resource index")
    p.add_argument("--region", action="append", default=[], metavar="KEY:SIZE:RIGHTS[:JOB]",
                   help="a memory region of the target (rights: r w a i); repeatable")  # fmt: skip
    p.add_argument("--receive", action="append", default=[], metavar="SIZE[:TAG[:trunc]]",
                   help="a receive the target keeps posted; repeatable")  # fmt: skip
    p.add_argument("--identity", metavar="FILE", help="a uet-peer identity line (its first stdout line), or '-'")
    p.add_argument("--config", metavar="FILE", help="a uet-peer profile TOML describing the target")
    p.add_argument("--keys", metavar="FILE", help="TSS key file of the target's secure domain")
    p.add_argument("--sdi", type=_int, default=None, help="secure domain (when the key file holds several)")
    p.add_argument("--timeout", type=float, default=1.0, help="seconds to wait for an expected reply (default 1)")
    p.add_argument(
        "--max-time", type=_seconds, default=300.0,
        help="the whole run's time (default 300 s): a case still running then is cut short and reported "
        "'timeout', the cases after it are reported as not run, exit status 1",
    )  # fmt: skip
    p.add_argument(
        "--case-time", type=_seconds, default=60.0,
        help="one case's time (default 60 s): a case that overruns it is reported 'timeout' and the run goes on",
    )  # fmt: skip
    p.add_argument("-k", dest="select", action="append", default=[], metavar="EXPR",
                   help="run cases whose id, area or title contains EXPR ('not EXPR' excludes)")  # fmt: skip
    p.add_argument("--list", action="store_true", help="list the cases with their spec references and exit")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failed case")
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML to FILE")
    p.add_argument("--tap", metavar="FILE", help="also write TAP (version 13) to FILE ('-': standard output)")
    p.add_argument("--seed", type=int, default=None, help="seed PDCIDs / PSNs chosen by the tester")
    p.add_argument("--agent", metavar="ADDR", default=None,
                   help="the target's agent (HOST:PORT or unix:PATH) that drives its sending side for the "
                        "initiator-side cases (default: --identity's)")  # fmt: skip
    p.add_argument("--coverage", action="store_true",
                   help="print the spec-notes rules the selected cases check, per section, and exit")  # fmt: skip
    p.add_argument(
        "--data-protect", choices=("none", "crc"), default=None,
        help="crc: the target appends and checks the CRC-32C trailer on every packet (default: --identity's, "
        "else none; TSS comes with --keys)",
    )  # fmt: skip
    add_link_options(p, data_protect=False)
    return p


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < v < 1e6:
        raise argparse.ArgumentTypeError(f"{text} s: give a time above 0 and below 10^6 s")
    return v


def build_target(args: argparse.Namespace, parser: argparse.ArgumentParser) -> Target:
    ident: dict[str, Any] = {}
    if args.identity:
        try:
            text = sys.stdin.readline() if args.identity == "-" else Path(args.identity).read_text().splitlines()[0]
            ident = json.loads(text)
        except (OSError, IndexError, ValueError) as e:
            parser.error(f"--identity {args.identity}: {e}")
    job = args.job if args.job is not None else ident.get("job", PEER_DEFAULT_JOB)
    t = Target(
        address=args.target or ident.get("address") or "",
        port=args.port if args.port != 4793 or "port" not in ident else ident["port"],
        job=job,
        pid=args.pid if args.pid is not None else ident.get("pid", 0),
        ri=args.ri if args.ri is not None else ident.get("ri", 0),
        agent=ident.get("agent") or "",
    )
    try:
        if ident:
            prof = profile_from_identity(ident)
            t.regions += prof.regions
            t.receives += prof.receives
        if args.config:
            prof = load_profile(args.config, job)
            t.regions += prof.regions
            t.receives += prof.receives
        t.regions += [parse_region(r, job) for r in args.region]
        t.receives += [parse_receive(r) for r in args.receive]
    except ProfileError as e:
        parser.error(str(e))
    if args.keys:
        from uet.keyfile import load_key_file
        from uet.tss.errors import KeyFileError

        try:
            t.keys = load_key_file(args.keys, wall_ns=time.time_ns())
            t.keys_text = Path(args.keys).read_text()
        except (KeyFileError, OSError) as e:
            parser.error(f"--keys: {e}")
        t.sdi = args.sdi
    t.crc = (args.data_protect or ident.get("data_protect")) == "crc"
    if t.crc and args.keys:
        parser.error("--data-protect crc and --keys exclude each other (TSS protects every packet)")
    return t


def main(argv: Sequence[str] | None = None) -> int:
    """``uet-conformance``: 0 when every MUST case passed, 1 otherwise, 2 for usage errors."""
    return run_main("uet-conformance", _main, argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    cases = select(all_cases(), args.select)
    if args.select and not cases:
        raise UsageError(f"-k {' -k '.join(args.select)} matched no case (--list shows them)")
    if args.list:
        list_cases(cases, sys.stdout, as_json=args.json)
        return 0
    if args.coverage:
        from uet.conformance.rules import coverage, print_coverage

        cov = coverage(cases)
        if args.json:
            print(json.dumps(cov))
        else:
            print_coverage(cov, sys.stdout)
        return 0
    if not args.target and not args.identity:
        parser.error("--target is required (or --identity naming it)")
    target = build_target(args, parser)
    if not target.address:
        parser.error("--target is required")
    try:
        ipaddress.ip_address(target.address)
    except ValueError:
        parser.error(f"--target {target.address!r} is not an IP address")
    check_link_options(args)
    if args.agent:
        from uet.conformance.driver import parse_address

        try:
            parse_address(args.agent)
        except ValueError as e:
            parser.error(f"--agent: {e}")
    for opt in ("junit", "tap"):  # a report that cannot be written is a mistake to say before the run, not after
        path = getattr(args, opt, None)
        if path and path != "-":
            output_file(path, f"--{opt}")
    local = args.local or default_local(target.address)
    # a run is reproducible: the seed of the tester's PDCIDs / PSNs / message IDs is always reported
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    try:
        session = Session(target, local, timeout=args.timeout, seed=seed, link=args.link, proto=args.ip_proto)
    except OSError as e:
        print(f"uet-conformance: cannot bind {local} port {target.port}: {e}", file=sys.stderr)
        return 2
    agent = args.agent or target.agent
    if agent:
        from uet.conformance.driver import Driver, DriverError

        try:
            session.driver = Driver(agent, timeout=max(args.timeout, 5.0))
        except ValueError as e:
            session.close()
            raise UsageError(f"--agent: {e}") from None
        except DriverError as e:
            session.close()
            raise RunFailed(str(e)) from None
    interrupted = False
    t0 = time.monotonic()
    run = CaseRun(session, t0, args.max_time, args.case_time, fail_fast=args.fail_fast)
    results = run.results
    try:
        _probe(session, args.link)
        run.run(cases)
    except KeyboardInterrupt:
        interrupted = True  # the cases run so far are reported below, then "interrupted", 130
    finally:
        session.close()
        if session.driver is not None:
            session.driver.close()
    info = {"address": target.address, "port": target.port, "job": target.job, "pid": target.pid, "ri": target.ri,
            "local": local, "link": args.link, "tss": target.keys is not None, "agent": agent or None,
            "seconds": round(time.monotonic() - t0, 3), "seed": seed}  # fmt: skip
    if interrupted:
        info["interrupted"] = True
    if args.junit:
        write_junit(results, args.junit, f"{target.address}:{target.port}")
    if args.tap and args.tap != "-":
        try:
            with open(args.tap, "w") as f:
                write_tap(results, f)
                print(f"# seed {seed}", file=f)
        except OSError as e:
            raise UsageError(f"--tap {args.tap}: {e.strerror or e}") from None
    if args.tap == "-":
        write_tap(results, sys.stdout)
        print(f"# seed {seed} (the same PDCIDs, PSNs and message IDs again: --seed {seed})")
    elif args.json:
        print(to_json(results, info))
    else:
        table(results, sys.stdout)
        print(f"seed {seed} (the same PDCIDs, PSNs and message IDs again: --seed {seed})")
    if interrupted:
        raise KeyboardInterrupt  # after the partial report: "uet-conformance: interrupted", exit 130
    others = foreign_jobs(session.log, target.job)
    if others:
        print(
            f"uet-conformance: note: the target's responses carried JobID {', '.join(f'{j:#x}' for j in others)}, "
            f"not --job {target.job:#x}: is --job (or --identity) right?",
            file=sys.stderr,
        )
    s = summary(results)
    skipped = must_skipped(results)
    if skipped:
        print(
            f"uet-conformance: {len(skipped)} MUST cases skipped for a missing precondition "
            f"(e.g. {skipped[0].case.id}: {skipped[0].reason}); tell the tester the target's regions and "
            "receives (--identity, --config, --region, --receive) to run them",
            file=sys.stderr,
        )
    if run.out_of_time:
        print(f"uet-conformance: --max-time {args.max_time:g} s reached: not every case ran", file=sys.stderr)
    complete = len(results) == len(cases) and not run.out_of_time
    return 0 if s["must_failed"] == 0 and not skipped and complete else 1


def _probe(session: Session, link: str) -> None:
    """One liveness probe before the first case: an unreachable target is one line, exit 1."""
    from uet.conformance.session import CheckFailed

    try:
        session.assert_alive()
    except CheckFailed:
        t = session.target
        raise RunFailed(
            f"the target {t.address} port {t.port} (--link {link}) did not answer a liveness probe within "
            f"{session.timeout:g} s: is it running there, with this port and link?"
        ) from None


if __name__ == "__main__":
    sys.exit(main())
