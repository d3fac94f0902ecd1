"""The human tables of ``uet-run`` / ``uet-sim`` and the UET-against-RoCEv2 table: no Python
``None``/``True``/``False`` in a cell (yes/no and "–" instead), times in the unit that fits (µs for
µs-scale flow completion times, never ``9.969e-05``), thousands separators on large figures."""

from __future__ import annotations

import json
import re

import pytest
from uet.tools.cli import format_cell, format_number, format_seconds

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
    from uet.tools.compare import comparison, render_comparison

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
