"""How ``uet-bench pair`` / ``rtt`` records are made and shown: alternating rounds folded into
one record (medians, sums), latency percentiles, and the rich tables."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from typing import Any

from uet.tools.bench.options import PairOptions
from uet.tools.cli import table_console

from uet.stats import percentile

__all__ = [
    "MEDIANS",
    "ROUND_KEYS",
    "SUMS",
    "aggregate",
    "latency",
    "passed",
    "percentile",
    "print_rtt_sweep",
    "print_table",
]

#: per-round figures reported as the median over the rounds (the rest: sums, all/any, first error)
MEDIANS = (
    "raw_udp_gbps",
    "raw_pps",
    "raw_sender_cpu_us_per_pkt",
    "raw_receiver_cpu_us_per_pkt",
    "elapsed_s",
    "goodput_gbps",
    "pps",
    "ratio",
    "cpu_ratio",
    "sender_cpu_us_per_pkt",
    "receiver_cpu_us_per_pkt",
)
SUMS = ("raw_stalls", "duplicates", "retransmits", "nacks_sent", "nacks_received", "impaired")
#: what each entry of ``rounds`` shows
ROUND_KEYS = ("raw_udp_gbps", "raw_candidate", "goodput_gbps", "ratio", "cpu_ratio", "intact", "retransmits")


def passed(rec: dict[str, Any]) -> bool:
    """The pass rule for a pair record (``uet-demo``, ``uet-bench pair`` and its size sweep):
    every message once and intact; for UUD (best effort, no flow control: behaviour.md §2.15) no
    error and no duplicate — what arrived is reported, not failed (issue 15 item 19)."""
    if rec["mode"] == "uud":
        return rec.get("error") is None and rec["duplicates"] == 0
    return bool(rec["intact"]) and rec["duplicates"] == 0


def aggregate(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One record from alternating rounds (:mod:`uet.tools.bench.pair`, "Rounds"): medians, sums,
    the raw candidate that won most rounds and each candidate's median goodput."""
    last = rounds[-1]
    out = dict(last)
    for k in MEDIANS:
        vals = [r[k] for r in rounds if r.get(k) is not None]
        if k in last:
            out[k] = round(statistics.median(vals), 4) if vals else None
    for k in SUMS:
        if k in last:
            out[k] = sum(r.get(k) or 0 for r in rounds)
    out["intact"] = all(r["intact"] for r in rounds)
    if "raw_candidate" in last:
        out["raw_candidate"] = Counter(r["raw_candidate"] for r in rounds).most_common(1)[0][0]
        out["raw_candidates_gbps"] = {
            k: round(statistics.median(r["raw_candidates_gbps"][k] for r in rounds), 4)
            for k in last["raw_candidates_gbps"]
        }
    out["error"] = next((r["error"] for r in rounds if r["error"]), None)
    out["delivered_bytes"] = min(r["delivered_bytes"] for r in rounds)
    out["messages_delivered"] = min(r["messages_delivered"] for r in rounds)
    if len(rounds) > 1:
        out["rounds"] = [{k: r.get(k) for k in ROUND_KEYS} for r in rounds]
    return out


def latency(prefix: str, xs: list[float]) -> dict[str, float]:
    """min / avg / p50 / p99 / p99.9 / max of round trips in µs (perftest's latency columns); the
    percentiles are nearest-rank (:func:`uet.stats.percentile`, the one definition)."""
    if not xs:
        return {f"{prefix}_{k}_us": float("nan") for k in ("min", "avg", "p50", "p99", "p999", "max")}
    return {
        f"{prefix}_min_us": round(min(xs), 1),
        f"{prefix}_avg_us": round(statistics.fmean(xs), 1),
        f"{prefix}_p50_us": round(statistics.median(xs), 1),
        f"{prefix}_p99_us": round(percentile(xs, 99), 1),
        f"{prefix}_p999_us": round(percentile(xs, 99.9), 1),
        f"{prefix}_max_us": round(max(xs), 1),
    }


def print_table(title: str, rec: dict[str, Any]) -> None:
    """``rec`` as a metric/value table (a third column says which figures are medians over the
    rounds and which are sums); its ``rounds`` and ``secure`` records as tables of their own."""
    from rich.table import Table
    from uet.tools.cli import table_console, yes_no

    def show(v: Any) -> str:
        return "" if v is None else yes_no(v) if isinstance(v, bool) else str(v)

    console = table_console(120)
    rounds = rec.get("rounds")
    t = Table(title=title)
    t.add_column("metric")
    t.add_column("value", justify="right")
    if rounds:
        t.add_column(f"over {len(rounds)} rounds")
    for k, v in rec.items():
        if k in ("rounds", "secure") or isinstance(v, dict | list):
            continue
        row = [k, show(v)]
        if rounds:
            row.append("median" if k in MEDIANS else "sum" if k in SUMS else "every round" if k == "intact" else "")
        t.add_row(*row)
    console.print(t)
    if rounds:
        r = Table(title="rounds (raw UDP and UET alternate)")
        r.add_column("round", justify="right")
        for k in rounds[0]:
            r.add_column(k, justify="right")
        for i, row in enumerate(rounds, 1):
            r.add_row(str(i), *(show(v) for v in row.values()))
        console.print(r)
    if rec.get("secure"):
        st = Table(title="secure transfer (TSS)")
        st.add_column("metric")
        st.add_column("value", justify="right")
        for k, v in rec["secure"].items():
            st.add_row(k, show(v))
        console.print(st)


def print_rtt_sweep(ns: argparse.Namespace, opts: PairOptions, rows: list[dict[str, Any]]) -> None:
    """An ``rtt --sizes`` / ``--all`` sweep: one JSON object with ``results``, or one table."""
    if ns.json:
        sys.stdout.write(json.dumps({"mode": opts.mode, "count": ns.count, "results": rows}) + "\n")
        return
    from rich.table import Table

    t = Table(title=f"uet-bench rtt sweep ({opts.mode.upper()}, {ns.count} round trips per size, µs)")
    cols = ("size", "uet_min_us", "uet_avg_us", "uet_p50_us", "uet_p99_us", "uet_p999_us", "raw_p50_us", "ratio")
    for c in cols:
        t.add_column(c.replace("_us", "").replace("p999", "p99.9"), justify="right")
    for r in rows:
        t.add_row(*(str(r[c]) for c in cols))
    table_console(120).print(t)
