"""One endpoint process of the live engine (:class:`uet.live.launcher.Launcher` starts it; not a user command).

The launcher passes a JSON spec as the only argument: the FEP's Fabric Address and the switch
port of its NIC (``uet-fabric``'s UDP socket for this host), the host link rate (for PFC quanta),
the :class:`~uet.endpoint.EndpointConfig` fields, the workload (name, endpoints, message size and
count, seed: :func:`uet.workloads.make`), this endpoint's rank and every rank's Fabric Address,
and the run's clock (``clock``: the shared start instant and time-dilation factor,
:class:`uet.clock.DilatedClock`): the link, the endpoint and the workload's completion times all
run on it, so they are virtual times. ``paths`` (when the servers have a scale-up domain): the
settings of this endpoint's path towards the GPUs of its own server, as the scenario model derives
them for the simulator's endpoints too (:func:`uet.scenario.derive.scale_up_paths`): the UET
PDCs' window and CC parameters, or the RoCEv2 queue pairs' configuration, towards those peers.

Protocol: JSON lines on stdout, commands on stdin.

1. Opens a :class:`~uet.link.fabric.FabricLink` and an :class:`~uet.endpoint.Endpoint` and prints
   ``{"event": "ready"}``.
2. Waits for ``go`` (so every endpoint starts together), then runs its rank of the workload
   object (:meth:`uet.workloads.Workload.run`, the same object ``uet-sim`` runs in virtual time).
3. Reports what the rank measured: per flow sent ``{"event": "flow", ...}`` (bytes, completion
   time, retransmits, ``crc32``: the digest of every message (:func:`uet.ses.sink.digest`), error),
   per message received ``{"event": "rx", "flow", "index", "src", "bytes", "crc32", "t"}``, then
   ``{"event": "done", "check"}``.
   When the timeout (real seconds) expires first: the flows finished, every unfinished flow with error
   ``timeout`` and its retransmissions so far (:meth:`uet.workloads.Workload.unfinished`), the
   messages received, then ``{"event": "error", "error": "timeout", "counters"}``.
4. Then waits for ``stop`` (or end of input), closes the endpoint (for at most
   :data:`CLOSE_WAIT_S` real seconds) and prints ``{"event": "closed", "counters": {...}}``.

Exit status 0; 1 when a send failed or the timeout expired. With ``UET_RUN_PARENT`` set, the
process asks the kernel to SIGTERM it when the launcher dies (``PR_SET_PDEATHSIG``), so a killed
launcher leaves no orphans.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import sys
import time
from dataclasses import replace
from typing import Any

from uet.clock import DilatedClock
from uet.endpoint import Endpoint, EndpointConfig, run
from uet.fabric.profiles import merge
from uet.link.fabric import FabricLink
from uet.scenario.derive import path_window_of, peer_config_of
from uet.workloads import RankReport, from_spec
from uet.workloads.base import FlowReport
from uet.workloads.report import payload_received

__all__ = ["main", "die_with_parent"]

_PR_SET_PDEATHSIG = 1
#: how often (real seconds) a rank measures its event loop's wake-up lateness (:func:`_loop_lag`),
#: and at most how many samples it keeps
LAG_PERIOD_S = 0.005
LAG_SAMPLES = 100_000
#: real seconds a rank waits for its endpoint's graceful close (the FEP's default close timeout):
#: the close sequence runs in the run's (dilated) virtual time, so its ``close_timeout_s`` would last
#: TDF times longer in real time — the workload is over, only the PDCs' goodbyes are left
CLOSE_WAIT_S = 2.0


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


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def _lines(loop: asyncio.AbstractEventLoop) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def worker(spec: dict[str, Any]) -> int:
    loop = asyncio.get_running_loop()
    switch = (spec["switch"][0], int(spec["switch"][1]))
    clock = DilatedClock.from_spec(spec.get("clock"))
    ep: Any
    log = _event_log(spec)
    if spec.get("transport", "uet") == "roce":
        ep = await _roce_endpoint(spec, switch, clock, log)
        link = ep.link
    else:
        ep = _uet_endpoint(spec, switch, clock, log)
        link = ep.link
    wl = from_spec(spec["workload"])
    stdin = await _lines(loop)
    _emit({"event": "ready", "fa": spec["fa"], "nic_port": link.port})
    line = await stdin.readline()
    if line.strip() != b"go":
        await ep.close()
        return 1
    failed = False
    rank = int(spec["rank"])
    report = RankReport(listener=lambda r: _emit({"event": "flow" if isinstance(r, FlowReport) else "rx", **vars(r)}))
    t0 = clock.seconds()
    run = asyncio.ensure_future(
        asyncio.wait_for(
            # the run's timeout is virtual time, as in the simulator: TDF times longer in real time
            wl.run(rank, ep, spec["addresses"], report, now=clock.seconds),
            clock.real_delay(float(spec.get("timeout_s", 120)) * 1e9),
        )
    )
    aborted = asyncio.ensure_future(_until_abort(stdin))
    ticker = asyncio.ensure_future(_progress(ep, float(spec["progress_s"]))) if spec.get("progress_s") else None
    lags: list[int] = []
    lag = asyncio.ensure_future(_loop_lag(lags))
    try:
        await asyncio.wait({run, aborted}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if ticker is not None:
            ticker.cancel()
        lag.cancel()
    _emit({"event": "lag", **lag_summary(lags)})
    why = None
    if not run.done():  # the launcher gave up on this rank: every flow towards it failed
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        why = "aborted"
    elif isinstance(run.exception(), TimeoutError):
        why = "timeout"
    elif run.exception() is not None:
        raise run.exception()  # type: ignore[misc]
    _emit({"event": "bytes", "rx": _payload_bytes(ep)})
    if why is not None:
        # what the rank achieved went out as it happened; now its unfinished flows with their
        # retransmissions so far
        for f in wl.unfinished(rank, ep, spec["addresses"], report, clock.seconds() - t0, why):
            _emit({"event": "flow", **vars(f)})
        _emit({"event": "error", "error": why, "counters": ep.counters})
        failed = True
    else:
        failed = any(f.error is not None for f in report.flows)
        _emit({"event": "done", "check": report.check})
        if not aborted.done():
            await aborted  # "stop" or end of input
    aborted.cancel()
    counters = ep.counters
    # the close sequence runs in the run's dilated time: its timeout (close_timeout_s, for peers that
    # closed first or never answer) would last TDF times longer in real time; bound it in real time
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ep.close(), CLOSE_WAIT_S)
    if log is not None:
        log.close()
    _emit({"event": "closed", "counters": counters})
    return 1 if failed else 0


async def _until_abort(stdin: asyncio.StreamReader) -> None:
    """Return at the launcher's next line (``abort`` during the run, ``stop`` after it) or at the
    end of input."""
    await stdin.readline()


def _payload_bytes(ep: Any) -> int:
    """Payload bytes received so far, counted as packets arrive (SES target or RoCE responder)."""
    return payload_received(ep.counters)


async def _progress(ep: Any, period_s: float) -> None:
    """``{"event": "bytes", "rx"}`` every ``period_s`` while the count moves (``uet-run
    --interval`` and its progress bar)."""
    last = -1
    while True:
        await asyncio.sleep(period_s)
        n = _payload_bytes(ep)
        if n != last:
            _emit({"event": "bytes", "rx": n})
            last = n


async def _loop_lag(out: list[int]) -> None:
    """How late this process's event loop wakes: every :data:`LAG_PERIOD_S` a sleep, and how much
    later than asked it returned (real ns) appended to ``out`` (at most :data:`LAG_SAMPLES`). A
    process short of CPU (waiting in the kernel's run queue) wakes late for its timers and for its
    sockets alike; the launcher's verdict on whether the CPU kept up reads it
    (:func:`uet.live.dilation.verdict`)."""
    period_ns = round(LAG_PERIOD_S * 1e9)
    while len(out) < LAG_SAMPLES:
        t = time.monotonic_ns()
        await asyncio.sleep(LAG_PERIOD_S)
        out.append(max(0, time.monotonic_ns() - t - period_ns))


def lag_summary(lags: list[int]) -> dict[str, Any]:
    """``{"samples", "p50_us", "p99_us", "max_us"}`` of :func:`_loop_lag`'s samples (real µs)."""
    s = sorted(lags)
    if not s:
        return {"samples": 0, "p50_us": 0.0, "p99_us": 0.0, "max_us": 0.0}

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))] / 1e3, 1)

    return {"samples": len(s), "p50_us": at(0.5), "p99_us": at(0.99), "max_us": round(s[-1] / 1e3, 1)}


