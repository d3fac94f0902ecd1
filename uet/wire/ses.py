"""SES headers (wire-format.md §8–§11): value tables and one layout per header variant.

The standard request header has two unions: bytes 32–39 chosen by SOM (header data, or payload
length and message offset) and the restart token that replaces ``buffer_offset`` (opcodes 0x08,
0x0B) or ``match_bits`` (opcode 0x0C). The medium header's bytes 12–19 are chosen by HD.
:func:`ses_request_layout` picks the variant from the first two bytes.
"""

from __future__ import annotations

from uet.enums import IntEnum, IntFlag
from uet.wire.layout import F, Item, Layout, R
from uet.wire.pds import NextHeader


class SesOpcode(IntEnum):
    """SES request opcodes (wire-format.md §8.5)."""

    NO_OP = 0x00
    WRITE = 0x01
    READ = 0x02
    ATOMIC = 0x03
    FETCHING_ATOMIC = 0x04
    SEND = 0x05
    RENDEZVOUS_SEND = 0x06
    DATAGRAM_SEND = 0x07
    DEFERRABLE_SEND = 0x08
    TAGGED_SEND = 0x09
    RENDEZVOUS_TSEND = 0x0A
    DEFERRABLE_TSEND = 0x0B
    DEFERRABLE_RTR = 0x0C
    TSEND_ATOMIC = 0x0D
    TSEND_FETCH_ATOMIC = 0x0E
    MSG_ERROR = 0x0F
    SYNC_WRITE = 0x10
    SYNC_ATOMIC = 0x11


class ResponseOpcode(IntEnum):
    """SES response opcodes (wire-format.md §11)."""

    DEFAULT_RESPONSE = 0
    RESPONSE = 1
    RESPONSE_W_DATA = 2
    NO_RESPONSE = 3


class SesFlag(IntFlag):
    """Flag bits of byte 1 of every SES request header (wire-format.md §8.1)."""

    SOM = 0x01
    EOM = 0x02
    HD = 0x04
    REL = 0x08
    IE = 0x10
    DC = 0x20


class ReturnCode(IntEnum):
    """SES return codes (6 bits, wire-format.md §11.4)."""

    NULL = 0x00
    OK = 0x01
    BAD_GENERATION = 0x02
    DISABLED = 0x03
    DISABLED_GEN = 0x04
    NO_MATCH = 0x05
    UNSUPPORTED_OP = 0x06
    UNSUPPORTED_SIZE = 0x07
    AT_INVALID = 0x08
    AT_PERM = 0x09
    AT_ATS_ERROR = 0x0A
    AT_NO_TRANS = 0x0B
    AT_OUT_OF_RANGE = 0x0C
    HOST_POISONED = 0x0D
    HOST_UNSUCCESS_CMPL = 0x0E
    AMO_UNSUPPORTED_OP = 0x0F
    AMO_UNSUPPORTED_DT = 0x10
    AMO_UNSUPPORTED_SIZE = 0x11
    AMO_UNALIGNED = 0x12
    AMO_FP_NAN = 0x13
    AMO_FP_UNDERFLOW = 0x14
    AMO_FP_OVERFLOW = 0x15
    AMO_FP_INEXACT = 0x16
    PERM_VIOLATION = 0x17
    OP_VIOLATION = 0x18
    BAD_INDEX = 0x19
    BAD_PID = 0x1A
    BAD_JOB_ID = 0x1B
    BAD_MKEY = 0x1C
    BAD_ADDR = 0x1D
    CANCELLED = 0x1E
    UNDELIVERABLE = 0x1F
    UNCOR = 0x20
    UNCOR_TRNSNT = 0x21
    TOO_LONG = 0x22
    INITIATOR_ERR = 0x23
    DROPPED = 0x24


