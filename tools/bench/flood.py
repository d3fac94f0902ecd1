"""``uet-bench flood``: an honest peer's goodput before, during and after a SYN flood (the
project's bar: it keeps at least half of its clean goodput during a 10,000-packet/s flood and all
of it within 1 s after).

Three processes on loopback addresses: the honest receiver B (``uet-peer --mode sink``), the
flooder (a paced UDP sender of SYNs aimed at B from ``--sources`` loopback addresses of its own:
each datagram a RUD ``REQUEST_SYN`` for a new PDC with an SES SEND header, as a SYN flood sends
them) and this process, the honest sender A, which keeps ``--window`` messages of ``--size``
bytes in flight to B and timestamps every completion. Each of ``--rounds`` rounds has three
phases of ``--seconds``: clean, flood (``--rate`` SYNs per second), after. Figures are ratios to
the clean phase of the same round, then the median over rounds:

- ``during``: goodput while the flood lasts / clean goodput;
- ``after_1s``: goodput in the first second after the flood stopped / clean;
- ``after``: goodput from 1 s after the flood stopped to the end of the phase / clean.

The flooder is a process of its own so its cost is not the honest peer's: ``--pin`` puts it on
the last CPU and the two honest processes on the others (on a 2-core machine: A and B share
one core, the flooder has the other); the CPU seconds each process used in each phase are
reported (``cpu_s``) so a reader sees whether the flood took CPU the honest peer needed, and the
flooder's achieved rate is reported next to the one asked for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from uet.tools.cli import RunFailed, float_arg, int_arg, size_arg

from uet.endpoint import Endpoint, EndpointConfig, with_config
from uet.errors import UetError
from uet.link import loopback_addresses
from uet.wire.pds import REQUEST_SYN, ReqFlag
from uet.wire.ses import STANDARD, SesFlag, SesOpcode

__all__ = ["add_parser", "flood_packet", "run"]

JOB = 1
PHASES = ("clean", "flood", "after")
_SOM_STD = STANDARD[(1, "none")]
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def flood_packet(seq: int, *, job: int = JOB, payload: int = 64) -> bytes:
    """SYN number ``seq`` of a flood: a RUD ``REQUEST_SYN`` opening a new PDC (SPDCID from
    ``seq``) whose SES header starts a SEND of ``payload`` bytes to PIDonFEP 0 of ``job``."""
    pds = REQUEST_SYN.encode(
        REQUEST_SYN.make(psn=(1 << 20) + seq, spdcid=1 + seq % 0xFFFF, psn_offset=0, flags=ReqFlag.SYN | ReqFlag.AR)
    )
    ses = _SOM_STD.make(
        opcode=SesOpcode.SEND, flags=SesFlag.SOM | SesFlag.EOM | SesFlag.REL, message_id=seq & 0xFFFF,
        job_id=job, pid_on_fep=0, resource_index=0, initiator=7, request_length=payload,
    )  # fmt: skip
    return pds + _SOM_STD.encode(ses) + bytes(payload)


def _flooder(target: str, port: int, sources: list[str], rate: int) -> None:
    """The flooder process: reads ``go`` / ``stop`` lines; between them sends ``rate`` SYNs a
    second (paced by the clock, in bursts of at most 1 ms); after each ``stop`` prints how many
    it sent and over how long; exits at end of input."""
    socks = []
    for s in sources:
        k = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        k.bind((s, 0))
        k.setblocking(False)
        socks.append(k)
    pkts = [flood_packet(i) for i in range(4096)]
    dst = (target, port)
    seq = 0
    for line in sys.stdin:
        if line.strip() != "go":
            continue
        t0 = time.perf_counter()
        sent = 0
        os.set_blocking(sys.stdin.fileno(), False)
        while True:
            try:
                cmd = sys.stdin.readline()
            except (BlockingIOError, TypeError):
                cmd = ""
            if cmd.strip() == "stop":
                break
            due = int((time.perf_counter() - t0) * rate)
            while sent < due:
                try:
                    socks[seq % len(socks)].sendto(pkts[seq % len(pkts)], dst)
                except (BlockingIOError, OSError):
                    pass  # a full socket buffer: the packet is not sent (counted as not sent)
                else:
                    sent += 1
                seq += 1
            time.sleep(0.0005)
        os.set_blocking(sys.stdin.fileno(), True)
        print(json.dumps({"sent": sent, "seconds": time.perf_counter() - t0}), flush=True)


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, ValueError, IndexError):
        return 0.0


def _udp_drops(addr: str, port: int) -> int:
    """Datagrams the kernel dropped at the UDP socket bound to ``addr:port`` (its receive buffer
    was full; Linux ``/proc/net/udp``, 0 elsewhere)."""
    local = f"{int.from_bytes(socket.inet_aton(addr), 'little'):08X}:{port:04X}"
    try:
        for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
            f = line.split()
            if f[1] == local:
                return int(f[-1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _pin(pid: int, cpus: set[int]) -> None:
    if hasattr(os, "sched_setaffinity") and cpus:
        try:
            os.sched_setaffinity(pid, cpus)
        except OSError:
            pass


async def _measure(ns: argparse.Namespace) -> dict[str, Any]:
    a_addr, b_addr, *srcs = loopback_addresses(2 + ns.sources, seed=random.SystemRandom().getrandbits(32))
    port = 20000 + random.SystemRandom().randrange(20000)
    py = sys.executable
    peer = subprocess.Popen(  # noqa: S603 - our own argv
        [py, "-m", "uet.tools.peer", b_addr, "--port", str(port), "--job", str(JOB), "--mode", "sink"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    flooder = subprocess.Popen(  # noqa: S603 - our own argv
        [py, "-c", "import sys; from uet.tools.bench.flood import _flooder; "
         f"_flooder({b_addr!r}, {port}, {srcs!r}, {ns.rate})"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    ep: Endpoint | None = None
    try:
        assert peer.stdout is not None and flooder.stdin is not None and flooder.stdout is not None
        if not peer.stdout.readline():
            raise RunFailed("uet-peer did not start")
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if ns.pin and len(cpus) >= 2:
            _pin(flooder.pid, {cpus[-1]})
            for pid in (os.getpid(), peer.pid):
                _pin(pid, set(cpus[:-1]))
        # the RTO follows the measured round trip, as in uet-run's live engine: a loaded machine's
        # scheduling delays would otherwise fire the fixed 2 ms RTO in every phase
        cfg = with_config(EndpointConfig(payload_size=4096), rto_adaptive=True)
        ep = await Endpoint.open(a_addr, JOB, 0, port=port, config=cfg)
        done: list[tuple[float, int]] = []
        data = bytes(ns.size)
        stop = False

        async def stream() -> None:
            assert ep is not None
            while not stop:
                await ep.send(b_addr, data)
                done.append((time.perf_counter(), len(data)))

        workers = [asyncio.ensure_future(stream()) for _ in range(ns.window)]
        await asyncio.sleep(ns.warmup)
        procs = {"honest_sender": os.getpid(), "honest_receiver": peer.pid, "flooder": flooder.pid}
        rounds = []
        for _ in range(ns.rounds):
            marks: dict[str, float] = {}
            cpu: dict[str, dict[str, float]] = {}
            for ph in PHASES:
                c0 = {k: _cpu_s(p) for k, p in procs.items()}
                r0 = {k: ep.counters.get(k, 0) for k in ("rto", "retransmits")}
                d0 = _udp_drops(b_addr, port)
                marks[ph] = time.perf_counter()
                if ph == "flood":
                    flooder.stdin.write("go\n")
                    flooder.stdin.flush()
                await asyncio.sleep(ns.seconds)
                if ph == "flood":
                    flooder.stdin.write("stop\n")
                    flooder.stdin.flush()
                    marks["flood_end"] = time.perf_counter()
                cpu[ph] = {k: round(_cpu_s(p) - c0[k], 3) for k, p in procs.items()}
                cpu[ph].update({k: ep.counters.get(k, 0) - v for k, v in r0.items()})
                cpu[ph]["socket_drops"] = _udp_drops(b_addr, port) - d0
            marks["end"] = time.perf_counter()
            fl = json.loads(await asyncio.get_running_loop().run_in_executor(None, flooder.stdout.readline))
            rounds.append((marks, cpu, fl))
        stop = True
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        counters = dict(ep.counters)
    finally:
        if ep is not None:
            await ep.close()
        tails = []
        for p in (flooder, peer):
            if p.poll() is None:
                p.terminate()
            try:
                tails.append(p.communicate(timeout=10)[0] or "")
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                tails.append("")
    rec = _summary(ns, done, rounds, counters)
    rec["receiver"] = _receiver_counters(tails[1])
    return rec


#: the honest receiver's counters a flood moves (uet.pds.validation)
RECEIVER_COUNTERS = ("drop_unverified_syn", "drop_unverified_pdc_rate", "unverified_pdc_evicted", "pdc_open_target")


def _receiver_counters(tail: str) -> dict[str, int]:
    """The flood counters from ``uet-peer``'s closing JSON line (its last line of output)."""
    for line in reversed(tail.splitlines()):
        try:
            c = json.loads(line).get("counters", {})
        except (ValueError, AttributeError):
            continue
        return {k: c.get(k, 0) for k in RECEIVER_COUNTERS}
    return {}


