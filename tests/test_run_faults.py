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


def test_the_launcher_refuses_a_missing_link_before_it_starts_a_process() -> None:
    """The live engine itself (uet.live.launcher): a fault on a link the run's topology lacks is
    :class:`FaultsError`, which ``uet-run`` prints as the one-line usage error above, raised while
    the switch process's arguments are built, so no process has started."""
    import pytest
    from uet.tools.fault_options import faults_from
    from uet.tools.run import build_parser, settings_from

    from uet.live.launcher import Launcher
    from uet.live.process import FaultsError

    args = build_parser().parse_args(["--fail", "nowhere@1ms", "-n", "4"])
    s, topo, ep = settings_from(args)
    launcher = Launcher(s, topo, ep)
    launcher.faults = faults_from(args, None, int(s["seed"]))
    with pytest.raises(FaultsError, match="no link 'nowhere'"):
        launcher.fabric_args(4)
    assert launcher.children == [] and launcher.fabric is None
