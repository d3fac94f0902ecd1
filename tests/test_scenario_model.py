"""One scenario model, one derivation (issue 23 items 1 and 3, issue 30 item 2): every tool and
both engines take their settings from :mod:`uet.scenario`, and ``uet-run --engine sim`` and
``uet-sim`` are the same run for the same arguments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from uet.scenario import ENGINES, Scenario, derive, run_defaults
from uet.scenario.derive import REALTIME_HOSTS, bdp_window, default_payload, fairness_note

SCENARIO = """
[run]
workload = "incast"
endpoints = 4
message_bytes = 8192
messages = 1
profile = "datacenter"

[topology]
kind = "fat_tree"
hosts = 4

[endpoint.pds]
cc = "nscc"
"""


def _sim(**run: Any) -> Scenario:
    return Scenario("sim", {**run_defaults("sim"), **run})


def test_the_simulators_defaults_follow_from_the_physics() -> None:
    s = derive(_sim())
    # 6 links of 1 µs at 100 Gb/s, a 4,218-byte frame out and a minimum frame back
    assert s.base_rtt_ns == round(6 * (2000 + (4096 + 122 + 84) * 8 / 100))
    assert s.endpoint["payload_size"] == 4096
    assert s.endpoint["max_inflight"] == 56  # 1.15 BDP + 32 KiB of ACK coalescing
    assert s.endpoint["pds"]["rto_ns"] == 1_000_000  # 64 base RTTs, at least 10 ACK timers
    assert s.endpoint["pds"]["fast_retx_threshold"] == 0 and s.endpoint["pds"]["max_nack_retx"] == 1 << 30
    assert s.qp.pmtu == 4096 and s.qp.timeout == 8
    assert s.tuned == []
    # a faster link: more packets in the window; the RTO keeps its floor of 10 ACK timers
    fast = derive(_sim(rate_bps=400_000_000_000))
    assert fast.endpoint["max_inflight"] > 100 and fast.endpoint["pds"]["rto_ns"] == 1_000_000


def test_the_realtime_profiles_hosts_set_its_timing() -> None:
    s = derive(Scenario("live", run_defaults("live")))
    assert s.endpoint["payload_size"] == 1024 and s.endpoint["max_inflight"] == 16
    assert s.endpoint["pds"] == REALTIME_HOSTS.pds
    assert s.base_rtt_ns == s.roce_rtt_ns == REALTIME_HOSTS.rtt_ns
    assert s.qp.pmtu == 1024 and s.qp.timeout == 15
    assert s.record()["hosts"].startswith("python processes")
    # the same profile on the simulator: the same settings (one scenario, one answer)
    assert derive(Scenario("sim", {**run_defaults("sim"), "profile": "realtime", "rate_bps": 100_000_000,
                                   "topology": "default"})).endpoint == s.endpoint  # fmt: skip


def test_payload_window_and_cc_mtu_follow_the_given_payload() -> None:
    """Issue 30 item 2: payload_size = 8192 with NSCC ran NSCC with CcConfig's 4 KiB MTU."""
    s = derive(Scenario("sim", run_defaults("sim"), endpoint={"payload_size": 8192, "pds": {"cc": "nscc"}}))
    assert s.endpoint["pds"]["cc_params"] == {"link_bps": 100_000_000_000, "base_rtt_ns": s.base_rtt_ns, "mtu": 8192}
    assert s.base_rtt_ns > derive(_sim()).base_rtt_ns  # a longer frame out
    assert s.endpoint["max_inflight"] == bdp_window(s.physics, 8192, s.base_rtt_ns, 32768)
    assert s.tuned == ["payload_size", "pds.cc"]
    given = {"pds": {"cc": "nscc", "cc_params": {"base_rtt_ns": 5000}}}
    s = derive(Scenario("sim", run_defaults("sim"), endpoint=given))
    assert s.endpoint["pds"]["cc_params"]["base_rtt_ns"] == 5000 and s.endpoint["pds"]["cc_params"]["mtu"] == 4096


def test_default_payload_is_the_largest_power_of_two_that_fits() -> None:
    assert [default_payload(m) for m in (1500, 9000, 1200, 576)] == [1024, 4096, 1024, 256]


def test_the_derivation_is_idempotent() -> None:
    """A complete table derives to itself: a tool may pass the table it got on to an engine."""
    s = derive(Scenario("sim", run_defaults("sim"), endpoint={"pds": {"cc": "nscc"}}))
    again = derive(Scenario("sim", run_defaults("sim"), endpoint=s.endpoint))
    assert again.endpoint == s.endpoint and again.tuned == s.tuned == ["pds.cc"]


