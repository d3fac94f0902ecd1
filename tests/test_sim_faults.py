"""``uet-sim`` with a fault schedule (issue 27): options, the ``[faults]`` table, the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from uet.tools.sim import main


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_link_failure_mid_all_to_all_loses_packets_and_every_flow_completes_intact(
    capsys: pytest.CaptureFixture[str],
) -> None:
    res = _run(
        capsys,
        "-w",
        "all_to_all",
        "-n",
        "8",
        "--messages",
        "2",
        "--fail",
        "pod0-leaf0-pod0-spine0@10us",
        "--detect",
        "20us",
    )
    f = res["faults"]
    assert res["ok"] and all(fl["intact"] for fl in res["flows"]) and len(res["flows"]) == 56
    assert [(e["t_ns"], e["event"]) for e in f["events"]] == [(10_000, "down"), (30_000, "routed_out")]
    assert f["lost_packets"]["link_down"] > 0 and f["lost_bytes"] > 0
    assert f["resent_packets"] >= f["lost_packets"]["link_down"]
    assert f["around"][0]["active_flows"] > 0 and f["around"][0]["t_ns"] == 10_000
    assert all("stall_us" in fl for fl in res["flows"])


def test_the_faults_table_of_a_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sc = tmp_path / "s.toml"
    sc.write_text(
        '[run]\nworkload = "pairs"\nendpoints = 4\nmessages = 1\n'
        '[faults]\nseed = 5\n[[faults.event]]\nkind = "degrade"\nlink = "uplinks:2"\nrate = 0.5\n'
    )
    res = _run(capsys, str(sc))
    assert res["ok"] and [e["event"] for e in res["faults"]["events"]] == ["rate 0.5", "rate 0.5"]


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--fail", "leaf9-spine0@1us"], "no link 'leaf9-spine0' in this topology"),
        (["--degrade", "uplinks:2=0"], "rate kept must be in (0, 1]"),
        (["--fail-switch", "spine0"], "NAME@T[..T2]"),
        (["--detect", "5"], "--detect: '5' is not a time"),
        (["--compare-lb", "bogus"], "--compare-lb: 'bogus': one of default, single"),
        (["--compare-lb", "reps", "--transport", "roce"], "use --transport uet"),
    ],
)
def test_fault_mistakes_are_one_line_errors(argv: list[str], msg: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-n", "4", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and err.startswith("uet-sim: error: ")


def test_compare_lb_runs_each_load_balancer_and_seed(capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(
        capsys, "-w", "permutation", "-n", "8", "--messages", "1", "--degrade", "uplinks:2=0.25",
        "--compare-lb", "single,reps", "--seeds", "1,2",
    )  # fmt: skip
    assert [(r["lb"], r["seed"]) for r in out["rows"]] == [("single", 1), ("single", 2), ("reps", 1), ("reps", 2)]
    assert all(r["ok"] and r["tail_us"] > 0 for r in out["rows"]) and set(out["mean_tail_us"]) == {"single", "reps"}


def test_compare_lb_runs_refuses_a_mistake_with_the_scenario_error() -> None:
    """The library's check (uet.experiments.lb_compare), before any run."""
    from uet.experiments.lb_compare import compare_lb_runs
    from uet.scenario.check import ScenarioError

    s = {"workload": "pairs", "endpoints": 4, "seed": 1}
    with pytest.raises(ScenarioError, match="'none': one of"):
        compare_lb_runs("none", None, s, {}, {}, lambda seed: None, baseline=False)
    with pytest.raises(ScenarioError, match="use --transport uet"):
        compare_lb_runs("reps", None, {**s, "transport": "roce"}, {}, {}, lambda seed: None, baseline=False)


def test_baseline_runs_the_same_scenario_without_the_faults(capsys: pytest.CaptureFixture[str]) -> None:
    res = _run(capsys, "-w", "pairs", "-n", "4", "--messages", "1", "--degrade", "uplinks:4=0.1", "--baseline")
    assert res["baseline"]["ok"] and len(res["baseline"]["completion_s"]) == 2
    assert res["fct"]["max_s"] > res["baseline"]["fct"]["max_s"]


def test_fault_plots_draw_throughput_around_the_failure(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from uet.fabric.model.faults import FaultConfig, FaultEvent

    from uet.sim.fault_plots import fault_plots
    from uet.sim.scenario import simulate

    faults = FaultConfig(20_000, events=[FaultEvent("down", "pod0-leaf0-pod0-spine0", 3_000)])
    res = simulate({"workload": "all_to_all", "endpoints": 4, "messages": 1}, timeline=True, faults=faults)
    assert res["ok"] and res["fault_series"]["total"] and res["fault_series"]["flows"]
    res["baseline"] = {"completion_s": [f["completion_s"] for f in res["flows"]]}
    paths = fault_plots(res, str(tmp_path))
    assert [Path(p).name for p in paths] == ["fault_throughput.png", "fct_faults.png"]
    assert all(Path(p).stat().st_size > 0 for p in paths)
