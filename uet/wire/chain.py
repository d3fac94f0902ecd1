"""The UET header chain (wire-format.md §2): :func:`parse_uet` and what it returns.

:func:`parse_uet` walks the bytes above UDP (or above IP, after the entropy header) in the order of
wire-format.md §2: [entropy] [TSS] PDS [SES] [extensions] payload, picking each header's variant
with :func:`~uet.wire.pds.pds_layout`, :func:`~uet.wire.ses.ses_layout` and
:func:`~uet.wire.ses.extension_layout` from fields already read, as Wireshark's dissector does.
The result is a :class:`UetPacket`: the decoded sections in order, the payload, and for a TSS
packet the ciphertext and ICV. The frames around it are decoded by :mod:`uet.wire.capture` and
built by :mod:`uet.wire.build`.

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
* **TSS.** Everything after the TSS header is ciphertext (behaviour.md §5.5). Without a
  ``decrypt`` callable the chain stops after the TSS header and keeps ``ciphertext`` and ``icv``.
  With one, it is handed a :class:`Sealed` and returns the plaintext, whose PDS/SES headers are
  then decoded at the same offsets the ciphertext occupied, or None when it cannot decrypt (the
  packet stays encrypted, ``decrypt_failed`` is set: not a decoding error).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any

from uet.errors import DecodeError, UetError
from uet.wire import pds, ses, tss
from uet.wire.layout import Layout, Raw
from uet.wire.pds import AckFlag, ControlType, NackFlag, NextHeader, PdsType, ReqFlag, RudiFlag
from uet.wire.ses import SesOpcode

__all__ = [
    "ACK_CC_TYPES",
    "ALLOWED_NEXT_HDR",
    "Decryptor",
    "Sealed",
    "UetPacket",
    "enum_name",
    "fields_dict",
    "flag_names",
    "key_ext_offset",
    "key_pds_layout",
    "parse_uet",
    "pds_flag_names",
    "pds_ses_key",
    "pds_ses_layouts",
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
    #: the non-zero reserved bits of each section that has some, by section index
    #: (:meth:`Layout.reserved_values <uet.wire.layout.Layout.reserved_values>`)
    reserved: dict[int, dict[str, int]] = field(default_factory=dict)

    def reserved_warnings(self) -> list[str]:
        """One warning per header whose reserved bits are not zero (wire-format.md §0 says they
        are sent as 0; Wireshark flags them the same way). Empty for a clean packet."""
        out = []
        for i, r in sorted(self.reserved.items()):
            bits = ", ".join(f"{k} = {v:#x}" for k, v in r.items())
            out.append(f"{self.sections[i][0].name}: reserved bits not zero ({bits})")
        return out

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
        return enum_name(PdsType, self.pds_type)

    @property
    def ses_opcode_name(self) -> str | None:
        lay = self.ses_layout
        if lay is None:
            return None
        return enum_name(lay.fields["opcode"].enum, self.ses.opcode)  # type: ignore[union-attr]

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-safe.

        One key per header role (``entropy``, ``tss``, ``pds``, ``ses``) and a list
        ``extensions``; each header dict holds ``header`` (the layout name), ``offset`` and every
        field as a number, plus ``<field>_name`` for enum fields (null when the value has no name)
        and ``flags_names`` (a list) for flag words, and ``reserved_<bit>`` for each run of reserved
        bits that is not zero (:meth:`reserved_warnings`). PDS dicts add the PSNs the spec derives from
        offsets (``clear_psn``, ``start_psn``, ``ack_psn``, ``sack_base_psn``). Bytes are hex.
        """
        out: dict[str, Any] = {"offset": self.start, "length": self.end - self.start}
        exts = []
        for i, ((lay, v), off) in enumerate(zip(self.sections, self.offsets, strict=True)):
            d = fields_dict(lay, v)
            d = {"header": lay.name, "offset": off, **d}
            if i in self.reserved:
                d.update(self.reserved[i])
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


def enum_name(enum: type[IntEnum] | type[IntFlag] | None, v: int | None) -> str | None:
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


def flag_names(enum: type[IntFlag] | None, v: int) -> list[str]:
    """Names of the set bits of flag word ``v`` (lowest first), the bits ``enum`` does not name as hex."""
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
        names = flag_names(enum, flags & ~ReqFlag.ISROD)
        if flags & ReqFlag.ISROD:
            names.append(f"{int(ReqFlag.ISROD):#x}")
        return names
    return flag_names(enum, flags)


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
                out["flags_names"] = flag_names(f.enum if f.enum and issubclass(f.enum, IntFlag) else None, v)
        elif f.enum is not None:
            out[name + "_name"] = enum_name(f.enum, v)
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
    r = lay.reserved_values(mv, off)
    if r:
        pkt.reserved[len(pkt.sections)] = r
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
    for lay in pds_ses_layouts(mv, off, end):
        _, off = _take(pkt, lay, mv, off, fast)
    pkt.payload = bytes(mv[off:end])


