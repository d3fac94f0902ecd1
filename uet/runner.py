"""Running an asyncio program with the endpoint's preferred event loop (uvloop when installed),
and the running loop of code shared by asyncio and the simulator's own loop.

Not part of the endpoint adapter (:mod:`uet.endpoint`): choosing and running an event loop is
the program's business, which the tools and examples share. :mod:`uet.endpoint` re-exports
``install_uvloop`` and ``run``, their historical home.

:func:`running_loop` and :func:`gather` are what the adapter (:mod:`uet.adapter`) and the
workloads call instead of ``asyncio.get_running_loop`` and ``asyncio.gather``: the simulator's
coroutine runner (:mod:`uet.sim.tasks`) while it runs, else asyncio's, imported only then, so a
simulation that needs no asyncio never loads it (about an eighth of a short run's instructions,
issue 28).
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

__all__ = ["gather", "install_uvloop", "run", "running_loop"]

T = TypeVar("T")

#: the simulator's loop while it runs (:mod:`uet.sim.tasks`), else None
_sim_loop: Any = None


def running_loop() -> Any:
    """The running loop: the simulator's own while it runs, else ``asyncio.get_running_loop()``."""
    if _sim_loop is not None:
        return _sim_loop
    import asyncio

    return asyncio.get_running_loop()


def gather(*aws: Any, return_exceptions: bool = False) -> Any:
    """``asyncio.gather`` on the running loop (:func:`running_loop`)."""
    if _sim_loop is not None:
        return _sim_loop.gather(*aws, return_exceptions=return_exceptions)
    import asyncio

    return asyncio.gather(*aws, return_exceptions=return_exceptions)


def install_uvloop() -> bool:
    """Make uvloop the event loop policy when it is installed; True if it was. Never required."""
    import asyncio

    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a default dependency on Linux
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def run(main: Coroutine[Any, Any, T] | Awaitable[T], *, use_uvloop: bool = True) -> T:
    """``asyncio.run`` on uvloop when it is installed (and ``use_uvloop``), else the default loop.

    Ctrl-C always ends in :class:`KeyboardInterrupt`. ``asyncio.Runner`` turns the first SIGINT
    into a cancellation of the main task and raises KeyboardInterrupt only if that task ends
    cancelled; a task that absorbs the cancellation and returns (Python 3.11's
    ``asyncio.wait_for`` does, when its awaitable completes in the same loop turn as the cancel;
    so does any ``except CancelledError`` that forgets to re-raise) made the runner return the
    result as if no Ctrl-C had come, and the tool went on. A cancellation still requested when
    ``main`` returns (``Task.cancelling()``) is therefore re-raised here."""
    import asyncio

    factory = None
    if use_uvloop:
        try:
            import uvloop

            factory = uvloop.new_event_loop
        except ImportError:  # pragma: no cover
            factory = None

    async def _wrap() -> T:
        result = await main
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError  # absorbed by ``main``; the runner makes it KeyboardInterrupt
        return result

    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_wrap())
