"""A schedule's time when messages that meet on a link share it: the alpha-beta model with contention.

The closed forms of :mod:`uet.workloads.alphabeta` count the steps of an algorithm's critical path
and the bytes of its busiest link. That is exact while no two messages of the critical path cross
one link at the same time (a ring: each link carries one neighbour's stream). The double binary
tree breaks it: a node's two children send it their copies of a slice *at once*, so each arrives
at half the rate, and the node's parent in the other tree sends down the same downlink meanwhile;
a closed form charging one slice time per level undercounts (docs/collectives.md). This module
runs the schedule itself (:mod:`uet.workloads.schedule`) with the same α and β and nothing else:

* every host has one uplink and one downlink of the path's rate (a non-blocking fabric: the
  switches never bind); a message puts :meth:`Path.wire_s` worth of bytes on both;
* where ranks reach one another over paths of different rates (``paths``: a GPU reaches the
  GPUs of its own server over its scale-up link, the others over its NIC), each host has an
  uplink and a downlink per rate, and a message uses those of its own path;
* the messages being sent at one time share those links **max-min fairly** (progressive filling:
  what a fair transport converges to; no queue, loss or window is modelled);
* messages from one rank to another go one after the other, in the order they became ready (one
  PDC or queue pair per peer: a lane sends one message at a time, uet.fep.lanes);
* a send starts when its dependencies completed; its receive completes ``α`` (:meth:`Path.alpha_s`)
  after its last byte left, or when the receive's own dependencies completed, whichever is later;
  a send completes an acknowledgement (:meth:`Path.ack_s`) after that.

The result is the time at which the last op of any rank completes. No parameter comes from a run.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Protocol

from uet.workloads.schedule import OpKind, Schedule

__all__ = ["Path", "shared_time"]


class Path(Protocol):
    """What the model needs of the path (:class:`uet.workloads.alphabeta.Path` is one)."""

    @property
    def rate_bps(self) -> float: ...

    def wire_s(self, nbytes: float) -> float: ...

    def alpha_s(self, nbytes: float) -> float: ...

    def ack_s(self) -> float: ...


#: bytes below which a flow counts as finished (floating-point residue of the rate arithmetic)
_EPS = 1e-6

#: a link: (direction "u"/"d", host, rate in bit/s)
Link = tuple[str, int, float]


def _fair_rates(flows: list[tuple[Link, Link]], cap: Callable[[Link], float]) -> list[float]:
    """Max-min fair rates of ``flows`` ((uplink, downlink) each; ``cap`` the bytes per second of
    a link) by progressive filling: the most crowded link fixes its flows' share, and so on. A
    link's share only grows as other links fix their flows below it, so a heap of shares that
    may be stale (checked when popped) finds the most crowded link each time."""
    rate = [0.0] * len(flows)
    users: dict[Link, list[int]] = {}
    for i, (up, down) in enumerate(flows):
        users.setdefault(up, []).append(i)
        users.setdefault(down, []).append(i)
    left = {link: cap(link) for link in users}
    count = {link: len(us) for link, us in users.items()}
    heap = [(left[link] / count[link], link) for link in users]
    heapq.heapify(heap)
    done = [False] * len(flows)
    while heap:
        share, link = heapq.heappop(heap)
        k = count[link]
        if k == 0:
            continue
        now = left[link] / k
        if now != share:
            heapq.heappush(heap, (now, link))
            continue
        for i in users[link]:
            if done[i]:
                continue
            done[i] = True
            rate[i] = share
            for other in flows[i]:
                left[other] -= share
                count[other] -= 1
    return rate


def shared_time(sched: Schedule, path: Path | Callable[[int, int], Path]) -> float:
    """The modelled seconds of ``sched`` on hosts joined by ``path``, or by ``path(src, dst)``
    from rank src to rank dst (module docstring)."""
    ops = sched.ops
    path_of: Callable[[int, int], Path] = path if callable(path) else (lambda _s, _d: path)
    waiting = [[len(op.deps) for op in rank] for rank in ops]
    dependents: list[list[list[int]]] = [[[] for _ in rank] for rank in ops]
    for r, rank in enumerate(ops):
        for i, op in enumerate(rank):
            for d in op.deps:
                dependents[r][d].append(i)
    recv_of = {
        (op.peer, r, op.tag): i for r, rank in enumerate(ops) for i, op in enumerate(rank) if op.kind is OpKind.RECV
    }
    arrived: dict[tuple[int, int], float] = {}  # (rank, receive) -> when its message arrived
    posted: dict[tuple[int, int], float] = {}  # (rank, receive) -> when its dependencies completed
    queues: dict[tuple[int, int], deque[list[float]]] = {}  # (src, dst) -> [bytes left, send index]
    pair_path: dict[tuple[int, int], Path] = {}
    timed: list[tuple[float, int, int]] = []  # (time, rank, op): completions due later
    end = 0.0

    def _links(pair: tuple[int, int]) -> tuple[Link, Link]:
        rate = pair_path[pair].rate_bps
        return ("u", pair[0], rate), ("d", pair[1], rate)

    def complete(r: int, i: int, t: float) -> None:
        heapq.heappush(timed, (t, r, i))

    def start(r: int, i: int, now: float) -> None:
        """Op i of rank r has its dependencies: a send queues, a receive is posted."""
        op = ops[r][i]
        if op.kind is OpKind.SEND:
            p = pair_path.get((r, op.peer)) or pair_path.setdefault((r, op.peer), path_of(r, op.peer))
            queues.setdefault((r, op.peer), deque()).append([p.wire_s(op.length) * p.rate_bps / 8, float(i)])
        elif op.kind is OpKind.RECV:
            posted[(r, i)] = now
            if (r, i) in arrived:
                complete(r, i, max(now, arrived[(r, i)]))
        else:
            complete(r, i, now + op.seconds)

    def finish(r: int, i: int, t: float) -> None:
        nonlocal end
        end = max(end, t)
        for j in dependents[r][i]:
            waiting[r][j] -= 1
            if waiting[r][j] == 0:
                start(r, j, t)

    now = 0.0
    for r, rank in enumerate(ops):
        for i in range(len(rank)):
            if waiting[r][i] == 0:
                start(r, i, now)
    while True:
        active = [(k, q[0]) for k, q in queues.items() if q]
        if not active and not timed:
            return end
        rates = _fair_rates([_links(k) for k, _ in active], lambda link: link[2] / 8)
        t_next = min((now + m[0] / x for (_, m), x in zip(active, rates, strict=True)), default=float("inf"))
        if timed and timed[0][0] <= t_next:
            t_next = timed[0][0]
        for (_, m), x in zip(active, rates, strict=True):
            m[0] -= x * (t_next - now)
        now = t_next
        for (src, dst), m in active:
            if m[0] <= _EPS:
                queues[(src, dst)].popleft()
                i = int(m[1])
                op = ops[src][i]
                p = pair_path[(src, dst)]
                at = now + p.alpha_s(op.length)
                complete(src, i, at + p.ack_s())
                j = recv_of[(src, dst, op.tag)]
                arrived[(dst, j)] = at
                if (dst, j) in posted:
                    complete(dst, j, max(at, posted[(dst, j)]))
        while timed and timed[0][0] <= now:
            t, r, i = heapq.heappop(timed)
            finish(r, i, t)
