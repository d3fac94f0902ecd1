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
    ],
)
def test_fault_mistakes_are_one_line_errors(argv: list[str], msg: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-n", "4", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1 and err.startswith("uet-sim: error: ")
