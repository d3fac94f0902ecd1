"""``uet-bench pair``: a UET transfer between two processes against the raw-UDP limit of the
same run.

This process sends, a spawned one receives, on two loopback Fabric Addresses. Each round measures
(a) the raw-UDP reference (:mod:`uet.tools.bench.raw`: every candidate way of receiving a blast
of the same bytes in datagrams of the same payload size; the best is the round's
``raw_udp_gbps``, ``raw_candidate`` names it, ``raw_candidates_gbps`` has them all), then (b) a
UET transfer of ``--size`` random bytes through two :class:`uet.endpoint.Endpoint` objects
(:mod:`uet.tools.bench.uet_side`), optionally impaired (``--loss --reorder --dup --corrupt``,
applied on transmit by both FEPs). It reports goodput, packets/s, the UET/raw ratio,
retransmissions, CPU time per packet on both sides and ``cpu_ratio`` (raw CPU per packet over
UET's, :func:`cpu_ratio`), ``intact`` (SHA-256 of what arrived == what
was sent) and ``duplicates`` (messages delivered more than once). With ``--tss`` every round
also runs a second UET transfer, right after the plaintext one, inside a secure domain made for
the run (:mod:`uet.tools.bench.tss`); ``ratio_vs_plaintext`` is the median over the rounds of
each round's secure goodput over its plaintext goodput.

Both processes read ``time.monotonic_ns()`` (one system-wide clock), so "first send" in the sender
and "last arrival" in the receiver are comparable. Messages carry their index in SES
``header_data`` (the 64-bit immediate data), so the receiver can order them and count duplicates
without touching the payload.
How the receiver takes the data (``--receive``):

* ``posted`` (default): the way RDMA applications and benchmarks work. Before the transfer the
  receiver registers one buffer for all of ``--size`` (its pages faulted in, as memory
  registration pins them) and posts one tagged receive per message (tag = message index) with
  :meth:`uet.endpoint.Endpoint.post_recv`; every message is placed straight into its slice of
  that buffer (the SES fast path's expected list). A message delivered twice would find no
  receive left for its tag and wait on the unexpected list, where ``duplicates`` counts it.
* ``unexpected``: the receiver calls :meth:`~uet.endpoint.Endpoint.recv` and every message is
  reassembled on the overflow path into fresh memory the endpoint allocates, so the zeroing of
  those pages by the kernel is paid on the receive path.

The raw-UDP receiver reads every datagram into one reused buffer and keeps none of it.

Rounds (``--rounds``, default 3 on the command line): the raw-UDP blast and the UET transfer
alternate, round after round, between the same two processes; ``raw_udp_gbps``,
``goodput_gbps``, ``ratio`` and the CPU figures are the medians over the rounds (``ratio`` is
the median of the per-round ratios), ``retransmits`` and ``duplicates`` the sums, ``intact``
holds when every round was intact, and ``rounds`` lists every round's own figures. On a shared
machine one short transfer is easily disturbed by other load; the median of alternating rounds
is the figure that repeats.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

from uet.tools.bench.options import (
    CRC_NOTE,
    MAX_PAIR_SIZE,
    PairOptions,
    add_impairment,
    add_peer_options,
    add_transfer_options,
    data_protect,
    pair_notes,
    size_list,
    transfer_options,
)
from uet.tools.bench.procs import expect, spawn
from uet.tools.bench.raw import BLAST_CANDIDATES, blast_receive, blast_send, loop_runner, raw_socket
from uet.tools.bench.report import aggregate, passed, print_table
from uet.tools.bench.tss import tss_fields
from uet.tools.bench.uet_side import uet_figures, uet_receiver, uet_sender
from uet.tools.cli import UsageError, float_arg, int_arg, probability, quiet_interrupt, size_arg
from uet.tools.link_options import local_link_options

__all__ = ["add_parser", "pair_child", "pair_command", "pair_options", "random_data", "run_pair"]

#: messages per size of a ``--sizes``/``-a`` sweep without ``--count`` (perftest's default)
SWEEP_COUNT = 1000

#: ``uet-bench pair --help``'s description
PAIR_DESCRIPTION = "``uet-bench``: benchmarks, each figure reported against the raw-UDP limit of the same run."


def pair_child(conn: Connection, opts: PairOptions) -> None:
    """The receiver process: per round every raw-UDP candidate, then the UET receiver; then the
    secure transfer's receiver with ``--tss``."""
    on_loop = loop_runner(opts.uvloop)

    for _round in range(max(1, opts.rounds)):
        if opts.raw:
            for kind in BLAST_CANDIDATES:
                s = raw_socket(opts.addresses[1])
                conn.send(("raw_ready", s.getsockname()[1]))
                conn.send(("raw_result", blast_receive(s, opts.payload, kind, on_loop)))
                s.close()
        on_loop(uet_receiver(conn, replace(opts, secure=False)))
        if opts.tss:
            on_loop(uet_receiver(conn, replace(opts, secure=True)))


