"""``uet-bench codec``: encode and decode time per packet, fast codecs against construct.

Each header group is timed four ways: the data path's precompiled ``struct`` codec
(``encode`` / ``unpack``) and the declarative construct definition (``build`` / ``parse``) of the
same layout. A group made of several headers is timed as the data path handles it: the
``rud_request+ses_standard`` group uses the fused layout of :mod:`uet.wire.datapath` for the fast
codec (one struct call for both headers) and the two separate construct definitions; the
``... (separate)`` group shows the fast codec header by header for comparison.

Timings are the best of ``--repeat`` runs of ``--number`` calls (the minimum is the least
disturbed by other load on a shared machine). This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uet.tools.cli import int_arg, table_console

from uet.wire import datapath, net, pds, ses, tss
from uet.wire.layout import Layout


@dataclass
class Group:
    """Headers timed together: fast layouts (encode/unpack) and construct layouts (build/parse)."""

    name: str
    fast: list[tuple[Layout, object]]
    slow: list[tuple[Layout, object]]


def _v(layout: Layout, **fields: int | bytes) -> tuple[Layout, object]:
    return layout, layout.make(**fields)


def _groups() -> list[Group]:
    req = dict(flags=int(pds.ReqFlag.AR), clear_psn_offset=-1, psn=0x12345678, spdcid=0x1234, dpdcid=0x4321)
    std = dict(message_id=7, job_id=0x42, pid_on_fep=3, resource_index=1, buffer_offset=0, request_length=65536)
    std_som = ses.STANDARD[(1, "none")]
    fused = datapath.REQ_STD_SOM.make(**req, **std)
    ack = dict(ack_psn_offset=0, cack_psn=0x12345678, spdcid=0x4321, dpdcid=0x1234)
    resp = dict(message_id=7, job_id=0x42, modified_length=65536)
    ip: dict[str, int | bytes] = dict(
        total_length=1100, src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]), dscp=0, ecn=2
    )
    return [
        Group(
            "rud_request+ses_standard", [(datapath.REQ_STD_SOM, fused)], [_v(pds.REQUEST, **req), _v(std_som, **std)]
        ),
        Group(
            "rud_request+ses_standard (separate)",
            [_v(pds.REQUEST, **req), _v(std_som, **std)],
            [_v(pds.REQUEST, **req), _v(std_som, **std)],
        ),
        Group("rud_request", [_v(pds.REQUEST, **req)], [_v(pds.REQUEST, **req)]),
        Group("ses_standard", [_v(std_som, **std)], [_v(std_som, **std)]),
        Group(
            "ack+ses_response",
            [(datapath.ACK_RESPONSE, datapath.ACK_RESPONSE.make(**ack, **resp))],
            [_v(pds.ACK, **ack), _v(ses.RESPONSE, **resp)],
        ),
        Group(
            "ack_cc_nscc",
            [_v(pds.ACK_CC[(False, "nscc")], **ack, sack_bitmap=0xF0)],
            [_v(pds.ACK_CC[(False, "nscc")], **ack, sack_bitmap=0xF0)],
        ),
        Group(
            "nack",
            [_v(pds.NACK, nack_code=1, nack_psn=5, spdcid=1, dpdcid=2)],
            [_v(pds.NACK, nack_code=1, nack_psn=5, spdcid=1, dpdcid=2)],
        ),
        Group("tss", [_v(tss.TSS, sdi=1, tsc=7)], [_v(tss.TSS, sdi=1, tsc=7)]),
        Group(
            "ipv4+udp",
            [_v(net.IPV4, **ip), _v(net.UDP, src_port=0x4242, length=1080)],
            [_v(net.IPV4, **ip), _v(net.UDP, src_port=0x4242, length=1080)],
        ),
    ]


def _best(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Best time per call in microseconds."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def _time_group(g: Group, number: int, repeat: int) -> dict[str, float]:
    fast_enc = [(lay.encode, val) for lay, val in g.fast]
    fast_bytes = [(lay.unpack, lay.encode(val)) for lay, val in g.fast]
    slow_enc = [(lay.build, val) for lay, val in g.slow]
    slow_bytes = [(lay.parse, lay.build(val)) for lay, val in g.slow]

    def run(pairs: list[tuple[Callable[..., Any], Any]]) -> Callable[[], object]:
        if len(pairs) == 1:
            f, a = pairs[0]
            return lambda: f(a)
        (f1, a1), (f2, a2) = pairs[0], pairs[1]
        return lambda: (f1(a1), f2(a2))

    slow_n = max(1, number // 50)
    return {
        "fast_encode_us": round(_best(run(fast_enc), number, repeat), 3),
        "fast_decode_us": round(_best(run(fast_bytes), number, repeat), 3),
        "construct_encode_us": round(_best(run(slow_enc), slow_n, repeat), 3),
        "construct_decode_us": round(_best(run(slow_bytes), slow_n, repeat), 3),
    }


def add_parser(sub: Any) -> None:
    """The ``uet-bench codec`` subcommand (tools/bench/__init__.py)."""
    p = sub.add_parser(
        "codec",
        help="header codec speed: fast struct codecs vs construct",
        description="Time header encode/decode per packet: fast struct codecs versus construct.",
        epilog="example: uet-bench codec --json",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (group -> timings in µs)")
    p.add_argument("--number", type=int_arg(1), default=20000, help="calls per timing run of the fast codecs")
    p.add_argument("--repeat", type=int_arg(1), default=5, help="timing runs; the best is reported")
    p.set_defaults(run=run)


def main(argv: Sequence[str] | None = None) -> int:
    """``uet-bench codec ...`` (kept for ``python -m uet.tools.bench.codec``)."""
    from uet.tools.bench import main as bench_main

    return bench_main(["codec", *(sys.argv[1:] if argv is None else argv)])


def run(args: argparse.Namespace) -> int:
    """Time every group; print a table or one JSON object."""
    groups = _groups()
    results: dict[str, dict[str, float]] = {}
    progress = None
    if not args.json and sys.stderr.isatty():
        from rich.progress import Progress

        progress = Progress(transient=True)
        progress.start()
        task = progress.add_task("timing", total=len(groups))
    for g in groups:
        results[g.name] = _time_group(g, args.number, args.repeat)
        if progress is not None:
            progress.advance(task)
    if progress is not None:
        progress.stop()

    if args.json:
        print(json.dumps(results))
        return 0
    from rich.table import Table

    t = Table(title="header codec time per packet (µs, best of runs)")
    for col in ("group", "fast enc", "fast dec", "fast enc+dec", "construct enc", "construct dec", "construct/fast"):
        t.add_column(col, justify="left" if col == "group" else "right")
    for name, r in results.items():
        fast = r["fast_encode_us"] + r["fast_decode_us"]
        slow = r["construct_encode_us"] + r["construct_decode_us"]
        t.add_row(
            name,
            f"{r['fast_encode_us']:.2f}",
            f"{r['fast_decode_us']:.2f}",
            f"{fast:.2f}",
            f"{r['construct_encode_us']:.1f}",
            f"{r['construct_decode_us']:.1f}",
            f"{slow / fast:.0f}×",
        )
    table_console(130).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
