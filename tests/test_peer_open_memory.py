"""``uet-peer`` without ``--keys`` is an open memory server (issue 29 item 13): it always warns on
stderr, and on an address other hosts can reach it refuses to start unless ``--insecure``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from uet.tools import peer

TIMEOUT = 60.0


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "uet.tools.peer", *argv], capture_output=True, text=True,
                          timeout=TIMEOUT)  # fmt: skip


def _serve_briefly(argv: list[str]) -> tuple[dict, str]:
    """Start a peer, read its identity line, stop it; returns (identity, stderr)."""
    p = subprocess.Popen([sys.executable, "-m", "uet.tools.peer", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert p.stdout is not None
        ident = json.loads(p.stdout.readline())
    finally:
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=TIMEOUT)
    assert p.returncode == 0, err
    return ident, err


def test_refuses_a_non_loopback_address_without_keys() -> None:
    for argv in (["10.0.0.2"], ["0.0.0.0"], ["10.0.0.2", "--fabric", "10.0.0.1:9000"]):  # noqa: S104
        r = _run(argv)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
        assert "--keys" in r.stderr and "--insecure" in r.stderr and "read and write" in r.stderr


def test_insecure_starts_but_still_warns() -> None:
    # 10.0.0.2 is not this host's: the peer gets past the check and fails to bind (exit 1), after the warning
    r = _run(["10.0.0.2", "--insecure"])
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("uet-peer: warning: no --keys") and "the network" in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_loopback_without_keys_warns_and_with_keys_does_not(tmp_path: Path) -> None:
    from uet.keyfile import write_key_file
    from uet.tss.domain import SdMode, SecureDomain

    ident, err = _serve_briefly(["127.0.0.61", "--port", "24793"])
    assert ident["address"] == "127.0.0.61"
    assert err.splitlines()[0] == (
        "uet-peer: warning: no --keys: anyone on this host who reaches 127.0.0.61 port 24793 "
        "can read and write its published memory regions"
    )
    keys = tmp_path / "sd.toml"
    write_key_file(keys, [SecureDomain.generate(0x51, SdMode.CLUSTER)])
    ident, err = _serve_briefly(["127.0.0.61", "--port", "24795", "--keys", str(keys)])
    assert ident["tss_sdi"] == 0x51 and "warning" not in err, err


def test_what_counts_as_reachable() -> None:
    parse = peer.build_parser().parse_args
    assert not peer.reachable_from_elsewhere(parse(["127.0.0.9"]))
    assert not peer.reachable_from_elsewhere(parse(["::1"]))
    assert peer.reachable_from_elsewhere(parse(["192.168.1.4"]))
    # through a switch: what matters is where the switch listens, not the fabric's own addresses
    assert not peer.reachable_from_elsewhere(parse(["10.0.0.2", "--fabric", "127.0.0.1:9000"]))
    assert peer.reachable_from_elsewhere(parse(["10.0.0.2", "--fabric", "10.1.1.1:9000"]))
