"""``uet-peer --fabric``: the standalone peer serves through a ``uet-fabric`` switch process, and an
endpoint on another fabric host gets its messages echoed back (issue 13: the peer's fabric link)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from uet.tools.run_settings import max_payload

from uet.endpoint import Endpoint, EndpointConfig
from uet.link.fabric import FabricLink

TIMEOUT = 60.0


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def _stop(p: subprocess.Popen[str]) -> str:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
    return out


async def test_peer_echoes_through_the_fabric() -> None:
    fabric = _start(["uet.tools.fabric"])
    peer = None
    try:
        assert fabric.stdout is not None
        ready = json.loads(fabric.stdout.readline())
        assert ready["event"] == "ready"
        here, there = ready["hosts"][0], ready["hosts"][1]
        sw = f"{there['udp'][0]}:{there['udp'][1]}"
        peer = _start(["uet.tools.peer", there["ip"], "--fabric", sw, "--mode", "echo", "--job", "7"])
        assert peer.stdout is not None
        identity = json.loads(peer.stdout.readline())
        assert identity["address"] == there["ip"] and identity["fabric"] == sw
        link = FabricLink(here["ip"], tuple(here["udp"]), deliver_trimmed=True)
        async with Endpoint(link, job=7, pid=0, config=EndpointConfig(payload_size=max_payload(1500))) as ep:
            payload = os.urandom(20_000)  # several packets through leaf and spine
            await ep.send(there["ip"], payload)
            echoed = await ep.recv()
            assert bytes(echoed.data) == payload and echoed.source == there["ip"]
        counters = json.loads(_stop(peer).strip().splitlines()[-1])
        assert counters["messages"] == 1 and counters["echoed"] == 1, counters
    finally:
        if peer is not None:
            _stop(peer)
        _stop(fabric)


def test_rate_and_faults_need_the_right_link() -> None:
    for argv, words in (
        (["--rate", "10G"], "--rate needs --fabric"),
        (["--fabric", "127.0.0.1:9", "--fault", "wrong-nack-code"], "direct link only"),
        (["--fabric", "nowhere"], "HOST:PORT"),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "uet.tools.peer", "10.0.0.2", *argv], capture_output=True, text=True, timeout=TIMEOUT
        )
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
