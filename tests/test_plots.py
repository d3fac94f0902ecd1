"""Plots of the switch telemetry and of a run's flows (issue 14 build 6): queue depth on the
sampling grid, ECN/PFC thresholds drawn, the legend says when only the busiest are shown, no
empty axes; the FCT CDF of ``uet-run --plot`` on either engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace
from typing import cast

import pytest
from live_options import FAST

pytest.importorskip("matplotlib")

from uet.fabric.model.config import SwitchConfig  # noqa: E402
from uet.fabric.model.telemetry import Telemetry  # noqa: E402
from uet.fabric.switch import FabricProcess  # noqa: E402
from uet.fabric.telemetry_io import _shown, plot, switch_thresholds  # noqa: E402

from uet.sim.plots import fct_cdf  # noqa: E402


def _records(queues: int) -> list[dict]:
    recs = []
    for q in range(queues):
        for i, depth in enumerate((0, 3000 * (q + 1), 1000, 0)):
            recs.append(
                {"event": "queue_depth", "t": i * 1_000_000, "node": "leaf0", "port": q, "tc": 0, "bytes": depth}
            )
        for i in range(5):
            recs.append({"event": "port_bytes", "t": i * 5_000_000, "node": "leaf0", "port": q, "tx_bytes": i * 10_000})
    return recs


def test_queue_and_throughput_plots_are_written_with_thresholds(tmp_path) -> None:
    th = switch_thresholds(SwitchConfig())
    assert {"ECN kmin tc0", "ECN kmax tc0", "PFC XOFF"} <= set(th) and th["ECN kmin tc0"] < th["ECN kmax tc0"]
    paths = plot(_records(15), tmp_path, top=12, thresholds=th)
    assert [os.path.basename(p) for p in paths] == ["queue_depth.png", "throughput.png"]
    assert all(os.path.getsize(p) > 5000 for p in paths)


def test_legend_says_when_only_the_busiest_are_shown() -> None:
    assert _shown(12, 15, "queues") == "busiest 12 of 15 queues"
    assert _shown(3, 3, "ports") == "all 3 ports"


def test_no_empty_axes(tmp_path) -> None:
    idle = [{"event": "queue_depth", "t": 0, "node": "s", "port": 0, "tc": 0, "bytes": 0}]
    idle.append({"event": "port_bytes", "t": 0, "node": "s", "port": 0, "tx_bytes": 5})
    assert plot(idle, tmp_path) == [] and os.listdir(tmp_path) == []
    assert fct_cdf({"flows": [{"completion_s": None}], "workload": "x", "endpoints": 2}, str(tmp_path)) is None


def test_queue_depth_sampled_on_the_grid_until_it_drains() -> None:
    """The fabric process samples every queue that holds bytes at each grid point, and once more
    when it has drained to zero; an idle queue adds nothing."""
    fp = SimpleNamespace(telemetry=Telemetry(enabled=True), _queue_last={})
    port = SimpleNamespace(index=3, qbytes=[0] * 8, queues=[[] for _ in range(8)])
    port.qbytes[0], port.queues[0] = 1500, [object()]
    for t, depth in ((10, 1500), (20, 0), (30, 0)):
        port.qbytes[0] = depth
        FabricProcess._sample_queues(cast(FabricProcess, fp), "leaf0", port, t)  # the fields it reads
    recs = [r.as_dict() for r in fp.telemetry.drain()]
    assert [(r["t"], r["bytes"]) for r in recs if r["event"] == "queue_depth"] == [(10, 1500), (20, 0)]


def test_uet_run_plot_writes_the_fct_cdf_on_the_live_engine(tmp_path) -> None:
    out = tmp_path / "plots"
    argv = [sys.executable, "-m", "uet.tools.run", *FAST, "-n", "3", "--messages", "2", "--size", "16KiB"]
    r = subprocess.run([*argv, "--plot", str(out), "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    cdf = str(out / "fct_cdf.png")
    assert cdf in res["plots"] and os.path.getsize(cdf) > 5000
    assert all(os.path.exists(p) for p in res["plots"])
