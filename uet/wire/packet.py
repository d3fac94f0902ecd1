"""The UET header chain (wire-format.md §2) and the frames around it.

:func:`parse_uet` walks the bytes above UDP (or above IP, after the entropy header) in the order of
wire-format.md §2: [entropy] [TSS] PDS [SES] [extensions] payload, picking each header's variant
with :func:`~uet.wire.pds.pds_layout`, :func:`~uet.wire.ses.ses_layout` and
:func:`~uet.wire.ses.extension_layout` from fields already read, as Wireshark's dissector does.
The result is a :class:`UetPacket`: the decoded sections in order, the payload, and for a TSS
packet the ciphertext and ICV.

:func:`parse_frame` adds the link and network layers (Ethernet with up to two VLAN tags, raw IPv4/IPv6,
Linux cooked capture v1/v2, BSD loopback), finds UET by UDP port or IP protocol 253, and decodes
PFC MAC-control frames. :func:`build_frame` and friends do the reverse with correct checksums.

Choices where the spec notes are silent (documented here so the decoder's output can be read):

* **Validation.** Besides truncation, these raise :class:`~uet.errors.DecodeError`: a reserved or
  unassigned PDS type (0, 0x0F–0x1F, and type 1 where a PDS header is due), a reserved ``next_hdr``
  (7–15) or control type (10–15), a ``next_hdr`` the PDS type may not carry (the "appears after"
  column of wire-format.md §6.1: requests carry 1, 2, 3 or 5; RUDI responses 4, 5, 6; ACKs 0, 4,
  5, 6; NACKs 0), a response opcode the response header may not carry (§12.4), and a rendezvous
  opcode outside the standard header (§8.5). Unknown SES request opcodes (0x12–0x3F), atomic
  opcodes and return codes decode as numbers with no name: they do not change the layout.
* **Extensions** follow every request packet whose opcode calls for one, not only the SOM packet,
  as the dissector does. SYNC_ATOMIC carries the sync extension and then the atomic one.
* **Error offsets** are absolute positions in the buffer handed in (the UET bytes start at
  ``offset``); for a truncated header the offset is where the bytes ran out.
* **UDP ports.** A UDP datagram is UET when its destination port *or* its source port is the UET
  port (4793 by default): the spec uses 4793 as the destination in both directions (§1.1), and a
  host-stack endpoint bound to 4793 also sends from it. The destination is checked first.
* **Checksums.** A wrong IPv4 header checksum or UDP checksum is a warning on the :class:`Frame`,
  not an error; a UDP checksum of 0 (none, legal on IPv4) is not checked.
* **TSS.** Everything after the TSS header is ciphertext (behaviour.md §5.5). Without a
  ``decrypt`` callable the chain stops after the TSS header and keeps ``ciphertext`` and ``icv``.
  With one, it is handed a :class:`Sealed` and returns the plaintext, whose PDS/SES headers are
  then decoded at the same offsets the ciphertext occupied, or None when it cannot decrypt (the
  packet stays encrypted, ``decrypt_failed`` is set: not a decoding error).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any

from uet.errors import DecodeError, UetError
from uet.wire import crc as crc_mod
from uet.wire import net, pds, ses, tss
from uet.wire.layout import Layout, Raw
from uet.wire.pds import AckFlag, ControlType, NackFlag, NextHeader, PdsType, ReqFlag, RudiFlag
from uet.wire.rocepkt import RocePacket, parse_roce
from uet.wire.ses import SesOpcode

__all__ = [
    "Sealed",
    "UetPacket",
    "Frame",
    "parse_uet",
    "parse_frame",
    "fields_dict",
    "pds_flag_names",
    "LinkType",
    "build_udp_ipv4",
    "build_ip_packet",
    "build_ethernet",
    "build_frame",
    "build_pfc_frame",
    "default_dscp",
]

#: The PDS ``next_hdr`` values each PDS type may carry (wire-format.md §6.1, "appears after").
_REQ_NH = frozenset({NextHeader.SMALL, NextHeader.MEDIUM, NextHeader.STANDARD, NextHeader.RESPONSE_DATA})
_RESP_NH = frozenset({NextHeader.RESPONSE, NextHeader.RESPONSE_DATA, NextHeader.SMALL_RESPONSE_DATA})
ALLOWED_NEXT_HDR: dict[int, frozenset[int]] = {
    PdsType.RUD_REQ: _REQ_NH,
    PdsType.ROD_REQ: _REQ_NH,
    PdsType.RUD_CC_REQ: _REQ_NH,
    PdsType.ROD_CC_REQ: _REQ_NH,
    PdsType.RUDI_REQ: frozenset({NextHeader.SMALL, NextHeader.MEDIUM, NextHeader.STANDARD}),
    PdsType.RUDI_RESP: _RESP_NH,
    PdsType.UUD_REQ: frozenset({NextHeader.SMALL, NextHeader.MEDIUM, NextHeader.STANDARD}),
    PdsType.ACK: _RESP_NH | {NextHeader.NONE},
    PdsType.ACK_CC: _RESP_NH | {NextHeader.NONE},
    PdsType.ACK_CCX: _RESP_NH | {NextHeader.NONE},
    PdsType.NACK: frozenset({NextHeader.NONE}),
    PdsType.NACK_CCX: frozenset({NextHeader.NONE}),
}

_REQUEST_NH = frozenset({NextHeader.SMALL, NextHeader.MEDIUM, NextHeader.STANDARD})

# Which part of the chain a layout belongs to.
_ROLE: dict[Layout, str] = {}
for _lay in pds.ALL_LAYOUTS:
    _ROLE[_lay] = "pds"
for _lay in (ses.ATOMIC_EXT, ses.CSWAP_EXT, ses.RENDEZVOUS_EXT, ses.SYNC_EXT):
    _ROLE[_lay] = "ext"
for _lay in ses.ALL_LAYOUTS:
    _ROLE.setdefault(_lay, "ses")
_ROLE[tss.TSS] = _ROLE[tss.TSS_SSI] = "tss"
_ROLE[tss.ENTROPY] = "entropy"


# -- results -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sealed:
    """Everything a TSS decryptor needs for one packet (behaviour.md §5.5).

    ``tss_header`` is the raw security header and ``entropy`` the packet's entropy value (from the
    entropy header, or the UDP source port): with the IP addresses they make the AAD. The addresses
    and the UDP header are filled in by :func:`parse_frame` (None when :func:`parse_uet` is called
    on bare UET bytes without them). :attr:`datagram` is the bytes after UDP/entropy header.
    """

    tss: Any
    tss_header: bytes
    ciphertext: bytes
    icv: bytes
    entropy: int | None = None
    src_ip: bytes | None = None
    dst_ip: bytes | None = None
    udp_header: bytes | None = None

    @property
    def datagram(self) -> bytes:
        """TSS header ‖ ciphertext ‖ ICV: the secured bytes after UDP or the entropy header."""
        return self.tss_header + self.ciphertext + self.icv


#: A decryptor returns the plaintext (PDS header onward), or None when it cannot decrypt the
#: packet (no key authenticates it): the packet then stays encrypted, with ``decrypt_failed`` set.
Decryptor = Callable[[Sealed], bytes | None]


@dataclass
class UetPacket:
    """One decoded UET packet: its headers in wire order and what follows them.

    ``sections`` holds ``(layout, values)`` pairs (values are the layout's named tuple) and
    ``offsets`` the absolute byte offset of each. ``payload`` is what follows the last header; for
    a TSS packet that was not decrypted it is empty and ``ciphertext``/``icv`` hold the rest.
    """

    sections: list[tuple[Layout, Any]] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    payload: bytes = b""
    start: int = 0
    end: int = 0
    ciphertext: bytes | None = None
    icv: bytes | None = None
    decrypted: bool = False
    decrypt_failed: bool = False

    def _find(self, role: str) -> tuple[Layout, Any] | None:
        for lay, v in self.sections:
            if _ROLE.get(lay) == role:
                return lay, v
        return None

    def section(self, role: str) -> tuple[Layout, Any] | None:
        """The first ``(layout, values)`` of a role: entropy, tss, pds, ses or ext."""
        return self._find(role)

    @property
    def entropy(self) -> Any | None:
        s = self._find("entropy")
        return s[1] if s else None

    @property
    def tss(self) -> Any | None:
        s = self._find("tss")
        return s[1] if s else None

    @property
    def pds(self) -> Any | None:
        """The PDS header's values (None for a TSS packet that was not decrypted)."""
        s = self._find("pds")
        return s[1] if s else None

    @property
    def pds_layout(self) -> Layout | None:
        s = self._find("pds")
        return s[0] if s else None

    @property
    def ses(self) -> Any | None:
        s = self._find("ses")
        return s[1] if s else None

    @property
    def ses_layout(self) -> Layout | None:
        s = self._find("ses")
        return s[0] if s else None

    @property
    def extensions(self) -> list[tuple[Layout, Any]]:
        return [(lay, v) for lay, v in self.sections if _ROLE.get(lay) == "ext"]

    @property
    def ext(self) -> Any | None:
        """The extension that carries the operation: the last one (the atomic after SYNC_ATOMIC's
        sync extension), or None."""
        exts = self.extensions
        return exts[-1][1] if exts else None

    @property
    def encrypted(self) -> bool:
        return self.ciphertext is not None and not self.decrypted

    @property
    def pds_type(self) -> int | None:
        p = self.pds
        return None if p is None else p.type

    @property
    def pds_type_name(self) -> str | None:
        return _enum_name(PdsType, self.pds_type)

    @property
    def ses_opcode_name(self) -> str | None:
        lay = self.ses_layout
        if lay is None:
            return None
        return _enum_name(lay.fields["opcode"].enum, self.ses.opcode)  # type: ignore[union-attr]

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-safe.

        One key per header role (``entropy``, ``tss``, ``pds``, ``ses``) and a list
        ``extensions``; each header dict holds ``header`` (the layout name), ``offset`` and every
        field as a number, plus ``<field>_name`` for enum fields (null when the value has no name)
        and ``flags_names`` (a list) for flag words. PDS dicts add the PSNs the spec derives from
        offsets (``clear_psn``, ``start_psn``, ``ack_psn``, ``sack_base_psn``). Bytes are hex.
        """
        out: dict[str, Any] = {"offset": self.start, "length": self.end - self.start}
        exts = []
        for (lay, v), off in zip(self.sections, self.offsets, strict=True):
            d = fields_dict(lay, v)
            d = {"header": lay.name, "offset": off, **d}
            role = _ROLE.get(lay, lay.name)
            if role == "pds":
                d.update(_pds_derived(lay, v))
            if role == "ext":
                exts.append(d)
            else:
                out[role] = d
        out["extensions"] = exts
        out["payload_length"] = len(self.payload)
        out["payload"] = self.payload.hex()
        if self.ciphertext is not None:
            out["ciphertext"] = self.ciphertext.hex()
            out["icv"] = (self.icv or b"").hex()
            out["decrypted"] = self.decrypted
            out["decrypt_failed"] = self.decrypt_failed
        return out


def _enum_name(enum: type[IntEnum] | type[IntFlag] | None, v: int | None) -> str | None:
    if enum is None or v is None:
        return None
    try:
        return enum(v).name
    except ValueError:
        return None


_PDS_FLAGS: dict[int, type[IntFlag]] = {
    PdsType.RUD_REQ: ReqFlag,
    PdsType.ROD_REQ: ReqFlag,
    PdsType.RUD_CC_REQ: ReqFlag,
    PdsType.ROD_CC_REQ: ReqFlag,
    PdsType.CONTROL: ReqFlag,
    PdsType.ACK: AckFlag,
    PdsType.ACK_CC: AckFlag,
    PdsType.ACK_CCX: AckFlag,
    PdsType.NACK: NackFlag,
    PdsType.NACK_CCX: NackFlag,
    PdsType.RUDI_REQ: RudiFlag,
    PdsType.RUDI_RESP: RudiFlag,
}


def _flag_names(enum: type[IntFlag] | None, v: int) -> list[str]:
    names = []
    rest = v
    if enum is not None:
        for m in sorted(enum, key=int):
            if v & m:
                names.append(m.name or str(int(m)))
                rest &= ~int(m)
    if rest:
        names.append(f"{rest:#x}")
    return names


def pds_flag_names(pds_type: int, flags: int) -> list[str]:
    """Names of the set flag bits of a PDS header of ``pds_type`` (wire-format.md §4); ISROD only
    on control packets, bits with no meaning for the type as hex."""
    enum = _PDS_FLAGS.get(pds_type)
    if enum is ReqFlag and pds_type != PdsType.CONTROL:
        names = _flag_names(enum, flags & ~ReqFlag.ISROD)
        if flags & ReqFlag.ISROD:
            names.append(f"{int(ReqFlag.ISROD):#x}")
        return names
    return _flag_names(enum, flags)


def fields_dict(layout: Layout, values: Any) -> dict[str, Any]:
    """``layout``'s fields as a JSON-safe dict: numbers, ``*_name`` for enums, hex for bytes."""
    out: dict[str, Any] = {}
    is_pds = _ROLE.get(layout) == "pds"
    for name, v in zip(layout.field_names, values, strict=True):
        f = layout.fields[name]
        if isinstance(f, Raw):
            out[name] = bytes(v).hex()
            continue
        out[name] = int(v)
        if name == "flags":
            if is_pds:
                out["flags_names"] = pds_flag_names(values[0], v)
            else:
                out["flags_names"] = _flag_names(f.enum if f.enum and issubclass(f.enum, IntFlag) else None, v)
        elif f.enum is not None:
            out[name + "_name"] = _enum_name(f.enum, v)
    return out


def _pds_derived(layout: Layout, v: Any) -> dict[str, int]:
    d = v._asdict()
    out: dict[str, int] = {}
    if "clear_psn_offset" in d:
        out["clear_psn"] = pds.clear_psn(d["psn"], d["clear_psn_offset"])
    if "psn_offset" in d:
        out["start_psn"] = pds.start_psn(d["psn"], d["psn_offset"])
    if "ack_psn_offset" in d:
        out["ack_psn"] = pds.ack_psn(d["cack_psn"], d["ack_psn_offset"])
    if "sack_psn_offset" in d:
        out["sack_base_psn"] = pds.sack_base(d["cack_psn"], d["sack_psn_offset"])
    return out


# -- the UET header chain ------------------------------------------------------------------------


def parse_uet(
    buf: bytes | bytearray | memoryview,
    *,
    fast: bool = True,
    offset: int = 0,
    over_ip: bool = False,
    end: int | None = None,
    decrypt: Decryptor | None = None,
    src_ip: bytes | None = None,
    dst_ip: bytes | None = None,
    udp_header: bytes | None = None,
) -> UetPacket:
    """Decode the UET bytes ``buf[offset:end]`` (wire-format.md §2).

    ``over_ip``: the bytes start with the 4-byte entropy header (UET directly over IP, §1.2).
    ``fast``: decode with the precompiled struct codecs (True) or the construct definitions; both
    give equal values. ``decrypt``: see :class:`Sealed`. ``src_ip``/``dst_ip``/``udp_header`` are
    only passed through to it. Raises :class:`~uet.errors.DecodeError` and nothing else for any
    input (unless ``decrypt`` raises a :class:`~uet.errors.UetError`).
    """
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if end is None or end > len(mv):
        end = len(mv)
    if offset < 0 or offset > end:
        raise DecodeError("uet", offset, f"offset outside the buffer of {end} bytes")
    mv = mv[:end]
    pkt = UetPacket(start=offset, end=end)
    try:
        _chain(mv, offset, end, fast, over_ip, pkt, decrypt, (src_ip, dst_ip, udp_header))
    except UetError:
        raise
    except Exception as e:  # a decoder must never leak another exception type
        raise DecodeError("uet", offset, f"internal decoder error: {type(e).__name__}: {e}") from e
    return pkt


def _take(pkt: UetPacket, lay: Layout, mv: memoryview, off: int, fast: bool) -> tuple[Any, int]:
    v = lay.decode(mv, off) if fast else lay.parse(mv, off)
    pkt.sections.append((lay, v))
    pkt.offsets.append(off)
    return v, off + lay.size


def _chain(
    mv: memoryview,
    off: int,
    end: int,
    fast: bool,
    over_ip: bool,
    pkt: UetPacket,
    decrypt: Decryptor | None,
    outer: tuple[bytes | None, bytes | None, bytes | None],
) -> None:
    if over_ip:
        _, off = _take(pkt, tss.ENTROPY, mv, off, fast)
    if off < end and mv[off] >> 3 == tss.TSS_TYPE:
        lay = tss.tss_layout(mv[off])
        tv, off = _take(pkt, lay, mv, off, fast)
        rest = end - off
        if rest < tss.ICV_LEN:
            raise DecodeError(lay.name, end, f"truncated: a {tss.ICV_LEN}-byte ICV must follow, {rest} bytes present")
        pkt.ciphertext = bytes(mv[off : end - tss.ICV_LEN])
        pkt.icv = bytes(mv[end - tss.ICV_LEN : end])
        if decrypt is None:
            return
        src_ip, dst_ip, udp_header = outer
        eh = pkt.entropy if over_ip else None
        entropy = eh.entropy if eh is not None else None
        if entropy is None and udp_header is not None and len(udp_header) >= 2:
            entropy = int.from_bytes(udp_header[:2], "big")
        tss_header = bytes(mv[off - lay.size : off])
        sealed = Sealed(tv, tss_header, pkt.ciphertext, pkt.icv, entropy, src_ip, dst_ip, udp_header)
        try:
            plain = decrypt(sealed)
        except UetError:
            raise
        except Exception as e:
            raise DecodeError(lay.name, off, f"decryption failed: {type(e).__name__}: {e}") from e
        if plain is None:
            pkt.decrypt_failed = True
            return
        if not isinstance(plain, (bytes, bytearray, memoryview)):
            raise DecodeError(lay.name, off, f"decryptor returned {type(plain).__name__}, not bytes")
        mv = memoryview(bytes(mv[:off]) + bytes(plain))
        end = len(mv)
        pkt.end = end
        pkt.decrypted = True
    _pds_ses(mv, off, end, fast, pkt)


def _pds_ses(mv: memoryview, off: int, end: int, fast: bool, pkt: UetPacket) -> None:
    ptype, nh, flags = pds.PROLOGUE.unpack(mv, off)
    if ptype == tss.TSS_TYPE:
        raise DecodeError("pds", off, "PDS type 0x01 (TSS header) where a PDS header is due")
    cc_byte = mv[off + 12] if ptype in (PdsType.ACK_CC, PdsType.ACK_CCX) and off + 12 < end else None
    lay = pds.pds_layout(ptype, flags, cc_byte)
    if lay is None:
        raise DecodeError("pds", off, f"reserved PDS type {ptype:#04x}")
    if ptype == PdsType.CONTROL:
        if nh not in ControlType._value2member_map_:
            raise DecodeError(lay.name, off, f"reserved control type {nh}")
        _, off = _take(pkt, lay, mv, off, fast)
        pkt.payload = bytes(mv[off:end])
        return
    if nh not in NextHeader._value2member_map_:
        raise DecodeError(lay.name, off, f"reserved next_hdr {nh:#x}")
    if nh not in ALLOWED_NEXT_HDR[ptype]:
        tname = PdsType(ptype).name
        if ptype in (PdsType.NACK, PdsType.NACK_CCX):
            raise DecodeError(lay.name, off, f"SES header (next_hdr {NextHeader(nh).name}) on a {tname}")
        raise DecodeError(lay.name, off, f"next_hdr {NextHeader(nh).name} not allowed on {tname}")
    _, off = _take(pkt, lay, mv, off, fast)
    if nh == NextHeader.NONE:
        pkt.payload = bytes(mv[off:end])
        return
    b0 = mv[off] if off < end else 0
    b1 = mv[off + 1] if off + 1 < end else 0
    slay = ses.ses_layout(nh, b0, b1)
    assert slay is not None  # every allowed next_hdr has a layout
    opcode = b0 & 0x3F
    if nh in ses.RESPONSE_OPCODES and off < end and opcode not in ses.RESPONSE_OPCODES[nh]:
        ok = ", ".join(str(o) for o in sorted(ses.RESPONSE_OPCODES[nh]))
        raise DecodeError(
            slay.name,
            off,
            f"response opcode {opcode} not allowed after next_hdr {NextHeader(nh).name} (allowed: {ok})",
        )
    ses_off = off
    _, off = _take(pkt, slay, mv, off, fast)
    if nh in _REQUEST_NH:
        if opcode in ses.RENDEZVOUS_OPCODES and nh != NextHeader.STANDARD:
            raise DecodeError(slay.name, ses_off, f"{SesOpcode(opcode).name} needs the standard SES header")
        if opcode == SesOpcode.SYNC_ATOMIC:
            _, off = _take(pkt, ses.SYNC_EXT, mv, off, fast)
            opcode = SesOpcode.ATOMIC
        elay = ses.extension_layout(opcode, mv[off] if off < end else None)
        if elay is not None:
            _, off = _take(pkt, elay, mv, off, fast)
    pkt.payload = bytes(mv[off:end])


# -- frames --------------------------------------------------------------------------------------


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
            out["ecn_name"] = _enum_name(net.Ecn, self.ecn)
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
        if fr.crc is not None:
            end = _crc_trailer(mv, off, end, src + dst + bytes(mv[off : off + 4]), fr)
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
        if good != udp.checksum and udp.checksum == _partial_udp_checksum(src, dst, udp.length):
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


def _partial_udp_checksum(src: bytes, dst: bytes, length: int) -> int:
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


# -- builders ------------------------------------------------------------------------------------

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