def _event_log(spec: dict[str, Any]) -> Any:
    """``--eventlog``: this endpoint's JSON-lines log (``spec["eventlog"]``, bounded by
    ``capture_max``, each record tagged with the rank), or None."""
    if not spec.get("eventlog"):
        return None
    from uet.eventlog import EventLog

    return EventLog(spec["eventlog"], max_bytes=spec.get("capture_max"), rank=int(spec["rank"]))


def _uet_endpoint(spec: dict[str, Any], switch: tuple[str, int], clock: DilatedClock, log: Any = None) -> Endpoint:
    """``transport = "uet"``: an :class:`~uet.endpoint.Endpoint` on the fabric link, its
    configuration the launcher's (the scenario model's derivation), its core seeded as the
    simulator seeds this rank's, and towards a GPU of the same server the scale-up path's window
    (``paths``, :func:`uet.scenario.derive.path_window_of`)."""
    cfg = merge(EndpointConfig(), spec.get("endpoint", {}))
    if cfg.seed is None:  # the simulator's seed for this rank's core (uet.sim.scenario)
        cfg = replace(cfg, seed=core_seed(spec))
    link = FabricLink(spec["fa"], switch, rate_bps=int(spec["rate_bps"]), deliver_trimmed=True, clock=clock)
    window = path_window_of(spec.get("paths"))
    return Endpoint(link, job=int(spec.get("job", 0)), config=cfg, event_log=log, clock=clock, path_window=window)


