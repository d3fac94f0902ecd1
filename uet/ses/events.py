"""SES events and outbound requests (small frozen dataclasses, aioquic/h11 style).

Target side: :class:`RecvCompleted` (a posted receive is filled, or failed), :class:`WriteCompleted`
(a remote write carrying header data: the remote completion with immediate data, behaviour.md
§6.5). Initiator side: :class:`OpCompleted` / :class:`OpFailed`, exactly one per operation.

:class:`OutPacket` is a request either engine wants PDS to carry: the arguments of
``PdsCore.submit`` (the PDS core contract) plus, for read-return data, the PDC the read arrived on
(``return_pdc``: behaviour.md §6.5 sends the data "in the return direction of the same PDC"; a PDS
without return-direction support may submit it as an ordinary request to ``peer``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uet.ses.errors import SesError

__all__ = ["OpCompleted", "OpFailed", "OutPacket", "RecvCompleted", "SesResponse", "WriteCompleted"]


@dataclass(frozen=True, slots=True)
class OutPacket:
    """One SES request packet to submit to PDS (``token`` comes back in ``Acked``/``Failed``)."""

    peer: str
    mode: int
    next_hdr: int
    ses: bytes
    payload: bytes | memoryview
    som: bool
    eom: bool
    token: Any
    job_id: int = 0
    return_pdc: int | None = None


@dataclass(frozen=True, slots=True)
class SesResponse:
    """What the target puts in the ACK of a request: ``(next_hdr, data)`` for the PDS, and whether
    the PDS must deliver it (``guaranteed``: errors, deferral, overflow use, data, DC; §6.9)."""

    next_hdr: int
    data: bytes
    guaranteed: bool


@dataclass(frozen=True, slots=True)
class RecvCompleted:
    """A posted receive completed (``return_code`` OK) or failed (another code).

    ``length`` is the number of bytes placed in the receive's buffer, ``message_length`` the
    sender's full length (greater when truncated), ``header_data`` the immediate data when the
    sender set HD. ``unexpected`` says the message had been buffered on the overflow list.
    """

    recv_id: int
    context: Any
    return_code: int
    length: int
    message_length: int
    source: str
    initiator: int
    tag: int
    header_data: int | None
    unexpected: bool = False


@dataclass(frozen=True, slots=True)
class WriteCompleted:
    """A remote WRITE with header data landed: the target-side completion (§6.5)."""

    key: int
    offset: int
    length: int
    header_data: int
    source: str
    initiator: int


@dataclass(frozen=True, slots=True)
class OpCompleted:
    """Initiator: operation ``op`` finished. ``result`` is the read data (bytes) for READ, the
    fetched value (or a tuple of values for a vector) for fetching atomics, else None;
    ``modified_length`` the target's count of bytes placed (sends may be truncated)."""

    op: int
    kind: str
    result: Any
    modified_length: int
    context: Any = None


@dataclass(frozen=True, slots=True)
class OpFailed:
    """Initiator: operation ``op`` failed with ``error`` (an :class:`SesError`)."""

    op: int
    kind: str
    error: SesError
    context: Any = None
