"""Alpha-beta models of the collective library's algorithms (docs/collectives.md).

Each algorithm's time is a count of *steps* on its critical path, each paying a per-message
latency α, plus the bytes the busiest link carries, paid at the link's rate. Both come from the
fabric, never fitted to a run (:class:`Path`):

* the **rate** B of the link a step crosses (the host NIC's; the scale-up link's inside a server),
  and the bytes a message puts on it: its payload cut into packets of ``payload`` bytes, each with
  ``overhead`` bytes of headers and framing (UET: SES 44 + PDS 12 + UDP 8 + IPv4 20 + Ethernet 14
  + FCS, preamble and gap 24 = 122; :data:`uet.scenario.derive.DATA_OVERHEAD`);
* the **latency** α of a message beyond its serialisation at the sender: propagation over each of
  the path's ``links`` links and the store-and-forward of its last frame at every switch; and the
  acknowledgement that ends a send (its minimum frame back over the path) once, at the end.

The models (``S`` bytes, n ranks, C channels, R rounds, piece q = S / (n C R), w(x) the wire time
of x payload bytes):

* ring all-reduce: 2(n − 1) steps; each step of a round moves C pieces over every link:
  T = 2(n − 1) (α(q) + C R w(q)) + ack — the pipeline keeps the link busy across rounds, so the
  latency is paid once per step, not once per step and round;
* ring reduce-scatter / all-gather: the same with n − 1 steps;
* broadcast / reduce (a chain of n ranks, P = C R slices of S / P): T = (n − 1) (α + w(S/P)) +
  (P − 1) w(S/P) + ack: the first slice crosses every hop, the others follow it one slice apart;
* double binary tree: no closed form — a node's two children send it their copies of a slice at
  once and the other tree's traffic crosses the same links, so the steps of its critical path share
  their links; its schedule is run with the links shared max-min between the messages that meet
  on them, with the same α and w and nothing else (:mod:`uet.workloads.sharing`);
* hierarchical: the intra-server reduce-scatter and all-gather (rings of G ranks over the scale-up
  links) plus the inter-server ring all-reduce of S / G bytes, in sequence;
* all-to-all: every rank sends the bytes of its blocks to others and receives its share:
  T = α + max(w(sent), w(received by the busiest rank)) + ack;
* send/recv: T = α + w(S) + ack.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from uet.scenario.derive import DATA_OVERHEAD, MIN_WIRE, ROCE_DATA_OVERHEAD
from uet.workloads.algorithms import Pipeline, double_tree
from uet.workloads.schedule import Builder
from uet.workloads.sharing import shared_time

__all__ = ["Path", "model_time", "rail_paths"]


@dataclass(frozen=True)
class Path:
    """The link a collective's messages cross (module docstring)."""

    rate_bps: float
    delay_ns: float
    links: int
    payload: int = 4096
    overhead: int = DATA_OVERHEAD
    #: the links of each hop of a ring (rank i to i + 1), when they differ; ``links`` is the longest
    hops: tuple[int, ...] = ()

    @classmethod
    def of_run(cls, result: dict[str, Any], links: int, hops: tuple[int, ...] = ()) -> Path:
        """The path of a run result's host links (its ``derived`` settings: rate, per-link delay,
        payload; RoCEv2 frames when its transport is ``roce``) over ``links`` links."""
        d = result["derived"]
        if result.get("transport") == "roce":
            payload, overhead = int(d["roce"]["pmtu"]), ROCE_DATA_OVERHEAD
        else:
            payload, overhead = int(d["endpoint"]["payload_size"]), DATA_OVERHEAD
        return cls(float(d["link_rate_bps"]), float(d["link_delay_ns"]), links, payload, overhead, hops)

    def wire_s(self, nbytes: float) -> float:
        """Seconds ``nbytes`` payload bytes take on the link, headers and framing included."""
        packets = max(1, math.ceil(nbytes / self.payload))
        return (nbytes + packets * self.overhead) * 8 / self.rate_bps

    def alpha_s(self, nbytes: float) -> float:
        """A message's latency beyond its serialisation: propagation over every link and the
        store-and-forward of its last frame at each switch."""
        last = nbytes - (max(1, math.ceil(nbytes / self.payload)) - 1) * self.payload
        return self.links * self.delay_ns / 1e9 + (self.links - 1) * (last + self.overhead) * 8 / self.rate_bps

    def ack_s(self) -> float:
        """The acknowledgement that ends a send: a minimum frame back over the path."""
        return self.links * (self.delay_ns / 1e9 + MIN_WIRE * 8 / self.rate_bps)


