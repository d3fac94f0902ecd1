"""RoCEv2 headers: BTH and the RC extension headers, the CNP (spec/rocev2-and-fabric.md §2, §3, §5).

Declared once with the :class:`~uet.wire.layout.Layout` machinery, like the UET headers, so the
queue pair's data path gets precompiled ``struct`` codecs and the decoder gets construct-backed
error messages; property tests check both agree. The ICRC lives in :mod:`uet.wire.icrc`, the
header chain (opcode → extension headers → payload, pad, ICRC) in :mod:`uet.wire.rocepkt`.
"""

from __future__ import annotations

from uet.enums import IntEnum
from uet.wire.layout import F, Layout, R
from uet.wire.roceconst import DSCP_CNP as DSCP_CNP  # DSCPs (§1.4) and path MTUs (§1.1): offered here too
from uet.wire.roceconst import DSCP_DATA as DSCP_DATA
from uet.wire.roceconst import PMTUS as PMTUS

#: UDP destination port of RoCEv2 (§1.2).
ROCE_UDP_PORT = 4791
#: P_Key of the default full-membership partition (§2.1).
DEFAULT_PKEY = 0xFFFF
#: PSN space: 24 bits (§6.1).
PSN_BITS = 24
PSN_MOD = 1 << PSN_BITS
PSN_MASK = PSN_MOD - 1
#: QP numbers are 24 bits (§2.1).
QPN_MASK = (1 << 24) - 1


class OpCode(IntEnum):
    """BTH opcodes: RC (transport 000) and the RoCEv2 CNP (§2.2)."""

    SEND_FIRST = 0x00
    SEND_MIDDLE = 0x01
    SEND_LAST = 0x02
    SEND_LAST_WITH_IMMEDIATE = 0x03
    SEND_ONLY = 0x04
    SEND_ONLY_WITH_IMMEDIATE = 0x05
    RDMA_WRITE_FIRST = 0x06
    RDMA_WRITE_MIDDLE = 0x07
    RDMA_WRITE_LAST = 0x08
    RDMA_WRITE_LAST_WITH_IMMEDIATE = 0x09
    RDMA_WRITE_ONLY = 0x0A
    RDMA_WRITE_ONLY_WITH_IMMEDIATE = 0x0B
    RDMA_READ_REQUEST = 0x0C
    RDMA_READ_RESPONSE_FIRST = 0x0D
    RDMA_READ_RESPONSE_MIDDLE = 0x0E
    RDMA_READ_RESPONSE_LAST = 0x0F
    RDMA_READ_RESPONSE_ONLY = 0x10
    ACKNOWLEDGE = 0x11
    ATOMIC_ACKNOWLEDGE = 0x12
    COMPARE_SWAP = 0x13
    FETCH_ADD = 0x14
    SEND_LAST_WITH_INVALIDATE = 0x16
    SEND_ONLY_WITH_INVALIDATE = 0x17
    CNP = 0x81


class NakCode(IntEnum):
    """AETH syndromes of the NAK type (§3.1): 0x60 | code."""

    PSN_SEQUENCE_ERROR = 0x60
    INVALID_REQUEST = 0x61
    REMOTE_ACCESS_ERROR = 0x62
    REMOTE_OPERATIONAL_ERROR = 0x63
    INVALID_RD_REQUEST = 0x64


#: AETH syndrome of an ACK with "invalid" credits, what responders send (§3.1 Decision).
SYNDROME_ACK = 0x1F
#: RNR NAK syndromes are 0x20 | timer code (§3.1).
SYNDROME_RNR = 0x20

BTH = Layout(
    "bth",
    [
        F("opcode", 8, enum=OpCode),
        F("se", 1),
        F("m", 1),
        F("pad_cnt", 2),
        F("tver", 4),
        F("pkey", 16),
        F("fecn", 1),
        F("becn", 1),
        R(6),
        F("dest_qp", 24),
        F("ack_req", 1),
        R(7),
        F("psn", 24),
    ],
    defaults={"pkey": DEFAULT_PKEY},
    doc="Base Transport Header (§2.1): 12 bytes.",
)
RETH = Layout(
    "reth",
    [F("va", 64), F("rkey", 32), F("dma_len", 32)],
    doc="RDMA extended transport header (§3): virtual address, R_Key, DMA length of the whole message.",
)
AETH = Layout(
    "aeth",
    [F("syndrome", 8), F("msn", 24)],
    defaults={"syndrome": SYNDROME_ACK},
    doc="ACK extended transport header (§3, §3.1): syndrome and message sequence number.",
)
ATOMIC_ETH = Layout(
    "atomic_eth",
    [F("va", 64), F("rkey", 32), F("swap_add", 64), F("compare", 64)],
    doc="Atomic extended transport header (§3): 28 bytes; the address must be 8-byte aligned.",
)
ATOMIC_ACK_ETH = Layout(
    "atomic_ack_eth",
    [F("orig", 64)],
    doc="Atomic acknowledge extended transport header (§3): the original remote data.",
)
IMMDT = Layout("immdt", [F("imm", 32)], doc="Immediate data (§3), delivered to the receive completion.")
IETH = Layout("ieth", [F("rkey", 32)], doc="Invalidate extended transport header (§3): the R_Key to invalidate.")
CNP = Layout(
    "cnp",
    [*BTH.items, R(64), R(64)],
    defaults={"opcode": OpCode.CNP, "pkey": DEFAULT_PKEY, "becn": 1},
    doc="RoCEv2 Congestion Notification Packet (§5.1): BTH with opcode 0x81 and BECN set, then 16 "
    "reserved zero bytes (the ICRC follows).",
)

