"""``uet-run`` end to end: real endpoint processes through the ``uet-fabric`` process (tools/run.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from live_options import FAST

RUN = [sys.executable, "-m", "uet.tools.run", *FAST]
TIMEOUT = 240


def run_json(*args: str) -> tuple[int, dict]:
    p = subprocess.run([*RUN, *args, "--json"], capture_output=True, text=True, timeout=TIMEOUT)
    assert p.stdout.strip(), p.stderr[-3000:]
    return p.returncode, json.loads(p.stdout)


def test_incast_8_to_1_delivers_everything_and_marks_the_congested_port():
    rc, r = run_json("--workload", "incast", "--endpoints", "9")
    assert rc == 0, r
    assert r["ok"] and r["endpoints"] == 9 and len(r["flows"]) == 8
    assert {f["dst"] for f in r["flows"]} == {"10.0.0.1"}
    for f in r["flows"]:
        assert f["intact"] and f["delivered"] == f["messages"] == 4 and f["bytes"] == 4 * 65536
        assert f["goodput_gbps"] > 0 and f["completion_s"] > 0
    fab = r["fabric"]
    for key in ("ecn_marks", "trims", "drops", "pauses"):
        assert key in fab
    assert fab["ecn_marks"] > 0
    # the receiver (host 0) hangs off leaf0 port 0: that downlink is where the queue builds
    assert fab["marks_by_port"].get("leaf0:0", 0) > 0
    assert max(fab["marks_by_port"], key=fab["marks_by_port"].get) == "leaf0:0"
    # the receiver saw the CE marks on arrival (FabricLink passes ECN up)
    assert r["endpoint_counters"][0]["link_rx_ce"] > 0


def test_pairs_with_scenario_file(tmp_path):
    sc = tmp_path / "pairs.toml"
    sc.write_text(
        """
[run]
workload = "pairs"
endpoints = 4
message_bytes = 20000
messages = 2
seed = 7

[topology]
builtin = "default"
[topology.switch.lb]
mode = "spray_rr"

