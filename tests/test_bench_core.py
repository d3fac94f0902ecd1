"""``uet-bench core`` smoke test: it runs and reports its keys (no timing assertions)."""

from __future__ import annotations

import json

from uet.tools import bench_core


def test_core_json_keys(capsys) -> None:
    rc = bench_core.main(["--packets", "300", "--repeat", "1", "--json", "--payload", "4096", "--payload", "8192"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["mode"] == "RUD"
    assert [r["payload"] for r in out["results"]] == [4096, 8192]
    for r in out["results"]:
        assert r["packets"] == 300 and r["retransmits"] == 0 and r["acks"] > 0
        assert r["sender_us_per_pkt"] > 0 and r["receiver_us_per_pkt"] > 0


def test_core_table(capsys) -> None:
    assert bench_core.main(["--packets", "100", "--repeat", "1", "--payload", "1024"]) == 0
    text = capsys.readouterr().out
    assert "sender" in text and "1024" in text


def test_run_core_checks_delivery() -> None:
    r = bench_core.run_core(payload=512, packets=200, message=2048, window=16)
    assert r["packets"] == 200 and r["total_us_per_pkt"] >= r["sender_us_per_pkt"]
