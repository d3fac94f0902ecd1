"""``uet-bench pair --mode rudi`` (and ``uet-demo --modes rudi``, the same transfer) moves the data
with idempotent RMA writes into an idempotent-safe region, never with sends: RUDI carries only
idempotent operations on idempotent-safe regions (behaviour.md §2.14). Before, it sent messages."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from uet.tools import bench

from uet.link import loopback_addresses


def test_rudi_transfer_is_idempotent_writes(capsys: pytest.CaptureFixture[str]) -> None:
    a, b = loopback_addresses(2)
    argv = ["pair", "--mode", "rudi", "--size", "60000", "--message-size", "20000", "--rounds", "1", "--no-raw",
            "--counters", "--json", "--addresses", f"{a},{b}", "--loss", "0.02", "--dup", "0.02"]  # fmt: skip
    assert bench.main(argv) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["intact"] and rec["messages"] == 3
    snd = rec["sender_counters"]
    assert snd.get("messages_sent", 0) == 0 and snd["ops_completed"] == 3  # three writes, no send
    assert rec["receiver_counters"].get("messages_received", 0) == 0


def test_demo_pass_rule_per_mode() -> None:
    """``uet-demo``'s verdict (uet.tools.bench.report.passed): a duplicate fails every mode; UUD
    passes with messages missing when there is no error, the reliable modes only when intact."""
    from uet.tools.bench.report import passed

    rec = {"intact": True, "duplicates": 0, "error": None}
    assert passed({**rec, "mode": "rud"}) and not passed({**rec, "mode": "rud", "duplicates": 1})
    assert not passed({**rec, "mode": "rod", "intact": False})
    assert passed({**rec, "mode": "uud", "intact": False}) and not passed({**rec, "mode": "uud", "error": "x"})
    assert not passed({**rec, "mode": "uud", "duplicates": 2})


def test_bench_pair_and_its_sweep_fail_a_duplicated_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """``uet-bench pair`` and its size sweep exit 1 on the same rule as ``uet-demo``: a transfer
    whose bytes all arrived intact but with a message delivered twice is a failure (exactly once)."""
    import uet.tools.bench.pair as pair
    import uet.tools.bench.sweep as sweep
    from uet.tools.bench import main

    def fake(dups: int) -> Callable[[Any], dict[str, Any]]:
        def run(opts: Any) -> dict[str, Any]:
            return {"mode": opts.mode, "intact": True, "duplicates": dups, "error": None, "message_size": 64}

        return run

    for dups, status in ((0, 0), (1, 1)):
        monkeypatch.setattr(pair, "run_pair", fake(dups))
        monkeypatch.setattr(sweep, "run_pair", fake(dups))
        assert main(["pair", "--json", "--size", "4096"]) == status
        assert main(["pair", "--json", "--sizes", "64,128", "--count", "2"]) == status
