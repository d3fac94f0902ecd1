"""``uet-sim --plot DIR`` with congestion control on: each sender's NSCC window and RCCC credit
over virtual time (issue 11, "a plot of cwnd and credit for the 15→1 incast").

Reads the ``cc`` event-log records (:mod:`uet.cc.nscc`, :mod:`uet.cc.rccc`: ``cwnd``,
``inflight``, ``credit`` per CCC, qlog ``metrics_updated`` in spirit) that
:func:`uet.sim.scenario.simulate` keeps in ``result["cc_timeline"]`` when asked for a timeline.
One line per sender (host rank), at most :data:`_TOP` senders so large runs stay readable.
Needs matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

__all__ = ["cc_plot"]

_TOP = 16


def cc_plot(res: dict[str, Any], folder: str, name: str = "cc_state.png") -> str | None:
    """Write ``cc_state.png`` (cwnd above, credit below; a panel only when its records exist)
    into ``folder``; None when the run logged no CC record."""
    cwnd: dict[int, list[tuple[float, float]]] = defaultdict(list)
    credit: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for r in res.get("cc_timeline", []):
        t = r["t"] / 1e3
        if "cwnd" in r:
            cwnd[r["host"]].append((t, r["cwnd"] / 1024))
        if r.get("algo") == "rccc" and "credit" in r:
            credit[r["host"]].append((t, r["credit"] / 1024))
    panels = [(d, label) for d, label in ((cwnd, "NSCC cwnd (KiB)"), (credit, "RCCC credit (KiB)")) if d]
    if not panels:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 3.2 * len(panels)), sharex=True, squeeze=False)
    senders = sorted(set(cwnd) | set(credit))[:_TOP]
    cmap = plt.get_cmap("tab20")
    for ax, (data, label) in zip(axes[:, 0], panels, strict=True):
        for i, h in enumerate(senders):
            pts = data.get(h)
            if pts:
                ts, vs = zip(*pts, strict=True)
                ax.step(ts, vs, where="post", lw=0.8, color=cmap(i % 20), label=f"host {h}")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("virtual time (µs)")
    axes[0, 0].set_title(
        f"congestion state per sender — {res['workload']}, {res['endpoints']} endpoints, pds.cc = {res.get('cc', '?')}"
    )
    axes[0, 0].legend(fontsize=6, ncol=4, loc="upper right")
    path = os.path.join(folder, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
