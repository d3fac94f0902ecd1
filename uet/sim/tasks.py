"""The simulator's own coroutine runner: asyncio's tasks, futures and ``gather`` in virtual time,
without importing asyncio (issue 28).

A short simulation spent about an eighth of its instructions importing asyncio (and with it
``concurrent.futures``, ``logging``, ``subprocess``...) to run a few coroutines per rank. A run
whose workload is one of the plain traffic patterns (:meth:`uet.workloads.base.Workload.run`:
sends, receives and ``gather``, no sleeps or timeouts) and that has no time limit runs on
:class:`SimLoop` instead of :class:`uet.sim.loop.VirtualTimeLoop`; every other run (collectives,
training, ``timeout_s``) stays on asyncio (:func:`uet.sim.scenario.simulate` chooses).

**Same order, same results.** The runner does what asyncio's event loop, ``Task``, ``Future`` and
``gather`` (CPython 3.11) do for such a run, step for step: callbacks run first in, first out, one
batch per loop turn (those ready when the turn starts); a task's first step and every done
callback are scheduled, a task waiting on a future wakes from that future's done callback; each
turn runs the engine where :class:`~uet.sim.loop.EngineSelector` would (the current instant when
callbacks are ready or the loop stops, else until a core has events, and
:class:`~uet.sim.engine.SimulationError` when nothing is left). So the cores see the same
operations at the same virtual instants and a run's ``--json`` is byte-identical
(tests/test_sim_tasks.py runs both loops). A cancellation (Ctrl-C) raises asyncio's own
``CancelledError``, importing asyncio then.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any

import uet.runner
from uet.sim.engine import Engine, SimulationError

__all__ = ["SimFuture", "SimLoop", "SimTask"]

_PENDING, _CANCELLED, _FINISHED = 0, 1, 2


def _cancelled_error(msg: Any = None) -> BaseException:
    import asyncio  # only a cancelled run needs it

    return asyncio.CancelledError() if msg is None else asyncio.CancelledError(msg)


class SimFuture:
    """``asyncio.Future``'s behaviour on :class:`SimLoop`: done callbacks scheduled with
    ``call_soon`` in the order they were added."""

    _asyncio_future_blocking = False

    def __init__(self, loop: SimLoop) -> None:
        self._loop = loop
        self._state = _PENDING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[Any], Any]] = []
        self._cancel_message: Any = None

    def get_loop(self) -> SimLoop:
        return self._loop

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def result(self) -> Any:
        if self._state == _CANCELLED:
            raise _cancelled_error(self._cancel_message)
        if self._state != _FINISHED:
            raise RuntimeError("Result is not ready.")
        if self._exception is not None:
            raise self._exception.with_traceback(self._exception.__traceback__)
        return self._result

    def exception(self) -> BaseException | None:
        if self._state == _CANCELLED:
            raise _cancelled_error(self._cancel_message)
        if self._state != _FINISHED:
            raise RuntimeError("Exception is not set.")
        return self._exception

    def add_done_callback(self, fn: Callable[[Any], Any], *, context: Any = None) -> None:
        if self._state != _PENDING:
            self._loop.call_soon(fn, self)
        else:
            self._callbacks.append(fn)

    def remove_done_callback(self, fn: Callable[[Any], Any]) -> int:
        kept = [f for f in self._callbacks if f != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks[:] = kept
        return removed

    def _schedule_callbacks(self) -> None:
        callbacks = self._callbacks[:]
        if not callbacks:
            return
        self._callbacks[:] = []
        for fn in callbacks:
            self._loop.call_soon(fn, self)

    def set_result(self, result: Any) -> None:
        if self._state != _PENDING:
            raise RuntimeError(f"invalid state: {self._state}")
        self._result = result
        self._state = _FINISHED
        self._schedule_callbacks()

    def set_exception(self, exception: BaseException | type[BaseException]) -> None:
        if self._state != _PENDING:
            raise RuntimeError(f"invalid state: {self._state}")
        if isinstance(exception, type):
            exception = exception()
        if type(exception) is StopIteration:
            raise TypeError("StopIteration interacts badly with generators and cannot be raised into a Future")
        self._exception = exception
        self._state = _FINISHED
        self._schedule_callbacks()

    def cancel(self, msg: Any = None) -> bool:
        if self._state != _PENDING:
            return False
        self._state = _CANCELLED
        self._cancel_message = msg
        self._schedule_callbacks()
        return True

    def __await__(self) -> Generator[Any, None, Any]:
        if not self.done():
            self._asyncio_future_blocking = True
            yield self
        if not self.done():
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__


class SimTask(SimFuture):
    """``asyncio.Task``'s behaviour on :class:`SimLoop`: the first step is scheduled when the task
    is made; a step that waits on a future resumes from that future's done callback."""

    def __init__(self, coro: Coroutine[Any, Any, Any], loop: SimLoop) -> None:
        super().__init__(loop)
        self._coro = coro
        self._fut_waiter: SimFuture | None = None
        self._must_cancel = False
        loop.call_soon(self._step)
        loop._tasks.append(self)

    def cancel(self, msg: Any = None) -> bool:
        if self.done():
            return False
        if self._fut_waiter is not None and self._fut_waiter.cancel(msg=msg):
            return True
        self._must_cancel = True
        self._cancel_message = msg
        return True

    def _step(self, exc: BaseException | None = None) -> None:
        if self._must_cancel:
            if not isinstance(exc, _cancelled_error().__class__):
                exc = _cancelled_error(self._cancel_message)
            self._must_cancel = False
        self._fut_waiter = None
        prev = self._loop._current_task
        self._loop._current_task = self
        try:
            result = self._coro.send(None) if exc is None else self._coro.throw(exc)
        except StopIteration as e:
            if self._must_cancel:
                self._must_cancel = False
                super().cancel(msg=self._cancel_message)
            else:
                super().set_result(e.value)
        except (KeyboardInterrupt, SystemExit) as e:
            super().set_exception(e)
            raise
        except BaseException as e:
            if type(e).__name__ == "CancelledError" and isinstance(e, _cancelled_error().__class__):
                super().cancel()
            else:
                super().set_exception(e)
        else:
            blocking = getattr(result, "_asyncio_future_blocking", None)
            if blocking:
                result._asyncio_future_blocking = False
                result.add_done_callback(self._wakeup)
                self._fut_waiter = result
                if self._must_cancel and result.cancel(msg=self._cancel_message):
                    self._must_cancel = False
            elif result is None:
                self._loop.call_soon(self._step)
            else:
                self._loop.call_soon(self._step, RuntimeError(f"Task got bad yield: {result!r}"))
        finally:
            self._loop._current_task = prev

    def _wakeup(self, future: SimFuture) -> None:
        try:
            future.result()
        except BaseException as exc:
            self._step(exc)
        else:
            self._step()


