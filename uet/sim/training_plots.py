"""``--plot DIR`` of a training iteration (:mod:`uet.workloads.training`): ``training_gantt.png``,
one row per rank (the first 16), its forward and backward passes as bars and, on a thinner bar
below them, the receives of each kind of communication (TP, PP, DP, EP, ZeRO-3 parameter gathers)
from posted to complete. Needs matplotlib."""

from __future__ import annotations

import os
from typing import Any

from uet.sim.plots import _save

__all__ = ["gantt"]

_ROWS = 16
_COLOURS = {"forward": "tab:blue", "backward": "tab:green", "tp": "tab:orange", "pp": "tab:red",
            "dp": "tab:purple", "ep": "tab:brown", "zero": "tab:pink"}  # fmt: skip


def gantt(res: dict[str, Any], folder: str) -> str | None:
    """Write ``training_gantt.png`` into ``folder``; None without a training timeline."""
    timeline = (res.get("training") or {}).get("timeline")
    if not timeline:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    ranks = sorted(timeline, key=int)[:_ROWS]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(ranks) + 1.5))
    seen: set[str] = set()
    for y, rank in enumerate(ranks):
        for what, start, end in timeline[rank]:
            comm = what not in ("forward", "backward")
            ax.broken_barh(
                [(start * 1e6, (end - start) * 1e6)],
                (y - 0.4, 0.25) if comm else (y - 0.1, 0.5),
                color=_COLOURS.get(what, "grey"),
                alpha=0.5 if comm else 0.9,
                label=None if what in seen else what,
            )
            seen.add(what)
    ax.set_yticks(range(len(ranks)), [f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("time in the iteration (µs)")
    t = res["training"]
    ax.set_title(
        f"training iteration: {t['iteration_s'] * 1e3:.3f} ms, compute {t['compute_s'] * 1e3:.3f} ms, "
        f"exposed communication {t['exposed_comm_s'] * 1e3:.3f} ms ({res.get('transport', 'uet')})"
    )
    ax.legend(loc="upper right", fontsize="small")
    return _save(fig, folder, "training_gantt.png")
