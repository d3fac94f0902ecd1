"""The §9.2 experiments' scenario files and their point-by-point checks
(tools/roce_experiments.py, uet/experiments/roce.py; rocev2-and-fabric.md §9.2; issue 12), on shrunken messages."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from uet.tools.roce_experiments import default_dir, main

from uet.experiments.roce import CHECKS, EXPERIMENTS, run_experiments
from uet.scenario.read import Given


def test_every_experiment_is_a_32_host_100g_leaf_spine_scenario() -> None:
    for name, file in EXPERIMENTS.items():
        doc = tomllib.loads((Path(default_dir()) / file).read_text())
        run, topo = doc["run"], doc["topology"]
        assert run["profile"] == "datacenter" and run["endpoints"] >= 32, name
        assert topo["kind"] == "leaf_spine" and topo["leaves"] * topo["hosts_per_leaf"] >= 32, name
    assert {c[0] for c in CHECKS} == set(EXPERIMENTS)


def test_incast_pauses_spread_for_roce_and_sprayed_roce_pays_with_go_back_n() -> None:
    names = ["incast_victim", "permutation", "permutation_roce_sprayed"]
    res = run_experiments(names, default_dir(), Given(run={"message_bytes": 32 * 1024, "messages": 1}))
    assert res["ok"]
    held = {c["expected"]: c["held"] for c in res["checks"]}
    assert held["RoCE: PFC pauses (XOFF frames sent)"]
    assert held["UET: no pauses; trims and NACK-driven resends instead"]
    assert held["RoCE forced to spray: sequence-error NAKs and go-back-N resends"]
    roce = res["experiments"]["incast_victim"]["metrics"]["roce"]
    assert roce["drops"] == 0 and roce["paused_s"] > 0
    sprayed = res["experiments"]["permutation_roce_sprayed"]
    assert list(sprayed["metrics"]) == ["roce"] and sprayed["metrics"]["roce"]["retx_over_goodput"] > 0


def test_unknown_experiment_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--only", "nope"]) == 2
    assert "unknown experiment" in capsys.readouterr().err


@pytest.mark.unit_each  # long: a unit of work of its own, started early (tests/conftest.py)
def test_uet_sprays_the_permutation_near_full_bisection() -> None:
    """Issue 12: §9.2's "spraying near full bisection" at the file's own size (UET only, ≈ 2 s).
    With the PDS default (16 consecutive entropies) the switches' mixing ECMP hash loaded the
    busiest uplink at 2.0 × the mean and reached 0.60 of bisection; the scenario now runs UET as
    a UET NIC would here (REPS over 256 entropies, NSCC with the fabric's base RTT): 0.84."""
    res = run_experiments(["permutation"], default_dir(), Given(run={"transport": "uet"}))
    m = res["experiments"]["permutation"]["metrics"]["uet"]
    assert m["ok"] and m["bisection_share"] >= 0.75 and m["uplink_imbalance"] < 1.7
