"""Many hosts: two endpoints in two network namespaces (joined by veth pairs and a bridge,
tests/netns.py) exchange every operation over UDP and over IP protocol 253, and the tools run
across them (issue 16). Skipped with the reason where namespaces cannot be made (not root, no
``ip``); CI runs as root."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from netns import NetnsLab, unavailable
from ops_suite import OPERATIONS, every_operation

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
        peer = lab.popen(1, [_tool("uet-peer"), b, "--link", link, "--mode", "echo", "--insecure"],
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
                            "--identity", "-", "--json", "--timeout", "5"], input=json.dumps(ident),
                        capture_output=True, text=True, timeout=600)  # fmt: skip
            out = json.loads(r.stdout)
            assert out["target"]["link"] == link
            s = out["summary"]
            failed = [(c["id"], c["level"]) for c in out["cases"] if c["outcome"] in ("fail", "error")]
            # the verdict case by case is tests/test_conformance.py's (loopback); here the suite must
            # run whole across the namespaces. A few silence checks may see a stray late packet when
            # the machine is saturated (their liveness probe comes back after the stray), so up to
            # three failures are tolerated and listed.
            assert r.returncode in (0, 1) and s["total"] == len(out["cases"]) > 250, (s, r.stderr[-2000:])
            assert len(failed) <= 3 and s["passed"] >= s["total"] - s["skipped"] - 3, (s, failed)
        finally:
            peer.terminate()
            peer.communicate(timeout=30)
        assert peer.returncode == 0


def test_uet_run_ranks_on_three_namespaced_hosts_over_ip() -> None:
    """``uet-run --hosts A0,A1,A2 --rank R`` started on each "host" (namespace) on its own, in
    reverse order: the ranks find each other, run the all-to-all and rank 0 reports every
    message intact."""
    with NetnsLab(3) as lab:
        hosts = ",".join(lab.addresses)
        argv = [_tool("uet-run"), "-w", "all_to_all", "--size", "20KiB", "--messages", "2", "--hosts", hosts,
                "--link", "ip", "--timeout", "60", "--json"]  # fmt: skip
        others = [lab.popen(r, [*argv, "--rank", str(r)], stdout=subprocess.PIPE, text=True) for r in (2, 1)]
        try:
            r0 = lab.run(0, [*argv, "--rank", "0"], capture_output=True, text=True, timeout=120)
            outs = [p.communicate(timeout=60)[0] for p in others]
        finally:
            for p in others:
                if p.poll() is None:
                    p.kill()
        assert r0.returncode == 0, r0.stderr
        res = json.loads(r0.stdout)
        assert res["ok"] and res["engine"] == "hosts" and res["link"] == "ip" and len(res["flows"]) == 6
        assert all(f["intact"] and f["bytes"] == 40 * 1024 for f in res["flows"])
        assert {f["src"] for f in res["flows"]} == set(lab.addresses)
        for r, out in zip((2, 1), outs, strict=True):
            assert json.loads(out)["rank"] == r
        assert [p.returncode for p in others] == [0, 0]


def test_readme_hosts_block_runs_as_written(tmp_path: Path) -> None:
    """The README's two-namespace ``uet-run --rank`` block, run by bash as a script (namespace
    names made unique to this run)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme[readme.index("<!-- hosts:start -->") : readme.index("<!-- hosts:end -->")]
    script = re.search(r"```sh\n(.*?)```", block, re.S).group(1)  # type: ignore[union-attr]
    tag = f"u{os.getpid() % 100000}rd"
    script = "set -e\n" + script.replace("uetdemo", tag)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    finally:
        for i in (0, 1):
            subprocess.run(["ip", "netns", "del", f"{tag}{i}"], capture_output=True)
    why = f"stdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    assert r.returncode == 0, why
    assert "all messages intact" in r.stdout and "Traceback" not in r.stderr, why
    rank1 = json.loads((tmp_path / "rank1.json").read_text())
    assert rank1["rank"] == 1 and rank1["address"] == "198.18.0.2", why


#: a process that says when its SIGTERM disposition is set, then idles
_IDLE = (
    "import signal, time\nif {ignore}: signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print(flush=True)\ntime.sleep(600)"
)


def test_a_process_the_lab_started_never_outlives_it() -> None:
    """A ``uet-peer`` (198.18.0.2, ``--link ip``) once kept serving after its test: a process
    started in a namespace outlived the lab. The lab now stops what it started when it closes,
    SIGTERM first and SIGKILL for one that ignores it."""
    with NetnsLab(1, stop_grace_s=0.5) as lab:
        procs = [
            lab.popen(0, [sys.executable, "-c", _IDLE.format(ignore=ignore)], stdout=subprocess.PIPE, text=True)
            for ignore in (False, True)
        ]
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == "\n"  # (its SIGTERM disposition is set)
    assert [p.returncode for p in procs] == [-signal.SIGTERM, -signal.SIGKILL]
    for p in procs:
        p.stdout.close()  # type: ignore[union-attr]


def test_a_process_the_lab_started_dies_with_the_test_process() -> None:
    """...and when the test process itself dies without cleaning up (a runner killed by its
    timeout), what it started in a namespace gets SIGTERM too (``PR_SET_PDEATHSIG``)."""
    runner = (
        "import json, os, sys\n"
        "from tests.netns import NetnsLab\n"
        "lab = NetnsLab(1).__enter__()\n"
        f"p = lab.popen(0, [sys.executable, '-c', {_IDLE.format(ignore=False)!r}], stdout=-1, stderr=-3)\n"
        "p.stdout.readline()\n"
        "print(json.dumps([p.pid, lab._made]), flush=True)\n"
        "os._exit(0)\n"
    )
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-c", runner], cwd=root, capture_output=True, text=True, timeout=60)
    pid, made = json.loads(r.stdout)
    try:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return  # gone already
        try:
            # readable when the process has exited (a generous bound: the signal goes at once)
            gone = bool(select.select([fd], [], [], 30)[0])
        finally:
            os.close(fd)
        assert gone, "the namespaced process outlived the process that started it"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
