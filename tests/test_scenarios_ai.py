"""``scenarios/ai/`` (issue 26 item 4): every file runs through ``uet-sim`` at a reduced size, says
in its header what it shows, how to run it and the figures a full run gives, and is in the
README's table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from uet.tools.sim import main as uet_sim

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted((ROOT / "scenarios" / "ai").glob("*.toml"))


def test_the_library_is_complete_and_in_the_readme() -> None:
    names = {f.stem for f in FILES}
    want = {"rail_cluster", "ring_placement", "incast_pfc_spread", "ecn_before_pfc", "elephant_ecmp_vs_spray"}
    assert want | {"moe_all_to_all"} <= names
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("#### Scenario library: `scenarios/ai/`") :]
    for f in FILES:
        assert f"`scenarios/ai/{f.name}`" in table, f.name
        header = f.read_text().split("\n[", 1)[0]
        assert f"# Run: uet-sim scenarios/ai/{f.name}" in header
        figures = re.search(r"# Figures \(from a run[^)]*\): (.+)", header)
        assert figures and "FIGURES" not in header and re.search(r"\d", figures.group(1)), f.name


#: a smaller model for the training step (its graph, not the message size, says what moves)
_SMALL_MODEL = ("hidden=128", "seq_len=64", "layers=2")
SMALLER = {
    name: [x for kv in (*_SMALL_MODEL, *layout) for x in ("--workload-set", kv)]
    for name, layout in {
        "training_step": (),
        "training_gpt_dense": ("tp=2", "pp=2"),  # 8 ranks: DP 2 × TP 2 × PP 2
        "training_moe": ("tp=2", "pp=2", "ep=2"),
    }.items()
}


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_scenario_runs_small(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The file as written (topology, placement, transports, endpoint settings) with 8 endpoints
    and 4 KiB messages."""
    small = ["--endpoints", "8", "--size", "4KiB", "--messages", "1", *SMALLER.get(path.stem, [])]
    code = uet_sim([str(path), *small, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"], out.get("errors")
