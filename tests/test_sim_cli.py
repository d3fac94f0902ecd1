"""``uet-sim`` and ``uet-run --engine sim``: the same scenario, tables or JSON, deterministic."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.processes  # uet-sim and uet-run --engine sim children, no network (tests/conftest.py)

SIM = [sys.executable, "-m", "uet.tools.sim"]
RUN = [sys.executable, "-m", "uet.tools.run"]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_json_is_byte_identical_for_one_seed(tmp_path) -> None:
    sc = tmp_path / "a2a.toml"
    sc.write_text(
        """
[run]
workload = "all_to_all"
endpoints = 6
message_bytes = 30000
messages = 2
seed = 4

[topology]
kind = "fat_tree"
[topology.switch.lb]
mode = "spray_rr"
"""
    )
    a = _run([*SIM, str(sc), "--json"])
    b = _run([*SIM, str(sc), "--json"])
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    r = json.loads(a.stdout)
    assert r["ok"] and r["engine"] == "sim" and len(r["flows"]) == 30 and "timing" not in r
    assert r["topology"]["kind"] == "fat_tree" and r["link_rate_bps"] == 100_000_000_000
    assert r["fct"]["flows"] == 30 and r["fct"]["slowdown_p50"] >= 1.0
    t = json.loads(_run([*SIM, str(sc), "--json", "--timing"]).stdout)["timing"]
    assert t["cpu_s"] > 0 and t["packet_hops_per_cpu_s"] > 0


def test_tables_plots_and_rate(tmp_path) -> None:
    r = _run([*SIM, "-w", "incast", "-n", "4", "--size", "64KiB", "--messages", "1", "--rate", "400G",
              "--plot", str(tmp_path)])  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "all messages intact" in r.stdout and "400 Gb/s links" in r.stdout and "packet-hops" in r.stdout
    names = ["fct_cdf.png", "host_rx.png", "host_tx.png", "queue_depth.png", "throughput.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_sim_plots_draw_thresholds_busiest_ports_and_host_nics(monkeypatch, tmp_path) -> None:
    """uet-sim's figures come from uet-fabric's plot functions (ECN lines, "busiest N of M",
    no empty axes) on a microsecond axis, plus the host NICs' receive and transmit rates."""
    import uet.fabric.telemetry_io as tio

    from uet.sim.plots import write_plots
    from uet.sim.scenario import simulate

    drawn: list[tuple] = []
    plot, throughput = tio.plot, tio.throughput

    def spy_plot(records, outdir, **kw):
        drawn.append(("plot", kw["unit"], sorted(kw["thresholds"] or {})))
        return plot(records, outdir, **kw)

    def spy_tp(ports, outdir, name, title, **kw):
        drawn.append((name, kw["unit"], len(ports)))
        return throughput(ports, outdir, name, title, **kw)

    monkeypatch.setattr("uet.sim.plots.plot", spy_plot)
    monkeypatch.setattr("uet.sim.plots.throughput", spy_tp)
    res = simulate({"workload": "incast", "endpoints": 12, "message_bytes": 65536, "messages": 1}, timeline=True)
    paths = write_plots(res, str(tmp_path))
    (_, unit, lines) = next(d for d in drawn if d[0] == "plot")
    assert unit == "µs" and {"ECN kmin tc0", "ECN kmax tc0"} <= set(lines)
    assert ("host_rx.png", "µs", 12) in drawn and ("host_tx.png", "µs", 12) in drawn  # data one way, ACKs back
    assert sorted(os.path.basename(p) for p in paths) == [
        "fct_cdf.png", "host_rx.png", "host_tx.png", "queue_depth.png", "throughput.png",
    ]  # fmt: skip
    q = [r for r in res["timeline"] if r["event"] == "queue_depth"]
    last: dict[tuple, int] = {}
    for r in q:
        last[(r["node"], r["port"], r["tc"])] = r["bytes"]
    assert q and all(b == 0 for b in last.values())  # every queue's curve ends drained
    assert write_plots({"flows": [], "timeline": [], "workload": "x", "endpoints": 2}, str(tmp_path / "e")) == []


def test_usage_errors_are_one_line_and_exit_2(tmp_path) -> None:
    for args in (["--workload", "nope"], ["--endpoints", "1"], [str(tmp_path / "missing.toml")], ["--bogus"]):
        r = _run([*SIM, *args])
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[endpoint]\nnot_a_field = 1\n")
    r = _run([*SIM, str(bad)])
    assert r.returncode == 2 and "not_a_field" in r.stderr
    v = _run([*SIM, "--version"])
    assert v.returncode == 0 and v.stdout.startswith("uet-sim ")
    h = _run([*SIM, "--help"])
    assert h.returncode == 0 and "--seed" in h.stdout


def test_uet_run_engine_sim_runs_the_same_scenario() -> None:
    r = _run([*RUN, "--workload", "all_to_all", "-n", "6", "--messages", "1", "--size", "8KiB", "--engine", "sim",
              "--json"])  # fmt: skip
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["ok"] and res["engine"] == "sim" and len(res["flows"]) == 30
    # the simulator's defaults, as uet-sim has them (issue 23: the same run for the same arguments)
    assert res["link_rate_bps"] == 100_000_000_000 and res["settings"]["profile"] == "datacenter"
    assert res["settings"]["workload"] == "all_to_all"


def test_uet_run_engine_sim_refuses_live_only_options(tmp_path) -> None:
    r = _run([*RUN, "--engine", "sim", "--telemetry", str(tmp_path / "t.jsonl")])  # --pcap works on both engines
    assert r.returncode == 2 and "live engine only" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_ctrl_c_prints_the_flows_finished_so_far_and_exits_130(monkeypatch, capsys) -> None:
    """Ctrl-C in the middle of a run (a KeyboardInterrupt out of the engine, as SIGINT raises it
    in the main thread): the partial result — flows finished so far, the others unfinished —
    then ``uet-sim: interrupted`` and 130."""
    from uet.tools.sim import main

    from uet.sim.engine import Engine

    step = Engine.step
    stop_at = 160_000  # ns of virtual time: about 12 of the 56 flows done (all finish by 171 µs)

    fired: list[int] = []

    def step_until_ctrl_c(self: Engine, limit: int | None) -> bool:
        if self.now > stop_at and not fired:
            fired.append(self.now)  # one Ctrl-C
            raise KeyboardInterrupt
        return step(self, limit)

    monkeypatch.setattr(Engine, "step", step_until_ctrl_c)
    rc = main(["-w", "all_to_all", "-n", "8", "--size", "64KiB", "--messages", "4", "--json"])
    out, err = capsys.readouterr()
    assert rc == 130 and err.strip().endswith("uet-sim: interrupted"), err
    r = json.loads(out)
    assert r["interrupted"] and not r["ok"]
    done = [f for f in r["flows"] if not f.get("unfinished")]
    assert 0 < len(done) == r["flows_finished"] < len(r["flows"])
    assert all(f["error"] == "unfinished" and "completion_s" not in f for f in r["flows"] if f.get("unfinished"))
    # bytes counted per packet, as the live engine counts them: the messages received whole and more
    assert r["received_messages"] > 0 and r["received_bytes"] > 65536 * r["received_messages"]
    assert "Traceback" not in err
