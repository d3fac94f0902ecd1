"""The human tables of ``uet-run`` / ``uet-sim`` and the UET-against-RoCEv2 table: no Python
``None``/``True``/``False`` in a cell (yes/no and "–" instead), times in the unit that fits (µs for
µs-scale flow completion times, never ``9.969e-05``), thousands separators on large figures."""

from __future__ import annotations

import json
import re

import pytest
from uet.tools.cli import format_cell, format_number, format_seconds

pytestmark = pytest.mark.in_memory  # uet-run's tables from results built here; no run starts

#: What must never show in a human table.
_PYTHON = re.compile(r"\b(None|True|False)\b|\de[-+]\d")


def _flow(i: int, completion: float | None, **kw: object) -> dict[str, object]:
    return {"flow": i, "src": i, "dst": 0, "bytes": 1_048_576, "completion_s": completion, "goodput_gbps": 84.2,
            "slowdown": None, "retransmits": 12_345, "intact": completion is not None, "error": None, **kw}  # fmt: skip


def _result() -> dict[str, object]:
    return {
        "workload": "incast", "endpoints": 2, "elapsed_s": 0.000123456, "ok": False, "transport": "uet",
        "flows": [_flow(1, 9.969e-05), _flow(2, None, goodput_gbps=None, retransmits=None)],
        "fct": {"flows": 1, "mean_s": 9.969e-05, "p50_s": 9.969e-05, "p90_s": 9.969e-05, "p99_s": 9.969e-05,
                "max_s": 9.969e-05, "slowdown_p50": 1.5, "slowdown_p99": None, "slowdown_max": 2.25},
        "fabric": {"ecn_marks": 1_234_567, "trims": 0, "drops": None, "pauses": 3, "marks_by_port": {"s0:1": 12_000}},
        "pacing": {"firings": 1_000_000, "timer": "loop", "p50_us": 1.25e-05, "p99_us": 3.0, "max_us": 12_345.6},
    }  # fmt: skip


def test_helpers_never_print_an_exponent_or_python_literal() -> None:
    assert format_seconds(9.969e-05) == "99.7 µs" and format_seconds(None) == "–"
    assert format_number(1_234_567) == "1,234,567" and format_number(12345.6) == "12,346"
    assert format_number(1.23456) == "1.235" and format_number(1.23e-05) == "0.0000123"
    assert [format_cell(v) for v in (None, True, False, 3.0, "x")] == ["–", "yes", "no", "3", "x"]


def test_run_table_has_no_python_literals_and_shows_us_scale_times(capsys: pytest.CaptureFixture[str]) -> None:
    from uet.tools.run import render

    render(_result())
    out = capsys.readouterr().out
    assert not _PYTHON.search(out), out
    assert "99.7 µs" in out and "123 µs" in out  # the FCT and the title's elapsed time
    assert "1,234,567" in out and "12,345" in out and "12,000" in out and "1,000,000" in out
    assert "–" in out and "yes" in out and "no" in out


def test_comparison_table_shows_times_in_their_unit(capsys: pytest.CaptureFixture[str]) -> None:
    from uet.tools.compare import render_comparison

    from uet.experiments.compare import comparison

    render_comparison(comparison({"uet": _result(), "roce": {**_result(), "ok": True}}), "t")
    out = capsys.readouterr().out
    assert not _PYTHON.search(out), out
    assert "99.7 µs" in out and "1,234,567" in out and "yes" in out


