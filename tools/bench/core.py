"""``uet-bench core``: CPU cost of the sans-I/O PDS core per packet, per side, in memory.

Two :class:`uet.pds.PdsCore` objects in one process, no sockets: the initiator submits RUD
messages of ``--message`` bytes cut into ``--payload``-byte packets (each with a 44-byte SES
standard header, as the endpoint's message layer sends them), keeps at most ``--window`` packets
submitted and not yet acknowledged, and the two cores exchange their datagrams in batches (every
datagram the sender has ready goes to the receiver, then every ACK comes back), the way the
endpoint runs the core once per batch of received datagrams.

Time is measured with ``time.thread_time_ns`` (CPU time of this thread: preemption by other
load does not count) around each side's own calls only:

* sender: ``submit``, ``datagrams_to_send``, ``receive_datagram`` of the ACKs, ``next_event``;
* receiver: ``receive_datagram`` of the requests (including its ``on_deliver`` callback, which
  only counts bytes), ``datagrams_to_send`` of the ACKs.

and reported as µs per data packet. The best (minimum) of ``--repeat`` runs is reported: the
least disturbed by other load on a shared machine. This is a benchmark, not a test. The lead wires
it into ``uet-bench`` as the ``core`` sub-command by calling :func:`main` (``core_main`` alias).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

from uet.tools.cli import int_arg, size_arg

from uet.pds import Acked, Mode, PdsConfig, PdsCore
from uet.wire import ses as ses_wire

__all__ = ["core_main", "main", "run_core"]

A_FA = "10.0.0.1"
B_FA = "10.0.0.2"


def _ses_headers(n: int, length: int, payload: int) -> list[bytes]:
    """SES standard headers of one message of ``n`` packets (SOM first, then SOM=0 variants)."""
    out = []
    for i in range(n):
        som = i == 0
        eom = i == n - 1
        flags = (ses_wire.SesFlag.SOM if som else 0) | (ses_wire.SesFlag.EOM if eom else 0)
        lay = ses_wire.STANDARD[(1 if som else 0, "none")]
        fields: dict[str, int] = dict(
            opcode=int(ses_wire.SesOpcode.SEND),
            flags=int(flags),
            message_id=7,
            job_id=1,
            pid_on_fep=1,
            resource_index=0,
            request_length=length,
        )
        if not som:
            fields.update(payload_length=min(payload, length - i * payload) & 0x3FFF, message_offset=i * payload)
        out.append(lay.encode(lay.make(**fields)))
    return out


def run_core(
    payload: int = 4096,
    packets: int = 20000,
    message: int = 65536,
    window: int = 64,
    seed: int = 1,
    config: PdsConfig | None = None,
) -> dict[str, Any]:
    """One run: ``packets`` RUD packets of ``payload`` bytes from A to B; per-side µs/packet."""
    cfg = config or PdsConfig(close_idle_ns=None, target_idle_ns=None)
    a = PdsCore(A_FA, cfg, rng=random.Random(seed))
    b = PdsCore(B_FA, cfg, rng=random.Random(seed + 1))
    got = [0]

    def on_deliver(d: Any) -> None:
        got[0] += len(d.payload)

    b.on_deliver = on_deliver
    per_msg = max(1, -(-message // payload))
    hdrs = _ses_headers(per_msg, per_msg * payload, payload)
    body = random.Random(seed).randbytes(payload)
    clock = time.thread_time_ns
    ta = tb = 0
    now = 0
    submitted = acked = 0
    inflight = 0
    idx = 0
    a_submit, a_send, a_rx, a_ev = a.submit, a.datagrams_to_send, a.receive_datagram, a.next_event
    b_rx, b_send = b.receive_datagram, b.datagrams_to_send
    rounds = 0
    while acked < packets:
        rounds += 1
        if rounds > packets * 20:
            raise RuntimeError("core benchmark made no progress")
        now += 1000
        t0 = clock()
        while inflight < window and submitted < packets:
            a_submit(
                B_FA, Mode.RUD, 3, hdrs[idx], body, token=submitted, som=idx == 0, eom=idx == per_msg - 1, now=now
            )  # fmt: skip
            idx += 1
            if idx == per_msg:
                idx = 0
            submitted += 1
            inflight += 1
        reqs = a_send(now)
        t1 = clock()
        for data, _dst, ent in reqs:
            b_rx(data, now, source=A_FA, source_port=ent)
        acks = b_send(now)
        t2 = clock()
        if not acks:  # nothing due: let the coalescing timer fire (virtual time)
            dl = b.get_timer()
            if dl is not None:
                now = max(now, dl)
                b.handle_timer(now)
                acks = b_send(now)
        t3 = clock()
        for data, _dst, ent in acks:
            a_rx(data, now, source=B_FA, source_port=ent)
        ev = a_ev()
        while ev is not None:
            if type(ev) is Acked:
                acked += 1
                inflight -= 1
            ev = a_ev()
        t4 = clock()
        ta += (t1 - t0) + (t4 - t3)
        tb += t2 - t1
    if got[0] != packets * payload:
        raise RuntimeError(f"receiver got {got[0]} bytes, expected {packets * payload}")
    return {
        "payload": payload,
        "packets": packets,
        "sender_us_per_pkt": ta / packets / 1000,
        "receiver_us_per_pkt": tb / packets / 1000,
        "total_us_per_pkt": (ta + tb) / packets / 1000,
        "acks": b.counters.get("acks_tx", 0),
        "retransmits": a.counters.get("retransmits", 0),
    }


def bench(payloads: Sequence[int], packets: int, repeat: int, message: int, window: int) -> list[dict[str, Any]]:
    """Best of ``repeat`` runs for each payload size."""
    out = []
    for p in payloads:
        runs = [run_core(p, packets, message, window, seed=i + 1) for i in range(repeat)]
        best = min(runs, key=lambda r: r["total_us_per_pkt"])
        best["sender_us_per_pkt"] = min(r["sender_us_per_pkt"] for r in runs)
        best["receiver_us_per_pkt"] = min(r["receiver_us_per_pkt"] for r in runs)
        out.append({k: round(v, 3) if isinstance(v, float) else v for k, v in best.items()})
    return out


def add_parser(sub: Any) -> None:
    """The ``uet-bench core`` subcommand (tools/bench/__init__.py)."""
    p = sub.add_parser("core", help="PDS core cost per packet, in memory", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--payload",
        type=size_arg(1, 65451),
        action="append",
        help="payload bytes per packet (default 4096 and 8192; repeat for several)",
    )
    p.add_argument("--packets", type=int_arg(1), default=20000, help="data packets per run")
    p.add_argument("--message", type=size_arg(1, 0xFFFFFFFF), default=65536, help="message size in bytes")
    p.add_argument("--window", type=int_arg(1), default=64, help="packets submitted and not yet acknowledged")
    p.add_argument("--repeat", type=int_arg(1), default=3, help="runs per payload; the best is reported")
    p.add_argument(
        "--rtt",
        action="store_true",
        help="round trips of a small message through two FEP cores instead",
    )
    p.add_argument("--size", type=size_arg(1, 0xFFFFFFFF), default=64, help="--rtt: message bytes (default 64)")
    p.add_argument("--trips", type=int_arg(1), default=5000, help="--rtt: timed round trips per run (default 5000)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.set_defaults(run=run)


def main(argv: Sequence[str] | None = None) -> int:
    """``uet-bench core ...`` (kept for ``python -m uet.tools.bench.core`` and the tests)."""
    from uet.tools.bench import main as bench_main

    return bench_main(["core", *(sys.argv[1:] if argv is None else argv)])


def run(ns: argparse.Namespace) -> int:
    """Run the benchmark for every payload; print a table or one JSON object."""
    if ns.rtt:
        return run_rtt(ns)
    payloads = ns.payload or [4096, 8192]
    res = bench(payloads, ns.packets, ns.repeat, ns.message, ns.window)
    if ns.json:
        sys.stdout.write(json.dumps({"mode": "RUD", "results": res}) + "\n")
        return 0
    sys.stdout.write(f"uet-bench core (RUD, in memory, µs per packet per side, best of {ns.repeat})\n")
    sys.stdout.write(f"{'payload':>8} {'sender':>8} {'receiver':>9} {'acks':>7}\n")
    for r in res:
        sys.stdout.write(
            f"{r['payload']:>8} {r['sender_us_per_pkt']:>8.2f} {r['receiver_us_per_pkt']:>9.2f} {r['acks']:>7}\n"
        )
    return 0


def run_rtt(ns: argparse.Namespace) -> int:
    """``--rtt``: :func:`uet.tools.bench.core_rtt.run_core_rtt`, a table or one JSON object."""
    from uet.tools.bench.core_rtt import run_core_rtt

    r = run_core_rtt(ns.size, ns.trips, ns.repeat)
    if ns.json:
        sys.stdout.write(json.dumps({"mode": "RUD", "rtt": r}) + "\n")
        return 0
    sys.stdout.write(
        f"uet-bench core --rtt (RUD, {r['size']}-byte messages, two FEP cores in memory, best of {ns.repeat})\n"
        f"  µs per round trip {r['us_per_rt']:8.2f}   ping side {r['ping_us_per_rt']:.2f}"
        f"   echo side {r['echo_us_per_rt']:.2f}\n"
        f"  per round trip: datagrams {r['datagrams_ping_to_echo']:g} + {r['datagrams_echo_to_ping']:g}, "
        f"events {r['events_ping']:g} + {r['events_echo']:g}, "
        f"timer changes {r['timer_changes_ping']:g} + {r['timer_changes_echo']:g}, "
        f"Python calls {r['py_calls_per_rt']:g}, C calls {r['c_calls_per_rt']:g}\n"
    )
    return 0


core_main = main

if __name__ == "__main__":
    sys.exit(main())
