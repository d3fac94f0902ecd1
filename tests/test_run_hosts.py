"""``uet-run --hosts``: usage errors are one line with exit status 2 (tools/run.py; the ranks run
in uet/live/hosts.py). The runs themselves are in tests/test_netns.py (ranks on namespaced hosts)
and the README (all ranks on loopback addresses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from uet.tools import run

from uet.link import loopback_addresses


@pytest.mark.parametrize(("argv", "message"), [
    (["--rank", "1"], "go with --hosts"),
    (["--link", "ip"], "go with --hosts"),
    (["--hosts", "127.0.0.5"], "at least two addresses"),
    (["--hosts", "127.0.0.5,nowhere"], "'nowhere' is not an IP address"),
    (["--hosts", "127.0.0.5,127.0.0.5"], "its own address"),
    (["--hosts", "127.0.0.5,127.0.0.6", "-n", "3"], "--endpoints 3 but --hosts names 2"),
    (["--hosts", "127.0.0.5,127.0.0.6", "--rank", "2"], "ranks are 0..1"),
    (["--hosts", "127.0.0.5,127.0.0.6", "--engine", "sim"], "drop --engine sim"),
    (["--hosts", "127.0.0.5,127.0.0.6", "--pcap", "x"], "needs the software fabric"),
    (["--keys", "k"], "go with --hosts"),
    (["--hosts", "127.0.0.5,127.0.0.6", "--data-protect", "tss"], "--data-protect tss needs --keys"),
    (["--hosts", "127.0.0.5,127.0.0.6", "--keys", "/nonexistent/k"], "--keys goes with --data-protect tss"),
    (["--hosts", "127.0.0.5,127.0.0.6", "--keys", "k", "--data-protect", "crc"], "exclude each other"),
    (["--hosts", "127.0.0.5,127.0.0.6", "--keys", "/nonexistent/k", "--data-protect", "tss"], "cannot open key file"),
])  # fmt: skip
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def _key_file(tmp_path: Path, domains: int = 1) -> str:
    from uet.keyfile import write_key_file
    from uet.tss.domain import SdMode, SecureDomain

    path = str(tmp_path / "sd.keys")
    write_key_file(path, [SecureDomain.generate(0x51 + i, SdMode.CLUSTER) for i in range(domains)])
    return path


def test_keys_file_with_two_domains_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--hosts", "127.0.0.5,127.0.0.6", "--data-protect", "tss", "--keys", _key_file(tmp_path, 2)]
    assert run.main(argv) == 2
    err = capsys.readouterr().err
    assert "--keys:" in err and "2 secure domains" in err and err.count("\n") == 1


def test_every_rank_runs_tss_with_the_keys(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """``--keys`` reaches every rank (each a child ``uet-run --rank R``): the messages arrive
    intact through TSS, and the result says so."""
    a, b = loopback_addresses(2)
    keys = _key_file(tmp_path)
    argv = ["--hosts", f"{a},{b}", "--data-protect", "tss", "--keys", keys, "--workload", "incast", "--messages", "2"]
    assert run.main([*argv, "--size", "4096", "--timeout", "20", "--json"]) == 0
    rec = json.loads(capfd.readouterr().out)
    assert rec["ok"] and rec["data_protect"] == "tss" and rec["flows"]
