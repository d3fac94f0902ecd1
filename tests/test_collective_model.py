"""The simulated size sweeps of the collective library against their alpha-beta models
(uet.workloads.alphabeta, docs/collectives.md): within 10 % at every size, 1 KiB to 1 MiB, on a
small fabric — four (or eight) leaves of one host each under two spines, 100 Gb/s, 1 µs links —
in virtual time. The model's parameters come from the run's derived settings (rate, delay,
payload), not from the run's times.

The models share every link without loss (max-min fairly). That holds on the trimming fabric for
every algorithm whose senders never converge on one host; the double binary tree converges three
senders on each interior node by design, and the fixed-window transport loses there at 1 MiB
(docs/collectives.md, "Why the tree fell behind its model at 1 MiB"): its cases run on the same
fabric with the data class lossless (PFC), where the link sharing the model assumes holds, and on
the trimming fabric with RCCC granting idle senders credit ahead (``cc_params.idle_credit``), whose
receivers bound the credit each sender holds unspent (uet.cc.rccc) — 4 ranks; on 8 the tree is
still 10.6 % behind at 1 MiB there."""

from __future__ import annotations

import os
from typing import Any

import pytest

from uet.scenario.model import Scenario, run_defaults
from uet.sim.scenario import simulate
from uet.workloads import make
from uet.workloads.alphabeta import Path, model_time, rail_paths
from uet.workloads.collective import Collective

TOPOLOGY = {"kind": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 1}
SWEEP = {"min_bytes": 1024, "max_bytes": 1 << 20, "factor": 4}
#: the switches' data class (TC0) lossless: PFC pauses the senders instead of trimming
LOSSLESS: dict[str, Any] = {"switch": {"tcs": {"0": {"lossless": True, "limit": None}}}}
TREE = {"op": "allreduce", "algorithm": "tree"}
#: RCCC with idle senders granted credit ahead on the NIC path too (uet.cc.rccc.CreditScheduler)
RCCC: dict[str, Any] = {"pds": {"cc": "rccc", "cc_params": {"idle_credit": True}}}
CASES: list[tuple[dict[str, Any], int, dict[str, Any], dict[str, Any]]] = [
    ({"op": "allreduce"}, 4, {}, {}),
    ({"op": "allreduce", "algorithm": "hierarchical", "gpus_per_server": 2}, 4, {}, {}),
    (TREE, 4, LOSSLESS, {}),
    (TREE, 8, LOSSLESS, {}),
    (TREE, 4, {}, RCCC),
    ({"op": "reduce_scatter"}, 4, {}, {}),
    ({"op": "broadcast"}, 4, {}, {}),
    ({"op": "all_to_all"}, 4, {}, {}),
    ({"op": "send_recv"}, 4, {}, {}),
]


def _sweep(
    params: dict[str, Any],
    n: int,
    sweep: dict[str, int],
    fabric: dict[str, Any] | None = None,
    endpoint: dict[str, Any] | None = None,
) -> list[tuple[int, float, float]]:
    """(size, simulated s, modelled s) per size, on n leaves of one host each (``fabric``: more
    keys of the topology table; ``endpoint``: the endpoint table)."""
    p = {**params, **sweep}
    topo = {**TOPOLOGY, "leaves": n, **(fabric or {})}
    run = {"workload": "collective", "endpoints": n, "message_bytes": 1 << 20, "workload_params": p}
    res = simulate(run, topo, endpoint)
    assert res["ok"], res["errors"]
    if fabric:
        assert res["fabric"]["trims"] == 0
    wl = make("collective", n, message_bytes=1 << 20, params=p)
    assert isinstance(wl, Collective)
    path = Path.of_run(res, links=4)  # every pair of ranks: host, leaf, spine, leaf, host
    return [
        (r["size"], r["time_us"] / 1e6, model_time(wl.op, wl.algorithm, n, r["size"], path, wl.pipe, gpus=wl.gpus))
        for r in res["collective"]["rows"]
    ]


@pytest.mark.parametrize(
    ("params", "n", "fabric", "endpoint"),
    CASES,
    ids=[
        f"{p['op']}-{p.get('algorithm', '')}-{n}{'-lossless' if f else ''}{'-rccc' if e else ''}"
        for p, n, f, e in CASES
    ],
)
def test_sweep_matches_its_model_within_10_percent(
    params: dict[str, Any], n: int, fabric: dict[str, Any], endpoint: dict[str, Any]
) -> None:
    rows = _sweep(params, n, SWEEP, fabric, endpoint)
    assert len(rows) == 6
    for size, sim, model in rows:
        assert sim == pytest.approx(model, rel=0.10), (size, sim, model)


