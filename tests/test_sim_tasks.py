"""The simulator's own coroutine runner (uet.sim.tasks): the plain traffic patterns run on it
without asyncio, and every run gives the result asyncio's loop gives, to the byte."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from uet.fabric.model.faults import FaultConfig, FaultEvent

import uet.runner
import uet.sim.scenario as scenario
from uet.sim.engine import SimulationError
from uet.sim.loop import VirtualTimeLoop
from uet.sim.tasks import SimLoop

RUNS: list[tuple[dict[str, Any], dict[str, Any], FaultConfig | None]] = [
    (
        {"workload": "pairs", "endpoints": 2, "message_bytes": 300_000, "messages": 2, "seed": 1},
        {"pds": {"cc": "nscc", "lb": "reps"}},
        None,
    ),
    (
        {"workload": "incast", "endpoints": 5, "message_bytes": 65_536, "messages": 2, "seed": 3},
        {"pds": {"cc": "rccc"}},
        None,
    ),
    ({"workload": "all_to_all", "endpoints": 6, "message_bytes": 3000, "messages": 3, "seed": 4}, {}, None),
    (
        {
            "workload": "permutation",
            "endpoints": 8,
            "message_bytes": 70_000,
            "messages": 2,
            "seed": 5,
            "transport": "roce",
        },
        {},
        None,
    ),
    (
        {"workload": "incast_victim", "endpoints": 6, "message_bytes": 5000, "messages": 2, "seed": 7, "tss": True},
        {},
        None,
    ),
    (  # lossy: retransmissions
        {"workload": "all_to_all", "endpoints": 4, "message_bytes": 20_000, "messages": 2, "seed": 2},
        {},
        FaultConfig(events=[FaultEvent("loss", "pod0-leaf0-pod0-spine0", loss=0.2)]),
    ),
    (  # a host's link down for good: messages to it fail (their errors come back through gather),
        # the receivers that wait for them stall the run
        {"workload": "all_to_all", "endpoints": 4, "message_bytes": 20_000, "messages": 2, "seed": 2},
        {"pds": {"rto_ns": 50_000}},
        FaultConfig(events=[FaultEvent("down", "h1-pod0-leaf0", 3_000)]),
    ),
]


def _run(
    monkeypatch: pytest.MonkeyPatch, own: bool, settings: dict[str, Any], endpoint: dict[str, Any], faults: Any
) -> dict[str, Any]:
    monkeypatch.setattr(scenario, "OWN_LOOP", own)
    used: list[str] = []
    monkeypatch.setattr(SimLoop, "close", lambda self: used.append("own"))
    monkeypatch.setattr(VirtualTimeLoop, "close", lambda self: used.append("asyncio"))
    res = scenario.simulate(dict(settings), {"kind": "fat_tree"}, endpoint, faults=faults)
    assert used == ["own" if own else "asyncio"]
    res.pop("timing", None)
    return res


@pytest.mark.parametrize("settings,endpoint,faults", RUNS)
def test_the_own_loop_gives_the_run_asyncio_gives(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], endpoint: dict[str, Any], faults: Any
) -> None:
    own = _run(monkeypatch, True, settings, endpoint, faults)
    assert own == _run(monkeypatch, False, settings, endpoint, faults)


def test_runs_the_own_loop_cannot_make_stay_on_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    """A collective (its own ``run``) and a run with a time limit use asyncio's loop."""
    _run(monkeypatch, False, {"workload": "allreduce", "endpoints": 4, "message_bytes": 4096, "messages": 1}, {}, None)
    used: list[str] = []
    monkeypatch.setattr(VirtualTimeLoop, "close", lambda self: used.append("asyncio"))
    scenario.simulate({"workload": "pairs", "endpoints": 2, "messages": 1, "timeout_s": 1.0})
    assert used == ["asyncio"]


class _Engine:
    """An engine whose steps resolve futures on a schedule: ``plan[i]`` runs at the i-th step."""

    def __init__(self, plan: list[Any]) -> None:
        self.now = 0
        self.plan = list(plan)
        self.steps: list[Any] = []

    def step(self, limit: int | None) -> bool:
        self.steps.append(limit)
        if not self.plan:
            return False
        self.now += 1000
        self.plan.pop(0)()
        return True


def _program(loop: Any, log: list[Any], make_gather: Any, futs: list[Any]) -> Any:
    """Tasks that wait on futures the engine resolves, fail, are cancelled and gathered."""

    async def waiter(i: int) -> int:
        log.append(("start", i))
        v = await futs[i]
        log.append(("woke", i, v))
        if i == 2:
            raise ValueError("two")
        return v * 10

    async def sub(i: int) -> Any:
        r = await make_gather(waiter(i), waiter(i + 1), return_exceptions=True)
        log.append(("sub", i, [repr(x) for x in r]))
        return r

    async def main() -> Any:
        a = loop.create_task(sub(0))
        b = loop.create_task(sub(2))
        c = loop.create_task(waiter(4))
        await make_gather(a, b)
        c.cancel()
        got = await make_gather(c, return_exceptions=True)
        log.append(("cancelled", type(got[0]).__name__))
        return "done"

    return main()


def _order(own: bool) -> tuple[list[Any], list[Any]]:
    log: list[Any] = []
    futs: list[Any] = []

    def resolve(i: int, v: Any) -> Any:
        def now() -> None:
            futs[i].set_result(v)
            log.append(("set", i))

        return now

    plan = [resolve(1, "b"), resolve(0, "a"), lambda: None, resolve(3, "d"), resolve(2, "c")]
    eng = _Engine(plan)
    if own:
        loop: Any = SimLoop(eng)  # type: ignore[arg-type]
        futs.extend(loop.create_future() for _ in range(5))
        log.append(("result", loop.run_until_complete(_program(loop, log, loop.gather, futs))))
    else:
        loop = VirtualTimeLoop(eng)  # type: ignore[arg-type]
        asyncio.set_event_loop(loop)
        try:
            futs.extend(loop.create_future() for _ in range(5))
            log.append(("result", loop.run_until_complete(_program(loop, log, asyncio.gather, futs))))
        finally:
            asyncio.set_event_loop(None)
            loop.close()
    return log, eng.steps


def test_callbacks_and_engine_steps_come_in_asyncio_s_order() -> None:
    own = _order(True)
    assert own == _order(False)
    assert ("cancelled", "CancelledError") in own[0] and own[0][-1] == ("result", "done")


def test_a_stall_is_an_error_on_the_own_loop_too() -> None:
    loop = SimLoop(_Engine([]))  # type: ignore[arg-type]

    async def forever() -> None:
        await loop.create_future()

    with pytest.raises(SimulationError, match="stalled"):
        loop.run_until_complete(forever())


def test_the_running_loop_is_the_own_one_only_while_it_runs() -> None:
    loop = SimLoop(_Engine([]))  # type: ignore[arg-type]
    seen: list[Any] = []

    async def look() -> None:
        seen.append(uet.runner.running_loop())

    loop.run_until_complete(look())
    assert seen == [loop] and uet.runner._sim_loop is None
