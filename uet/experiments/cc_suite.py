"""The figures of one row of ``uet-sim --suite cc`` (tools/cc_suite.py runs the suite and prints
the table; its docstring says what is compared with uet-htsim and how our frames are allowed for):
from a ``simulate`` result and the scenario's ``[reference]`` table of htsim's figures, our tail
FCT against our ideal, the ratio of slowdowns against htsim's, what the retransmissions answered,
and the per-link figures (the most flows on one link, the route bound, tail / bound).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["HTSIM_FLOW_BYTES", "retx_causes", "row_result"]

#: the flow size of every htsim validation run of issue 11's table
HTSIM_FLOW_BYTES = 2_000_000


def _tail_ideal(res: dict[str, Any], overhead: int, payload: int) -> tuple[float, float]:
    """(our ideal, the same with header bytes taken out) of the slowest destination, in s: per
    destination, the largest lone-flow ideal plus the serialisation of the other flows into it."""
    rate = res["link_rate_bps"]
    by_dst: dict[str, list[dict[str, Any]]] = {}
    for f in res["flows"]:
        by_dst.setdefault(f["dst"], []).append(f)
    best = (0.0, 0.0)
    for flows in by_dst.values():
        ser = []
        hdr = []
        for f in flows:
            pkts = math.ceil(f["bytes"] / payload) if f["bytes"] else 0
            ser.append((f["bytes"] + pkts * overhead) * 8 / rate)
            hdr.append(pkts * overhead * 8 / rate)
        i = max(range(len(flows)), key=lambda j: flows[j].get("ideal_s", 0.0))
        ours = flows[i].get("ideal_s", 0.0) + sum(ser) - ser[i]
        bare = ours - sum(hdr)
        if ours > best[0]:
            best = (ours, bare)
    return best


def retx_causes(c: dict[str, Any]) -> dict[str, int]:
    """What the senders' retransmissions answered, from the endpoints' summed counters: trim
    NACKs (``trim_nack_core`` before the last hop, ``trim_nack_last_hop``), retransmission
    timeouts, SACK fast retransmits; and ``duplicates_at_receiver``, the copies that arrived
    after the original (a resend that was not needed)."""
    return {
        "trim_nack_core": c.get("nack_rx_TRIMMED", 0),
        "trim_nack_last_hop": c.get("nack_rx_TRIMMED_LASTHOP", 0),
        "rto": c.get("rto", 0),
        "fast_retransmit": c.get("fast_retransmits", 0),
        "duplicates_at_receiver": c.get("duplicates", 0),
    }


def row_result(path: Path, res: dict[str, Any], ref: dict[str, Any], scaled: str | None) -> dict[str, Any]:
    """One table row from a ``simulate`` result and the scenario's ``[reference]`` table."""
    from uet.scenario.derive import DATA_OVERHEAD

    payload = min(int(res.get("payload_size", 4096)), 16383)
    ideal, bare = _tail_ideal(res, DATA_OVERHEAD, payload)
    fct = res["fct"]
    tail = fct.get("max_s", 0.0)
    row: dict[str, Any] = {
        "scenario": path.stem,
        "workload": res["workload"],
        "endpoints": res["endpoints"],
        "cc": res["cc"],
        "lb": res["lb"],
        "ok": res["ok"],
        "scaled": scaled,
        "tail_us": round(tail * 1e6, 1),
        "ideal_us": round(ideal * 1e6, 1),
        "x_ideal": round(tail / ideal, 4) if ideal else None,
        "max_over_min": fct.get("max_over_min"),
        "retransmits": sum(f.get("retransmits", 0) for f in res["flows"]),
        "retx_causes": retx_causes(res.get("endpoint_counters", {})),
        "trims": res["fabric"]["trims"],
        "ecn_marks": res["fabric"]["ecn_marks"],
        "cpu_s": res.get("timing", {}).get("cpu_s"),
        "htsim": dict(ref),
    }
    h_tail = ref.get("tail_us")
    h_ideal = ref.get("ideal_us", round(bare * 1e6, 1))
    row["htsim"]["ideal_us"] = h_ideal
    if h_tail and h_ideal and ideal and tail:
        row["ratio"] = round((tail / ideal) / (h_tail / h_ideal), 4)
    _route_figures(row, res, ref, tail, h_tail if scaled is None else None, h_ideal)
    return row


def _route_figures(
    row: dict[str, Any], res: dict[str, Any], ref: dict[str, Any], tail: float, h_tail: Any, h_ideal: Any
) -> None:
    """The per-link figures of a row (uet.fabric.model.linkload): the most flows on one link,
    the route bound and tail / bound, and the FCT max/min of the flows on the bottleneck link.

    htsim's route bound (**decision**: htsim publishes no per-link counts) is computed from the
    ``max_flows`` the scenario's ``[reference]`` table infers for htsim's draw: its ideal plus
    (max_flows − 1) more flows' payload serialised on the shared link — htsim's bytes, so its
    tail / bound compares with ours whatever the header sizes. Only for htsim's own flow size
    (2 MB) at full scale: a scaled or resized row has no htsim counterpart."""
    links = res.get("links")
    if not links:
        return
    bound = links["route_bound_us"]
    fct = links.get("bottleneck_fct", {})
    row.update(
        max_flows=links["max_flows"],
        link_histogram=links["histogram"],
        route_bound_us=round(bound, 1),
        x_bound=round(tail * 1e6 / bound, 4) if bound else None,
        bottleneck=links["bottleneck"],
        bottleneck_max_over_min=fct.get("max_over_min"),
    )
    mf = ref.get("max_flows")
    flow_bytes = max((f["bytes"] for f in res["flows"]), default=0)
    if mf and h_tail and h_ideal and flow_bytes == HTSIM_FLOW_BYTES:
        h_bound = h_ideal + (mf - 1) * flow_bytes * 8e6 / res["link_rate_bps"]
        row["htsim"].update(route_bound_us=round(h_bound, 1), x_bound=round(h_tail / h_bound, 4))
