"""The options of ``uet-run`` and ``uet-sim`` that give a run's settings, and the adapter from
their parsed command line to the scenario model: :func:`read_settings` turns the options into a
:class:`uet.scenario.read.Given` and calls :func:`uet.scenario.read.resolve`, which reads and
checks the scenario once, before any process starts (issue 14), and derives every default. What
is checked, and how, is written there; here a mistake becomes a :class:`uet.tools.cli.UsageError`
(one line, exit status 2), and ``--plot`` is checked to have matplotlib.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from uet.tools.cli import UsageError

from uet.scenario.check import ScenarioError
from uet.scenario.read import Given, Resolved, max_payload, read_file, resolve

__all__ = [
    "add_placement_options",
    "add_workload_option",
    "given_from",
    "load_scenario",
    "max_payload",
    "read_settings",
    "resolve_args",
    "usage_errors",
]

T = TypeVar("T")


@contextmanager
def usage_errors() -> Iterator[None]:
    """A :class:`~uet.scenario.check.ScenarioError` inside becomes a :class:`UsageError`."""
    try:
        yield
    except ScenarioError as e:
        raise UsageError(str(e)) from None


def _usage(f: Callable[..., T], *args: Any, **kw: Any) -> T:
    with usage_errors():
        return f(*args, **kw)


def load_scenario(path: str) -> dict[str, Any]:
    """The tables of a scenario file (:func:`uet.scenario.read.read_file`); a mistake is a
    :class:`UsageError`."""
    return _usage(read_file, path)


def add_placement_options(p: Any) -> None:
    """``--gpus-per-server`` and ``--placement`` (``uet-run`` and ``uet-sim``): servers and ranks."""
    from uet.tools.cli import int_arg

    p.add_argument(
        "--gpus-per-server",
        type=int_arg(1),
        metavar="G",
        help="rail topologies: GPUs per server, one NIC and one rail each (sets the topology's rails)",
    )
    p.add_argument(
        "--placement",
        metavar="HOW",
        help="rank → host: rail (rail-major, the default on rail topologies), server (server-major) "
        "or a comma-separated list of host indices",
    )


#: the worst flows ``--summary`` shows
WORST_FLOWS = 10


def add_summary_option(p: Any) -> None:
    """``--summary`` (``uet-run`` and ``uet-sim``): the aggregates and the :data:`WORST_FLOWS` worst
    flows instead of a row per flow."""
    p.add_argument(
        "--summary",
        action="store_true",
        help=f"the flows' aggregates and the {WORST_FLOWS} worst flows instead of a row per flow (large runs)",
    )


def add_workload_option(p: Any) -> None:
    """``--workload-set KEY=VALUE`` (``uet-run`` and ``uet-sim``): a parameter of the workload's own."""
    p.add_argument(
        "--workload-set",
        dest="wl_overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a parameter of the workload's own ([workload.params]), e.g. senders=8 for incast",
    )


def given_from(args: Any, keys: tuple[str, ...]) -> Given:
    """What the options of ``uet-run`` / ``uet-sim`` give over the scenario file: ``keys`` are the
    option attributes that set ``[run]`` keys; ``args.topology``, ``args.overrides`` (``-o``),
    ``args.ep_overrides`` (``--endpoint-set``), ``args.wl_overrides`` (``--workload-set``),
    ``args.gpus_per_server`` and ``args.placement``."""
    return Given(
        run={k: getattr(args, k, None) for k in keys},
        topology=args.topology,
        overrides=tuple(args.overrides),
        endpoint=tuple(args.ep_overrides),
        workload=tuple(getattr(args, "wl_overrides", [])),
        gpus_per_server=getattr(args, "gpus_per_server", None),
        placement=getattr(args, "placement", None),
    )


def resolve_args(args: Any, engine: str, keys: tuple[str, ...]) -> Resolved:
    """The run the command line ``args`` gives (:func:`given_from`, the scenario file
    ``args.scenario``) on ``engine``, read and checked by :func:`uet.scenario.read.resolve`.
    Raises :class:`UsageError`."""
    from uet.workloads import WORKLOADS

    out = _usage(resolve, engine, args.scenario, given_from(args, keys), workloads=WORKLOADS)
    if out.run.get("plot"):
        from uet.tools.fabric import require_matplotlib  # with the fabric process: only for --plot

        require_matplotlib()
    return out


def read_settings(
    args: Any, engine: str, keys: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(run settings, inline topology table, complete endpoint table) of ``uet-run`` and
    ``uet-sim`` alike (:func:`resolve_args`). Raises :class:`UsageError`."""
    return resolve_args(args, engine, keys).tables()