def _goodput(done: list[tuple[float, int]], t0: float, t1: float) -> float:
    """Bytes per second completed in [t0, t1)."""
    return sum(n for t, n in done if t0 <= t < t1) / (t1 - t0) if t1 > t0 else 0.0


def _summary(
    ns: argparse.Namespace, done: list[tuple[float, int]], rounds: list[Any], counters: dict[str, int]
) -> dict[str, Any]:
    per_round = []
    for marks, cpu, fl in rounds:
        clean = _goodput(done, marks["clean"], marks["flood"])
        end = marks["flood_end"]
        during = _goodput(done, marks["flood"], end)
        after_1s = _goodput(done, end, end + 1.0)
        after = _goodput(done, end + 1.0, marks["end"])
        per_round.append(
            {
                "clean_mbps": round(clean * 8 / 1e6, 1),
                "during": round(during / clean, 3) if clean else None,
                "after_1s": round(after_1s / clean, 3) if clean else None,
                "after": round(after / clean, 3) if clean and marks["end"] > end + 1.0 else None,
                "flood_rate": round(fl["sent"] / fl["seconds"]),
                "cpu_s": cpu,
            }
        )

    def med(k: str) -> float | None:
        v = [r[k] for r in per_round if r[k] is not None]
        return round(statistics.median(v), 3) if v else None

    return {
        "bench": "flood",
        "rate": ns.rate,
        "sources": ns.sources,
        "seconds": ns.seconds,
        "size": ns.size,
        "window": ns.window,
        "pinned": ns.pin,
        "during": med("during"),
        "after_1s": med("after_1s"),
        "after": med("after"),
        "flood_rate": med("flood_rate"),
        "receiver_us_per_flood_packet": _flood_cost(rounds),
        "rounds": per_round,
        "sender_failures": counters.get("ops_failed", 0),
        "sender": {k: v for k, v in counters.items() if "rto" in k or "retrans" in k or "nack" in k or "drop" in k},
    }


