"""The CC suite (``uet-sim --suite cc``; tools/cc_suite.py prints the table, and its docstring says
what is compared with uet-htsim and how our frames are allowed for): its scenario files in table
order (:func:`suite_files`, :func:`select`), each row run in virtual time with the settings the
scenario model gives (:func:`run_row`, :func:`run_suite`: the file, then the values the caller
lays over every row, :class:`uet.scenario.read.Given`), and the figures of one row
(:func:`row_result`): from a ``simulate`` result and the scenario's ``[reference]`` table of
htsim's figures, our tail FCT against our ideal, the ratio of slowdowns against htsim's, what the
retransmissions answered, and the per-link figures (the most flows on one link, the route bound,
tail / bound).
"""

from __future__ import annotations

import math
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from uet.scenario.read import Given, read_file, resolve

T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "HTSIM_FLOW_BYTES",
    "RowPlan",
    "WorkerDied",
    "each_in_a_process",
    "plan_row",
    "retx_causes",
    "row_result",
    "run_plan",
    "run_row",
    "run_suite",
    "select",
    "suite_files",
]

#: the flow size of every htsim validation run of issue 11's table
HTSIM_FLOW_BYTES = 2_000_000


def _tail_ideal(res: dict[str, Any], overhead: int, payload: int) -> tuple[float, float]:
    """(our ideal, the same with header bytes taken out) of the slowest destination, in s: per
    destination, the largest lone-flow ideal plus the serialisation of the other flows into it."""
    rate = res["link_rate_bps"]
    by_dst: dict[str, list[dict[str, Any]]] = {}
    for f in res["flows"]:
        by_dst.setdefault(f["dst"], []).append(f)
    best = (0.0, 0.0)
    for flows in by_dst.values():
        ser = []
        hdr = []
        for f in flows:
            pkts = math.ceil(f["bytes"] / payload) if f["bytes"] else 0
            ser.append((f["bytes"] + pkts * overhead) * 8 / rate)
            hdr.append(pkts * overhead * 8 / rate)
        i = max(range(len(flows)), key=lambda j: flows[j].get("ideal_s", 0.0))
        ours = flows[i].get("ideal_s", 0.0) + sum(ser) - ser[i]
        bare = ours - sum(hdr)
        if ours > best[0]:
            best = (ours, bare)
    return best


def retx_causes(c: dict[str, Any]) -> dict[str, int]:
    """What the senders' retransmissions answered, from the endpoints' summed counters: trim
    NACKs (``trim_nack_core`` before the last hop, ``trim_nack_last_hop``), retransmission
    timeouts, SACK fast retransmits; and ``duplicates_at_receiver``, the copies that arrived
    after the original (a resend that was not needed)."""
    return {
        "trim_nack_core": c.get("nack_rx_TRIMMED", 0),
        "trim_nack_last_hop": c.get("nack_rx_TRIMMED_LASTHOP", 0),
        "rto": c.get("rto", 0),
        "fast_retransmit": c.get("fast_retransmits", 0),
        "duplicates_at_receiver": c.get("duplicates", 0),
    }


def row_result(path: Path, res: dict[str, Any], ref: dict[str, Any], scaled: str | None) -> dict[str, Any]:
    """One table row from a ``simulate`` result and the scenario's ``[reference]`` table."""
    from uet.scenario.derive import DATA_OVERHEAD

    payload = min(int(res.get("payload_size", 4096)), 16383)
    ideal, bare = _tail_ideal(res, DATA_OVERHEAD, payload)
    fct = res["fct"]
    tail = fct.get("max_s", 0.0)
    row: dict[str, Any] = {
        "scenario": path.stem,
        "workload": res["workload"],
        "endpoints": res["endpoints"],
        "cc": res["cc"],
        "lb": res["lb"],
        "ok": res["ok"],
        "scaled": scaled,
        "tail_us": round(tail * 1e6, 1),
        "ideal_us": round(ideal * 1e6, 1),
        "x_ideal": round(tail / ideal, 4) if ideal else None,
        "max_over_min": fct.get("max_over_min"),
        "retransmits": sum(f.get("retransmits", 0) for f in res["flows"]),
        "retx_causes": retx_causes(res.get("endpoint_counters", {})),
        "trims": res["fabric"]["trims"],
        "ecn_marks": res["fabric"]["ecn_marks"],
        "cpu_s": res.get("timing", {}).get("cpu_s"),
        "htsim": dict(ref),
    }
    h_tail = ref.get("tail_us")
    h_ideal = ref.get("ideal_us", round(bare * 1e6, 1))
    row["htsim"]["ideal_us"] = h_ideal
    if h_tail and h_ideal and ideal and tail:
        row["ratio"] = round((tail / ideal) / (h_tail / h_ideal), 4)
    _route_figures(row, res, ref, tail, h_tail if scaled is None else None, h_ideal)
    return row


