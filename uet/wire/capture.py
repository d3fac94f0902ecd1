"""Captured frames around the UET header chain: :func:`parse_frame` and :class:`Frame`.

:func:`parse_frame` adds the link and network layers (Ethernet with up to two VLAN tags, raw IPv4/IPv6,
Linux cooked capture v1/v2, BSD loopback) to :func:`uet.wire.chain.parse_uet`, finds UET by UDP port
or IP protocol 253, decodes PFC MAC-control frames and hands RoCEv2 (UDP 4791) to
:func:`uet.wire.rocepkt.parse_roce`.

Choices where the spec notes are silent (documented here so the decoder's output can be read):

* **UDP ports.** A UDP datagram is UET when its destination port *or* its source port is the UET
  port (4793 by default): the spec uses 4793 as the destination in both directions (§1.1), and a
  host-stack endpoint bound to 4793 also sends from it. The destination is checked first.
* **Reserved bits** of the UET headers that are not zero are a warning each (as Wireshark's expert
  info flags them), and appear as ``reserved_<bit>`` fields in :meth:`Frame.to_dict`.
* **Checksums.** A wrong IPv4 header checksum or UDP checksum is a warning on the :class:`Frame`,
  not an error; a UDP checksum of 0 (none, legal on IPv4) is not checked.
* **Error offsets** are absolute positions in the buffer handed in (the UET bytes start at
  ``offset``); for a truncated header the offset is where the bytes ran out.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from uet.enums import IntEnum
from uet.errors import DecodeError, UetError
from uet.wire import crc as crc_mod
from uet.wire import net
from uet.wire.chain import Decryptor, UetPacket, enum_name, fields_dict, parse_uet
from uet.wire.layout import Layout
from uet.wire.rocepkt import RocePacket, parse_roce
from uet.wire.tss import ENTROPY

__all__ = [
    "Frame",
    "LinkType",
    "parse_frame",
    "partial_udp_checksum",
]


class LinkType(IntEnum):
    """pcap link types the frame decoder understands (tcpdump.org link-layer header types)."""

    NULL = 0
    ETHERNET = 1
    RAW_BSD = 12
    RAW_OPENBSD = 14
    RAW = 101
    LOOP = 108
    LINUX_SLL = 113
    IPV4 = 228
    IPV6 = 229
    LINUX_SLL2 = 276


_RAW_LINKS = (LinkType.RAW, LinkType.RAW_BSD, LinkType.RAW_OPENBSD, LinkType.IPV4, LinkType.IPV6)
_AF_INET6 = (10, 24, 28, 30)  # Linux, BSD, FreeBSD, macOS


@dataclass
class Frame:
    """A decoded captured frame: outer headers, then UET, PFC or a note saying what it is not.

    ``kind`` is ``"uet"``, ``"pfc"``, ``"roce"`` (RoCEv2 to UDP port 4791, in ``roce``) or
    ``"other"`` (skipped, with ``note`` saying why).
    ``layers`` holds ``(layout, values, offset)`` for the link/network/transport headers.
    """

    linktype: int
    length: int
    layers: list[tuple[Layout, Any, int]] = field(default_factory=list)
    kind: str = "other"
    uet: UetPacket | None = None
    pfc: Any | None = None
    roce: RocePacket | None = None
    src: str | None = None
    dst: str | None = None
    sport: int | None = None
    dport: int | None = None
    encap: str | None = None  # "udp" or "ip" for UET
    dscp: int | None = None
    ecn: int | None = None
    note: str = ""
    warnings: list[str] = field(default_factory=list)
    #: the CRC-32C trailer check (wire-format.md §1.4) when asked for (``parse_frame(crc=True)``):
    #: "ok", "bad" or "short"; None when not checked. The trailer is not part of ``uet``.
    crc: str | None = None
    #: the UDP checksum field holds only the pseudo-header sum: the capturing host offloads the
    #: checksum (``tcpdump -i lo`` on Linux), so it is not checked and not warned about
    udp_checksum_partial: bool = False

    def layer(self, name: str) -> Any | None:
        """Values of the first outer header whose layout is called ``name`` (``ipv4``, ``udp``...)."""
        for lay, v, _ in self.layers:
            if lay.name == name:
                return v
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict: addresses, every outer header's fields, then ``uet`` / ``pfc``."""
        out: dict[str, Any] = {"linktype": int(self.linktype), "length": self.length, "kind": self.kind}
        for k in ("src", "dst", "sport", "dport", "encap", "dscp", "ecn"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.ecn is not None:
            out["ecn_name"] = enum_name(net.Ecn, self.ecn)
        out["layers"] = [_layer_dict(lay, v, off) for lay, v, off in self.layers]
        if self.uet is not None:
            out["uet"] = self.uet.to_dict()
        if self.pfc is not None:
            out["pfc"] = fields_dict(net.PFC, self.pfc)
        if self.roce is not None:
            out["roce"] = self.roce.to_dict()
        if self.note:
            out["note"] = self.note
        if self.crc is not None:
            out["crc"] = self.crc
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


def _layer_dict(lay: Layout, v: Any, off: int) -> dict[str, Any]:
    """An outer header's fields for JSON, with addresses in their usual text forms (dotted IPv4,
    RFC 5952 IPv6, colon-separated MAC) instead of hex."""
    d = {"header": lay.name, "offset": off, **fields_dict(lay, v)}
    if lay is net.IPV4 or lay is net.IPV6:
        d["src"], d["dst"] = net.ip_str(bytes(v.src)), net.ip_str(bytes(v.dst))
    elif lay is net.ETHERNET:
        d["src"], d["dst"] = bytes(v.src).hex(":"), bytes(v.dst).hex(":")
    return d


def parse_frame(
    frame: bytes | bytearray | memoryview,
    linktype: int = LinkType.ETHERNET,
    *,
    port: int = net.UET_UDP_PORT,
    ip_proto: int = net.UET_IP_PROTO,
    fast: bool = True,
    decrypt: Decryptor | None = None,
    crc: bool = False,
) -> Frame:
    """Decode one captured frame of pcap link type ``linktype`` (see :class:`LinkType`).

    ``crc``: UET packets end with the 4-byte CRC-32C trailer of unencrypted packets (§1.4): it is
    checked (:attr:`Frame.crc`, a warning when wrong) and kept out of the UET payload.

    UET is found as UDP with source or destination port ``port``, or as IP protocol ``ip_proto``
    (entropy header first). Frames that are not UET come back with ``kind == "other"``; malformed
    outer headers and malformed UET raise :class:`~uet.errors.DecodeError` with offsets from the
    frame's first byte.
    """
    mv = memoryview(frame)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    fr = Frame(linktype=int(linktype), length=len(mv))
    if crc:
        fr.crc = ""  # asked for: _transport fills it in
    try:
        _frame(mv, fr, port, ip_proto, fast, decrypt)
        if fr.uet is not None and fr.uet.reserved:
            fr.warnings.extend(fr.uet.reserved_warnings())
    except UetError:
        raise
    except Exception as e:
        raise DecodeError("frame", 0, f"internal decoder error: {type(e).__name__}: {e}") from e
    return fr


def _layer(fr: Frame, lay: Layout, mv: memoryview, off: int, fast: bool) -> Any:
    v = lay.decode(mv, off) if fast else lay.parse(mv, off)
    fr.layers.append((lay, v, off))
    return v


def _frame(mv: memoryview, fr: Frame, port: int, ip_proto: int, fast: bool, decrypt: Decryptor | None) -> None:
    lt = fr.linktype
    off = 0
    if lt == LinkType.ETHERNET:
        eth = _layer(fr, net.ETHERNET, mv, 0, fast)
        etype, off = eth.ethertype, net.ETHERNET.size
        tags = 0
        while etype in (net.EtherType.VLAN, 0x88A8) and tags < 2:
            etype = _layer(fr, net.VLAN, mv, off, fast).ethertype
            off += net.VLAN.size
            tags += 1
    elif lt == LinkType.LINUX_SLL:
        etype, off = _layer(fr, net.SLL, mv, 0, fast).protocol, net.SLL.size
    elif lt == LinkType.LINUX_SLL2:
        etype, off = _layer(fr, net.SLL2, mv, 0, fast).protocol, net.SLL2.size
    elif lt in (LinkType.NULL, LinkType.LOOP):
        if len(mv) < 4:
            raise DecodeError("loopback", len(mv), f"truncated: 4 bytes needed, {len(mv)} present")
        # LOOP: network byte order; NULL: the writer's host order, so take whichever reads small
        fam = struct.unpack_from(">I", mv, 0)[0]
        if lt == LinkType.NULL and fam > 0xFFFF:
            fam = struct.unpack_from("<I", mv, 0)[0]
        etype = net.EtherType.IPV4 if fam == 2 else net.EtherType.IPV6 if fam in _AF_INET6 else -1
        off = 4
        if etype == -1:
            fr.note = f"loopback address family {fam}"
            return
    elif lt in _RAW_LINKS:
        if not len(mv):
            raise DecodeError("ip", 0, "truncated: empty packet")
        ver = mv[0] >> 4
        if ver not in (4, 6):
            raise DecodeError("ip", 0, f"IP version {ver} is neither 4 nor 6")
        etype = net.EtherType.IPV4 if ver == 4 else net.EtherType.IPV6
    else:
        fr.note = f"unsupported link type {lt}"
        return
    if etype == net.EtherType.IPV4:
        _ipv4(mv, off, fr, port, ip_proto, fast, decrypt)
    elif etype == net.EtherType.IPV6:
        _ipv6(mv, off, fr, port, ip_proto, fast, decrypt)
    elif etype == net.EtherType.MAC_CONTROL:
        if len(mv) - off < 2:
            raise DecodeError("mac_control", len(mv), "truncated: no opcode")
        opcode = struct.unpack_from(">H", mv, off)[0]
        if opcode != net.PFC_OPCODE:
            fr.note = f"MAC control opcode {opcode:#06x} (not PFC)"
            return
        fr.pfc = _layer(fr, net.PFC, mv, off, fast)
        fr.kind = "pfc"
    else:
        fr.note = f"EtherType {etype:#06x}"


def _ipv4(mv: memoryview, off: int, fr: Frame, port: int, ip_proto: int, fast: bool, decrypt: Decryptor | None) -> None:
    ip = _layer(fr, net.IPV4, mv, off, fast)
    if ip.version != 4:
        raise DecodeError("ipv4", off, f"version {ip.version} in an IPv4 header")
    hlen = ip.ihl * 4
    if hlen < net.IPV4.size:
        raise DecodeError("ipv4", off, f"IHL {ip.ihl} is below the minimum 5")
    if off + hlen > len(mv):
        raise DecodeError("ipv4", len(mv), f"truncated: {hlen}-byte header with options, {len(mv) - off} present")
    if ip.total_length < hlen:
        raise DecodeError("ipv4", off + 2, f"total length {ip.total_length} is shorter than the {hlen}-byte header")
    end = off + ip.total_length
    if end > len(mv):
        raise DecodeError("ipv4", len(mv), f"truncated: total length {ip.total_length}, {len(mv) - off} bytes present")
    if net.inet_checksum(mv[off : off + hlen]) != 0:
        good = net.inet_checksum(bytes(mv[off : off + 10]) + b"\0\0" + bytes(mv[off + 12 : off + hlen]))
        fr.warnings.append(f"IPv4 header checksum {ip.checksum:#06x} is wrong (should be {good:#06x})")
    fr.src, fr.dst, fr.dscp, fr.ecn = net.ip_str(ip.src), net.ip_str(ip.dst), ip.dscp, ip.ecn
    if ip.mf or ip.frag_offset:
        fr.note = "IPv4 fragment"
        return
    _transport(mv, off + hlen, end, ip.protocol, bytes(ip.src), bytes(ip.dst), fr, port, ip_proto, fast, decrypt)


def _ipv6(mv: memoryview, off: int, fr: Frame, port: int, ip_proto: int, fast: bool, decrypt: Decryptor | None) -> None:
    ip = _layer(fr, net.IPV6, mv, off, fast)
    if ip.version != 6:
        raise DecodeError("ipv6", off, f"version {ip.version} in an IPv6 header")
    start = off + net.IPV6.size
    end = start + ip.payload_length if ip.payload_length else len(mv)
    if end > len(mv):
        raise DecodeError("ipv6", len(mv), f"truncated: payload length {ip.payload_length}, {len(mv) - start} present")
    fr.src, fr.dst, fr.dscp, fr.ecn = net.ip_str(ip.src), net.ip_str(ip.dst), ip.dscp, ip.ecn
    _transport(mv, start, end, ip.next_header, bytes(ip.src), bytes(ip.dst), fr, port, ip_proto, fast, decrypt)


def _transport(
    mv: memoryview,
    off: int,
    end: int,
    proto: int,
    src: bytes,
    dst: bytes,
    fr: Frame,
    port: int,
    ip_proto: int,
    fast: bool,
    decrypt: Decryptor | None,
) -> None:
    if proto == ip_proto:
        fr.kind, fr.encap = "uet", "ip"
        if fr.crc is not None:  # the entropy header is in the prefix, so the span starts after it
            end = _crc_trailer(mv, off + ENTROPY.size, end, src + dst + bytes(mv[off : off + ENTROPY.size]), fr)
        fr.uet = parse_uet(mv, offset=off, end=end, over_ip=True, fast=fast, decrypt=decrypt, src_ip=src, dst_ip=dst)
        fr.sport = fr.dport = None
        return
    if proto != net.IpProto.UDP:
        fr.note = f"IP protocol {proto}"
        return
    udp = _layer(fr, net.UDP, mv[:end], off, fast)
    fr.sport, fr.dport = udp.src_port, udp.dst_port
    if udp.length < net.UDP.size:
        raise DecodeError("udp", off + 4, f"length {udp.length} is below the 8-byte header")
    if off + udp.length > end:
        raise DecodeError("udp", end, f"truncated: length {udp.length}, {end - off} bytes present")
    uend = off + udp.length
    if port not in (udp.dst_port, udp.src_port):
        if udp.dst_port == net.ROCE_UDP_PORT:
            _roce(mv, off, uend, fr, fast)
            return
        fr.note = f"UDP {udp.src_port} → {udp.dst_port}"
        return
    if udp.checksum:
        zeroed = bytes(mv[off : off + 6]) + b"\0\0" + bytes(mv[off + 8 : uend])
        good = net.udp_checksum(src, dst, zeroed)
        if good != udp.checksum and udp.checksum == partial_udp_checksum(src, dst, udp.length):
            fr.udp_checksum_partial = True
        elif good != udp.checksum:
            fr.warnings.append(f"UDP checksum {udp.checksum:#06x} is wrong (should be {good:#06x})")
    fr.kind, fr.encap = "uet", "udp"
    if fr.crc is not None:
        uend = _crc_trailer(mv, off + net.UDP.size, uend, src + dst + bytes(mv[off : off + 6]) + b"\0\0", fr)
    fr.uet = parse_uet(
        mv,
        offset=off + net.UDP.size,
        end=uend,
        fast=fast,
        decrypt=decrypt,
        src_ip=src,
        dst_ip=dst,
        udp_header=bytes(mv[off : off + net.UDP.size]),
    )


def partial_udp_checksum(src: bytes, dst: bytes, length: int) -> int:
    """What a host with checksum offload leaves in the UDP checksum field of a packet it captures
    before the NIC (or the loopback device, which never fills it in): the folded one's-complement
    sum of the pseudo-header alone, not inverted."""
    if len(src) == 4:
        pseudo = src + dst + bytes((0, 17)) + length.to_bytes(2, "big")
    else:
        pseudo = src + dst + length.to_bytes(4, "big") + b"\0\0\0\x11"
    return ~net.inet_checksum(pseudo) & 0xFFFF


def _crc_trailer(mv: memoryview, start: int, end: int, prefix: bytes, fr: Frame) -> int:
    """Check the CRC-32C trailer of the UET bytes ``mv[start:end]`` (wire-format.md §1.4; the
    covered prefix: addresses and the UDP header with a zero checksum, or the entropy header);
    returns where the UET bytes end without it."""
    if end - start < crc_mod.TRAILER_LEN:
        fr.crc = "short"
        fr.warnings.append("no room for a CRC-32C trailer")
        return end
    body = end - crc_mod.TRAILER_LEN
    want = crc_mod.crc32c(mv[start:body], crc_mod.crc32c(prefix))
    got = int.from_bytes(mv[body:end], "little")
    fr.crc = "ok" if got == want else "bad"
    if got != want:
        fr.warnings.append(f"CRC-32C trailer {got:#010x} is wrong (should be {want:#010x})")
    return body


def _roce(mv: memoryview, off: int, uend: int, fr: Frame, fast: bool) -> None:
    """RoCEv2 (UDP destination 4791) with its ICRC checked over the real IP and UDP headers
    (rocev2-and-fabric.md §4); a wrong ICRC is a warning, like a wrong IP checksum."""
    ip_off = fr.layers[-2][2]  # the IP header before this UDP header
    fr.kind = "roce"
    fr.roce = parse_roce(mv, off + net.UDP.size, uend, ip_start=ip_off, fast=fast)
    if not fr.roce.icrc_ok:
        want = fr.roce.expected_icrc.hex() if fr.roce.expected_icrc else "?"
        fr.warnings.append(f"RoCEv2 ICRC {fr.roce.icrc.hex()} is wrong (should be {want})")
