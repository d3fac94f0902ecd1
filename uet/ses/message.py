"""The SES message layer's shared parts (sans-I/O): the delivered :class:`Message`, the
layer's configuration (:class:`MessageConfig`), addressing (:func:`initiator_id`) and the constants
of the standard request header its data path packs and unpacks.

The layer is the bulk-data fast path under the full SES engines: the endpoint segments plain eager
``SEND`` / ``TAGGED_SEND`` messages with :class:`uet.ses.segmenter.Segmenter` (packets identical to
:class:`uet.ses.initiator.SesInitiator`'s), and :class:`uet.ses.fep.SesFep` runs
:class:`uet.ses.reassembly.Reassembler` as the unexpected (overflow) list for eager messages that
arrive before a receive is posted. SES responses are built and parsed by :mod:`uet.ses.packets`
(``build_response`` / ``parse_response``), the one response codec.

Choices where the spec notes are silent (behaviour.md §6.1):

* Payloads larger than the 14-bit ``payload_length`` field (16383 bytes, wire-format.md §12.3)
  are a documented, non-conforming extension for loopback benchmarking: such packets carry
  ``payload_length = 0`` and the target takes the length from the datagram. Conforming peers never
  see them unless the endpoint is configured with ``payload_size > 16383``.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from uet.enums import Enum
from uet.errors import UetError
from uet.pds.config import Mode
from uet.ses.packets import MAX_WIRE_PAYLOAD
from uet.wire.pds import NextHeader
from uet.wire.ses import STANDARD, ReturnCode, SesFlag, SesOpcode

if TYPE_CHECKING:
    from uet.ses.sink import ReceiveSink

__all__ = [
    "DATA_HEADER_BYTES",
    "DECLINED",
    "Declined",
    "MAX_UDP_PAYLOAD",
    "MAX_WIRE_PAYLOAD",
    "Message",
    "MessageConfig",
    "MessageError",
    "Reserved",
    "initiator_id",
]

#: Largest UDP payload on IPv4 (65535 − 8 − 20); bounds the non-conforming jumbo extension.
MAX_UDP_PAYLOAD = 65507
_SES_SIZE = 44
#: PDS request header (12) + SES standard header (44): what a data packet adds to its payload.
DATA_HEADER_BYTES = 12 + _SES_SIZE

_SOM_LAYOUT = STANDARD[(1, "none")]
_MID_LAYOUT = STANDARD[(0, "none")]
_SOM_PACK = _SOM_LAYOUT.encode
_MID_PACK = _MID_LAYOUT.encode
_SOM_UNPACK = _SOM_LAYOUT.unpack
_MID_UNPACK = _MID_LAYOUT.unpack
#: SOM=0 standard header as (bytes 0–33: the same for every non-EOM packet of a message,
#: payload_length, message_offset, request_length): the segmenter packs each packet's header
#: from a per-message prefix with one ``struct`` call (checked against the layout in the tests).
_MID_TAIL = struct.Struct(">34sHII")
_MID_PREFIX = _MID_LAYOUT.field_offset["payload_length"]
_MID_LENGTHS = struct.Struct(">HII").unpack_from  # payload_length (+2 reserved bits), offset, length
assert _MID_PREFIX == 34 and _MID_LAYOUT.field_offset["request_length"] == 40 and _MID_LAYOUT.size == 44
#: in a whole datagram (:meth:`Reassembler.deliver_datagram`): where the payload of a packet with
#: a standard SOM=0 header starts, and where its length fields are
_DATA_END = DATA_HEADER_BYTES
_DATA_LENGTHS = 12 + _MID_PREFIX

_SEND = int(SesOpcode.SEND)
_TSEND = int(SesOpcode.TAGGED_SEND)
_MASK64 = (1 << 64) - 1
_F_IE_DC = int(SesFlag.IE | SesFlag.DC)
_F_SOM = int(SesFlag.SOM)
_F_EOM = int(SesFlag.EOM)
_F_HD = int(SesFlag.HD)
_F_REL = int(SesFlag.REL)
_NH_STANDARD = int(NextHeader.STANDARD)
_MODE_RUDI = int(Mode.RUDI)
_MODE_UUD = int(Mode.UUD)
_NH_RESPONSE = int(NextHeader.RESPONSE)
_RC_OK = int(ReturnCode.OK)
_RC_DROPPED = int(ReturnCode.DROPPED)
#: the response's ``list`` field: matched a posted receive / went to the overflow list (§6.4)
_EXPECTED = 0
_OVERFLOW = 1


class Reserved:
    """``Reassembler.admit`` answer: a receive without a buffer (the endpoint's ``recv()``) was
    waiting for this message and is now reserved for it alone (``token`` names it). The message
    is reassembled into a buffer of this layer, as on the overflow path, but it matched a receive
    posted before it arrived, so its response says ``list`` = expected (behaviour.md §6.4), and
    it goes to that receive, not to the overflow list: ``Reassembler.on_reserved(token, message)``
    when it is whole, ``on_reserved(token, None)`` when it never will be (refused, failed,
    expired), which gives the receive back."""

    __slots__ = ("token",)

    def __init__(self, token: Any) -> None:
        self.token = token

    def __repr__(self) -> str:
        return f"Reserved({self.token!r})"


#: :meth:`Reassembler.deliver` in ``decline`` mode: "not mine, give it to the full SES target".
class Declined(Enum):
    """The type of :data:`DECLINED` (a one-member enum, so a type checker narrows ``r is DECLINED``)."""

    DECLINED = "DECLINED"

    def __repr__(self) -> str:
        return "DECLINED"


DECLINED: Final = Declined.DECLINED


class MessageError(UetError):
    """A message that cannot be segmented (too large, bad payload size)."""


@dataclass(frozen=True)
class MessageConfig:
    """Configuration of the message layer (one dataclass per layer, conventions.md).

    Attributes:
        payload_size: payload bytes per packet. Default 4096 (the reference provider's default is
            1024 and its upper bound 8192, wire-format.md §12.3); up to 16383 conforms; larger
            values (up to 65507 − 56 on loopback UDP) use the non-conforming jumbo extension
            described in the module docstring.
        max_message: largest message accepted for sending and for reassembly (64 MiB).
        max_partial: most messages being reassembled at once; a packet of a new message beyond
            it raises :class:`uet.pds.SesNack` (a transient shortage: PDS NACKs it with
            ``NO_SES_MSG_AVAIL`` and the initiator resends it later, §2.6 step 7, §6.9).
        max_partial_bytes: most bytes held by messages being reassembled, counted as *committed*
            (the payload bytes kept for a segmented message; the buffer pages populated for an
            in-place one, plus packets placed beyond them), never by the ``request_length`` a first
            packet claims: a claim that is never finished costs what it delivered, so strangers
            claiming huge lengths cannot starve other messages (inference; the spec notes only
            say a shortage is NACKed ``NO_SES_MSG_AVAIL``, behaviour.md §2.6 step 7). A packet
            that would take the total beyond it — the first of a new message or a later one —
            raises :class:`uet.pds.SesNack` and is resent by its initiator after a delay; a
            message longer than the whole budget is refused the same way.
        reassembly_timeout_ns: a partially received message idle this long is dropped (reference:
            5 s, behaviour.md §6.1).
        completed_ttl_ns: how long a completed message id is remembered to absorb RUDI duplicates.
        completed_max: most completed ids remembered (oldest forgotten first).
        inplace_threshold: messages of at least this many bytes are reassembled *in place*: one
            anonymous-memory buffer of ``request_length`` bytes per message (transparent huge
            pages where allowed, populated ahead in 2 MiB steps), each packet copied straight from its datagram to its
            offset, and :attr:`Message.data` is a read-only ``memoryview`` of that buffer. Smaller
            messages keep their packets and join them into ``bytes`` when first read. Measured
            for 64 MiB in 8 KiB packets (project machine): ~2–4 µs of CPU per packet in place
            versus ~9 µs for a copy per packet plus the join (fresh memory costs ~2 µs per
            4 KiB page in page faults here, and the segmented path touches every byte twice).
    """

    payload_size: int = 4096
    max_message: int = 64 << 20
    max_partial: int = 1024
    max_partial_bytes: int = 1 << 30
    reassembly_timeout_ns: int = 5_000_000_000
    completed_ttl_ns: int = 10_000_000_000
    completed_max: int = 16384
    inplace_threshold: int = 1 << 20

    def __post_init__(self) -> None:
        if not 1 <= self.payload_size <= MAX_UDP_PAYLOAD - DATA_HEADER_BYTES:
            raise MessageError(f"payload_size {self.payload_size} outside 1..{MAX_UDP_PAYLOAD - DATA_HEADER_BYTES}")
        if not 0 <= self.max_message <= 0xFFFFFFFF:
            raise MessageError("max_message must fit the 32-bit request_length")


class Message:
    """A message delivered to the application at the target.

    ``data`` is the whole message (``bytes``; a ``memoryview`` of the caller's buffer for a
    receive posted with a buffer; a read-only ``memoryview`` of the reassembly buffer for a
    message of at least :attr:`MessageConfig.inplace_threshold` bytes reassembled in place; the
    sink itself for a receive posted with a :class:`~uet.ses.sink.ReceiveSink`, the one case its
    annotation leaves out, since such a receive's owner reads the sink, not ``data``). The
    annotation must name every type compiled code may read here: the compiled build checks a
    value read from a pure-Python class against it (a ``memoryview`` read as ``bytes`` raised
    ``TypeError`` there);
    ``source`` the initiator's Fabric Address; ``mode`` the PDS delivery mode it arrived in (an
    int equal to :class:`uet.pds.Mode`); ``tag`` the 64-bit match bits of a tagged send, None for
    an untagged one; ``header_data`` the 64-bit immediate data when the initiator set ``HD``,
    else None; ``nbytes`` the bytes delivered and ``message_length`` the sender's length (larger
    when a receive truncated it).

    A smaller multi-packet message keeps its packets until ``data`` is first read and joins them
    then: the join runs in the application's context, after PDS has sent the ACK of the
    completing packet, not inside ``on_deliver``.
    """

    __slots__ = (
        "_data",
        "_parts",
        "source",
        "mode",
        "message_id",
        "job_id",
        "initiator",
        "header_data",
        "nbytes",
        "tag",
        "message_length",
    )

    def __init__(
        self,
        data: bytes | memoryview | ReceiveSink | None,
        source: str,
        mode: int,
        message_id: int,
        job_id: int = 0,
        initiator: int = 0,
        header_data: int | None = None,
        *,
        parts: list[bytes] | None = None,
        tag: int | None = None,
        message_length: int | None = None,
    ) -> None:
        self._data = data
        self._parts = parts
        self.source = source
        self.mode = mode
        self.message_id = message_id
        self.job_id = job_id
        self.initiator = initiator
        self.header_data = header_data
        self.nbytes = len(data) if data is not None else sum(map(len, parts or ()))
        self.tag = tag
        self.message_length = self.nbytes if message_length is None else message_length

    @property
    def data(self) -> bytes | memoryview:
        d = self._data
        if d is None:
            d = self._data = b"".join(self._parts or ())
            self._parts = None
        return d  # type: ignore[return-value]

    @property
    def truncated(self) -> bool:
        """True when the receive kept fewer bytes than the sender sent (§6.4 truncation)."""
        return self.nbytes < self.message_length

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (
            self.source,
            self.mode,
            self.message_id,
            self.job_id,
            self.initiator,
            self.header_data,
            self.tag,
            bytes(self.data),
        ) == (
            other.source,
            other.mode,
            other.message_id,
            other.job_id,
            other.initiator,
            other.header_data,
            other.tag,
            bytes(other.data),
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"Message(source={self.source!r}, mode={self.mode}, message_id={self.message_id}, "
            f"nbytes={self.nbytes}, tag={self.tag}, header_data={self.header_data})"
        )


def initiator_id(address: str) -> int:
    """The 32-bit SES ``initiator`` for a Fabric Address: the IPv4 address, or the low 32 bits of
    an IPv6 address (inference: the notes leave the initiator ID to the provider, §1.1)."""
    return int(ipaddress.ip_address(address)) & 0xFFFFFFFF
