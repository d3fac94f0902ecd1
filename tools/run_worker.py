"""One endpoint process of ``uet-run`` (tools/run.py starts it; not a user command).

The launcher passes a JSON spec as the only argument: the FEP's Fabric Address and the switch
port of its NIC (``uet-fabric``'s UDP socket for this host), the host link rate (for PFC quanta),
the :class:`~uet.endpoint.EndpointConfig` fields, the flows this endpoint sends (destination FA,
message count and size, the seed of their random data) and how many messages it must receive.

Protocol: JSON lines on stdout, commands on stdin.

1. Opens a :class:`~uet.link.fabric.FabricLink` and an :class:`~uet.endpoint.Endpoint`, generates
   its messages' random data and prints ``{"event": "ready"}``.
2. Waits for ``go`` (so every endpoint starts together), then sends every flow's messages (all
   flows at once; one flow's messages in order on its lane) and receives.
3. Per flow sent: ``{"event": "flow", ...}`` with bytes, completion time (from ``go`` to the last
   message's completion), goodput, the retransmissions to its destination, the SHA-256 of every message
   and any error. Per message received: ``{"event": "rx", "flow", "index", "src", "bytes",
   "sha256"}`` (the flow and index travel in the SES header data: ``flow << 32 | index``).
4. ``{"event": "done"}`` when everything was sent and received; then waits for ``stop`` (or end of
   input), closes the endpoint and prints ``{"event": "closed", "counters": {...}}``.

Exit status 0; 1 when a send failed or the timeout expired. With ``UET_RUN_PARENT`` set, the
process asks the kernel to SIGTERM it when the launcher dies (``PR_SET_PDEATHSIG``), so a killed
launcher leaves no orphans.
"""

from __future__ import annotations

import asyncio
import ctypes
import hashlib
import json
import os
import random
import signal
import sys
import time
from typing import Any

from uet.fabric.profiles import merge

from uet.endpoint import Endpoint, EndpointConfig, run
from uet.link.fabric import FabricLink

__all__ = ["main", "die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """If ``UET_RUN_PARENT`` names our parent, get SIGTERM when it exits (Linux ``prctl``); exit at
    once if it is already gone."""
    parent = os.environ.get("UET_RUN_PARENT")
    if not parent or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover
        return
    if os.getppid() != int(parent):
        os._exit(1)


def message_data(seed: int, flow: int, index: int, nbytes: int) -> bytes:
    """The random payload of message ``index`` of ``flow`` (reproducible from the run seed)."""
    return random.Random(f"{seed}/{flow}/{index}").randbytes(nbytes)


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def _lines(loop: asyncio.AbstractEventLoop) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def worker(spec: dict[str, Any]) -> int:
    loop = asyncio.get_running_loop()
    cfg = merge(EndpointConfig(), spec.get("endpoint", {}))
    link = FabricLink(
        spec["fa"], (spec["switch"][0], int(spec["switch"][1])), rate_bps=int(spec["rate_bps"]), deliver_trimmed=True
    )
    ep = Endpoint(link, job=int(spec.get("job", 0)), config=cfg)
    seed = int(spec.get("seed", 0))
    flows = spec.get("flows", [])
    data = {(f["flow"], i): message_data(seed, f["flow"], i, f["bytes"]) for f in flows for i in range(f["messages"])}
    expect = int(spec.get("expect", 0))
    stdin = await _lines(loop)
    _emit({"event": "ready", "fa": spec["fa"], "nic_port": link.port})
    line = await stdin.readline()
    if line.strip() != b"go":
        await ep.close()
        return 1
    t0 = time.monotonic()
    failed = False

    async def send_flow(f: dict[str, Any]) -> None:
        nonlocal failed
        futs = []
        err = None
        for i in range(f["messages"]):
            futs.append(ep.send_nowait(f["dst"], data[(f["flow"], i)], header_data=(f["flow"] << 32) | i))
        for r in await asyncio.gather(*futs, return_exceptions=True):
            if isinstance(r, BaseException):
                err = err or f"{type(r).__name__}: {r}"
        dt = time.monotonic() - t0
        nbytes = f["messages"] * f["bytes"]
        failed = failed or err is not None
        c = ep.counters
        _emit(
            {
                "event": "flow",
                "flow": f["flow"],
                "src": spec["fa"],
                "dst": f["dst"],
                "bytes": nbytes,
                "messages": f["messages"],
                "completion_s": round(dt, 6),
                "goodput_mbps": round(nbytes * 8 / dt / 1e6, 3) if dt > 0 else 0.0,
                # this flow's own: the retransmissions to its destination (one flow per destination)
                "retransmits": c.get("retransmits_to:" + f["dst"], 0),
                "sha256": [hashlib.sha256(data[(f["flow"], i)]).hexdigest() for i in range(f["messages"])],
                "error": err,
            }
        )

    async def receive() -> None:
        for _ in range(expect):
            m = await ep.recv()
            hd = m.header_data if m.header_data is not None else -1
            _emit(
                {
                    "event": "rx",
                    "flow": hd >> 32 if hd >= 0 else None,
                    "index": hd & 0xFFFFFFFF if hd >= 0 else None,
                    "src": m.source,
                    "bytes": m.nbytes,
                    "sha256": hashlib.sha256(m.data).hexdigest(),
                    "t": round(time.monotonic() - t0, 6),
                }
            )

    try:
        await asyncio.wait_for(
            asyncio.gather(receive(), *(send_flow(f) for f in flows)), float(spec.get("timeout_s", 120))
        )
    except TimeoutError:
        _emit({"event": "error", "error": "timeout", "counters": ep.counters})
        failed = True
    else:
        _emit({"event": "done"})
        await stdin.readline()  # "stop" or end of input
    counters = ep.counters
    await ep.close()
    _emit({"event": "closed", "counters": counters})
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    return run(worker(spec), use_uvloop=bool(spec.get("uvloop", True)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