class _Gathering(SimFuture):
    """``gather``'s outer future: cancelling it cancels its children."""

    def __init__(self, children: list[SimFuture], loop: SimLoop) -> None:
        super().__init__(loop)
        self._children = children
        self._cancel_requested = False

    def cancel(self, msg: Any = None) -> bool:
        if self.done():
            return False
        ret = False
        for child in self._children:
            if child.cancel(msg=msg):
                ret = True
        if ret:
            self._cancel_requested = True
        return ret


class SimLoop:
    """The simulator's loop over ``engine`` (module docstring): the subset of an asyncio event
    loop that the adapter, the simulator's endpoints and the plain workloads use."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._ready: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._stopping = False
        self._tasks: list[SimTask] = []
        self._current_task: SimTask | None = None

    def time(self) -> float:
        return self.engine.now / 1e9

    def call_soon(self, callback: Callable[..., Any], *args: Any, context: Any = None) -> None:
        self._ready.append((callback, args))

    def create_future(self) -> SimFuture:
        return SimFuture(self)

    def create_task(self, coro: Coroutine[Any, Any, Any]) -> SimTask:
        return SimTask(coro, self)

    def ensure_future(self, aw: Any) -> SimFuture:
        if isinstance(aw, SimFuture):
            return aw
        return SimTask(aw, self)

    def all_tasks(self) -> set[SimTask]:
        """The tasks not done yet (``asyncio.all_tasks``)."""
        return {t for t in self._tasks if not t.done()}

    def gather(self, *aws: Any, return_exceptions: bool = False) -> SimFuture:
        """``asyncio.gather`` (its CPython 3.11 algorithm)."""
        if not aws:
            outer = SimFuture(self)
            outer.set_result([])
            return outer
        children: list[SimFuture] = []
        nfuts = 0
        nfinished = 0
        outer_box: list[_Gathering] = []

        def done(fut: SimFuture) -> None:
            nonlocal nfinished
            nfinished += 1
            outer = outer_box[0] if outer_box else None
            if outer is None or outer.done():
                if not fut.cancelled():
                    fut.exception()
                return
            if not return_exceptions:
                if fut.cancelled():
                    outer.set_exception(_cancelled_error(fut._cancel_message))
                    return
                exc = fut.exception()
                if exc is not None:
                    outer.set_exception(exc)
                    return
            if nfinished == nfuts:
                results: list[Any] = []
                for f in children:
                    if f.cancelled():
                        res: Any = _cancelled_error("" if f._cancel_message is None else f._cancel_message)
                    else:
                        res = f.exception()
                        if res is None:
                            res = f.result()
                    results.append(res)
                if outer._cancel_requested:
                    outer.set_exception(_cancelled_error(fut._cancel_message))
                else:
                    outer.set_result(results)

        seen: dict[Any, SimFuture] = {}
        for arg in aws:
            if arg not in seen:
                fut = self.ensure_future(arg)
                nfuts += 1
                seen[arg] = fut
                fut.add_done_callback(done)
            else:
                fut = seen[arg]
            children.append(fut)
        outer_box.append(_Gathering(children, self))
        return outer_box[0]

    def run_until_complete(self, aw: Any) -> Any:
        """Run ``aw`` to completion (``asyncio.BaseEventLoop.run_until_complete``)."""
        fut = self.ensure_future(aw)

        def stop(f: SimFuture) -> None:
            if not f.cancelled() and isinstance(f.exception(), (SystemExit, KeyboardInterrupt)):
                return
            self._stopping = True

        fut.add_done_callback(stop)
        previous = uet.runner._sim_loop
        uet.runner._sim_loop = self
        try:
            while True:
                self._run_once()
                if self._stopping:
                    break
        finally:
            self._stopping = False
            uet.runner._sim_loop = previous
            fut.remove_done_callback(stop)
        if not fut.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        return fut.result()

    def _run_once(self) -> None:
        """One turn (``BaseEventLoop._run_once`` with :class:`~uet.sim.loop.EngineSelector`, no
        timers): the engine, then the callbacks ready when the turn started."""
        eng = self.engine
        if self._ready or self._stopping:
            eng.step(eng.now)
        elif not eng.step(None):
            raise SimulationError(f"stalled at t = {eng.now} ns: every task waits and nothing is left to happen")
        ready = self._ready
        for _ in range(len(ready)):
            callback, args = ready.popleft()
            callback(*args)

    def close(self) -> None:
        self._ready.clear()
