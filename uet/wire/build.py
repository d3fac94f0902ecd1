"""Frames built around UET bytes, with correct checksums: IPv4/IPv6 packets (UDP or IP protocol
253 with the entropy header), Ethernet II frames, PFC MAC-control frames, and the default DSCP of a
UET packet (wire-format.md §1.3). :mod:`uet.wire.capture` decodes what these build.
"""

from __future__ import annotations

from typing import Any

from uet.wire import net, tss
from uet.wire.pds import PdsType

__all__ = [
    "DSCP_CONTROL",
    "build_ethernet",
    "build_frame",
    "build_ip_packet",
    "build_pfc_frame",
    "build_udp_ipv4",
    "default_dscp",
]


#: DSCP of ACK, NACK and control packets in the reference provider (wire-format.md §1.3): EF.
DSCP_CONTROL = 46
_CONTROL_TYPES = frozenset(
    {PdsType.ACK, PdsType.ACK_CC, PdsType.ACK_CCX, PdsType.NACK, PdsType.NACK_CCX, PdsType.CONTROL}
)


def default_dscp(uet: bytes | bytearray | memoryview, *, over_ip: bool = False) -> int:
    """DSCP for a UET packet per wire-format.md §1.3: 46 (EF) for ACK/NACK/control, else 0.

    A TSS packet hides its PDS type; it gets 0 (callers that know better pass ``dscp``)."""
    i = 4 if over_ip else 0
    if len(uet) <= i:
        return 0
    t = uet[i] >> 3
    return DSCP_CONTROL if t in _CONTROL_TYPES else 0


def build_ip_packet(
    uet: bytes | bytearray | memoryview,
    src: str,
    dst: str,
    *,
    entropy: int,
    encap: str = "udp",
    dport: int = net.UET_UDP_PORT,
    dscp: int | None = None,
    ecn: int = net.Ecn.NOT_ECT,
    ttl: int = 64,
    identification: int = 0,
    ip_proto: int = net.UET_IP_PROTO,
    udp_checksum: bool = True,
) -> bytes:
    """An IPv4 or IPv6 packet (by the address family of ``src``) carrying ``uet``.

    ``encap="udp"``: UDP with source port = ``entropy`` and destination ``dport`` (§1.1).
    ``encap="ip"``: IP protocol ``ip_proto`` with the 4-byte entropy header first (§1.2).
    ``dscp=None`` picks the provider's default from the PDS type (:func:`default_dscp`); IPv4
    gets DF, ID ``identification``, the header checksum and (unless ``udp_checksum=False``) the
    UDP checksum (§1.3).
    """
    uet = bytes(uet)
    if dscp is None:
        dscp = default_dscp(uet, over_ip=False)
    s, d = net.ip_bytes(src), net.ip_bytes(dst)
    if len(s) != len(d):
        raise ValueError("source and destination addresses of different families")
    proto: int
    if encap == "udp":
        proto = net.IpProto.UDP
        udp = bytearray(net.UDP.size)
        net.UDP.pack_into(udp, 0, (entropy & 0xFFFF, dport, net.UDP.size + len(uet), 0))
        body = bytes(udp) + uet
        if udp_checksum:
            c = net.udp_checksum(s, d, body)
            body = body[:6] + c.to_bytes(2, "big") + body[8:]
    elif encap == "ip":
        proto = ip_proto
        body = tss.ENTROPY.encode((entropy & 0xFFFF,)) + uet
    else:
        raise ValueError(f"encap must be 'udp' or 'ip', not {encap!r}")
    if len(s) == 4:
        hdr = bytearray(net.IPV4.size)
        net.IPV4.pack_into(
            hdr,
            0,
            net.IPV4.make(
                dscp=dscp,
                ecn=ecn,
                total_length=net.IPV4.size + len(body),
                identification=identification,
                ttl=ttl,
                protocol=proto,
                src=s,
                dst=d,
            ),
        )
        hdr[10:12] = net.inet_checksum(hdr).to_bytes(2, "big")
        return bytes(hdr) + body
    hdr6 = net.IPV6.encode(
        net.IPV6.make(dscp=dscp, ecn=ecn, payload_length=len(body), next_header=proto, hop_limit=ttl, src=s, dst=d)
    )
    return hdr6 + body


def build_udp_ipv4(
    uet: bytes | bytearray | memoryview,
    src: str,
    dst: str,
    *,
    entropy: int,
    dport: int = net.UET_UDP_PORT,
    dscp: int | None = None,
    ecn: int = net.Ecn.NOT_ECT,
    ttl: int = 64,
    identification: int = 0,
) -> bytes:
    """IPv4 + UDP + ``uet`` with both checksums, entropy as the UDP source port (§1.1, §1.3)."""
    if ":" in src or ":" in dst:
        raise ValueError("build_udp_ipv4 needs IPv4 addresses")
    return build_ip_packet(
        uet, src, dst, entropy=entropy, dport=dport, dscp=dscp, ecn=ecn, ttl=ttl, identification=identification
    )


def build_ethernet(
    payload: bytes | bytearray | memoryview,
    *,
    src_mac: bytes = b"\x02\0\0\0\0\x01",
    dst_mac: bytes = b"\x02\0\0\0\0\x02",
    ethertype: int = net.EtherType.IPV4,
    vlan: tuple[int, int] | None = None,
) -> bytes:
    """An Ethernet II frame (no FCS) padded to the 60-byte minimum; ``vlan=(pcp, vid)`` adds an
    802.1Q tag."""
    if vlan is None:
        head = net.ETHERNET.encode((dst_mac, src_mac, ethertype))
    else:
        head = net.ETHERNET.encode((dst_mac, src_mac, net.EtherType.VLAN)) + net.VLAN.encode(
            (vlan[0], 0, vlan[1], ethertype)
        )
    frame = head + bytes(payload)
    if len(frame) < net.ETH_MIN_FRAME:
        frame += bytes(net.ETH_MIN_FRAME - len(frame))
    return frame


def build_frame(
    uet: bytes | bytearray | memoryview,
    src: str,
    dst: str,
    *,
    entropy: int,
    src_mac: bytes = b"\x02\0\0\0\0\x01",
    dst_mac: bytes = b"\x02\0\0\0\0\x02",
    vlan: tuple[int, int] | None = None,
    **ip: Any,
) -> bytes:
    """Ethernet + IPv4/IPv6 + UDP (or entropy header, ``encap="ip"``) + ``uet``; keyword
    arguments as :func:`build_ip_packet`."""
    packet = build_ip_packet(uet, src, dst, entropy=entropy, **ip)
    etype = net.EtherType.IPV6 if ":" in src else net.EtherType.IPV4
    return build_ethernet(packet, src_mac=src_mac, dst_mac=dst_mac, ethertype=etype, vlan=vlan)


def build_pfc_frame(quanta: dict[int, int], *, src_mac: bytes = b"\x02\0\0\0\0\x01") -> bytes:
    """A PFC pause frame (IEEE 802.1Qbb) pausing each priority in ``quanta`` (priority → pause
    time in 512-bit quanta; 0 resumes); the class-enable vector has those priorities' bits set."""
    q = [0] * 8
    enable = 0
    for prio, t in quanta.items():
        if not 0 <= prio < 8:
            raise ValueError(f"priority {prio} outside 0..7")
        q[prio] = t
        enable |= 1 << prio
    body = net.PFC.encode((net.PFC_OPCODE, enable, *q))
    return build_ethernet(body, src_mac=src_mac, dst_mac=net.PFC_DST_MAC, ethertype=net.EtherType.MAC_CONTROL)
