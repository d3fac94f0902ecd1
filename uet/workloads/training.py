"""``training``: one iteration of a transformer's training as a workload — compute and collectives.

From a model (layers, hidden size, sequence length, vocabulary, micro-batch, bytes per parameter
and activation; mixture-of-experts experts and top-k) and a parallel layout (DP × TP × PP × EP,
ZeRO stage, micro-batches) it builds the iteration's dependency graph as one schedule
(:mod:`uet.workloads.schedule`, COMPUTE ops for the passes) and runs it with the collective
library's executor, on any transport and engine:

* **compute**: per layer and micro-batch a forward pass of F = (24 B s h² + 4 B s² h) / TP FLOPs
  (Megatron-LM's count, Narayanan et al. 2021: B micro-batch, s sequence, h hidden; a MoE layer's
  MLP part 16 B s h² counted top-k times), the backward 2F, the logits 2 B s h V / TP on the last
  stage; time = FLOPs / ``gpu_tflops`` (default 400 TFLOP/s: an H100-class GPU's dense BF16 peak is
  about 990, and large trainings reach 40 % of it), in whole nanoseconds (the simulator's grain).
  A rank computes one pass at a time.
* **TP**: two ring all-reduces of B s h activation bytes per layer forward and two backward, over
  the TP group (ranks of one server), each on the critical path as in Megatron-LM;
* **PP**: 1F1B (PipeDream-flush): stage s runs min(PP − s − 1, m) forwards, then alternates one
  forward and one backward, then the remaining backwards; B s h activation bytes to the next stage
  after a forward, as many gradient bytes back after a backward;
* **EP**: per MoE layer an all-to-all of B s h × top-k bytes over the EP group (ranks of one DP
  replica set) before and one after the experts, in both passes;
* **DP**: the stage's gradients (12 h² per dense layer / TP; a MoE layer 4 h² / TP + its local
  experts' 8 h² each) in buckets of ``bucket_bytes`` from the last layer back, each bucket's ring
  all-reduce over the DP group starting once the last micro-batch's backward passed its layers
  (overlapped with the rest of the backward, as PyTorch DDP does). ZeRO (Rajbhandari et al.
  2020; ``zero``) over the DP group: stages 1 and 2 (optimizer states, and gradients, sharded) a
  reduce-scatter per bucket then an all-gather of the updated parameter shards — the same bytes
  as the all-reduce, in two collectives; stage 3 (parameters sharded too) a reduce-scatter per
  bucket and no all-gather after it, but before every layer's forward and backward pass of every
  micro-batch an all-gather of that layer's parameters (label ``zero``), prefetched one layer
  ahead (it starts when the previous layer's pass does), as DeepSpeed does. **Decision**: no
  parameter is kept gathered between micro-batches (DeepSpeed's ``stage3_max_reuse_distance``
  0); every DP-group collective is listed in :attr:`Training.collectives`.

Ranks: logical rank (stage, replica, tp) = stage·DP·TP + replica·TP + tp, placed server by server
on the engine's placement (:meth:`Workload.place`), so a TP group shares a server.

Report: the iteration time (the slowest rank), each rank's compute time, the exposed
communication and, per kind of communication, the time it was in flight, as ``result["training"]``
(the simulator also keeps each rank's op timeline for ``--plot``: ``training_gantt.png``). Both
communication figures are measures of a *union of intervals* (:func:`covered`), never sums, so
concurrent messages count once and neither can exceed the iteration:

* ``comm_s_by_kind``: per kind (TP, PP, DP, EP), the time during which at least one message of
  that kind was in flight on a rank — a send from its start to its completion, a receive from
  posted to applied —, averaged over the ranks;
* ``exposed_comm_s``: on the critical rank (the slowest), the time during which some message was
  in flight and the rank was not computing. Since a rank always has an op in progress until its
  last completes, this is that rank's time minus its compute.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uet.ses.sink import digest
from uet.transport import Transport, error_name
from uet.workloads import algorithms as alg
from uet.workloads.base import Flow, FlowReport, RankReport, Workload, _retransmits, _rx
from uet.workloads.executor import CollectiveFailed, execute
from uet.workloads.schedule import Builder, OpKind, Schedule, compute, split

__all__ = ["Training", "covered"]


Interval = tuple[float, float]


def covered(intervals: Sequence[Interval], minus: Sequence[Interval] = ()) -> float:
    """The measure of the union of ``intervals`` (start, end), less what the union of ``minus``
    covers of it."""
    got = _merged(intervals)
    total = sum(z - a for a, z in got)
    if not minus:
        return total
    cut, j = _merged(minus), 0
    for a, z in got:  # both lists sorted and disjoint: one pass
        while j < len(cut) and cut[j][1] <= a:
            j += 1
        k = j
        while k < len(cut) and cut[k][0] < z:
            total -= min(z, cut[k][1]) - max(a, cut[k][0])
            k += 1
    return total


def _merged(intervals: Sequence[Interval]) -> list[Interval]:
    """The union of ``intervals`` as sorted, disjoint intervals."""
    out: list[Interval] = []
    for a, z in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], z))
        elif z > a:
            out.append((a, z))
    return out


class Training(Workload):
    """See the module docstring."""

    name = "training"

    @dataclass(frozen=True)
    class Params:
        """The model, the layout and the GPU (module docstring)."""

        layers: int = 4
        hidden: int = 256
        seq_len: int = 128
        vocab: int = 1024
        micro_batch: int = 1
        microbatches: int = 4
        bytes_param: int = 2
        bytes_act: int = 2
        experts: int = 0
        topk: int = 2
        dp: int | None = None
        tp: int = 1
        pp: int = 1
        ep: int = 1
        zero: int = 0
        bucket_bytes: int = 25 << 20
        gpu_tflops: float | int = 400.0
        channels: int = 1
        slice_bytes: int = 1 << 20

    params: Params

    def pairs(self) -> list[tuple[int, int]]:
        return []

    def __init__(self, n: int, **kw: Any) -> None:
        super().__init__(n, **{**kw, "messages": 1})  # the schedule says how many messages
        p = self.params
        dp = p.dp or n // (p.tp * p.pp)
        if dp * p.tp * p.pp != n:
            raise ValueError(f"workload training: dp × tp × pp = {dp} × {p.tp} × {p.pp} is not the {n} ranks")
        if p.layers % p.pp or dp % p.ep or (p.experts and p.experts % p.ep) or p.zero not in (0, 1, 2, 3):
            raise ValueError("workload training: pp divides layers, ep divides dp and experts, zero is 0 to 3")
        if min(p.layers, p.hidden, p.seq_len, p.micro_batch, p.microbatches, p.tp, p.pp, p.ep) < 1 or p.gpu_tflops <= 0:
            raise ValueError("workload training: sizes, counts and gpu_tflops must be positive")
        self.dp = dp
        self.pipe = alg.Pipeline(p.channels, p.slice_bytes, 4)
        self.order = list(range(n))  # logical rank -> rank (server by server: place())
        self.timeline: dict[int, list[tuple[str, float, float]]] = {}  # rank -> (what, start, end)
        self._times: dict[int, tuple[float, float]] = {}  # rank -> (its time, its compute)
        self._sends: dict[int, list[tuple[str, float, float]]] = {}  # rank -> its sends (what, start, end)
        self._build()

    def place(self, servers: list[list[int]]) -> None:
        order = [r for s in servers for r in s]
        if sorted(order) == list(range(self.n)) and order != self.order:
            self.order = order
            self._build()

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "servers": [self.order]}

    # -- the graph -------------------------------------------------------------------------------

    def rank(self, stage: int, replica: int, t: int) -> int:
        p = self.params
        return self.order[stage * self.dp * p.tp + replica * p.tp + t]

    def flops(self) -> tuple[float, float, float]:
        """(dense layer forward FLOPs, MoE layer forward FLOPs, logits forward FLOPs) per
        micro-batch and TP rank."""
        p = self.params
        b, s, h = p.micro_batch, p.seq_len, p.hidden
        attention = 8 * b * s * h * h + 4 * b * s * s * h
        mlp = 16 * b * s * h * h
        return (
            (attention + mlp) / p.tp,
            (attention + mlp * p.topk) / p.tp,
            2 * b * s * h * p.vocab / p.tp,
        )

    def _build(self) -> None:
        p = self.params
        n, dp, tp, pp = self.n, self.dp, p.tp, p.pp
        b = Builder(n, 0)
        self._streams = 0
        rate = p.gpu_tflops * 1e12
        dense, moe, logits = self.flops()
        per_stage = p.layers // pp
        act = p.micro_batch * p.seq_len * p.hidden * p.bytes_act
        last: dict[int, int | None] = dict.fromkeys(range(n))  # each rank's last compute op
        before: dict[int, int | None] = dict.fromkeys(range(n))  # and the one before it
        self.collectives: list[tuple[str, str, tuple[int, ...], int]] = []  # DP group: (label, op, ranks, bytes)

        def step(r: int, seconds: float, deps: list[int], label: str) -> int:
            prev = last[r]
            i = compute(b, r, seconds, deps + ([prev] if prev is not None else []), label)
            last[r], before[r] = i, prev
            return i

        def dp_ring(stage: int, t: int, size: int, after: alg.Final, op: str, label: str) -> alg.Final:
            """A ring all-reduce, reduce-scatter or all-gather (``op``) of ``size`` bytes over the DP
            group of (``stage``, TP index ``t``), each rank's first sends after ``after``."""
            members = [self.rank(stage, rep, t) for rep in range(dp)]
            self.collectives.append((label, op, tuple(members), size))
            rs, ag = op != "all_gather", op != "reduce_scatter"
            return alg.ring(b, members, 0, size, self.pipe, after=after, reduce_scatter=rs, all_gather=ag, label=label)

        def gather_params(stage: int, layer: int) -> dict[int, list[int]]:
            """ZeRO-3: the layer's parameters all-gathered over each DP group of the stage before the
            layer's pass, prefetched one layer ahead (each rank's sends after the compute before its
            last, so the gather runs beside the previous layer's pass). {} below ZeRO-3."""
            if p.zero < 3 or dp == 1:
                return {}
            size = max(dp, self.layer_params(layer) * p.bytes_param)
            got: dict[int, list[int]] = {}
            for t in range(tp):
                members = [self.rank(stage, rep, t) for rep in range(dp)]
                after = {r: [x] if (x := before[r]) is not None else [] for r in members}
                got.update(dp_ring(stage, t, size, after, "all_gather", "zero"))
            return got

        def tp_allreduce(stage: int, replica: int, after: dict[int, int]) -> dict[int, list[int]]:
            members = [self.rank(stage, replica, t) for t in range(tp)]
            if tp == 1:
                return {r: [after[r]] for r in members}
            return alg.ring(b, members, 0, act, self.pipe, after={r: [after[r]] for r in members}, label="tp")

        def a2a(stage: int, ready: dict[int, list[int]]) -> dict[int, list[int]]:
            """The all-to-all of every EP group of the stage, each rank's sends after ``ready``."""
            if p.ep == 1:
                return ready
            got: dict[int, list[int]] = {r: [] for r in ready}
            share = split(act * p.topk, p.ep)
            for t in range(tp):
                for e0 in range(0, dp, p.ep):
                    members = [self.rank(stage, e0 + j, t) for j in range(p.ep)]
                    self._streams += 1
                    for i, src in enumerate(members):
                        for d in range(1, p.ep):
                            dst = members[(i + d) % p.ep]
                            off, ln = share[(i + d) % p.ep]
                            _, rcv = b.message(src, dst, off, ln, deps=ready[src], stream=self._streams, label="ep")
                            got[dst].append(rcv)
            return got

        recv_act: dict[tuple[int, int, int], int] = {}  # (stage, rank-in-stage index, mb) -> receive
        recv_grad: dict[tuple[int, int, int], int] = {}
        pp_stream: dict[tuple[int, int], int] = {}
        layer_done: dict[tuple[int, int], int] = {}  # (rank, layer) -> the last micro-batch's backward

        def stage_pass(stage: int, mb: int, forward: bool) -> None:
            """The forward or backward pass of micro-batch ``mb`` on every rank of ``stage``."""
            slots = [(rep, t) for rep in range(dp) for t in range(tp)]
            ready: dict[int, list[int]] = {}
            for k, (rep, t) in enumerate(slots):
                got = (recv_act if forward else recv_grad).get((stage, k, mb))
                ready[self.rank(stage, rep, t)] = [got] if got is not None else []
            layers = range(stage * per_stage, (stage + 1) * per_stage)
            label = "forward" if forward else "backward"
            for layer in layers if forward else reversed(layers):
                flops = moe if p.experts else dense
                if stage == pp - 1 and layer == layers[-1]:
                    flops += logits
                secs = round(flops / rate * (1 if forward else 2) * 1e9) / 1e9  # whole ns (the simulator's grain)
                params = gather_params(stage, layer)
                if p.experts:
                    ready = a2a(stage, ready)  # dispatch the tokens to their experts
                done = {r: step(r, secs, ready[r] + params.get(r, []), label) for r in ready}
                if not forward and mb == p.microbatches - 1:
                    for r, i in done.items():
                        layer_done[(r, layer)] = i
                ready = {}
                for rep in range(dp):
                    ready.update(tp_allreduce(stage, rep, done))
                if p.experts:
                    ready = a2a(stage, ready)  # and combine their outputs
            nxt = stage + 1 if forward else stage - 1
            if 0 <= nxt < pp:
                for k, (rep, t) in enumerate(slots):
                    r, dst = self.rank(stage, rep, t), self.rank(nxt, rep, t)
                    sid = pp_stream.setdefault((r, dst), (1 << 20) + len(pp_stream))
                    _, rcv = b.message(r, dst, 0, act, deps=ready[r], stream=sid, label="pp")
                    (recv_act if forward else recv_grad)[(nxt, k, mb)] = rcv

        # 1F1B per stage: the order of passes; built in rounds so every message's sender exists
        # before its receiver needs it (a stage's forward of mb after the previous stage's)
        orders = []
        for stage in range(pp):
            m = p.microbatches
            warm = min(pp - stage - 1, m)
            seq = [(True, i) for i in range(warm)]
            f, bk = warm, 0
            while bk < m:
                if f < m:
                    seq.append((True, f))
                    f += 1
                seq.append((False, bk))
                bk += 1
            orders.append(seq)
        # build passes in an order consistent with the data dependencies between stages
        pending = [list(o) for o in orders]
        built: set[tuple[int, bool, int]] = set()
        while any(pending):
            progressed = False
            for stage in range(pp):
                while pending[stage]:
                    fw, mb = pending[stage][0]
                    need = (stage - 1, True, mb) if fw else (stage + 1, False, mb)
                    if (fw and stage > 0 or not fw and stage < pp - 1) and need not in built:
                        break
                    if not fw and stage == pp - 1 and (stage, True, mb) not in built:
                        break
                    stage_pass(stage, mb, fw)
                    built.add((stage, fw, mb))
                    pending[stage].pop(0)
                    progressed = True
            if not progressed:
                raise ValueError("workload training: the 1F1B schedule did not close")  # pragma: no cover
        # DP: gradient buckets from the last layer back, overlapped with the backward
        if dp > 1:
            for stage in range(pp):
                layers = list(range(stage * per_stage, (stage + 1) * per_stage))
                grads = {layer: self.layer_params(layer) * p.bytes_param for layer in layers}
                buckets: list[list[int]] = [[]]
                for layer in reversed(layers):
                    if buckets[-1] and sum(grads[x] for x in buckets[-1]) + grads[layer] > p.bucket_bytes:
                        buckets.append([])
                    buckets[-1].append(layer)
                for t in range(tp):
                    members = [self.rank(stage, rep, t) for rep in range(dp)]
                    for bucket in buckets:
                        size = max(dp, sum(grads[x] for x in bucket))
                        after = {r: [layer_done[(r, x)] for x in bucket] for r in members}
                        if p.zero == 0:
                            dp_ring(stage, t, size, after, "allreduce", "dp")
                        else:
                            rs = dp_ring(stage, t, size, after, "reduce_scatter", "dp")
                            if p.zero < 3:  # the updated shards back to every rank (ZeRO-3: next forward's gathers)
                                dp_ring(stage, t, size, rs, "all_gather", "dp")
        self.schedule: Schedule = b.schedule
        self._flows = []
        self._flow_of: dict[tuple[int, int], int] = {}
        for (src, dst), (msgs, nbytes) in sorted(self.schedule.pairs().items()):
            self._flow_of[(src, dst)] = len(self._flows)
            self._flows.append(Flow(len(self._flows), src, dst, msgs, -(-nbytes // msgs)))

    def layer_params(self, layer: int) -> int:
        """Parameters of one layer held by one TP rank (module docstring)."""
        p = self.params
        h = p.hidden
        if p.experts:
            return 4 * h * h // p.tp + (p.experts // p.ep) * 8 * h * h // p.tp
        return 12 * h * h // p.tp

    # -- the run ---------------------------------------------------------------------------------

    def total_bytes(self) -> int:
        return sum(f.messages * f.nbytes for f in self._flows)

    def expected(self, rank: int) -> int:
        return self.schedule.received(rank)

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
        report = report if report is not None else RankReport()
        ops = self.schedule.ops[rank]
        peers = sorted({op.peer for op in ops if op.kind is OpKind.SEND})
        count = dict.fromkeys(peers, 0)
        hashes: dict[int, list[int]] = {q: [] for q in peers}
        rtx0 = {q: _retransmits(ep, addresses[q]) for q in peers}
        trace: list[tuple[str, float, float]] = []
        sends: list[tuple[str, float, float]] = []
        zeros = bytes(max((op.length for op in ops), default=0))

        def on_send(op: Any, payload: bytes | memoryview) -> int:
            i = count[op.peer]
            count[op.peer] = i + 1
            hashes[op.peer].append(digest(payload))
            return (self._flow_of[(rank, op.peer)] << 32) | i

        def on_recv(op: Any, m: Any) -> None:
            report.add_rx(_rx(m, clock() - t0))

        def traced(i: int, start: float, end: float) -> None:
            op = ops[i]
            (sends if op.kind is OpKind.SEND else trace).append((op.label or "comm", start - t0, end - t0))

        t0 = clock()
        err = None
        try:
            await execute(ep, addresses, ops, [zeros, zeros], tag_base=0, data=False, on_send=on_send, on_recv=on_recv,
                          clock=clock, trace=traced)  # fmt: skip
        except CollectiveFailed as e:
            err = e.name
        except Exception as e:  # noqa: BLE001 - the rank's error
            err = error_name(e)
        took = clock() - t0
        self.timeline[rank] = trace
        self._sends[rank] = sends
        for q in peers:
            f = self._flows[self._flow_of[(rank, q)]]
            rtx = _retransmits(ep, addresses[q]) - rtx0[q]
            report.add_flow(
                FlowReport(f.id, ep.address, addresses[q], f.messages * f.nbytes, f.messages, took, rtx, hashes[q], err)
            )
        if err is not None:
            report.error = err
        self._times[rank] = (took, sum(op.seconds for op in ops if op.kind is OpKind.COMPUTE))
        return report

    def result_extra(self, flows: list[dict[str, Any]]) -> dict[str, Any]:
        """``{"training": {...}}`` (module docstring)."""
        times = self._times
        done = [f["completion_s"] for f in flows if f.get("completion_s") is not None]
        iteration = max([t for t, _ in times.values()] + done, default=0.0)
        computes = {r: c for r, (_, c) in times.items()}
        critical = max(times, key=lambda r: times[r][0]) if times else None
        comm: dict[str, float] = {}
        exposed = None
        for r, trace in self.timeline.items():
            busy = trace + self._sends.get(r, [])
            for label in {x for x, _, _ in busy} - {"forward", "backward"}:
                comm[label] = comm.get(label, 0.0) + covered([(a, z) for x, a, z in busy if x == label])
            if r == critical:
                work = [(a, z) for x, a, z in trace if x in ("forward", "backward")]
                exposed = covered([(a, z) for x, a, z in busy if x not in ("forward", "backward")], work)
        p = self.params
        out: dict[str, Any] = {
            "layout": {
                "dp": self.dp,
                "tp": p.tp,
                "pp": p.pp,
                "ep": p.ep,
                "zero": p.zero,
                "microbatches": p.microbatches,
            },
            "iteration_s": round(iteration, 9),
            "compute_s": round(max(computes.values()), 9) if computes else None,
            "exposed_comm_s": round(exposed, 9) if exposed is not None else None,
            "comm_s_by_kind": {k: round(v / max(1, len(self.timeline)), 9) for k, v in sorted(comm.items())},
        }
        if self.timeline:
            out["timeline"] = {
                str(r): [[k, round(a, 9), round(z, 9)] for k, a, z in t] for r, t in sorted(self.timeline.items())
            }
        return {"training": out}
