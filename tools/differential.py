"""The live/sim differential: one scenario on the live engine, time-dilated, and in the simulator.

The two are held to the bar of :mod:`uet.experiments.differential` (FCT p50 and p99 within 10 %
of the simulator's spread over endpoint seeds, the same winner; its docstring says why a spread).

``uet-bench differential`` runs the bar on :data:`~uet.experiments.differential.CASES` (incast
8:1, permutation 16, ring all-reduce 8), each on UET and RoCEv2, with ``uet-run``'s scenario
settings (the same tables go to both engines), and prints one table; exit status 0 when the bar
holds for every case, 1 when not. ``uet-run --transport both`` on the live engine prints the
simulator's figures beside its own and this verdict (:func:`uet.tools.run.main`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from uet.tools.cli import RunFailed, UsageError, int_arg, size_arg, table_console

from uet.experiments.differential import CASES, SPREAD, TOLERANCE, LiveRunError, run_case

__all__ = ["add_parser", "beside", "render_verdict", "verdict_lines"]

_LABEL = {"uet": "UET", "roce": "RoCEv2"}


def verdict_lines(bar: dict[str, Any]) -> list[str]:
    """The bar's verdict in words: one line per transport, one for the winner."""
    lines = []
    for t, row in bar["transports"].items():
        p50, p99 = row["p50"], row["p99"]

        def pct(d: float | None) -> str:
            return "–" if d is None else f"{d * 100:+.1f} %"

        spread = [
            f"{q} {_ms(row[q]['range'][0])}–{_ms(row[q]['range'][1])} ms"
            for q in ("p50", "p99")
            if row[q].get("range") and row[q]["range"][0] != row[q]["range"][1]
        ]
        over = f" of its range ({'; '.join(spread)} across endpoint seeds)" if spread else ""
        lines.append(
            f"{_LABEL.get(t, t)}: live FCT p50 {pct(p50['delta'])}, p99 {pct(p99['delta'])} from the simulator's"
            f"{'' if row['intact'] else ', NOT intact on both'}: {'within' if row['ok'] else 'OUTSIDE'} "
            f"±{TOLERANCE * 100:.0f} %{over}"
        )
    w = bar["winner"]
    if w["live"] is not None:
        name = {**_LABEL, "tie": "a tie"}
        lines.append(
            f"lower FCT p99: {name.get(w['live'], w['live'])} live, {name.get(w['sim'], w['sim'])} in the "
            f"simulator: {'the engines agree' if w['ok'] else 'the engines DISAGREE'}"
        )
    return lines


def _ms(v: float) -> str:
    return f"{v * 1e3:,.3g}"


def render_verdict(bar: dict[str, Any]) -> None:
    """:func:`verdict_lines` on stdout."""
    for line in verdict_lines(bar):
        sys.stdout.write(line + "\n")


