"""``uet-bench matrix``: the impairment matrix (loss, reordering, duplication) from the shell.

RUD, ROD and RUDI at several loss rates (with reordering and duplication) and seeds, two PDS cores
in virtual time; one row per cell: intact, duplicates, retransmissions per lost packet. Exit
status 0 when every cell is intact, 1 otherwise, 2 on a usage error (tools/cli.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from uet.tools.cli import int_arg, probability, table_console

from uet.experiments.impair_matrix import as_dicts, run_matrix
from uet.pds import Mode, PdsConfig


def _floats(text: str) -> tuple[float, ...]:
    try:
        vals = tuple(float(x) for x in text.split(",") if x)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from e
    if not vals or not all(0.0 <= v < 1.0 for v in vals):
        raise argparse.ArgumentTypeError("probabilities must be in [0, 1)")
    return vals


def _modes(text: str) -> tuple[Mode, ...]:
    try:
        return tuple(Mode[x.strip().upper()] for x in text.split(",") if x.strip())
    except KeyError as e:
        raise argparse.ArgumentTypeError(f"unknown mode {e.args[0]!r} (rud, rod, rudi)") from e


def add_parser(sub: Any) -> None:
    """The ``uet-bench matrix`` subcommand (tools/bench/__init__.py)."""
    p = sub.add_parser(
        "matrix",
        help="RUD/ROD/RUDI under loss, reordering and duplication (virtual time)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--modes", type=_modes, default=(Mode.RUD, Mode.ROD, Mode.RUDI), help="default rud,rod,rudi")
    p.add_argument("--loss", type=_floats, default=(0.01, 0.05, 0.10, 0.20), help="default 0.01,0.05,0.1,0.2")
    p.add_argument("--seeds", type=int_arg(1), default=3, help="seeds per cell (default 3)")
    p.add_argument("--packets", type=int_arg(1), default=2000, help="requests per cell (default 2000)")
    p.add_argument("--reorder", type=probability, default=0.05, help="fraction delayed past later ones (0.05)")
    p.add_argument("--dup", type=probability, default=0.01, help="fraction duplicated (default 0.01)")
    p.add_argument(
        "--rod-go-back-n",
        action="store_true",
        help="ROD targets discard out-of-order requests (go-back-N) instead of buffering them (the default)",
    )
    p.add_argument(
        "--rx-ns", type=int_arg(0), default=0, metavar="NS",
        help="a receiver slowed on purpose: it takes one datagram per NS ns from a 64-datagram queue (default 0: off)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON object per cell")
    p.set_defaults(run=run)


def run(ns: argparse.Namespace) -> int:
    """Run every cell; print a table or JSON lines. 0 when every cell is intact, else 1."""
    seeds = tuple(range(1, ns.seeds + 1))
    cfg = PdsConfig(rod_buffer=not ns.rod_go_back_n)
    results = as_dicts(
        run_matrix(
            ns.modes, ns.loss, seeds, packets=ns.packets, reorder=ns.reorder, dup=ns.dup, config=cfg, rx_ns=ns.rx_ns
        )
    )
    if ns.json:
        for r in results:
            sys.stdout.write(json.dumps(r) + "\n")
    else:
        from rich.table import Table

        slow = f", receiver 1 datagram / {ns.rx_ns} ns" if ns.rx_ns else ""
        t = Table(title=f"uet-bench matrix ({ns.packets} packets, reorder {ns.reorder}, dup {ns.dup}{slow})")
        cols = (
            "mode",
            "loss",
            "seed",
            "intact",
            "failed",
            "duplicates",
            "lost",
            "reordered",
            "retransmissions",
            "retx_per_lost",
        )
        for c in (*cols, "virtual_ms"):
            t.add_column(c, justify="right")
        for r in results:
            t.add_row(*(str(r[c]) for c in (*cols, "virtual_ms")))
        table_console(140).print(t)
    return 0 if all(r["intact"] for r in results) else 1
