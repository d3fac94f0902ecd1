"""``uet-bench soak`` (tools/bench_soak.py): a short run between two live endpoints on loopback at
5 % loss with reordering and duplication; every message intact, samples with RSS."""

from __future__ import annotations

import json

import pytest
from uet.tools.bench import main as bench_main


def test_soak_short_run_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["soak", "--minutes", "0.02", "--every", "0.4", "--max-size", "64KiB", "--window", "4", "--json"]
    rc = bench_main(args)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    summary = lines[-1]
    samples = [x["sample"] for x in lines[:-1]]
    assert rc == 0 and summary["ok"], summary
    assert summary["delivered"] > 0 and summary["missing"] == 0 and summary["failures"] == 0
    assert summary["corrupt"] == 0 and summary["duplicated"] == 0
    assert samples and all(s["rss_mb"] > 0 for s in samples)


def test_soak_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["soak", "--minutes", "0"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_pair_notes_say_what_uud_and_unprotected_corruption_mean() -> None:
    """Issue 15 items 16 and 19: the pair result says that UUD loses what a slow receiver cannot
    take, and that without TSS corrupted payload can be delivered as success."""
    from uet.tools.bench import PairOptions, pair_notes

    assert pair_notes(PairOptions()) == {}
    assert "no flow control" in pair_notes(PairOptions(mode="uud"))["uud_note"]
    assert "TSS" in pair_notes(PairOptions(corrupt=0.01))["integrity_note"]
    assert pair_notes(PairOptions(corrupt=0.01, tss=True)) == {}
