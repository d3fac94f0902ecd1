"""``timeout_s`` in a scenario's ``[run]`` table is honoured by the simulator (issue 29 item 14):
it was accepted and silently ignored. The limit is on virtual time (uet.sim.scenario), so a run
stops at the same simulated instant on any machine and the result says so."""

from __future__ import annotations

import json
from pathlib import Path

from test_bad_files import _run

from uet.sim.scenario import simulate

RUN = {"workload": "incast", "endpoints": 3, "message_bytes": 65536, "messages": 2, "seed": 1}


def test_the_run_stops_at_timeout_s_of_virtual_time() -> None:
    full = simulate(dict(RUN))
    assert full["ok"] and "timed_out" not in full
    limit = full["virtual_s"] / 4
    cut = simulate({**RUN, "timeout_s": limit})
    assert cut["timed_out"] and cut["timeout_s"] == limit and not cut["ok"]
    assert abs(cut["virtual_s"] - limit) < 1e-6  # stopped there, not at the end of the run
    assert any(f.get("unfinished") for f in cut["flows"])
    assert any("timeout_s" in e and "virtual time" in e for e in cut["errors"])
    # a limit the run does not reach changes nothing
    assert simulate({**RUN, "timeout_s": 10.0})["ok"]


def test_uet_sim_reports_the_limit(tmp_path: Path) -> None:
    f = tmp_path / "short.toml"
    f.write_text('[run]\nworkload = "incast"\nendpoints = 3\nmessage_bytes = 65536\nmessages = 2\ntimeout_s = 1e-6\n')
    code, out, err = _run("sim", str(f), "--json")
    assert code == 1, err
    res = json.loads(out)
    assert res["timed_out"] is True and res["timeout_s"] == 1e-6
