"""Whole simulated runs for callers that print nothing themselves (``uet-sim``, ``uet-run --engine
sim``, ``uet-bench differential``, the experiments of :mod:`uet.experiments`): one run per transport
of the scenario, each reduced to ``uet-run``'s result shape, as :mod:`uet.live.runs` does for the
live engine.

What a command draws stays with the command: the progress line is a callback it supplies
(:class:`ProgressLine`, a fresh one per run), the capture files a factory it supplies
(:class:`Captures`). What the simulator refuses — a setting it cannot run, a file it cannot write —
comes out as a :class:`~uet.scenario.check.ScenarioError` in one line, which a command prints as
its usage error.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from uet.errors import UetError
from uet.scenario.check import ScenarioError
from uet.scenario.model import settings_record, transports
from uet.sim.scenario import simulate

if TYPE_CHECKING:
    from uet.sim.progress import Progress

__all__ = ["Captures", "ProgressLine", "run_one", "simulate_runs"]

#: what the plots need of a result and ``uet-run``'s result does not carry
_PLOT_ONLY = ("timeline", "thresholds", "cc_timeline", "fault_series")


class ProgressLine(Protocol):
    """A progress display for one run: called as the run goes (``simulate``'s ``on_progress``),
    closed when the run ends."""

    def __call__(self, p: Progress) -> None: ...

    def close(self) -> None: ...


class Captures(Protocol):
    """The capture files of one run: the fabric's taps and the endpoints' event log (either None),
    closed when the run ends; ``report`` adds what they wrote to the result."""

    taps: Any
    log: Any

    def close(self) -> None: ...

    def report(self, result: dict[str, Any]) -> None: ...


def run_one(
    s: dict[str, Any],
    topo: dict[str, Any],
    ep: dict[str, Any],
    *,
    progress: ProgressLine | None = None,
    timeline: bool = False,
    faults: Any = None,
    taps: Any = None,
    event_log: Any = None,
) -> dict[str, Any]:
    """One run of the scenario (:func:`uet.sim.scenario.simulate`, which says what ``timeline``,
    ``faults``, ``taps`` and ``event_log`` do); ``progress`` is told as it goes and closed at its
    end. Raises :class:`ScenarioError` for what the simulator refuses."""
    try:
        try:
            return simulate(
                s,
                topo or None,
                ep,
                on_progress=progress,
                timeline=timeline,
                faults=faults,
                taps=taps,
                event_log=event_log,
            )
        finally:
            if progress is not None:
                progress.close()
    except ScenarioError:
        raise
    except (UetError, ValueError, OSError) as e:
        raise ScenarioError(str(e)) from e


def simulate_runs(
    s: dict[str, Any],
    topo: dict[str, Any],
    ep: dict[str, Any],
    *,
    plot: str | None = None,
    progress: Callable[[], ProgressLine] | None = None,
    faults: Any = None,
    captures: Callable[[str | None], Captures] | None = None,
) -> dict[str, dict[str, Any]]:
    """The scenario in virtual time on each transport ``s["transport"]`` names (both: UET, then
    RoCEv2; plots then in ``plot/uet`` and ``plot/roce``): transport → ``uet-run``'s result.
    A run cut short by Ctrl-C (``interrupted``) is the last one. ``progress``: makes each run's
    progress display; ``captures``: opens each run's capture files, given the transport when the
    scenario runs both (None otherwise). Raises :class:`ScenarioError` for what the simulator
    refuses."""
    both = s.get("transport") == "both"
    runs: dict[str, dict[str, Any]] = {}
    for tr in transports(s):
        st = {**s, "transport": tr}
        where = os.path.join(plot, tr) if plot and both else plot
        cap = captures(tr if both else None) if captures else None
        try:
            result = run_one(
                st,
                topo,
                ep,
                progress=progress() if progress else None,
                timeline=bool(where),
                faults=faults,
                taps=cap.taps if cap else None,
                event_log=cap.log if cap else None,
            )
        finally:
            if cap is not None:
                cap.close()
        if cap is not None:
            cap.report(result)
        if where:
            from uet.sim.plots import write_plots

            result["plots"] = write_plots(result, where)
        for key in _PLOT_ONLY:
            result.pop(key, None)
        result["elapsed_s"] = result["virtual_s"]
        result["settings"] = settings_record(st, ep)
        runs[tr] = result
        if result.get("interrupted"):
            break
    return runs
