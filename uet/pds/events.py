"""Events the PDS core reports to its owner (small immutable objects, aioquic/h11 style).

The rare events are frozen dataclasses; the two made once per data packet, ``Delivery`` and
``Acked``, are immutable tuple records with named fields (see :class:`_Record`): attribute access
by name, equality and immutability as for the dataclasses, at a fraction of the build cost.
``Delivery`` is the argument of ``PdsCore.on_deliver`` (called synchronously, not queued); the
others come out of ``PdsCore.next_event()``. See the PDS core contract and spec/behaviour.md
§6.10 (PDS → SES interface).
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from typing import Any

from uet.pds.config import Mode


class _Record(tuple[Any, ...]):
    """Base of the per-packet events: an immutable tuple with named, C-level field accessors
    (``collections.namedtuple``'s), built in C by ``tuple.__new__(cls, values)``.

    ``Delivery`` and ``Acked`` are made once per data packet; as frozen dataclasses they cost
    ~0.5–1.3 µs to build here, as records ~0.15 µs, and reading a field stays an attribute
    access (``ev.token``). Equality also compares the type (unlike a bare namedtuple), so they
    behave like the other (dataclass) events for callers and tests."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = tuple.__hash__


class Delivery(_Record, namedtuple("_Delivery", "peer mode pdc psn next_hdr ses payload ecn retx")):  # noqa: PYI024
    """A newly accepted request handed to SES (RUD: on arrival, ROD: in PSN order, RUDI: every
    copy, UUD: on arrival). ``psn`` is the RUDI packet id for RUDI and 0 for UUD; ``pdc`` is the
    receiving FEP's PDCID (the target's; for return-direction data the initiator's, 0 for
    RUDI/UUD). Fields: ``peer: str, mode: Mode, pdc: int, psn: int, next_hdr: int, ses: bytes,
    payload: bytes, ecn: int, retx: bool``."""

    __slots__ = ()


class Acked(_Record, namedtuple("_Acked", "token response_next_hdr response")):  # noqa: PYI024
    """Initiator: the packet submitted with ``token`` is acknowledged (exactly once per token).

    ``response_next_hdr``/``response`` are the SES response the ACK carried for it, or 0 and empty
    bytes when it was acknowledged implicitly (CACK) or by a default/duplicate ACK. Fields:
    ``token: object, response_next_hdr: int, response: bytes``."""

    __slots__ = ()


class AckedRun(_Record, namedtuple("_AckedRun", "token count")):  # noqa: PYI024
    """Initiator, when the owner turned on ``PdsCore.acked_runs`` (an addition): ``count``
    consecutive packets submitted with the same ``token`` were acknowledged implicitly by one
    CACK advance (none carried a response). Exactly the same as ``count`` events
    ``Acked(token, 0, b"")`` in a row, in one record. Fields: ``token: object, count: int``."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Failed:
    """Initiator: the packet with ``token`` will not be delivered (exactly one of Acked/Failed)."""

    token: object
    reason: str
    nack_code: int | None


@dataclass(frozen=True, slots=True)
class PdcOpened:
    """A PDC was created; ``role`` is ``"initiator"`` or ``"target"``."""

    peer: str
    pdc: int
    mode: Mode
    role: str


@dataclass(frozen=True, slots=True)
class PdcClosed:
    """A PDC was freed; ``error`` is None after a normal close, else the reason."""

    peer: str
    pdc: int
    mode: Mode
    role: str
    error: str | None


@dataclass(frozen=True, slots=True)
class NackReceived:
    """Informational: a NACK arrived for one of this FEP's PDCs (or a RUDI request: pdc 0)."""

    peer: str
    pdc: int
    code: int
    psn: int


@dataclass(frozen=True, slots=True)
class ProbeAnswered:
    """Informational (addition to the contract): the ACK to a PROBE CP arrived; ``rtt_ns`` is the
    time since the probe was sent and ``cack_psn`` the target's cumulative ACK."""

    peer: str
    pdc: int
    opaque: int
    cack_psn: int
    rtt_ns: int


Event = Acked | AckedRun | Failed | PdcOpened | PdcClosed | NackReceived | ProbeAnswered


_tnew = tuple.__new__


def new_delivery(
    peer: str,
    mode: Mode,
    pdc: int,
    psn: int,
    next_hdr: int,
    ses: bytes,
    payload: bytes | memoryview,
    ecn: int,
    retx: bool,
) -> Delivery:
    """Positional fast constructor of :class:`Delivery` (hot paths inline ``tuple.__new__``)."""
    return _tnew(Delivery, (peer, mode, pdc, psn, next_hdr, ses, payload, ecn, retx))


def new_acked(token: object, response_next_hdr: int, response: bytes) -> Acked:
    """Positional fast constructor of :class:`Acked` (hot paths inline ``tuple.__new__``)."""
    return _tnew(Acked, (token, response_next_hdr, response))
