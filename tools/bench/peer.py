"""``uet-bench pair|rtt --peer ADDR``: the client side of a benchmark against a running ``uet-peer``.

Like ``iperf3 -c`` against ``iperf3 -s``: this process opens one FEP (the first of
``--addresses``, or the loopback address next to the peer's) on ``--port`` and measures, against
the peer at ``ADDR`` (same port):

* ``pair``: goodput of ``--size`` bytes sent as messages of ``--message-size`` (default 1 MiB) to
  a peer in either mode (``uet-peer`` sinks or echoes them; echoes are not waited for): bytes /
  time from the first send to the completion of the last one;
* ``rtt``: round trips of ``--count`` messages of ``--size`` bytes to a peer started with
  ``--mode echo``: p50 / p99 of send + echo.

The peer's JobID / PIDonFEP / resource index are ``uet-peer``'s defaults (1, 0, 0); this FEP uses
the same (the SPMD convention of :class:`uet.endpoint.Peer`). The raw-UDP reference of the two-
process benchmarks needs a raw UDP sink on the other side, which a remote peer does not run, so
these records carry absolute figures only (``raw_udp_gbps`` is null).

``--link ip`` / ``--data-protect crc`` (:mod:`uet.tools.link_options`) must match the peer's.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import statistics
import sys
import time
from typing import Any

from uet.tools.bench.procs import gather_within
from uet.tools.link_options import check_link_options, link_config

from uet.endpoint import Endpoint, EndpointConfig, Mode
from uet.errors import UetError
from uet.link.select import open_link
from uet.wire.net import UET_UDP_PORT

__all__ = ["pair_peer", "rtt_peer"]

PEER_JOB, PEER_PID = 1, 0


def _local(ns: argparse.Namespace) -> str:
    first: str = ns.addresses.split(",")[0].strip()
    if ns.addresses != "127.0.0.2,127.0.0.3" or not ipaddress.ip_address(ns.peer).is_loopback:
        return first
    n = int(ipaddress.ip_address(ns.peer))
    return str(ipaddress.ip_address(n + 1 if n & 0xFF < 250 else n - 1))


async def _open(ns: argparse.Namespace) -> Endpoint:
    # not seeded: a seeded client restarts its message ids, and a peer that remembers completed ids
    # would take the new messages for duplicates of the last run's (see tests/test_conformance.py)
    cfg = link_config(ns, EndpointConfig(payload_size=ns.payload))
    port = UET_UDP_PORT if ns.port is None else ns.port  # the peer's own default
    link = open_link(ns.link, _local(ns), config=cfg, port=port, proto=ns.ip_proto)
    return await Endpoint.open(link.address, PEER_JOB, PEER_PID, config=cfg, link=link)


async def _pair(ns: argparse.Namespace) -> dict[str, Any]:
    ep = await _open(ns)
    try:
        msg = ns.message_size or (1 << 20)
        data = memoryview(bytes(min(msg, ns.size)))
        n = max(1, ns.size // len(data))
        mode = Mode[ns.mode.upper()]
        t0 = time.perf_counter()
        for r in await gather_within([ep.send(ns.peer, data, mode=mode) for _ in range(n)], ns.timeout):
            if isinstance(r, BaseException):
                raise r
        dt = time.perf_counter() - t0
        c = ep.counters
        return {
            "bench": "pair", "peer": ns.peer, "link": ns.link, "mode": ns.mode, "bytes": n * len(data), "messages": n,
            "seconds": round(dt, 4), "goodput_gbps": round(n * len(data) * 8 / dt / 1e9, 3), "raw_udp_gbps": None,
            "retransmits": c.get("retransmits", 0),
        }  # fmt: skip
    finally:
        await ep.close()


async def _rtt(ns: argparse.Namespace) -> dict[str, Any]:
    ep = await _open(ns)
    try:
        data = bytes(ns.size)
        samples: list[float] = []
        for _ in range(ns.count):
            t0 = time.perf_counter()
            await ep.send(ns.peer, data)
            try:
                await asyncio.wait_for(ep.recv(source=ns.peer), 2.0)
            except TimeoutError:
                raise UetError(f"no echo from {ns.peer} within 2 s: start it with `uet-peer --mode echo`") from None
            samples.append((time.perf_counter() - t0) * 1e6)
        samples.sort()
        return {
            "bench": "rtt", "peer": ns.peer, "link": ns.link, "size": ns.size, "count": ns.count,
            "uet_p50_us": round(statistics.median(samples), 1),
            "uet_p99_us": round(samples[min(len(samples) - 1, int(len(samples) * 0.99))], 1), "raw_p50_us": None,
        }  # fmt: skip
    finally:
        await ep.close()


def _report(rec: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(rec) + "\n")
    else:
        for k, v in rec.items():
            sys.stdout.write(f"{k:>14}  {v}\n")


def pair_peer(ns: argparse.Namespace) -> int:
    """``uet-bench pair --peer ADDR``."""
    check_link_options(ns)
    try:
        _report(asyncio.run(_pair(ns)), ns.json)
    except (UetError, OSError, TimeoutError) as e:
        sys.stderr.write(f"uet-bench: {e}\n")
        return 1
    return 0


def rtt_peer(ns: argparse.Namespace) -> int:
    """``uet-bench rtt --peer ADDR``."""
    check_link_options(ns)
    try:
        _report(asyncio.run(_rtt(ns)), ns.json)
    except (UetError, OSError) as e:
        sys.stderr.write(f"uet-bench: {e}\n")
        return 1
    return 0
