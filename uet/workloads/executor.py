"""Run one rank's part of a :class:`~uet.workloads.schedule.Schedule` on a transport.

Every op starts the moment its dependencies complete, as a task, so many are in flight at once: a
send takes a snapshot of its bytes then (the transport's own window and congestion control pace
it); a receive is posted then — the builders chain receives (a slice's step after its previous
step, a peer's next message after its previous one), so few receives are posted at a time and
the transport's matching stays short, while a message that arrives early waits in its unexpected
queue. A receive is applied — copied, or reduced (bitwise XOR, the reduction the
library uses: exact, associative and commutative like a sum, and C-speed on CPython integers) —
before the ops depending on it start.

``data=False`` moves the same bytes without computing: sends read the rank's input, receives are
dropped (a large sweep measures the network, not CPython's XOR; the result is not checked).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uet.transport import Transport, error_name
from uet.workloads.schedule import Apply, Op, OpKind

__all__ = ["CollectiveFailed", "execute", "wait_for"]


class CollectiveFailed(Exception):
    """An op of the collective failed; ``name`` is its transport-neutral error name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


async def wait_for(now: Callable[[], float], seconds: float) -> None:
    """Wait ``seconds`` on the clock ``now``, which may run slower than the loop's (the live
    engine's dilated virtual time): sleep, see how far ``now`` moved, sleep the rest scaled by
    the ratio observed, until it has moved ``seconds`` (under the simulator one sleep)."""
    if seconds <= 0:
        return
    loop = asyncio.get_running_loop()
    end = now() + seconds
    ratio = 1.0
    while (left := end - now()) > 1e-10:
        t0, v0 = loop.time(), now()
        # half a nanosecond short: the simulator's clock rounds a timer up to whole nanoseconds
        await asyncio.sleep(max(0.0, left * ratio - 5e-10))
        moved = now() - v0
        if moved > 0:
            ratio = max(ratio, (loop.time() - t0) / moved)


def xor_into(buf: bytearray, offset: int, data: bytes | memoryview) -> None:
    """``buf[offset:offset + len(data)] ^= data``."""
    end = offset + len(data)
    x = int.from_bytes(buf[offset:end], "big") ^ int.from_bytes(data, "big")
    buf[offset:end] = x.to_bytes(len(data), "big")


async def execute(
    ep: Transport,
    addresses: list[str],
    ops: list[Op],
    bufs: list[Any],
    *,
    tag_base: int,
    data: bool = True,
    on_send: Callable[[Op, bytes | memoryview], int | None] | None = None,
    on_recv: Callable[[Op, Any], None] | None = None,
    clock: Callable[[], float] | None = None,
    trace: Callable[[int, float, float], None] | None = None,
) -> None:
    """Run ``ops`` (module docstring); ``bufs[op.buf]`` is each op's buffer (a bytearray, or a
    read-only bytes-like without ``data``). Tags are ``tag_base | op.tag``. ``on_send(op, bytes)``
    gives the SES header data of each send; ``on_recv(op, message)`` sees each receive;
    ``trace(index, start, end)`` each op's start and completion on ``clock`` (seconds; default
    the loop's). COMPUTE ops wait their ``seconds`` on ``clock``. Raises
    :class:`CollectiveFailed` on the first failed op."""
    loop = asyncio.get_running_loop()
    now = clock or loop.time
    started: dict[int, float] = {}
    remaining = [len(op.deps) for op in ops]
    dependents: list[list[int]] = [[] for _ in ops]
    for i, op in enumerate(ops):
        for d in op.deps:
            dependents[d].append(i)
    left = len(ops)
    finished: asyncio.Future[None] = loop.create_future()
    tasks: set[asyncio.Future[Any]] = set()

    def fail(e: BaseException) -> None:
        if not finished.done():
            finished.set_exception(e if isinstance(e, CollectiveFailed) else CollectiveFailed(error_name(e)))

    def done(i: int) -> None:
        nonlocal left
        left -= 1
        if trace is not None:
            trace(i, started.pop(i), now())
        for j in dependents[i]:
            remaining[j] -= 1
            if remaining[j] == 0:
                start(j)
        if left == 0 and not finished.done():
            finished.set_result(None)

    def start(i: int) -> None:
        op = ops[i]
        if trace is not None:
            started[i] = now()
        if op.kind is OpKind.COMPUTE:
            t: asyncio.Future[Any] = asyncio.ensure_future(wait_for(now, op.seconds))
        elif op.kind is OpKind.SEND:
            chunk = bufs[op.buf][op.offset : op.offset + op.length]
            payload = bytes(chunk) if data else chunk
            hd = on_send(op, payload) if on_send is not None else None
            t = asyncio.ensure_future(ep.send(addresses[op.peer], payload, tag=tag_base | op.tag, header_data=hd))
        else:
            t = asyncio.ensure_future(receive(op))
        tasks.add(t)

        def ended(f: asyncio.Future[Any], i: int = i) -> None:
            tasks.discard(f)
            if f.cancelled():
                return
            if f.exception() is not None:
                fail(f.exception())  # type: ignore[arg-type]
            else:
                done(i)

        t.add_done_callback(ended)

    async def receive(op: Op) -> None:
        m = await ep.recv(tag_base | op.tag, source=addresses[op.peer])
        if on_recv is not None:
            on_recv(op, m)
        if data:
            got = m.data
            if len(got) != op.length:
                raise CollectiveFailed("WRONG_LENGTH")
            if op.apply is Apply.REDUCE:
                xor_into(bufs[op.buf], op.offset, got)
            else:
                bufs[op.buf][op.offset : op.offset + op.length] = got

    if left == 0:
        finished.set_result(None)
    for i, op in enumerate(ops):
        if not op.deps:
            start(i)
    try:
        await finished
    finally:
        for t in list(tasks):
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
