"""Whole live runs for callers that print nothing themselves (``uet-bench differential``): one run
per transport of the scenario, each on its own processes, and what a result adds once they ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uet.fabric.profiles import load_topology, overrides_to_dict
from uet.live.dilation import Dilation, choose, short_of_cpu
from uet.live.dilation import verdict as dilation_verdict
from uet.live.result import cpu_starvation, settings_record, transports

if TYPE_CHECKING:  # pragma: no cover
    from uet.live.launcher import Launcher

__all__ = ["dilation_for", "finish_live", "live_runs", "sim_cm_secret", "transports"]


def sim_cm_secret(s: dict[str, Any]) -> str:
    """The RoCE connection secret of a live run held to the simulator (``uet-run --transport
    both``, ``uet-bench differential``): the simulator's, the run seed (uet.sim.scenario), not a
    random one, so both engines derive the same QPNs and take the same UDP source ports and ECMP
    paths."""
    return str(int(s["seed"]))


def finish_live(result: dict[str, Any], launcher: Launcher) -> None:
    """What a live run's result adds once its processes ended: its transport and settings, the
    time-dilation verdict (did the CPU keep up, uet/live/dilation.py) and the CPU-starvation note."""
    s, ep = launcher.s, launcher.endpoint
    result["transport"] = s.get("transport", "uet")
    result["settings"] = settings_record(s, ep)
    if launcher.derived is not None:
        result["derived"] = launcher.derived.record()
    result["dilation"]["verdict"] = dilation_verdict(result, launcher.host_rate, int(ep.get("payload_size", 1024)))
    result["diagnosis"] = cpu_starvation(result)


async def live_runs(
    s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any], dil: Dilation
) -> dict[str, dict[str, Any]]:
    """The scenario on the live engine on each transport ``s["transport"]`` names, without output
    (the live/sim differential, :func:`uet.experiments.differential.run_case`), with time
    dilation ``dil`` (:func:`dilation_for`): transport → result; a failed run raises
    :class:`~uet.live.process.RunError` (its message begins with the transport). With the
    automatic factor, a run whose CPU did not keep up (uet/live/dilation.py) runs once more at
    twice the factor (its result's ``dilation`` says ``retried_from``): the caller judges
    figures, which such a run does not give."""
    runs: dict[str, dict[str, Any]] = {}
    for tr in transports(s):
        result = await _live_quiet({**s, "transport": tr}, topo, ep, dil)
        if dil.how == "auto" and short_of_cpu(result):
            again = Dilation(dil.factor * 2, "auto", dil.basis)
            result = await _live_quiet({**s, "transport": tr}, topo, ep, again)
            result["dilation"]["retried_from"] = dil.factor
        runs[tr] = result
    return runs


async def _live_quiet(s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any], dil: Dilation) -> dict[str, Any]:
    """One transport's live run for :func:`live_runs`."""
    from uet.live.launcher import Launcher  # the live engine loads only for a live run
    from uet.live.process import RunError

    launcher = Launcher(s, topo, ep)
    launcher.dilation = dil
    launcher.cm_secret = sim_cm_secret(s)
    try:
        result = await launcher.run()
    except (RunError, TimeoutError, OSError, ValueError) as e:
        raise RunError(f"{s['transport']}: {e or type(e).__name__}") from None
    finally:
        await launcher.shutdown()
    finish_live(result, launcher)
    return result


def dilation_for(given: float | str, s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any]) -> Dilation:
    """The run's time-dilation factor: ``given`` (``--dilation N``), or for ``auto`` the one
    uet/live/dilation.py chooses from the scenario's packet rate (its receivers' host links, the
    payload size) and the machine's cores."""
    from uet.live.launcher import build_workload

    if given != "auto":
        return Dilation(float(given), "given")
    t = load_topology(
        topo or s["topology"],
        profile=s["profile"],
        rate_bps=int(s["rate_bps"]),
        overrides=overrides_to_dict(s.get("overrides", [])),
    )
    receivers = len({f.dst for f in build_workload(s).flows()})
    return choose(receivers, t.host_link.rate_bps, int(ep.get("payload_size", 1024)))
