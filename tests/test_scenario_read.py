"""Reading a scenario (issue 30 item 7): the scenario model, not a command module, turns a
scenario file and the values laid over it into the run's tables (:func:`uet.scenario.read.resolve`);
the tools only hand it their options."""

from __future__ import annotations

from pathlib import Path

import pytest

from uet.errors import UetError
from uet.scenario.check import ScenarioError
from uet.scenario.read import Given, resolve
from uet.workloads import WORKLOADS

SCENARIO = """
[run]
workload = "incast"
endpoints = 4
message_bytes = "8KiB"

[topology]
kind = "rail"
rails = 4
groups = 1
hosts_per_leaf = 2
spines = 1

[endpoint.pds]
cc = "nscc"

[workload.params]
senders = 2
"""


def _file(tmp_path: Path) -> str:
    p = tmp_path / "s.toml"
    p.write_text(SCENARIO)
    return str(p)


def test_resolve_takes_plain_values_and_gives_what_the_tools_read(tmp_path: Path) -> None:
    from uet.tools import run, sim

    path = _file(tmp_path)
    given = Given(run={"messages": 2, "seed": None}, endpoint=("max_inflight=64",), workload=("senders=3",))
    got = resolve("sim", path, given, workloads=WORKLOADS)
    s, topo, ep = got.tables()
    assert s["message_bytes"] == 8192 and s["messages"] == 2 and s["seed"] == 1  # None: not given
    assert s["workload_params"] == {"senders": 3} and s["scenario"] == path
    assert ep["max_inflight"] == 64 and ep["pds"]["cc"] == "nscc" and got.settings.tuned == ["max_inflight", "pds.cc"]
    assert got.fabric.kind == "rail" and got.settings.scale_up is not None
    argv = [path, "--messages", "2", "--endpoint-set", "max_inflight=64", "--workload-set", "senders=3"]
    assert sim.settings_from(sim.build_parser().parse_args(argv)) == (s, topo, ep)
    assert run.settings_from(run.build_parser().parse_args([*argv, "--engine", "sim"])) == (s, topo, ep)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (Given(run={"endpoints": 1}), "[run] endpoints = 1: must be at least 2"),
        (Given(run={"workload": "nope"}), "[run] workload = 'nope': one of incast"),
        (Given(workload=("bogus=1",)), "[workload.params]: workload incast: unknown parameter 'bogus'"),
        (Given(run={"profile": "lab", "rate_bps": 10**9}), "--rate sets the realtime profile's link rate"),
        (Given(endpoint=("pds.nope=1",)), "[endpoint.pds]: unknown key 'nope'"),
        (Given(gpus_per_server=4), "--gpus-per-server 4: servers of several GPUs"),
        (Given(run={"endpoints": 2}, placement="0,0"), "[run] placement: hosts must be distinct"),
    ],
)
def test_a_mistake_is_one_scenario_error(given: Given, message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        resolve("sim", None, given, workloads=WORKLOADS)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)
    assert isinstance(e.value, UetError) and isinstance(e.value, ValueError)


def test_the_workloads_are_checked_only_against_the_registry_given() -> None:
    """The workloads sit above the scenario model: it checks a run's workload against the registry
    its caller hands in, and without one leaves it to the engine that builds the workload."""
    assert resolve("sim", None, Given(run={"workload": "nope"})).run["workload"] == "nope"
    with pytest.raises(ScenarioError, match="workload"):
        resolve("sim", None, Given(run={"workload": "nope"}), workloads=WORKLOADS)


def test_a_bad_file_is_one_scenario_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[runn]\nendpoints = 4\n")
    with pytest.raises(ScenarioError, match="unknown table 'runn'"):
        resolve("live", str(bad))
    with pytest.raises(ScenarioError, match="No such file"):
        resolve("live", str(tmp_path / "missing.toml"))
