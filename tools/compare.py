"""The UET/RoCEv2 side-by-side table of ``uet-run --transport both`` (rocev2-and-fabric.md §9.1):
:func:`render_comparison` prints a :func:`uet.experiments.compare.comparison`, one row per metric,
one column per transport."""

from __future__ import annotations

from typing import Any

from uet.tools.cli import format_cell, format_seconds, table_console, transport_label

from uet.experiments.compare import ROWS

__all__ = ["fmt", "render_comparison"]


def fmt(v: Any, key: str = "") -> str:
    """One cell: a time (``key`` ending in ``_s``) in the unit that fits, else :func:`format_cell`."""
    if key.endswith("_s") and isinstance(v, int | float) and not isinstance(v, bool):
        return format_seconds(v)
    return format_cell(v)


def render_comparison(cmp: dict[str, Any], title: str) -> None:
    """The side-by-side table on stdout: one row per metric a run has, one column per transport."""
    from rich.table import Table

    con = table_console(120)
    t = Table(title=title)
    t.add_column("metric")
    names = list(cmp["metrics"])
    for name in names:
        label = transport_label(name)
        if name in cmp.get("interrupted", ()):
            label += " (interrupted)"
        t.add_column(label, justify="right")
    for key, label in ROWS:
        vals = [cmp["metrics"][n].get(key) for n in names]
        if all(v is None for v in vals):
            continue
        t.add_row(label, *(fmt(v, key) for v in vals))
    con.print(t)
