"""The live/sim differential: one scenario on the live engine, time-dilated, and in the simulator.

The live engine (``uet-run``: a switch process and one process per endpoint, real sockets, real
frames) and the simulator (``uet-sim``: the same cores and fabric model in one process, virtual
time) must tell the same story of the same scenario. With time dilation (:mod:`uet.clock`,
:mod:`uet.live.dilation`) the live engine measures the network rather than the CPU, so its
figures can be held to the simulator's. The **bar** (:func:`judge`), for each transport:

* every message intact on both engines;
* FCT p50 and p99 within :data:`TOLERANCE` (10 %) of the simulator's **spread**: the range of the
  figure over :data:`SPREAD` simulator runs of the run's seed — its own run and runs whose
  endpoints draw from other seeds (:func:`spread_runs`) — widened by :data:`TOLERANCE` at each end;


and across transports: the same **winner**, the transport with the lower FCT p99. Two p99s within
:data:`TIE` of each other are a tie, and a tie contradicts nothing: the engines disagree only when
each names a clear winner (a margin of more than :data:`TIE`) and they name different ones.

**Why a spread, not one simulated run** (measured): the endpoint cores draw their own random
values — each PDC's Start_PSN, UET's entropy rotation over the sprayed paths, a queue pair's
PSNs — and a live run's processes draw theirs, not the simulator's. Where the outcome hangs on
those draws, one simulated run is one sample. UET's incast 8:1 under the fixed window is such a
case: eight senders of 16 packets into one port of a trimming switch take turns (a sender whose
packets were trimmed resends one per packet the receiver reports, uet.pds.trimwait, while the
others refill their windows), and which sender leads when depends on the draws. Its FCT p50 — the
4th of 8 flows, between the senders under the receiver's leaf and those behind the spines — went
from 120 to 172 ms over twelve endpoint seeds of one run seed, while the p99 (the link drained:
194–196 ms) and every RoCEv2 figure (the paths follow the run seed) stayed within 1 %. With
``pds.cc = "nscc"`` the same p50 stays within 0.3 % (157.6–158.0 ms): the spread is the fixed
window's, not the model's. A live figure within 10 % of one sample of such a distribution is luck;
within 10 % of its range is the claim the simulator supports. Where the draws do not matter the
range is a point and the bar is the plain 10 %.

One case of the bar, live and simulated, is :func:`run_case`. ``uet-bench differential`` and
``uet-run --transport both`` run it (tools/differential.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from uet.errors import UetError

__all__ = ["CASES", "SPREAD", "TIE", "TOLERANCE", "LiveRunError", "judge", "run_case", "spread_runs"]

#: (workload, endpoints) of the bar
CASES: tuple[tuple[str, int], ...] = (("incast", 9), ("permutation", 16), ("allreduce", 8))
#: how far a live FCT percentile may be from the simulator's (relative)
TOLERANCE = 0.10
#: simulator runs of a case's seed the live figures are judged against (the run's own and
#: ``SPREAD - 1`` more, each with other endpoint seeds; module docstring)
SPREAD = 6
#: two transports whose FCT p99 differ by less than this (relative) are a tie
TIE = 0.05


class LiveRunError(UetError):
    """The live run of a case could not be carried out (a process died or did not report): the
    message says why."""


def spread_runs(
    s: dict[str, Any], topo: dict[str, Any], ep: dict[str, Any], *, faults: Any = None
) -> list[dict[str, dict[str, Any]]]:
    """The simulator's further runs of ``s``'s seed for the bar's spread (module docstring):
    :data:`SPREAD` − 1 runs (:func:`uet.sim.runs.simulate_runs`) whose endpoint cores draw from
    other seeds (``endpoint_seed``, uet.sim.scenario), the workload, fabric and RoCEv2 paths the
    run seed's. Raises :class:`~uet.scenario.check.ScenarioError` for what the simulator refuses."""
    from uet.sim.runs import simulate_runs

    seed = int(s["seed"])
    return [simulate_runs({**s, "endpoint_seed": (seed << 16) + k}, topo, ep, faults=faults) for k in range(1, SPREAD)]


def _rel(live: float | None, sim: float | None) -> float | None:
    if live is None or sim is None or sim <= 0:
        return None
    return (live - sim) / sim


def _outside(live: float | None, lo: float | None, hi: float | None) -> float | None:
    """How far ``live`` lies outside [``lo``, ``hi``], relative to the nearer end (0 inside)."""
    if live is None or lo is None or hi is None or lo <= 0:
        return None
    if live < lo:
        return (live - lo) / lo
    if live > hi:
        return (live - hi) / hi
    return 0.0


