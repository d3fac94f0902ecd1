"""``uet-sim --suite cc`` (issue 11): the committed htsim-configuration scenario files and the
one table that sets our figures beside uet-htsim's."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hang_guard import within
from uet.tools.cc_suite import SUITES, scenario_files
from uet.tools.sim import build_parser

from uet.cc.config import CcConfig
from uet.cc.registry import as_config
from uet.experiments.cc_suite import _tail_ideal, row_result, select, suite_files
from uet.scenario.read import resolve

pytestmark = pytest.mark.processes  # uet-sim children in virtual time, no network (tests/conftest.py)

SIM = [sys.executable, "-m", "uet.tools.sim"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SIM, *args], capture_output=True, text=True, timeout=300)


def test_every_scenario_file_is_a_valid_uet_sim_scenario_with_htsim_figures() -> None:
    files = suite_files(SUITES["cc"])
    assert scenario_files("cc") == files
    names = [p.stem for p in files]
    # table order: by host count, then workload, then algorithm (nscc, rccc, nscc+rccc)
    assert names[:3] == ["one_flow_nscc", "one_flow_rccc", "one_flow_nscc_rccc"]
    assert names[3:6] == [f"incast15_{a}" for a in ("nscc", "rccc", "nscc_rccc")]
    # 127→1: NSCC with the notes' one-MTU minimum window, then with sub-packet windows
    assert names[6:10] == [f"incast127_{a}" for a in ("nscc", "nscc_subpacket", "rccc", "nscc_rccc")]
    assert {n for n in names[10:]} == {f"perm1024_{p}_{a}" for p in ("128paths", "1path") for a in ("nscc", "rccc")}
    for p in files:
        s, topo, ep = resolve("sim", str(p)).tables()
        assert s["rate_bps"] == 100_000_000_000 and s["message_bytes"] == 2_000_000 and s["profile"] == "datacenter"
        assert topo["kind"] == "fat_tree" and topo["hosts"] == s["endpoints"]
        assert ep["payload_size"] == 4096 and ep["pds"]["rto_ns"] == 100_000
        assert ep["pds"]["cc"] in ("nscc", "rccc", "nscc+rccc")
        assert as_config(ep["pds"]["cc_params"]).base_rtt_ns == 14_080
        import tomllib

        ref = tomllib.loads(p.read_text())["reference"]
        assert ref["tail_us"] > 0


def test_only_keeps_whole_names_or_else_parts() -> None:
    files = suite_files(SUITES["cc"])
    assert [p.stem for p in select(files, "incast15_nscc")] == ["incast15_nscc"]  # not incast15_nscc_rccc
    assert [p.stem for p in select(files, "incast15")] == [f"incast15_{a}" for a in ("nscc", "rccc", "nscc_rccc")]
    assert select(files, "zzz,") == []


def test_cc_params_table_becomes_a_ccconfig_and_unknown_keys_are_refused() -> None:
    assert as_config(None) == CcConfig()
    assert as_config({"paths": 128}).paths == 128
    with pytest.raises(ValueError, match="unknown key 'bogus'"):
        as_config({"bogus": 1})


def test_incast_ideal_adds_the_other_senders_frames_to_the_slowest_lone_flow() -> None:
    # two flows of 8,192 bytes (2 packets each) into one host, 100 Gb/s, overhead 122 bytes
    res: dict[str, Any] = {
        "link_rate_bps": 100e9,
        "flows": [
            {"dst": "a", "bytes": 8192, "ideal_s": 1e-6},
            {"dst": "a", "bytes": 8192, "ideal_s": 3e-6},
        ],
    }
    ours, bare = _tail_ideal(res, 122, 4096)
    ser = (8192 + 2 * 122) * 8 / 100e9
    assert ours == pytest.approx(3e-6 + ser)
    assert bare == pytest.approx(3e-6 + ser - 2 * 2 * 122 * 8 / 100e9)
    # a permutation: every destination alone, the tail ideal is the largest lone ideal
    res["flows"][1]["dst"] = "b"
    assert _tail_ideal(res, 122, 4096)[0] == pytest.approx(3e-6)


def _result(nbytes: int, ideal_s: float, tail_s: float, **over: object) -> dict:
    """A ``simulate`` result of one flow to "a" at 100 Gb/s, as row_result reads it."""
    res = {
        "link_rate_bps": 100e9,
        "workload": "incast",
        "endpoints": 2,
        "cc": "nscc",
        "lb": "reps",
        "ok": True,
        "payload_size": 4096,
        "flows": [{"dst": "a", "bytes": nbytes, "ideal_s": ideal_s, "retransmits": 3}],
        "fct": {"max_s": tail_s, "max_over_min": 1.0},
        "fabric": {"trims": 3, "ecn_marks": 0},
    }
    res.update(over)
    return res


def test_row_ratio_compares_slowdowns() -> None:
    res = _result(4096, 1e-6, 1.1e-6)
    row = row_result(Path("x.toml"), res, {"tail_us": 2.2, "ideal_us": 2.0}, None)
    assert row["x_ideal"] == 1.1 and row["ratio"] == 1.0 and row["retransmits"] == 3


def test_row_route_figures_ours_and_htsim_inferred() -> None:
    """tail / bound from the run's per-link accounting; htsim's bound from the max_flows its
    [reference] table infers: its ideal plus that many more flows' bytes on the shared link."""
    links = {
        "max_flows": 4,
        "histogram": {"1": 10, "4": 1},
        "route_bound_us": 666.0,
        "bottleneck": {"link": "x", "flows": 4, "bytes": 1, "busy_us": 1.0},
        "bottleneck_fct": {"flows": 4, "min_us": 650.0, "max_us": 700.0, "max_over_min": 1.0769},
    }
    res = _result(2_000_000, 177e-6, 700e-6, workload="permutation", lb="single", links=links)
    row = row_result(Path("x.toml"), res, {"tail_us": 889.9, "ideal_us": 174.0, "max_flows": 5}, None)
    assert row["max_flows"] == 4 and row["route_bound_us"] == 666.0
    assert row["x_bound"] == round(700 / 666, 4) and row["bottleneck_max_over_min"] == 1.0769
    h_bound = 174.0 + 4 * 160.0  # four more 2 MB flows at 100 Gb/s
    assert row["htsim"]["route_bound_us"] == h_bound and row["htsim"]["x_bound"] == round(889.9 / h_bound, 4)
    # a scaled row has no htsim counterpart
    assert "x_bound" not in row_result(Path("x.toml"), res, {"tail_us": 889.9, "max_flows": 5}, "1024 → 16")["htsim"]
    del res["links"]
    assert "x_bound" not in row_result(Path("x.toml"), res, {"tail_us": 889.9}, None)