def rail_paths(hosts: Sequence[int], gpus: int, nic: Path, scale_up: Path) -> Callable[[int, int], Path]:
    """The path from rank a to rank b on a rail fabric whose servers have a scale-up domain
    (``hosts``: each rank's host, numbered server by server, GPU g of server s being host
    s·``gpus`` + g): ``scale_up`` between GPUs of one server, ``nic`` over 2 links between GPUs of
    one rail (under its rail leaf), over 4 between rails (through a spine)."""

    def between(a: int, b: int) -> Path:
        ha, hb = hosts[a], hosts[b]
        if ha // gpus == hb // gpus:
            return scale_up
        return replace(nic, links=2 if ha % gpus == hb % gpus else 4)

    return between


def _ring(path: Path, n: int, nbytes: int, pipe: Pipeline, steps: int) -> float:
    channels, rounds = pipe.cut(max(1, nbytes // n))
    q = nbytes / (n * channels * rounds)
    hops = path.hops or (path.links,) * n
    alphas = [replace(path, links=h).alpha_s(q) for h in hops]
    chain = max(sum(alphas[(i + t) % len(alphas)] for t in range(steps)) for i in range(len(alphas)))
    w = path.wire_s(q)
    latency_bound = chain + steps * w + (channels * rounds - 1) * w
    bandwidth_bound = steps * channels * rounds * w + max(alphas)
    return max(latency_bound, bandwidth_bound)


def model_time(
    op: str,
    algorithm: str,
    n: int,
    nbytes: int,
    path: Path,
    pipe: Pipeline | None = None,
    *,
    scale_up: Path | None = None,
    gpus: int = 1,
    received: int | None = None,
    paths: Callable[[int, int], Path] | None = None,
) -> float:
    """The modelled time in seconds of one collective (module docstring), the buffer cut as the
    algorithm cuts it with ``pipe`` (:meth:`uet.workloads.algorithms.Pipeline.cut`);
    ``scale_up``/``gpus``: the server's links and size for ``hierarchical``; ``received``: the
    bytes the busiest rank receives in an all-to-all (default: its uniform share); ``paths``: the
    path from each rank to each other where they differ (the tree; :func:`rail_paths`)."""
    pipe = pipe or Pipeline()
    if op == "allreduce" and algorithm == "ring":
        return _ring(path, n, nbytes, pipe, 2 * (n - 1)) + path.ack_s()
    if op in ("reduce_scatter", "all_gather"):
        return _ring(path, n, nbytes, pipe, n - 1) + path.ack_s()
    if op in ("broadcast", "reduce"):
        c, r = pipe.cut(nbytes)
        s = nbytes / (c * r)
        return (n - 1) * (path.alpha_s(s) + path.wire_s(s)) + (c * r - 1) * path.wire_s(s) + path.ack_s()
    if op == "allreduce" and algorithm == "tree":
        return _tree(paths or path, n, nbytes, pipe)
    if op == "allreduce" and algorithm == "hierarchical":
        inner = scale_up or path
        servers = n // gpus
        t = 0.0
        if gpus > 1:
            t += 2 * _ring(inner, gpus, nbytes, pipe, gpus - 1)
        if servers > 1:
            t += _ring(path, servers, nbytes // gpus, pipe, 2 * (servers - 1))
        return t + (inner if servers == 1 else path).ack_s()
    if op == "all_to_all":
        sent = nbytes * (n - 1) / n
        got = sent if received is None else received
        return path.alpha_s(nbytes / n) + path.wire_s(max(sent, got)) + path.ack_s()
    if op == "send_recv":
        return path.alpha_s(nbytes) + path.wire_s(nbytes) + path.ack_s()
    raise ValueError(f"no model of {op} ({algorithm})")


def _tree(path: Path | Callable[[int, int], Path], n: int, nbytes: int, pipe: Pipeline) -> float:
    """Double binary tree: its schedule run with the links shared between the messages that meet
    on them (:mod:`uet.workloads.sharing`; module docstring)."""
    b = Builder(n, nbytes)
    double_tree(b, n, nbytes, pipe)
    return shared_time(b.schedule, path)
