"""``uet-run --hosts A0,A1,...``: a scenario's endpoints on given addresses, no software switch.

The fabric engine (:mod:`uet.live.launcher`) puts every endpoint behind the ``uet-fabric`` switch
process on this machine. With ``--hosts`` the endpoints use real addresses instead — the hosts'
own, or network namespaces' — and reach each other through the real network on the link chosen
with ``--link`` (``direct``: UDP 4793; ``ip``: IP protocol 253, :mod:`uet.link.select`);
``--data-protect tss --keys FILE`` runs every rank in the one secure domain of the key file
(:func:`host_security`; each rank reads the file itself). Nothing assumes one machine:

* ``--rank R`` runs rank ``R`` of the scenario in this process, on address ``A_R``: on several
  hosts, each runs the same command with its own ``--rank``;
* without ``--rank`` the launcher starts every rank here as a child ``uet-run ... --rank R``
  (all the addresses must then be this machine's, e.g. 127.0.0.0/8) and prints rank 0's result.

The ranks coordinate over UET itself, with tagged messages on tags no workload uses
(:data:`TAG_HELLO` …): every rank says hello to rank 0 until it gets through (ranks may start in
any order, within ``--timeout``); rank 0 answers ``go`` when all are there; each rank runs its part
of the workload (:mod:`uet.workloads`, the objects the fabric engine and ``uet-sim`` run), sends
its report (flows sent with the digest of each message, messages received) to rank 0, and waits for
rank 0's ``bye`` before it closes. Rank 0 checks every message arrived intact
(:func:`uet.workloads.report.summarize`) and prints the result in the fabric engine's shape
(``--json``: one object; ``"engine": "hosts"``, no fabric counters); the other ranks print their
own report. Exit status 0 when every message arrived intact, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import time
from typing import Any

from uet.endpoint import DeliveryError, Endpoint, EndpointConfig
from uet.link.select import open_link
from uet.live.launcher import build_workload
from uet.live.process import RunError
from uet.wire.net import UET_IP_PROTO
from uet.workloads.report import summarize

__all__ = ["TAG_BYE", "TAG_GO", "TAG_HELLO", "TAG_REPORT", "host_security", "launch_local", "run_rank"]

#: tags of the coordination messages (top of the 64-bit tag space; workloads use small tags)
TAG_HELLO = 0xFFFF_FFFF_FFFF_FF01
TAG_GO = 0xFFFF_FFFF_FFFF_FF02
TAG_REPORT = 0xFFFF_FFFF_FFFF_FF03
TAG_BYE = 0xFFFF_FFFF_FFFF_FF04


async def _send_until(ep: Endpoint, dst: str, data: bytes, tag: int, deadline: float) -> None:
    """Send until it gets through (the peer may not have started yet) or ``deadline`` passes."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            await asyncio.wait_for(ep.send(dst, data, tag=tag), max(0.1, deadline - loop.time()))
            return
        except (DeliveryError, TimeoutError) as e:
            if loop.time() >= deadline:
                raise RunError(f"rank at {dst} did not answer before the timeout ({e or 'timeout'})") from None
            await asyncio.sleep(0.2)


async def run_rank(
    rank: int,
    hosts: list[str],
    settings: dict[str, Any],
    cfg: EndpointConfig,
    *,
    link_mode: str,
    ip_proto: int = UET_IP_PROTO,
    keys: str | None = None,
) -> dict[str, Any]:
    """Run rank ``rank`` (module docstring) with endpoint configuration ``cfg`` on a link of
    ``link_mode`` (:func:`uet.link.select.open_link`), in the secure domain of the key file
    ``keys`` if one is given; rank 0 returns the whole result, others their report."""
    wl = build_workload(settings)
    timeout = float(settings["timeout_s"])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    # seeded from the clock: a rank run again must not repeat the IVs of its last run (§5.6)
    security = host_security(keys, wall_ns=time.time_ns()) if keys else None
    link = open_link(link_mode, hosts[rank], config=cfg, proto=ip_proto)
    ep = Endpoint(link, job=int(settings.get("job", 0)), config=cfg, security=security)
    try:
        n = len(hosts)
        if rank == 0:
            for _ in range(n - 1):
                await asyncio.wait_for(ep.recv(tag=TAG_HELLO), max(0.1, deadline - loop.time()))
            t_go = time.monotonic()
            await asyncio.gather(*(_send_until(ep, h, b"go", TAG_GO, deadline) for h in hosts[1:]))
        else:
            await _send_until(ep, hosts[0], str(rank).encode(), TAG_HELLO, deadline)
            await asyncio.wait_for(ep.recv(tag=TAG_GO), max(0.1, deadline - loop.time()))
            t_go = time.monotonic()
        try:
            rep = (await asyncio.wait_for(wl.run(rank, ep, hosts), max(0.1, deadline - loop.time()))).as_dict()
        except TimeoutError:
            rep = {"flows": [], "rx": [], "check": None, "error": "timeout"}
        rep["counters"] = ep.counters
        if rank != 0:
            await _send_until(ep, hosts[0], json.dumps(rep).encode(), TAG_REPORT, deadline + 30)
            await asyncio.wait_for(ep.recv(tag=TAG_BYE), timeout + 30)
            return {"rank": rank, "address": hosts[rank], **rep}
        reports: list[dict[str, Any]] = [rep] + [{}] * (n - 1)
        for _ in range(n - 1):
            m = await asyncio.wait_for(ep.recv(tag=TAG_REPORT), timeout + 30)
            reports[hosts.index(m.source)] = json.loads(bytes(m.data))
        elapsed = time.monotonic() - t_go
        await asyncio.gather(*(_send_until(ep, h, b"bye", TAG_BYE, loop.time() + 30) for h in hosts[1:]))
        res = summarize(wl, hosts, reports)
        return {
            "ok": res["ok"], "engine": "hosts", "link": link_mode, "workload": settings["workload"],
            "data_protect": "tss" if security else cfg.data_protect,
            "endpoints": n, "elapsed_s": round(elapsed, 3), "flows": res["flows"], "fct": res["fct"], "fabric": {},
            "endpoint_errors": res["errors"],
            "endpoint_counters": [{k: r.get("counters", {}).get(k, 0) for k in ("retransmits", "messages_sent",
                                  "messages_received")} for r in reports],
        }  # fmt: skip
    finally:
        await ep.close()