def test_a_small_sim_run_renders_in_human_units(capsys: pytest.CaptureFixture[str]) -> None:
    from uet.tools.sim import main

    args = ["-w", "incast", "-n", "3", "--size", "16KiB", "--messages", "1"]
    assert main([*args, "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert all(f["completion_s"] < 1e-3 for f in res["flows"])  # µs-scale FCTs
    assert main(args) == 0
    out = capsys.readouterr().out
    assert not _PYTHON.search(out), out
    assert "µs" in out and " s " not in out.split("flow completion time")[1].split(";")[0]


def test_compare_lb_table_separates_thousands(capsys: pytest.CaptureFixture[str]) -> None:
    from uet.tools.sim_compare import render_compare

    row = {"lb": "ecmp", "seed": 1, "tail_us": 1234.5, "p99_us": 99.0, "p50_us": 9.5, "lost_packets": 12_345,
           "resent_packets": 1_000_000, "ok": True}  # fmt: skip
    render_compare({"workload": "incast", "endpoints": 4, "rows": [row], "mean_tail_us": {"ecmp": 1234.5}})
    out = capsys.readouterr().out
    assert "12,345" in out and "1,000,000" in out and "1,234.5" in out and not _PYTHON.search(out)


def test_summary_shows_the_aggregates_and_the_worst_flows(capsys: pytest.CaptureFixture[str]) -> None:
    """``--summary`` for runs of hundreds of flows: the aggregates and the ten worst flows (the
    ones not intact first, then by slowdown), not a row per flow; without it a large run's table
    says that ``--summary`` exists."""
    from uet.tools.run import WORST_FLOWS, render, worst_flows

    flows = [_flow(i, 1e-5 * (1 + i % 7), slowdown=1.0 + (i % 7) / 10) for i in range(300)]
    flows[123] = _flow(123, None, unfinished=True, error="unfinished")
    res = {**_result(), "flows": flows, "endpoints": 300}
    worst = worst_flows(flows)
    assert len(worst) == WORST_FLOWS and worst[0]["flow"] == 123
    assert all(f["slowdown"] == 1.6 for f in worst[1:])
    render(res, summary=True)
    out = capsys.readouterr().out
    assert not _PYTHON.search(out), out
    assert "the 10 worst of 300 flows" in out and "299 of 300" in out and "unfinished" in out
    assert len([ln for ln in out.splitlines() if "→" in ln and ln.startswith("│")]) == WORST_FLOWS
    render(res)
    out = capsys.readouterr().out
    assert len([ln for ln in out.splitlines() if "→" in ln and ln.startswith("│")]) == 300
    assert "300 flows: --summary shows the aggregates and the 10 worst" in out


def test_uet_sim_summary_option(capsys: pytest.CaptureFixture[str]) -> None:
    from uet.tools.sim import main

    assert main(["-w", "incast", "-n", "13", "--size", "4KiB", "--messages", "1", "--summary"]) == 0
    out = capsys.readouterr().out
    assert "the 10 worst of 12 flows" in out and "12 of 12" in out and not _PYTHON.search(out)


def _titles(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, tuple[float, float], tuple[float, float]]]:
    """(file, title, x limits, y limits) of every figure the plot modules save."""
    import uet.fabric.telemetry_io as tio

    import uet.sim.plots as plots

    seen: list[tuple[str, str, tuple[float, float], tuple[float, float]]] = []

    def spy(save):
        def wrapped(fig, folder, name):
            ax = fig.axes[0]
            seen.append((name, ax.get_title(), ax.get_xlim(), ax.get_ylim()))
            return save(fig, folder, name)

        return wrapped

    monkeypatch.setattr(tio, "_save", spy(tio._save))
    monkeypatch.setattr(plots, "_save", spy(plots._save))
    return seen


def test_plot_titles_name_the_transport_and_axes_start_at_0(monkeypatch, tmp_path) -> None:
    """UET's and RoCEv2's figures of ``--transport both`` had the same titles; the FCT CDF's axes
    started at the first flow's completion time (47,000 µs) and at half the flows; rates and
    depths are drawn from 0 too."""
    pytest.importorskip("matplotlib")
    from uet.sim.plots import fct_cdf, write_plots
    from uet.sim.scenario import simulate

    seen = _titles(monkeypatch)
    res = simulate(
        {"workload": "incast", "endpoints": 3, "message_bytes": 16384, "messages": 1, "transport": "roce"},
        timeline=True,
    )
    write_plots(res, str(tmp_path / "roce"))
    assert {"fct_cdf.png", "queue_depth.png", "throughput.png"} <= {name for name, _, _, _ in seen}, seen
    for name, title, _, ylim in seen:
        assert title.startswith("RoCEv2: ") and ylim[0] == 0, (name, title, ylim)
    seen.clear()
    fct_cdf({**res, "transport": "uet"}, str(tmp_path / "uet"))
    assert seen[0][1].startswith("UET: FCT CDF")
    seen.clear()
    live = {"workload": "incast", "endpoints": 3, "transport": "roce"}
    live["flows"] = [{"completion_s": 0.046975}, {"completion_s": 0.047154}]
    fct_cdf(live, str(tmp_path / "live"))
    ((_, title, xlim, ylim),) = seen
    assert title.startswith("RoCEv2: FCT CDF") and xlim[0] == 0 and ylim[0] == 0
    assert 47 < xlim[1] < 60  # in ms, the unit that fits


def test_uet_fabric_plot_label(monkeypatch, tmp_path) -> None:
    """The live engine's figures are drawn by the fabric process: ``uet-run`` hands it the
    transport as ``--plot-label``, the beginning of every title."""
    pytest.importorskip("matplotlib")
    from uet.fabric.telemetry_io import plot

    from uet.live.launcher import Launcher
    from uet.scenario import run_defaults

    seen = _titles(monkeypatch)
    recs = [{"event": "queue_depth", "t": t * 10**6, "node": "leaf0", "port": 0, "tc": 0, "bytes": b}
            for t, b in ((1, 0), (2, 3000), (3, 0))]  # fmt: skip
    recs += [
        {"event": "port_bytes", "t": t * 10**6, "node": "leaf0", "port": 0, "tx_bytes": t * 1000} for t in range(4)
    ]
    plot(recs, tmp_path, label="RoCEv2")
    assert [t for _, t, _, _ in seen] == ["RoCEv2: Egress queue depth per port and traffic class",
                                          "RoCEv2: Throughput per switch port"]  # fmt: skip
    la = Launcher(dict(run_defaults("live"), transport="roce", plot=str(tmp_path)), {}, {})
    args = la.fabric_args(3)
    assert args[args.index("--plot-label") + 1] == "RoCEv2"
