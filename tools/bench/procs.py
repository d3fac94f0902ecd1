"""The two processes of ``uet-bench pair`` / ``rtt``: starting the receiver process, and the
messages the two exchange over their pipe (``(tag, payload)`` tuples; ``("error", text)`` from
the receiver becomes :class:`~uet.tools.cli.RunFailed` here)."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from multiprocessing.connection import Connection
from typing import Any

from uet.tools.bench.options import PairOptions
from uet.tools.cli import RunFailed

from uet.errors import UetError

__all__ = ["checked", "expect", "gather_within", "pipe_recv", "spawn"]


def _child(conn: Connection, target: Callable[[Connection, PairOptions], None], opts_d: dict[str, Any]) -> None:
    """Entry point of the spawned receiver process."""
    try:
        target(conn, PairOptions(**opts_d))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):  # parent went away
        pass
    except (UetError, OSError) as e:  # e.g. the port is taken: the parent reports it in one line
        with contextlib.suppress(OSError, EOFError):
            conn.send(("error", f"receiver process: {e}"))


def spawn(
    target: Callable[[Connection, PairOptions], None], opts: PairOptions
) -> tuple[mp.process.BaseProcess, Connection]:
    """Start the receiver process running ``target(conn, opts)``; (process, this end of the pipe)."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(child, target, asdict(opts)), daemon=True)
    # The receiver is started with SIGINT blocked (the mask survives exec): Ctrl-C in the terminal
    # reaches the whole process group, and only this process should handle it; the child follows
    # by seeing its pipe close. While it starts, a Ctrl-C that already reached this process is only
    # noted (an interrupted start leaves the child half-fed, and it prints a traceback), then
    # raised once the start is complete. The resource tracker is started first: starting it
    # unblocks SIGINT.
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    noted: list[int] = []
    main_thread = threading.current_thread() is threading.main_thread()
    prev = signal.signal(signal.SIGINT, lambda *_: noted.append(1)) if main_thread else None
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        if main_thread:
            signal.signal(signal.SIGINT, prev)
    if noted:
        proc.terminate()
        proc.join(5)
        raise KeyboardInterrupt
    child.close()
    return proc, parent


def checked(got: Any) -> Any:
    """A message from the receiver process; its ``("error", text)`` report becomes RunFailed."""
    if isinstance(got, tuple) and got and got[0] == "error":
        raise RunFailed(got[1])
    return got


def expect(conn: Connection, tag: str, timeout: float = 60.0) -> Any:
    """The payload of the receiver's next message, which must be tagged ``tag``."""
    if not conn.poll(timeout):
        raise TimeoutError(f"receiver process did not send {tag!r} within {timeout} s")
    got = checked(conn.recv())
    if got[0] != tag:
        raise RuntimeError(f"receiver sent {got[0]!r}, expected {tag!r}")
    return got[1]


async def gather_within(aws: Sequence[Awaitable[Any]], timeout: float | None) -> list[Any]:
    """``asyncio.gather(*aws, return_exceptions=True)`` within ``timeout`` seconds (else
    TimeoutError). Not ``wait_for(gather(...))``: cancelled by Ctrl-C, Python 3.11's ``wait_for``
    cancels the gather and never retrieves the CancelledError it then holds, so the tool's last
    stderr lines after "interrupted" were "_GatheringFuture exception was never retrieved"."""
    async with asyncio.timeout(timeout):
        return await asyncio.gather(*aws, return_exceptions=True)


async def pipe_recv(conn: Connection, timeout: float | None = None) -> Any:
    """Receive from a multiprocessing pipe without blocking the event loop."""
    loop = asyncio.get_running_loop()
    if conn.poll():
        return conn.recv()
    fut = loop.create_future()
    fd = conn.fileno()

    def ready() -> None:
        if not fut.done():
            fut.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await asyncio.wait_for(fut, timeout)
    finally:
        loop.remove_reader(fd)
    os.set_blocking(fd, True)  # the loop may leave the fd non-blocking; a large message comes in parts
    return checked(conn.recv())
