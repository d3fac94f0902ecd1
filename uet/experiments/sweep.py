"""Parameter sweeps: one sweep file, many ``uet-sim`` runs, one table.

A **sweep file** (TOML) names a base scenario, the parameters to vary and the seeds::

    [sweep]
    scenario = "incast.toml"            # optional, relative to the sweep file
    args = ["-w", "incast", "--size", "16KiB", "--messages", "2"]   # fixed uet-sim options
    seeds = [1, 2, 3, 4]                # or {start = 1, count = 4}
    metrics = ["fct.p99_s", "fct.slowdown_p99", "fabric.trims"]     # dotted paths into --json

    [vary]                              # the cartesian product of every list, in file order
    "pds.cc" = ["nscc", "rccc"]         # a key with a dot: an endpoint setting (--endpoint-set)
    "--endpoints" = [5, 9, 17]          # a key that starts with '-': a uet-sim option and its value
    # {start = 4, stop = 16, step = 4} stands for the list 4, 8, 12, 16 (stop included)

    [plot]                              # optional: what uet-sweep --plot draws
    x = "--endpoints"
    y = "fct.p99_s"

**Runs.** :func:`expand` gives one :class:`Run` per combination and seed (seeds innermost); each
is a ``uet-sim`` command line (the scenario's text travels with it, so a remote worker needs
no shared file system). :func:`run_one` runs it in a child process (``python -m
uet.tools.sim ... --json``): a crash, a hang past the time limit or an unusable answer fails
that run alone; exit status 1 with JSON (a run that finished but was not intact) is a result,
``ok`` false, not a failure.

**Executors.** :class:`LocalExecutor` (default: up to ``jobs`` child processes at once) and
:class:`DaskExecutor` (a Dask ``distributed`` cluster: ``tcp://host:8786`` to join one, or
``local:N`` for a ``LocalCluster`` of N single-threaded worker processes). Both call the same
:func:`run_one`, and every run is a pure function of its command line and seed, so the same
sweep gives byte-identical per-run figures on either executor. A failed run is retried once,
then reported, never dropped.

**Aggregates.** :func:`aggregate` groups runs by their varied values and gives, per metric, the
mean, min and max over the seeds that produced a number.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from uet.config_file import ConfigFileError, read_toml

__all__ = [
    "DEFAULT_METRICS",
    "DaskExecutor",
    "LocalExecutor",
    "Run",
    "RunResult",
    "SweepError",
    "SweepSpec",
    "aggregate",
    "execute",
    "expand",
    "load_sweep",
    "metric",
    "run_one",
]

#: what a sweep reports when its file names no metrics
DEFAULT_METRICS = ("fct.p50_s", "fct.p99_s", "fct.slowdown_p99", "fabric.trims", "fabric.ecn_marks")
#: the most runs one sweep file may expand to
MAX_RUNS = 10_000
#: the default limit of one run, in seconds of wall time
RUN_TIMEOUT_S = 3600.0


class SweepError(Exception):
    """A sweep file or option the sweep cannot use (one line)."""


@dataclass(frozen=True)
class SweepSpec:
    """A parsed, validated sweep file."""

    args: tuple[str, ...] = ()
    scenario_name: str | None = None
    scenario_text: str | None = None
    vary: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    seeds: tuple[int, ...] = (1,)
    metrics: tuple[str, ...] = DEFAULT_METRICS
    plot: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Run:
    """One run of a sweep: its varied values, its seed and its ``uet-sim`` arguments."""

    index: int
    params: tuple[tuple[str, Any], ...]
    seed: int
    argv: tuple[str, ...]
    scenario_text: str | None = None

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params) + f", seed={self.seed}"


@dataclass
class RunResult:
    """What one run gave: ``result`` is uet-sim's JSON, or ``error`` says why there is none."""

    run: Run
    result: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 1