class AmoOp(IntEnum):
    """Atomic opcodes (wire-format.md §10.1)."""

    MIN = 0x00
    MAX = 0x01
    SUM = 0x02
    DIFF = 0x03
    PROD = 0x04
    LOR = 0x05
    LAND = 0x06
    BOR = 0x07
    BAND = 0x08
    LXOR = 0x09
    BXOR = 0x0A
    READ = 0x0B
    WRITE = 0x0C
    CSWAP = 0x0D
    CSWAP_NE = 0x0E
    CSWAP_LE = 0x0F
    CSWAP_LT = 0x10
    CSWAP_GE = 0x11
    CSWAP_GT = 0x12
    MSWAP = 0x13
    INVAL = 0x14


#: Atomic opcodes that carry the 36-byte compare-and-swap extension (wire-format.md §9.2).
CSWAP_OPS = frozenset(range(AmoOp.CSWAP, AmoOp.CSWAP_GT + 1))


class AmoType(IntEnum):
    """Atomic data types (wire-format.md §10.2)."""

    INT8 = 0x00
    UINT8 = 0x01
    INT16 = 0x02
    UINT16 = 0x03
    INT32 = 0x04
    UINT32 = 0x05
    INT64 = 0x06
    UINT64 = 0x07
    INT128 = 0x08
    UINT128 = 0x09
    FLOAT = 0x0A
    DOUBLE = 0x0B
    FLOAT_COMPLEX = 0x0C
    DOUBLE_COMPLEX = 0x0D
    LONG_DOUBLE = 0x0E
    LONG_DOUBLE_COMPLEX = 0x0F
    BFLOAT16 = 0x10
    FP16 = 0x11


#: Opcodes followed by an atomic or compare-and-swap extension.
ATOMIC_OPCODES = frozenset(
    {SesOpcode.ATOMIC, SesOpcode.FETCHING_ATOMIC, SesOpcode.TSEND_ATOMIC, SesOpcode.TSEND_FETCH_ATOMIC}
)
#: Opcodes followed by the rendezvous extension.
RENDEZVOUS_OPCODES = frozenset({SesOpcode.RENDEZVOUS_SEND, SesOpcode.RENDEZVOUS_TSEND})
#: Opcodes whose restart token replaces ``buffer_offset`` / ``match_bits``.
DEFERRABLE_OPCODES = frozenset({SesOpcode.DEFERRABLE_SEND, SesOpcode.DEFERRABLE_TSEND})

# -- shared item lists ---------------------------------------------------------------------------

_HEAD: list[Item] = [
    R(2),
    F("opcode", 6, enum=SesOpcode),
    F("version", 2),
    F("flags", 6, enum=SesFlag, doc="DC IE REL HD EOM SOM"),
]
_LEN14: list[Item] = [R(2), F("request_length", 14)]
_JOB: list[Item] = [F("ri_generation", 8), F("job_id", 24), R(4), F("pid_on_fep", 12), R(4), F("resource_index", 12)]
_BUF: list[Item] = [F("buffer_offset", 64)]
_TOKENS: list[Item] = [F("src_restart_token", 32), F("dst_restart_token", 32)]
_INIT: list[Item] = [F("initiator", 32)]
_MATCH: list[Item] = [F("match_bits", 64, doc="memory key for RMA/atomics, tag for tagged sends")]
_HDATA: list[Item] = [F("header_data", 64)]
_MIDDLE: list[Item] = [R(16), R(2), F("payload_length", 14), F("message_offset", 32)]
_REQLEN: list[Item] = [F("request_length", 32)]

_RESP_HEAD = [F("list", 2), F("opcode", 6, enum=ResponseOpcode), F("version", 2), F("return_code", 6, enum=ReturnCode)]

# -- request layouts -----------------------------------------------------------------------------