def test_suite_one_row_json_and_table() -> None:
    r = _run("--suite", "cc", "--only", "one_flow_nscc", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (row,) = out["rows"]
    assert out["ok"] and row["cc"] == "nscc" and row["lb"] == "reps" and "cpu_s" not in row
    assert row["htsim"]["tail_us"] == 176.2
    # one 2 MB flow across the core: within 2 % of our ideal and of htsim's slowdown
    assert 1.0 <= row["x_ideal"] < 1.02 and 0.95 < row["ratio"] < 1.05
    # one flow: its route bound is its ideal (the partial last packet aside), one flow per link
    assert row["max_flows"] == 1 and row["route_bound_us"] == pytest.approx(row["ideal_us"], abs=0.1)
    assert 1.0 <= row["x_bound"] < 1.02
    t = _run("--suite", "cc", "--only", "incast15_rccc", "--max-hosts", "4", "--size", "64KiB", "--json")
    assert t.returncode == 0, t.stderr
    (row,) = json.loads(t.stdout)["rows"]
    assert row["scaled"] == "16 → 4 hosts" and row["endpoints"] == 4 and row["ok"]
    t = _run("--suite", "cc", "--only", "one_flow_rccc")
    assert t.returncode == 0, t.stderr
    assert "htsim tail" in t.stdout and "one_flow_rccc" in t.stdout


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--suite", "nope"], "not a built-in suite"),
        (["--suite", "cc", "--only", "zzz"], "no scenario of the suite matches"),
        (["--only", "x"], "go with --suite"),
        (["--jobs", "2"], "go with --suite"),
        (["--suite", "cc", "--jobs", "0"], "--jobs"),
        # a usage error found inside a worker process reaches the user as one line, exit 2
        (["--suite", "cc", "--only", "one_flow", "--jobs", "2", "--endpoint-set", "pds.nope=1"], "nope"),
        (["--suite", "cc", "some.toml"], "give no scenario"),
    ],
)
def test_suite_usage_errors(args: list[str], msg: str) -> None:
    r = _run(*args)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr


#: a process running each_in_a_process (the runner behind ``--jobs``) on items whose worker blocks
#: for ever, dies without a result, or raises; it prints what the call raised and whether any
#: worker process is left, running or defunct (os.waitpid: no child at all once all are reaped)
_WORKERS = r"""
import json, os, sys, threading
from uet.experiments.cc_suite import each_in_a_process

def work(kind):
    if kind == "die":
        os._exit(3)
    if kind == "raise":
        raise ValueError("a bad row")
    threading.Event().wait()  # "block": never returns

try:
    each_in_a_process(work, sys.argv[1].split(","), 2, lambda i, r: None)
    error = None
except Exception as e:
    error = [type(e).__name__, str(e)]
try:
    left = os.waitpid(-1, os.WNOHANG)[0] or "running"
except ChildProcessError:
    left = None
print(json.dumps({"error": error, "left": left}))
"""


