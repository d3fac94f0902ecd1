"""``uet-run --hosts``: usage errors are one line with exit status 2 (tools/run_hosts.py). The
runs themselves are in tests/test_netns.py (ranks on namespaced hosts) and the README (all ranks
on loopback addresses)."""

from __future__ import annotations

import pytest
from uet.tools import run


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
])  # fmt: skip
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