def random_data(size: int, seed: int) -> bytes:
    """``size`` seeded random bytes, made in 16 MiB pieces (``randbytes`` of more than 256 MiB
    overflows a C int)."""
    rng = random.Random(seed)
    piece = 16 << 20
    if size <= piece:
        return rng.randbytes(size)
    return b"".join(rng.randbytes(min(piece, size - off)) for off in range(0, size, piece))


def run_pair(opts: PairOptions) -> dict[str, Any]:
    """Run the pair benchmark; returns the result record (see the module docstring)."""
    data = random_data(opts.size, opts.seed)
    sha_sent = hashlib.sha256(data).hexdigest()
    if opts.tss:
        # The run's secure-domain keys (current and, for --rotate, the next), made here and handed
        # to the receiver process as the SDME would; never printed.
        opts = replace(opts, tss_keys=(os.urandom(32).hex(), os.urandom(32).hex()))
    proc, conn = spawn(pair_child, opts)
    interrupted = False
    out: dict[str, Any] = {
        "mode": opts.mode,
        "bytes": opts.size,
        "payload": opts.payload,
        "loss": opts.loss,
        "reorder": opts.reorder,
        "dup": opts.dup,
        "corrupt": opts.corrupt,
        # what protected the reported transfer: with TSS the verdict is the secure one's (tss_fields)
        "data_protect": "tss" if opts.tss else data_protect(opts),
        "seed": opts.seed,
    }
    if opts.tss:
        out.update(tss=True, tamper=opts.tamper, rotate=opts.rotate)
    try:
        progress = None
        if opts.progress:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.percentage:>5.1f}%"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            progress.start()
        from uet.endpoint import run

        rounds: list[dict[str, Any]] = []
        secure_runs: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (sender record, figures)
        snd: dict[str, Any] = {}
        try:
            for _ in range(max(1, opts.rounds)):
                rnd = raw_round(conn, opts, data) if opts.raw else {}
                snd = run(uet_sender(conn, replace(opts, secure=False), data, progress), use_uvloop=opts.uvloop)
                rnd.update(uet_figures(snd, sha_sent, rnd.get("raw_udp_gbps")))
                rnd["cpu_ratio"] = cpu_ratio(rnd)
                if opts.tss:
                    ssnd = run(uet_sender(conn, replace(opts, secure=True), data, progress), use_uvloop=opts.uvloop)
                    secure_runs.append((ssnd, uet_figures(ssnd, sha_sent, rnd.get("raw_udp_gbps"))))
                rounds.append(rnd)
            out.update(aggregate(rounds))
            if opts.counters:
                out["sender_counters"] = {k: v for k, v in snd["counters"].items() if v}
                out["receiver_counters"] = {k: v for k, v in snd["rx"]["counters"].items() if v}
        except KeyboardInterrupt:
            quiet_interrupt()
            if not rounds:
                raise
            interrupted = True  # Ctrl-C: the rounds completed so far are the result
            out.update(aggregate(rounds))
            out["interrupted"] = True
        finally:
            if progress is not None:
                progress.stop()
        if secure_runs:  # the run's verdict is the secure transfer's (tss_fields)
            out["plaintext_error"] = out["error"]
            out.update(tss_fields(secure_runs, rounds, opts))
            out["error"] = out["secure"]["error"]
        if out.get("ratio") is None:
            out["ratio"] = None
        out.setdefault("raw_udp_gbps", None)
        return out
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        conn.close()
        if interrupted:
            proc.terminate()
        proc.join(10)
        if proc.is_alive():  # pragma: no cover - only when the child hangs
            proc.terminate()
            proc.join(5)


