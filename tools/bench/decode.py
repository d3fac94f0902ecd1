"""``uet-bench decode``: ``uet-decode`` against tshark on the same capture, side by side.

Each round runs, one after the other and in alternating order (ours first in odd rounds, tshark
first in even ones), the one-line summary (``uet-decode FILE`` / ``tshark -r FILE``) and full JSON
(``uet-decode --json FILE`` / ``tshark -r FILE -T json``) of the same capture, output to
/dev/null. Each run is timed by the CPU time the child used (``getrusage`` of the child: user +
system), so other load on a shared machine does not enter the figures, and start-up is included
on both sides. Reported per mode: packets per CPU second of each (the best round) and the ratio
ours / tshark (> 1: ours is faster). tshark runs as users have it, without a UET dissector (4.0
has none): ``--lua`` adds the project's (interop/wireshark/uet.lua), which tshark then also runs.
``uet-decode`` runs as an installed package does, from cached bytecode (pip compiles it at install
time): a ``PYTHONDONTWRITEBYTECODE`` in the environment is dropped for it and its bytecode cached
in a temporary ``PYTHONPYCACHEPREFIX``, outside the source tree. One untimed run of each command
comes first (bytecode, page cache).

Without a capture the benchmark makes a mixed one (**decision**): the incast receiver's pcapng of
a ``uet-sim`` run with trims (requests, ACK_CC, NACK TRIMMED), followed by the built-in sample
capture (every delivery mode, control packets, IPv6, IP protocol 253, TSS, PFC). The default is
small (17 senders of 256 KiB: 3,657 frames); ``--large`` makes the incast 33 senders of 1 MiB
(30,089 frames), where per-packet costs outweigh start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from uet.tools.cli import UsageError, int_arg, size_arg

__all__ = ["LARGE", "add_parser", "bench_decode", "made_capture_size", "mixed_capture"]

MODES = {
    "summary": ([], []),
    "json": (["--json"], ["-T", "json"]),
}


def add_parser(sub: Any) -> None:
    """The ``uet-bench decode`` subcommand (tools/bench/__init__.py)."""
    p = sub.add_parser(
        "decode", help="uet-decode against tshark on the same capture", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("capture", nargs="?", help="pcap/pcapng to decode (default: a mixed capture made here)")
    p.add_argument("--against-tshark", action="store_true", help="time tshark on the same capture (needs tshark)")
    p.add_argument("--lua", action="store_true", help="tshark runs the project's Lua dissector too")
    p.add_argument("--rounds", type=int_arg(1), default=3, help="alternating rounds; the best of each is reported (3)")
    p.add_argument("--hosts", type=int_arg(3, 257), default=17, help="incast size of the made capture (17)")
    p.add_argument("--size", type=size_arg(4096, 1 << 30), default=256 << 10, help="bytes per sender there (256KiB)")
    p.add_argument(
        "--large",
        action="store_true",
        help=f"make the large capture: --hosts {LARGE[0]} --size {LARGE[1] >> 20}MiB (30,089 frames)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(run=run)


#: ``--large``: the made capture's incast size and bytes per sender
LARGE = (33, 1 << 20)


def made_capture_size(ns: argparse.Namespace) -> tuple[int, int]:
    """The incast size and bytes per sender of the capture to make, from the options."""
    if ns.large:
        if ns.capture is not None:
            raise UsageError("--large makes a capture: give no capture file with it")
        return LARGE
    return ns.hosts, ns.size


def mixed_capture(path: Path, hosts: int = 17, size: int = 256 << 10) -> int:
    """Write the default mixed capture (module docstring) to ``path``; returns its frame count."""
    from uet.interop.samples import load_sample
    from uet.tools.sim import main as sim_main

    from uet.pcap import PcapngWriter, read_capture

    with tempfile.TemporaryDirectory() as tmp:
        argv = ["-n", str(hosts), "--messages", "1", "--size", str(size), "--json", "--pcap", tmp]
        with open(os.devnull, "w") as null:
            old, sys.stdout = sys.stdout, null
            try:
                sim_main(argv)
            finally:
                sys.stdout = old
        with PcapngWriter(str(path), name="mixed") as w:
            for r in read_capture(str(Path(tmp) / "h0.pcapng")):
                w.write(r.frame, r.timestamp_ns)
            for r in read_capture(load_sample()):
                w.write(r.frame, r.timestamp_ns or 0)
    return w.count


def _cpu(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """CPU seconds (user + system) the command used, its output discarded."""
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(cmd, stdout=null, stderr=subprocess.DEVNULL, env=env)  # noqa: S603 - our own argv
        _pid, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # 1: the sample's malformed frame
        raise UsageError(f"{cmd[0]} failed with exit status {proc.returncode}")
    return ru.ru_utime + ru.ru_stime


def bench_decode(capture: str, frames: int, rounds: int, tshark: str | None, lua: bool) -> dict[str, Any]:
    ours = [sys.executable, "-m", "uet.tools.decode"]
    theirs = [tshark, "-n", "-r", capture] if tshark else None
    if theirs and lua:
        theirs[1:1] = ["-X", f"lua_script:{Path(__file__).resolve().parent.parent / 'interop/wireshark/uet.lua'}"]
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as pyc:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = pyc
        for r in range(-1, rounds):  # round -1: the untimed warm-up
            for mode, (mine, their) in MODES.items():
                runs: list[tuple[str, list[str], dict[str, str] | None]] = [
                    ("uet-decode", [*ours, *mine, capture], env)
                ]
                if theirs:
                    runs.append(("tshark", [*theirs, *their], None))
                if r % 2:
                    runs.reverse()
                for who, cmd, cmd_env in runs:
                    t = _cpu(cmd, cmd_env)
                    key = f"{who}:{mode}"
                    if r >= 0:
                        best[key] = min(best.get(key, t), t)
    out: dict[str, Any] = {"capture": capture, "frames": frames, "rounds": rounds, "tshark_lua": lua, "modes": {}}
    for mode in MODES:
        m: dict[str, Any] = {"uet_decode_pps": round(frames / best[f"uet-decode:{mode}"])}
        if theirs:
            m["tshark_pps"] = round(frames / best[f"tshark:{mode}"])
            m["ratio"] = round(best[f"tshark:{mode}"] / best[f"uet-decode:{mode}"], 2)
        out["modes"][mode] = m
    return out


def run(ns: argparse.Namespace) -> int:
    tshark = shutil.which("tshark") if ns.against_tshark else None
    if ns.against_tshark and tshark is None:
        raise UsageError("--against-tshark: tshark is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        capture = ns.capture
        hosts, size = made_capture_size(ns)
        if capture is None:
            capture = str(Path(tmp) / "mixed.pcapng")
            frames = mixed_capture(Path(capture), hosts, size)
        else:
            from uet.pcap import PcapError, read_capture

            try:
                frames = sum(1 for _ in read_capture(capture))
            except PcapError as e:
                raise UsageError(str(e)) from None
        rec = bench_decode(capture, frames, ns.rounds, tshark, ns.lua)
    if ns.json:
        sys.stdout.write(json.dumps(rec) + "\n")
        return 0
    print(f"uet-bench decode: {rec['frames']} frames, best of {rec['rounds']} alternating rounds, CPU time")
    for mode, m in rec["modes"].items():
        line = f"  {mode:<8} uet-decode {m['uet_decode_pps']:>9,} packets/s"
        if "tshark_pps" in m:
            line += f"   tshark {m['tshark_pps']:>9,} packets/s   ratio {m['ratio']:.2f}"
        print(line)
    return 0
