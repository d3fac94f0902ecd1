"""Many hosts: two endpoints in two network namespaces (joined by veth pairs and a bridge,
tests/netns.py) exchange every operation over UDP and over IP protocol 253, and the tools run
across them (issue 16). Skipped with the reason where namespaces cannot be made (not root, no
``ip``); CI runs as root."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netns import NetnsLab, unavailable
from tests.ops_suite import OPERATIONS, every_operation
from uet.endpoint import Endpoint
from uet.link.ip import IpLink

REASON = unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")
JOB = 3


@pytest.mark.parametrize("link", ["direct", "ip"])
async def test_every_operation_between_two_namespaces(link: str) -> None:
    with NetnsLab(2) as lab:
        a, b = lab.addresses
        with lab.inside(0):
            ea = await Endpoint.open(a, job=JOB, pid=1, link=link)
        with lab.inside(1):
            eb = await Endpoint.open(b, job=JOB, pid=1, link=link)
        async with ea, eb:
            assert await every_operation(ea, eb) == list(OPERATIONS)
            if link == "ip":
                assert isinstance(ea.link, IpLink) and ea.link.counters["rx_errors"] == 0
        # the hosts really are elsewhere: their addresses are not this namespace's
        for addr in lab.addresses:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            with pytest.raises(OSError):
                s.bind((addr, 0))
            s.close()


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


@pytest.mark.parametrize("link", ["direct", "ip"])
def test_peer_bench_and_conformance_across_namespaces(link: str) -> None:
    """``uet-peer`` serves in one namespace; ``uet-bench rtt|pair --peer`` and ``uet-conformance``
    run against it from the other, over UDP and over IP protocol 253 (about 4 s per link)."""
    with NetnsLab(2) as lab:
        a, b = lab.addresses
        peer = lab.popen(1, [_tool("uet-peer"), b, "--link", link, "--mode", "echo"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        try:
            assert peer.stdout is not None
            ident = json.loads(peer.stdout.readline())
            assert (ident["address"], ident["link"]) == (b, link)
            bench = [_tool("uet-bench"), "--peer", b, "--addresses", a, "--link", link, "--json"]
            r = lab.run(0, [bench[0], "rtt", *bench[1:], "--count", "20"], capture_output=True, text=True,
                        timeout=120)  # fmt: skip
            assert r.returncode == 0, r.stderr
            rec = json.loads(r.stdout)
            assert rec["link"] == link and rec["count"] == 20 and rec["uet_p50_us"] > 0
            r = lab.run(0, [bench[0], "pair", *bench[1:], "--size", "2MiB"], capture_output=True, text=True,
                        timeout=120)  # fmt: skip
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["bytes"] == 2 << 20
            r = lab.run(0, [_tool("uet-conformance"), "--target", b, "--local", a, "--link", link,
                            "--identity", "-", "--json"], input=json.dumps(ident), capture_output=True, text=True,
                        timeout=300)  # fmt: skip
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            assert out["target"]["link"] == link
            s = out["summary"]
            assert s["must_failed"] == 0 and s["passed"] > 200, s
        finally:
            peer.terminate()
            peer.communicate(timeout=30)
        assert peer.returncode == 0