STANDARD: dict[tuple[int, str], Layout] = {}
"""Standard request (§8.2) keyed by (SOM, token) with token in {"none", "buffer", "match"}."""
for _som in (0, 1):
    for _tok in ("none", "buffer", "match"):
        _items = _HEAD + [F("message_id", 16)] + _JOB
        _items += _TOKENS if _tok == "buffer" else _BUF
        _items += _INIT
        _items += _TOKENS if _tok == "match" else _MATCH
        _items += _HDATA if _som else _MIDDLE
        _items += _REQLEN
        _name = "ses_standard" + ("_som" if _som else "") + {"none": "", "buffer": "_deferrable", "match": "_rtr"}[_tok]
        _op = {"none": SesOpcode.SEND, "buffer": SesOpcode.DEFERRABLE_SEND, "match": SesOpcode.DEFERRABLE_RTR}[_tok]
        STANDARD[(_som, _tok)] = Layout(
            _name,
            _items,
            defaults={"opcode": _op, "flags": (SesFlag.SOM | SesFlag.EOM) if _som else 0},
            doc=f"SES standard request (§8.2), SOM = {_som}, restart token: {_tok}.",
        )

SMALL = Layout(
    "ses_small",
    _HEAD + _LEN14 + _JOB + _BUF,
    defaults={"opcode": SesOpcode.WRITE, "flags": SesFlag.SOM | SesFlag.EOM},
    doc="SES small (optimized non-matching) request (§8.3).",
)
MEDIUM = Layout(
    "ses_medium",
    _HEAD + _LEN14 + _JOB + _BUF + _INIT + _MATCH,
    defaults={"opcode": SesOpcode.SEND, "flags": SesFlag.SOM | SesFlag.EOM},
    doc="SES medium request, HD = 0: bytes 12–19 are the buffer offset (§8.4).",
)
MEDIUM_HD = Layout(
    "ses_medium_hd",
    _HEAD + _LEN14 + _JOB + _HDATA + _INIT + _MATCH,
    defaults={"opcode": SesOpcode.SEND, "flags": SesFlag.SOM | SesFlag.EOM | SesFlag.HD},
    doc="SES medium request, HD = 1: bytes 12–19 are header data (§8.4).",
)

# -- extensions ----------------------------------------------------------------------------------

_ATOMIC_ITEMS: list[Item] = [
    F("atomic_opcode", 8, enum=AmoOp),
    F("atomic_datatype", 8, enum=AmoType),
    F("sem_ctl", 8),
    R(8),
]
ATOMIC_EXT = Layout(
    "ses_atomic_ext",
    _ATOMIC_ITEMS,
    defaults={"atomic_datatype": AmoType.UINT64},
    doc="Atomic extension (§9.1); operands follow as payload.",
)
CSWAP_EXT = Layout(
    "ses_cswap_ext",
    _ATOMIC_ITEMS + [F("compare_value", 128), F("swap_value", 128)],
    defaults={"atomic_opcode": AmoOp.CSWAP, "atomic_datatype": AmoType.UINT64},
    doc="Compare-and-swap extension (§9.2); operands live here, payload empty.",
)
RENDEZVOUS_EXT = Layout(
    "ses_rendezvous_ext",
    [
        F("eager_length", 32),
        F("read_ri_generation", 8),
        F("read_pid_on_fep", 12),
        F("read_resource_index", 12),
        F("read_offset", 64),
        F("read_match_bits", 64),
    ],
    doc="Rendezvous extension (§9.3, provider layout of bytes 4–7 [Δ16]).",
)
SYNC_EXT = Layout("ses_sync_ext", [F("group", 16), F("count", 16)], doc="Sync extension (§9.4, provider only [Δ18]).")

# -- responses -----------------------------------------------------------------------------------

