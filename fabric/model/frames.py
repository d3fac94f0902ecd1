"""The header bits the switch reads and rewrites in whole Ethernet frames.

A fabric link carries whole Ethernet II frames without FCS (architecture.md principle 3, real packets on
every wire), so every decision of the model is made on real header bits: DSCP and ECN in the IPv4
TOS byte, the TTL, the UDP ports (the source port is the UET entropy), the PDS/SES headers that
trimming keeps, and 802.1Qbb pause frames. Offsets come from the :mod:`uet.wire.net` layouts; the
per-hop rewrites (ECN → CE, TTL − 1) patch the IPv4 checksum incrementally (RFC 1624, eqn. 3),
trimming recomputes it with :func:`uet.wire.net.inet_checksum`.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final

from uet.errors import DecodeError
from uet.wire.net import (
    ETH_MIN_FRAME,
    ETHERNET,
    IPV4,
    PFC,
    PFC_DST_MAC,
    PFC_OPCODE,
    UDP,
    UET_IP_PROTO,
    UET_UDP_PORT,
    EtherType,
    inet_checksum,
)
from uet.wire.pds import NextHeader, PdsType, pds_layout
from uet.wire.ses import extension_layout, ses_layout
from uet.wire.tss import ENTROPY, TSS_TYPE, tss_layout

#: Classic 802.3x PAUSE opcode (all priorities share one timer).
PAUSE_OPCODE: Final = 0x0001
ETH_LEN: Final = ETHERNET.size
VLAN_TAG_LEN: Final = 4
# byte offsets inside the IPv4 header, from the one declaration in uet.wire.net
IP_TOS: Final = IPV4.field_offset["dscp"]
IP_LEN: Final = IPV4.field_offset["total_length"]
IP_TTL: Final = IPV4.field_offset["ttl"]
IP_PROTO: Final = IPV4.field_offset["protocol"]
IP_CSUM: Final = IPV4.field_offset["checksum"]
IP_SRC: Final = IPV4.field_offset["src"]
IP_DST: Final = IPV4.field_offset["dst"]
UDP_LEN: Final = UDP.field_offset["length"]
UDP_CSUM: Final = UDP.field_offset["checksum"]
_REQUEST_SES: Final = (NextHeader.SMALL, NextHeader.MEDIUM, NextHeader.STANDARD)


def l3_offset(frame: bytes | bytearray) -> tuple[int, int, int]:
    """``(ethertype, offset of the L3 header, PCP or -1)``, skipping one 802.1Q tag."""
    if len(frame) < ETH_LEN:
        raise DecodeError("ethernet", 0, f"frame of {len(frame)} bytes is shorter than 14")
    et = (frame[12] << 8) | frame[13]
    if et == EtherType.VLAN:
        if len(frame) < ETH_LEN + VLAN_TAG_LEN:
            raise DecodeError("vlan", ETH_LEN, "truncated 802.1Q tag")
        return (frame[16] << 8) | frame[17], ETH_LEN + VLAN_TAG_LEN, frame[14] >> 5
    return et, ETH_LEN, -1


def _csum_update(hc: int, old: int, new: int) -> int:
    """RFC 1624 eqn. 3: checksum after a 16-bit word changed from ``old`` to ``new``."""
    s = (~hc & 0xFFFF) + (~old & 0xFFFF) + new
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def rewrite_tos_ttl(frame: bytearray, ip: int, tos: int, ttl: int) -> None:
    """Set the TOS byte and TTL of the IPv4 header at ``ip``, patching its checksum."""
    hc = (frame[ip + IP_CSUM] << 8) | frame[ip + IP_CSUM + 1]
    old0 = (frame[ip] << 8) | frame[ip + IP_TOS]
    new0 = (frame[ip] << 8) | tos
    old1 = (frame[ip + IP_TTL] << 8) | frame[ip + IP_PROTO]
    new1 = (ttl << 8) | frame[ip + IP_PROTO]
    hc = _csum_update(_csum_update(hc, old0, new0), old1, new1)
    frame[ip + IP_TOS] = tos
    frame[ip + IP_TTL] = ttl
    frame[ip + IP_CSUM] = hc >> 8
    frame[ip + IP_CSUM + 1] = hc & 0xFF


def forward_rewrite(frame: bytearray, ip: int, hops: int) -> None:
    """The per-hop rewrite of ``hops`` switches in one pass: TTL − ``hops``, checksum patched.

    Each hop takes one from the TTL (a switch drops TTL ≤ 1 first, so the TTL stays ≥ 1); RFC
    1624 eqn. 3's term ~m + m' for the TTL/protocol word m → m − 0x100 is the constant 0xFEFF.
    One's-complement addition is associative and its end-around-carry sums of these terms are
    never zero, so adding ``hops`` × 0xFEFF once gives the checksum ``hops`` successive
    :func:`rewrite_tos_ttl` calls would (the TOS changes, ECN marks, are written at once with
    :func:`rewrite_tos_ttl` and may come in between): the switch defers the TTL to where the
    frame leaves the switches (``Packet.hops``). ``tests/test_fabric_frames.py`` proves the two
    give the same bytes.
    """
    if not hops:
        return
    hc = (frame[ip + IP_CSUM] << 8) | frame[ip + IP_CSUM + 1]
    s = (~hc & 0xFFFF) + 0xFEFF * hops
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    frame[ip + IP_TTL] -= hops
    hc = ~s & 0xFFFF
    frame[ip + IP_CSUM] = hc >> 8
    frame[ip + IP_CSUM + 1] = hc & 0xFF


def ipv4_checksum_ok(frame: bytes | bytearray, ip: int) -> bool:
    """True when the IPv4 header at ``ip`` has a valid checksum."""
    ihl = (frame[ip] & 15) * 4
    return inet_checksum(bytes(frame[ip : ip + ihl])) == 0


def flow_tuple(frame: bytes | bytearray, ip: int) -> bytes:
    """The 13 bytes ECMP hashes (§8.7): source IP, destination IP, protocol, source and
    destination port. For UET directly over IP the entropy header's 16-bit entropy stands in for
    the source port and the destination port is 0 (**decision**: keeps the tuple 13 bytes)."""
    proto = frame[ip + IP_PROTO]
    l4 = ip + (frame[ip] & 15) * 4
    tup = bytearray(frame[ip + IP_SRC : ip + IP_DST + 4])  # built in place: one copy out at the end
    tup.append(proto)
    if proto == 17:
        tup += frame[l4 : l4 + 4]
    elif proto == UET_IP_PROTO:
        tup += frame[l4 : l4 + 2]
        tup += b"\0\0"
    else:
        tup += b"\0\0\0\0"
    return bytes(tup)


#: a C function as a Final name (the compiled build keeps it in a C static)
crc32: Final = zlib.crc32
#: each byte value as a one-byte ``bytes`` (the protocol byte of :func:`flow_crc`)
_BYTE: Final = tuple(bytes((i,)) for i in range(256))
#: an IPv4 header and the ports behind it, from the header's first byte, in one call: version and
#: IHL, protocol, both addresses as one 64-bit int, both ports as one 32-bit int
_FLOW_UNPACK: Final = struct.Struct("!B8xB2xQI").unpack_from
#: the flow tuple of a UDP packet from those: addresses, protocol, ports
_FLOW_PACK: Final = struct.Struct("!QBI").pack


def flow_crc(frame: bytes | bytearray, ip: int) -> int:
    """``zlib.crc32(flow_tuple(frame, ip))``, fed from the frame's own bytes in turn (CRC-32 is
    streaming) without building the tuple: what ECMP hashes once per packet
    (``LoadBalancer.choose_pkt``, ``Switch._arrive``).

    A UDP packet without IP options, every UET packet of a run, has its tuple built in one piece
    from one unpack of the header and hashed in one call: a slice or a byte of a bytearray costs
    the compiled build a generic call each, and this ran once per packet (about 3,900
    instructions a packet at the first switch that hashes it, issue 28)."""
    if len(frame) >= ip + 24:
        h: tuple[int, int, int, int] = _FLOW_UNPACK(frame, ip)
        if h[0] & 15 == 5 and h[1] == 17:
            return crc32(_FLOW_PACK(h[2], 17, h[3]))
    proto = frame[ip + IP_PROTO]
    c = crc32(_BYTE[proto], crc32(frame[ip + IP_SRC : ip + IP_DST + 4]))
    l4 = ip + (frame[ip] & 15) * 4
    if proto == 17:
        return crc32(frame[l4 : l4 + 4], c)
    if proto == UET_IP_PROTO:
        return crc32(b"\0\0", crc32(frame[l4 : l4 + 2], c))
    return crc32(b"\0\0\0\0", c)


#: :func:`flow_key`'s tables, built on first use (:func:`_flow_tables`): for each byte of a UDP
#: flow tuple but the protocol (source and destination address, source and destination port),
#: 256 entries, one per value of that byte, flat (position × 256 + value); then, at index 3,072,
#: the key of the tuple whose bytes are all 0 but the protocol, 17
_FLOW_TABLES: Final[list[int]] = []
#: an IPv4 header's first byte, protocol, addresses and ports as four 32-bit ints, in one call
_FLOW_UNPACK32: Final = struct.Struct("!B8xB2xIII").unpack_from
#: bytes of the flow tuple (13) and of the seed behind it (4) that the ECMP hash covers
_TUPLE_LEN: Final = 13
_SEED_LEN: Final = 4


def _flow_tables() -> list[int]:
    """:data:`_FLOW_TABLES`, built from :func:`zlib.crc32` itself: CRC-32 is affine over GF(2)
    for messages of one length (``crc(a ^ b) == crc(a) ^ crc(b) ^ crc(0)``), so the key of a
    tuple is the all-zero tuple's key XOR one entry per byte, and the entry of a byte value is
    the XOR of the entries of its bits (8 CRCs per byte position, not 256)."""
    t = _FLOW_TABLES
    if t:
        return t
    n = _TUPLE_LEN + _SEED_LEN
    zero = bytearray(n)
    zero[8] = 17
    base = crc32(zero)
    out = [0] * (12 * 256 + 1)
    for k, pos in enumerate((0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12)):
        row = k * 256
        for bit in range(8):
            m = bytearray(zero)
            m[pos] = 1 << bit
            out[row + (1 << bit)] = crc32(m) ^ base
        for v in range(3, 256):
            low = v & -v
            if v != low:
                out[row + v] = out[row + low] ^ out[row + (v ^ low)]
    out[12 * 256] = base
    t.extend(out)
    return t


def flow_key(frame: bytes | bytearray, ip: int) -> int:
    """The flow tuple's share of the ECMP hash: ``crc32(flow_tuple(frame, ip) + bytes(4))``, so
    that ``crc32(tuple + seed) == flow_key(...) ^ seed_key(seed)`` for every 4-byte seed (CRC-32
    is affine for messages of one length: the tuple's bytes and the seed's add up by XOR). A
    packet's key is computed once, at the first switch that hashes it, and each switch then
    hashes it with one XOR (``Switch._arrive``, ``LoadBalancer.choose_pkt``), where a CRC call
    per hop continued the tuple's CRC with the switch's seed.

    A UDP packet without IP options (every UET packet of a run) is hashed from one unpack of its
    header with tables (:data:`_FLOW_TABLES`): twelve look-ups of machine integers in the
    compiled build, where packing the tuple and hashing it was two calls and a bytes object (a
    slice or a byte of a bytearray costs that build a generic call each: about 3,300
    instructions a packet for :func:`flow_crc`, issue 28). Any other packet: :func:`flow_crc`,
    continued over the four zero bytes. ``tests/test_fabric_lb.py`` checks both against
    :func:`zlib.crc32` of the tuple and the seed."""
    if len(frame) >= ip + 24:
        h: tuple[int, int, int, int, int] = _FLOW_UNPACK32(frame, ip)
        if h[0] & 15 == 5 and h[1] == 17:
            return flow_key_udp(h[2], h[3], h[4])
    return crc32(bytes(_SEED_LEN), flow_crc(frame, ip))


def flow_key_udp(s: int, d: int, p: int) -> int:
    """:func:`flow_key` of a UDP packet from source address ``s``, destination address ``d``
    and both ports ``p`` (source port in the high 16 bits), each read as a 32-bit integer: the
    tables' twelve look-ups (``Switch._process`` reads those fields with the rest of the IPv4
    header, in one call)."""
    t = _FLOW_TABLES if _FLOW_TABLES else _flow_tables()
    return (
        t[3072]
        ^ t[s >> 24]
        ^ t[256 + ((s >> 16) & 0xFF)]
        ^ t[512 + ((s >> 8) & 0xFF)]
        ^ t[768 + (s & 0xFF)]
        ^ t[1024 + (d >> 24)]
        ^ t[1280 + ((d >> 16) & 0xFF)]
        ^ t[1536 + ((d >> 8) & 0xFF)]
        ^ t[1792 + (d & 0xFF)]
        ^ t[2048 + (p >> 24)]
        ^ t[2304 + ((p >> 16) & 0xFF)]
        ^ t[2560 + ((p >> 8) & 0xFF)]
        ^ t[2816 + (p & 0xFF)]
    )


def seed_key(seed: bytes) -> int:
    """A 4-byte ECMP seed's share of the hash: ``crc32(tuple + seed) == flow_key(...) ^
    seed_key(seed)`` (:func:`flow_key`; the all-zero message's CRC counted once)."""
    if len(seed) != _SEED_LEN:
        raise ValueError(f"an ECMP seed is {_SEED_LEN} bytes, not {len(seed)}")
    n = _TUPLE_LEN + _SEED_LEN
    return crc32(bytes(_TUPLE_LEN) + seed) ^ crc32(bytes(n))


def is_uet(frame: bytes | bytearray, ip: int) -> bool:
    """UET packet: UDP to port 4793 or IP protocol 253 (§8.4 rule 1)."""
    proto = frame[ip + IP_PROTO]
    if proto == UET_IP_PROTO:
        return True
    if proto != 17:
        return False
    l4 = ip + (frame[ip] & 15) * 4
    return len(frame) >= l4 + 4 and ((frame[l4 + 2] << 8) | frame[l4 + 3]) == UET_UDP_PORT


def uet_header_len(frame: bytes | bytearray, ip: int) -> int:
    """Bytes of the IP packet at ``ip`` up to the end of the UET header stack as parsed.

    IP header, UDP (or the entropy header), then a TSS header (behind which the PDS is ciphertext,
    so parsing stops: behaviour.md §3.5), or the PDS header, the SES header its ``next_hdr`` names
    and the SES extension the opcode implies (wire-format.md §2). Parsing stops at anything
    reserved or truncated; the result never exceeds the packet.
    """
    end = len(frame)
    off = ip + (frame[ip] & 15) * 4
    off += UDP.size if frame[ip + IP_PROTO] == 17 else ENTROPY.size
    if off + 2 > end:
        return min(off, end) - ip
    b0 = frame[off]
    typ = b0 >> 3
    if typ == TSS_TYPE:
        return min(off + tss_layout(b0).size, end) - ip
    nh = ((b0 & 7) << 1) | (frame[off + 1] >> 7)
    lay = pds_layout(typ, frame[off + 1] & 0x7F, frame[off + 12] if off + 12 < end else None)
    if lay is None:
        return off - ip
    off += lay.size
    if typ == PdsType.CONTROL or nh == NextHeader.NONE or off + 2 > end:
        return min(off, end) - ip
    ses = ses_layout(nh, frame[off], frame[off + 1])
    if ses is None:
        return off - ip
    opcode = frame[off] & 0x3F
    off += ses.size
    if nh in _REQUEST_SES:
        ext = extension_layout(opcode, frame[off] if off < end else None)
        if ext is not None:
            off += ext.size
    return min(off, end) - ip


def trim(frame: bytes | bytearray, ip: int, keep: int, dscp: int) -> bytearray:
    """The trimmed copy of a UET frame (§8.4 decision 2–3, behaviour.md §3.2).

    Keeps the link-layer header and the first ``keep`` bytes of the IP packet; sets the IPv4 total
    length, the UDP length (UDP checksum 0: the payload it covered is gone), DSCP := ``dscp`` unless
    the packet already carries a trimmed DSCP (5 or 7), leaves ECN unchanged and recomputes the IPv4
    checksum. PDS/SES bytes are untouched: the receiver knows the packet by its DSCP.
    """
    total = (frame[ip + IP_LEN] << 8) | frame[ip + IP_LEN + 1]
    keep = min(keep, total, len(frame) - ip)
    out = bytearray(frame[: ip + keep])
    out[ip + IP_LEN] = keep >> 8
    out[ip + IP_LEN + 1] = keep & 0xFF
    tos = out[ip + IP_TOS]
    if (tos >> 2) not in (5, 7):
        out[ip + IP_TOS] = (dscp << 2) | (tos & 3)
    ihl = (out[ip] & 15) * 4
    if out[ip + IP_PROTO] == 17:
        ulen = keep - ihl
        u = ip + ihl
        out[u + UDP_LEN] = ulen >> 8
        out[u + UDP_LEN + 1] = ulen & 0xFF
        out[u + UDP_CSUM] = 0
        out[u + UDP_CSUM + 1] = 0
    out[ip + IP_CSUM] = 0
    out[ip + IP_CSUM + 1] = 0
    c = inet_checksum(bytes(out[ip : ip + ihl]))
    out[ip + IP_CSUM] = c >> 8
    out[ip + IP_CSUM + 1] = c & 0xFF
    return out


def pfc_frame(src_mac: bytes, quanta: dict[int, int]) -> bytes:
    """An 802.1Qbb PFC frame (§8.5) from ``src_mac``: class-enable bit i and Time[i] for each
    ``priority: quanta`` item; 0 quanta means XON. Padded with zeros to the 60-byte minimum."""
    enable = 0
    times = [0] * 8
    for prio, q in quanta.items():
        enable |= 1 << prio
        times[prio] = q
    body = PFC.encode(PFC.make(opcode=PFC_OPCODE, class_enable=enable, **{f"quanta{i}": times[i] for i in range(8)}))
    head = ETHERNET.encode(ETHERNET.make(dst=PFC_DST_MAC, src=bytes(src_mac), ethertype=EtherType.MAC_CONTROL))
    frame = head + body
    return frame + bytes(ETH_MIN_FRAME - len(frame))


def parse_pause(frame: bytes | bytearray, off: int = ETH_LEN) -> dict[int, int] | None:
    """``{priority: quanta}`` of a PFC frame (enabled classes only), all eight priorities for a
    classic 802.3x PAUSE; None for other MAC-control opcodes. ``off`` is the body offset."""
    if len(frame) < off + 4:
        raise DecodeError("pfc", off, "truncated MAC control frame")
    opcode = (frame[off] << 8) | frame[off + 1]
    if opcode == PAUSE_OPCODE:
        q = (frame[off + 2] << 8) | frame[off + 3]
        return dict.fromkeys(range(8), q)
    if opcode != PFC_OPCODE:
        return None
    v = PFC.decode(frame, off)
    return {i: getattr(v, f"quanta{i}") for i in range(8) if v.class_enable & (1 << i)}


def ipv4_frame(
    src_ip: str,
    dst_ip: str,
    payload: bytes,
    *,
    sport: int = 0xC000,
    dport: int = UET_UDP_PORT,
    dscp: int = 0,
    ecn: int = 0,
    ttl: int = 64,
    src_mac: bytes = b"\x02\0\0\0\0\1",
    dst_mac: bytes = b"\x02\0\0\0\0\2",
    udp_checksum: bool = True,
) -> bytes:
    """Ethernet II + IPv4 (DF, no options) + UDP + ``payload``, checksums computed — the frame a
    fabric-link NIC sends (wire-format.md §1.1, §1.3), built by the one frame codec
    (:func:`uet.wire.frame.build_udp_frame`), left unpadded (the port model pads on the wire).
    ``payload`` is everything above UDP."""
    from uet.wire.frame import build_udp_frame
    from uet.wire.net import ip_bytes

    return build_udp_frame(
        payload,
        ip_bytes(src_ip),
        ip_bytes(dst_ip),
        sport=sport,
        dport=dport,
        dscp=dscp,
        ecn=ecn,
        ttl=ttl,
        src_mac=src_mac,
        dst_mac=dst_mac,
        udp_checksum=udp_checksum,
        pad=False,
    )