def _route_figures(
    row: dict[str, Any], res: dict[str, Any], ref: dict[str, Any], tail: float, h_tail: Any, h_ideal: Any
) -> None:
    """The per-link figures of a row (uet.fabric.model.linkload): the most flows on one link,
    the route bound and tail / bound, and the FCT max/min of the flows on the bottleneck link.

    htsim's route bound (**decision**: htsim publishes no per-link counts) is computed from the
    ``max_flows`` the scenario's ``[reference]`` table infers for htsim's draw: its ideal plus
    (max_flows − 1) more flows' payload serialised on the shared link — htsim's bytes, so its
    tail / bound compares with ours whatever the header sizes. Only for htsim's own flow size
    (2 MB) at full scale: a scaled or resized row has no htsim counterpart."""
    links = res.get("links")
    if not links:
        return
    bound = links["route_bound_us"]
    fct = links.get("bottleneck_fct", {})
    row.update(
        max_flows=links["max_flows"],
        link_histogram=links["histogram"],
        route_bound_us=round(bound, 1),
        x_bound=round(tail * 1e6 / bound, 4) if bound else None,
        bottleneck=links["bottleneck"],
        bottleneck_max_over_min=fct.get("max_over_min"),
    )
    mf = ref.get("max_flows")
    flow_bytes = max((f["bytes"] for f in res["flows"]), default=0)
    if mf and h_tail and h_ideal and flow_bytes == HTSIM_FLOW_BYTES:
        h_bound = h_ideal + (mf - 1) * flow_bytes * 8e6 / res["link_rate_bps"]
        row["htsim"].update(route_bound_us=round(h_bound, 1), x_bound=round(h_tail / h_bound, 4))


#: the algorithms of a suite in table order
_ALGO_ORDER = ("none", "nscc", "rccc", "nscc+rccc")


def suite_files(folder: Path) -> list[Path]:
    """The scenario files of a suite's ``folder``, in table order: by host count, then workload,
    then algorithm."""

    def key(p: Path) -> tuple[int, str, int, str]:
        doc = read_file(str(p))
        run = doc.get("run", {})
        cc = doc.get("endpoint", {}).get("pds", {}).get("cc", "none")
        order = _ALGO_ORDER.index(cc) if cc in _ALGO_ORDER else len(_ALGO_ORDER)
        return (int(run.get("endpoints", 0)), str(run.get("workload", "")), order, p.name)

    return sorted(folder.glob("*.toml"), key=key)


def select(files: Sequence[Path], only: str) -> list[Path]:
    """The scenarios of ``files`` named by one of the comma-separated words of ``only``: a whole
    file name, or else a part of one (``incast15`` is all three incast15 rows, ``incast15_nscc``
    only that one)."""
    words = [w for w in only.split(",") if w]
    stems = {p.stem for p in files}
    return [p for p in files if any(w == p.stem if w in stems else w in p.stem for w in words)]


class RowPlan(NamedTuple):
    """One row's settings, resolved and checked: what :func:`run_plan` runs."""

    path: Path
    run: dict[str, Any]
    topology: dict[str, Any]
    endpoint: dict[str, Any]
    scaled: str | None


def plan_row(path: Path, given: Given, max_hosts: int | None = None) -> RowPlan:
    """Scenario file ``path`` with ``given`` laid over it, on the simulator's defaults
    (:func:`uet.scenario.read.resolve`), scaled down to ``max_hosts`` if it is larger (an incast
    becomes (N−1)→1, a permutation N hosts; the endpoint settings stay those of the full size).
    Raises what the scenario model raises for settings it refuses."""
    from uet.workloads import WORKLOADS

    s, topo, ep = resolve("sim", str(path), given, workloads=WORKLOADS).tables()
    scaled = None
    if max_hosts and int(s["endpoints"]) > max_hosts:
        scaled = f"{s['endpoints']} → {max_hosts} hosts"
        s["endpoints"] = max_hosts
        if topo.get("hosts", 0) > max_hosts:
            topo = {**topo, "hosts": max_hosts}
    return RowPlan(path, s, topo, ep, scaled)


def run_plan(plan: RowPlan) -> dict[str, Any]:
    """The row of ``plan``, simulated in virtual time. Raises what the simulator raises for
    settings it refuses."""
    from uet.sim.scenario import simulate

    cpu0 = time.process_time()
    res = simulate(plan.run, plan.topology or None, plan.endpoint)
    res.setdefault("timing", {})["cpu_s"] = round(time.process_time() - cpu0, 3)
    pds = plan.endpoint.get("pds", {})
    res.update(
        cc=pds.get("cc", "none"), lb=pds.get("lb", "default"), payload_size=plan.endpoint.get("payload_size", 4096)
    )
    return row_result(plan.path, res, read_file(str(plan.path)).get("reference", {}), plan.scaled)


def run_row(path: Path, given: Given, max_hosts: int | None = None) -> dict[str, Any]:
    """One row: :func:`plan_row`, then :func:`run_plan`."""
    return run_plan(plan_row(path, given, max_hosts))