RESPONSE = Layout(
    "ses_response",
    _RESP_HEAD + [F("message_id", 16), F("ri_generation", 8), F("job_id", 24), F("modified_length", 32)],
    defaults={"opcode": ResponseOpcode.RESPONSE, "return_code": ReturnCode.OK},
    doc="SES response (§11.1).",
)
RESPONSE_DATA = Layout(
    "ses_response_data",
    _RESP_HEAD
    + [
        F("message_id", 16),
        R(8),
        F("job_id", 24),
        F("read_request_message_id", 16),
        R(2),
        F("payload_length", 14),
        F("modified_length", 32),
        F("message_offset", 32),
    ],
    defaults={"opcode": ResponseOpcode.RESPONSE_W_DATA, "return_code": ReturnCode.OK},
    doc="SES response with data (§11.2).",
)
SMALL_RESPONSE_DATA = Layout(
    "ses_small_response_data",
    _RESP_HEAD + [R(2), F("payload_length", 14), R(8), F("job_id", 24), F("original_request_psn", 32)],
    defaults={"opcode": ResponseOpcode.RESPONSE_W_DATA, "return_code": ReturnCode.OK},
    doc="SES small response with data (§11.3, provider layout [Δ15]).",
)

ALL_LAYOUTS: list[Layout] = [
    *STANDARD.values(),
    SMALL,
    MEDIUM,
    MEDIUM_HD,
    ATOMIC_EXT,
    CSWAP_EXT,
    RENDEZVOUS_EXT,
    SYNC_EXT,
    RESPONSE,
    RESPONSE_DATA,
    SMALL_RESPONSE_DATA,
]

#: Response opcodes each response header may carry (wire-format.md §12.4).
RESPONSE_OPCODES = {
    NextHeader.RESPONSE: frozenset({0, 1, 3}),
    NextHeader.RESPONSE_DATA: frozenset({2}),
    NextHeader.SMALL_RESPONSE_DATA: frozenset({2}),
}


def ses_layout(next_hdr: int, b0: int, b1: int) -> Layout | None:
    """The SES layout for PDS ``next_hdr`` given the header's first two bytes; None if reserved."""
    if next_hdr == NextHeader.STANDARD:
        op = b0 & 0x3F
        tok = "buffer" if op in DEFERRABLE_OPCODES else "match" if op == SesOpcode.DEFERRABLE_RTR else "none"
        return STANDARD[(b1 & 1, tok)]
    if next_hdr == NextHeader.SMALL:
        return SMALL
    if next_hdr == NextHeader.MEDIUM:
        return MEDIUM_HD if b1 & SesFlag.HD else MEDIUM
    if next_hdr == NextHeader.RESPONSE:
        return RESPONSE
    if next_hdr == NextHeader.RESPONSE_DATA:
        return RESPONSE_DATA
    if next_hdr == NextHeader.SMALL_RESPONSE_DATA:
        return SMALL_RESPONSE_DATA
    return None


def extension_layouts(opcode: int, data: bytes | bytearray | memoryview, offset: int) -> tuple[Layout, ...]:
    """Every extension header after a request with ``opcode`` whose extensions start at
    ``data[offset]``, in order: SYNC_ATOMIC carries the sync extension and then an atomic one
    (wire-format.md §8.5), the atomic opcodes one atomic or compare-and-swap extension."""
    if opcode == SesOpcode.SYNC_ATOMIC:
        nxt = offset + SYNC_EXT.size
        amo = extension_layout(SesOpcode.ATOMIC, data[nxt] if nxt < len(data) else None)
        return (SYNC_EXT, amo) if amo is not None else (SYNC_EXT,)
    ext = extension_layout(opcode, data[offset] if offset < len(data) else None)
    return (ext,) if ext is not None else ()


def extension_layout(opcode: int, next_byte: int | None) -> Layout | None:
    """The extension after a request with ``opcode``; ``next_byte`` is the first byte after it."""
    if opcode in ATOMIC_OPCODES:
        return CSWAP_EXT if next_byte is not None and next_byte in CSWAP_OPS else ATOMIC_EXT
    if opcode in RENDEZVOUS_OPCODES:
        return RENDEZVOUS_EXT
    if opcode == SesOpcode.SYNC_WRITE:
        return SYNC_EXT
    return None
