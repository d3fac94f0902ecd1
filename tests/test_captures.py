"""Captures and event logs from every engine (tools/capture_options.py): ``uet-sim --pcap`` per host
and per port with virtual nanosecond timestamps in pcapng, ``--eventlog``, both bounded by
``--capture-max``; ``uet-run --engine sim`` passing them through; the live endpoints' link tap
(uet.link.tap); the pcapng writer read back by our reader and by tshark."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from uet.fabric.telemetry_io import PcapTaps
from uet.tools.decode import main as decode_main
from uet.tools.run import main as run_main
from uet.tools.sim import main as sim_main

from uet.endpoint import Endpoint
from uet.link import loopback_addresses
from uet.link.direct import DirectLink
from uet.link.tap import TapLink
from uet.pcap import PcapngWriter, read_capture

SMALL = ["-n", "3", "--messages", "1", "--size", "8KiB", "--json"]


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


def _decoded(capsys: pytest.CaptureFixture[str], path: Path | str, *extra: str) -> list[dict]:
    assert decode_main(["--json", *extra, str(path)]) == 0  # 0 malformed, no integrity failure
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_sim_pcap_per_host_and_eventlog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = tmp_path / "ev.jsonl"
    assert sim_main([*SMALL, "--pcap", str(tmp_path / "p"), "--eventlog", str(ev)]) == 0
    res = _json(capsys)
    assert res["pcaps"] == [str(tmp_path / "p" / f"h{i}.pcapng") for i in range(3)]
    assert res["pcap_dropped"] == res["eventlog_dropped"] == 0
    assert (tmp_path / "p" / "h0.pcapng").read_bytes()[:4] == bytes.fromhex("0a0d0d0a")  # pcapng
    recs = list(read_capture(str(tmp_path / "p" / "h0.pcapng")))
    times = [t for r in recs if (t := r.timestamp_ns) is not None]
    assert len(times) == len(recs)
    assert times == sorted(times) and 0 < times[0] < times[-1] < res["virtual_s"] * 1e9 + 1  # virtual ns
    frames = _decoded(capsys, tmp_path / "p" / "h0.pcapng")
    assert {f["kind"] for f in frames} == {"uet"} and len(frames) == len(recs)
    # every host file holds what that host sent and what reached it
    for i in range(3):
        pairs = [{f["src"], f["dst"]} for f in _decoded(capsys, tmp_path / "p" / f"h{i}.pcapng")]
        assert set.intersection(*pairs)  # the host's own address is in every frame
        assert i or len(set.union(*pairs)) == 3  # the incast's receiver hears both senders
    lines = [json.loads(x) for x in ev.read_text().splitlines()]
    assert len(lines) == res["eventlog_records"] > 0
    assert {r["host"] for r in lines} == {0, 1, 2} and all("t" in r and "fep" in r for r in lines)


def test_sim_pcap_per_port_and_the_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = tmp_path / "ev.jsonl"
    argv = [*SMALL, "--pcap", str(tmp_path), "--pcap-per", "port", "--eventlog", str(ev), "--capture-max", "2KiB"]
    assert sim_main(argv) == 0
    res = _json(capsys)
    assert res["pcaps"] and all("-p" in Path(p).name for p in res["pcaps"])
    assert res["pcap_dropped"] > 0 and all(Path(p).stat().st_size <= 2048 for p in res["pcaps"])
    assert res["eventlog_dropped"] > 0
    last = json.loads(ev.read_text().splitlines()[-1])
    assert last["ev"] == "truncated" and last["dropped"] == res["eventlog_dropped"]
    for p in res["pcaps"]:
        _decoded(capsys, p)  # what fits is whole


def test_run_engine_sim_passes_them_through(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ev = tmp_path / "ev.jsonl"
    argv = ["--engine", "sim", "--transport", "both", *SMALL, "--pcap", str(tmp_path / "p"), "--eventlog", str(ev)]
    assert run_main(argv) == 0
    runs = _json(capsys)["runs"]
    for tr in ("uet", "roce"):
        assert runs[tr]["pcaps"][0].startswith(str(tmp_path / "p" / tr))
        assert runs[tr]["eventlog"] == str(tmp_path / f"ev-{tr}.jsonl")
    kinds = {f["kind"] for f in _decoded(capsys, runs["roce"]["pcaps"][0])}
    assert kinds == {"roce"}


async def test_a_live_endpoint_tapped_at_its_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = loopback_addresses(2)
    taps = PcapTaps(tmp_path, 0, per="host", fmt="pcapng")
    la = TapLink(DirectLink(a, 0), taps)
    eb = await Endpoint.open(b, port=0, peer_port=la.port)
    assert isinstance(eb.link, DirectLink)
    la.inner.peer_port = eb.link.port
    ea = Endpoint(la)
    async with ea, eb:
        got = asyncio.ensure_future(eb.recv())
        await asyncio.wait_for(ea.send(b, b"x" * 10_000), 20)
        assert (await asyncio.wait_for(got, 20)).data == b"x" * 10_000
    sent, received = la.counters["tx_packets"], la.counters["rx_packets"]
    taps.close()
    frames = _decoded(capsys, tmp_path / f"{a}.pcapng", "--port", str(eb.link.port))
    assert len(frames) == sent + received and {f["kind"] for f in frames} == {"uet"}
    out = [f for f in frames if f["src"] == a]
    assert len(out) == sent and all(f["sport"] == la.port and f["dport"] == eb.link.port for f in out)
    assert sum(f["uet"]["payload_length"] for f in out) == 10_000


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_tshark_reads_our_pcapng(tmp_path: Path) -> None:
    path = tmp_path / "x.pcapng"
    with PcapngWriter(str(path), name="h7") as w:
        w.write(bytes(60), 1_700_000_000_123_456_789)
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch", "-e", "frame.interface_name"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert out == ["1700000000.123456789", "h7"]