def test_fairness_note_names_the_tuned_keys() -> None:
    assert fairness_note([]) is None
    note = fairness_note(["max_inflight", "pds.cc"])
    assert note is not None and "max_inflight, pds.cc" in note and "\n" not in note


def _file(tmp_path: Path) -> str:
    p = tmp_path / "s.toml"
    p.write_text(SCENARIO)
    return str(p)


def test_every_tool_derives_the_same_settings_from_one_scenario(tmp_path: Path) -> None:
    """Issue 30 "Done when" point 2: the scenario model's reader (:func:`uet.scenario.read.resolve`,
    which every tool calls), the live launcher, ``uet-run --engine sim``, ``uet-sim`` (and
    with it the CC suite, which reads its rows through ``uet-sim``'s settings), the simulator
    itself and ``uet-bench sim`` (which calls the simulator with tables of its own) all come to one
    derivation of the same scenario."""
    from uet.tools import run, sim

    from uet.live.launcher import Launcher
    from uet.scenario.read import resolve
    from uet.sim.scenario import simulate
    from uet.workloads import WORKLOADS

    path = _file(tmp_path)
    records = {}
    # the scenario model itself, given the file (each engine's defaults)
    for engine in ENGINES:
        records[f"resolve {engine}"] = resolve(engine, path, workloads=WORKLOADS).settings.record()
    s, topo, ep = run.settings_from(run.build_parser().parse_args([path]))
    assert (s, topo, ep) == resolve("live", path, workloads=WORKLOADS).tables()
    launcher = Launcher(s, topo, ep)
    launcher.fabric_args(4)
    assert launcher.derived is not None
    records["uet-run live"] = launcher.derived.record()
    s, topo, ep = run.settings_from(run.build_parser().parse_args([path, "--engine", "sim"]))
    records["uet-run --engine sim"] = derive(Scenario("sim", s, topo, ep)).record()
    ss, stopo, sep = sim.settings_from(sim.build_parser().parse_args([path]))
    assert (ss, stopo, sep) == (s, topo, ep) == resolve("sim", path, workloads=WORKLOADS).tables()
    records["uet-sim"] = derive(Scenario("sim", ss, stopo, sep)).record()
    # the engine, given the user's tables only (as uet-bench sim and library users call it)
    user = {"pds": {"cc": "nscc"}}
    records["simulate"] = simulate({k: s[k] for k in run_defaults("sim") if k in s}, topo, user)["derived"]
    first = records["uet-run live"]
    assert first["endpoint"]["pds"]["cc_params"]["mtu"] == 4096 and first["tuned"] == ["pds.cc"]
    for tool, rec in records.items():
        assert rec == first, tool


def _main_json(capsys: pytest.CaptureFixture[str], main: Any, argv: list[str]) -> dict[str, Any]:
    main(argv)
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("extra", [[], ["--transport", "both", "--endpoint-set", "max_inflight=64"]])
def test_uet_run_engine_sim_and_uet_sim_are_the_same_run(capsys: pytest.CaptureFixture[str], extra: list[str]) -> None:
    """Issue 23 item 1: the same arguments give the same JSON (CPU figures aside: ``uet-sim``
    prints them only with ``--timing``)."""
    from uet.tools import run, sim

    argv = ["-n", "4", "-w", "permutation", "--size", "16KiB", "--messages", "1", "--json", *extra]
    a = _main_json(capsys, run.main, ["--engine", "sim", *argv])
    b = _main_json(capsys, sim.main, argv)
    for r in (a, b, *a.get("runs", {}).values(), *b.get("runs", {}).values()):
        r.pop("timing", None)
    assert a == b
    if extra:  # --transport both in uet-sim: both runs, the comparison, and the one-sided tuning said
        assert set(b["runs"]) == {"uet", "roce"} and b["comparison"]
        assert "max_inflight" in b["note"]
    else:
        assert a["settings"]["profile"] == "datacenter" and a["derived"]["endpoint"]["payload_size"] == 4096


def test_uet_sim_both_prints_the_fairness_note_above_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from uet.tools import sim

    argv = ["-n", "4", "--size", "8KiB", "--messages", "1", "--transport", "both"]
    assert sim.main([*argv, "--endpoint-set", "pds.cc=nscc"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("note: not like for like: UET runs with settings of its own (pds.cc)")
    assert sim.main(argv) == 0
    assert "like for like" not in capsys.readouterr().out


def test_run_defaults_by_engine() -> None:
    live, simd = run_defaults("live"), run_defaults("sim")
    assert (live["profile"], simd["profile"]) == ("realtime", "datacenter")
    assert "timeout_s" in live and "tss" in simd and "tss" not in live
    with pytest.raises(ValueError, match="engine"):
        run_defaults("warp")
