"""``uet-sim --plot DIR``: FCT CDF, queue depth per port over time, throughput per port.

Reads a :func:`uet.sim.scenario.simulate` result made with ``timeline=True`` (queue-depth and
port-byte samples of the switch model, :mod:`uet.fabric.model.telemetry`). The busiest ports (by
peak queue, and by bytes sent) are drawn, at most eight per figure, so a 1,024-host run stays
readable. Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

__all__ = ["fct_cdf", "write_plots"]

_TOP = 8


def write_plots(res: dict[str, Any], folder: str) -> list[str]:
    """Write ``fct_cdf.png``, ``queue_depth.png``, ``throughput.png`` and, with congestion control on,
    ``cc_state.png`` (uet.sim.cc_plots) into ``folder``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    out = []
    cdf = fct_cdf(res, folder)
    if cdf:
        out.append(cdf)

    queues: dict[str, list[tuple[float, int]]] = defaultdict(list)
    sent: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for r in res.get("timeline", []):
        key = f"{r['node']}:{r['port']}"
        if r["event"] == "queue_depth" and r["tc"] == 0:
            queues[key].append((r["t"] / 1e3, r["bytes"]))
        elif r["event"] == "port_bytes":
            sent[key].append((r["t"] / 1e3, r["tx_bytes"]))
    fig, ax = plt.subplots(figsize=(7, 4))
    for key in sorted(queues, key=lambda k: -max(b for _, b in queues[k]))[:_TOP]:
        ts, bs = zip(*queues[key], strict=True)
        ax.step(ts, [b / 1024 for b in bs], where="post", label=key)
    ax.set_xlabel("virtual time (µs)")
    ax.set_ylabel("TC0 queue (KiB)")
    ax.set_title("queue depth of the busiest ports")
    if queues:
        ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    out.append(_save(fig, folder, "queue_depth.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    for key in sorted(sent, key=lambda k: -sent[k][-1][1])[:_TOP]:
        pts = sent[key]
        rate_ts = [t for t, _ in pts[1:]]
        rates = [
            (b1 - b0) * 8 / ((t1 - t0) * 1e3) if t1 > t0 else 0.0
            for (t0, b0), (t1, b1) in zip(pts, pts[1:], strict=False)
        ]
        if rate_ts:
            ax.plot(rate_ts, rates, label=key)
    ax.set_xlabel("virtual time (µs)")
    ax.set_ylabel("throughput (Gbit/s)")
    ax.set_title("throughput of the busiest ports")
    if sent:
        ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    out.append(_save(fig, folder, "throughput.png"))
    from uet.sim.cc_plots import cc_plot

    cc = cc_plot(res, folder)
    if cc:
        out.append(cc)
    return out


def fct_cdf(res: dict[str, Any], folder: str) -> str | None:
    """Write ``fct_cdf.png`` (the flows' completion times of a run result, simulated or live:
    ``uet-run --plot`` uses it for both engines) into ``folder``; ``None`` when no flow
    completed (no empty axes)."""
    fcts = sorted(f["completion_s"] * 1e6 for f in res["flows"] if f.get("completion_s") is not None)
    if not fcts:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.step(fcts, [(i + 1) / len(fcts) for i in range(len(fcts))], where="post")
    ax.set_xlabel("flow completion time (µs)")
    ax.set_ylabel("fraction of flows")
    ax.set_title(f"FCT CDF — {res['workload']}, {res['endpoints']} endpoints, {len(fcts)} flows")
    ax.grid(True, alpha=0.3)
    return _save(fig, folder, "fct_cdf.png")


def _save(fig: Any, folder: str, name: str) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(folder, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
