"""The collective library (uet.workloads.collective, algorithms, schedule, executor) in virtual time:
every collective and algorithm gives the right result on both transports, the ring is pipelined
(a slice's next step never waits for a whole step), the double binary tree is two spanning trees,
the MoE skew is what its docstring says, and the nccl-tests table's figures follow its definitions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from uet.tools.sim import main as sim_main

from uet.sim.scenario import simulate
from uet.workloads import make
from uet.workloads.algorithms import Pipeline, dtree, moe_bytes
from uet.workloads.collective import Collective, busbw_factor
from uet.workloads.schedule import OpKind

CASES: list[tuple[dict[str, Any], int]] = [
    ({"op": "allreduce"}, 4),
    ({"op": "allreduce", "algorithm": "tree"}, 5),
    ({"op": "allreduce", "algorithm": "tree"}, 4),
    ({"op": "allreduce", "algorithm": "hierarchical", "gpus_per_server": 2}, 6),
    ({"op": "reduce_scatter"}, 4),
    ({"op": "all_gather"}, 3),
    ({"op": "broadcast", "root": 1}, 4),
    ({"op": "reduce", "root": 2}, 4),
    ({"op": "all_to_all", "skew": 1.0}, 4),
    ({"op": "send_recv", "stages": 2}, 4),
]


def _run(params: dict[str, Any], n: int, transport: str = "uet", **run: object) -> dict[str, Any]:
    s = {"workload": "collective", "endpoints": n, "message_bytes": 20_000, "transport": transport}
    return simulate({**s, **run, "workload_params": {"slice_bytes": 4096, **params}})


@pytest.mark.parametrize(("params", "n"), CASES, ids=[f"{p.get('op')}-{p.get('algorithm', '')}-{n}" for p, n in CASES])
def test_every_collective_gives_the_right_result(params: dict[str, object], n: int) -> None:
    """Several rounds of slices (20 kB, 4 KiB slices) so the pipelining and credits are exercised;
    every message intact, every rank's result checked (RankReport.check, via the flows' intact)."""
    res = _run(params, n)
    assert res["ok"], res["errors"]
    (row,) = res["collective"]["rows"]
    assert row["ok"] and row["time_us"] > 0


@pytest.mark.parametrize("op", ["allreduce", "all_to_all"])
def test_rocev2_runs_the_same_collectives(op: str) -> None:
    res = _run({"op": op}, 4, transport="roce")
    assert res["ok"], res["errors"]


def test_the_ring_is_pipelined_not_step_synchronous() -> None:
    """Each send waits only for the receive that brought its slice (and, for a round's first send,
    the round ``depth`` back): never for a whole step. Rounds in flight overlap: 16 rounds of 4 KiB
    slices with 4 in flight take less than a third of the time they take one round at a time."""
    wl = make("collective", 4, message_bytes=1 << 16, params={"slice_bytes": 4096, "channels": 1, "depth": 2})
    assert isinstance(wl, Collective)
    ops = wl.schedule(0).ops[0]
    sends = [op for op in ops if op.kind is OpKind.SEND]
    assert len(sends) == 6 * 4  # 2(n - 1) steps × 4 rounds of 4 KiB slices
    assert all(len(op.deps) <= 1 for op in sends)
    assert [len(op.deps) for op in sends[::6]] == [0, 0, 1, 1]  # depth 2: round 2 waits for round 0
    assert all(ops[op.deps[0]].kind is OpKind.RECV for op in sends if op.deps)
    t = {
        d: _run({"slice_bytes": 4096, "channels": 1, "depth": d}, 4, message_bytes=1 << 18)["collective"]["rows"][0]
        for d in (1, 4)
    }
    assert t[4]["time_us"] < t[1]["time_us"] / 3, t


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 12, 16, 33])
def test_double_binary_tree_is_two_spanning_trees(n: int) -> None:
    for tree in dtree(n):
        roots = [r for r in range(n) if tree[r][0] < 0]
        assert len(roots) == 1
        for r in range(n):
            assert all(tree[k][0] == r for k in tree[r][1])  # my children name me their parent
            seen, x = set(), r
            while x >= 0 and x not in seen:  # every rank reaches the root
                seen.add(x)
                x = tree[x][0]
            assert x < 0
    if n >= 4 and n % 2 == 0:  # the mirror: a rank is a leaf in at most one of the two trees
        first, second = dtree(n)
        assert not any(not first[r][1] and not second[r][1] for r in range(n))


def test_moe_skew() -> None:
    assert moe_bytes(4, 1000, 0.0, 1) == [250, 250, 250, 250]
    zipf = moe_bytes(8, 8_000_000, 1.0, 1)
    assert sum(zipf) == 8_000_000
    harmonic = sum(1 / k for k in range(1, 9))
    assert max(zipf) == pytest.approx(8 / harmonic * 1_000_000, rel=1e-6)  # n / H(n) times the mean
    assert sorted(zipf, reverse=True)[1] == pytest.approx(max(zipf) / 2, rel=1e-5)


def test_pipeline_cut() -> None:
    assert Pipeline(2, 1024, 4).cut(8192) == (2, 4)
    assert Pipeline(4, 1024, 4).cut(3) == (3, 1)  # fewer channels than bytes: a byte each


def test_busbw_factors_are_nccl_tests() -> None:
    n = 8
    assert busbw_factor("allreduce", n) == 2 * 7 / 8
    for op in ("reduce_scatter", "all_gather", "all_to_all"):
        assert busbw_factor(op, n) == 7 / 8
    for op in ("broadcast", "reduce", "send_recv"):
        assert busbw_factor(op, n) == 1


def test_sweep_table_json_and_definitions(capsys: pytest.CaptureFixture[str]) -> None:
    """``uet-sim --json`` with a sweep: one row per size (×4 from 4 KiB to 64 KiB); algbw = size /
    time (the slowest rank's), busbw = algbw × 2(n − 1)/n; the flows' times give the row's."""
    argv = ["-w", "allreduce", "-n", "4", "--json", "--workload-set", "min_bytes=4096",
            "--workload-set", "max_bytes=65536", "--workload-set", "factor=4"]  # fmt: skip
    assert sim_main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    rows = res["collective"]["rows"]
    assert [r["size"] for r in rows] == [4096, 16384, 65536]
    assert [r["count"] for r in rows] == [1024, 4096, 16384]
    wl = make("allreduce", 4, message_bytes=65536, params={"min_bytes": 4096, "factor": 4})
    assert isinstance(wl, Collective)
    for k, r in enumerate(rows):
        t = max(f["completion_s"] for f in res["flows"] if wl.size_of[f["flow"]] == k)
        assert r["time_us"] == pytest.approx(t * 1e6, abs=1e-3)
        assert r["algbw_gbps"] == pytest.approx(r["size"] * 8 / t / 1e9, rel=1e-3)
        assert r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * 1.5, rel=1e-3)
    assert rows[-1]["busbw_gbps"] > rows[0]["busbw_gbps"]
    assert sim_main(["-w", "allreduce", "-n", "4"]) == 0 and "busbw (GB/s)" in capsys.readouterr().out  # the table


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="op = 'nope'"):
        make("collective", 4, params={"op": "nope"})
    with pytest.raises(ValueError, match="algorithm = 'tree'"):
        make("collective", 4, params={"op": "broadcast", "algorithm": "tree"})
    with pytest.raises(ValueError, match="gpus_per_server"):
        make("collective", 6, params={"algorithm": "hierarchical", "gpus_per_server": 4})
    with pytest.raises(ValueError, match="use workload collective"):
        make("allreduce", 4, params={"op": "broadcast"})
    assert sim_main(["-w", "collective", "-n", "4", "--workload-set", "op=nope"]) == 2


def test_hierarchical_groups_ranks_by_the_placements_servers() -> None:
    """On a rail fabric the rail placement puts consecutive ranks on one rail (different servers):
    the hierarchical all-reduce's servers are the placement's (Topology.rank_servers), not runs of
    consecutive ranks, and the spec carries them to a live rank's process."""
    from uet.fabric.profiles import load_topology

    from uet.workloads import from_spec

    topo = load_topology("rail")
    wl = make("collective", 8, message_bytes=1 << 14, params={"algorithm": "hierarchical"})
    assert isinstance(wl, Collective)
    servers = topo.rank_servers(topo.placement(8, "rail"))
    assert servers != [[0, 1], [2, 3], [4, 5], [6, 7]]
    wl.place(servers)
    again = from_spec(wl.spec())
    assert isinstance(again, Collective) and wl.servers == servers and again.servers == servers
    res = simulate({"workload": "collective", "endpoints": 8, "topology": "rail", "message_bytes": 1 << 14,
                    "workload_params": {"algorithm": "hierarchical"}})  # fmt: skip
    assert res["ok"] and res["collective"]["gpus_per_server"] == len(servers[0])
