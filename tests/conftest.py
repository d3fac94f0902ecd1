"""Project-wide pytest configuration.

Hypothesis: the machine is shared by several test runs, so per-example deadlines would only
measure the neighbours' load; they are off, and the "too slow" health check with them. Test files
set their own ``max_examples`` to keep the whole suite fast. ``HYPOTHESIS_PROFILE=derandomized``
makes every run draw the same examples (for bisecting a failure).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("derandomized", settings.get_profile("default"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# --- Parallel runs (pytest-xdist: ``-n 2`` in pyproject.toml's addopts) ---------------------------------
#
# Tests that touch the machine's network or start processes (sockets on fixed loopback addresses and
# the UET port 4793, network namespaces, uet-run/uet-peer/uet-sim children, tshark, a Dask cluster)
# must not overlap: they share addresses and files, and the live engine's verdicts assume it has the
# CPU it measured. All of them form one unit of work, "serial", which one worker runs in file order.
# Every other test module is pure computation on in-memory cores and virtual time; each such module is
# a unit of its own (its tests stay together, in order) and runs on whichever worker is free.
#
# A module is "serial" when its source, or the source of a tests/ helper it imports, matches
# SERIAL_SOURCE; a module the pattern misses can say so itself with ``pytestmark =
# pytest.mark.serial``. Erring towards serial only costs time; erring the other way costs flakiness.
# ``-m "not serial and not processes"`` selects the in-memory tests alone (CI's second Python runs those,
# less the ``more_seeds`` repetitions below).
#
# A module the pattern takes for serial because it starts processes, but whose processes only compute
# (uet-sim and the other virtual-time tools, uet-decode, ruff: no socket, no live engine, no fixed
# address or file shared with another module), says so with ``pytestmark = pytest.mark.processes``: it
# is then a unit of its own beside the serial one, as an in-memory module is. In a serial module, a
# test function decorated ``@pytest.mark.processes`` is such a unit by itself (its cases together).
# A module the pattern takes for serial by mistake (the word "socket" in a comment, a socketpair)
# says ``pytestmark = pytest.mark.in_memory``: an in-memory module like the others.
# The serial unit is the suite's longest; every test taken out of it shortens the run.
#
# Order: the serial unit starts first, on one worker; then the units of marked functions: those above,
# and those marked ``unit_each`` (long parametrized tests, such as the exactly-once soak's parts: each
# case a unit of its own, so both workers share them); then the other modules, most tests first. The
# small ones come last and fill the end of the run evenly.
#
# The units are made by a scheduler of our own (pytest_xdist_make_scheduler below) rather than
# xdist's ``--dist loadgroup``, which renames node ids in a way pytest 9 no longer honours.
#
# Repetitions: a case marked ``more_seeds`` (``pytest.param(..., marks=pytest.mark.more_seeds)``) runs
# the same check as the test's unmarked case(s) on other seeds, so the same code: it is not measured by
# coverage (it runs untraced, pytest_runtest_call below: tracing costs 3-4x on a simulation and finds
# nothing the unmarked case has not found), and CI's second Python (.ci/newest-python) leaves it to
# the first, which runs every case. The unmarked cases stay measured and run on both.
#
# A test decorated ``@pytest.mark.after_compiled_build`` uses the optional compiled build
# (.ci/build-compiled), which CI makes beside the tests rather than before them (a few CPU-minutes
# that would otherwise hold back the whole suite): where ``UET_CI_COMPILED_BUILD_DONE`` names a
# file, the test first waits for that file (CI writes it when the build has ended, built or not).
# Such a test is a unit of its own and the last one handed out, so the build has the whole suite's
# time to finish and no worker waits on it while other work is left.

import re  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

SERIAL_SOURCE = re.compile(
    r"subprocess|socket|Popen|create_datagram_endpoint|asyncio\.run|127\.0\.|198\.18\.|netns|tshark"
    r"|uet\.endpoint|Endpoint\(|open_endpoint|uet\.link|UdpLink|live_options|run_cli|uet\.runner"
    r"|fabric\.switch|multiprocessing|distributed|dask|tools\.(run|peer|fabric|demo|sweep|differential)\b"
)
PROCESSES_MARK = re.compile(r"^pytestmark = .*pytest\.mark\.(processes|in_memory)\b", re.MULTILINE)
#: a top-level test function's decorators and name
_DECORATED = re.compile(r"^((?:@.*\n(?:[ )].*\n)*)+)def (\w+)", re.MULTILINE)
_HELPER_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:tests\.)?([a-z_][a-z0-9_]*)", re.MULTILINE)
_TESTS = Path(__file__).parent
_serial_cache: dict[Path, bool] = {}


def _is_serial(path: Path, seen: frozenset[Path] = frozenset()) -> bool:
    """Whether the test module at ``path`` (or a tests/ helper it imports) may touch the network."""
    if path in _serial_cache:
        return _serial_cache[path]
    if not path.is_file():  # not a module of ours (a doctest id, a plugin's item): keep it apart
        return True
    source = path.read_text(encoding="utf-8")
    serial = bool(SERIAL_SOURCE.search(source)) or "pytest.mark.serial" in source
    if PROCESSES_MARK.search(source):  # audited: its processes only compute, or it has none
        serial = False
    elif not serial:
        for name in _HELPER_IMPORT.findall(source):
            helper = _TESTS / f"{name}.py"
            if helper != path and helper not in seen and helper.is_file() and name != "conftest":
                if _is_serial(helper, seen | {path}):
                    serial = True
                    break
    _serial_cache[path] = serial
    return serial


def _marked(path: Path, mark: str) -> frozenset[str]:
    """Names of the test functions of the module at ``path`` decorated with ``pytest.mark.<mark>``."""
    key = (path, mark)
    if key not in _marked_cache:
        source = path.read_text(encoding="utf-8") if path.is_file() else ""
        wanted = re.compile(rf"^@pytest\.mark\.{mark}\b", re.MULTILINE)
        found = (name for decorators, name in _DECORATED.findall(source) if wanted.search(decorators))
        _marked_cache[key] = frozenset(found)
    return _marked_cache[key]


_marked_cache: dict[tuple[Path, str], frozenset[str]] = {}


def _unit(nodeid: str, root: Path) -> str:
    """The unit of work of the test ``nodeid``: "serial", its module, or its own (a unit_each case, or
    the cases of a test function marked processes in a serial module)."""
    module, _, test = nodeid.partition("::")
    path = root / module
    function = test.split("[", 1)[0]
    if function in _marked(path, "unit_each"):
        return nodeid
    if function in _marked(path, "after_compiled_build"):
        return f"{module}::{function}"
    if _is_serial(path):
        return f"{module}::{function}" if function in _marked(path, "processes") else "serial"
    return module


def _rank(scope: str, root: Path) -> int:
    """Where the unit ``scope`` goes in the queue (the order in the comments above): the serial unit
    first, then the units of marked functions, then the modules, and last the tests that wait for the
    compiled build."""
    if scope == "serial":
        return 0
    if "::" not in scope:
        return 2
    module, _, test = scope.partition("::")
    return 3 if test.split("[", 1)[0] in _marked(root / module, "after_compiled_build") else 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "serial: runs in the one unit of work that never overlaps itself")
    config.addinivalue_line(
        "markers", "processes: starts processes that only compute (no network): a unit beside the serial one"
    )
    config.addinivalue_line("markers", "unit_each: each case of this long test is a unit of work of its own")
    config.addinivalue_line("markers", "in_memory: a module the serial pattern matches by mistake: in memory")
    config.addinivalue_line(
        "markers", "more_seeds: the first case's check on other seeds: not measured by coverage, not on CI's 3.13"
    )
    config.addinivalue_line(
        "markers", "after_compiled_build: uses the compiled build: waits for CI's build, a unit handed out last"
    )


#: where CI runs .ci/build-compiled beside the tests: a file it writes once the build has ended
COMPILED_BUILD_DONE = "UET_CI_COMPILED_BUILD_DONE"


def pytest_runtest_setup(item: pytest.Item) -> None:
    done = os.environ.get(COMPILED_BUILD_DONE)
    if done and item.get_closest_marker("after_compiled_build") is not None:
        import time

        deadline = time.monotonic() + 3600  # a guard against a build that never ends
        while not Path(done).exists():
            if time.monotonic() > deadline:
                pytest.fail(f"the compiled build did not end ({done} never appeared)")
            time.sleep(0.5)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """A ``more_seeds`` case runs untraced: no coverage tracer (nor any other trace function) on its
    thread while it runs. pytest-cov's own ``no_cover`` marker does not do it under pytest-xdist: its
    pause leaves the worker's tracer running."""
    if item.get_closest_marker("more_seeds") is None:
        yield
        return
    tracer = sys.gettrace()
    sys.settrace(None)
    try:
        yield
    finally:
        sys.settrace(tracer)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _unit(item.nodeid, config.rootpath) == "serial":
            item.add_marker(pytest.mark.serial)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Units of work: every serial test together, each other module on its own (largest first)."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # xdist ships no types

    class SerialUnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid, config.rootpath)

        def _assign_work_unit(self, node: Any) -> None:
            # xdist's queue holds the units most tests first (--loadscope-reorder); a stable sort by
            # rank keeps that order within a rank
            units = sorted(self.workqueue.items(), key=lambda unit: _rank(unit[0], config.rootpath))
            self.workqueue.clear()
            self.workqueue.update(units)
            super()._assign_work_unit(node)

    return SerialUnitScheduling(config, log)