def _values(key: str, spec: Any) -> tuple[Any, ...]:
    """A [vary] entry: a non-empty list of scalars, or an inclusive range table."""
    if isinstance(spec, dict):
        unknown = set(spec) - {"start", "stop", "step"}
        if unknown or not {"start", "stop"} <= set(spec):
            raise SweepError(f"[vary] {key!r}: a range is {{start = A, stop = B, step = C}}")
        start, stop, step = spec["start"], spec["stop"], spec.get("step", 1)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (start, stop, step)) or step <= 0:
            raise SweepError(f"[vary] {key!r}: start, stop and a positive step are numbers")
        out: list[Any] = []
        v = start
        while v <= stop + 1e-12 * max(1.0, abs(stop)):
            out.append(v)
            if len(out) > MAX_RUNS:
                raise SweepError(f"[vary] {key!r}: more than {MAX_RUNS:,} values")
            v = start + step * len(out)
        spec = out
    if not isinstance(spec, list) or not spec:
        raise SweepError(f"[vary] {key!r}: a non-empty list of values or a range table")
    for v in spec:
        if isinstance(v, dict | list):
            raise SweepError(f"[vary] {key!r}: values are numbers, strings or booleans")
    if len(set(map(repr, spec))) != len(spec):
        raise SweepError(f"[vary] {key!r}: a value is listed twice")
    return tuple(spec)


def _seeds(spec: Any) -> tuple[int, ...]:
    if isinstance(spec, dict):
        if set(spec) != {"start", "count"}:
            raise SweepError("[sweep] seeds: a list of integers or {start = S, count = N}")
        spec = list(range(spec["start"], spec["start"] + spec["count"])) if isinstance(spec["count"], int) else None
    if not isinstance(spec, list) or not spec or not all(isinstance(s, int) and not isinstance(s, bool) for s in spec):
        raise SweepError("[sweep] seeds: a non-empty list of integers or {start = S, count = N}")
    if any(not 0 <= s < 2**63 for s in spec) or len(set(spec)) != len(spec):
        raise SweepError("[sweep] seeds: distinct integers from 0 to 2^63 - 1")
    return tuple(spec)


def load_sweep(path: str) -> SweepSpec:
    """Read and validate a sweep file; :class:`SweepError` names the first problem."""
    try:
        doc = read_toml(path)
    except ConfigFileError as e:
        raise SweepError(str(e)) from None
    unknown = set(doc) - {"sweep", "vary", "plot"}
    if unknown:
        raise SweepError(f"{path}: unknown table {sorted(unknown)[0]!r}; valid: plot, sweep, vary")
    sw = doc.get("sweep", {})
    if not isinstance(sw, dict):
        raise SweepError(f"{path}: [sweep] is a table")
    bad = set(sw) - {"scenario", "args", "seeds", "metrics"}
    if bad:
        raise SweepError(f"[sweep]: unknown key {sorted(bad)[0]!r}; valid: args, metrics, scenario, seeds")
    args = sw.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise SweepError("[sweep] args: a list of uet-sim options as strings")
    for a in args:
        if a in ("--seed", "--json", "--suite", "--plot", "--timing") or a.startswith(("--seed=", "--suite=")):
            raise SweepError(f"[sweep] args: {a} is the sweep's to set")
    scen_name = scen_text = None
    if "scenario" in sw:
        if not isinstance(sw["scenario"], str) or not sw["scenario"]:
            raise SweepError("[sweep] scenario: a file name")
        scen_name = os.path.join(os.path.dirname(path), sw["scenario"])
        try:
            read_toml(scen_name)  # bounded and checked here; its text then travels with each run
        except ConfigFileError as e:
            raise SweepError(str(e)) from None
        with open(scen_name, encoding="utf-8") as f:
            scen_text = f.read()
    metrics = sw.get("metrics", list(DEFAULT_METRICS))
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) and m for m in metrics):
        raise SweepError("[sweep] metrics: a non-empty list of dotted names (fct.p99_s)")
    vary_doc = doc.get("vary", {})
    if not isinstance(vary_doc, dict):
        raise SweepError(f"{path}: [vary] is a table")
    vary: list[tuple[str, tuple[Any, ...]]] = []
    for key, spec in vary_doc.items():
        if not (key.startswith("-") or "." in key):
            raise SweepError(f"[vary] {key!r}: an option ('--endpoints') or an endpoint setting ('pds.cc')")
        if key in ("--seed", "--json", "--suite", "--plot", "--timing"):
            raise SweepError(f"[vary] {key}: the sweep's to set (seeds go in [sweep] seeds)")
        vary.append((key, _values(key, spec)))
    seeds = _seeds(sw.get("seeds", [1]))
    total = len(seeds)
    for _, vals in vary:
        total *= len(vals)
    if total > MAX_RUNS:
        raise SweepError(f"{path}: {total:,} runs; at most {MAX_RUNS:,}")
    plot = doc.get("plot", {})
    if not isinstance(plot, dict) or set(plot) - {"x", "y", "series"}:
        raise SweepError("[plot]: keys x, y and series")
    keys = [k for k, _ in vary]
    for role in ("x", "series"):
        if role in plot and plot[role] not in keys:
            raise SweepError(f"[plot] {role} = {plot[role]!r}: one of the [vary] keys ({', '.join(keys) or 'none'})")
    if "y" in plot and plot["y"] not in metrics:
        raise SweepError(f"[plot] y = {plot['y']!r}: one of the metrics ({', '.join(metrics)})")
    return SweepSpec(
        args=tuple(args),
        scenario_name=scen_name,
        scenario_text=scen_text,
        vary=tuple(vary),
        seeds=seeds,
        metrics=tuple(metrics),
        plot={k: str(v) for k, v in plot.items()},
    )