ALL_LAYOUTS = [BTH, RETH, AETH, ATOMIC_ETH, ATOMIC_ACK_ETH, IMMDT, IETH, CNP]

_O = OpCode
#: Extension headers after BTH, in wire order, per opcode (§2.2).
EXTENSIONS: dict[int, tuple[Layout, ...]] = {
    _O.SEND_FIRST: (),
    _O.SEND_MIDDLE: (),
    _O.SEND_LAST: (),
    _O.SEND_LAST_WITH_IMMEDIATE: (IMMDT,),
    _O.SEND_ONLY: (),
    _O.SEND_ONLY_WITH_IMMEDIATE: (IMMDT,),
    _O.RDMA_WRITE_FIRST: (RETH,),
    _O.RDMA_WRITE_MIDDLE: (),
    _O.RDMA_WRITE_LAST: (),
    _O.RDMA_WRITE_LAST_WITH_IMMEDIATE: (IMMDT,),
    _O.RDMA_WRITE_ONLY: (RETH,),
    _O.RDMA_WRITE_ONLY_WITH_IMMEDIATE: (RETH, IMMDT),
    _O.RDMA_READ_REQUEST: (RETH,),
    _O.RDMA_READ_RESPONSE_FIRST: (AETH,),
    _O.RDMA_READ_RESPONSE_MIDDLE: (),
    _O.RDMA_READ_RESPONSE_LAST: (AETH,),
    _O.RDMA_READ_RESPONSE_ONLY: (AETH,),
    _O.ACKNOWLEDGE: (AETH,),
    _O.ATOMIC_ACKNOWLEDGE: (AETH, ATOMIC_ACK_ETH),
    _O.COMPARE_SWAP: (ATOMIC_ETH,),
    _O.FETCH_ADD: (ATOMIC_ETH,),
    _O.SEND_LAST_WITH_INVALIDATE: (IETH,),
    _O.SEND_ONLY_WITH_INVALIDATE: (IETH,),
}
#: Opcodes that carry a payload (§2.2 "Payload" column).
WITH_PAYLOAD = frozenset(
    {
        *range(_O.SEND_FIRST, _O.RDMA_WRITE_ONLY_WITH_IMMEDIATE + 1),
        _O.RDMA_READ_RESPONSE_FIRST,
        _O.RDMA_READ_RESPONSE_MIDDLE,
        _O.RDMA_READ_RESPONSE_LAST,
        _O.RDMA_READ_RESPONSE_ONLY,
        _O.SEND_LAST_WITH_INVALIDATE,
        _O.SEND_ONLY_WITH_INVALIDATE,
    }
)


def psn_diff(a: int, b: int) -> int:
    """(a − b) mod 2^24 as a signed 24-bit number: > 0 when ``a`` is after ``b`` (§6.1)."""
    d = (a - b) & PSN_MASK
    return d - PSN_MOD if d & 0x800000 else d


def psn_add(a: int, n: int) -> int:
    """``a + n`` in the 24-bit PSN space (§6.1)."""
    return (a + n) & PSN_MASK


def pad_count(payload_len: int) -> int:
    """BTH.PadCnt: zero bytes that make the payload a multiple of 4 (§2.1)."""
    return -payload_len & 3


def rnr_timer_ns(code: int) -> int:
    """Minimum RNR wait for an RNR NAK timer code, in ns (§3.1 table)."""
    return _RNR_US[code & 0x1F] * 1000


_RNR_US = (
    655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
    2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
    163840, 245760, 327680, 491520,
)  # fmt: skip


def flow_label(local_qpn: int, remote_qpn: int) -> int:
    """The Linux RDMA core's 20-bit flow label for a QP pair, symmetric in the two QPNs (§1.2)."""
    v = (local_qpn * remote_qpn) & 0xFFFFFFFFFFFFFFFF
    v ^= v >> 20
    v ^= v >> 40
    return v & 0xFFFFF


def entropy_port(local_qpn: int, remote_qpn: int) -> int:
    """UDP source port folded from the flow label, in 0xC000–0xFFFF (§1.2 Decision)."""
    fl = flow_label(local_qpn, remote_qpn)
    return ((fl & 0x3FFF) ^ (fl >> 14)) | 0xC000