def cpu_ratio(rnd: dict[str, Any]) -> float | None:
    """CPU time per packet of the raw blast (sender + receiver, the round's best candidate) over
    that of the UET transfer: the data path's cost against the raw limit, which other load on
    the machine does not move the way it moves wall-clock goodput (None without a raw round)."""
    raw = (rnd.get("raw_sender_cpu_us_per_pkt") or 0) + (rnd.get("raw_receiver_cpu_us_per_pkt") or 0)
    uet = rnd["sender_cpu_us_per_pkt"] + rnd["receiver_cpu_us_per_pkt"]
    return round(raw / uet, 3) if raw and uet else None


def raw_round(conn: Connection, opts: PairOptions, data: bytes) -> dict[str, Any]:
    """One raw-UDP blast of ``data`` per candidate receiver; the best one's figures, which
    candidate that was, and every candidate's goodput."""
    figures = {kind: _blast(conn, opts, data) for kind in BLAST_CANDIDATES}
    best = max(figures, key=lambda k: figures[k]["raw_udp_gbps"])
    out = dict(figures[best])
    out["raw_candidate"] = best
    out["raw_candidates_gbps"] = {k: f["raw_udp_gbps"] for k, f in figures.items()}
    return out


def _blast(conn: Connection, opts: PairOptions, data: bytes) -> dict[str, Any]:
    port = expect(conn, "raw_ready")
    s = raw_socket(opts.addresses[0])
    try:
        snd = blast_send(s, (opts.addresses[1], port), memoryview(data), opts.payload)
        rcv = expect(conn, "raw_result", opts.timeout)
    finally:
        s.close()
    raw_t = max(1, rcv["last_ns"] - snd["t0_ns"])
    raw_bps = rcv["bytes"] * 8 / (raw_t / 1e9)
    return {
        "raw_udp_gbps": round(raw_bps / 1e9, 4),
        "raw_udp_bytes": rcv["bytes"],
        "raw_pps": round(rcv["packets"] / (raw_t / 1e9)),
        "raw_sender_cpu_us_per_pkt": round(snd["cpu_s"] * 1e6 / max(1, snd["packets"]), 2),
        "raw_receiver_cpu_us_per_pkt": round(rcv["cpu_s"] * 1e6 / max(1, rcv["packets"]), 2),
        "raw_stalls": snd["stalls"],
    }


