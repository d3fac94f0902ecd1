"""Time dilation of ``uet-run``'s live engine: the factor a run uses and whether the CPU kept up.

Every process of a live run (the switch process and each endpoint) runs on one
:class:`uet.clock.DilatedClock`: virtual time = start + (real − start) / TDF. Link rates, delays and
protocol timers are virtual, so the processes have to keep up with the scenario's packet rate
divided by TDF, not with the packet rate itself (module docstring of :mod:`uet.clock`).

**The factor** (``--dilation auto``, the default) is chosen before the run from the scenario's
packet rate and the machine's cores, and from how late the event loops wake::

    TDF = max(1, R × C / (cores × U), G / (F × T)),   G = max(timer grain, L / cores × S)

* ``R``: the data packets per virtual second the fabric can deliver: every receiving endpoint's
  host link at its rate, in frames of the run's payload (:func:`packet_rate`);
* ``C``: the CPU seconds the live engine spends per delivered data packet, over every process
  (sender, switch, receiver, the ACK's way back): :data:`LIVE_PER_SIM` × the cost of the same
  packets in the simulator, timed on this machine when the run starts (:func:`calibrate`: a
  small two-endpoint transfer through the fabric model in virtual time, wall clock, so a machine
  busy with other work measures slower and gets a larger factor);
* ``cores``: the CPUs this process may run on (``os.sched_getaffinity``);
* ``U``: the share of them the run may use (:data:`UTILISATION`): bursts (an incast's first
  windows arrive at the switch at the senders' summed rate) and the machine's other work need the
  rest;
* ``G``: how late an endpoint's timer may fire in real time (:data:`TIMER_GRAIN_NS`, 1 ms: asyncio
  hands ``epoll_wait`` a timeout in whole milliseconds, uvloop's clock has millisecond resolution,
  and a busy machine schedules a woken process that late too — endpoint timers on a ``timerfd``, as
  the switch process has, left the spread below unchanged at ×20), which is G / TDF of virtual
  time — or, on a machine busy with other work, longer: a process woken from its sleep waits for
  a CPU behind the others that are runnable, about ``L / cores`` scheduler slices ``S``
  (:data:`SCHED_SLICE_NS`), ``L`` the 1-minute load average when the run starts
  (``os.getloadavg``). Measured on 2 cores at load 14–17 (other work): the endpoints' wake-up
  lateness at p99 was 10.6 ms of real time at ×72.8 and 9.0 ms at ×300 — the machine's, not the
  run's, so the factor that keeps it within :data:`LAG_FRAMES` grows with the load: at ×300 it
  was 0.33 frame times, and the README's first command printed the CPU note at ×72.8, where an
  idle machine needs no more than the grain. ``T`` the frame time at the host link rate and ``F``
  (:data:`GRAIN_FRAMES`) the share of it a timer may be late by: pacing (DCQCN's rate limiter)
  and coalesced-ACK timers fire that late. Measured, a 3:1 incast of one 64 KiB message per flow
  at 100 Mb/s (frame time 92 µs): at ×40 (grain 25 µs, 0.27 frame times) RoCEv2's live FCTs
  spread 16–25 ms against the simulator's 17.1 ms, 4 runs of 4 outside the 10 % bar; at ×100
  (0.11 frame times) 16–18 ms, 3 of 3 within it.

**Kept up?** (:func:`verdict`) The run kept up when, in virtual time, the switch process's timer
fired within :data:`LATE_FRAMES` frame times of its deadlines at p99 (pacing, measured against
the model's own deadlines), the endpoint processes' event loops woke within :data:`LAG_FRAMES`
frame times of when they should at p99 (a process waiting for a CPU in the kernel's run queue is
late for its sockets and timers alike: uet/live/worker.py measures it), and no kernel socket
queue — the switch's host ports or the endpoints' NIC sockets, the buffers outside the model — held
more than :data:`QUEUE_FRAMES` frames or dropped one. Otherwise the figures measure the CPU too:
``uet-run`` says so above its table and marks them, and ``uet-bench differential`` (which needs
figures of the network to judge) runs that transport once more at twice the factor
(:func:`uet.live.live_runs`).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Dilation",
    "LAG_FRAMES",
    "LATE_FRAMES",
    "LIVE_PER_SIM",
    "QUEUE_FRAMES",
    "SCHED_SLICE_NS",
    "UTILISATION",
    "calibrate",
    "choose",
    "load_average",
    "packet_rate",
    "short_of_cpu",
    "verdict",
]

#: CPU per delivered data packet of the live engine ÷ :func:`calibrate`'s per packet, on the same
#: machine. Measured: ``uet-run --dilation 30`` (incast 8:1) with 10 and with 2 messages per flow,
#: every process's CPU (user + sys) — the difference, 4.1 s for 4,096 more data packets, is 1.0 ms
#: per packet; :func:`calibrate` took 0.19 ms of CPU per packet in the same minutes: 5. The live
#: engine adds per packet the system calls of four socket hops (sender → switch → receiver and the
#: ACK back), the frame codec at both ends and the event loops' wake-ups.
LIVE_PER_SIM = 5.0
#: the share of the machine's cores a dilated run plans to use
UTILISATION = 0.5
#: switch timer lateness (p99, virtual) within which the CPU kept up, in frame times at the host
#: link rate
LATE_FRAMES = 10.0
#: endpoint event-loop wake-up lateness (p99, virtual; uet/live/worker.py) within which the CPU
#: kept up, in frame times at the host link rate: twice the timer grain the automatic factor plans
#: for (:data:`GRAIN_FRAMES`). Measured, ring all-reduce 8 over RoCEv2 on a machine at load 10: p99
#: lateness of 0.29 and 0.49 frame times moved FCT p50 by +3.8 % and +5.3 % from the simulator's,
#: every wake-up on the ring's critical path adding its lateness to each step
LAG_FRAMES = 0.3
#: kernel socket queue (largest seen) within which the CPU kept up, in frames of the run
QUEUE_FRAMES = 128
#: how late an endpoint's timer may fire in real time (module docstring, ``G``)
TIMER_GRAIN_NS = 1_000_000
#: the real time a runnable process waits per other runnable process on its core, about (module
#: docstring, ``S``): the measured p99 wake-up lateness ÷ (load ÷ cores), 9.0–10.6 ms ÷ 7.5
SCHED_SLICE_NS = 1_300_000
#: the share of a frame time that grain may amount to in virtual time (module docstring, ``F``)
GRAIN_FRAMES = 0.15
#: wire bytes a data frame adds to its payload (uet.sim.scenario.DATA_OVERHEAD)
_FRAME_OVERHEAD = 122


@dataclass
class Dilation:
    """A run's time-dilation factor: ``factor``, ``how`` it was chosen (``given``: ``--dilation N``;
    ``auto``: :func:`choose`) and the ``basis`` of an automatic choice (the formula's terms)."""

    factor: float
    how: str
    basis: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """The result's ``dilation`` object (its verdict is added after the run)."""
        return {"factor": self.factor, "how": self.how, **({"basis": self.basis} if self.basis else {})}


def packet_rate(receivers: int, rate_bps: int, payload: int) -> float:
    """``R``: data packets per virtual second ``receivers`` host links of ``rate_bps`` deliver in
    frames of ``payload`` bytes."""
    return receivers * rate_bps / ((payload + _FRAME_OVERHEAD) * 8)


def calibrate(packets: int = 256) -> float:
    """Wall-clock seconds per data packet of the simulator on this machine now: one endpoint sends
    ``packets`` 1 KiB packets to another through the fabric model in virtual time (every core,
    the model, the ACKs), timed with :func:`time.perf_counter` (the machine's load counts), less
    the same run with a quarter of the packets (the set-up every run pays once)."""
    from uet.sim.scenario import simulate

    def timed(n: int) -> float:
        settings = {
            "workload": "pairs",
            "endpoints": 2,
            "message_bytes": n * 1024,
            "messages": 1,
            "profile": "realtime",
            "rate_bps": 100_000_000,
            "topology": "default",
        }
        endpoint = {"payload_size": 1024, "max_inflight": 16, "pds": {"max_nack_retx": 1 << 30}}
        t = time.perf_counter()
        simulate(settings, None, endpoint)
        return time.perf_counter() - t

    few = packets // 4
    timed(few)  # imports and first-use costs
    return max(timed(packets) - timed(few), 1e-9) / (packets - few)


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def load_average() -> float:
    """The machine's 1-minute load average (0 where the system does not say)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return 0.0


def choose(
    receivers: int,
    rate_bps: int,
    payload: int,
    *,
    per_packet_s: float | None = None,
    load: float | None = None,
) -> Dilation:
    """The automatic factor (module docstring) for ``receivers`` receiving host links of
    ``rate_bps`` and ``payload``-byte packets; ``per_packet_s`` is :func:`calibrate`'s figure and
    ``load`` the machine's load average (each measured when not given)."""
    r = packet_rate(receivers, rate_bps, payload)
    sim = calibrate() if per_packet_s is None else per_packet_s
    busy = load_average() if load is None else load
    c = LIVE_PER_SIM * sim
    n = cores()
    frame_ns = (payload + _FRAME_OVERHEAD) * 8e9 / rate_bps
    cpu = r * c / (n * UTILISATION)
    late_ns = max(TIMER_GRAIN_NS, busy / n * SCHED_SLICE_NS)
    grain = late_ns / (GRAIN_FRAMES * frame_ns)
    factor = float(math.ceil(max(1.0, cpu, grain) * 10) / 10)
    basis = {
        "packet_rate_pps": round(r),
        "cpu_per_packet_us": round(c * 1e6, 1),
        "cores": n,
        "utilisation": UTILISATION,
        "for_cpu": round(cpu, 1),
        "load": round(busy, 2),
        "timer_late_ms": round(late_ns / 1e6, 2),
        "for_timers": round(grain, 1),
    }
    return Dilation(factor, "auto", basis)


def verdict(result: dict[str, Any], rate_bps: int, payload: int) -> dict[str, Any]:
    """Whether the CPU kept up in a dilated live run (module docstring): ``kept_up`` and, when it
    did not, ``why`` (one phrase per reason); the figures it was judged on beside."""
    frame_ns = (payload + _FRAME_OVERHEAD) * 8e9 / rate_bps
    frame_bytes = payload + _FRAME_OVERHEAD + 300  # a datagram's kernel buffer charge is larger
    pacing = result.get("pacing") or {}
    kq = result.get("switch_kernel") or {}
    late_us = float(pacing.get("p99_us") or 0.0)
    queue = max(int(kq.get("rx_queue_max_bytes", 0) or 0), int(kq.get("nic_rx_queue_max_bytes", 0) or 0))
    drops = int(kq.get("rx_drops", 0) or 0) + int(kq.get("nic_rx_drops", 0) or 0)
    lag_us = float((result.get("endpoint_lag") or {}).get("p99_us") or 0.0)
    why = []
    if lag_us * 1000 > LAG_FRAMES * frame_ns:
        why.append(
            f"endpoint processes woke {lag_us:,.0f} µs late (p99, virtual; more than {LAG_FRAMES:g} frame times)"
        )
    if late_us * 1000 > LATE_FRAMES * frame_ns:
        why.append(f"the switch timer ran {late_us:,.0f} µs late (p99, virtual; more than {LATE_FRAMES:g} frame times)")
    if queue > QUEUE_FRAMES * frame_bytes:
        why.append(f"frames waited up to {queue // 1024:,} KiB deep in kernel socket queues")
    if drops:
        why.append(f"{drops:,} frames were dropped from kernel socket queues")
    return {
        "kept_up": not why,
        "why": why,
        "timer_p99_us": late_us,
        "endpoint_lag_p99_us": lag_us,
        "frame_us": round(frame_ns / 1000, 3),
        "socket_queue_max_bytes": queue,
        "socket_drops": drops,
    }


def short_of_cpu(result: dict[str, Any]) -> bool:
    """Whether a dilated live run's CPU did not keep up (its figures are marked)."""
    v = (result.get("dilation") or {}).get("verdict") or {}
    return v.get("kept_up") is False
