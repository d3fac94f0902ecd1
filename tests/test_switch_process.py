"""The asyncio switch process with raw frames over loopback UDP (fabric/switch.py, tools/fabric.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from uet.fabric.profiles import load_topology, overrides_to_dict
from uet.fabric.switch import FabricProcess, ProcessConfig
from uet.fabric.topology import _host_mac

from uet.pcap import LINKTYPE_ETHERNET, read_capture
from uet.wire.build import build_frame
from uet.wire.net import inet_checksum

TIMEOUT = 10.0


class Host:
    """A raw 'NIC': a UDP socket that exchanges Ethernet frames with one switch port."""

    def __init__(self, port: tuple[str, int], ip: str = "0.0.0.0") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.port = port
        self.ip = ip

    def send(self, frame: bytes) -> None:
        self.sock.sendto(frame, self.port)

    def announce(self) -> None:
        """Gratuitous ARP naming this host's IP (the switch learns only from its own host)."""
        self.send(arp_announce(self.ip))

    async def recv(self, timeout: float = TIMEOUT) -> bytes:
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.sock_recv(self.sock, 65536), timeout)

    def close(self) -> None:
        self.sock.close()


def arp_announce(ip: str, mac: bytes = b"\x02\x00\x00\x00\x00\x00") -> bytes:
    spa = socket.inet_aton(ip)
    arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac, spa, bytes(6), spa)
    return b"\xff" * 6 + mac + b"\x08\x06" + arp + bytes(18)


async def start(overrides: Sequence[str] = (), **cfg: Any) -> FabricProcess:
    topo = load_topology("default", overrides=overrides_to_dict(list(overrides)))
    fp = FabricProcess(topo, ProcessConfig(**cfg))
    await fp.start()
    return fp


async def until(cond, limit: int = 100_000) -> None:
    """Yield to the loop until ``cond()`` holds (each turn polls sockets; no wall-clock sleep)."""
    for _ in range(limit):
        if cond():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


@pytest.mark.parametrize("timer", ["timerfd", "loop"])
async def test_forwarding_between_host_ports(timer):
    fp = await start(timer=timer)
    assert fp.timer.backend == timer
    h0, h5 = Host(fp.ports[0]), Host(fp.ports[5], fp.fabric.host_ip(5))
    try:
        h5.announce()
        await until(lambda: fp.addrs[5] is not None)
        src, dst = fp.fabric.host_ip(0), fp.fabric.host_ip(5)
        sent = [build_frame(b"\x10\x00" + bytes([i]) * 500, src, dst, entropy=1000 + i, ecn=2) for i in range(20)]
        for f in sent:
            h0.send(f)
        got = [await h5.recv() for _ in sent]
        assert sorted(g[-500:] for g in got) == sorted(f[-500:] for f in sent)
        g = got[0]
        assert g[0:6] == _host_mac(dst)  # destination rewritten to the host's MAC
        assert g[6:12] == fp.fabric.gateway_mac(5)  # source: the leaf port
        assert g[14 + 8] == 64 - 3  # leaf, spine, leaf: TTL − 3
        assert inet_checksum(g[14:34]) == 0
        s = fp.summary()
        assert s["io"]["rx_frames"] == 21 and s["io"]["arp_rx"] == 1 and s["io"]["tx_frames"] == 20
        assert s["fabric"]["drops"] == 0
        assert s["pacing"]["firings"] >= 1 and s["pacing"]["p50_us"] >= 0
    finally:
        fp.close()
        h0.close()
        h5.close()


async def test_unknown_host_is_counted_then_learned():
    fp = await start()
    h0, h1 = Host(fp.ports[0]), Host(fp.ports[1])
    try:
        f = build_frame(b"\x10\x00" + bytes(100), fp.fabric.host_ip(0), fp.fabric.host_ip(1), entropy=1)
        h0.send(f)
        await until(lambda: fp.stats["host_unknown"] == 1)
        h1.send(build_frame(b"\x10\x00" + bytes(100), fp.fabric.host_ip(1), fp.fabric.host_ip(0), entropy=2))
        await until(lambda: fp.addrs[1] is not None)
        h0.send(f)
        got = await h1.recv()
        assert got[-100:] == bytes(100)
    finally:
        fp.close()
        h0.close()
        h1.close()


