"""Per-flow and per-run results of a workload, the same for the live engine and the simulator.

:func:`summarize` checks every message of every flow arrived exactly once with the bytes sent (the
digest the sender reported of each, ``crc32``, against the receiver's: :func:`uet.ses.sink.digest`),
and adds what a reader of a run wants first: per flow bytes, completion time, goodput,
retransmissions, intact; per run the flow completion time (FCT) percentiles (nearest rank), the
max/min FCT ratio (fairness) and, when the caller knows the ideal completion time of each flow,
the slowdown FCT / ideal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from uet.stats import percentile
from uet.workloads.base import Flow, RankReport, Workload

__all__ = ["credit_moved_bytes", "payload_received", "summarize"]


def summarize(
    workload: Workload,
    addresses: Sequence[str],
    reports: Sequence[RankReport | dict[str, Any]],
    *,
    ideal_s: Callable[[Flow], float] | None = None,
) -> dict[str, Any]:
    """``{"ok", "workload", "endpoints", "flows": [...], "fct": {...}}`` from the ranks' reports
    (objects or their :meth:`RankReport.as_dict`)."""
    dicts = [r.as_dict() if isinstance(r, RankReport) else r for r in reports]
    sent = {f["flow"]: f for r in dicts for f in r["flows"]}
    got: dict[tuple[int, int], list[int | None]] = {}
    rx_bytes: dict[int, int] = {}
    for r in dicts:
        for m in r["rx"]:
            if m["flow"] is not None:
                got.setdefault((m["flow"], m["index"]), []).append(m["crc32"])
                rx_bytes[m["flow"]] = rx_bytes.get(m["flow"], 0) + int(m.get("bytes", 0))
    checks = {i: r.get("check") for i, r in enumerate(dicts)}
    flows_out = []
    fcts, slowdowns = [], []
    for fl in workload.flows():
        rec: dict[str, Any] = {"flow": fl.id, "src": addresses[fl.src], "dst": addresses[fl.dst]}
        f = sent.get(fl.id)
        if f is None:
            # no word from the sender (interrupted, stalled): the bytes its receiver got so far
            rec.update(
                bytes=rx_bytes.get(fl.id, 0),
                delivered=sum(1 for i in range(fl.messages) if (fl.id, i) in got),
                intact=False,
                error=dicts[fl.src].get("error") or "no report from the sender",
            )
        else:
            digests = f["crc32"]
            intact = f["error"] is None and all(got.get((fl.id, i)) == [h] for i, h in enumerate(digests))
            if checks.get(fl.src) is False:
                intact = False
            dt = f["completion_s"]
            rec.update(
                bytes=f["bytes"],
                messages=f["messages"],
                completion_s=round(dt, 9),
                goodput_gbps=round(f["bytes"] * 8 / dt / 1e9, 6) if dt > 0 else 0.0,
                retransmits=f["retransmits"],
                delivered=sum(1 for i in range(len(digests)) if (fl.id, i) in got),
                intact=intact,
                error=f["error"],
            )
            if f["error"] is None:
                fcts.append(dt)
            if ideal_s is not None:
                ideal = ideal_s(fl)
                rec["ideal_s"] = round(ideal, 9)
                if ideal > 0:
                    rec["slowdown"] = round(dt / ideal, 4)
                    if f["error"] is None:
                        slowdowns.append(dt / ideal)
        flows_out.append(rec)
    ok = all(f["intact"] for f in flows_out) and not any(r.get("error") for r in dicts)
    fct: dict[str, Any] = {"flows": len(fcts)}
    if fcts:
        fct.update(mean_s=round(sum(fcts) / len(fcts), 9))
        fct.update({f"p{p}_s": round(percentile(fcts, p), 9) for p in (50, 90, 99)})
        fct.update(max_s=round(max(fcts), 9), max_over_min=round(max(fcts) / min(fcts), 4) if min(fcts) > 0 else None)
    if slowdowns:
        fct.update({f"slowdown_p{p}": round(percentile(slowdowns, p), 4) for p in (50, 90, 99)})
        fct.update(slowdown_max=round(max(slowdowns), 4))
    return {
        "ok": ok,
        "workload": workload.name,
        "endpoints": workload.n,
        "flows": flows_out,
        "fct": fct,
        "errors": [r["error"] for r in dicts if r.get("error")],
        **workload.result_extra(flows_out),
    }


def credit_moved_bytes(workload: Workload, flows: list[dict[str, Any]], moved: dict[int, int]) -> None:
    """After an interrupted run: give each unfinished flow (``unfinished`` in ``flows``, the
    records :func:`summarize` made) the payload its receiver got so far counted per packet
    (``moved``: rank → bytes, the SES target's or RoCE responder's count), where it can be told
    apart: when the flow is its receiver's only unfinished flow, the receiver's count less the
    bytes of its other flows is this flow's. Before, a flow of one large message showed
    ``bytes 0`` after Ctrl-C although most of it had arrived. A receiver with several unfinished
    flows keeps the bytes of the messages it received whole (the run's total still counts every
    packet)."""
    by_id = {f["flow"]: f for f in flows}
    spec = {f.id: f for f in workload.flows()}
    open_to: dict[int, list[int]] = {}
    for fid, rec in by_id.items():
        if rec.get("unfinished"):
            open_to.setdefault(spec[fid].dst, []).append(fid)
    for dst, ids in open_to.items():
        if len(ids) != 1 or dst not in moved:
            continue
        others = sum(int(r.get("bytes") or 0) for fid, r in by_id.items() if spec[fid].dst == dst and fid != ids[0])
        rec = by_id[ids[0]]
        f = spec[ids[0]]
        rec["bytes"] = min(max(int(rec.get("bytes") or 0), moved[dst] - others), f.messages * f.nbytes)


def payload_received(counters: dict[str, int]) -> int:
    """An endpoint's payload bytes received so far, counted as packets arrive, from its counters
    (the SES target's, or the RoCE responder's)."""
    if "payload_bytes_received" in counters:  # RoCE
        return int(counters["payload_bytes_received"])
    return int(counters.get("ses_tgt_payload_bytes_received", 0)) + int(
        counters.get("ses_fast_payload_bytes_received", 0)
    )
