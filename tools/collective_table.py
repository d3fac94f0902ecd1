"""The nccl-tests-like table of a collective run (``uet-sim`` / ``uet-run`` with the ``collective``
or ``allreduce`` workload): one row per size — size, count, type, time, algbw, busbw (nccl-tests'
definitions, :mod:`uet.workloads.collective`) — and busbw as a fraction of the link rate."""

from __future__ import annotations

from typing import Any

from uet.tools.cli import format_bytes, format_cell, format_number

__all__ = ["collective_table", "training_lines"]


def collective_table(result: dict[str, Any]) -> Any:
    """A rich Table of ``result["collective"]``."""
    from rich.table import Table

    c = result["collective"]
    rate = result.get("link_rate_bps") or (result.get("settings") or {}).get("rate_bps")
    how = c["algorithm"]
    if c["op"] in ("allreduce", "reduce_scatter", "all_gather") or how == "tree":
        how += f", {c['channels']} channels, {format_bytes(c['slice_bytes'])} slices, depth {c['depth']}"
    t = Table(
        title=f"{c['op']} ({how}): {format_number(c['ranks'])} ranks, {result.get('transport', 'uet')}, "
        f"busbw = algbw × {c['busbw_factor']:g}"
    )
    cols = ["size (B)", "count", "type", "time (µs)", "algbw (GB/s)", "busbw (GB/s)", "busbw (Gbit/s)"]
    if rate:
        cols.append("busbw / link")
    cols.append("intact")
    for col in cols:
        t.add_column(col, justify="left" if col == "type" else "right")
    for r in c["rows"]:
        cells = [
            f"{r['size']:,}",
            f"{r['count']:,}",
            r["type"],
            format_cell(r.get("time_us")),
            format_cell(r.get("algbw_GBps")),
            format_cell(r.get("busbw_GBps")),
            format_cell(r.get("busbw_gbps")),
        ]
        if rate:
            cells.append(f"{r['busbw_gbps'] * 1e9 / rate:.3f}" if r.get("busbw_gbps") is not None else "-")
        cells.append("[green]yes[/]" if r["ok"] else "[red]no[/]")
        t.add_row(*cells)
    return t


def training_lines(result: dict[str, Any]) -> list[str]:
    """What a training iteration's run says besides its flows (uet.workloads.training)."""
    t = result["training"]
    lay = t["layout"]
    kinds = ", ".join(f"{k} {v * 1e6:,.1f} µs" for k, v in t["comm_s_by_kind"].items())
    return [
        f"training iteration (DP {lay['dp']} × TP {lay['tp']} × PP {lay['pp']} × EP {lay['ep']}, "
        f"ZeRO {lay['zero']}, {lay['microbatches']} micro-batches): {t['iteration_s'] * 1e6:,.1f} µs, "
        f"compute {t['compute_s'] * 1e6:,.1f} µs, exposed communication {t['exposed_comm_s'] * 1e6:,.1f} µs",
        f"receives outstanding per rank (posted to complete, summed by kind): {kinds}",
    ]
