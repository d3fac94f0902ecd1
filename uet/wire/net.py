"""Frames a fabric link carries: Ethernet II, 802.1Q, IPv4, IPv6, UDP, PFC; Linux cooked capture.

Declared with the same :class:`~uet.wire.layout.Layout` machinery as the UET headers, so the
fabric data path gets precompiled codecs and the decoder gets construct-backed error messages.
"""

from __future__ import annotations

# _socket, not socket: socket.py builds four IntEnums at import (with selectors, about 9 M
# instructions of a one-flow uet-sim run's start-up), and only these four names are used here
from _socket import AF_INET, AF_INET6, inet_ntop, inet_pton

from uet.enums import IntEnum
from uet.wire.layout import F, Layout, R, Raw

#: UDP destination port of UET (wire-format.md §1.1 [Δ1]).
UET_UDP_PORT = 4793
#: UDP destination port of RoCEv2.
ROCE_UDP_PORT = 4791
#: IP protocol number for UET directly over IP (wire-format.md §1.2 [Δ2]).
UET_IP_PROTO = 253
#: PFC MAC-control destination address (IEEE 802.1Qbb).
PFC_DST_MAC = bytes.fromhex("0180c2000001")


class EtherType(IntEnum):
    IPV4 = 0x0800
    ARP = 0x0806
    VLAN = 0x8100
    IPV6 = 0x86DD
    MAC_CONTROL = 0x8808


class IpProto(IntEnum):
    UDP = 17
    UET = UET_IP_PROTO


class Ecn(IntEnum):
    """The two ECN bits of the IP TOS / traffic-class byte (RFC 3168)."""

    NOT_ECT = 0
    ECT1 = 1
    ECT0 = 2
    CE = 3


ETHERNET = Layout(
    "ethernet",
    [Raw("dst", 6), Raw("src", 6), F("ethertype", 16, enum=EtherType)],
    defaults={"ethertype": EtherType.IPV4},
    doc="Ethernet II header (14 bytes).",
)
VLAN = Layout(
    "vlan",
    [F("pcp", 3), F("dei", 1), F("vid", 12), F("ethertype", 16, enum=EtherType)],
    defaults={"ethertype": EtherType.IPV4},
    doc="The 4 bytes after an 802.1Q TPID: tag control and the inner EtherType.",
)
IPV4 = Layout(
    "ipv4",
    [
        F("version", 4),
        F("ihl", 4),
        F("dscp", 6),
        F("ecn", 2, enum=Ecn),
        F("total_length", 16),
        F("identification", 16),
        R(1),
        F("df", 1),
        F("mf", 1),
        F("frag_offset", 13),
        F("ttl", 8),
        F("protocol", 8, enum=IpProto),
        F("checksum", 16),
        Raw("src", 4),
        Raw("dst", 4),
    ],
    defaults={"version": 4, "ihl": 5, "df": 1, "ttl": 64, "protocol": IpProto.UDP},
    doc="IPv4 header without options (20 bytes); options are skipped using IHL.",
)
IPV6 = Layout(
    "ipv6",
    [
        F("version", 4),
        F("dscp", 6),
        F("ecn", 2, enum=Ecn),
        F("flow_label", 20),
        F("payload_length", 16),
        F("next_header", 8, enum=IpProto),
        F("hop_limit", 8),
        Raw("src", 16),
        Raw("dst", 16),
    ],
    defaults={"version": 6, "hop_limit": 64, "next_header": IpProto.UDP},
    doc="IPv6 fixed header (40 bytes).",
)
UDP = Layout(
    "udp",
    [F("src_port", 16), F("dst_port", 16), F("length", 16), F("checksum", 16)],
    defaults={"dst_port": UET_UDP_PORT},
    doc="UDP header (8 bytes).",
)
PFC = Layout(
    "pfc",
    [F("opcode", 16), R(8), F("class_enable", 8), *[F(f"quanta{i}", 16) for i in range(8)]],
    defaults={"opcode": 0x0101},
    doc="IEEE 802.1Qbb priority-based flow control frame body after the EtherType 0x8808 "
    "(opcode 0x0101, class-enable vector, eight pause times in 512-bit quanta); the frame is "
    "padded with zeros to the 60-byte Ethernet minimum.",
)
SLL = Layout(
    "sll",
    [F("packet_type", 16), F("arphrd", 16), F("addr_len", 16), Raw("addr", 8), F("protocol", 16, enum=EtherType)],
    doc="Linux cooked capture header v1 (pcap link type 113).",
)
SLL2 = Layout(
    "sll2",
    [
        F("protocol", 16, enum=EtherType),
        R(16),
        F("ifindex", 32),
        F("arphrd", 16),
        F("packet_type", 8),
        F("addr_len", 8),
        Raw("addr", 8),
    ],
    doc="Linux cooked capture header v2 (pcap link type 276).",
)

