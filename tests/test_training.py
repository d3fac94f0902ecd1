"""The training-iteration workload (uet.workloads.training): with an infinitely fast network (an
in-memory transport that delivers every message the instant it is sent, on the simulator's
virtual-time loop) the iteration time is exactly the compute on the critical path of its
dependency graph; on the simulated fabric it runs on both transports and reports its phases."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from uet.fabric.model import Fabric
from uet.fabric.topology import Topology

from uet.sim.engine import Engine
from uet.sim.loop import VirtualTimeLoop
from uet.sim.scenario import simulate
from uet.workloads import make
from uet.workloads.schedule import OpKind
from uet.workloads.training import Training


def _training(n: int, **kw: Any) -> Training:
    wl = make("training", n, **kw)
    assert isinstance(wl, Training)
    return wl


@dataclass
class _Message:
    data: bytes | memoryview
    source: str
    tag: int | None
    header_data: int | None

    @property
    def nbytes(self) -> int:
        return len(self.data)


class InstantNetwork:
    """Endpoints whose sends arrive, and complete, in the instant they are made."""

    def __init__(self, n: int) -> None:
        self.addresses = [f"rank{i}" for i in range(n)]
        self.boxes: dict[str, dict[tuple[str, int | None], Any]] = {a: {} for a in self.addresses}

    def endpoint(self, i: int) -> Any:
        net, me = self, self.addresses[i]

        class Ep:
            address = me
            counters: dict[str, int] = {}

            async def send(
                self, peer: str, data: Any, *, tag: int | None = None, header_data: int | None = None
            ) -> None:
                box = net.boxes[peer]
                key = (me, tag)
                waiter = box.pop(key, None)
                m = _Message(data, me, tag, header_data)
                if isinstance(waiter, asyncio.Future):
                    waiter.set_result(m)
                else:
                    box[key] = m

            async def recv(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Any:
                box = net.boxes[me]
                key = (source or "", tag)
                got = box.pop(key, None)
                if got is not None:
                    return got
                f = box[key] = asyncio.get_running_loop().create_future()
                return await f

        return Ep()


def _run_instant(wl: Any) -> list[Any]:
    net = InstantNetwork(wl.n)
    loop = VirtualTimeLoop(Engine(Fabric(Topology.builtin("default"))))

    async def main() -> list[Any]:
        return await asyncio.gather(*(wl.run(i, net.endpoint(i), net.addresses) for i in range(wl.n)))

    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def critical_compute(wl: Any) -> float:
    """The longest path through the iteration's graph, COMPUTE ops weighing their seconds and
    every message nothing: a receive ends when both its own dependencies and its send's did."""
    ops = wl.schedule.ops
    finish: dict[tuple[int, int], float] = {}
    sends = {
        (r, op.peer, op.tag): i
        for r, rank_ops in enumerate(ops)
        for i, op in enumerate(rank_ops)
        if op.kind is OpKind.SEND
    }

    def end(r: int, i: int) -> float:
        key = (r, i)
        if key not in finish:
            op = ops[r][i]
            t = max((end(r, d) for d in op.deps), default=0.0)
            if op.kind is OpKind.RECV:
                t = max(t, end(op.peer, sends[(op.peer, r, op.tag)]))
            finish[key] = t + (op.seconds if op.kind is OpKind.COMPUTE else 0.0)
        return finish[key]

    import sys

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100_000))
    return max(end(r, i) for r in range(len(ops)) for i in range(len(ops[r])))


LAYOUTS = [
    {"pp": 4, "microbatches": 6},  # a pure pipeline: 1F1B bubbles
    {"pp": 2, "tp": 2, "microbatches": 3, "layers": 4},
    {"pp": 2, "experts": 4, "ep": 2, "zero": 1, "microbatches": 3},
    {"pp": 2, "tp": 2, "zero": 3, "microbatches": 3, "layers": 4},
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=["pp4", "pp2-tp2", "pp2-moe-zero1", "pp2-tp2-zero3"])
def test_compute_only_iteration_is_the_critical_path_exactly(layout: dict[str, Any]) -> None:
    wl = _training(8 if layout.get("pp") == 2 else 4, params={"gpu_tflops": 1.0, **layout})
    reports = _run_instant(wl)
    assert not any(r.error for r in reports)
    took = max(t for t, _ in wl._times.values())
    assert took == pytest.approx(critical_compute(wl), rel=0, abs=1e-12)  # whole nanoseconds each


def test_pure_pipeline_matches_the_1f1b_formula() -> None:
    """pp stages of one layer each, m micro-batches, the last stage also computing the logits
    (the slowest): the first micro-batch's forward down pp − 1 stages, then the last stage's m
    forwards and backwards back to back, then the last gradient up pp − 1 stages:
    (pp − 1)(t_f + t_b) + m (t_f' + t_b'), each pass in whole nanoseconds as the workload counts it."""
    pp, m = 4, 5
    wl = _training(4, params={"pp": pp, "layers": pp, "microbatches": m, "gpu_tflops": 1.0})
    _run_instant(wl)
    dense, _, logits = wl.flops()

    def ns(flops: float) -> float:
        return round(flops / 1e12 * 1e9) / 1e9

    want = (pp - 1) * (ns(dense) + ns(2 * dense)) + m * (ns(dense + logits) + ns(2 * (dense + logits)))
    assert max(t for t, _ in wl._times.values()) == pytest.approx(want, rel=0, abs=1e-12)


