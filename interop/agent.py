"""The reference agent of ``uet-conformance``'s driver interface, on the public :class:`uet.Endpoint` API.

A vendor who wants the initiator-side cases run against their stack writes the same thing on top
of their own API: listen on the control channel, turn each JSON command into an operation, answer
each with its outcome when it completes. The protocol is :mod:`uet.conformance.driver`'s
docstring; this file is all there is to it::

    python -m uet.interop.agent 127.0.0.5 --control 127.0.0.1:7000
    uet-conformance --target 127.0.0.5 --agent 127.0.0.1:7000 -k ini

It prints one JSON line (its address, port, job, pid, ri and ``agent``, the control address, as
``uet-peer``'s identity line has them) once it serves, and runs until
SIGINT/SIGTERM. ``uet-peer --agent ADDR`` serves the same channel on its endpoint with this module's
:class:`Agent`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any

from uet.tools.cli import ArgumentParser, RunFailed, run_main

from uet import AmoOp, AmoType, Endpoint, EndpointConfig, Mode, Peer, SesError

__all__ = ["Agent", "serve_control"]

#: the longest command line taken (a WRITE of 4 MiB in hex)
LINE_LIMIT = 8 << 20


class Agent:
    """Runs driver commands on one endpoint (module docstring); one instance per endpoint."""

    def __init__(self, ep: Endpoint) -> None:
        self.ep = ep
        self.handles: dict[int, tuple[Peer, Mode]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One control connection: every line a command, every answer a line (in completion order)."""
        try:
            while line := await reader.readline():
                task = asyncio.ensure_future(self._answer(line, writer))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # the tester went away (or sent a line longer than the stream limit)
        finally:
            writer.close()

    async def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> None:
        cid: Any = None
        try:
            msg = json.loads(line)
            cid = msg.get("id")
            out = await self.run(msg)
            out = {"id": cid, "rc": "OK", **out}
        except SesError as e:  # the operation failed: its return code (DeliveryError: UNDELIVERABLE)
            out = {"id": cid, "rc": e.return_code.name, "error": str(e)}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            out = {"id": cid, "rc": "BAD_COMMAND", "error": f"{type(e).__name__}: {e}"}
        if not writer.is_closing():
            writer.write(json.dumps(out).encode() + b"\n")

    async def run(self, m: dict[str, Any]) -> dict[str, Any]:
        """Perform one command; returns the answer's fields besides ``id`` and ``rc``."""
        op = m["op"]
        if op == "open":
            peer = Peer(str(m["address"]), pid=int(m["pid"]), ri=int(m["ri"]), job=int(m["job"]))
            mode = {"rud": Mode.RUD, "rod": Mode.ROD, "rudi": Mode.RUDI, "uud": Mode.UUD}[m.get("mode", "rud")]
            h = len(self.handles) + 1
            self.handles[h] = (peer, mode)
            return {"handle": h, "address": self.ep.address}
        peer, mode = self.handles[int(m["handle"])]
        ep = self.ep
        if op == "send":
            tag = m.get("tag")
            await ep.send(peer, bytes.fromhex(m["data"]), tag=None if tag is None else int(tag), mode=mode)
            return {}
        if op == "write":
            await ep.write(peer, int(m["key"]), int(m["offset"]), bytes.fromhex(m["data"]), mode=mode)
            return {}
        if op == "read":
            data = await ep.read(peer, int(m["key"]), int(m["offset"]), int(m["length"]), mode=mode)
            return {"data": bytes(data).hex()}
        if op == "atomic":
            fetch = bool(m.get("fetch", False))
            v = await ep.atomic(peer, int(m["key"]), int(m["offset"]), AmoOp[m["amo"]], AmoType[m["type"]],
                                int(m["operand"]), fetch=fetch, mode=mode)  # fmt: skip
            return {"value": v if fetch else None}
        if op == "close":
            return {"pdcs": await ep.close_pdcs(peer.address)}
        raise ValueError(f"unknown op {op!r}")

    async def aclose(self) -> None:
        for t in list(self.tasks):
            t.cancel()


async def serve_control(agent: Agent, where: str) -> tuple[asyncio.AbstractServer, str]:
    """Listen on ``where`` (``HOST:PORT``, port 0 picks one, or ``unix:PATH``); returns the
    server and the address it listens on."""
    if where.startswith("unix:"):
        server = await asyncio.start_unix_server(agent.serve, where[5:], limit=LINE_LIMIT)
        return server, where
    host, _, port = where.rpartition(":")
    server = await asyncio.start_server(agent.serve, host.strip("[]"), int(port), limit=LINE_LIMIT)
    bound = server.sockets[0].getsockname()
    return server, f"{host}:{bound[1]}"


async def _main(a: argparse.Namespace) -> int:
    cfg = EndpointConfig(data_protect=a.data_protect)
    try:
        ep = await Endpoint.open(a.address, a.job, a.pid, port=a.port, resource_index=a.ri, config=cfg)
    except (OSError, ValueError) as e:
        raise RunFailed(f"cannot open an endpoint on {a.address} port {a.port}: {e}") from None
    agent = Agent(ep)
    try:
        server, where = await serve_control(agent, a.control)
    except (OSError, ValueError) as e:
        await ep.close()
        raise RunFailed(f"cannot listen on --control {a.control}: {e}") from None
    # the same keys as uet-peer's identity line, so that uet-conformance --identity reads either
    print(json.dumps({"address": ep.address, "port": a.port, "job": a.job, "pid": a.pid, "ri": a.ri, "agent": where}),
          flush=True)  # fmt: skip
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    await agent.aclose()
    await ep.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    def run(args: Any) -> int:
        p = ArgumentParser(prog="uet-agent", description="Reference agent of the uet-conformance driver interface.")
        p.add_argument("address", help="Fabric Address of the endpoint")
        p.add_argument("--port", type=int, default=4793, help="UET UDP port (default 4793)")
        p.add_argument("--job", type=int, default=1, help="JobID (default 1, as uet-peer)")
        p.add_argument("--pid", type=int, default=0, help="PIDonFEP (default 0)")
        p.add_argument("--ri", type=int, default=0, help="resource index (default 0)")
        p.add_argument("--control", default="127.0.0.1:0", help="HOST:PORT or unix:PATH (default 127.0.0.1:0)")
        p.add_argument("--data-protect", choices=("none", "crc"), default="none", help="CRC-32C trailer or none")
        return asyncio.run(_main(p.parse_args(args)))

    return run_main("uet-agent", run, argv)


if __name__ == "__main__":
    sys.exit(main())