def host_security(path: str, *, wall_ns: int) -> Any:
    """``--keys FILE``: the :class:`uet.tss.stage.SecurityConfig` every rank's endpoint runs TSS
    with (the key file must hold exactly one secure domain: all ranks are in it). A file that
    cannot be read or used raises :class:`~uet.tss.errors.KeyFileError` or
    :class:`~uet.tss.errors.TssError`."""
    from uet.keyfile import load_key_file
    from uet.tss.stage import SecurityConfig

    security = SecurityConfig(load_key_file(path, wall_ns=wall_ns))
    security.domain()
    return security


def launch_local(command: list[str], hosts: list[str], timeout: float) -> int:
    """Without ``--rank``: every rank as a child ``COMMAND --rank R`` on this machine (``uet-run``
    hands its own command line; every address must be one of this machine's); rank 0's output is
    ours. The ranks run in sessions of their own, so a Ctrl-C in the terminal
    reaches this launcher alone, which stops them (one ``interrupted`` line; each rank used to
    print its own). While they are being started a Ctrl-C is only noted, then raised once every
    started rank is known: one interrupted inside ``Popen`` would be left running."""
    children: list[subprocess.Popen[bytes]] = []
    noted: list[int] = []
    main_thread = threading.current_thread() is threading.main_thread()
    prev = signal.signal(signal.SIGINT, lambda *_: noted.append(1)) if main_thread else None
    try:
        try:
            for r in range(1, len(hosts)):
                rank = [*command, "--rank", str(r), "--json"]
                children.append(subprocess.Popen(rank, stdout=subprocess.DEVNULL, start_new_session=True))  # noqa: S603
            zero = subprocess.Popen([*command, "--rank", "0"], start_new_session=True)  # noqa: S603 - our own argv
            children.append(zero)
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, prev)
        if noted:
            raise KeyboardInterrupt
        failed = _wait_ranks(zero, children[:-1], timeout + 120)
        if failed is not None:
            r, code = failed
            raise RunError(f"rank {r} ({hosts[r]}) failed (exit status {code}); every rank stopped")
        try:
            codes = [c.wait(timeout=60) for c in children]
        except subprocess.TimeoutExpired as e:
            raise RunError(f"a rank did not finish within {e.timeout:g} s") from None
    finally:
        live = [c for c in children if c.poll() is None]
        for c in live:
            c.terminate()
        for c in live:
            c.wait(10)
    return zero.returncode or next((c for c in codes if c), 0)


def _wait_ranks(
    zero: subprocess.Popen[bytes], others: list[subprocess.Popen[bytes]], timeout: float
) -> tuple[int, int] | None:
    """Wait for rank 0; ``(rank, exit status)`` of the first other rank that fails before it does
    (rank 0 would otherwise wait for its hello until the timeout). Polls the children (every
    50 ms: they are separate programs, no event to wait on)."""
    deadline = time.monotonic() + timeout
    while zero.poll() is None:
        for r, c in enumerate(others, start=1):
            code = c.poll()
            if code:
                return r, code
        if time.monotonic() > deadline:
            raise RunError(f"rank 0 did not finish within {timeout:g} s")
        time.sleep(0.05)
    return None
