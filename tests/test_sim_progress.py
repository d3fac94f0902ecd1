"""The simulator's progress line (tools/sim_progress.py, uet/sim/progress.py) and Ctrl-C on a real ``uet-sim``.

Issue 28 item 2 and issue 23 item 4: the README's 1,024-host example showed ``0/? virtual 0 µs``
for 20 minutes and printed nothing on SIGINT. The progress is driven here with virtual time and a
fake wall clock; the interruption with a real SIGINT to a small ``uet-sim``, sent on its first
progress line (no sleep)."""

from __future__ import annotations

import re
import sys

import pytest
from test_cli_errors import interrupt_on_line
from uet.tools.sim_progress import LINE_EVERY_S, SimProgress, format_duration

from uet.sim.progress import EXTRAPOLATE_FROM, estimate_ns
from uet.sim.scenario import Progress, simulate

pytestmark = pytest.mark.processes  # one uet-sim child in virtual time, no network (tests/conftest.py)

MS = 1_000_000  # ns


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_progress_line_shows_virtual_time_estimate_rate_and_eta() -> None:
    """Virtual time, the estimate (the bound, while little has arrived), the measured speed and
    the ETA at that speed; one line per LINE_EVERY_S of wall time, the first at once."""
    clock, out = FakeClock(), list[str]()
    bar = SimProgress("uet-sim", tty=False, write=out.append, clock=clock)
    bound = 10 * MS
    bar(Progress(1 * MS, 0, 1000, 0, 10**9, bound))
    assert out == ["uet-sim: virtual 1 ms of ≈ 10 ms (10 %), 0 of 1,000 messages, speed being measured\n"]
    clock.t += 1.0  # 1 s of wall time later, 1 ms more virtual time: 1 ms per second
    bar(Progress(2 * MS, 10, 1000, 10**7, 10**9, bound))
    assert len(out) == 1  # within LINE_EVERY_S: no new line
    clock.t += LINE_EVERY_S
    bar(Progress(2 * MS + 5 * MS, 20, 1000, 2 * 10**7, 10**9, bound))
    # 6 ms in 6 s: 1 ms of virtual time per second; 3 ms left of the 10 ms bound: 3 s
    assert out[-1] == ("uet-sim: virtual 7 ms of ≈ 10 ms (70 %), 20 of 1,000 messages, 1 ms per second, ETA 3 s\n")
    assert not any("?" in line for line in out)


def test_estimate_extrapolates_from_the_payload_received() -> None:
    """Past EXTRAPOLATE_FROM of the payload the extrapolation counts (when above the bound);
    past the bound with nothing received the line says so and gives no ETA."""
    half = Progress(4 * MS, 500, 1000, 5 * 10**8, 10**9, 2 * MS)
    assert estimate_ns(half) == 8 * MS
    early = Progress(1 * MS, 1, 1000, int(EXTRAPOLATE_FROM * 10**9) - 1, 10**9, 5 * MS)
    assert estimate_ns(early) == 5 * MS  # the first messages' start-up latency is not extrapolated
    by_messages = Progress(3 * MS, 100, 1000, 0, 0, 0)
    assert estimate_ns(by_messages) == 30 * MS  # no bytes known: messages completed / total
    past = Progress(12 * MS, 0, 1000, 0, 10**9, 10 * MS)
    assert estimate_ns(past) is None
    clock, out = FakeClock(), list[str]()
    bar = SimProgress("uet-run", tty=True, write=out.append, clock=clock)
    bar(Progress(11 * MS, 0, 1000, 0, 10**9, 10 * MS))
    clock.t += 2
    bar(past)
    assert out[-1].startswith("\r\x1b[K") and "past the estimate" in out[-1] and "ETA" not in out[-1]
    assert "500 µs per second" in out[-1]
    bar.close()
    assert out[-1] == "\r\x1b[K"  # the terminal's line erased before the results


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0.4, 59, 61, 3599, 7500)] == ["0 s", "59 s", "1 min 01 s", "59 min 59 s",
                                                                       "2 h 05 min"]  # fmt: skip


