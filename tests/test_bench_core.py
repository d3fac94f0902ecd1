"""``uet-bench core`` smoke test: it runs and reports its keys (no timing assertions)."""

from __future__ import annotations

import json

from uet.tools.bench import core as bench_core


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


def test_core_rtt_counts_one_exchange_per_round_trip(capsys) -> None:
    """``--rtt``: each round trip is the ping and the ACK of the previous reply one way, the reply
    and the ping's ACK the other; each side sees its send completion and its receive."""
    assert bench_core.main(["--rtt", "--trips", "200", "--repeat", "1", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["rtt"]
    assert r["size"] == 64 and r["trips"] == 200
    assert r["us_per_rt"] > 0 and r["ping_us_per_rt"] > 0 and r["echo_us_per_rt"] > 0
    assert r["datagrams_ping_to_echo"] == 2 and r["datagrams_echo_to_ping"] == 2
    assert r["events_ping"] == 2 and r["events_echo"] == 2
    assert r["py_calls_per_rt"] > 0


def test_core_rtt_table(capsys) -> None:
    assert bench_core.main(["--rtt", "--trips", "50", "--repeat", "1", "--size", "4096"]) == 0
    text = capsys.readouterr().out
    assert "round trip" in text and "4096-byte" in text
