"""``uet-demo``: two Fabric Endpoint processes exchange data over real UDP with impairment.

Starts a receiver endpoint process on 127.0.0.3 and a sender on 127.0.0.2 (this process), and
transfers ``--size`` random bytes (8 MiB by default) in RUD and then in ROD while both FEPs drop,
reorder and duplicate 2 % / 2 % / 1 % of what they transmit. Prints a summary table (bytes, time,
goodput, retransmissions, NACKs, intact) or, with ``--json``, one JSON object ``{"ok", "runs":
[...]}`` with the ``uet-bench pair`` record of each mode; exits 1 if anything was lost, duplicated
or corrupted, 2 on a usage error, 130 on Ctrl-C (after the modes that completed). Uses the same
two-process transfer as ``uet-bench pair`` (without the raw-UDP run) and the same options.

``--data-protect none|crc`` chooses the per-packet integrity check; by default ``--corrupt``
turns the endpoints' CRC-32C trailer on (``data_protect = "crc"``, said in one line
on stderr): the demo has no TSS, and without an integrity check corrupted payload would be
delivered as success. UUD is best effort (no flow control): its row says how many messages
arrived, and fewer than sent is not a failure. RUDI moves the data with idempotent RMA writes
into an idempotent-safe region, the only operations RUDI may carry (behaviour.md §2.14).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from uet.tools.bench.options import (
    CRC_NOTE,
    PairOptions,
    add_impairment,
    add_transfer_options,
    check_transfer,
    pair_notes,
)
from uet.tools.bench.pair import run_pair
from uet.tools.bench.report import passed
from uet.tools.capture_options import add_capture_options
from uet.tools.cli import (
    ArgumentParser,
    RunFailed,
    UsageError,
    float_arg,
    quiet_interrupt,
    run_main,
    size_arg,
    table_console,
    yes_no,
)

from uet.errors import UetError

__all__ = ["build_parser", "main"]

_MODES = ("rud", "rod", "rudi", "uud")


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="uet-demo", description=__doc__.splitlines()[0])
    p.add_argument("--size", type=size_arg(1, 1 << 30), default=8 << 20, help="bytes per transfer (default 8MiB)")
    add_impairment(p, loss=0.02, reorder=0.02, dup=0.01)
    p.add_argument("--modes", default="rud,rod", help="comma-separated delivery modes (default rud,rod)")
    p.add_argument(
        "--timeout", type=float_arg(0.0, open_lo=True), default=300.0, help="give up on a transfer after (s)"
    )
    add_transfer_options(p)
    p.add_argument(
        "--data-protect", choices=("none", "crc"), default=None,
        help="per-packet integrity: none or crc (CRC-32C trailer); default crc with --corrupt, else none",
    )  # fmt: skip
    add_capture_options(p, per=False)
    p.set_defaults(mode="rud")
    return p


def _per_mode(path: str | None, mode: str) -> str | None:
    """``--eventlog FILE``: one log per mode, ``-<mode>`` before the suffix."""
    if not path:
        return None
    root, ext = os.path.splitext(path)
    return f"{root}-{mode}{ext}"


def _modes(text: str) -> list[str]:
    modes = [m.strip().lower() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in _MODES]
    if not modes or bad:
        raise UsageError(f"--modes {text!r}: each one of {', '.join(_MODES)}")
    return modes


def _row(rec: dict[str, Any]) -> tuple[str, ...]:
    good = passed(rec)
    if rec["mode"] == "uud" and good:
        verdict = f"[yellow]best effort: {rec.get('messages_delivered', 0)}/{rec.get('messages', 0)} messages[/]"
    else:
        verdict = f"[green]{yes_no(True)}[/]" if good else f"[red]{yes_no(False)}[/] {rec.get('error') or ''}"
    return (
        rec["mode"].upper(),
        str(rec["delivered_bytes"]),
        f"{rec['elapsed_s']:.3f}",
        f"{rec['goodput_gbps']:.3f}",
        str(rec["retransmits"]),
        str(rec["nacks_sent"]),
        str(rec["duplicates"]),
        verdict,
    )


def _body(argv: Sequence[str] | None) -> int:
    ns = build_parser().parse_args(argv)
    modes = _modes(ns.modes)
    (a, b), port, _cfg = check_transfer(ns, "uet-demo")

    from rich.table import Table

    console = table_console(120)
    table = Table(title=f"UET demo: {a} → {b}, loss {ns.loss:.0%}, reorder {ns.reorder:.0%}, dup {ns.dup:.0%}")
    for col in ("mode", "bytes", "s", "goodput (Gbit/s)", "retransmits", "NACKs", "dups", "intact"):
        table.add_column(col, justify="right")
    runs: list[dict[str, Any]] = []
    interrupted = False
    if ns.corrupt > 0 and ns.data_protect is None:  # no TSS: corruption turns the CRC trailer on (issue 15 item 16)
        sys.stderr.write(f"uet-demo: note: {CRC_NOTE}\n")
    try:
        for mode in modes:
            opts = PairOptions(
                size=ns.size,
                payload=ns.payload,
                mode=mode,
                loss=ns.loss,
                reorder=ns.reorder,
                dup=ns.dup,
                corrupt=ns.corrupt,
                seed=ns.seed,
                addresses=(a, b),
                port=port,
                raw=False,
                timeout=ns.timeout,
                rto_ms=ns.rto_ms,
                uvloop=not ns.no_uvloop,
                progress=not ns.json and sys.stderr.isatty(),
                data_protect=ns.data_protect,
                pcap=os.path.join(ns.pcap, mode) if ns.pcap else None,
                eventlog=_per_mode(ns.eventlog, mode),
                capture_max=ns.capture_max,
            )
            with console.status(f"transferring {ns.size} bytes in {mode.upper()}…") if not ns.json else _null():
                rec = run_pair(opts)
            rec.update(pair_notes(opts, rec))
            runs.append(rec)
            table.add_row(*_row(rec))
    except KeyboardInterrupt:
        quiet_interrupt()
        interrupted = True  # the modes that completed are printed below
    except UetError as e:
        raise RunFailed(str(e)) from None
    ok = bool(runs) and all(passed(r) for r in runs)
    if ns.json:
        sys.stdout.write(json.dumps({"ok": ok and not interrupted, "interrupted": interrupted, "runs": runs}) + "\n")
    elif runs:
        console.print(table)
        for r in runs:
            if "uud_note" in r:
                console.print(r["uud_note"])
    if interrupted:
        raise KeyboardInterrupt
    return 0 if ok else 1


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``uet-demo``."""
    return run_main("uet-demo", _body, argv)


if __name__ == "__main__":
    sys.exit(main())