def _value_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def expand(spec: SweepSpec) -> list[Run]:
    """Every combination of the [vary] values (file order, the last key fastest), seeds innermost."""
    keys = [k for k, _ in spec.vary]
    runs: list[Run] = []
    for combo in itertools.product(*(vals for _, vals in spec.vary)):
        for seed in spec.seeds:
            argv = list(spec.args)
            for key, v in zip(keys, combo, strict=True):
                if key.startswith("-"):
                    argv += [key, _value_text(v)]
                else:
                    argv += ["--endpoint-set", f"{key}={_value_text(v)}"]
            argv += ["--seed", str(seed), "--json"]
            runs.append(Run(len(runs), tuple(zip(keys, combo, strict=True)), seed, tuple(argv), spec.scenario_text))
    return runs


def run_one(argv: Sequence[str], scenario_text: str | None = None, timeout_s: float = RUN_TIMEOUT_S) -> dict[str, Any]:
    """Run ``uet-sim ARGV`` in a child process: ``{"result": json}`` or ``{"error": "..."}``.

    Module-level and free of closures, so Dask can ship it to a remote worker."""
    with tempfile.TemporaryDirectory(prefix="uet-sweep-") as tmp:
        cmd = [sys.executable, "-m", "uet.tools.sim"]
        if scenario_text is not None:
            scen = os.path.join(tmp, "scenario.toml")
            with open(scen, "w", encoding="utf-8") as f:
                f.write(scenario_text)
            cmd.append(scen)
        cmd += list(argv)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)  # noqa: S603 - our own argv
        except subprocess.TimeoutExpired:
            return {"error": f"no answer within {timeout_s:g} s"}
        except OSError as e:
            return {"error": f"cannot start uet-sim: {e}"}
    last = (p.stderr.strip().splitlines() or [""])[-1]
    if p.returncode not in (0, 1):
        return {"error": f"exit status {p.returncode}: {last}" if last else f"exit status {p.returncode}"}
    try:
        out = json.loads(p.stdout)
    except ValueError:
        return {"error": f"exit status {p.returncode} without JSON: {last}"}
    if not isinstance(out, dict):
        return {"error": "uet-sim printed JSON that is not an object"}
    return {"result": out}


Callback = Callable[[RunResult], None]


class LocalExecutor:
    """Runs up to ``jobs`` child processes at once on this machine."""

    name = "local"

    def __init__(self, jobs: int | None = None) -> None:
        self.jobs = max(1, jobs or os.cpu_count() or 1)

    def map(self, runs: Sequence[Run], timeout_s: float) -> Iterable[tuple[Run, dict[str, Any]]]:
        with concurrent.futures.ThreadPoolExecutor(self.jobs) as pool:
            futs = {pool.submit(run_one, r.argv, r.scenario_text, timeout_s): r for r in runs}
            try:
                for fut in concurrent.futures.as_completed(futs):
                    yield futs[fut], fut.result()
            except BaseException:
                for fut in futs:
                    fut.cancel()
                raise

    def close(self) -> None:
        pass

    def describe(self) -> str:
        return f"local processes ({self.jobs} at once)"