def test_double_tree_matches_its_model_up_to_256_kib_on_the_trimming_fabric() -> None:
    """On the trimming fabric too, up to 256 KiB (1.001 to 1.012). At 1 MiB every slice of the
    tree is in flight at once and three senders' fixed windows meet on an interior node's
    downlink, more than its queue holds: the transport trims and falls 17-20 % behind the
    lossless sharing the model assumes (docs/collectives.md); lossless, it follows the model at
    every size (the tree's CASES)."""
    for size, sim, model in _sweep(TREE, 4, {**SWEEP, "max_bytes": 1 << 18}):
        assert sim == pytest.approx(model, rel=0.10), (size, sim, model)


#: the issue's setting: 8 servers × 8 GPUs, rail-optimised, 400 Gb/s NICs, 8 spines
RAIL64 = {"kind": "rail", "rails": 8, "groups": 1, "hosts_per_leaf": 8, "spines": 8}
RUN64 = {"workload": "collective", "endpoints": 64, "rate_bps": 400_000_000_000, "message_bytes": 1 << 22}


def _on_64_gpus(algorithm: str) -> tuple[dict[str, Any], Collective, Path, Path, list[int]]:
    """The all-reduce ``algorithm`` on the issue's setting (``RAIL64``, the default scale-up
    domain) from 64 KiB to 4 MiB, check = false: the run's result, the workload, the NIC path
    along a rail (GPU, rail leaf, GPU), the scale-up path (GPU, the server's scale-up switch, GPU)
    and each rank's host, all from the run's settings, topology and placement."""
    p = {"op": "allreduce", "algorithm": algorithm, "check": False, **SWEEP, "min_bytes": 1 << 16, "max_bytes": 1 << 22}
    res = simulate({**RUN64, "workload_params": p}, RAIL64)
    assert res["ok"], res["errors"]
    assert len(res["collective"]["rows"]) == 4
    wl = make("collective", 64, message_bytes=1 << 22, params=p)
    assert isinstance(wl, Collective)
    scn = Scenario("sim", {**run_defaults("sim"), **RUN64}, RAIL64, {})
    topo = scn.fabric_topology()
    nic = Path.of_run(res, links=2)
    su = topo.scale_up
    return res, wl, nic, Path(su.rate_bps, su.delay_ns, 2, nic.payload, nic.overhead), scn.hosts(topo)


@pytest.mark.skipif(not os.environ.get("UET_HEAVY_TESTS"), reason="about 35 s of CPU: set UET_HEAVY_TESTS=1")
def test_double_tree_on_64_gpus_matches_its_model() -> None:
    """The issue's setting and the double binary tree from 64 KiB to 4 MiB (check = false):
    within 10 % of its model at every size with the defaults — RCCC with idle credit, the derived
    CC of a trimming rail fabric (docs/collectives.md: 0.992 to 1.018). The model runs
    the tree's schedule on each pair's own path — the scale-up link between GPUs of one server
    (the rail placement puts ranks r and r + 8 on one server), 2 links along a rail, 4 between
    rails."""
    res, wl, nic, scale_up, hosts = _on_64_gpus("tree")
    paths = rail_paths(hosts, 8, nic, scale_up)
    for r in res["collective"]["rows"]:
        model = model_time("allreduce", "tree", 64, r["size"], nic, wl.pipe, paths=paths)
        assert r["time_us"] / 1e6 == pytest.approx(model, rel=0.10), (r["size"], r["time_us"], model)


@pytest.mark.skipif(not os.environ.get("UET_HEAVY_TESTS"), reason="about 35 s of CPU: set UET_HEAVY_TESTS=1")
def test_hierarchical_on_64_gpus_matches_its_model() -> None:
    """The issue's setting — 8 servers × 8 GPUs, rail-optimised, 400 Gb/s NICs, 8 spines, the
    default scale-up domain (3.6 Tb/s, 250 ns) — and the hierarchical all-reduce from 64 KiB to
    4 MiB: within 10 % of its model at every size (docs/collectives.md: 0.96 to 1.03)."""
    res, wl, path, scale_up, _ = _on_64_gpus("hierarchical")
    assert res["fabric"]["trims"] == 0
    for r in res["collective"]["rows"]:
        model = model_time("allreduce", "hierarchical", 64, r["size"], path, wl.pipe, scale_up=scale_up, gpus=8)
        assert r["time_us"] / 1e6 == pytest.approx(model, rel=0.10), (r["size"], r["time_us"], model)
