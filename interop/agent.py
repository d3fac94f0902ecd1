"""The reference agent of ``uet-conformance``'s driver interface, on the public :class:`uet.Endpoint` API.

A vendor who wants the initiator-side cases run against their stack writes the same thing on top
of their own API: listen on the control channel, turn each JSON command into an operation, answer
each with its outcome when it completes. The protocol is :mod:`uet.conformance.driver`'s
docstring; this file is all there is to it::

    python -m uet.interop.agent 127.0.0.5 --control 127.0.0.1:7000
    uet-conformance --target 127.0.0.5 --agent 127.0.0.1:7000 -k ini

The endpoint also serves the target-side cases: it registers a peer profile's regions (``--config
FILE``, else ``uet-peer``'s, :mod:`uet.conformance.profile`) and keeps its receives posted.
``--link ip`` runs it over IP protocol 253 (root), ``--data-protect crc`` adds the CRC-32C
trailer, ``--keys FILE`` runs TSS. It prints ``uet-peer``'s identity line (``agent``: the control
address) once it serves, until SIGINT/SIGTERM; ``uet-peer --agent ADDR`` uses :class:`Agent` too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

from uet.tools.cli import ArgumentParser, RunFailed, UsageError, run_main
from uet.tools.link_options import add_link_options, check_link_options, link_config

from uet import AmoOp, AmoType, Endpoint, EndpointClosed, EndpointConfig, Mode, Peer, SesError, UetError
from uet.conformance.profile import Profile, ProfileError, default_profile, load_profile, register_regions
from uet.conformance.session import Receive
from uet.keyfile import load_key_file
from uet.link.select import open_link
from uet.tss.errors import KeyFileError

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


async def keep_posted(ep: Endpoint, r: Receive | None) -> None:
    """Keep receive ``r`` posted (None: take untagged messages): once it completes, or fails (the
    initiator was told: TOO_LONG...), post it again, until the endpoint closes."""
    while True:
        try:
            await (ep.recv() if r is None else ep.post_recv(bytearray(r.size), tag=r.tag, truncate=r.truncate))
        except EndpointClosed:
            return
        except UetError:
            pass


def serve_profile(ep: Endpoint, profile: Profile) -> list[asyncio.Task[None]]:
    """What the target-side cases need: the profile's regions registered, its receives posted, and
    untagged receives waiting (several: a deferred send whose initiator never restarts holds one)."""
    register_regions(ep, profile)
    return [asyncio.ensure_future(keep_posted(ep, r)) for r in [*profile.receives, None, None, None, None]]


async def _main(a: argparse.Namespace, profile: Profile, keys: Any) -> int:
    cfg = link_config(a, EndpointConfig(ecn_feedback=True))
    try:
        link = open_link(a.link, a.address, config=cfg, port=a.port, proto=a.ip_proto)
        ep = await Endpoint.open(a.address, a.job, a.pid, resource_index=a.ri, config=cfg, link=link, security=keys)
    except (OSError, ValueError, UetError) as e:
        raise RunFailed(f"cannot open an endpoint on {a.address} port {a.port}: {e}") from None
    receives = serve_profile(ep, profile)
    agent = Agent(ep)
    try:
        server, where = await serve_control(agent, a.control)
    except (OSError, ValueError) as e:
        await ep.close()
        raise RunFailed(f"cannot listen on --control {a.control}: {e}") from None
    # the keys of uet-peer's identity line, so that uet-conformance --identity reads either
    ident = {"address": ep.address, "port": a.port, "job": a.job, "pid": a.pid, "ri": a.ri, "agent": where,
             "link": a.link, "data_protect": "tss" if keys else cfg.data_protect, **profile.as_json()}  # fmt: skip
    print(json.dumps(ident), flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    for t in receives:
        t.cancel()
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
        p.add_argument("--config", metavar="FILE", help="peer profile (regions, receives); default uet-peer's")
        p.add_argument("--keys", metavar="FILE", help="TSS key file (the secure domain's keys)")
        add_link_options(p)
        a = p.parse_args(args)
        check_link_options(a, keys=a.keys)
        try:
            profile = load_profile(a.config, a.job) if a.config else default_profile(a.job)
            keys = load_key_file(a.keys, wall_ns=time.time_ns()) if a.keys else None  # TSC from the clock (§5.6)
        except (ProfileError, KeyFileError) as e:
            raise UsageError(str(e)) from None
        return asyncio.run(_main(a, profile, keys))

    return run_main("uet-agent", run, argv)


if __name__ == "__main__":
    sys.exit(main())
