"""The simulator's whole runs (uet/sim/runs.py), as ``uet-sim`` and ``uet-run --engine sim`` make
them: one run per transport, each with a progress display and capture files of its own that the
caller supplies, a Ctrl-C ending the runs, and what the simulator refuses raised as the scenario
model's error (which the commands print as their usage error)."""

from __future__ import annotations

from typing import Any

import pytest
from uet.fabric.model.config import FabricError
from uet.fabric.model.faults import FaultConfig, FaultEvent

from uet.scenario.check import ScenarioError
from uet.sim.runs import run_one, simulate_runs
from uet.sim.scenario import Progress

#: a 3:1 incast of one 64 KiB message per flow
TINY = {"workload": "incast", "endpoints": 4, "messages": 1, "message_bytes": 65536, "seed": 1}


class Display:
    """A progress display that records what it is told (``stop_at``: raise Ctrl-C on that call)."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.seen: list[Progress] = []
        self.closed = 0
        self.stop_at = stop_at

    def __call__(self, p: Progress) -> None:
        self.seen.append(p)
        if len(self.seen) == self.stop_at:
            raise KeyboardInterrupt

    def close(self) -> None:
        self.closed += 1


class Files:
    """Capture files that record being opened, closed and reported."""

    def __init__(self, transport: str | None) -> None:
        self.transport = transport
        self.taps: Any = None
        self.log: Any = None
        self.closed = 0

    def close(self) -> None:
        self.closed += 1

    def report(self, result: dict[str, Any]) -> None:
        result["reported_by"] = self.transport


def test_each_transport_runs_with_its_own_progress_display_and_captures() -> None:
    displays: list[Display] = []
    files: list[Files] = []

    def display() -> Display:
        displays.append(Display())
        return displays[-1]

    def captures(transport: str | None) -> Files:
        files.append(Files(transport))
        return files[-1]

    runs = simulate_runs({**TINY, "transport": "both"}, {}, {}, progress=display, captures=captures)
    assert list(runs) == ["uet", "roce"]
    assert [f.transport for f in files] == ["uet", "roce"] and [f.closed for f in files] == [1, 1]
    assert len(displays) == 2 and [d.closed for d in displays] == [1, 1]
    for d, (tr, res) in zip(displays, runs.items(), strict=True):
        assert d.seen and d.seen[0].now_ns <= d.seen[-1].now_ns <= res["virtual_s"] * 1e9  # a fresh clock
        assert res["reported_by"] == tr and res["settings"]["transport"] == tr
        assert res["elapsed_s"] == res["virtual_s"] and res["ok"]
        assert "timeline" not in res  # what only the plots need is not part of the result


def test_a_single_transport_opens_its_captures_without_a_transport_name() -> None:
    seen: list[str | None] = []

    def captures(transport: str | None) -> Files:
        seen.append(transport)
        return Files(transport)

    runs = simulate_runs({**TINY, "transport": "uet"}, {}, {}, captures=captures)
    assert list(runs) == ["uet"] and seen == [None]


def test_ctrl_c_in_the_first_transport_ends_the_runs_with_its_partial_result() -> None:
    shown: list[Display] = []

    def display() -> Display:
        shown.append(Display(stop_at=1))
        return shown[-1]

    runs = simulate_runs({**TINY, "transport": "both"}, {}, {}, progress=display)
    assert list(runs) == ["uet"] and runs["uet"]["interrupted"] and not runs["uet"]["ok"]
    assert len(shown) == 1 and shown[0].closed == 1


def test_what_the_simulator_refuses_is_a_scenario_error_in_one_line() -> None:
    display = Display()
    faults = FaultConfig(events=[FaultEvent("down", "no-such-link", at_ns=5_000)])
    with pytest.raises(ScenarioError, match="^down: no link 'no-such-link' in this topology") as e:
        run_one(TINY, {}, {}, progress=display, faults=faults)
    assert isinstance(e.value.__cause__, FabricError)  # the simulator's own error stays the cause
    assert display.closed == 1


def test_a_fault_of_the_simulator_itself_is_not_passed_off_as_a_scenario_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TypeError inside a run is a defect of the code, not of the scenario: it propagates with
    its traceback (a compiled build's type check once read as ``uet-sim: error: bytes object
    expected; got memoryview``, exit 2, as if the user had written something wrong)."""
    import uet.sim.runs as runs

    def broken(*args: Any, **kw: Any) -> dict[str, Any]:
        raise TypeError("bytes object expected; got memoryview")

    monkeypatch.setattr(runs, "simulate", broken)
    display = Display()
    with pytest.raises(TypeError, match="memoryview"):
        run_one(TINY, {}, {}, progress=display)
    assert display.closed == 1
