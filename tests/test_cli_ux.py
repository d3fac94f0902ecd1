"""What a new user hit in ``uet-run`` / ``uet-sim`` (issue 23 item 4), each as it was met: a live
run that waited out its timeout after every flow had failed, tracebacks on unwritable output
paths (after the whole run), a 100 bit/s ``--rate`` taken silently, ``--hosts`` naming addresses
this machine does not have, ``-n 128`` refused by the default fabric, ``--interval`` printing 0
bytes while data moved, and ``bytes: 0`` after Ctrl-C for flows that had moved data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def tool(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"uet.tools.{name}", *args], capture_output=True, text=True, timeout=timeout
    )


def _one_line_exit_2(r: subprocess.CompletedProcess[str], name: str) -> None:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"uet-{name}: error: "), r.stderr
    assert r.stdout == ""


def _bad_outputs(tmp: Path) -> list[tuple[str, list[str]]]:
    a_file = tmp / "a-file"
    a_file.write_text("")
    missing = str(tmp / "missing" / "x.csv")
    return [
        ("run", ["--csv", missing]),
        ("run", ["--csv", str(tmp)]),
        ("run", ["--engine", "sim", "--csv", missing]),
        ("run", ["--plot", str(a_file)]),
        ("run", ["--telemetry", missing]),
        ("run", ["--pcap", str(a_file / "sub")]),
        ("sim", ["--plot", str(a_file)]),
        ("fabric", ["--plot", str(a_file)]),
    ]


@pytest.mark.parametrize("case", range(8))
def test_unwritable_output_is_refused_before_the_run(tmp_path: Path, case: int) -> None:
    name, argv = _bad_outputs(tmp_path)[case]
    _one_line_exit_2(tool(name, *argv), name)


def test_missing_plot_folder_is_made(tmp_path: Path) -> None:
    where = tmp_path / "a" / "b"
    r = tool("sim", "-n", "2", "--messages", "1", "--size", "4KiB", "--plot", str(where), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["plots"] and where.is_dir()


def test_hosts_not_on_this_machine_is_a_usage_error() -> None:
    """Without --rank every rank runs here: rank 1 could not bind 10.99.0.2 and rank 0 waited
    for it until its timeout."""
    r = tool("run", "--hosts", "127.0.0.1,10.99.0.2", "--messages", "1", "--size", "64")
    _one_line_exit_2(r, "run")
    assert "10.99.0.2 is not an address of this machine" in r.stderr


def test_too_many_live_endpoints_is_a_usage_error() -> None:
    r = tool("run", "-n", "200", "--topology", "fat_tree")
    _one_line_exit_2(r, "run")
    assert "give -n 128 or fewer" in r.stderr and "add --engine sim to run 200 endpoints" in r.stderr


def test_low_rate_is_warned(capsys) -> None:
    from uet.tools.cli import warn_low_rate

    warn_low_rate("uet-run", "--rate", 100)
    warn_low_rate("uet-run", "--rate", 100e6)
    err = capsys.readouterr().err
    assert err == "uet-run: warning: --rate 100 is 100 bit/s; did you mean 100M or 100G?\n"


def test_default_fabric_grows_its_buffer_with_the_hosts() -> None:
    """``-n 128`` on the default 2-leaf fabric: 64-port leaves whose lossless carve-outs exceeded
    the buffer ("buffer too small for the reserve and headroom of every lossless PG")."""
    from uet.fabric.model import Fabric
    from uet.fabric.profiles import fit_hosts, load_topology

    topo = load_topology("default", profile="realtime")
    grown, over = fit_hosts(topo, 128)
    assert grown.host_count() >= 128 and over["hosts_per_leaf"] == 64
    assert grown.switch.buffer.size > topo.switch.buffer.size
    Fabric(grown)  # builds: every leaf's shared pool is as large as before
    assert fit_hosts(topo, 2) == (topo, {})


def test_every_flow_failed_ends_the_run_at_once() -> None:
    """``--rate 100`` (100 bit/s): the one flow fails UNDELIVERABLE at its sender; its receiver
    used to wait for the message until the 120 s timeout (error ``timeout``). Now the launcher
    tells it to stop (``aborted``) and the run ends with the failure, exit 1."""
    r = tool("run", "--rate", "100", "-n", "2", "--messages", "1", "--size", "64", "--json",
             "--endpoint-set", "pds.rto_ns=20000000")  # fmt: skip
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    # the receiver was told to stop (or saw the failure itself); before, it waited out the timeout
    assert out["endpoint_errors"] in ([], ["aborted"]), (out["endpoint_errors"], out["flows"])
    assert [f["error"] for f in out["flows"]] == ["UNDELIVERABLE"]
    assert "did you mean 100M" in r.stderr


def test_interval_counts_bytes_as_packets_arrive_and_ends_with_a_sum() -> None:
    """``--interval``: the README example printed nothing, or 0 bytes while data moved (bytes were
    counted only when a worker reported its messages at its end). Every line now counts payload
    bytes as packets arrive; the run ends with its last partial interval and a sum line."""
    total = 2 * 2 * 32 * 1024
    r = tool("run", "-n", "3", "--messages", "2", "--size", "32KiB", "--interval", "0.05", "--json")
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("[")]
    assert lines and lines[-1].endswith("sum") and f"received {total:,} of {total:,} bytes" in lines[-1]
    intervals = json.loads(r.stdout)["intervals"]
    assert sum(i["bytes"] for i in intervals) == total == intervals[-1]["received_bytes"]


def test_partial_result_counts_the_bytes_of_unfinished_flows() -> None:
    """After Ctrl-C a flow whose sender had not reported showed ``bytes: 0`` although its
    receiver had its messages: the bytes received count."""
    from uet.workloads import make
    from uet.workloads.report import summarize

    wl = make("incast", 3, message_bytes=1000, messages=2, seed=1)
    f0 = wl.flows()[0]
    rx = [{"flow": f0.id, "index": i, "src": "b", "bytes": 1000, "crc32": 1, "t": 0.1} for i in range(2)]
    reports = [{"flows": [], "rx": rx, "error": None, "check": None}] + [
        {"flows": [], "rx": [], "error": None, "check": None} for _ in range(2)
    ]
    flows = summarize(wl, ["a", "b", "c"], reports)["flows"]
    assert flows[f0.id]["bytes"] == 2000 and flows[f0.id]["delivered"] == 2 and not flows[f0.id]["intact"]
