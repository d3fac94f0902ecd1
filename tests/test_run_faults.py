"""``uet-run`` with a fault schedule on the live engine (issue 27): the ``[faults]`` table and the
options reach the ``uet-fabric`` process, whose model applies them; the run stays intact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from live_options import FAST


def test_the_same_schedule_runs_live_and_every_message_arrives_intact(tmp_path: Path) -> None:
    sc = tmp_path / "lossy.toml"
    sc.write_text(
        '[run]\nworkload = "pairs"\nendpoints = 2\nmessages = 8\n'
        '[faults]\nseed = 3\n[[faults.event]]\nkind = "loss"\nlink = "h0-leaf0"\nloss = 0.05\n'
    )
    p = subprocess.run(
        [sys.executable, "-m", "uet.tools.run", *FAST, str(sc), "--degrade", "h1-leaf0=0.5", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    f = res["faults"]
    assert res["ok"] and all(fl["intact"] for fl in res["flows"])
    assert {(e["what"], e["event"]) for e in f["events"]} == {("h0-leaf0", "loss 0.05"), ("h1-leaf0", "rate 0.5")}
    assert f["lost_packets"]["link_loss"] > 0
    assert sum(fl["retransmits"] for fl in res["flows"]) > 0  # (ACKs are lost too: not one for one)


def test_a_bad_link_name_is_a_one_line_error_before_anything_starts() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "uet.tools.run", "--fail", "nowhere@1ms"], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "no link 'nowhere'" in p.stderr, p.stderr
