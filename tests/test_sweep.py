"""uet-sweep: sweep files, expansion, retries, aggregates, and the README's sweep on both executors."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from uet.experiments.sweep import (
    Run,
    RunResult,
    SweepError,
    aggregate,
    execute,
    expand,
    load_sweep,
    metric,
)

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _write(tmp_path: Path, text: str, name: str = "s.toml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_expansion_is_the_product_in_file_order_with_seeds_innermost(tmp_path: Path) -> None:
    scen = _write(tmp_path, "[run]\nworkload = 'incast'\n", "scen.toml")
    path = _write(
        tmp_path,
        f"""[sweep]
scenario = "{Path(scen).name}"
args = ["--size", "4KiB"]
seeds = {{start = 7, count = 2}}
[vary]
"pds.cc" = ["nscc", "rccc"]
"--endpoints" = {{start = 4, stop = 8, step = 4}}
""",
    )
    spec = load_sweep(path)
    assert spec.scenario_text == "[run]\nworkload = 'incast'\n"
    runs = expand(spec)
    assert len(runs) == 8 and [r.index for r in runs] == list(range(8))
    assert [(dict(r.params)["pds.cc"], dict(r.params)["--endpoints"], r.seed) for r in runs[:4]] == [
        ("nscc", 4, 7),
        ("nscc", 4, 8),
        ("nscc", 8, 7),
        ("nscc", 8, 8),
    ]
    assert runs[5].argv == (
        "--size", "4KiB", "--endpoint-set", "pds.cc=rccc", "--endpoints", "4", "--seed", "8", "--json",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[sweep]\nseeds = []\n", "seeds"),
        ("[sweep]\nseeds = [1, 1]\n", "distinct"),
        ("[sweep]\nargs = ['--seed', '3']\n", "--seed is the sweep's"),
        ("[vary]\ncc = ['a']\n", "an option"),
        ("[vary]\n'--endpoints' = []\n", "non-empty"),
        ("[vary]\n'--endpoints' = [4, 4]\n", "twice"),
        ("[vary]\n'--endpoints' = {start = 1, stop = 5, step = 0}\n", "positive step"),
        ("[vary]\n'--a' = {start = 1, stop = 100}\n'--b' = {start = 1, stop = 101}\n", "at most 10,000"),
        ("[other]\n", "unknown table 'other'"),
        ("[sweep]\nscenario = 'missing.toml'\n", "missing.toml"),
        ("[plot]\nx = '--endpoints'\n", "one of the [vary] keys"),
        ("not toml [", "s.toml"),
    ],
)
def test_a_bad_sweep_file_is_one_line_naming_the_problem(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(SweepError, match=re.escape(says)) as e:
        load_sweep(_write(tmp_path, text))
    assert "\n" not in str(e.value)


def test_a_huge_or_binary_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * (2 << 20))
    with pytest.raises(SweepError, match="larger than"):
        load_sweep(str(big))
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SweepError, match="UTF-8"):
        load_sweep(str(binary))


class _Flaky:
    """An executor whose runs fail a given number of times each before they answer."""

    name = "fake"

    def __init__(self, failures: dict[int, int]) -> None:
        self.failures = dict(failures)
        self.calls: list[int] = []

    def map(self, runs: list[Run], timeout_s: float) -> Any:
        for r in runs:
            self.calls.append(r.index)
            if self.failures.get(r.index, 0) > 0:
                self.failures[r.index] -= 1
                yield r, {"error": "exit status -9"}
            else:
                yield r, {"result": {"ok": True, "fct": {"p99_s": r.seed * 1e-6}}}


def _runs(n: int) -> list[Run]:
    return [Run(i, (("--endpoints", 4),), i + 1, ("--seed", str(i + 1), "--json")) for i in range(n)]


def test_a_failed_run_is_retried_once_then_reported_never_dropped() -> None:
    runs = _runs(3)
    ex = _Flaky({1: 1, 2: 5})
    seen: list[int] = []
    out = execute(runs, ex, on_result=lambda rr: seen.append(rr.run.index))  # type: ignore[arg-type]
    assert ex.calls == [0, 1, 2, 1, 2]
    assert [(rr.attempts, rr.error) for rr in out] == [(1, None), (2, None), (2, "exit status -9")]
    assert sorted(seen) == [0, 1, 2]  # the final answer of every run, once


def test_aggregates_are_mean_min_max_over_the_seeds_that_gave_a_number() -> None:
    a, b = Run(0, (("x", 1),), 1, ()), Run(1, (("x", 1),), 2, ())
    c, d = Run(2, (("x", 2),), 1, ()), Run(3, (("x", 2),), 2, ())
    rows = aggregate(
        [
            RunResult(a, {"ok": True, "m": {"v": 2}}),
            RunResult(b, {"ok": False, "m": {"v": 6}}),
            RunResult(c, None, "boom", 2),
            RunResult(d, {"ok": True, "m": {"v": True}}),
        ],
        ["m.v", "m.none"],
    )
    assert rows[0] == {
        "params": {"x": 1},
        "runs": 2,
        "failed": 0,
        "intact": 1,
        "m.v": {"mean": 4.0, "min": 2.0, "max": 6.0, "n": 2},
        "m.none": None,
    }
    assert rows[1]["failed"] == 1 and rows[1]["intact"] == 1 and rows[1]["m.v"] is None  # a boolean is no number
    assert metric({"a": {"b": 3}}, "a.b") == 3 and metric({"a": 3}, "a.b") is None


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "uet-sweep"), *args], capture_output=True, text=True, cwd=ROOT, timeout=300)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["missing.toml"], "missing.toml"),
        (["scenarios/sweep/incast_cc.toml", "--cluster", "local:0"], "local:N"),
        (["scenarios/sweep/incast_cc.toml", "--cluster", "local:2", "--jobs", "2"], "--jobs is for local"),
        (["scenarios/sweep/incast_cc.toml", "--csv", "/nonexistent-folder/x.csv"], "no such folder"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], says: str) -> None:
    p = _tool(*args)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and says in p.stderr and "Traceback" not in p.stderr


def test_dry_run_lists_every_command_line() -> None:
    p = _tool("scenarios/sweep/incast_cc.toml", "--dry-run")
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and len(lines) == 24
    assert lines[0].split() == (
        "uet-sim -w incast --size 64KiB --messages 1 --rate 100G --endpoint-set pds.cc=nscc --endpoints 5 --seed 1"
    ).split() + ["--json"]


def _readme_sweep() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- sweep:start -->\n```sh\n(.*?)```\n<!-- sweep:end -->", text, re.S)
    assert block is not None, "the README's sweep block"
    out = []
    for line in block.group(1).splitlines():
        argv = shlex.split(line.partition(" #")[0])
        argv[0] = str(BIN / Path(argv[0]).name)
        out.append(argv)
    return out


def test_the_readme_sweep_gives_the_same_runs_on_local_processes_and_a_dask_local_cluster(tmp_path: Path) -> None:
    """Issue: a sweep of >= 24 runs (2 CC x 3 loads x 4 seeds) from the README, on local processes
    and on a Dask LocalCluster of 2 workers, with identical per-run results."""
    pytest.importorskip("distributed")
    local_cmd, dask_cmd = _readme_sweep()
    assert "--cluster" in dask_cmd and "--cluster" not in local_cmd
    plot = local_cmd.index("--plot") + 1
    local_cmd[plot] = str(tmp_path / local_cmd[plot])  # the README runs in the repository's root
    local = subprocess.run([*local_cmd, "--json"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    dask = subprocess.run(dask_cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert local.returncode == 0, local.stderr
    assert dask.returncode == 0, dask.stderr
    assert (tmp_path / "sweep.png").stat().st_size > 10_000
    a, b = json.loads(local.stdout), json.loads(dask.stdout)
    assert len(a["runs"]) == 24 and a["ok"] is True
    assert {(r["params"]["pds.cc"], r["params"]["--endpoints"]) for r in a["runs"]} == {
        (cc, n) for cc in ("nscc", "rccc") for n in (5, 9, 17)
    }
    assert "LocalCluster (2 workers)" in b["executor"] and "local processes" in a["executor"]
    # the same results; how many attempts a run took (a retry after a worker or a child died on a
    # loaded machine) is the executor's, not the run's
    assert [{**r, "attempts": 1} for r in a["runs"]] == [{**r, "attempts": 1} for r in b["runs"]]
    assert a["rows"] == b["rows"]
