"""Plots of a run with faults (issue 27): throughput over time around the events, FCT with and without.

``fault_throughput.png``: top, the data rate all flows received and the four flows the first link
failure stalled longest (on their own axis; uet.fabric.model.flowmeter); bottom, the transmit rate of each port at
the ends of the links the schedule touched (port-byte samples of the fabric model); every event as
a vertical line. ``fct_faults.png``: the FCT CDF of the run beside the same run without faults,
when the result carries one (``uet-sim --baseline``). Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import os
from typing import Any

from uet.sim.plots import _save

__all__ = ["fault_plots"]


def _rates(records: list[dict[str, Any]], ports: set[tuple[str, int]]) -> dict[str, list[tuple[float, float]]]:
    """(µs, Gb/s) per port from cumulative ``port_bytes`` samples."""
    last: dict[tuple[str, int], tuple[int, int]] = {}
    out: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        if r.get("event") != "port_bytes":
            continue
        key = (r["node"], r["port"])
        if key not in ports:
            continue
        prev = last.get(key)
        last[key] = (r["t"], r["tx_bytes"])
        if prev is not None and r["t"] > prev[0]:
            rate = (r["tx_bytes"] - prev[1]) * 8 / (r["t"] - prev[0])
            out.setdefault(f"{key[0]}:{key[1]}", []).append((r["t"] / 1e3, rate))
    return out


def fault_plots(res: dict[str, Any], folder: str) -> list[str]:
    """Write the figures of the module docstring into ``folder``; their paths."""
    series = res.get("fault_series")
    faults = res.get("faults")
    if not series or not faults:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    out = []
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    tot = series["total"]
    top.plot([t / 1e3 for t, _ in tot], [g for _, g in tot], label="all flows", color="black")
    flows = top.twinx()  # one flow's rate is far below the sum: its own axis
    for label, pts in series["flows"].items():
        flows.plot([t / 1e3 for t, _ in pts], [g for _, g in pts], label=label, alpha=0.7)
    flows.set_ylabel("stalled flows (Gb/s)")
    flows.legend(fontsize=7, loc="lower right")
    top.set_ylabel("all flows received (Gb/s)")
    top.set_title(f"{res['transport']} {res['workload']}, {res['endpoints']} endpoints: throughput around the faults")
    ports = {(node, p) for ends in faults.get("links", {}).values() for node, p in ends}
    for label, pts in sorted(_rates(res.get("timeline", []), ports).items())[:8]:
        bottom.plot([t for t, _ in pts], [g for _, g in pts], label=label)
    bottom.set_ylabel("port transmit (Gb/s)")
    bottom.set_xlabel("time (µs)")
    for ax in (top, bottom):
        for e in faults["events"]:
            ax.axvline(e["t_ns"] / 1e3, color="red" if e["event"] == "down" else "grey", ls="--", lw=0.8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right")
    out.append(_save(fig, folder, "fault_throughput.png"))
    base = res.get("baseline")
    if base and base.get("completion_s"):
        fig, ax = plt.subplots(figsize=(7, 4))
        for label, fcts in (
            ("with faults", sorted(f["completion_s"] * 1e6 for f in res["flows"] if f.get("completion_s"))),
            ("without", [x * 1e6 for x in base["completion_s"]]),
        ):
            ax.step(fcts, [(i + 1) / len(fcts) for i in range(len(fcts))], where="post", label=label)
        ax.set_xlabel("flow completion time (µs)")
        ax.set_ylabel("fraction of flows")
        ax.set_title(f"FCT CDF with and without the faults — {res['workload']}, {res['endpoints']} endpoints")
        ax.grid(True, alpha=0.3)
        ax.legend()
        out.append(_save(fig, folder, "fct_faults.png"))
    return out
