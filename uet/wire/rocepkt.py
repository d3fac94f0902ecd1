"""RoCEv2 header chain: BTH, the opcode's extension headers, payload, pad and ICRC
(spec/rocev2-and-fabric.md §1.2, §2.2, §2.3, §4, §5).

A *RoCE datagram* is the UDP payload of a RoCEv2 packet: BTH … pad, then the 4-byte ICRC. The
ICRC also covers the IP and UDP headers (§4.1). Where those headers are built by this project
(fabric links, the simulator, pcaps) they are the *canonical* ones of :func:`canonical_headers`:
IPv4 ID 0, DF, protocol UDP, destination port 4791, UDP checksum 0 — the variant fields (TOS,
TTL, IP checksum, UDP checksum) are masked out of the ICRC anyway. **Decision:** a queue pair
computes and checks the ICRC over these canonical headers, from the two addresses and the source
port it knows, so a datagram carried over a plain UDP socket (where the kernel picks the IP ID)
has the same ICRC as the same packet in a frame this project builds — as long as the socket sends
what the canonical headers say. The direct link's socket does not send the QPN fold as its source
port (the kernel sends the bound port) nor to 4791 when a test binds other ports, so a queue pair
on it computes the ICRC with the link's real ports (``sport`` / ``dport``, :class:`IcrcContext`)
and the link sets DF so that the kernel sends IP ID 0 (:class:`~uet.link.direct.DirectLink`,
``dont_fragment``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from uet.errors import DecodeError
from uet.wire import net
from uet.wire.icrc import ICRC_LEN, body_icrc, headers_crc, icrc_bytes
from uet.wire.layout import Layout
from uet.wire.roce import (
    AETH,
    ATOMIC_ACK_ETH,
    ATOMIC_ETH,
    BTH,
    CNP,
    EXTENSIONS,
    IMMDT,
    RETH,
    ROCE_UDP_PORT,
    WITH_PAYLOAD,
    NakCode,
    OpCode,
)

__all__ = [
    "IcrcContext",
    "RocePacket",
    "canonical_headers",
    "encode_roce",
    "parse_roce",
    "seal",
    "syndrome_name",
    "verify_icrc",
]


@dataclass
class RocePacket:
    """A decoded RoCE datagram. ``exts`` holds ``(layout, values)`` in wire order; ``icrc_ok`` is
    None when the IP/UDP headers needed to check it were not available."""

    bth: Any
    exts: list[tuple[Layout, Any]] = field(default_factory=list)
    payload: bytes = b""
    icrc: bytes = b""
    icrc_ok: bool | None = None
    expected_icrc: bytes | None = None
    offset: int = 0  # of the BTH in the decoded buffer
    payload_offset: int = 0

    def sections(self) -> list[tuple[Layout, Any, int]]:
        """``(layout, values, offset)`` of BTH and each extension header, for field trees."""
        out: list[tuple[Layout, Any, int]] = [(BTH, self.bth, self.offset)]
        at = self.offset + BTH.size
        for lay, v in self.exts:
            out.append((lay, v, at))
            at += lay.size
        return out

    def ext(self, layout: Layout) -> Any | None:
        for lay, v in self.exts:
            if lay is layout:
                return v
        return None

    @property
    def opcode(self) -> int:
        op: int = self.bth.opcode
        return op

    @property
    def opcode_name(self) -> str:
        try:
            return OpCode(self.bth.opcode).name
        except ValueError:
            return f"unknown({self.bth.opcode:#04x})"

    @property
    def reth(self) -> Any | None:
        return self.ext(RETH)

    @property
    def aeth(self) -> Any | None:
        return self.ext(AETH)

    @property
    def immdt(self) -> Any | None:
        return self.ext(IMMDT)

    @property
    def atomic_eth(self) -> Any | None:
        return self.ext(ATOMIC_ETH)

    @property
    def atomic_ack(self) -> Any | None:
        return self.ext(ATOMIC_ACK_ETH)

    def to_dict(self) -> dict[str, Any]:
        from uet.wire.chain import fields_dict  # the UET chain's JSON helper; no import cycle at load

        out: dict[str, Any] = {"opcode_name": self.opcode_name, "bth": fields_dict(BTH, self.bth)}
        for lay, v in self.exts:
            d = fields_dict(lay, v)
            if lay is AETH:
                d["syndrome_name"] = syndrome_name(v.syndrome)
            out[lay.name] = d
        out["payload_length"] = len(self.payload)
        out["icrc"] = self.icrc.hex()
        if self.icrc_ok is not None:
            out["icrc_ok"] = self.icrc_ok
        if self.expected_icrc is not None and not self.icrc_ok:
            out["icrc_expected"] = self.expected_icrc.hex()
        return out


def syndrome_name(s: int) -> str:
    """Human name of an AETH syndrome (§3.1)."""
    kind = (s >> 5) & 3
    if kind == 0:
        return "ACK" if (s & 0x1F) == 0x1F else f"ACK credits code {s & 0x1F}"
    if kind == 1:
        return f"RNR NAK timer code {s & 0x1F}"
    if kind == 3:
        try:
            return f"NAK {NakCode(s & 0x7F).name}"
        except ValueError:
            return f"NAK reserved ({s:#04x})"
    return f"reserved ({s:#04x})"


def parse_roce(
    buf: bytes | bytearray | memoryview,
    offset: int = 0,
    end: int | None = None,
    *,
    ip_start: int | None = None,
    fast: bool = True,
) -> RocePacket:
    """Decode the RoCE datagram in ``buf[offset:end]``; offsets in errors count from ``buf[0]``.

    With ``ip_start`` (the offset of the IP header in ``buf``, the datagram being that packet's
    UDP payload) the ICRC is checked over the real headers and ``icrc_ok`` set. Raises
    :class:`DecodeError` for truncation, a non-RC transport (UC/UD/RD/XRC are not supported,
    §2.2 Decision), an undefined opcode, a pad count larger than the payload, or bytes after an
    opcode that carries no payload.
    """
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    end = len(mv) if end is None else end
    if end - offset < BTH.size + ICRC_LEN:
        raise DecodeError("bth", end, f"truncated: {BTH.size + ICRC_LEN} bytes needed, {end - offset} present")
    body_end = end - ICRC_LEN
    bth = BTH.decode(mv[:body_end], offset) if fast else BTH.parse(mv[:body_end], offset)
    op = bth.opcode
    off = offset + BTH.size
    exts: list[tuple[Layout, Any]] = []
    if op == OpCode.CNP:
        if body_end - offset != CNP.size:
            raise DecodeError("cnp", off, f"CNP body is {body_end - off} bytes, 16 expected")
        off = body_end
    else:
        if op >> 5:
            raise DecodeError("bth", offset, f"opcode {op:#04x} is not RC (transport {op >> 5:03b} not supported)")
        layouts = EXTENSIONS.get(op)
        if layouts is None:
            raise DecodeError("bth", offset, f"opcode {op:#04x} is not defined for RC")
        for lay in layouts:
            v = lay.decode(mv[:body_end], off) if fast else lay.parse(mv[:body_end], off)
            exts.append((lay, v))
            off += lay.size
    rest = body_end - off
    if op not in WITH_PAYLOAD and rest:
        raise DecodeError("bth", off, f"{rest} bytes after the headers of {OpCode(op).name}, which has no payload")
    if bth.pad_cnt > rest:
        raise DecodeError("bth", offset + 1, f"pad count {bth.pad_cnt} exceeds the {rest}-byte payload")
    pkt = RocePacket(
        bth, exts, bytes(mv[off : body_end - bth.pad_cnt]), bytes(mv[body_end:end]), offset=offset, payload_offset=off
    )
    if ip_start is not None:
        pkt.expected_icrc = icrc_bytes(mv[ip_start:body_end])
        pkt.icrc_ok = pkt.expected_icrc == pkt.icrc
    return pkt


def encode_roce(bth: Any, exts: tuple[Any, ...] = (), payload: bytes | bytearray | memoryview = b"") -> bytes:
    """BTH + extension headers + payload + pad (no ICRC); ``bth.pad_cnt`` is set from the payload.

    ``exts`` are the values of the opcode's extension headers in wire order (§2.2)."""
    if bth.opcode == OpCode.CNP:
        return CNP.encode(bth)
    layouts = EXTENSIONS[bth.opcode]
    if len(exts) != len(layouts):
        raise ValueError(f"{OpCode(bth.opcode).name} takes {len(layouts)} extension headers, {len(exts)} given")
    pad = -len(payload) & 3
    parts = [BTH.encode(bth._replace(pad_cnt=pad))]
    parts += [lay.encode(v) for lay, v in zip(layouts, exts, strict=True)]
    parts.append(bytes(payload))
    if pad:
        parts.append(bytes(pad))
    return b"".join(parts)