[endpoint]
max_inflight = 16
"""
    )
    rc, r = run_json(str(sc))
    assert rc == 0, r
    assert [(f["src"], f["dst"]) for f in r["flows"]] == [("10.0.0.1", "10.0.0.3"), ("10.0.0.2", "10.0.0.4")]
    assert all(f["intact"] and f["bytes"] == 40000 for f in r["flows"])


def test_retransmits_are_counted_per_flow_and_fct_is_reported(tmp_path):
    """Each flow's ``retransmits`` are its own (to its destination), not the sender endpoint's
    running total when the flow finished (issue 14): with all-to-all every endpoint sends two
    flows, whose figures add up to at most the endpoint's total. A 2 ms RTO makes retransmissions
    certain on a shared machine."""
    csv_path = tmp_path / "flows.csv"
    rc, r = run_json(
        "--workload", "all_to_all", "--endpoints", "3", "--messages", "8",
        "--endpoint-set", "pds.rto_ns=2000000", "--csv", str(csv_path),
    )  # fmt: skip
    assert r["ok"], r
    assert sum(f["retransmits"] for f in r["flows"]) > 0
    for i, src in enumerate(dict.fromkeys(f["src"] for f in r["flows"])):  # endpoint order
        mine = [f["retransmits"] for f in r["flows"] if f["src"] == src]
        assert len(mine) == 2 and sum(mine) <= r["endpoint_counters"][i]["retransmits"]
    fct = r["fct"]
    assert fct["flows"] == 6 and 0 < fct["p50_s"] <= fct["p99_s"] <= fct["max_s"]
    assert fct["slowdown_p50"] >= 1.0  # no flow beats its bytes at the host link rate
    assert r["settings"]["workload"] == "all_to_all" and r["settings"]["endpoint"]["pds"]["rto_ns"] == 2000000
    rows = csv_path.read_text().splitlines()
    assert rows[0].startswith("flow,src,dst,bytes") and len(rows) == 7 and all(",true," in x for x in rows[1:])


def test_failure_exits_nonzero():
    # far too little time for the transfer: the endpoints give up, the launcher reports a failure
    rc, r = run_json("--workload", "incast", "--endpoints", "3", "--messages", "50", "--timeout", "0.05")
    assert rc == 1 and not r["ok"]
    assert r["endpoint_errors"] and not all(f["intact"] for f in r["flows"])


def test_the_timeout_is_virtual_time_under_dilation():
    """``--timeout`` is virtual time, as in the simulator: dilated ×20, a 50 ms timeout lasts 1 s
    of real time, and the unfinished flows report about 50 ms of virtual time (before, the ranks
    gave up after 50 ms of real time: 2.5 ms of virtual time)."""
    argv = ["--workload", "incast", "--endpoints", "3", "--messages", "50", "--timeout", "0.05"]
    rc, r = run_json(*argv, "--dilation", "20")
    assert rc == 1 and not r["ok"]
    failed = [f["completion_s"] for f in r["flows"] if not f["intact"]]
    # the bounds tell a virtual 50 ms from a real one (2.5 ms virtual) and from one dilated twice
    # (1 s), and no closer: the rank's timer is libuv's (uvloop), in whole milliseconds of real
    # time, so it may fire up to 1 ms of real time (50 µs virtual) before 1 s after the flows
    # started (0.049998 s was seen), and a loaded machine wakes the rank late
    assert failed and all(0.05 - 0.001 / 20 <= t < 0.5 for t in failed), failed


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(cond, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_no_orphans_when_the_launcher_is_interrupted(sig):
    # a long run: 3 endpoints, many messages; interrupt it once every process is up
    p = subprocess.Popen(
        [*RUN, "--workload", "incast", "--endpoints", "3", "--messages", "2000", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert _wait(lambda: len(_children(p.pid)) >= 4, 60), "fabric + 3 endpoints did not start"
        kids = _children(p.pid)
        # let them get going (the endpoints' sockets are open once the fabric saw their ARP)
        p.send_signal(sig)
        rc = p.wait(timeout=60)
        if sig == signal.SIGINT:
            assert rc == 130
            assert p.stderr is not None
            err = p.stderr.read()
            assert "interrupted" in err and "Traceback" not in err and "CancelledError" not in err, err
        assert _wait(lambda: not any(_alive(k) for k in kids), 30), [k for k in kids if _alive(k)]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@pytest.mark.parametrize("victim", ["uet.tools.fabric", "uet.live.worker"])
def test_a_dead_child_is_reported_at_once_with_a_json_error(victim):
    """Issue 15 item 17: when the fabric process died the launcher waited the whole --timeout and
    blamed "timeout"; when a worker died, --json printed nothing. Now the launcher reports the
    dead process at once, and --json prints an error object."""
    p = subprocess.Popen(
        [*RUN, "--workload", "incast", "--endpoints", "3", "--messages", "2000", "--timeout", "300", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert _wait(lambda: len(_children(p.pid)) >= 4, 60), "fabric + 3 endpoints did not start"
        (pid, *_rest) = [k for k in _children(p.pid) if victim in _cmdline(k)]
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=120)
        assert time.monotonic() - t0 < 90  # far less than --timeout 300
        assert p.returncode == 1, (p.returncode, err)
        rec = json.loads(out.strip().splitlines()[-1])
        assert rec["ok"] is False and rec["error"] and "Traceback" not in err
        if victim == "uet.tools.fabric":
            assert "fabric" in rec["error"]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


@pytest.mark.parametrize("profile", ["datacenter", "lab"])
def test_the_fabric_gets_rate_only_for_the_realtime_profile(profile):
    """uet-fabric refuses --rate for any profile but realtime; uet-run must not pass it there."""
    from uet.tools import fabric, run

    from uet.live.launcher import Launcher

    s, topo, ep = run.settings_from(run.build_parser().parse_args(["--profile", profile, "-n", "4"]))
    args = Launcher(s, topo, ep).fabric_args(4)
    assert "--rate" not in args
    fabric.rate_for(profile, None)  # what uet-fabric does with what it is given: no error


def test_the_fabric_gets_the_realtime_rate():
    from uet.tools import run

    from uet.live.launcher import Launcher

    s, topo, ep = run.settings_from(run.build_parser().parse_args(["--rate", "200M", "-n", "4"]))
    args = Launcher(s, topo, ep).fabric_args(4)
    assert args[args.index("--rate") + 1] == str(200_000_000)


def test_live_defaults_adaptive_rto_and_cc_parameters_from_the_link():
    """Issue 10/11/30: the live engine's endpoints follow the measured round trip (``rto_adaptive``)
    and a congestion control named for the run gets its link rate, the base RTT and the payload
    size as ``cc_params`` (CcConfig's defaults assume 100 Gb/s and 12 µs); given keys win; on the
    datacenter profile the base RTT is the longest path's (uet.scenario.derive); no CC, no
    cc_params."""
    from uet.fabric.profiles import REALTIME_RTT_NS
    from uet.tools import run

    from uet.cc.registry import as_config

    def ep_of(*argv: str) -> dict:
        return run.settings_from(run.build_parser().parse_args(["-n", "4", *argv]))[2]

    assert ep_of()["pds"]["rto_adaptive"] is True and "cc_params" not in ep_of()["pds"]
    p = ep_of("--rate", "200M", "--endpoint-set", "pds.cc=nscc")["pds"]
    assert p["cc_params"] == {"link_bps": 200_000_000, "base_rtt_ns": REALTIME_RTT_NS, "mtu": 1024}
    assert as_config(p["cc_params"]).max_wnd == 1.5 * 200e6 / 8 * 1e-3
    p = ep_of("--endpoint-set", "pds.cc=nscc", "--endpoint-set", "pds.cc_params.base_rtt_ns=3000000")["pds"]
    assert p["cc_params"]["base_rtt_ns"] == 3_000_000 and p["cc_params"]["link_bps"] == 100_000_000
    # 4 links of 1 µs at 100 Gb/s, a 4,218-byte frame out and a minimum frame back: ≈ 9.4 µs
    p = ep_of("--profile", "datacenter", "--endpoint-set", "pds.cc=nscc")["pds"]
    assert p["cc_params"] == {"link_bps": 100_000_000_000, "base_rtt_ns": 9_377, "mtu": 4096}
    p = ep_of("--profile", "datacenter", "--endpoint-set", "pds.cc=nscc", "--endpoint-set", "payload_size=8192")
    assert p["pds"]["cc_params"]["mtu"] == 8192  # the CC's MTU follows the payload (issue 30 item 2)
    p = ep_of("--profile", "lab", "--endpoint-set", "pds.cc=rccc")["pds"]  # the lab's 1 Gb/s links
    assert p["cc_params"]["link_bps"] == 1_000_000_000 and p["cc_params"]["mtu"] == 1024