@pytest.mark.parametrize("transport", ["uet", "roce"])
def test_iteration_on_the_fabric(transport: str) -> None:
    params = {"pp": 2, "tp": 2, "microbatches": 2, "hidden": 64, "seq_len": 32, "vocab": 256}
    res = simulate({"workload": "training", "endpoints": 8, "transport": transport, "workload_params": params})
    assert res["ok"], res["errors"]
    tr = res["training"]
    assert tr["iteration_s"] > tr["compute_s"] > 0
    assert 0 < tr["exposed_comm_s"] < tr["iteration_s"]
    assert len(tr["timeline"]) == 8  # per rank: (what, start, end), for the Gantt chart
    assert set(tr["comm_s_by_kind"]) == {"dp", "pp", "tp"}


def test_covered_is_the_measure_of_a_union() -> None:
    from uet.workloads.training import covered

    assert covered([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.75)]) == 4.0  # overlaps count once
    assert covered([(0.0, 4.0), (6.0, 9.0)], [(1.0, 2.0), (3.0, 7.0), (8.5, 20.0)]) == 3.5
    assert covered([]) == 0.0 and covered([(1.0, 1.0)]) == 0.0


def test_per_kind_communication_is_a_union_and_never_exceeds_the_iteration() -> None:
    """An all-to-all posts its receives at once, so its waits overlap: summed they exceeded the
    iteration; as a union of intervals each kind's figure, and the exposed communication, is at
    most the iteration, and the exposed communication is the critical rank's time less its
    compute (a rank always has an op in progress)."""
    wl = _training(8, params={"experts": 8, "ep": 8, "microbatches": 2, "gpu_tflops": 1.0})
    net = InstantNetwork(wl.n)
    loop = VirtualTimeLoop(Engine(Fabric(Topology.builtin("default"))))

    def start(i: int) -> None:
        asyncio.ensure_future(wl.run(i, net.endpoint(i), net.addresses))

    async def main() -> None:
        for i in range(wl.n):  # each rank starts 5 µs after the previous: receives wait for late senders
            asyncio.get_running_loop().call_later(5e-6 * i, start, i)
        await asyncio.sleep(1.0)

    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    tr = wl.result_extra([])["training"]
    summed = sum(z - a for t in wl.timeline.values() for x, a, z in t if x == "ep") / wl.n
    assert summed > tr["iteration_s"]  # what the sum of concurrent waits gave
    assert 0 < tr["comm_s_by_kind"]["ep"] <= tr["iteration_s"]
    critical = max(wl._times, key=lambda r: wl._times[r][0])
    took, compute_s = wl._times[critical]
    assert tr["exposed_comm_s"] == pytest.approx(took - compute_s, abs=1e-9)


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
def test_zero_stages_generate_their_dp_collectives_exactly(zero: int) -> None:
    """DP 4 × PP 2, 2 layers per stage of 12 h² parameters (h = 64: 98,304 bytes each), buckets
    of one layer, 3 micro-batches. ZeRO 0: one all-reduce per bucket; 1 and 2: a reduce-scatter
    and an all-gather of the updated parameters; 3: a reduce-scatter per bucket and, before every
    layer's forward and backward pass of every micro-batch, an all-gather of its parameters. A
    ring collective of S bytes on 4 ranks makes each rank send 3/4 S (reduce-scatter, all-gather)
    or 3/2 S (all-reduce)."""
    layer = 12 * 64 * 64 * 2
    wl = _training(8, params={"pp": 2, "layers": 4, "hidden": 64, "microbatches": 3, "zero": zero,
                                     "bucket_bytes": layer})  # fmt: skip
    groups = [(0, 1, 2, 3), (4, 5, 6, 7)]
    grads = {0: [("allreduce", layer)], 1: [("reduce_scatter", layer), ("all_gather", layer)]}
    grads[2], grads[3] = grads[1], [("reduce_scatter", layer)]
    want = sorted(("dp", op, g, size) for g in groups for _ in range(2) for op, size in grads[zero])
    if zero == 3:
        want += sorted(("zero", "all_gather", g, layer) for g in groups for _ in range(2 * 2 * 3))
    assert sorted(wl.collectives) == sorted(want)
    per_rank = {"dp": sum(2 if op == "allreduce" else 1 for op, _ in grads[zero]) * 2 * layer * 3 // 4}
    per_rank["zero"] = 2 * 2 * 3 * layer * 3 // 4 if zero == 3 else 0
    for r, ops in enumerate(wl.schedule.ops):
        sent = {k: sum(op.length for op in ops if op.kind is OpKind.SEND and op.label == k) for k in per_rank}
        assert sent == per_rank, r