def _workers(items: str) -> dict[str, Any]:
    """Run :data:`_WORKERS` on ``items``; a hang fails the test (the guard only ends it)."""

    async def go() -> bytes:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WORKERS, items, stdout=subprocess.PIPE, start_new_session=True
        )
        try:
            out, _ = await within(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the hang: the process and its workers
                await proc.wait()
        return out

    return json.loads(asyncio.run(go()))


def test_jobs_a_worker_that_dies_ends_the_suite_and_the_blocked_worker_is_killed_and_reaped() -> None:
    """A row's worker that dies without a result (killed, out of memory) is an error, not a wait
    for ever, and the other row's worker, blocked, is killed: no worker left, running or defunct.
    (With multiprocessing.Pool the dead worker's result never came and the suite hung.)"""
    out = _workers("block,die")
    assert (
        out["error"][0] == "WorkerDied"
        and out["error"][1] == "die: its worker process ended without a result (exit status 3)"
    )
    assert out["left"] is None


def test_jobs_a_row_error_does_not_wait_for_a_blocked_worker_and_reaps_it() -> None:
    """A row that raises stops the suite with its error at once: the worker of a row that would
    never end is killed, not waited for, and reaped."""
    out = _workers("block,raise")
    assert out == {"error": ["ValueError", "a bad row"], "left": None}


def test_settings_are_checked_before_any_worker_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mistake in the settings of any row is found in the suite's process before any row's
    worker starts: the suite fails with it and the worker runner is never called."""
    from uet.tools.run_settings import given_from
    from uet.tools.sim import SIM_OPTIONS

    import uet.experiments.cc_suite as cc
    from uet.scenario.check import ScenarioError

    calls: list[object] = []
    monkeypatch.setattr(cc, "each_in_a_process", lambda *a: calls.append(a))
    ns = build_parser().parse_args(["--suite", "cc", "--endpoint-set", "pds.nope=1"])
    with pytest.raises(ScenarioError, match="nope"):
        cc.run_suite("cc", scenario_files("cc")[:3], given_from(ns, SIM_OPTIONS), jobs=2)
    assert calls == []


def test_jobs_run_rows_in_parallel_with_the_same_figures_in_suite_order() -> None:
    """``--jobs 2``: each row in its own process; every figure but the CPU time is the one the
    serial run gives, and the rows keep the suite's order whatever order they finish in."""
    serial = _run("--suite", "cc", "--only", "one_flow,incast15", "--max-hosts", "4", "--size", "64KiB", "--json")
    par = _run(
        "--suite", "cc", "--only", "one_flow,incast15", "--max-hosts", "4", "--size", "64KiB", "--json", "-j", "2"
    )
    assert serial.returncode == 0 and par.returncode == 0, serial.stderr + par.stderr
    a, b = json.loads(serial.stdout), json.loads(par.stdout)
    assert [r["scenario"] for r in b["rows"]] == [p.stem for p in scenario_files("cc")][:6]
    assert a == b


def test_namespace_passthrough_keeps_options() -> None:
    ns = build_parser().parse_args(["--suite", "cc", "--seed", "3"])
    assert isinstance(ns, argparse.Namespace) and ns.seed == 3 and ns.max_hosts is None


def test_cc_state_plot_of_an_incast(tmp_path) -> None:
    """``uet-sim --plot`` with CC on keeps each sender's cwnd and credit records and draws them
    (issue 11: the cwnd/credit plot of the 15→1 incast, here 3→1 and small)."""
    pytest.importorskip("matplotlib")
    from uet.sim.cc_plots import cc_plot
    from uet.sim.scenario import simulate

    ep = {"payload_size": 4096, "ecn_capable": True, "max_inflight": 1024, "pds": {"cc": "nscc+rccc"}}
    res = simulate(
        {"workload": "incast", "endpoints": 4, "message_bytes": 64 * 1024, "messages": 1}, None, ep, timeline=True
    )
    assert res["ok"] and res["cc"] == "nscc+rccc"
    recs = res["cc_timeline"]
    assert {r["host"] for r in recs if "cwnd" in r} == {1, 2, 3}
    assert {r["host"] for r in recs if r.get("algo") == "rccc"} >= {1, 2, 3}
    assert all(r["ev"] == "cc" for r in recs)
    path = cc_plot(res, str(tmp_path))
    assert path is not None and (tmp_path / "cc_state.png").stat().st_size > 10_000
    assert cc_plot({**res, "cc_timeline": []}, str(tmp_path / "none")) is None  # no empty axes
