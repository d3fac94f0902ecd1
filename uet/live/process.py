"""The live engine's child processes: each in its own process group, its stdout read as JSON lines.

The launcher (:mod:`uet.live.launcher`) starts the switch process and one endpoint process per
rank with :func:`spawn`; each child is told ``UET_RUN_PARENT`` so it asks the kernel to SIGTERM it
when the launcher dies (:func:`uet.live.worker.die_with_parent`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from typing import Any

__all__ = ["Child", "FaultsError", "RunError", "spawn"]


class RunError(Exception):
    """The run could not be set up or a child misbehaved."""


class FaultsError(RunError):
    """The run's fault schedule names a link or switch its topology lacks: a mistake in the
    scenario (``uet-run`` says it in one line, exit status 2), found before any process starts."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["UET_RUN_PARENT"] = str(os.getpid())
    return env


class Child:
    """A child process in its own process group, with its stdout read as JSON lines."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        self.name = name
        self.proc = proc
        self.events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                await self.events.put(None)
                return
            try:
                await self.events.put(json.loads(line))
            except json.JSONDecodeError:
                continue

    async def next(self, timeout: float) -> dict[str, Any]:
        try:
            ev = await asyncio.wait_for(self.events.get(), timeout)
        except TimeoutError:
            raise RunError(f"{self.name}: no report within {timeout:.0f} s") from None
        if ev is None:
            rc = await self.proc.wait()
            raise RunError(f"{self.name} exited (status {rc}) unexpectedly")
        return ev

    async def tell(self, line: str) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.write(line.encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await self.proc.stdin.drain()

    def signal_group(self, sig: int) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)


async def spawn(name: str, *args: str, stdin: bool = True) -> Child:
    """``python ARGS`` as the child ``name``, in a session of its own (``stdin``: a pipe for the
    launcher's commands, else closed).

    Cancelled while the child starts (Ctrl-C), the start still finishes, then the child is
    killed and reaped, and the cancellation goes on. asyncio's own subprocess creation, cancelled
    midway, closes its transport, whose poll of the child reaps one that already exited behind
    the back of asyncio's child watcher, which then writes "Unknown child process pid N, will
    report returncode 255" to stderr. A Ctrl-C from a terminal does exactly that: it signals the
    whole process group, and a child that has not reached ``setsid`` yet is still in it and dies
    of the SIGINT before its ``exec`` (a group SIGINT sent the moment the child appears killed it
    in 12 of 40 tries on a loaded machine)."""
    start = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            env=_child_env(),
            start_new_session=True,
        )
    )
    try:
        proc = await asyncio.shield(start)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # a start that failed has no child to stop
            proc = await start
            if proc.returncode is None:
                # os.kill, not proc.kill(): Popen.send_signal polls first, and that poll would reap
                # a child already dead behind the watcher's back too. Only the watcher reaps it,
                # so until proc.wait() returns the pid is the child's, alive or a zombie.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
            await proc.wait()
        raise
    return Child(name, proc)