def _winner(runs: dict[str, dict[str, Any]]) -> tuple[str | None, float | None]:
    """The transport with the lower FCT p99 (``"tie"`` within :data:`TIE`) and the margin."""
    p99: dict[str, float] = {}
    for t, r in runs.items():
        v = (r.get("fct") or {}).get("p99_s")
        if v is None:
            return None, None
        p99[t] = float(v)
    if len(p99) < 2:
        return None, None
    (a, va), (b, vb) = sorted(p99.items(), key=lambda kv: kv[1])[:2]
    margin = (vb - va) / vb if vb else 0.0
    return ("tie" if margin < TIE else a), round(margin, 4)


def judge(
    live: dict[str, dict[str, Any]],
    sim: dict[str, dict[str, Any]],
    spread: Sequence[dict[str, dict[str, Any]]] = (),
) -> dict[str, Any]:
    """The bar (module docstring) for live and simulated runs keyed by transport, ``spread`` the
    simulator's further runs of the same seed (:func:`spread_runs`; none: the bar is the plain
    10 % of ``sim``): ``{"ok", "transports": {t: {"intact", "p50": {"live", "sim", "delta",
    "range", "outside"}, "p99": {...}, "ok"}}, "winner": {"live", "sim", "live_margin",
    "sim_margin", "ok"}}``. ``delta`` is the live figure's distance from the run seed's simulated
    one, ``range`` the simulator's [lowest, highest] over the spread, ``outside`` how far the live
    figure lies outside it (0 within) — the figure the bar holds to :data:`TOLERANCE`."""
    out: dict[str, Any] = {"transports": {}}
    ok = True
    for t in live:
        if t not in sim:
            continue
        row: dict[str, Any] = {"intact": bool(live[t].get("ok")) and bool(sim[t].get("ok"))}
        good = row["intact"]
        for q in ("p50", "p99"):
            lv = (live[t].get("fct") or {}).get(f"{q}_s")
            sv = (sim[t].get("fct") or {}).get(f"{q}_s")
            vals = [v for v in [sv, *((r.get(t, {}).get("fct") or {}).get(f"{q}_s") for r in spread)] if v is not None]
            lo, hi = (min(vals), max(vals)) if sv is not None else (None, None)
            d = _rel(lv, sv)
            o = _outside(lv, lo, hi)
            row[q] = {
                "live": lv,
                "sim": sv,
                "delta": None if d is None else round(d, 4),
                "range": None if lo is None else [lo, hi],
                "outside": None if o is None else round(o, 4),
            }
            good = good and o is not None and abs(o) <= TOLERANCE
        row["ok"] = good
        ok = ok and good
        out["transports"][t] = row
    lw, lm = _winner(live)
    sw, sm = _winner(sim)
    same = lw == sw or "tie" in (lw, sw) or lw is None or sw is None
    out["winner"] = {"live": lw, "sim": sw, "live_margin": lm, "sim_margin": sm, "ok": same}
    out["ok"] = ok and same
    return out


def run_case(
    workload: str,
    endpoints: int,
    *,
    dilation: float | str = "auto",
    messages: int | None = None,
    message_bytes: int | None = None,
) -> dict[str, Any]:
    """One case of the bar: ``uet-run -w WORKLOAD -n ENDPOINTS --transport both`` (``messages``
    and ``message_bytes``: ``--messages`` and ``--size``) live, time-dilated (``dilation``), and
    in virtual time, the settings from the scenario model (:func:`uet.scenario.read.resolve`);
    returns ``{"workload", "endpoints", "live", "sim", "bar"}``. Raises
    :class:`~uet.scenario.check.ScenarioError` for settings the model refuses and
    :class:`LiveRunError` when the live run cannot be carried out."""
    from uet.live.process import RunError
    from uet.live.runs import dilation_for, live_runs
    from uet.scenario.read import Given, resolve
    from uet.sim.runs import simulate_runs
    from uet.workloads import WORKLOADS

    run = {"workload": workload, "endpoints": endpoints, "transport": "both", "messages": messages}
    s, topo, ep = resolve(
        "live", None, Given(run={**run, "message_bytes": message_bytes}), workloads=WORKLOADS
    ).tables()
    try:
        live = asyncio.run(live_runs(s, topo, ep, dilation_for(dilation, s, topo, ep)))
    except RunError as e:
        raise LiveRunError(str(e)) from None
    sim = simulate_runs(s, topo, ep)
    spread = spread_runs(s, topo, ep)
    return {"workload": workload, "endpoints": endpoints, "live": live, "sim": sim, "bar": judge(live, sim, spread)}