ALL_LAYOUTS = [ETHERNET, VLAN, IPV4, IPV6, UDP, PFC, SLL, SLL2]

PFC_OPCODE = 0x0101
#: Minimum Ethernet frame without FCS.
ETH_MIN_FRAME = 60


def inet_checksum(data: bytes | bytearray | memoryview, initial: int = 0) -> int:
    """RFC 1071 Internet checksum of ``data`` (one's complement of the one's-complement sum).

    The one's-complement sum of 16-bit words equals the whole buffer read as one big-endian
    integer modulo 0xFFFF (because 2^16 ≡ 1 mod 0xFFFF), with 0xFFFF standing for a non-zero
    multiple; ``int.from_bytes`` and ``%`` do that in C, far faster than a word loop.
    """
    mv = memoryview(data).cast("B")
    n = len(mv)
    s = int.from_bytes(mv, "big") if n else 0
    if n & 1:
        s <<= 8  # pad the odd byte on the right
    s += initial
    r = mod_ffff(s)
    if r == 0 and s:
        r = 0xFFFF
    return (~r) & 0xFFFF


_LOW: dict[int, int] = {}  # bit count → its mask, for mod_ffff


def mod_ffff(x: int) -> int:
    """``x % 0xFFFF`` for a non-negative ``x`` of any size, about twice as fast on a datagram-sized
    integer: since 2^16k ≡ 1 (mod 0xFFFF), adding the high half to the low half (cut at a multiple
    of 16 bits) keeps the remainder, and shifts and masks are cheaper than a long division."""
    n = x.bit_length()
    while n > 512:
        half = (n >> 5) << 4
        mask = _LOW.get(half)
        if mask is None:
            if len(_LOW) >= 4096:  # bounded: one entry per size seen
                _LOW.clear()
            mask = _LOW[half] = (1 << half) - 1
        x = (x >> half) + (x & mask)
        n = x.bit_length()
    return x % 0xFFFF


def udp_checksum(src: bytes, dst: bytes, udp: bytes | bytearray | memoryview) -> int:
    """UDP checksum with the IPv4 or IPv6 pseudo-header; 0 is sent as 0xFFFF (RFC 768)."""
    if len(src) == 4:
        pseudo = src + dst + bytes((0, 17)) + len(udp).to_bytes(2, "big")
    else:
        pseudo = src + dst + len(udp).to_bytes(4, "big") + b"\0\0\0\x11"
    c = inet_checksum(bytes(pseudo) + bytes(udp))
    return c or 0xFFFF


def ip_bytes(addr: str) -> bytes:
    """Packed bytes of an IPv4 or IPv6 address string."""
    return inet_pton(AF_INET6 if ":" in addr else AF_INET, addr)


def as_address(addr: bytes | bytearray | str) -> bytes:
    """A 4- or 16-byte packed IP address from bytes or text."""
    if type(addr) is bytes and (len(addr) == 4 or len(addr) == 16):
        return addr
    if isinstance(addr, str):
        return ip_bytes(addr)
    if len(addr) not in (4, 16):
        raise ValueError("an IP address is 4 (IPv4) or 16 (IPv6) bytes")
    return bytes(addr)


def ip_str(raw: bytes) -> str:
    """Text form of a packed 4- or 16-byte address."""
    return inet_ntop(AF_INET if len(raw) == 4 else AF_INET6, raw)


def mac_str(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)