async def _roce_endpoint(spec: dict[str, Any], switch: tuple[str, int], clock: DilatedClock, log: Any = None) -> Any:
    """``transport = "roce"``: a :class:`~uet.roce_endpoint.RoceEndpoint` on the fabric link, its
        cm=StaticCm(str(spec["cm_secret"]).encode()),
        seed=core_seed(spec),
    endpoint of the run agrees on them, :class:`~uet.roce.cm.StaticCm`)."""
    from uet.roce.cm import StaticCm
    from uet.roce.config import QpConfig
    from uet.roce.core import config_for_link, timeout_for_rtt
    from uet.roce_endpoint import RoceEndpoint

    rate = int(spec["rate_bps"])
    if spec.get("qp"):  # the launcher's (uet.scenario.derive, as the simulator's)
        qp = merge(QpConfig(), spec["qp"])
    else:
        qp = config_for_link(rate, int(spec.get("mtu", 1500)))
        qp = replace(qp, timeout=timeout_for_rtt(spec.get("rtt_ns")))
    return await RoceEndpoint.over_fabric(
        spec["fa"],
        switch,
        rate_bps=rate,
        config=qp,
        cm=StaticCm(str(spec["cm_secret"]).encode()),
        seed=core_seed(spec),
        log=log,
        clock=clock,
        peer_config=peer_config_of(spec.get("paths")),  # towards a GPU of the same server: its scale-up path
    )


def core_seed(spec: dict[str, Any]) -> int:
    """The seed of this rank's core: the run seed and the rank, combined as the simulator combines
    them (:func:`uet.sim.scenario.simulate`), so a live rank draws what its simulated twin draws
    (entropies, QP randomness)."""
    return (int(spec.get("seed", 0)) << 20) + int(spec["rank"])


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(143))
    return run(worker(spec), use_uvloop=bool(spec.get("uvloop", True)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
