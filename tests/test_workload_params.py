"""Workloads take their own parameter table (issue 30 item 2): ``[workload.params]`` in a scenario
file, ``--workload-set`` on the command line, one ``spec()`` that carries a workload to the live
engine's processes, checked once with a one-line error naming the key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from uet.workloads import Incast, from_spec, make

pytestmark = pytest.mark.processes  # uet-sim children in virtual time, no network (tests/conftest.py)


def test_incast_takes_its_fan_in_as_a_parameter() -> None:
    w = make("incast", 16, params={"senders": 4})
    assert [(f.src, f.dst) for f in w.flows()] == [(1, 0), (2, 0), (3, 0), (4, 0)]
    assert make("incast", 16).params == Incast.Params() and len(make("incast", 16).flows()) == 15
    with pytest.raises(ValueError, match="senders"):
        make("incast", 4, params={"senders": 4})


def test_unknown_or_mistyped_parameters_are_refused_naming_the_key() -> None:
    with pytest.raises(ValueError, match="unknown parameter 'fanin'.*valid: senders"):
        make("incast", 8, params={"fanin": 2})
    with pytest.raises(ValueError, match="senders = '2'"):
        make("incast", 8, params={"senders": "2"})
    with pytest.raises(ValueError, match="permutation.*no parameters"):
        make("permutation", 8, params={"senders": 2})


def test_a_workload_travels_as_its_spec() -> None:
    w = make("incast", 9, message_bytes=4096, messages=2, seed=3, params={"senders": 2})
    spec = json.loads(json.dumps(w.spec()))  # what the launcher sends its endpoint processes
    again = from_spec(spec)
    assert type(again) is Incast and again.params == w.params and again.flows() == w.flows()
    assert again.seed == 3 and again.messages == 2 and again.message_bytes == 4096


def test_scenario_table_and_option_reach_both_engines(tmp_path: Path) -> None:
    from uet.tools import run, sim

    from uet.live.launcher import build_workload

    f = tmp_path / "s.toml"
    f.write_text('[run]\nworkload = "incast"\nendpoints = 8\nmessage_bytes = 4096\nmessages = 1\n'
                 "[workload.params]\nsenders = 3\n")  # fmt: skip
    s, _topo, _ep = sim.settings_from(sim.build_parser().parse_args([str(f)]))
    assert s["workload_params"] == {"senders": 3}
    s2, _t, _e = run.settings_from(run.build_parser().parse_args([str(f), "--workload-set", "senders=2"]))
    assert s2["workload_params"] == {"senders": 2}
    assert len(build_workload(s2).flows()) == 2
    from uet.sim.scenario import simulate

    res = simulate(s)
    assert res["ok"] and len(res["flows"]) == 3


def test_a_bad_parameter_is_a_usage_error() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "uet.tools.sim", "--workload-set", "fanin=2"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "fanin" in r.stderr and len(r.stderr.strip().splitlines()) == 1
