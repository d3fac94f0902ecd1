"""``uet-sim --plot DIR``: FCT CDF, queue depth and throughput per switch port, host NIC rates.

Reads a :func:`uet.sim.scenario.simulate` result made with ``timeline=True`` (queue-depth,
port-byte and NIC-byte samples of the fabric model, :mod:`uet.fabric.model.telemetry`) and draws
it with the functions ``uet-fabric --plot`` uses (:mod:`uet.fabric.telemetry_io`), on a
microsecond axis: the busiest ports (by peak queue, and by bytes sent), at most eight per figure
so a 1,024-host run stays readable, the legend saying "busiest N of M"; the ECN ``kmin``/``kmax``
(and PFC XOFF) of the run's switches as dashed lines on the queue plot; the receive and transmit
rate of the busiest host NICs (``host_rx.png``, ``host_tx.png``). A figure with nothing to draw
is not written (no empty axes). Needs matplotlib (the ``plot`` extra).

Every title begins with the run's transport (``UET``, ``RoCEv2``), so
the figures of ``--transport both`` (``DIR/uet``, ``DIR/roce``) are told apart once opened; the
FCT CDF is drawn from 0 on both axes, in the time unit that fits its flows (µs, ms or s).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from uet.fabric.telemetry_io import UNITS, plot, throughput
from uet.transport import transport_label

__all__ = ["fct_cdf", "write_plots"]

_TOP = 8
_UNIT = "µs"


def write_plots(res: dict[str, Any], folder: str) -> list[str]:
    """Write ``fct_cdf.png``, ``queue_depth.png``, ``throughput.png``, ``host_rx.png``,
    ``host_tx.png`` and, with congestion control on, ``cc_state.png`` (uet.sim.cc_plots) into
    ``folder`` (those that have something to show); returns their paths."""
    os.makedirs(folder, exist_ok=True)
    label = transport_label(str(res.get("transport", "uet")))
    out = []
    cdf = fct_cdf(res, folder)
    if cdf:
        out.append(cdf)
    records = res.get("timeline", [])
    out += plot(
        [r for r in records if r["event"] != "nic_bytes"],
        folder,
        top=_TOP,
        thresholds=res.get("thresholds"),
        unit=_UNIT,
        label=label,
    )
    scale = UNITS[_UNIT]
    nics: dict[str, dict[tuple[str, int], list[tuple[float, int]]]] = {"rx": defaultdict(list), "tx": defaultdict(list)}
    for r in records:
        if r["event"] == "nic_bytes":
            for way in ("rx", "tx"):
                nics[way][(r["node"], r["port"])].append((r["t"] / scale, r[way + "_bytes"]))
    for way, what in (("rx", "Receive rate per host NIC"), ("tx", "Transmit rate per host NIC")):
        title = f"{label}: {what}"
        moved = {k: sorted(v) for k, v in nics[way].items() if len({b for _, b in v}) > 1}
        if moved:
            out.append(throughput(moved, folder, f"host_{way}.png", title, top=_TOP, unit=_UNIT, what="hosts"))
    from uet.sim.cc_plots import cc_plot
    from uet.sim.collective_plots import busbw_plot
    from uet.sim.fault_plots import fault_plots
    from uet.sim.training_plots import gantt

    out += fault_plots(res, folder)
    for extra in (cc_plot(res, folder), busbw_plot(res, folder), gantt(res, folder)):
        if extra:
            out.append(extra)
    return out


def fct_cdf(res: dict[str, Any], folder: str) -> str | None:
    """Write ``fct_cdf.png`` (the flows' completion times of a run result, simulated or live:
    ``uet-run --plot`` uses it for both engines) into ``folder``; ``None`` when no flow
    completed (no empty axes)."""
    secs = sorted(f["completion_s"] for f in res["flows"] if f.get("completion_s") is not None)
    if not secs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    unit, scale = next((u, k) for u, k in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)) if secs[-1] >= k or u == "µs")
    fcts = [t / scale for t in secs]
    os.makedirs(folder, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    # from (0, 0): no flow done at time 0, then a step up at each completion
    ax.step([0.0, *fcts], [0.0, *((i + 1) / len(fcts) for i in range(len(fcts)))], where="post")
    ax.set_xlim(left=0)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"flow completion time ({unit})")
    ax.set_ylabel("fraction of flows")
    label = transport_label(str(res.get("transport", "uet")))
    ax.set_title(f"{label}: FCT CDF — {res['workload']}, {res['endpoints']:,} endpoints, {len(fcts):,} flows")
    ax.grid(True, alpha=0.3)
    return _save(fig, folder, "fct_cdf.png")


def _save(fig: Any, folder: str, name: str) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(folder, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