def test_bound_is_the_busiest_host_link() -> None:
    """incast 4 → 1: the receiver's link carries every flow, so the bound is at least the four
    flows' frames at its rate, and the run takes at least that long (about 1,400 instants: a
    progress call every 16)."""
    seen: list[Progress] = []
    res = simulate(
        {"workload": "incast", "endpoints": 5, "messages": 8, "message_bytes": 65536, "seed": 1},
        on_progress=seen.append,
    )
    assert res["ok"] and seen
    bound = seen[0].bound_ns
    assert all(p.bound_ns == bound for p in seen)
    wire = 4 * 8 * 65536 * 8 / res["link_rate_bps"] * 1e9
    assert wire < bound <= res["virtual_s"] * 1e9
    assert [p.now_ns for p in seen] == sorted(p.now_ns for p in seen)
    assert len(seen) == res["sim"]["instants"] // 16  # every 16 instants
    assert seen[-1].messages_total == 32 and seen[-1].bytes_total == 32 * 65536
    assert any(0 < p.messages < 32 for p in seen) and all(p.bytes == p.messages * 65536 for p in seen)


def test_ctrl_c_on_uet_sim_prints_the_partial_table_and_exits_130() -> None:
    """SIGINT to a real ``uet-sim --progress`` on its first progress line: the per-flow table
    (the flows not finished marked, with the bytes that reached their receiver), the fabric
    counters, the interrupted line, exit 130, no traceback."""
    argv = [sys.executable, "-m", "uet.tools.sim", "-w", "permutation", "-n", "4", "--messages", "1"]
    argv += ["--size", "64MiB", "--progress"]
    r = interrupt_on_line(argv, lambda lines: any(ln.startswith("uet-sim: virtual ") for ln in lines))
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == "uet-sim: interrupted"
    first = next(ln for ln in r.stderr.splitlines() if ln.startswith("uet-sim: virtual "))
    assert re.match(r"uet-sim: virtual [\d.,]+ [µm]?s of ≈ [\d.,]+ [µm]?s \(\d+ %\), 0 of 4 messages", first), first
    out = r.stdout
    assert "unfinished" in out and "fabric" in out and "ecn_marks" in out
    m = re.search(r"interrupted: 0 of 4 flows finished, 0 messages \(([\d,]+) bytes\) received", out)
    assert m and int(m.group(1).replace(",", "")) > 0, out
    rows = [ln for ln in out.splitlines() if "→" in ln and ln.startswith("│")]
    assert len(rows) == 4
    for row in rows:  # every flow moved data: its bytes so far, not 0
        cells = [c.strip() for c in row.split("│") if c.strip()]
        assert int(cells[2].replace(",", "")) > 0, row


def test_live_partial_result_credits_the_bytes_moved_and_shows_the_fabric() -> None:
    """Live ``uet-run`` after Ctrl-C: a flow of one message not received whole showed ``bytes 0``
    although its receiver had counted most of it per packet; now it shows them where the flow is
    its receiver's only unfinished one (pairs), and the fabric's counters (its summary, asked for
    on Ctrl-C) are in the partial result. An incast receiver's several flows cannot be told apart:
    they keep the bytes of whole messages, the run's total counts every packet."""
    from uet.live.launcher import Launcher, build_workload, empty_report
    from uet.scenario import run_defaults

    s = dict(run_defaults("live"), workload="pairs", endpoints=4, messages=1, message_bytes=1 << 20)
    la = Launcher(s, {}, {})
    la.workload = build_workload(s)
    la.addresses = [f"10.0.0.{i + 1}" for i in range(4)]
    la.reports = [empty_report() for _ in range(4)]
    flows = la.workload.flows()
    la.moved = {flows[0].dst: 700_000, flows[1].dst: 3 << 20}  # a resend counted twice: capped at the flow
    la.fabric_summary = {"event": "summary", "fabric": {"ecn_marks": 7, "drops": 0}}
    r = la.partial_result()
    assert r is not None and r["fabric"] == {"ecn_marks": 7, "drops": 0}
    by_id = {f["flow"]: f for f in r["flows"]}
    assert by_id[flows[0].id]["bytes"] == 700_000 and by_id[flows[1].id]["bytes"] == 1 << 20
    assert all(f["unfinished"] for f in r["flows"])

    s = dict(s, workload="incast", endpoints=3)
    la = Launcher(s, {}, {})
    la.workload = build_workload(s)
    la.reports = [empty_report() for _ in range(3)]
    la.moved = {0: 900_000}
    r = la.partial_result()
    assert r is not None and [f["bytes"] for f in r["flows"]] == [0, 0] and r["received_bytes"] == 900_000