async def test_pfc_pause_frames_reach_senders_and_nothing_is_lost():
    # 1 Mb/s host links, lossless TC3 with a low XOFF: two senders into one receiver. The queue
    # builds only while both senders' frames arrive faster than the receiver's link drains them,
    # so the burst must not be spread out by the test process losing the CPU: at 10 Mb/s, 2 ms
    # between the pairs of frames (60 ms in all, a loaded CI machine) left no XOFF in 3 runs of 3;
    # at 1 Mb/s the same spread still pauses (a frame takes 8 ms; XOFF needs 8 of them queued)
    fp = await start(
        [
            "host_link.rate_bps=1e6",
            "switch.pfc.xoff=8000",
            "switch.pfc.xon=5000",
            "switch.pfc.headroom=20000",
            "switch.tcs.3.ecn.kmin=3000",  # ECN before PFC (config.check_thresholds)
            "switch.tcs.3.ecn.kmax=6000",
        ]
    )
    rx, a, b = (Host(fp.ports[i], fp.fabric.host_ip(i)) for i in range(3))
    try:
        for h in (rx, a, b):
            h.announce()
        await until(lambda: all(fp.addrs[i] is not None for i in range(3)))
        n = 30
        dst = fp.fabric.host_ip(0)
        for i in range(n):
            for h, idx in ((a, 1), (b, 2)):
                h.send(build_frame(b"\x10\x00" + bytes(1000), fp.fabric.host_ip(idx), dst, entropy=i, dscp=26))
        frames = [await rx.recv() for _ in range(2 * n)]
        assert len(frames) == 2 * n  # lossless: every frame arrives
        pauses: list[int] = []
        while True:
            try:
                f = await a.recv(timeout=0.5 if pauses else TIMEOUT)
            except TimeoutError:
                break
            assert f[12:14] == b"\x88\x08" and f[14:16] == b"\x01\x01"
            enable = int.from_bytes(f[16:18], "big")
            quanta = int.from_bytes(f[18 + 2 * 3 : 20 + 2 * 3], "big")
            assert enable == 1 << 3
            pauses.append(quanta)
            if quanta == 0:
                break
        assert pauses[0] == 0xFFFF and pauses[-1] == 0  # XOFF then XON
        c = fp.summary()["fabric"]
        assert c["pauses"] >= 2 and c["drops"] == 0
    finally:
        fp.close()
        for h in (rx, a, b):
            h.close()