def _flood_cost(rounds: list[Any]) -> float | None:
    """The honest receiver's extra CPU per flood packet (µs): its CPU seconds while flooded less
    those of the clean phase of equal length, over the packets sent, median over rounds."""
    v = [
        (cpu["flood"]["honest_receiver"] - cpu["clean"]["honest_receiver"]) / fl["sent"] * 1e6
        for _marks, cpu, fl in rounds
        if fl["sent"]
    ]
    return round(statistics.median(v), 2) if v else None


def add_parser(sub: Any) -> None:
    """The ``uet-bench flood`` subcommand (tools/bench/__init__.py)."""
    p = sub.add_parser(
        "flood", help="honest goodput before, during and after a SYN flood", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--rate", type=int_arg(1, 1_000_000), default=10_000, help="SYNs per second (default 10000)")
    p.add_argument("--sources", type=int_arg(1, 1000), default=1, help="flooding addresses (default 1)")
    p.add_argument("--seconds", type=float_arg(1.0), default=3.0, help="length of each phase (default 3; >= 1)")
    p.add_argument("--rounds", type=int_arg(1, 100), default=2, help="clean/flood/after rounds (default 2)")
    p.add_argument("--size", type=size_arg(1, 64 << 20), default=64 << 10, help="honest message size (default 64KiB)")
    p.add_argument("--window", type=int_arg(1, 1024), default=8, help="honest messages in flight (default 8)")
    p.add_argument("--warmup", type=float_arg(0.0), default=0.5, help="seconds of honest traffic before round 1")
    p.add_argument("--pin", action="store_true", help="flooder on the last CPU, the honest processes on the others")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    """Run the measurement and print it (exit 0; 1 if the run could not be made)."""
    try:
        rec = asyncio.run(_measure(ns))
    except (UetError, OSError) as e:
        raise RunFailed(str(e)) from None
    if ns.json:
        sys.stdout.write(json.dumps(rec) + "\n")
        return 0
    sys.stdout.write(
        f"SYN flood of {ns.rate}/s from {ns.sources} source(s) (achieved {rec['flood_rate']}/s), "
        f"{ns.rounds} round(s) of {ns.seconds} s phases\n"
        f"honest goodput during the flood: {rec['during']} x clean; first second after: {rec['after_1s']} x; "
        f"after that: {rec['after']} x\n"
        f"honest receiver: {rec['receiver_us_per_flood_packet']} us of CPU per flood packet; "
        f"{json.dumps(rec['receiver'])}\n"
    )
    for i, r in enumerate(rec["rounds"], 1):
        sys.stdout.write(
            f"  round {i}: clean {r['clean_mbps']} Mb/s, during {r['during']}, after_1s {r['after_1s']}, "
            f"after {r['after']}, cpu_s {json.dumps(r['cpu_s'])}\n"
        )
    return 0