class DaskExecutor:
    """Runs on a Dask ``distributed`` cluster: an address (``tcp://host:8786``) or ``local:N``."""

    name = "dask"

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise SweepError("--cluster needs Dask: pip install 'uet[cluster]' (or 'dask[distributed]')") from None
        self.address = address
        self._cluster: Any = None
        try:
            if address.startswith("local:"):
                n = address[len("local:") :]
                if not n.isdigit() or not 1 <= int(n) <= 256:
                    raise SweepError(f"--cluster {address}: local:N with N from 1 to 256 workers")
                self._cluster = LocalCluster(
                    n_workers=int(n), threads_per_worker=1, processes=True, dashboard_address=None
                )
                self.client = Client(self._cluster)
            else:
                self.client = Client(address, timeout="10s")
        except SweepError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure to reach the cluster is one line for the user
            self.close()
            raise SweepError(f"--cluster {address}: cannot connect: {e}") from None

    def map(self, runs: Sequence[Run], timeout_s: float) -> Iterable[tuple[Run, dict[str, Any]]]:
        from distributed import as_completed

        futs = [self.client.submit(run_one, r.argv, r.scenario_text, timeout_s, pure=False) for r in runs]
        by_key = {f.key: r for f, r in zip(futs, runs, strict=True)}
        try:
            for fut in as_completed(futs):
                try:
                    out = fut.result()
                except Exception as e:  # noqa: BLE001 - a worker lost with its task fails that run only
                    out = {"error": f"worker: {e}"}
                yield by_key[fut.key], out
        except BaseException:
            self.client.cancel(futs)
            raise

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()
        if self._cluster is not None:
            self._cluster.close()

    def describe(self) -> str:
        if self._cluster is not None:
            return f"Dask LocalCluster ({len(self._cluster.workers)} workers)"
        return f"Dask cluster at {self.address}"


def execute(
    runs: Sequence[Run],
    executor: LocalExecutor | DaskExecutor,
    *,
    timeout_s: float = RUN_TIMEOUT_S,
    on_result: Callback | None = None,
) -> list[RunResult]:
    """Run every run; a failed one is retried once. Results come back in run order."""
    results: dict[int, RunResult] = {}
    retry: list[Run] = []
    for attempt in (1, 2):
        todo = list(runs) if attempt == 1 else retry
        retry = []
        for run, out in executor.map(todo, timeout_s):
            rr = RunResult(run, out.get("result"), out.get("error"), attempt)
            results[run.index] = rr
            if rr.error is not None and attempt == 1:
                retry.append(run)
                continue
            if on_result is not None:
                on_result(rr)
        if not retry:
            break
    return [results[r.index] for r in runs]


def metric(result: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of a run's JSON, or None."""
    node: Any = result
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def aggregate(results: Sequence[RunResult], metrics: Sequence[str]) -> list[dict[str, Any]]:
    """One row per combination of varied values: runs, ok runs, failed runs, and per metric the
    mean, min and max over the seeds that gave a number (None where none did)."""
    groups: dict[tuple[tuple[str, Any], ...], list[RunResult]] = {}
    for rr in results:
        groups.setdefault(rr.run.params, []).append(rr)
    rows: list[dict[str, Any]] = []
    for params, rrs in groups.items():
        row: dict[str, Any] = {"params": dict(params), "runs": len(rrs)}
        done = [rr.result for rr in rrs if rr.result is not None]
        row["failed"] = len(rrs) - len(done)
        row["intact"] = sum(1 for d in done if d.get("ok") is True)
        for m in metrics:
            vals = [x for x in (_number(metric(d, m)) for d in done) if x is not None]
            row[m] = (
                {"mean": sum(vals) / len(vals), "min": min(vals), "max": max(vals), "n": len(vals)} if vals else None
            )
        rows.append(row)
    return rows
