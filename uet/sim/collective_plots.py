"""``--plot DIR`` of a collective run: ``busbw.png``, the bus bandwidth against the size (the
nccl-tests sweep, :mod:`uet.workloads.collective`), the link rate dashed. Needs matplotlib."""

from __future__ import annotations

import os
from typing import Any

from uet.sim.plots import _save

__all__ = ["busbw_plot"]


def busbw_plot(res: dict[str, Any], folder: str) -> str | None:
    """Write ``busbw.png`` into ``folder``; None when the run has no collective row with a time."""
    c = res.get("collective")
    rows = [r for r in (c or {}).get("rows", []) if r.get("busbw_gbps") is not None]
    if not c or not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(folder, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r["size"] for r in rows], [r["busbw_gbps"] for r in rows], marker="o", label="busbw")
    rate = res.get("link_rate_bps")
    if rate:
        ax.axhline(rate / 1e9, linestyle="--", color="grey", label="link rate")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("bus bandwidth (Gbit/s)")
    ax.set_title(f"{c['op']} ({c['algorithm']}), {c['ranks']} ranks, {res.get('transport', 'uet')}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    return _save(fig, folder, "busbw.png")
