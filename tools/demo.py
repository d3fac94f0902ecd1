"""``uet-demo``: two Fabric Endpoint processes exchange data over real UDP with impairment.

Starts a receiver endpoint process on 127.0.0.3 and a sender on 127.0.0.2 (this process), and
transfers ``--size`` random bytes (8 MiB by default) in RUD and then in ROD while both FEPs drop,
reorder and duplicate 2 % / 2 % / 1 % of what they transmit. Prints a summary table (bytes, time,
goodput, retransmissions, NACKs, intact) and exits non-zero if anything was lost, duplicated or
corrupted. Uses the same two-process transfer as ``uet-bench pair`` (without the raw-UDP run).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from uet.tools.bench import PairOptions, parse_size, run_pair

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="uet-demo", description=__doc__.splitlines()[0])
    p.add_argument("--size", type=parse_size, default=8 << 20, help="bytes per transfer (default 8MiB)")
    p.add_argument("--payload", type=parse_size, default=4096)
    p.add_argument("--loss", type=float, default=0.02)
    p.add_argument("--reorder", type=float, default=0.02)
    p.add_argument("--dup", type=float, default=0.01)
    p.add_argument("--modes", default="rud,rod", help="comma-separated delivery modes")
    p.add_argument("--addresses", default="127.0.0.2,127.0.0.3")
    p.add_argument("--port", type=int, default=4793)
    p.add_argument("--seed", type=int, default=1)
    ns = p.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 120)  # no 80-column wrap when piped
    a, b = (x.strip() for x in ns.addresses.split(","))
    table = Table(title=f"UET demo: {a} → {b}, loss {ns.loss:.0%}, reorder {ns.reorder:.0%}, dup {ns.dup:.0%}")
    for col in ("mode", "bytes", "s", "Gbit/s", "retx", "NACKs", "dups", "intact"):
        table.add_column(col, justify="right")
    ok = True
    for mode in (m.strip() for m in ns.modes.split(",")):
        opts = PairOptions(
            size=ns.size,
            payload=ns.payload,
            mode=mode,
            loss=ns.loss,
            reorder=ns.reorder,
            dup=ns.dup,
            seed=ns.seed,
            addresses=(a, b),
            port=ns.port,
            raw=False,
            timeout=300.0,
            progress=sys.stderr.isatty(),
        )
        with console.status(f"transferring {ns.size} bytes in {mode.upper()}…"):
            rec = run_pair(opts)
        good = bool(rec["intact"]) and rec["duplicates"] == 0
        ok &= good
        table.add_row(
            mode.upper(),
            str(rec["delivered_bytes"]),
            f"{rec['elapsed_s']:.3f}",
            f"{rec['goodput_gbps']:.3f}",
            str(rec["retransmits"]),
            str(rec["nacks_sent"]),
            str(rec["duplicates"]),
            "[green]yes[/]" if good else f"[red]NO[/] {rec.get('error') or ''}",
        )
    console.print(table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
