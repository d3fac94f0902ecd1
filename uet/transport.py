"""The transport contract: what workloads and tools may do with an endpoint (architecture.md,
"Transport contract and workloads").

:class:`Transport` is a :class:`typing.Protocol`: any object with these coroutines and attributes
is a transport. Three implement it — the live :class:`uet.Endpoint` (asyncio over a link), the
simulator's :class:`uet.sim.SimEndpoint` (a FEP core or a RoCE core in virtual time) and the live
RoCEv2 :class:`uet.roce_endpoint.RoceEndpoint`. Workloads (:mod:`uet.workloads`) are written against this module
only: they never import PDS, SES or RoCE internals and never reach into endpoint attributes, so
one workload object runs unchanged on every transport and on either engine.

Transport-neutral types:

* :class:`Received`: what a receive gives back (data, source, tag, header data, length). The UET
  :class:`uet.ses.message.Message` has this shape.
* :class:`OpResult` and :func:`outcome`: an operation's result as a value that compares equal
  across transports and engines (the differential test compares them), with failures reduced to
  an error *name* by :func:`error_name`: the SES return code's name (``BAD_MKEY``,
  ``UNDELIVERABLE``...) for UET errors — the RoCEv2 endpoint maps its syndromes onto the same
  names —, ``CLOSED`` for an operation on or interrupted by a closed endpoint, else the
  exception's class name.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from uet.ses.sink import ReceiveSink

__all__ = ["OpResult", "Received", "Transport", "error_name", "outcome", "transport_label"]

_TRANSPORT_LABELS = {"uet": "UET", "roce": "RoCEv2"}


def transport_label(name: str) -> str:
    """How tables and plot titles name a transport: ``uet`` → ``UET``, ``roce`` → ``RoCEv2``."""
    return _TRANSPORT_LABELS.get(name, name)


@runtime_checkable
class Received(Protocol):
    """A message delivered to the application."""

    @property
    def data(self) -> bytes | memoryview: ...

    @property
    def source(self) -> str: ...

    @property
    def tag(self) -> int | None: ...

    @property
    def header_data(self) -> int | None: ...

    @property
    def nbytes(self) -> int: ...


@runtime_checkable
class Transport(Protocol):
    """The operations a workload uses. Every coroutine raises on failure (map the exception with
    :func:`error_name`, or wrap the call in :func:`outcome`)."""

    #: The endpoint's own address (a Fabric Address for UET).
    address: str

    async def send(
        self, peer: str, data: bytes | bytearray | memoryview, *, tag: int | None = None, header_data: int | None = None
    ) -> None:
        """Send one message; returns when the target has all of it."""
        ...

    async def recv(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Received:
        """The next message matching the filter (untagged when ``tag`` is None)."""
        ...

    async def recv_into(
        self,
        buffer: bytearray | memoryview | ReceiveSink,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> Received:
        """Post ``buffer`` as a receive and wait for its message."""
        ...

    def register(self, buffer: Any, access: Any = ..., *, key: int | None = None) -> Any:
        """Register memory for remote access; the result has a ``key`` peers use."""
        ...

    async def write(
        self, peer: str, key: int, offset: int, data: bytes | bytearray | memoryview, *, header_data: int | None = None
    ) -> None:
        """RMA write into the peer's region ``key``."""
        ...

    async def read(self, peer: str, key: int, offset: int, length: int) -> bytes | memoryview:
        """RMA read from the peer's region ``key``."""
        ...

    async def atomic(
        self, peer: str, key: int, offset: int, op: Any, datatype: Any, operand: Any = None, *, fetch: bool = False
    ) -> Any:
        """Atomic operation on the peer's region ``key``; the prior value with ``fetch``."""
        ...

    async def close(self) -> None:
        """Finish what is queued, then release the endpoint."""
        ...

    @property
    def counters(self) -> dict[str, int]:
        """A snapshot of the endpoint's counters (``retransmits`` among them)."""
        ...


@dataclass(frozen=True)
class OpResult:
    """An operation's outcome: ``ok`` with its ``value`` (None for sends and writes; bytes for a
    read; the prior value of a fetching atomic), or the :func:`error_name` of its failure."""

    ok: bool
    value: Any = None
    error: str | None = None


def error_name(exc: BaseException) -> str:
    """The transport-neutral name of a failure (module docstring)."""
    code = getattr(exc, "return_code", None)
    if code is not None and hasattr(code, "name"):
        return str(code.name)
    name = type(exc).__name__
    if name in ("EndpointClosed", "TransportClosed"):
        return "CLOSED"
    return name


async def outcome(op: Awaitable[Any]) -> OpResult:
    """Await ``op`` and return its :class:`OpResult` (bytes-like values as ``bytes``)."""
    try:
        value = await op
    except Exception as e:  # noqa: BLE001 - every failure becomes a named result
        return OpResult(False, None, error_name(e))
    if isinstance(value, memoryview | bytearray):
        value = bytes(value)
    return OpResult(True, value)
