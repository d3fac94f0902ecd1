"""Differential test: one workload and seed on FepCores in the simulator and on asyncio endpoints
over UDP. The same messages must arrive intact and every operation must have the same result."""

from __future__ import annotations

import asyncio
from typing import Any

from uet.fabric.model import Fabric
from uet.fabric.profiles import load_topology

from uet.endpoint import Endpoint, EndpointConfig
from uet.fep import FepConfig, FepCore
from uet.sim import Engine, SimEndpoint, VirtualTimeLoop
from uet.transport import OpResult, Transport, outcome
from uet.wire.ses import AmoOp, AmoType
from uet.workloads import make
from uet.workloads.report import summarize

N = 4
SEED = 7


async def script(eps: list[Any]) -> tuple[list[dict[str, Any]], list[OpResult]]:
    """Run on either engine: an all-to-all workload, then RMA and atomics through the contract."""
    assert all(isinstance(ep, Transport) for ep in eps)
    regions = [bytearray(bytes([r]) * 64 + bytes(64)) for r in range(N)]
    for r, ep in enumerate(eps):
        ep.register(regions[r], key=100 + r)
    addrs = [ep.address for ep in eps]
    wl = make("all_to_all", N, message_bytes=9000, messages=2, seed=SEED)
    reports = await asyncio.gather(*(wl.run(i, ep, addrs) for i, ep in enumerate(eps)))
    a = eps[0]
    ops = [
        await outcome(a.write(addrs[1], 101, 0, b"hello")),
        await outcome(a.read(addrs[1], 101, 0, 8)),
        await outcome(a.atomic(addrs[2], 102, 64, AmoOp.SUM, AmoType.UINT64, 5, fetch=True)),
        await outcome(a.atomic(addrs[2], 102, 64, AmoOp.SUM, AmoType.UINT64, 7, fetch=True)),
        await outcome(a.read(addrs[2], 102, 64, 8)),
        await outcome(a.read(addrs[3], 999, 0, 8)),  # unknown key
        await outcome(a.read(addrs[3], 103, 120, 64)),  # beyond the region
        await outcome(a.send(addrs[1], b"tagged", tag=42)),
        await outcome(eps[1].recv(tag=42)),
    ]
    ops[-1] = OpResult(ops[-1].ok, bytes(ops[-1].value.data) if ops[-1].ok else None, ops[-1].error)
    return [r.as_dict() for r in reports], ops


def _received(reports: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(
        (m["flow"], m["index"], m["src"].split(".")[-1] != "", m["bytes"], m["crc32"]) for r in reports for m in r["rx"]
    )


async def _live() -> tuple[list[dict[str, Any]], list[OpResult], list[str]]:
    addrs = [f"127.0.93.{i + 1}" for i in range(N)]
    eps = [await Endpoint.open(a, config=EndpointConfig(seed=SEED)) for a in addrs]
    try:
        reports, ops = await asyncio.wait_for(script(eps), 60)
    finally:
        for ep in eps:
            await ep.close()
    return reports, ops, addrs


def _sim() -> tuple[list[dict[str, Any]], list[OpResult], list[str]]:
    topo = load_topology({"kind": "fat_tree", "hosts": N}, profile="datacenter", rate_bps=100_000_000_000)
    fab = Fabric(topo, seed=SEED)
    eng = Engine(fab)
    cfg = FepConfig(seed=SEED)
    eps = [
        SimEndpoint(eng, eng.attach(i, FepCore(fab.hosts[i].ip, job=0, pid=0, config=cfg, seed=i))) for i in range(N)
    ]
    loop = VirtualTimeLoop(eng)
    try:
        reports, ops = loop.run_until_complete(script(eps))
    finally:
        loop.close()
    return reports, ops, [ep.address for ep in eps]


def test_same_messages_and_same_results_live_and_simulated() -> None:
    live_reports, live_ops, live_addrs = asyncio.run(_live())
    sim_reports, sim_ops, sim_addrs = _sim()
    wl = make("all_to_all", N, message_bytes=9000, messages=2, seed=SEED)
    assert summarize(wl, live_addrs, live_reports)["ok"]
    assert summarize(wl, sim_addrs, sim_reports)["ok"]
    # the same messages (flow, index, length, digest) arrived at the same ranks
    assert _received(live_reports) == _received(sim_reports)
    for lr, sr in zip(live_reports, sim_reports, strict=True):
        assert sorted(m["crc32"] for m in lr["rx"]) == sorted(m["crc32"] for m in sr["rx"])
    assert live_ops == sim_ops
    assert live_ops[1] == OpResult(True, b"hello\x01\x01\x01")
    assert live_ops[2:5] == [OpResult(True, 0), OpResult(True, 5), OpResult(True, (12).to_bytes(8, "little"))]
    assert not live_ops[5].ok and live_ops[5].error == "BAD_MKEY"
    assert not live_ops[6].ok
    assert live_ops[8] == OpResult(True, b"tagged")


def test_a_case_whose_cpu_did_not_keep_up_says_so_above_the_table(monkeypatch, capsys) -> None:
    """uet-bench differential: a live run that was short of CPU is named above the figures, not only
    marked in the table's dilation column."""
    import argparse

    from uet.tools import differential

    from uet.experiments.differential import judge

    fct = {"p50_s": 0.01, "p99_s": 0.012}
    short = {"kept_up": False, "why": ["endpoint processes woke 60 µs late (p99, virtual; more than 0.3 frame times)"]}
    live = {"uet": {"ok": True, "fct": fct, "dilation": {"factor": 194.6, "verdict": short}}}
    sim = {"uet": {"ok": True, "fct": fct}}
    case = {"workload": "allreduce", "endpoints": 8, "live": live, "sim": sim, "bar": judge(live, sim)}
    monkeypatch.setattr(differential, "run_case", lambda *a, **k: case)
    ns = argparse.Namespace(only="allreduce", messages=None, size=None, dilation="auto", json=False)
    differential._run(ns)
    out = capsys.readouterr().out
    note = out.index("allreduce 8: UET: the CPU did NOT keep up: endpoint processes woke 60 µs late")
    assert note < out.index("FCT p50 ms live") and "(CPU" in out  # the column keeps its mark (may wrap)


def test_uet_bench_differential_refuses_settings_the_scenario_model_refuses(capsys) -> None:
    """uet-bench differential: settings the scenario model refuses (uet.experiments.differential.run_case
    raises ScenarioError before any process starts) are one usage line, exit 2."""
    from uet.tools.bench import main

    assert main(["differential", "--only", "incast", "--messages", "2000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("uet-bench: error: ") and "messages" in err, err


def test_uet_bench_differential_reports_a_failed_live_run_in_one_line(monkeypatch, capsys) -> None:
    """uet-bench differential: a live run that cannot be carried out (the library's LiveRunError,
    from the live engine's RunError) is one ``failed`` line, exit 1, no traceback."""
    from uet.tools.bench import main

    import uet.live.runs
    from uet.live.process import RunError

    async def live_runs(*a: Any, **k: Any) -> dict[str, dict[str, Any]]:
        raise RunError("uet: the fabric process exited (status 1) during the run")

    monkeypatch.setattr(uet.live.runs, "live_runs", live_runs)
    assert main(["differential", "--only", "incast"]) == 1
    err = capsys.readouterr().err
    assert err == "uet-bench: failed: uet: the fabric process exited (status 1) during the run\n", err