def add_parser(sub: Any) -> None:
    p = sub.add_parser("pair", help="UET transfer vs raw UDP between two processes", description=PAIR_DESCRIPTION)
    p.add_argument(
        "--size", type=size_arg(1, MAX_PAIR_SIZE), default=64 << 20, help="bytes to transfer (default 64MiB)"
    )
    p.add_argument("--message-size", type=size_arg(1, 0xFFFFFFFF), default=None, help="bytes per message")
    add_impairment(p)
    p.add_argument(
        "--timeout", type=float_arg(0.0, open_lo=True), default=600.0, help="give up on the UET transfer after (s)"
    )
    p.add_argument("--no-raw", action="store_true", help="skip the raw-UDP reference")
    p.add_argument(
        "--rounds",
        type=int_arg(1),
        default=3,
        help="alternating raw-UDP/UET rounds; figures are medians over them (default 3)",
    )
    p.add_argument(
        "--receive",
        choices=["posted", "unexpected"],
        default="posted",
        help="posted: tagged receives into a registered buffer (default); unexpected: recv() on the overflow path",
    )
    p.add_argument("--counters", action="store_true", help="include both endpoints' counters")
    p.add_argument(
        "--tss",
        action="store_true",
        help="also run the UET transfer inside a secure domain (keys made for the run); adds a 'secure' record",
    )
    p.add_argument(
        "--tamper",
        type=probability,
        default=0.0,
        metavar="P",
        help="(implies --tss) flip one random bit in a fraction P of the sealed datagrams on the wire; "
        "adds auth_failures",
    )
    p.add_argument("--rotate", action="store_true", help="(implies --tss) rotate the key half-way through")
    p.add_argument(
        "--cprofile", metavar="DIR", help="cProfile both sides of the UET phase into DIR/{sender,receiver}.prof"
    )
    add_transfer_options(p)
    p.add_argument(
        "--sizes",
        type=size_list(MAX_PAIR_SIZE),
        metavar="LIST",
        help="sweep these message sizes (comma-separated, e.g. 4KiB,64KiB,1MiB): one row each",
    )
    p.add_argument(
        "-a", "--all", action="store_true", help="sweep message sizes 2 B to 32 KiB in powers of two (perftest -a)"
    )
    p.add_argument(
        "--count", type=int_arg(1), default=None,
        help=f"messages per size in a sweep (default {SWEEP_COUNT}; like perftest -n)",
    )  # fmt: skip
    add_peer_options(p)
    p.set_defaults(run=pair_command)


def pair_command(ns: argparse.Namespace) -> int:
    """``uet-bench pair``: run, print the table or JSON; exit 1 when the transfer failed."""
    if ns.peer:
        from uet.tools.bench.peer import pair_peer

        if ns.sizes or ns.all or ns.count is not None:
            raise UsageError("--sizes, -a and --count sweep message sizes between two local processes; "
                             "with --peer give --size and --message-size")  # fmt: skip

        return pair_peer(ns)
    local_link_options(ns)
    if ns.sizes or ns.all:
        from uet.tools.bench.sweep import pair_sweep

        if ns.count is None:
            ns.count = SWEEP_COUNT

        return pair_sweep(ns, pair_options(ns))
    opts = pair_options(ns)
    if data_protect(opts) == "crc" and opts.data_protect is None and not opts.tss:
        sys.stderr.write(f"uet-bench: note: {CRC_NOTE}\n")
    rec = run_pair(opts)
    rec.update(pair_notes(opts, rec))
    if ns.json:
        sys.stdout.write(json.dumps(rec) + "\n")
    else:
        print_table(f"uet-bench pair ({opts.mode.upper()}, {opts.size} bytes, payload {opts.payload})", rec)
    if rec.get("interrupted"):
        raise KeyboardInterrupt
    return 0 if passed(rec) else 1


def pair_options(ns: argparse.Namespace) -> PairOptions:
    """The :class:`PairOptions` of a ``pair`` command line (addresses and port checked)."""
    return transfer_options(
        ns,
        "uet-bench",
        size=ns.size,
        progress=not ns.json and sys.stderr.isatty(),
        message_size=ns.message_size,
        loss=ns.loss,
        reorder=ns.reorder,
        dup=ns.dup,
        corrupt=ns.corrupt,
        timeout=ns.timeout,
        raw=not ns.no_raw,
        rounds=ns.rounds,
        receive=ns.receive,
        profile=ns.cprofile,
        counters=ns.counters,
        tss=ns.tss or ns.tamper > 0 or ns.rotate or ns.data_protect == "tss",
        tamper=ns.tamper,
        rotate=ns.rotate,
        data_protect=ns.data_protect if ns.data_protect != "tss" else None,
    )
