"""Running an asyncio program with the endpoint's preferred event loop (uvloop when installed).

Not part of the endpoint adapter (:mod:`uet.endpoint`): choosing and running an event loop is
the program's business, which the tools and examples share. :mod:`uet.endpoint` re-exports
both functions, their historical home.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

__all__ = ["install_uvloop", "run"]

T = TypeVar("T")


def install_uvloop() -> bool:
    """Make uvloop the event loop policy when it is installed; True if it was. Never required."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a default dependency on Linux
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def run(main: Coroutine[Any, Any, T] | Awaitable[T], *, use_uvloop: bool = True) -> T:
    """``asyncio.run`` on uvloop when it is installed (and ``use_uvloop``), else the default loop."""
    factory = None
    if use_uvloop:
        try:
            import uvloop

            factory = uvloop.new_event_loop
        except ImportError:  # pragma: no cover
            factory = None

    async def _wrap() -> T:
        return await main

    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_wrap())
