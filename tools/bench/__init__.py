"""``uet-bench``: benchmarks, each figure reported against the raw-UDP limit of the same run.

Subcommands, each in a module of its own:

* ``uet-bench codec ...`` — header codec speed (:mod:`uet.tools.bench.codec`).
* ``uet-bench core ...`` — two PDS cores in one process, no sockets: CPU per packet per side
  (:mod:`uet.tools.bench.core`).
* ``uet-bench pair`` — a UET transfer between two processes against the raw-UDP limit of the same
  run (:mod:`uet.tools.bench.pair`; the raw references in :mod:`uet.tools.bench.raw`, the UET
  endpoints in :mod:`uet.tools.bench.uet_side`, TSS in :mod:`uet.tools.bench.tss`, rounds and tables
  in :mod:`uet.tools.bench.report`).
* ``uet-bench rtt`` — p50/p99 round trip of a 64-byte message (UET send + reply) against the
  fastest raw-UDP ping-pong between the same two processes (:mod:`uet.tools.bench.rtt`).
* ``uet-bench decode --against-tshark`` — ``uet-decode`` against tshark on one capture
  (:mod:`uet.tools.bench.decode`).
* ``uet-bench matrix`` / ``soak`` / ``flood`` / ``sim`` — :mod:`uet.tools.bench.matrix`,
  :mod:`uet.tools.bench.soak`, :mod:`uet.tools.bench.flood`, :mod:`uet.tools.bench.sim`.
* ``uet-bench differential`` — the live engine, time-dilated, against the simulator on the same
  scenarios: FCT within 10 %, the same winner (:mod:`uet.tools.differential`).

The names other tools and tests use (``PairOptions``, ``run_pair``, ``run_rtt``...) are
re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from uet.tools.bench.options import CRC_NOTE, MAX_PAIR_SIZE, PairOptions, data_protect, pair_notes
from uet.tools.bench.pair import random_data, run_pair
from uet.tools.bench.rtt import SWEEP_SIZES, run_rtt
from uet.tools.cli import ArgumentParser, RunFailed, parse_size, run_main

from uet.errors import UetError

__all__ = [
    "CRC_NOTE",
    "MAX_PAIR_SIZE",
    "SWEEP_SIZES",
    "PairOptions",
    "build_parser",
    "data_protect",
    "main",
    "pair_notes",
    "parse_size",
    "random_data",
    "run_pair",
    "run_rtt",
]

# ``uet-bench`` is one argparse parser with a subparser per benchmark. A subcommand lives in a
# module with ``add_parser(sub)`` (its options, validated by their argparse types) that sets
# ``run=`` to a function ``run(ns) -> int``; ``_SUBCOMMANDS`` lists them in --help order.


def _pair_parser(sub: Any) -> None:
    from uet.tools.bench.pair import add_parser

    add_parser(sub)


def _rtt_parser(sub: Any) -> None:
    from uet.tools.bench.rtt import add_parser

    add_parser(sub)


def _codec_parser(sub: Any) -> None:
    from uet.tools.bench.codec import add_parser

    add_parser(sub)


def _core_parser(sub: Any) -> None:
    from uet.tools.bench.core import add_parser

    add_parser(sub)


def _matrix_parser(sub: Any) -> None:
    from uet.tools.bench.matrix import add_parser

    add_parser(sub)


def _sim_parser(sub: Any) -> None:
    from uet.tools.bench.sim import add_parser

    add_parser(sub)


def _differential_parser(sub: Any) -> None:
    from uet.tools.differential import add_parser

    add_parser(sub)


def _decode_parser(sub: Any) -> None:
    from uet.tools.bench.decode import add_parser

    add_parser(sub)


def _soak_parser(sub: Any) -> None:
    from uet.tools.bench.soak import add_parser

    add_parser(sub)


def _flood_parser(sub: Any) -> None:
    from uet.tools.bench.flood import add_parser

    add_parser(sub)


#: (name, function adding the subparser), in --help order
_SUBCOMMANDS: list[tuple[str, Any]] = [
    ("codec", _codec_parser),
    ("core", _core_parser),
    ("pair", _pair_parser),
    ("rtt", _rtt_parser),
    ("matrix", _matrix_parser),
    ("soak", _soak_parser),
    ("flood", _flood_parser),
    ("sim", _sim_parser),
    ("differential", _differential_parser),
    ("decode", _decode_parser),
]


def build_parser() -> ArgumentParser:
    """The ``uet-bench`` parser with every subcommand."""
    p = ArgumentParser(prog="uet-bench", description="UET benchmarks, each figure next to a limit measured in the run")
    sub = p.add_subparsers(dest="command", metavar="{" + ",".join(n for n, _ in _SUBCOMMANDS) + "}", required=True)
    for _name, add in _SUBCOMMANDS:
        add(sub)
    return p


def _main(argv: Sequence[str] | None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        rc: int = ns.run(ns)
        return rc
    except BrokenPipeError:
        raise
    except (UetError, OSError, TimeoutError) as e:
        raise RunFailed(str(e) or type(e).__name__) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``uet-bench``: exit 0, 1 for a failed run, 2 for a usage error, 130 on Ctrl-C."""
    return run_main("uet-bench", _main, argv)
