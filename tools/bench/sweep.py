"""``uet-bench pair --sizes LIST`` / ``-a``: a message-size sweep of the pair transfer, perftest
``-a`` style (``ib_send_bw -a``): for each message size, ``--count`` messages of that size
(capped at the pair's 1 GiB), UET against raw UDP as in one ``pair`` run, one table row (or one
JSON object with a ``results`` list, as ``uet-bench rtt --sizes`` prints).

Ctrl-C during a sweep prints the sizes measured so far, then ``interrupted``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from uet.tools.bench.options import MAX_PAIR_SIZE, PairOptions, pair_notes
from uet.tools.bench.pair import run_pair
from uet.tools.bench.report import passed
from uet.tools.bench.rtt import SWEEP_SIZES
from uet.tools.cli import quiet_interrupt, table_console, yes_no

__all__ = ["SWEEP_COLUMNS", "pair_sweep"]

#: the table's columns (every row of the JSON has them, and the whole pair record besides)
SWEEP_COLUMNS = ("message_size", "messages", "goodput_gbps", "raw_udp_gbps", "ratio", "pps", "retransmits", "intact")


def pair_sweep(ns: argparse.Namespace, base: PairOptions) -> int:
    """Run one pair transfer per message size; print the table or JSON; 1 if a row failed."""
    sizes = SWEEP_SIZES if ns.all else ns.sizes
    rows: list[dict[str, Any]] = []
    base = dataclasses.replace(base, progress=False)
    try:
        for size in sizes:
            opts = dataclasses.replace(base, message_size=size, size=min(size * ns.count, MAX_PAIR_SIZE))
            rec = run_pair(opts)
            rec["message_size"] = size
            rows.append(rec)
            if rec.get("interrupted"):
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        quiet_interrupt()
        if rows:
            _print(ns, base, rows)  # the sizes measured so far
        raise
    _print(ns, base, rows)
    return 0 if all(passed(r) for r in rows) else 1


def _cell(row: dict[str, Any], col: str) -> str:
    v = row.get(col)
    if v is None:
        return "-"
    return yes_no(v) if col == "intact" else str(v)


def _print(ns: argparse.Namespace, base: PairOptions, rows: list[dict[str, Any]]) -> None:
    if ns.json:
        rec = {"mode": base.mode, "count": ns.count, "rounds": base.rounds, "results": rows}
        rec.update(pair_notes(base))
        sys.stdout.write(json.dumps(rec) + "\n")
        return
    from rich.table import Table

    t = Table(title=f"uet-bench pair sweep ({base.mode.upper()}, {ns.count} messages per size, payload {base.payload})")
    for c in SWEEP_COLUMNS:
        t.add_column(c.replace("_gbps", " (Gbit/s)").replace("message_size", "size"), justify="right")
    for r in rows:
        t.add_row(*(_cell(r, c) for c in SWEEP_COLUMNS))
    con = table_console(120)
    con.print(t)
    for note in pair_notes(base).values():
        con.print(f"note: {note}")