def beside(live: dict[str, dict[str, Any]], sim: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Runs keyed ``"UET live"``, ``"UET sim"``, ``"RoCEv2 live"``... for the side-by-side table
    (:func:`uet.tools.compare.render_comparison`)."""
    from uet.tools.run import SHORT_MARK

    from uet.live.dilation import short_of_cpu

    out: dict[str, dict[str, Any]] = {}
    for t, res in live.items():
        out[f"{_LABEL.get(t, t)} live" + (f" {SHORT_MARK}" if short_of_cpu(res) else "")] = res
        if t in sim:
            out[f"{_LABEL.get(t, t)} sim"] = sim[t]
    return out


def _figures(case: dict[str, Any]) -> list[list[str]]:
    rows = []
    for t, row in case["bar"]["transports"].items():
        dil = case["live"][t].get("dilation") or {}
        kept = (dil.get("verdict") or {}).get("kept_up")
        rows.append(
            [
                f"{case['workload']} {case['endpoints']}",
                _LABEL.get(t, t),
                *(
                    f"{row[q]['live'] * 1e3:,.2f} / {row[q]['sim'] * 1e3:,.2f}"
                    if row[q]["live"] is not None and row[q]["sim"] is not None
                    else "–"
                    for q in ("p50", "p99")
                ),
                *("–" if row[q]["delta"] is None else f"{row[q]['delta'] * 100:+.1f} %" for q in ("p50", "p99")),
                " / ".join(
                    "–" if not row[q].get("range") else "–".join(_ms(v) for v in row[q]["range"])
                    for q in ("p50", "p99")
                ),
                "yes" if row["intact"] else "no",
                f"×{dil.get('factor', 1):g}" + ("" if kept in (True, None) else " (CPU short)"),
                "yes" if row["ok"] else "no",
            ]
        )
    return rows


def _run(ns: argparse.Namespace) -> int:
    from uet.tools.run_settings import usage_errors

    names = ns.only.split(",") if ns.only else [c[0] for c in CASES]
    bad = [n for n in names if n not in {c[0] for c in CASES}]
    if bad:
        raise UsageError(f"--only {bad[0]!r}: one of {', '.join(c[0] for c in CASES)}")
    cases = [c for c in CASES if c[0] in names]
    done = []
    for wl, n in cases:
        try:
            with usage_errors():  # settings the scenario model refuses
                case = run_case(wl, n, dilation=ns.dilation, messages=ns.messages, message_bytes=ns.size)
        except LiveRunError as e:
            raise RunFailed(str(e)) from None
        done.append(case)
        if not ns.json:
            sys.stderr.write(f"uet-bench: {wl} {n}: {'holds' if case['bar']['ok'] else 'FAILS'}\n")
    ok = all(c["bar"]["ok"] for c in done)
    if ns.json:
        records = [
            {
                **{k: c[k] for k in ("workload", "endpoints", "bar")},
                "dilation": {t: r.get("dilation") for t, r in c["live"].items()},
            }
            for c in done
        ]
        out = {"ok": ok, "tolerance": TOLERANCE, "cases": records}
        sys.stdout.write(json.dumps(out) + "\n")
        return 0 if ok else 1
    from rich.table import Table

    t = Table(
        title=f"live (time-dilated) against the simulator: FCT within ±{TOLERANCE * 100:.0f} % of its range over "
        f"{SPREAD} endpoint seeds, same winner"
    )
    for col in ("case", "transport", "FCT p50 ms live / sim", "FCT p99 ms live / sim", "Δ p50", "Δ p99",
                "sim range p50 / p99 ms", "intact", "dilation", "within"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("case", "transport") else "right")
    for c in done:
        for row in _figures(c):
            t.add_row(*row)
    con = table_console(140)
    from uet.tools.run import dilation_lines

    for c in done:  # a run whose CPU did not keep up says so above the figures (marked "CPU short")
        for line in dilation_lines(c["live"]):
            if "did NOT keep up" in line:
                con.print(f"{c['workload']} {c['endpoints']}: {line}", markup=False, highlight=False)
    con.print(t)
    for c in done:
        w = c["bar"]["winner"]
        con.print(
            f"{c['workload']} {c['endpoints']}: lower FCT p99 live {w['live']} (margin {w['live_margin']}), "
            f"sim {w['sim']} (margin {w['sim_margin']}): {'same' if w['ok'] else 'DIFFERENT'}"
        )
    con.print("[green]the bar holds[/]" if ok else "[red]the bar does NOT hold[/]")
    return 0 if ok else 1


def add_parser(sub: Any) -> None:
    """``uet-bench differential``."""
    from uet.tools.run import _dilation_arg

    p = sub.add_parser(
        "differential",
        help="the live engine (time-dilated) against the simulator on incast, permutation and all-reduce",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--only", metavar="W1,W2", help="only these workloads (incast, permutation, allreduce)")
    p.add_argument("--messages", type=int_arg(1), help="messages per flow (uet-run's default: 4)")
    p.add_argument("--size", type=size_arg(1, 1 << 30), help="bytes per message (uet-run's default: 64KiB)")
    p.add_argument("--dilation", type=_dilation_arg, default="auto", metavar="TDF", help="live engine (auto)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(run=_run)