async def test_pcap_taps_read_back_and_tshark(tmp_path):
    fp = await start(pcap_dir=str(tmp_path))
    h0, h5 = Host(fp.ports[0]), Host(fp.ports[5], fp.fabric.host_ip(5))
    try:
        h5.announce()
        await until(lambda: fp.addrs[5] is not None)
        for i in range(5):
            h0.send(build_frame(b"\x10\x00" + bytes(300), fp.fabric.host_ip(0), fp.fabric.host_ip(5), entropy=40 + i))
        for _ in range(5):
            await h5.recv()
    finally:
        fp.close()
        h0.close()
        h5.close()
    path = tmp_path / "leaf0-p0.pcap"
    recs = list(read_capture(str(path)))
    assert len(recs) == 5 and all(r.linktype == LINKTYPE_ETHERNET for r in recs)
    assert all(r.frame[36:38] == (4793).to_bytes(2, "big") for r in recs)
    assert {r.frame[34:36] for r in recs} == {(40 + i).to_bytes(2, "big") for i in range(5)}
    ts = sorted(t for r in recs if (t := r.timestamp_ns) is not None)
    assert len(ts) == len(recs)
    assert ts[0] >= fp.epoch_ns and ts[-1] > ts[0]  # nanosecond stamps, one per frame
    assert len(list(read_capture(str(tmp_path / "leaf1-p1.pcap")))) == 5  # the host port at the far end
    tshark = shutil.which("tshark")
    if tshark is None:
        pytest.skip("tshark not installed (apt-get install -y tshark)")
    out = subprocess.run(
        [tshark, "-r", str(path), "-T", "fields", "-e", "eth.type", "-e", "ip.proto", "-e", "udp.dstport"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("\n")
    rows = [line.split("\t") for line in out if line.strip()]
    assert len(rows) == 5
    assert all(r == ["0x0800", "17", "4793"] for r in rows), rows


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_clean_shutdown_flushes_everything(tmp_path, sig):
    tel = tmp_path / "tel.jsonl"
    args = [sys.executable, "-m", "uet.tools.fabric", "--telemetry", str(tel), "--pcap", str(tmp_path / "pcap")]
    args += ["--plot", str(tmp_path / "plots"), "-o", "switch.lb.mode=spray_rr", "--sample-ms", "5"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.stdout is not None
        ready = json.loads(p.stdout.readline())
        assert ready["event"] == "ready" and len(ready["hosts"]) == 8
        h = ready["hosts"]
        s0 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s1 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s1.bind(("127.0.0.1", 0))
        s1.settimeout(TIMEOUT)
        s1.sendto(arp_announce(h[6]["ip"]), tuple(h[6]["udp"]))
        for i in range(40):
            f = build_frame(b"\x10\x00" + bytes(900), h[0]["ip"], h[6]["ip"], entropy=i, ecn=2)
            s0.sendto(f, tuple(h[0]["udp"]))
        for _ in range(40):
            s1.recv(65536)
        s0.close()
        s1.close()
        p.send_signal(sig)
        rest = p.stdout.read()
        assert p.wait(timeout=30) == 0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    summary = json.loads(rest.strip().splitlines()[-1])
    assert summary["event"] == "summary" and summary["io"]["tx_frames"] == 40
    assert summary["pacing"]["timer"] in ("timerfd", "loop")
    recs = [json.loads(line) for line in tel.read_text().splitlines()]
    assert recs[0]["event"] == "start" and recs[-1]["event"] == "summary"
    kinds = {r["event"] for r in recs}
    assert {"queue_depth", "port_bytes"} <= kinds
    sent = max(r["tx_bytes"] for r in recs if r["event"] == "port_bytes" and r["node"] == "leaf1")
    assert sent >= 40 * 900
    assert sorted(os.listdir(tmp_path / "plots")) == ["queue_depth.png", "throughput.png"]
    assert (tmp_path / "plots" / "throughput.png").stat().st_size > 1000
    assert len(list(read_capture(str(tmp_path / "pcap" / "leaf1-p2.pcap")))) == 40


def test_cli_usage_error():
    p = subprocess.run(
        [sys.executable, "-m", "uet.tools.fabric", "-o", "no_such_option=1"], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 2 and "no_such_option" in p.stderr and "Traceback" not in p.stderr


async def test_live_table_renders_ports_and_queues():
    import io

    from rich.console import Console
    from uet.tools.fabric import _live_table

    fp = await start()
    try:
        prev: dict = {}
        table = _live_table(fp, prev, 0.5)
        buf = io.StringIO()
        Console(file=buf, width=200).print(table)
        text = buf.getvalue()
        assert "leaf0:0" in text and "spine1:1" in text and "marks=0" in text
        assert len(prev) == sum(len(sw.ports) for sw in fp.fabric.switches.values())
    finally:
        fp.close()


async def test_a_stranger_cannot_take_over_a_host_port():
    """Issue 15 item 5: the port answered whoever sent the latest datagram to it; a local process
    sending junk to host 1's port received host 1's frames (and the flow stayed dead). Now the
    address is learnt only from host 1's own frames and moves only by its ARP announcement."""
    fp = await start()
    h0 = Host(fp.ports[0], fp.fabric.host_ip(0))
    h1 = Host(fp.ports[1], fp.fabric.host_ip(1))
    evil = Host(fp.ports[1])
    try:
        h1.announce()
        await until(lambda: fp.addrs[1] is not None)
        learnt = fp.addrs[1]
        forged = build_frame(b"\x10\x00" + bytes(10), "10.9.9.9", fp.fabric.host_ip(0), entropy=1)
        for junk in (b"x", bytes(60), forged):
            evil.send(junk)
        evil.send(arp_announce("10.9.9.9"))  # an announcement of another IP
        await until(lambda: fp.stats["host_spoofed"] == 4)
        assert fp.addrs[1] == learnt
        f = build_frame(b"\x10\x00" + bytes(100), fp.fabric.host_ip(0), fp.fabric.host_ip(1), entropy=1)
        h0.send(f)
        assert (await h1.recv())[-100:] == bytes(100)
        # the host restarts on a new socket and re-announces itself: the port follows it
        h1b = Host(fp.ports[1], fp.fabric.host_ip(1))
        h1b.announce()
        await until(lambda: fp.addrs[1] != learnt)
        h0.send(f)
        assert (await h1b.recv())[-100:] == bytes(100)
        h1b.close()
    finally:
        fp.close()
        for h in (h0, h1, evil):
            h.close()


def test_check_switch_refuses_mistakes_with_the_scenario_error() -> None:
    """The switch process's checks (uet.live.switch) before a socket is opened: one line each."""
    from uet.live.switch import check_switch, host_addrs
    from uet.scenario.check import ScenarioError

    topo, rate = check_switch("default", "realtime", None, [], base_port=0, addrs=["1=127.0.0.9:5000"])
    assert rate > 0 and len(topo.plan().hosts) > 1
    assert host_addrs(["1=127.0.0.9:5000"]) == {1: ("127.0.0.9", 5000)}
    for kw, msg in (
        ({"profile": "lab", "rate_bps": 10**9}, "--rate sets the realtime profile's link rate"),
        ({"overrides": ["no_such_option=1"]}, "unknown option 'no_such_option'"),
        ({"base_port": 65530}, "hosts need ports up to"),
        ({"addrs": ["1=:5000"]}, "give I=IP:PORT"),
    ):
        args: dict[str, Any] = {"profile": "realtime", "rate_bps": None, "overrides": [], "base_port": 0, "addrs": []}
        with pytest.raises(ScenarioError, match=msg):
            check_switch("default", **{**args, **kw})
