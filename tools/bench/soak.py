"""``uet-bench soak --minutes N``: a long run between two endpoints over an impaired loopback link.

One process, two :class:`uet.Endpoint` FEPs on loopback addresses (direct link, both directions
impaired on transmit: loss, reordering, duplication), in one delivery mode or ``--mode mixed``
(RUD, ROD and RUDI messages in turn). The sender keeps ``--window`` messages of
random sizes (1 B .. ``--max-size``, each stamped with its sequence number and a checksum of its
content) in flight; the receiver checks every message. Every ``--every`` seconds one sample is
reported: elapsed seconds, messages and bytes delivered, send failures, missing / duplicated /
corrupt messages, and the process's RSS (resident set, from ``/proc/self/statm``; 0 where there
is none). Exit status 0 when nothing was lost, duplicated or corrupted and no send failed.

Without TSS a flipped bit is invisible to UET (behaviour.md §2.16), so this command impairs by
loss, reordering and duplication only; the integrity checks here are the receiver's.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import sys
import time
from typing import Any

from uet.tools.cli import float_arg, int_arg, probability, size_arg

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident set size of this process (Linux ``/proc/self/statm``), 0 where unavailable."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def _message(seq: int, size: int, rng: random.Random) -> bytes:
    body = rng.randbytes(max(size, 40) - 40)
    head = seq.to_bytes(8, "big")
    return head + hashlib.sha256(head + body).digest() + body


def _check(data: bytes | memoryview) -> int | None:
    """The sequence number of an intact message, None if corrupt."""
    b = bytes(data)
    if len(b) < 40:
        return None
    head, digest, body = b[:8], b[8:40], b[40:]
    return int.from_bytes(head, "big") if hashlib.sha256(head + body).digest() == digest else None


async def soak(
    minutes: float,
    *,
    loss: float = 0.05,
    reorder: float = 0.05,
    dup: float = 0.01,
    window: int = 8,
    max_size: int = 1 << 20,
    every: float = 10.0,
    seed: int = 1,
    mode: str = "rud",
    on_sample: Any = None,
) -> dict[str, Any]:
    """Run the soak; returns the final record (with ``samples``). Cancelled (Ctrl-C: asyncio's
    runner cancels the main task), it stops sending, closes both endpoints and returns the record
    so far with ``interrupted`` true and the messages still ``in_flight`` (not ``missing``)."""
    from uet import Endpoint
    from uet.link import loopback_addresses
    from uet.link.impair import ImpairmentConfig
    from uet.pds import Mode

    rng = random.Random(seed)
    imp: dict[str, Any] = {"loss": loss, "reorder": reorder, "dup": dup, "reorder_delay_s": 0.001}
    sysrng = random.SystemRandom()  # addresses and port: never the same as a concurrent run's
    for attempt in range(8):
        a_addr, b_addr = loopback_addresses(2, seed=sysrng.getrandbits(32))
        port = sysrng.randrange(20000, 60000)
        try:
            a = await Endpoint.open(a_addr, port=port, impairment=ImpairmentConfig(seed=seed, **imp))
        except OSError:
            if attempt == 7:
                raise
            continue
        try:
            b = await Endpoint.open(b_addr, port=port, impairment=ImpairmentConfig(seed=seed + 1, **imp))
        except OSError:
            await a.close()
            if attempt == 7:
                raise
            continue
        break
    modes = [Mode.RUD, Mode.ROD, Mode.RUDI] if mode == "mixed" else [Mode[mode.upper()]]
    st = {"sent": 0, "delivered": 0, "bytes": 0, "failures": 0, "corrupt": 0, "duplicated": 0}
    seen: set[int] = set()
    samples: list[dict[str, Any]] = []
    t0 = time.monotonic()
    end = t0 + minutes * 60.0
    errors: list[str] = []

    async def receiver() -> None:
        while True:
            m = await b.recv()
            seq = _check(m.data)
            if seq is None:
                st["corrupt"] += 1
            elif seq in seen:
                st["duplicated"] += 1
            else:
                seen.add(seq)
                st["delivered"] += 1
                st["bytes"] += len(m.data)

    async def one(seq: int) -> None:
        data = _message(seq, rng.randrange(1, max_size + 1), rng)
        pmode = modes[seq % len(modes)]
        try:
            await a.send(b.address, data, mode=pmode)
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            st["failures"] += 1
            if len(errors) < 5:
                errors.append(f"{type(e).__name__}: {e}")

    def sample() -> dict[str, Any]:
        s = {"t_s": round(time.monotonic() - t0, 1), **st, "rss_mb": round(rss_bytes() / 2**20, 1)}
        samples.append(s)
        if on_sample is not None:
            on_sample(s)
        return s

    rx = asyncio.ensure_future(receiver())
    next_sample = t0 + every
    seq = 0
    pending: set[asyncio.Future[None]] = set()
    interrupted = False
    try:
        while time.monotonic() < end:
            while len(pending) < window:
                pending.add(asyncio.ensure_future(one(seq)))
                seq += 1
                st["sent"] += 1
            _done, pending = await asyncio.wait(pending, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
            if time.monotonic() >= next_sample:
                sample()
                next_sample += every
        if pending:
            await asyncio.wait(pending, timeout=60.0)
        # let the receiver take what is still arriving
        for _ in range(200):
            if st["delivered"] + st["failures"] >= st["sent"]:
                break
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.uncancel():
            raise  # cancelled by something else as well: not ours to absorb
        interrupted = True  # Ctrl-C: close down and report what ran
    finally:
        for f in pending:
            f.cancel()
        rx.cancel()
        await asyncio.gather(rx, *pending, return_exceptions=True)
        await a.close()
        await b.close()
    final = sample()
    unsettled = st["sent"] - st["failures"] - st["delivered"]
    if interrupted:
        return {
            "minutes": minutes,
            "mode": mode,
            **{k: v for k, v in final.items() if k != "t_s"},
            "in_flight": unsettled,
            "errors": errors,
            "ok": False,
            "interrupted": True,
            "samples": samples,
        }
    missing = unsettled
    return {
        "minutes": minutes,
        "mode": mode,
        "loss": loss,
        "reorder": reorder,
        "dup": dup,
        **{k: v for k, v in final.items() if k != "t_s"},
        "missing": missing,
        "errors": errors,
        "ok": missing == 0 and not st["failures"] and not st["corrupt"] and not st["duplicated"],
        "samples": samples,
    }


def add_parser(sub: Any) -> None:
    """The ``uet-bench soak`` subcommand (tools/bench/__init__.py)."""
    p = sub.add_parser("soak", help="long impaired run between two endpoints", description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float_arg(0.0, open_lo=True), default=10.0, help="how long (default 10)")
    p.add_argument("--loss", type=probability, default=0.05)
    p.add_argument("--reorder", type=probability, default=0.05)
    p.add_argument("--dup", type=probability, default=0.01)
    p.add_argument(
        "--mode",
        choices=["rud", "rod", "rudi", "mixed"],
        default="rud",
        help="delivery mode; mixed: RUD, ROD, RUDI in turn",
    )
    p.add_argument("--window", type=int_arg(1), default=8, help="messages in flight (default 8)")
    p.add_argument("--max-size", type=size_arg(1, 64 << 20), default=1 << 20, help="largest message (default 1MiB)")
    p.add_argument("--every", type=float_arg(0.0, open_lo=True), default=10.0, help="seconds between samples")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="JSON lines: one per sample, then the summary")
    p.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    """Run the soak, printing a line (or a JSON line) per sample and a summary."""

    def show(s: dict[str, Any]) -> None:
        if ns.json:
            sys.stdout.write(json.dumps({"sample": s}) + "\n")
        else:
            sys.stdout.write(
                f"{s['t_s']:>8.1f} s  messages {s['delivered']:>8}  bytes {s['bytes']:>13}  "
                f"failures {s['failures']}  corrupt {s['corrupt']}  dup {s['duplicated']}  rss {s['rss_mb']} MB\n"
            )
        sys.stdout.flush()

    rec = asyncio.run(
        soak(
            ns.minutes, loss=ns.loss, reorder=ns.reorder, dup=ns.dup, window=ns.window, max_size=ns.max_size,
            every=ns.every, seed=ns.seed, mode=ns.mode, on_sample=show,
        )
    )  # fmt: skip
    if ns.json:
        sys.stdout.write(json.dumps({k: v for k, v in rec.items() if k != "samples"}) + "\n")
    else:
        lost = "in_flight" if rec.get("interrupted") else "missing"
        keys = ("delivered", "bytes", "failures", lost, "duplicated", "corrupt", "rss_mb", "ok")
        sys.stdout.write("summary: " + "  ".join(f"{k}={rec[k]}" for k in keys) + "\n")
        for e in rec["errors"]:
            sys.stdout.write(f"  error: {e}\n")
    if rec.get("interrupted"):
        raise KeyboardInterrupt  # after the summary so far: "uet-bench: interrupted", exit 130
    return 0 if rec["ok"] else 1
