"""``uet-bench rtt``: the round trip of a small message (UET send + reply) against the raw-UDP
ping-pong between the same two processes (:mod:`uet.tools.bench.raw`).

Each round (``--rounds``, default 1) runs every raw candidate (``blocking``, ``spin``, ``asyncio``), then
the UET ping-pong; the raw candidate with the lower p50 is the round's reference. The ``uet_*``
and ``raw_*`` percentiles are over every round's samples (the raw ones: each round's winner),
``ratio`` is ``uet_p50_us / raw_p50_us``, ``raw_candidate`` the candidate that won most rounds
and ``raw_candidates_p50_us`` each candidate's median p50 over the rounds.

The UET echo posts its next receive (:meth:`uet.endpoint.Endpoint.post_recv` with no buffer)
before it replies, as a ping-pong over a messaging API does (perftest's ``send_lat`` pre-posts):
a ping that found no receive posted would wait on the overflow list, whose guaranteed response
costs the pinger a CLEAR and the echo another ACK (behaviour.md §2.7, §6.4).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from multiprocessing.connection import Connection
from typing import Any

from uet.tools.bench.options import PairOptions, add_peer_options, add_transfer_options, size_list, transfer_options
from uet.tools.bench.procs import expect, pipe_recv, spawn
from uet.tools.bench.raw import RTT_CANDIDATES, loop_runner, ping_pong, pong, raw_socket
from uet.tools.bench.report import latency, print_rtt_sweep, print_table
from uet.tools.bench.uet_side import pds_mode, transfer_config
from uet.tools.cli import UsageError, int_arg, quiet_interrupt, size_arg
from uet.tools.link_options import local_link_options

__all__ = ["SWEEP_SIZES", "add_parser", "rtt_child", "rtt_command", "run_rtt"]


def rtt_child(conn: Connection, opts: PairOptions) -> None:
    """The echoing process: per round every raw candidate's pong, then a UET endpoint that sends
    every message back to its source."""
    from uet.endpoint import Endpoint

    on_loop = loop_runner(opts.uvloop)

    async def echo() -> None:
        ep = await Endpoint.open(opts.addresses[1], port=opts.port, config=transfer_config(opts))
        mode = pds_mode(opts.mode)

        async def loop() -> None:
            # the next receive is posted before the reply goes out, as a ping-pong benchmark over
            # a messaging API does (perftest's send_lat pre-posts its receives): the next ping
            # then finds it posted rather than waiting on the overflow list
            nxt = ep.post_recv(None)
            while True:
                m = await nxt
                nxt = ep.post_recv(None)
                await ep.send(m.source, m.data, mode=mode)

        task = asyncio.create_task(loop())
        conn.send(("uet_ready", None))
        await pipe_recv(conn)
        task.cancel()
        await ep.close()
        conn.send(("closed", None))

    for _round in range(max(1, opts.rounds)):
        for kind in RTT_CANDIDATES:
            s = raw_socket(opts.addresses[1])
            conn.send(("raw_ready", s.getsockname()[1]))
            pong(s, kind, on_loop)
            s.close()
        on_loop(echo())


def run_rtt(opts: PairOptions, count: int = 1000, size: int = 64) -> dict[str, Any]:
    """Ping-pong round trips, raw UDP (every candidate) then UET, round after round, between the
    same two processes (module docstring)."""
    from uet.endpoint import Endpoint

    on_loop = loop_runner(opts.uvloop)

    proc, conn = spawn(rtt_child, opts)
    msg = bytes(size)

    async def uet() -> list[float]:
        ep = await Endpoint.open(opts.addresses[0], port=opts.port, config=transfer_config(opts))
        await pipe_recv(conn, 60.0)
        mode = pds_mode(opts.mode)
        out: list[float] = []
        trips = count + count // 10
        # one deadline for the whole run (10 s a trip at most), not a wait_for task per trip:
        # the figure is the transport's round trip, not asyncio's timeout machinery
        async with asyncio.timeout(10.0 * trips):
            for i in range(trips):
                t0 = time.perf_counter_ns()
                fut = ep.send_nowait(opts.addresses[1], msg, mode=mode)
                await ep.recv()
                t1 = time.perf_counter_ns()
                await fut
                if i >= count // 10:
                    out.append((t1 - t0) / 1e3)
        await ep.close()
        conn.send(("close", None))
        await pipe_recv(conn, 60.0)
        return out

    try:
        uet_all: list[float] = []
        raw_all: list[float] = []
        rounds: list[dict[str, Any]] = []
        p50s: dict[str, list[float]] = {k: [] for k in RTT_CANDIDATES}
        for _round in range(max(1, opts.rounds)):
            raw: dict[str, list[float]] = {}
            for kind in RTT_CANDIDATES:
                port = expect(conn, "raw_ready")
                s = raw_socket(opts.addresses[0])
                try:
                    raw[kind] = ping_pong(s, (opts.addresses[1], port), size, count, kind, on_loop)
                finally:
                    s.close()
                if raw[kind]:
                    p50s[kind].append(statistics.median(raw[kind]))
            best = min(raw, key=lambda k: statistics.median(raw[k]) if raw[k] else float("inf"))
            u = on_loop(uet())
            uet_all += u
            raw_all += raw[best]
            rounds.append(
                {
                    "raw_candidate": best,
                    "raw_p50_us": round(statistics.median(raw[best]), 1) if raw[best] else None,
                    "uet_p50_us": round(statistics.median(u), 1) if u else None,
                }
            )
        res: dict[str, Any] = {
            "mode": opts.mode,
            "count": count,
            "size": size,
            **latency("uet", uet_all),
            **latency("raw", raw_all),
        }
        res["ratio"] = round(res["uet_p50_us"] / res["raw_p50_us"], 2)
        res["raw_candidate"] = Counter(r["raw_candidate"] for r in rounds).most_common(1)[0][0]
        res["raw_candidates_p50_us"] = {k: round(statistics.median(v), 1) if v else None for k, v in p50s.items()}
        if len(rounds) > 1:
            res["rounds"] = rounds
        return res
    finally:
        conn.close()
        proc.join(10)
        if proc.is_alive():  # pragma: no cover
            proc.terminate()
            proc.join(5)


#: ``rtt --all``: message sizes of the sweep (perftest ``-a`` style, powers of two up to what one
#: raw-UDP datagram of the reference ping-pong holds)
SWEEP_SIZES = [1 << k for k in range(1, 16)]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("rtt", help="UET vs raw UDP round trip of a small message")
    p.add_argument("--count", type=int_arg(1), default=1000, help="round trips measured (default 1000)")
    p.add_argument("--size", type=size_arg(1, 65000), default=64, help="message bytes (default 64)")
    p.add_argument(
        "--sizes",
        type=size_list(65000),
        metavar="LIST",
        help="sweep these message sizes (comma-separated, e.g. 64,1KiB,16KiB): one row each",
    )
    p.add_argument("-a", "--all", action="store_true", help="sweep sizes 2 B to 32 KiB in powers of two (perftest -a)")
    p.add_argument(
        "--rounds",
        type=int_arg(1),
        default=1,
        help="alternating raw-UDP/UET rounds; percentiles over all of them (default 1)",
    )
    add_transfer_options(p)
    add_peer_options(p)
    p.set_defaults(run=rtt_command)


def rtt_command(ns: argparse.Namespace) -> int:
    """``uet-bench rtt``: one size, or a sweep (``--sizes`` / ``--all``) printed as one table."""
    if ns.peer:
        from uet.tools.bench.peer import rtt_peer

        return rtt_peer(ns)
    local_link_options(ns)
    if ns.data_protect == "tss":
        raise UsageError("uet-bench rtt runs without TSS here; --data-protect tss works with pair (--tss)")
    opts = transfer_options(ns, "uet-bench", rounds=ns.rounds, data_protect=ns.data_protect)
    sizes = SWEEP_SIZES if ns.all else ns.sizes
    if not sizes:
        rec = run_rtt(opts, count=ns.count, size=ns.size)
        if ns.json:
            sys.stdout.write(json.dumps(rec) + "\n")
        else:
            print_table(f"uet-bench rtt ({rec['mode'].upper()}, {rec['size']} bytes)", rec)
        return 0
    rows: list[dict[str, Any]] = []
    try:
        for size in sizes:
            rows.append(run_rtt(opts, count=ns.count, size=size))
    except KeyboardInterrupt:
        quiet_interrupt()
        if not rows:
            raise
        print_rtt_sweep(ns, opts, rows)  # the sizes measured so far
        raise
    print_rtt_sweep(ns, opts, rows)
    return 0
