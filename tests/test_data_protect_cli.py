"""``--data-protect`` and ``--link`` on the tools that run endpoints (tools/link_options.py): the
choice reaches the endpoints, impossible combinations are one-line usage errors (exit 2)."""

from __future__ import annotations

import json

import pytest
from uet.tools import bench, demo, peer

from uet.link import loopback_addresses


def test_demo_runs_with_the_crc_trailer(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = loopback_addresses(2)
    argv = ["--modes", "rud", "--size", "100000", "--data-protect", "crc", "--json", "--addresses", f"{a},{b}"]
    assert demo.main(argv) == 0
    out = capsys.readouterr()
    rec = json.loads(out.out)["runs"][0]
    assert rec["intact"] and rec["data_protect"] == "crc" and "CRC-32C data protection turned on" not in out.err


@pytest.mark.parametrize(("main", "argv", "message"), [
    (peer.main, ["127.0.0.9", "--data-protect", "tss"], "--data-protect tss needs --keys"),
    (peer.main, ["127.0.0.9", "--link", "ip", "--fabric", "127.0.0.1:9"], "--link ip cannot be combined"),
    (bench.main, ["rtt", "--link", "ip"], "runs against a uet-peer: add --peer ADDR"),
    (bench.main, ["pair", "--link", "ip"], "runs against a uet-peer: add --peer ADDR"),
    (bench.main, ["rtt", "--data-protect", "tss"], "runs without TSS here"),
    (bench.main, ["pair", "--peer", "127.0.0.9", "--sizes", "4KiB"], "with --peer give --size"),
    (bench.main, ["pair", "--peer", "127.0.0.9", "-a"], "with --peer give --size"),
    (bench.main, ["pair", "--peer", "127.0.0.9", "--count", "5"], "with --peer give --size"),
])  # fmt: skip
def test_impossible_combinations_are_usage_errors(
    main,
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],  # noqa: ANN001
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_bench_pair_reports_tss_when_it_ran(capsys: pytest.CaptureFixture[str]) -> None:
    """``uet-bench pair --data-protect tss`` ran its verdict's transfer under TSS: it says so (it
    said ``data_protect: none``)."""
    a, b = loopback_addresses(2)
    argv = ["pair", "--data-protect", "tss", "--size", "65536", "--no-raw", "--json", "--addresses", f"{a},{b}"]
    assert bench.main(argv) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["tss"] and rec["data_protect"] == "tss"
