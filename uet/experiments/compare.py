"""UET against RoCEv2 side by side: the metrics of ``uet-run --transport both`` (rocev2-and-fabric.md
§9.1), from two result dicts of the same scenario.

:func:`metrics` reduces one run's result (live or simulated, either transport) to the §9.1
figures; :func:`comparison` puts two of them together; ``uet-run`` prints the table
(:func:`uet.tools.compare.render_comparison`: one row per metric, one column per transport).
Definitions (**decisions** where §9.1 leaves a choice):

* FCT p50 / p99 / max and slowdown (FCT ÷ the flow's ideal on an idle fabric) over the flows, as
  the per-run summary has them (:func:`uet.workloads.report.summarize`, nearest-rank);
* goodput: payload bytes of the intact flows ÷ the run's elapsed time (virtual time in the
  simulator), summed over flows — retransmissions and headers excluded;
* all-reduce only: job completion time (JCT) = the latest rank's completion, algbw = the vector
  size ÷ JCT, busbw = algbw × 2(n − 1)/n (the nccl-tests convention);
* PFC: XOFF frames sent by the switches, time spent paused summed over every paused (port, class),
  and the pause spread: how many switches sent XOFF and how many hosts were paused;
* collective workload: the time and busbw (its nccl-tests row, :mod:`uet.workloads.collective`) of
  the largest size swept; training workload: the iteration time and exposed communication;
* incast_victim only: the victim flow's (flow 0) goodput and slowdown;
* loss signals: drops, trims, ECN marks, CNPs sent;
* go-back-N amplification: retransmitted payload bytes ÷ goodput bytes; RoCE's sequence-error
  NAKs;
* permutation only: goodput ÷ the bisection (one flow per host at the link rate), and the leaf
  uplinks' load max ÷ mean (:func:`uet.fabric.counters.uplink_imbalance`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["ROWS", "comparison", "metrics"]

#: (key, label) of the table rows, in order; a metric a run does not have is shown as "–", a time
#: (key ``*_s``) in the unit that fits.
ROWS: tuple[tuple[str, str], ...] = (
    ("ok", "all messages intact"),
    ("flows_finished", "flows finished (interrupted run)"),
    ("elapsed_s", "elapsed"),
    ("fct_p50_s", "FCT p50"),
    ("fct_p99_s", "FCT p99"),
    ("fct_max_s", "FCT max"),
    ("slowdown_p50", "slowdown p50"),
    ("slowdown_p99", "slowdown p99"),
    ("slowdown_max", "slowdown max"),
    ("goodput_gbps", "goodput (Gbit/s)"),
    ("jct_s", "all-reduce JCT"),
    ("busbw_gbps", "all-reduce busbw (Gbit/s)"),
    ("collective_time_s", "collective time (largest size)"),
    ("collective_busbw_gbps", "collective busbw (Gbit/s, largest size)"),
    ("iteration_s", "training iteration"),
    ("exposed_comm_s", "training exposed communication"),
    ("victim_goodput_gbps", "victim goodput (Gbit/s)"),
    ("victim_slowdown", "victim slowdown"),
    ("pause_frames", "PFC pause frames"),
    ("paused_s", "time paused (all ports)"),
    ("pause_switches", "switches that paused"),
    ("paused_hosts", "hosts paused"),
    ("bisection_share", "permutation: goodput / bisection"),
    ("uplink_imbalance", "uplink load max / mean"),
    ("drops", "drops"),
    ("trims", "trims"),
    ("ecn_marks", "ECN marks"),
    ("cnps", "CNPs sent"),
    ("retransmitted_bytes", "retransmitted bytes"),
    ("retx_over_goodput", "retransmitted / goodput bytes"),
    ("naks", "RC sequence-error NAKs"),
)


def _counter(res: dict[str, Any], key: str) -> int:
    """``key`` summed over the endpoints (a dict in the simulator, a list of dicts live)."""
    ec = res.get("endpoint_counters") or {}
    if isinstance(ec, dict):
        return int(ec.get(key, 0) or 0)
    return sum(int(c.get(key, 0) or 0) for c in ec)


def metrics(res: dict[str, Any]) -> dict[str, Any]:
    """The §9.1 figures of one run's result (module docstring)."""
    flows = res.get("flows", [])
    fct = res.get("fct") or {}
    fab = res.get("fabric") or {}
    elapsed = float(res.get("elapsed_s") or res.get("virtual_s") or 0.0)
    payload = sum(int(f.get("bytes", 0)) for f in flows if f.get("intact"))
    out: dict[str, Any] = {
        "ok": bool(res.get("ok")),
        "elapsed_s": elapsed,
        "fct_p50_s": fct.get("p50_s"),
        "fct_p99_s": fct.get("p99_s"),
        "fct_max_s": fct.get("max_s"),
        "slowdown_p50": fct.get("slowdown_p50"),
        "slowdown_p99": fct.get("slowdown_p99"),
        "slowdown_max": fct.get("slowdown_max"),
        "goodput_gbps": round(payload * 8 / elapsed / 1e9, 6) if elapsed > 0 else None,
        "pause_frames": fab.get("pauses"),
        "paused_s": round(fab["paused_ns"] / 1e9, 9) if "paused_ns" in fab else None,
        "pause_switches": fab.get("pause_switches"),
        "paused_hosts": fab.get("paused_hosts"),
        "drops": fab.get("drops"),
        "trims": fab.get("trims"),
        "ecn_marks": fab.get("ecn_marks"),
        "cnps": _counter(res, "cnps_sent"),
        "retransmitted_bytes": _counter(res, "retransmitted_bytes"),
        "uplink_imbalance": fab.get("uplink_imbalance"),
    }
    if res.get("interrupted"):  # Ctrl-C: a partial run (uet/live/launcher.py ``Launcher.partial_result``)
        out["flows_finished"] = f"{res.get('flows_finished', 0)} of {len(flows)}"
    if res.get("transport") == "roce":
        out["naks"] = _counter(res, "naks_sent")
    rate = res.get("link_rate_bps")
    if res.get("workload") == "permutation" and rate and out["goodput_gbps"] is not None:
        out["bisection_share"] = round(out["goodput_gbps"] * 1e9 / (len(flows) * rate), 4)
    out["retx_over_goodput"] = round(out["retransmitted_bytes"] / payload, 4) if payload else None
    if res.get("workload") == "allreduce" and flows and all(f.get("completion_s") for f in flows):
        n = len(flows)
        jct = max(float(f["completion_s"]) for f in flows)
        size = (res.get("settings") or {}).get("message_bytes") or sum(int(f["bytes"]) for f in flows) // (2 * (n - 1))
        algbw = int(size) * 8 / jct / 1e9
        out.update(jct_s=round(jct, 9), busbw_gbps=round(algbw * 2 * (n - 1) / n, 6))
    rows = (res.get("collective") or {}).get("rows") or []
    if rows:  # the collective workload: its nccl-tests row of the largest size
        big = max(rows, key=lambda r: r["size"])
        t_us = big.get("time_us")
        out["collective_time_s"] = t_us / 1e6 if t_us is not None else None
        out["collective_busbw_gbps"] = big.get("busbw_gbps")
    if res.get("training"):
        out.update(iteration_s=res["training"].get("iteration_s"), exposed_comm_s=res["training"].get("exposed_comm_s"))
    if res.get("workload") == "incast_victim" and flows:
        victim = flows[0]
        out.update(victim_goodput_gbps=victim.get("goodput_gbps"), victim_slowdown=victim.get("slowdown"))
    return out


def comparison(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{"ok", "transports", "metrics": {transport: metrics}, "interrupted": [transport]}`` for
    runs keyed by transport (``interrupted``: the runs Ctrl-C cut short)."""
    return {
        "ok": all(bool(r.get("ok")) for r in results.values()),
        "transports": list(results),
        "metrics": {t: metrics(r) for t, r in results.items()},
        "interrupted": [t for t, r in results.items() if r.get("interrupted")],
    }
