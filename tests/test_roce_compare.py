"""``uet-run --transport uet|roce|both`` on the simulator and the §9.1 comparison metrics
(uet/experiments/compare.py; rocev2-and-fabric.md §8.5, §8.9, §9.1; issue 12)."""

from __future__ import annotations

import json
import re

import pytest
from uet.tools.run import main as run_main

from uet.experiments.compare import metrics
from uet.roce.core import timeout_for_rtt
from uet.sim.scenario import simulate

pytestmark = pytest.mark.in_memory  # uet-run --engine sim in this process: virtual time, no socket


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:
    rc = run_main(["--engine", "sim", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_both_runs_the_same_scenario_on_each_transport_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    # the live engine's profile and fabric (the simulator's own default is the datacenter fat tree)
    argv = ("--profile", "realtime", "-t", "default", "--transport", "both", "-w", "incast_victim", "-n", "9")
    rc, out = _run(capsys, *argv, "--size", "16KiB")
    assert rc == 0 and out["ok"] and out["transport"] == "both"
    assert list(out["runs"]) == ["uet", "roce"]
    assert [r["transport"] for r in out["runs"].values()] == ["uet", "roce"]
    for r in out["runs"].values():
        assert all(f["intact"] for f in r["flows"]) and len(r["flows"]) == 8
    m = out["comparison"]["metrics"]
    uet, roce = m["uet"], m["roce"]
    # the lossless class pauses and never trims; UET's lossy class trims and never pauses (§8.1)
    assert roce["pause_frames"] > 0 and roce["paused_s"] > 0 and roce["pause_switches"] >= 1
    assert roce["trims"] == 0 and roce["drops"] == 0 and roce["cnps"] > 0
    assert uet["pause_frames"] == 0 and uet["paused_s"] == 0 and uet["trims"] > 0 and uet["cnps"] == 0
    # UET's resends are the trimmed packets' payloads, counted in bytes
    assert uet["retransmitted_bytes"] > 0 and uet["retx_over_goodput"] > 0
    for x in (uet, roce):
        assert x["goodput_gbps"] > 0 and x["fct_p50_s"] <= x["fct_p99_s"] <= x["fct_max_s"]
        assert x["victim_goodput_gbps"] > 0 and x["victim_slowdown"] >= 1


def test_both_prints_one_table_with_a_column_per_transport(capsys: pytest.CaptureFixture[str]) -> None:
    rc = run_main(["--engine", "sim", "--transport", "both", "-w", "pairs", "-n", "4", "--size", "4KiB"])
    text = capsys.readouterr().out
    assert rc == 0
    header = next(line for line in text.splitlines() if "metric" in line)
    assert "UET" in header and "RoCEv2" in header
    assert "PFC pause frames" in text and "CNPs sent" in text
    assert "uet: all messages intact" in text and "roce: all messages intact" in text


def test_both_prints_a_collectives_busbw_and_a_training_iteration(capsys: pytest.CaptureFixture[str]) -> None:
    """``--transport both`` of the collective workload shows its busbw, of training its iteration."""
    rc = run_main(["--engine", "sim", "--transport", "both", "-w", "collective", "-n", "4", "--size", "16KiB"])
    text = capsys.readouterr().out
    assert rc == 0
    row = next(line for line in text.splitlines() if "collective busbw" in line)
    assert len(re.findall(r"\d+\.\d+", row)) == 2  # one figure per transport
    rc = run_main(["--engine", "sim", "--transport", "both", "-w", "training", "-n", "4", "--workload-set", "pp=2"])
    text = capsys.readouterr().out
    assert rc == 0 and "training iteration" in text and "training exposed communication" in text


def test_a_scenario_file_may_name_its_transport(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "s.toml"
    f.write_text('[run]\nworkload = "pairs"\nendpoints = 4\nmessage_bytes = 4096\ntransport = "roce"\n')
    rc, out = _run(capsys, str(f))
    assert rc == 0 and out["transport"] == "roce" and out["settings"]["transport"] == "roce"
    f.write_text('[run]\ntransport = "tcp"\n')
    assert run_main(["--engine", "sim", str(f)]) == 2
    assert "transport" in capsys.readouterr().err


def test_allreduce_metrics_give_jct_and_bus_bandwidth() -> None:
    flows = [{"flow": r, "bytes": 6 * 1000, "completion_s": 0.001 * (r + 1), "intact": True} for r in range(4)]
    res = {"ok": True, "workload": "allreduce", "flows": flows, "elapsed_s": 0.004, "fct": {}, "fabric": {}}
    res["settings"] = {"message_bytes": 4000}
    m = metrics(res)
    assert m["jct_s"] == 0.004
    # algbw = 4000 B / 4 ms = 8 Mbit/s; busbw = algbw × 2 × 3 / 4
    assert m["busbw_gbps"] == pytest.approx(0.008 * 1.5)
    assert m["goodput_gbps"] == pytest.approx(24_000 * 8 / 0.004 / 1e9)


def test_rc_timeout_scales_with_the_base_rtt() -> None:
    """§8.9: the reference RTO (code 8, 1.05 ms at ≈ 10 µs) × k_t; the lab's 50 µs is code 10."""
    assert timeout_for_rtt(None) == 8 and timeout_for_rtt(14_000) == 8
    assert timeout_for_rtt(50_000) == 10
    assert timeout_for_rtt(1_000_000) == 15


@pytest.mark.parametrize(
    ("profile", "rate", "code"),
    [("datacenter", 100e9, 8), ("datacenter", 1e9, 12), ("lab", 1e9, 11), ("realtime", 1e8, 15)],
)
def test_the_simulators_queue_pairs_take_their_timeout_from_the_path_rtt(profile: str, rate: float, code: int) -> None:
    """Issue 12: the simulator's QPs get the ACK timeout of their fabric's base RTT (§8.9), as
    live runs do — not QpConfig's reference default. At 100 Gb/s the longest path's RTT (≈ 14 µs
    on a fat tree, jumbo frames) is at the reference scale, so the code stays 8."""
    from uet.scenario import Scenario, derive, run_defaults

    run = {**run_defaults("sim"), "endpoints": 8, "profile": profile, "rate_bps": int(rate)}
    assert derive(Scenario("sim", run)).qp.timeout == code


def test_roce_incast_at_100g_is_lossless_with_the_datacenter_headroom() -> None:
    """Issue 12: 142 headroom_overflow drops (go-back-N resent 2.3 MB) before the MMU gave its
    headroom back first; now PFC holds the 8:1 incast without a single drop or resend."""
    res = simulate({"workload": "incast", "endpoints": 9, "transport": "roce"})
    assert res["ok"]
    fab = res["fabric"]
    assert fab["pauses"] > 0 and fab["drops"] == 0
    assert res["endpoint_counters"].get("retransmitted_bytes", 0) == 0
