"""``uet-bench sim --against-htsim PATH``: the simulator's cost beside uet-htsim's, same machine.

uet-htsim (the UEC's C++ congestion-control simulator) built from source is run beside
``uet-sim`` on the rows of the CC suite (``uet-sim --suite cc``, ``tools/scenarios/cc``): each row
is a scenario file whose configuration is htsim's (100 Gb/s, 1 µs links, a 3-tier fat tree, 4 KiB
packets, 2 MB flows); htsim runs the connection matrix and flags its own validation runs use for
that row (:data:`HTSIM_ROWS`, taken from htsim's ``validate_uec_*.txt``). Both run as child
processes and are measured the same way, from the kernel's accounting of the child
(``wait4``, under GNU ``time`` where installed: :func:`measure`): CPU seconds (user + system) and
peak resident memory. Rounds alternate which of
the two goes first (round 1 htsim first, round 2 ours first, ...) and the least CPU of the rounds
is kept for each, so a burst of other load on a shared machine disturbs neither side more.
Ours runs as installed software runs, from byte-compiled modules: the package is byte-compiled
once before the rounds (:func:`byte_compile`; where ``PYTHONDONTWRITEBYTECODE`` is set nothing
else writes them, and every run would compile about 140 modules again, ≈ 0.3 CPU s, as htsim's
own build is not counted either), and the code it generates as it starts (its dataclasses'
methods, its header codecs) is stored as its first run after an install stores it
(:mod:`uet.dataclass_cache`). With ``compiled``
(``--compiled``) ours also runs with the optional compiled build of the per-packet path, switch
model and endpoint side (``UET_COMPILED=1``, :mod:`uet.compiled`) in the same rounds, a column of
its own (in ``--json``: ``compiled_ratio`` and ``compiled_meets_target`` beside the pure run's
``ratio`` and ``meets_target``); the pure-Python run is always the one with ``UET_COMPILED=0``.

``PATH`` is an uet-htsim checkout (or its ``htsim/sim`` folder) built as its README says
(``cmake -S . -B build && cmake --build build`` in ``htsim/sim``): the ``htsim_uec`` binary is
looked for in the usual build folders and the connection matrices in ``datacenter/``. The table:
per row both CPU seconds, their ratio (ours / htsim) beside the issue's target (≤ 15× for a CC
row, ≤ 4× for the 1,024-host permutation), both peak RSS, and both tail FCTs (a sanity check that
the two ran the same experiment). This is a benchmark, not a test.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from uet.tools.cli import UsageError, table_console

__all__ = ["HTSIM_ROWS", "Measured", "find_htsim", "htsim_command", "measure", "run_rows"]

#: our row (scenario file stem) → htsim's connection matrix (``datacenter/``) and flags, as its
#: validation files run that experiment (``-end``: htsim's simulated-time limit, µs)
HTSIM_ROWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "one_flow_nscc": ("connection_matrices/one.cm", ("-sender_cc_only", "-end", "1000")),
    "one_flow_rccc": ("connection_matrices/one.cm", ("-receiver_cc_only", "-end", "1000")),
    "one_flow_nscc_rccc": ("connection_matrices/one.cm", ("-sender_cc", "-receiver_cc", "-end", "1000")),
    "incast15_nscc": ("connection_matrices/incast.cm", ("-sender_cc_only", "-end", "3000")),
    "incast15_rccc": ("connection_matrices/incast.cm", ("-receiver_cc_only", "-end", "3000")),
    "incast15_nscc_rccc": ("connection_matrices/incast.cm", ("-sender_cc", "-receiver_cc", "-end", "3000")),
    "incast127_nscc": ("connection_matrices/incast_128.cm", ("-sender_cc_only", "-end", "30000")),
    "incast127_rccc": ("connection_matrices/incast_128.cm", ("-receiver_cc_only", "-end", "30000")),
    "incast127_nscc_rccc": ("connection_matrices/incast_128.cm", ("-sender_cc", "-receiver_cc", "-end", "30000")),
    "perm1024_128paths_nscc": (
        "connection_matrices/perm_1024n_1024c_0u_2000000b.cm",
        ("-sender_cc_only", "-paths", "128", "-end", "400"),
    ),
    "perm1024_128paths_rccc": (
        "connection_matrices/perm_1024n_1024c_0u_2000000b.cm",
        ("-receiver_cc_only", "-paths", "128", "-end", "400"),
    ),
    "perm1024_1path_nscc": (
        "connection_matrices/perm_1024n_1024c_0u_2000000b.cm",
        ("-sender_cc_only", "-paths", "1", "-end", "3000"),
    ),
    "perm1024_1path_rccc": (
        "connection_matrices/perm_1024n_1024c_0u_2000000b.cm",
        ("-receiver_cc_only", "-paths", "1", "-end", "3000"),
    ),
}
#: the issue's targets for ours / htsim CPU: the 1,024-host permutations, and every other row
TARGET_PERM = 4.0
TARGET_CC = 15.0
_FINISHED = re.compile(rb"finished at ([0-9.]+)")


@dataclass
class Measured:
    """One child process: CPU seconds (user + system), peak RSS (MB), exit status, its output."""

    cpu_s: float
    rss_mb: float
    rc: int
    out: bytes


def measure(cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> Measured:
    """Run ``cmd`` and take its CPU time and peak RSS from the kernel, stdout kept.

    A child forked or vforked by this process starts with this process's memory, which the
    kernel's peak RSS of the child then counts (tens of MB: more than htsim uses). So the child
    runs under GNU ``time`` where it is installed, a small process whose own child's figures
    (``wait4``) it reports; without it the child's own ``wait4`` figures are taken, whose RSS is
    then at least this process's.

    The CPU time is always this process's ``wait4`` of its child, which counts the child's reaped
    children too (so, under GNU ``time``, the command and ``time`` itself, a millisecond or less),
    to the microsecond: GNU ``time`` prints it in hundredths of a second, a step as large as a
    third of htsim's whole run on the small rows, which made their ratios swing by a quarter."""
    gnu_time = shutil.which("time")
    with tempfile.NamedTemporaryFile("r", suffix=".time") as rec:
        run = [gnu_time, "-q", "-f", "%e %U %S %M", "-o", rec.name, *cmd] if gnu_time else cmd
        with subprocess.Popen(run, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:  # noqa: S603
            assert proc.stdout is not None
            out = proc.stdout.read()
            _, status, ru = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        fields = rec.read().split() if gnu_time else []
    if len(fields) >= 4:  # the last line: elapsed, user, system, max RSS in KiB
        return Measured(ru.ru_utime + ru.ru_stime, int(fields[-1]) / 1024, proc.returncode, out)
    return Measured(ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, proc.returncode, out)


def find_htsim(path: str) -> tuple[Path, Path]:
    """The ``htsim_uec`` binary and the ``datacenter`` folder (connection matrices) of the
    uet-htsim checkout, its ``htsim/sim`` folder or the binary at ``path``. Raises
    :class:`UsageError` naming what is missing (not built: the README's two cmake commands)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageError(f"--against-htsim: {path}: no such file or folder")
    sims = [p / "htsim" / "sim", p, p.parent, p.parent.parent, p.parent.parent.parent]
    sim = next((s for s in sims if (s / "datacenter" / "connection_matrices").is_dir()), None)
    if sim is None:
        raise UsageError(f"--against-htsim: {path}: not an uet-htsim checkout (no htsim/sim/datacenter)")
    bins = [
        p,
        sim / "build" / "datacenter" / "htsim_uec",
        sim / "datacenter" / "htsim_uec",
        sim / "build" / "htsim_uec",
    ]
    binary = next((b for b in bins if b.is_file() and b.name == "htsim_uec" and os.access(b, os.X_OK)), None)
    if binary is None:
        raise UsageError(
            f"--against-htsim: no htsim_uec under {sim}: build it there with "
            "'cmake -S . -B build && cmake --build build --target htsim_uec'"
        )
    return binary, sim / "datacenter"


def htsim_command(binary: Path, row: str) -> list[str]:
    """htsim's command line for our row ``row`` (run in its ``datacenter`` folder)."""
    matrix, flags = HTSIM_ROWS[row]
    return [str(binary), "-tm", matrix, *flags]


def _htsim_tail_us(out: bytes) -> float | None:
    times = [float(m) for m in _FINISHED.findall(out)]
    return max(times) if times else None


def _ours_tail_us(out: bytes) -> float | None:
    try:
        res = json.loads(out)
    except ValueError:
        return None
    mx = (res.get("fct") or {}).get("max_s")
    return None if mx is None else round(mx * 1e6, 1)


#: the modules whose dataclasses a ``uet-sim`` run creates, for :func:`byte_compile`
SIM_MODULES = ("uet.tools.sim", "uet.tools.run", "uet.tools.run_settings", "uet.tools.fault_options", "uet.sim.runs")


def store_run_code() -> str | None:
    """Store the code a simulator run generates as it starts (:mod:`uet.dataclass_cache`), even
    where bytecode writing is off: the methods of the dataclasses of :data:`SIM_MODULES` and the
    codecs of every header the wire modules they load declare (:class:`uet.wire.layout.Layout`).
    Returns the store's path (None where the interpreter keeps no bytecode cache)."""
    from uet.dataclass_cache import write_store
    from uet.wire.layout import Layout

    for name in SIM_MODULES:
        import_module(name)
    for name, module in list(sys.modules.items()):
        if name.startswith("uet.wire.") and module is not None:
            for value in vars(module).values():
                for layout in value.values() if isinstance(value, dict) else (value,):  # a table of headers too
                    if isinstance(layout, Layout):
                        layout.compile()
    return write_store()


def byte_compile() -> None:
    """Byte-compile the modules of the ``uet`` package (module docstring): what an install does;
    and store the code a simulator run generates as it starts (:func:`store_run_code`), as its
    first run after an install does (:mod:`uet.dataclass_cache`)."""
    import compileall

    import uet.fabric
    import uet.tools

    import uet

    for pkg in (uet, uet.fabric, uet.tools):
        for d in pkg.__path__:
            compileall.compile_dir(d, quiet=2)
    store_run_code()


def _figures(out: bytes) -> Any:
    """A run's ``--json`` result without what is measured rather than simulated (its CPU time):
    the compiled build must give the same (uet.compiled)."""
    try:
        res = json.loads(out)
    except ValueError:
        return None
    res.pop("elapsed_s", None)
    res.pop("timing", None)
    return res


def run_rows(
    path: str, rows: list[str], rounds: int, on_row: Any = None, *, compiled: bool = False
) -> list[dict[str, Any]]:
    """Each row: htsim and ours (and ours compiled, with ``compiled``) in alternating rounds
    (module docstring); one record per row."""
    binary, dc = find_htsim(path)
    from uet.tools.cc_suite import SUITES

    from uet.compiled import ENV

    byte_compile()
    folder = SUITES["cc"]
    envs = {"ours": {**os.environ, ENV: "0"}, "compiled": {**os.environ, ENV: "1"}}
    names = ("htsim", "ours", "compiled") if compiled else ("htsim", "ours")
    out = []
    for row in rows:
        ours_cmd = [sys.executable, "-m", "uet.tools.sim", str(folder / f"{row}.toml"), "--json"]
        best: dict[str, Measured] = {}
        for r in range(rounds):
            k = r % len(names)  # round r starts with the r-th of them
            for who in names[k:] + names[:k]:
                if who == "htsim":
                    m = measure(htsim_command(binary, row), cwd=str(dc))
                else:
                    m = measure(ours_cmd, env=envs[who])
                if who not in best or m.cpu_s < best[who].cpu_s:
                    best[who] = m
        h_best, o_best = best["htsim"], best["ours"]
        assert h_best is not None and o_best is not None
        target = TARGET_PERM if row.startswith("perm") else TARGET_CC
        ratio = o_best.cpu_s / h_best.cpu_s if h_best.cpu_s > 0 else None
        rec = {
            "row": row,
            "htsim_cpu_s": round(h_best.cpu_s, 4),
            "ours_cpu_s": round(o_best.cpu_s, 4),
            "ratio": None if ratio is None else round(ratio, 2),
            "target": target,
            "meets_target": ratio is not None and ratio <= target,
            "htsim_rss_mb": round(h_best.rss_mb, 1),
            "ours_rss_mb": round(o_best.rss_mb, 1),
            "htsim_tail_us": _htsim_tail_us(h_best.out),
            "ours_tail_us": _ours_tail_us(o_best.out),
            "htsim_ok": h_best.rc == 0,
            "ours_ok": o_best.rc == 0,
            "rounds": rounds,
        }
        c_best = best.get("compiled")
        if c_best is not None:
            c_ratio = c_best.cpu_s / h_best.cpu_s if h_best.cpu_s > 0 else None
            rec["compiled_cpu_s"] = round(c_best.cpu_s, 4)
            rec["compiled_ratio"] = None if c_ratio is None else round(c_ratio, 2)
            rec["compiled_meets_target"] = c_ratio is not None and c_ratio <= target
            rec["compiled_ok"] = c_best.rc == 0 and _figures(c_best.out) == _figures(o_best.out)
        out.append(rec)
        if on_row is not None:
            on_row(rec)
    return out


def select_rows(patterns: str | None) -> list[str]:
    """The rows whose name matches one of the comma-separated glob ``patterns`` (all: None)."""
    if not patterns:
        return list(HTSIM_ROWS)
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    rows = [r for r in HTSIM_ROWS if any(fnmatch.fnmatchcase(r, p) for p in pats)]
    if not rows:
        raise UsageError(f"--rows {patterns}: no row matches (rows: {', '.join(HTSIM_ROWS)})")
    return rows


def render(rows: list[dict[str, Any]], file: Any = None, width: int | None = None) -> None:
    """The side-by-side table (``width``: columns, default the terminal's)."""
    from rich.console import Console
    from rich.table import Table

    def times(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}×"

    compiled = any("compiled_cpu_s" in r for r in rows)
    t = Table(title="uet-sim beside uet-htsim (built from source), same machine: CPU s and peak RSS per run")
    cols = ["row", "htsim CPU s", "ours CPU s", "ours/htsim"]
    cols += ["compiled CPU s", "compiled/htsim"] if compiled else []
    for col in (*cols, "target", "htsim RSS MB", "ours RSS MB"):
        t.add_column(col, justify="left" if col == "row" else "right")
    t.add_column("tail FCT µs htsim / ours", justify="right")
    for r in rows:
        tails = f"{r['htsim_tail_us'] or '-'} / {r['ours_tail_us'] or '-'}"
        ok = r["htsim_ok"] and r["ours_ok"] and r.get("compiled_ok", True)
        cells = [r["row"] + ("" if ok else " (failed)"), f"{r['htsim_cpu_s']:.2f}", f"{r['ours_cpu_s']:.2f}"]
        cells.append(times(r["ratio"]))
        if compiled:
            cells += [f"{r['compiled_cpu_s']:.2f}", times(r["compiled_ratio"])]
        cells += [f"≤ {r['target']:.0f}×", f"{r['htsim_rss_mb']:.0f}", f"{r['ours_rss_mb']:.0f}", tails]
        t.add_row(*cells)
    (table_console(200, file=file) if width is None else Console(file=file, width=width)).print(t)
