"""uet-bench smoke tests: the commands run and report their keys (no timing assertions)."""

from __future__ import annotations

import argparse
import json

import pytest
from uet.tools import bench

from uet.link import loopback_addresses


def _addr() -> str:
    return ",".join(loopback_addresses(2))


def test_pair_json_keys(capsys) -> None:
    rc = bench.main(["pair", "--size", "1MiB", "--json", "--addresses", _addr()])
    out = json.loads(capsys.readouterr().out)
    for k in ("bytes", "intact", "duplicates", "goodput_gbps", "raw_udp_gbps", "ratio", "retransmits"):
        assert k in out
    assert out["bytes"] == 1 << 20 and out["intact"] is True and rc == 0
    assert out["raw_udp_gbps"] > 0 and out["goodput_gbps"] > 0 and out["ratio"] > 0
    assert out["sender_cpu_us_per_pkt"] > 0 and out["receiver_cpu_us_per_pkt"] > 0
    assert sorted(r["cpu_ratio"] for r in out["rounds"])[1] == out["cpu_ratio"] > 0
    rounds = out["rounds"]  # three alternating raw/UET rounds by default; the ratio is their median
    assert len(rounds) == 3 and all(r["intact"] for r in rounds)
    assert sorted(r["ratio"] for r in rounds)[1] == out["ratio"]


@pytest.mark.parametrize("receive", ["posted", "unexpected"])
def test_pair_receive_paths_with_several_messages(capsys, receive: str) -> None:
    argv = ["pair", "--size", "1MiB", "--message-size", "96KiB", "--rounds", "1", "--json", "--receive", receive]
    rc = bench.main(argv + ["--addresses", _addr()])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["intact"] is True and out["duplicates"] == 0 and "rounds" not in out
    cands = out["raw_candidates_gbps"]  # one round: the reference is the best candidate of that round
    assert set(cands) == {"blocking", "drain", "asyncio"} and out["raw_udp_gbps"] == max(cands.values())
    assert cands[out["raw_candidate"]] == out["raw_udp_gbps"]
    assert out["messages"] == out["messages_delivered"] == 11 and out["delivered_bytes"] == 1 << 20


def test_pair_rejects_zero_rounds(capsys) -> None:
    assert bench.main(["pair", "--rounds", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("uet-bench: error: argument --rounds")


def test_rtt_json_keys(capsys) -> None:
    rc = bench.main(["rtt", "--count", "30", "--json", "--addresses", _addr()])
    out = json.loads(capsys.readouterr().out)
    for k in ("uet_p50_us", "raw_p50_us", "ratio", "uet_p99_us", "raw_p99_us"):
        assert out[k] > 0
    cands = out["raw_candidates_p50_us"]  # the reference is the faster of the raw ping-pongs
    assert set(cands) == {"blocking", "spin", "asyncio"} and out["raw_p50_us"] == min(cands.values())
    assert cands[out["raw_candidate"]] == out["raw_p50_us"]
    assert rc == 0


def test_codec_is_dispatched(monkeypatch) -> None:
    import uet.tools.bench.codec as bc

    seen: list[tuple[int, int]] = []

    def run(ns: argparse.Namespace) -> int:
        seen.append((ns.number, ns.repeat))
        return 7

    monkeypatch.setattr(bc, "run", run)
    assert bench.main(["codec", "--number", "3", "--repeat", "2"]) == 7
    assert seen == [(3, 2)]


def test_usage_and_unknown_subcommand(capsys) -> None:
    assert bench.main([]) == 2
    assert bench.main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "pair" in err and err.count("\n") == 2 and "Traceback" not in err


@pytest.mark.parametrize("text,n", [("1MiB", 1 << 20), ("64k", 64000), ("512KiB", 512 << 10), ("100", 100)])
def test_parse_size(text: str, n: int) -> None:
    assert bench.parse_size(text) == n


def test_pair_table_lists_the_rounds(capsys) -> None:
    rc = bench.main(["pair", "--size", "256KiB", "--rounds", "2", "--addresses", _addr()])
    out = capsys.readouterr().out
    assert rc == 0 and "goodput_gbps" in out and "rounds (raw UDP and UET alternate" in out
    assert "{'raw_udp_gbps'" not in out  # the rounds are a table of their own, not a dict dump


def test_rtt_sweep_reports_latency_columns_per_size(capsys) -> None:
    rc = bench.main(["rtt", "--sizes", "64,2KiB", "--count", "20", "--json", "--addresses", _addr()])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and [r["size"] for r in out["results"]] == [64, 2048]
    for r in out["results"]:
        for side in ("uet", "raw"):
            v = [r[f"{side}_{k}_us"] for k in ("min", "p50", "p99", "p999", "max")]
            assert v == sorted(v) and v[0] > 0  # percentiles in order
            assert r[f"{side}_min_us"] <= r[f"{side}_avg_us"] <= r[f"{side}_max_us"]


def test_pair_sweep_one_row_per_message_size(capsys) -> None:
    """``pair --sizes`` (perftest -a style): one row per message size, ``--count`` messages each,
    every one intact; the table names the columns."""
    argv = ["pair", "--sizes", "1KiB,8KiB", "--count", "16", "--rounds", "1", "--addresses", _addr()]
    rc = bench.main([*argv, "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and [r["message_size"] for r in out["results"]] == [1024, 8192]
    for r in out["results"]:
        assert r["intact"] and r["messages"] == 16 and r["bytes"] == 16 * r["message_size"]
        assert r["goodput_gbps"] > 0 and r["raw_udp_gbps"] > 0
    rc = bench.main(["pair", "--sizes", "1KiB", *argv[3:], "--no-raw"])
    table = capsys.readouterr().out
    assert rc == 0 and "pair sweep" in table and "goodput (Gbit/s)" in table and "1024" in table
