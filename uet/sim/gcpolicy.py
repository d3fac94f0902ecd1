"""Python's cyclic garbage collector during a simulation run.

A run builds its fabric and its endpoint cores once (hundreds of thousands of long-lived objects
at 1,024 hosts) and then allocates and frees small objects per packet (event tuples, packets,
frames). With the collector's defaults every 700 net allocations start a young collection, and a
full collection rescans the whole set-up whenever the heap has grown by a quarter: 7 % of the CPU
of a 1,024-host permutation went to collections that found nearly nothing (a few thousand
objects, all from the workloads' coroutines).

:func:`collector_for_run` therefore moves what exists when the run starts out of the collector's
view (``gc.freeze``: the set-up is never rescanned) and collects the young generation less often
(:data:`YOUNG_THRESHOLD` net allocations instead of 700). Cycles are still found and freed, so
memory stays bounded; results do not depend on when the collector runs. Both settings are
restored when the run ends.

Before and after the run (**start-up and exit**, :func:`collector_for_startup`, used by ``uet-sim``):
imports, parsing and set-up create modules, classes and functions that live as long as the
process, so young collections then find nothing (about 3 % of a short run's instructions);
:data:`STARTUP_THRESHOLD` net allocations separate them instead. And at exit CPython collects
every generation twice while it tears the process down (6 % of a short run): an exit handler
moves what is still alive out of the collector's view first (``gc.freeze``), so those
collections skip it; objects still alive at exit are not collected but freed with the process,
as they would be without the collector (every file the tool writes is closed by then).
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["STARTUP_THRESHOLD", "YOUNG_THRESHOLD", "collector_for_run", "collector_for_startup"]

#: net allocations between young-generation collections during a run (CPython's default: 700)
YOUNG_THRESHOLD = 20_000
#: the same while a tool starts and after its run (module docstring)
STARTUP_THRESHOLD = 100_000
_exit_handler: list[bool] = []


@contextmanager
def collector_for_run() -> Iterator[None]:
    """The collector set for a long run (module docstring), as it was again afterwards."""
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()  # a caller's own frozen objects stay frozen
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if not frozen:
            gc.unfreeze()


@contextmanager
def collector_for_startup() -> Iterator[None]:
    """A tool's whole run, start-up to exit, with the collector set for start-up (module
    docstring); the threshold as it was again afterwards (a tool called in a test process)."""
    if not _exit_handler:
        atexit.register(gc.freeze)  # runs at exit only, before the interpreter's own collections
        _exit_handler.append(True)
    before = gc.get_threshold()
    gc.set_threshold(max(STARTUP_THRESHOLD, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