def run_suite(
    name: str,
    files: Sequence[Path],
    given: Given,
    *,
    max_hosts: int | None = None,
    jobs: int = 1,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run every scenario of ``files`` (suite ``name``) with ``given`` laid over each, as over one
    scenario (seed, size, ``-o``, endpoint overrides...), rows larger than ``max_hosts`` scaled
    down (:func:`run_row`). Every row's settings are checked (:func:`plan_row`) before the first
    row runs, so a mistake in them is reported before any row's work (and any worker process)
    starts. ``jobs``: up to that many rows at once, each in its own process (a row is one
    single-threaded simulation, so the table of a machine with N cores takes about 1/N of the
    time; each row's figures, CPU time included, are those of its own process and do not depend
    on ``jobs``). ``on_row`` is called with each row as it finishes; the rows of the result keep
    the order of ``files``."""
    plans = [plan_row(p, given, max_hosts) for p in files]
    rows: dict[int, dict[str, Any]] = {}

    def done(i: int, row: dict[str, Any]) -> None:
        rows[i] = row
        if on_row is not None:
            on_row(row)

    jobs = min(jobs, len(plans))
    if jobs <= 1:
        for i, plan in enumerate(plans):
            done(i, run_plan(plan))
    else:
        each_in_a_process(run_plan, plans, jobs, done, name=lambda plan: plan.path.stem)
    ordered = [rows[i] for i in range(len(plans))]
    return {"suite": name, "ok": all(r["ok"] for r in ordered), "rows": ordered}


class WorkerDied(RuntimeError):
    """A worker process of :func:`each_in_a_process` ended without a result."""


def _in_child(fn: Callable[[T], R], item: T, out: Connection) -> None:
    """A worker process: ``fn(item)``, and the result, or what it raised, sent on ``out``. Ctrl-C
    is left to the parent, which stops the workers (no traceback from every worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        msg: tuple[bool, Any] = (True, fn(item))
    except Exception as e:  # noqa: BLE001 - every error of the item goes to the parent
        msg = (False, e)
    try:
        out.send(msg)
    except Exception as e:  # noqa: BLE001 - a result or an error that does not pickle
        out.send((False, RuntimeError(f"{type(e).__name__}: {e}")))
    out.close()


def each_in_a_process(
    fn: Callable[[T], R],
    items: Sequence[T],
    jobs: int,
    on_result: Callable[[int, R], None],
    name: Callable[[T], str] = str,
) -> None:
    """``fn(item)`` for each of ``items``, each in its own worker process, up to ``jobs`` at once;
    ``on_result(index, result)`` is called here as each finishes. The first item that raises
    stops the whole with its error, raised here; a worker that ends without a result (killed,
    ``os._exit``) raises :class:`WorkerDied` (``name(item)`` names the item). However it ends
    (Ctrl-C too), every worker still running is killed and every worker is reaped before this
    returns or raises.

    Not :class:`multiprocessing.pool.Pool`: its workers share locks on the task and result queues
    and it runs helper threads, and ``terminate()`` after an error could wait for ever: a worker
    killed while it held the result queue's write lock (it was sending the next row's error) left
    the lock held, the pool's task thread then blocked putting its end marker on that queue, and
    ``terminate()`` joined that thread, for ever, before it reaped the killed workers (left
    defunct); and a worker that dies mid-task leaves the pool waiting for ever on a result that
    never comes. Here each worker has its own pipe, nothing is shared and the parent runs no
    thread: it waits on the pipes and on the processes' sentinels, so an error, a blocked worker
    or a dead one all end the wait, and the rows' settings are checked before any worker starts
    (:func:`run_suite`)."""
    import multiprocessing
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context()
    todo = deque(enumerate(items))
    running: dict[Connection, tuple[int, BaseProcess]] = {}  # result pipe -> (index, worker)
    names: dict[int, str] = {}
    try:
        while todo or running:
            while todo and len(running) < jobs:
                i, item = todo.popleft()
                names[i] = name(item)
                recv, send = ctx.Pipe(duplex=False)
                new = ctx.Process(target=_in_child, args=(fn, item, send), daemon=True)
                new.start()
                send.close()  # the worker holds the only write end: its exit is an EOF here
                running[recv] = (i, new)
            ready = wait(list(running))
            for conn in [c for c in running if c in ready]:
                i, worker = running.pop(conn)
                try:
                    ok, value = conn.recv()
                except EOFError:
                    worker.join()
                    raise WorkerDied(
                        f"{names[i]}: its worker process ended without a result (exit status {worker.exitcode})"
                    ) from None
                finally:
                    conn.close()
                worker.join()
                if not ok:
                    raise value
                on_result(i, value)
    finally:
        for _, worker in running.values():
            worker.kill()
        for conn, (_, worker) in running.items():
            worker.join()
            conn.close()
