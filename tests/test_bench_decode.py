"""``uet-bench decode --against-tshark``: both decoders timed on the same capture in alternating
rounds, reported as packets per CPU second and ratios; the made capture mixes a simulated incast
with the sample capture. Sizes are tiny: this checks the benchmark, not the speed."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
from uet.interop.samples import load_sample
from uet.tools.bench import main
from uet.tools.bench.decode import LARGE, add_parser, made_capture_size, mixed_capture

from uet.pcap import read_capture

pytestmark = pytest.mark.processes  # tshark reads a capture file: no network (tests/conftest.py)


def test_mixed_capture_holds_the_incast_and_the_sample(tmp_path: Path) -> None:
    n = mixed_capture(tmp_path / "m.pcapng", hosts=3, size=8192)
    frames = [r.frame for r in read_capture(str(tmp_path / "m.pcapng"))]
    sample = [r.frame for r in read_capture(load_sample())]
    assert n == len(frames) > len(sample) and frames[-len(sample) :] == sample


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_against_tshark_reports_both_modes_with_ratios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pcap = tmp_path / "s.pcap"
    pcap.write_bytes(load_sample())
    assert main(["decode", str(pcap), "--against-tshark", "--rounds", "1", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["frames"] == 29 and set(rec["modes"]) == {"summary", "json"}
    for m in rec["modes"].values():
        assert m["uet_decode_pps"] > 0 and m["tshark_pps"] > 0
        assert m["ratio"] == pytest.approx(m["uet_decode_pps"] / m["tshark_pps"], rel=0.05)


def test_large_makes_the_issue_capture_and_wants_no_file(capsys: pytest.CaptureFixture[str]) -> None:
    # --large: 33 senders of 1 MiB (the 30,089-frame capture), not with a capture file
    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers())
    assert LARGE == (33, 1 << 20)
    assert made_capture_size(p.parse_args(["decode", "--large"])) == LARGE
    assert made_capture_size(p.parse_args(["decode", "--hosts", "5"])) == (5, 256 << 10)
    assert main(["decode", "x.pcap", "--large"]) == 2
    assert "--large makes a capture" in capsys.readouterr().err
