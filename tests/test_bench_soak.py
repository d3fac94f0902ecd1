"""``uet-bench soak`` (tools/bench/soak.py): a short run between two live endpoints on loopback at
5 % loss with reordering and duplication; every message intact, samples with RSS."""

from __future__ import annotations

import json

import pytest
from uet.tools.bench import CRC_NOTE
from uet.tools.bench import main as bench_main


def test_soak_short_run_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "soak",
        "--minutes",
        "0.02",
        "--every",
        "0.4",
        "--max-size",
        "64KiB",
        "--window",
        "4",
        "--mode",
        "mixed",
        "--json",
    ]
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
    assert "CRC-32C data protection turned on" in pair_notes(PairOptions(corrupt=0.01))["integrity_note"]
    assert pair_notes(PairOptions(corrupt=0.01, tss=True)) == {}


def test_corrupt_without_tss_turns_crc_on_and_delivers_intact(capsys) -> None:
    """Issue 15 item 16: ``--corrupt`` without ``--tss`` runs with the CRC-32C trailer (said in
    one stderr line), so corrupted packets are dropped and retransmitted: the transfer is intact
    and the receiver counted CRC drops (before: wrong bytes reported as success)."""
    from uet.tools.bench import PairOptions, data_protect
    from uet.tools.bench import main as bench_main

    from uet.link import loopback_addresses

    assert data_protect(PairOptions(corrupt=0.1)) == "crc"
    # the plaintext companion of a --tss run is corrupted too: it gets the trailer; the secure one has TSS
    assert data_protect(PairOptions(corrupt=0.1, tss=True)) == "crc"
    assert data_protect(PairOptions(corrupt=0.1, tss=True, secure=True)) == data_protect(PairOptions()) == "none"
    argv = ["pair", "--size", "64KiB", "--corrupt", "0.1", "--rounds", "1", "--no-raw", "--counters", "--json"]
    rc = bench_main([*argv, "--addresses", ",".join(loopback_addresses(2))])
    cap = capsys.readouterr()
    rec = json.loads(cap.out)
    assert rc == 0 and rec["intact"] and rec["data_protect"] == "crc", rec
    assert [line for line in cap.err.splitlines() if "CRC-32C" in line] == [f"uet-bench: note: {CRC_NOTE}"]
    assert rec["receiver_counters"].get("crc_drop_bad", 0) + rec["sender_counters"].get("crc_drop_bad", 0) > 0


def test_demo_uud_says_best_effort_and_how_many_arrived() -> None:
    """Issue 15 item 19: UUD's row and note say it is best effort and how many messages arrived;
    under-delivery is not an exit-1 failure."""
    from uet.tools.demo import main as demo_main

    from uet.link import loopback_addresses

    argv = ["--size", "256KiB", "--modes", "uud", "--loss", "0.2", "--reorder", "0", "--dup", "0"]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = demo_main([*argv, "--addresses", ",".join(loopback_addresses(2))])
    text = out.getvalue()
    assert rc == 0, text
    assert "UUD is best effort" in text and "messages arrived" in text and "best effort:" in text