def canonical_headers(src: bytes, dst: bytes, sport: int, datagram_len: int, dport: int = ROCE_UDP_PORT) -> bytes:
    """The IP and UDP headers this project puts in front of a RoCE datagram of ``datagram_len``
    bytes (ICRC included), as far as the ICRC sees them (variant fields left 0; they are masked):
    IPv4 ID 0 with DF, UDP ``sport`` to ``dport`` (4791)."""
    udp = net.UDP.encode((sport & 0xFFFF, dport & 0xFFFF, net.UDP.size + datagram_len, 0))
    if len(src) == 4:
        ip = net.IPV4.encode(
            net.IPV4.make(total_length=net.IPV4.size + net.UDP.size + datagram_len, src=src, dst=dst, ttl=0)
        )
    else:
        ip = net.IPV6.encode(net.IPV6.make(payload_length=net.UDP.size + datagram_len, src=src, dst=dst))
    return ip + udp


def seal(body: bytes, src: bytes, dst: bytes, sport: int) -> bytes:
    """``body`` (BTH … pad) with its ICRC appended, computed over the canonical headers."""
    return body + icrc_bytes(canonical_headers(src, dst, sport, len(body) + ICRC_LEN) + body)


def verify_icrc(datagram: bytes | bytearray | memoryview, src: bytes, dst: bytes, sport: int) -> bool:
    """True when the datagram's last 4 bytes are its ICRC under the canonical headers."""
    mv = memoryview(datagram)
    if len(mv) < ICRC_LEN:
        return False
    head = canonical_headers(src, dst, sport, len(mv))
    return icrc_bytes(head + bytes(mv[:-ICRC_LEN])) == bytes(mv[-ICRC_LEN:])


class IcrcContext:
    """:func:`seal` and :func:`verify_icrc` for one (source, destination, source port), with the
    header part of the CRC cached per datagram length: the queue pair's hot path. A test checks it
    against the plain functions."""

    def __init__(self, src: bytes, dst: bytes, sport: int, dport: int = ROCE_UDP_PORT) -> None:
        self.src, self.dst, self.sport, self.dport = src, dst, sport, dport
        self._heads: dict[int, int] = {}

    def _head(self, n: int) -> int:
        h = self._heads.get(n)
        if h is None:
            if len(self._heads) >= 256:
                self._heads.clear()
            h = self._heads[n] = headers_crc(canonical_headers(self.src, self.dst, self.sport, n, self.dport))
        return h

    def seal(self, body: bytes) -> bytes:
        return body + body_icrc(self._head(len(body) + ICRC_LEN), body).to_bytes(4, "little")

    def verify(self, datagram: bytes | bytearray | memoryview) -> bool:
        n = len(datagram)
        if n < ICRC_LEN + 5:
            return False
        mv = memoryview(datagram)
        return body_icrc(self._head(n), mv[:-ICRC_LEN]).to_bytes(4, "little") == mv[-ICRC_LEN:]
