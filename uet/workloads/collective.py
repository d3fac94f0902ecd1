"""The collective library as a workload: one collective, at one size or a sweep of sizes.

``collective`` (and ``allreduce``, the same workload with its historical name) runs one of the
collectives of :mod:`uet.workloads.algorithms` on every rank, over any transport and either
engine, and reports what nccl-tests reports for each size: the time, the *algorithm bandwidth*
``algbw = size / time`` and the *bus bandwidth* ``busbw = algbw × factor``, where ``size`` and
``factor`` are nccl-tests' (its doc/PERFORMANCE.md), so that busbw is comparable with the link
rate whatever the collective and the rank count n:

============== ======================================= =============
op             size (bytes of …)                        busbw factor
============== ======================================= =============
allreduce      each rank's buffer                      2(n − 1)/n
reduce_scatter each rank's input (n blocks)            (n − 1)/n
all_gather     each rank's output (n blocks)           (n − 1)/n
broadcast      the buffer                              1
reduce         the buffer                              1
all_to_all     each rank's input (n blocks)            (n − 1)/n
send_recv      the buffer each rank sends              1
============== ======================================= =============

**Time** of a size: each rank measures its own time from its start of the collective to the
completion of its last op (its last send acknowledged, its last receive applied), averaged over
``iters`` runs after ``warmup`` runs; the size's time is the largest over the ranks
(**decision**: nccl-tests averages the ranks by default; the collective is done when the last
rank is). Between runs (a sweep, or ``iters`` > 1) the ranks meet at a barrier outside the timed
part (:meth:`Collective._barrier`).

**Reports**: one flow per (size, sending rank, peer) — its messages, bytes and the rank's time
— so the engines' per-flow accounting checks every message arrived once and intact (its digest, as
for every workload); ``check`` is whether each rank's result is right (the reduction is bitwise
XOR: :mod:`uet.workloads.executor`). With ``check = false`` the same messages move but nothing is
computed, hashed or checked: large sweeps measure the network and not CPython. The run result
gets a ``collective`` table (:meth:`Collective.result_extra`).

**Parameters** (``[workload.params]``, or ``--workload-set KEY=VALUE``): see :class:`Params`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from uet.ses.sink import digest
from uet.transport import Transport, error_name
from uet.workloads import algorithms as alg
from uet.workloads.base import Flow, FlowReport, RankReport, Workload, _retransmits, _rx, message_data
from uet.workloads.executor import CollectiveFailed, execute
from uet.workloads.schedule import Apply, Builder, Op, Schedule, split

__all__ = ["BUSBW", "DTYPES", "OPS", "Collective", "busbw_factor"]

#: busbw = algbw × factor(n) (module docstring).
BUSBW: dict[str, Callable[[int], float]] = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "all_to_all": lambda n: (n - 1) / n,
    "send_recv": lambda n: 1.0,
}
OPS = tuple(BUSBW)
#: The algorithms of each op (the first is the default).
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce": ("ring", "tree", "hierarchical"),
    "reduce_scatter": ("ring",),
    "all_gather": ("ring",),
    "broadcast": ("ring",),
    "reduce": ("ring",),
    "all_to_all": ("pairwise",),
    "send_recv": ("pairwise",),
}
#: Element sizes for the ``count`` column (nccl-tests' types).
DTYPES = {"int8": 1, "uint8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "int32": 4, "float64": 8, "int64": 8}
#: Tag bit of the barrier's messages (collective messages carry the run number above bit 32).
_BARRIER = 1 << 62


def busbw_factor(op: str, n: int) -> float:
    return BUSBW[op](n)


class Collective(Workload):
    """See the module docstring."""

    name = "collective"

    @dataclass(frozen=True)
    class Params:
        """The collective and how it runs.

        ``op``: one of :data:`OPS`. ``algorithm``: ``ring`` (default), ``tree`` (double binary
        tree) or ``hierarchical`` for ``allreduce``; the others have one. ``channels``,
        ``slice_bytes``, ``depth``: the pipeline (:class:`uet.workloads.algorithms.Pipeline`).
        ``gpus_per_server``: ranks per server, consecutive ranks forming a server (the
        hierarchical algorithm's grouping; default: the servers of the engine's placement,
        :meth:`Collective.place`; without servers, 8 consecutive ranks, or n when 8 does not
        divide n).
        ``root``: of broadcast and reduce. ``skew``: of all_to_all, the mixture-of-experts skew
        (:func:`uet.workloads.algorithms.moe_bytes`; 0 uniform, 1 Zipf). ``stages``: of
        send_recv, the pipeline stages (default n: each rank to the next). ``min_bytes`` /
        ``max_bytes`` / ``factor``: a sweep as nccl-tests' ``-b -e -f`` (default: the one size
        ``message_bytes``; ``max_bytes`` defaults to ``message_bytes``). ``dtype``: the element
        type the ``count`` column counts. ``iters`` / ``warmup``: timed and untimed runs per
        size. ``check``: compute and check the result (module docstring).
        """

        op: str = "allreduce"
        algorithm: str | None = None
        channels: int = 2
        slice_bytes: int = 256 * 1024
        depth: int = 4
        gpus_per_server: int | None = None
        root: int = 0
        skew: float | int = 0.0
        stages: int | None = None
        min_bytes: int | None = None
        max_bytes: int | None = None
        factor: int = 2
        dtype: str = "float32"
        iters: int = 1
        warmup: int = 0
        check: bool = True

    params: Params

    def pairs(self) -> list[tuple[int, int]]:
        return []  # the flows come from the schedules (__init__)

    def __init__(self, n: int, **kw: Any) -> None:
        super().__init__(n, **{**kw, "messages": 1})  # the schedule says how many messages
        p = self.params
        self.op = p.op
        if self.op not in BUSBW:
            raise ValueError(f"workload {self.name}: op = {self.op!r}: one of {', '.join(OPS)}")
        self.algorithm = p.algorithm or ALGORITHMS[self.op][0]
        if self.algorithm not in ALGORITHMS[self.op]:
            raise ValueError(
                f"workload {self.name}: algorithm = {self.algorithm!r}: {self.op} has {', '.join(ALGORITHMS[self.op])}"
            )
        if p.dtype not in DTYPES:
            raise ValueError(f"workload {self.name}: dtype = {p.dtype!r}: one of {', '.join(DTYPES)}")
        for key in ("channels", "slice_bytes", "depth", "iters", "factor"):
            if getattr(p, key) < (2 if key == "factor" else 1):
                raise ValueError(f"workload {self.name}: {key} = {getattr(p, key)}: too small")
        if p.warmup < 0 or p.skew < 0 or not 0 <= p.root < n:
            raise ValueError(f"workload {self.name}: warmup and skew >= 0, root a rank (0 to {n - 1})")
        self.pipe = alg.Pipeline(p.channels, p.slice_bytes, p.depth)
        self.gpus = p.gpus_per_server or (8 if n % 8 == 0 else n)
        if n % self.gpus:
            raise ValueError(f"workload {self.name}: gpus_per_server = {self.gpus} does not divide {n} ranks")
        top = p.max_bytes or self.message_bytes
        sizes = [top] if p.min_bytes is None else []
        s = p.min_bytes or 0
        while p.min_bytes is not None and s <= top:
            sizes.append(s)
            s *= p.factor
        if not sizes or min(sizes) < 1:
            raise ValueError(f"workload {self.name}: no size between min_bytes and max_bytes")
        self.sizes = sizes
        self.runs = p.warmup + p.iters
        self.barriers = len(sizes) * self.runs > 1
        self.servers = [list(range(s, s + self.gpus)) for s in range(0, n, self.gpus)]
        self._local: dict[asyncio.AbstractEventLoop, set[int]] = {}  # ranks running in each loop
        self._gates: dict[tuple[asyncio.AbstractEventLoop, int], list[Any]] = {}  # in-process barriers
        self._account()

    def place(self, servers: list[list[int]]) -> None:
        """Group the ranks as the engine placed them (the hierarchical algorithm's servers), unless
        ``gpus_per_server`` was given; hosts without servers (one GPU each) and servers of unequal
        size (a partly filled last server) keep the consecutive grouping."""
        sizes = {len(s) for s in servers}
        if self.params.gpus_per_server or len(sizes) != 1 or sizes == {1} or servers == self.servers:
            return
        self.servers = [list(s) for s in servers]
        self.gpus = len(servers[0])
        self._account()

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "servers": self.servers}

    def _account(self) -> None:
        """The flows, per-rank receive counts and bytes of every size's schedule."""
        n, sizes = self.n, self.sizes
        self._cache: tuple[int, Schedule] | None = None
        self._flows = []
        self._flow_of: dict[tuple[int, int, int], int] = {}  # (size index, src, dst) -> flow id
        self.size_of: dict[int, int] = {}  # flow id -> size index
        self._received: list[int] = [0] * n
        for k in range(len(sizes)):
            sched = self.schedule(k)
            for (src, dst), (msgs, nbytes) in sorted(sched.pairs().items()):
                fid = len(self._flows)
                self._flows.append(Flow(fid, src, dst, msgs * self.runs, -(-nbytes // msgs)))
                self._flow_of[(k, src, dst)] = fid
                self.size_of[fid] = k
            for r in range(n):
                self._received[r] += sched.received(r) * self.runs
        self._bytes = sum(b for k in range(len(sizes)) for _, b in self.schedule(k).pairs().values()) * self.runs

    # -- the schedules ----------------------------------------------------------------------------

    def schedule(self, k: int) -> Schedule:
        """The schedule at size index ``k`` (the last one built is kept)."""
        if self._cache is not None and self._cache[0] == k:
            return self._cache[1]
        size, n, pipe = self.sizes[k], self.n, self.pipe
        b = Builder(n, size)
        try:
            if self.op == "allreduce" and self.algorithm == "tree":
                alg.double_tree(b, n, size, pipe)
            elif self.op == "allreduce" and self.algorithm == "hierarchical":
                alg.hierarchical(b, self.servers, size, pipe)
            elif self.op in ("allreduce", "reduce_scatter", "all_gather"):
                alg.ring(b, range(n), 0, size, pipe, reduce_scatter=self.op != "all_gather",
                         all_gather=self.op != "reduce_scatter")  # fmt: skip
            elif self.op == "broadcast":
                alg.chain(b, [(self.params.root + i) % n for i in range(n)], size, pipe, apply=Apply.COPY)
            elif self.op == "reduce":
                alg.chain(b, [(self.params.root + 1 + i) % n for i in range(n)], size, pipe, apply=Apply.REDUCE)
            elif self.op == "all_to_all":
                alg.all_to_all(b, self.a2a_sizes(k), pipe)
            else:
                alg.send_recv(b, n, self.params.stages or n, size, pipe)
        except ValueError as e:
            raise ValueError(f"workload {self.name}: {self.op} of {size} bytes on {n} ranks: {e}") from None
        self._cache = (k, b.schedule)
        return b.schedule

    def a2a_sizes(self, k: int) -> list[list[int]]:
        """Bytes rank r sends rank j at size index ``k`` (uniform, or skewed)."""
        row = alg.moe_bytes(self.n, self.sizes[k], float(self.params.skew), self.seed)
        return [row] * self.n

    # -- the run ------------------------------------------------------------------------------------

    def total_bytes(self) -> int:
        return self._bytes

    def expected(self, rank: int) -> int:
        return self._received[rank] if self.params.check else 0

    async def run(
        self,
        rank: int,
        ep: Transport,
        addresses: list[str],
        report: RankReport | None = None,
        *,
        now: Callable[[], float] | None = None,
    ) -> RankReport:
        clock = now or asyncio.get_running_loop().time
        t0 = clock()
        report = report if report is not None else RankReport()
        for k in range(len(self.sizes)):
            if not await self._run_size(k, rank, ep, addresses, report, clock, t0):
                break
        return report

    async def _run_size(self, k: int, rank: int, ep: Transport, addresses: list[str], report: RankReport,
                        clock: Callable[[], float], t0: float) -> bool:  # fmt: skip
        """Rank ``rank``'s runs at size index ``k``, reported; False when one failed."""
        check = bool(self.params.check)
        ops = self.schedule(k).ops[rank]
        peers = sorted(self._peers(k, rank))
        hashes: dict[int, list[int]] = {p: [] for p in peers}
        count = dict.fromkeys(peers, 0)
        rtx0 = {p: _retransmits(ep, addresses[p]) for p in peers}

        def on_send(op: Op, payload: bytes | memoryview) -> int:
            i = count[op.peer]
            count[op.peer] = i + 1
            if check:
                hashes[op.peer].append(digest(payload))
            return (self._flow_of[(k, rank, op.peer)] << 32) | i

        def on_recv(op: Op, m: Any) -> None:
            report.add_rx(_rx(m, clock() - t0))

        times: list[float] = []
        err: str | None = None
        bufs: list[Any] = []
        for it in range(self.runs):
            epoch = k * self.runs + it
            bufs = self.buffers(k, rank)
            try:
                if self.barriers:
                    await self._barrier(ep, addresses, rank, epoch)
                t = clock()
                await execute(ep, addresses, ops, bufs, tag_base=epoch << 32, data=check, on_send=on_send,
                              on_recv=on_recv if check else None)  # fmt: skip
            except CollectiveFailed as e:
                err = e.name
                break
            except Exception as e:  # noqa: BLE001 - the barrier's failure is the rank's error
                err = error_name(e)
                break
            if it >= self.params.warmup:
                times.append(clock() - t)
        took = sum(times) / len(times) if times else clock() - t0
        for p in peers:
            fid = self._flow_of[(k, rank, p)]
            f = self._flows[fid]
            rtx = _retransmits(ep, addresses[p]) - rtx0[p]
            report.add_flow(
                FlowReport(fid, ep.address, addresses[p], f.messages * f.nbytes, f.messages, took, rtx, hashes[p], err)
            )
        if err is not None:
            report.error = report.error or err
            report.check = False if check else None
            return False
        if check:
            ok = self.verify(k, rank, bufs)
            report.check = ok if report.check is None else report.check and ok
        return True

    def _peers(self, k: int, rank: int) -> set[int]:
        return {dst for (kk, src, dst) in self._flow_of if kk == k and src == rank}

    def unfinished(self, rank: int, ep: Transport, addresses: list[str], report: RankReport, elapsed_s: float,
                   error: str = "timeout") -> list[FlowReport]:  # fmt: skip
        done = {r.flow for r in report.flows}
        return [
            FlowReport(
                f.id,
                ep.address,
                addresses[f.dst],
                f.messages * f.nbytes,
                f.messages,
                elapsed_s,
                _retransmits(ep, addresses[f.dst]),
                [],
                error,
            )  # fmt: skip
            for f in self._flows
            if f.src == rank and f.id not in done
        ]

    async def _barrier(self, ep: Transport, addresses: list[str], rank: int, epoch: int) -> None:
        """The ranks meet before each timed run (**decision**, so that every rank's timed run
        starts at one instant and no rank's time counts another's late start):

        * when every rank runs in this process on this event loop (the simulator), at an
          in-process barrier that releases them all in the same instant, without a message;
        * else over the network: every rank tells rank 0, which, having heard from all, releases
          them all at once (they then leave within their paths' latency differences from rank 0).
        """
        loop = asyncio.get_running_loop()
        here = self._local.setdefault(loop, set())
        here.add(rank)
        await asyncio.sleep(0)  # every rank task of this loop starts before any is released
        if len(here) == self.n:
            gate = self._gates.get((loop, epoch))
            if gate is None:
                gate = self._gates[(loop, epoch)] = [0, loop.create_future()]
            gate[0] += 1
            if gate[0] == self.n:
                del self._gates[(loop, epoch)]
                gate[1].set_result(None)
            await gate[1]
            return
        tag = _BARRIER | epoch
        if rank:
            await asyncio.gather(ep.send(addresses[0], bytes(8), tag=tag), ep.recv(tag, source=addresses[0]))
            return
        await asyncio.gather(*(ep.recv(tag, source=addresses[r]) for r in range(1, self.n)))
        await asyncio.gather(*(ep.send(addresses[r], bytes(8), tag=tag) for r in range(1, self.n)))

    # -- data and its check -------------------------------------------------------------------------

    def input(self, k: int, rank: int) -> bytes | memoryview:
        """Rank ``rank``'s input vector at size index ``k``."""
        return message_data(self.seed, rank, k, self.sizes[k])

    def buffers(self, k: int, rank: int) -> list[Any]:
        """The buffers a run starts from (schedule.py's ``buf`` 0 and 1)."""
        data = self.input(k, rank)
        size = self.sizes[k]
        if not self.params.check:
            return [data, None]
        if self.op == "all_gather":
            work = bytearray(size)
            off, ln = split(size, self.n)[rank]
            work[off : off + ln] = data[off : off + ln]
            return [work, None]
        if self.op == "all_to_all":
            rows = self.a2a_sizes(k)
            out = bytearray(sum(rows[j][rank] for j in range(self.n)))
            at, src = sum(rows[j][rank] for j in range(rank)), sum(rows[rank][:rank])
            out[at : at + rows[rank][rank]] = data[src : src + rows[rank][rank]]
            return [data, out]
        if self.op == "send_recv":
            return [data, bytearray(size)]
        return [bytearray(data), None]

    def verify(self, k: int, rank: int, bufs: list[Any]) -> bool:
        """Whether ``rank``'s result after a run is right."""
        n, size = self.n, self.sizes[k]
        if self.op in ("allreduce", "reduce_scatter", "reduce"):
            if self.op == "reduce" and rank != self.params.root:
                return True  # a non-root rank's buffer holds a partial sum: nothing to check
            want = self._xor_all(k)
            if self.op == "reduce_scatter":
                off, ln = split(size, n)[rank]
                return bytes(bufs[0][off : off + ln]) == want[off : off + ln]
            return bytes(bufs[0]) == want
        if self.op == "all_gather":
            return bytes(bufs[0]) == b"".join(
                bytes(self.input(k, r)[o : o + ln]) for r, (o, ln) in enumerate(split(size, n))
            )
        if self.op == "broadcast":
            return bytes(bufs[0]) == bytes(self.input(k, self.params.root))
        if self.op == "all_to_all":
            rows = self.a2a_sizes(k)
            parts = [bytes(self.input(k, j)[sum(rows[j][:rank]) : sum(rows[j][: rank + 1])]) for j in range(n)]
            return bytes(bufs[1]) == b"".join(parts)
        per = n // (self.params.stages or n)
        stages = self.params.stages or n
        src = ((rank // per - 1) % stages) * per + rank % per
        return bytes(bufs[1]) == bytes(self.input(k, src))

    def _xor_all(self, k: int) -> bytes:
        return _xor_inputs(self.seed, self.n, k, self.sizes[k])

    # -- the result ---------------------------------------------------------------------------------

    def result_extra(self, flows: list[dict[str, Any]]) -> dict[str, Any]:
        """``{"collective": {...}}``: the nccl-tests table of the run (module docstring), from the
        per-flow results (:func:`uet.workloads.report.summarize`)."""
        n = self.n
        factor = busbw_factor(self.op, n)
        elem = DTYPES[self.params.dtype]
        rows = []
        for k, size in enumerate(self.sizes):
            mine = [f for f in flows if self.size_of.get(f["flow"]) == k]
            done = [f["completion_s"] for f in mine if f.get("completion_s") is not None and f.get("error") is None]
            row: dict[str, Any] = {"size": size, "count": size // elem, "type": self.params.dtype,
                                   "ok": bool(mine) and all(f.get("intact") for f in mine)}  # fmt: skip
            if done and len(done) == len(mine):
                t = max(done)
                alg_bps = size * 8 / t if t > 0 else 0.0
                row.update(
                    time_us=round(t * 1e6, 3),
                    algbw_gbps=round(alg_bps / 1e9, 4),
                    busbw_gbps=round(alg_bps * factor / 1e9, 4),
                    algbw_GBps=round(alg_bps / 8e9, 4),
                    busbw_GBps=round(alg_bps * factor / 8e9, 4),
                )
            rows.append(row)
        info: dict[str, Any] = {
            "op": self.op,
            "algorithm": self.algorithm,
            "ranks": n,
            "busbw_factor": round(factor, 6),
            "channels": self.pipe.channels,
            "slice_bytes": self.pipe.slice_bytes,
            "depth": self.pipe.depth,
            "rows": rows,
        }
        if self.op == "allreduce" and self.algorithm == "hierarchical":
            info["gpus_per_server"] = self.gpus
        if self.op in ("broadcast", "reduce"):
            info["root"] = self.params.root
        if self.op == "all_to_all":
            info["skew"] = self.params.skew
        return {"collective": info}


@lru_cache(maxsize=4)
def _xor_inputs(seed: int, n: int, k: int, size: int) -> bytes:
    """The XOR of every rank's input (shared by the ranks of one process)."""
    acc = 0
    for r in range(n):
        acc ^= int.from_bytes(message_data(seed, r, k, size), "big")
    return acc.to_bytes(size, "big")