def pds_ses_layouts(mv: bytes | bytearray | memoryview, off: int, end: int) -> Iterator[Layout]:
    """The layouts of the PDS header at ``mv[off]`` and of the headers after it (SES header,
    extensions), in wire order: the chain's selection and validation rules (module docstring),
    written once for :func:`parse_uet` and for the decoder's summary fast path (tools/decode_fast.py).

    Each header starts where the one before it ends, and the payload follows the last. The
    consumer decodes each header (which checks that its bytes are there, before ``end``) before it
    asks for the next one: the rules for a header read bytes of the ones before it. Raises
    :class:`~uet.errors.DecodeError` where a rule is broken."""
    ptype, nh, flags = pds.PROLOGUE.unpack(mv, off) if end - off >= 2 else pds.PROLOGUE.unpack(mv[:end], off)
    if ptype == tss.TSS_TYPE:
        raise DecodeError("pds", off, "PDS type 0x01 (TSS header) where a PDS header is due")
    cc_byte = mv[off + 12] if ptype in (PdsType.ACK_CC, PdsType.ACK_CCX) and off + 12 < end else None
    lay = pds.pds_layout(ptype, flags, cc_byte)
    if lay is None:
        raise DecodeError("pds", off, f"reserved PDS type {ptype:#04x}")
    if ptype == PdsType.CONTROL:
        if nh not in ControlType._value2member_map_:
            raise DecodeError(lay.name, off, f"reserved control type {nh}")
        yield lay
        return
    if nh not in NextHeader._value2member_map_:
        raise DecodeError(lay.name, off, f"reserved next_hdr {nh:#x}")
    if nh not in ALLOWED_NEXT_HDR[ptype]:
        tname = PdsType(ptype).name
        if ptype in (PdsType.NACK, PdsType.NACK_CCX):
            raise DecodeError(lay.name, off, f"SES header (next_hdr {NextHeader(nh).name}) on a {tname}")
        raise DecodeError(lay.name, off, f"next_hdr {NextHeader(nh).name} not allowed on {tname}")
    yield lay
    off += lay.size
    if nh == NextHeader.NONE:
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
    yield slay
    ses_off = off
    off += slay.size
    if nh in _REQUEST_NH:
        if opcode in ses.RENDEZVOUS_OPCODES and nh != NextHeader.STANDARD:
            raise DecodeError(slay.name, ses_off, f"{SesOpcode(opcode).name} needs the standard SES header")
        if opcode == SesOpcode.SYNC_ATOMIC:
            yield ses.SYNC_EXT
            off += ses.SYNC_EXT.size
            opcode = SesOpcode.ATOMIC
        elay = ses.extension_layout(opcode, mv[off] if off < end else None)
        if elay is not None:
            yield elay


#: The PDS types whose layout depends on the ``cc_type`` byte
ACK_CC_TYPES = frozenset({PdsType.ACK_CC, PdsType.ACK_CCX})


def pds_ses_key(mv: bytes | bytearray | memoryview, off: int, end: int) -> tuple[int | None, ...] | None:
    """The values :func:`pds_ses_layouts` reads from ``mv[off:end]`` to choose and check the
    layouts (None: a byte that is not there), so that two headers with equal keys have the same
    layouts, or the same error: the PDS prologue, the ``cc_type`` byte of an ACK_CC/ACK_CCX, the
    SES header's first two bytes, and the byte after the SES header (and the sync extension) of a
    request. The decoder's summary fast path keeps its plans by this key (and by the same bytes,
    read where :func:`key_pds_layout` and :func:`key_ext_offset` say). None: under 2 bytes."""
    if end - off < 2:
        return None
    ptype, nh, flags = pds.PROLOGUE.unpack(mv, off)
    cc = mv[off + 12] if ptype in ACK_CC_TYPES and off + 12 < end else None
    lay = key_pds_layout(ptype, nh, flags, cc)
    if lay is None:
        return (ptype, nh, flags, cc)
    s = off + lay.size
    b0 = mv[s] if s < end else None
    b1 = mv[s + 1] if s + 1 < end else None
    e = key_ext_offset(nh, b0 or 0, b1 or 0)
    if e is None:
        return (ptype, nh, flags, cc, b0, b1)
    e += s
    return (ptype, nh, flags, cc, b0, b1, mv[e] if e < end else None)


def key_pds_layout(ptype: int, nh: int, flags: int, cc: int | None) -> Layout | None:
    """For :func:`pds_ses_key`: the PDS layout after which the key goes on with the SES header's
    first two bytes, or None where the key ends with the prologue and the ``cc_type`` byte."""
    lay = pds.pds_layout(ptype, flags, cc)
    if lay is None or ptype == PdsType.CONTROL or nh == NextHeader.NONE:
        return None
    return lay


def key_ext_offset(nh: int, b0: int, b1: int) -> int | None:
    """For :func:`pds_ses_key`: where, from the start of the SES header with these first two
    bytes, the byte after it (and the sync extension) is that the key ends with; None where the
    key ends with those two bytes."""
    slay = ses.ses_layout(nh, b0, b1)
    if slay is None or nh not in _REQUEST_NH:
        return None
    return slay.size + (ses.SYNC_EXT.size if b0 & 0x3F == SesOpcode.SYNC_ATOMIC else 0)
