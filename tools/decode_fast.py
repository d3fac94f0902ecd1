"""The summary fast path of ``uet-decode``: capture records straight to summary lines.

The general path (tools/decode.py) decodes a frame into :class:`~uet.wire.capture.Frame` and
:class:`~uet.wire.chain.UetPacket` objects, named tuples and field dictionaries, then writes the
line from them. This copy, the hot path of ``uet-decode FILE``, unpacks the fixed headers with
``struct`` (each layout's ``unpack``, plain tuples) and formats the line from the tuples, by one
f-string function per layout generated on its first packet (field positions and the parts the
layout has worked out once). The header chain's selection and validation rules are
not copied: both paths walk :func:`uet.wire.chain.pds_ses_layouts`.

It handles the frames a capture is made of: Ethernet (no VLAN tag) or raw IP, IPv4/IPv6, UDP or IP
protocol 253, every PDS type and SES header, PFC and other non-UET frames, RoCEv2 with a correct
ICRC. Everything else returns None and goes the general way: malformed or truncated headers, a
warning of any kind (checksums, non-zero reserved bits, the CRC-trailer hint), TSS, VLAN tags,
IPv4 fragments, other link types. tests/test_decode_fast_path.py proves the two paths write the same
line, by a property test over every layout.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from enum import IntFlag
from typing import Any, NamedTuple, cast

from uet.tools.decode import _flags, _roce_summary

from uet.errors import DecodeError
from uet.wire import net, pds, ses, tss
from uet.wire.capture import partial_udp_checksum
from uet.wire.chain import (
    ACK_CC_TYPES,
    enum_name,
    flag_names,
    key_ext_offset,
    key_pds_layout,
    pds_flag_names,
    pds_ses_key,
    pds_ses_layouts,
)
from uet.wire.layout import Layout, _sign_extend
from uet.wire.net import mod_ffff
from uet.wire.pds import ControlType, NextHeader, PdsType
from uet.wire.rocepkt import parse_roce

__all__ = ["FastSummary"]

_ETH = struct.Struct(">6s6sH")
_IPV4 = struct.Struct(">BBHHHBBH4s4s")
_IPV6 = struct.Struct(">IHBB16s16s")
_UDP = struct.Struct(">HHHH")
_IPV4_UDP = struct.Struct(">BBHHHBBHIIHHHH")  # a 20-byte IPv4 header (addresses as integers) and UDP
_H = struct.Struct(">H")
_PFC = struct.Struct(">HH8H")
_RAW_LINKS = frozenset({101, 12, 14, 228, 229})  # capture.LinkType.RAW and its kin
_ECN = {int(e): e.name for e in net.Ecn}

Formatter = Callable[[tuple[Any, ...]], str]


def _addresses(data: bytes, ip_off: int) -> tuple[bytes, bytes]:
    """The source and destination address of the IPv4 or IPv6 header at ``data[ip_off]``."""
    if data[ip_off] >> 4 == 4:
        return data[ip_off + 12 : ip_off + 16], data[ip_off + 16 : ip_off + 20]
    return data[ip_off + 8 : ip_off + 24], data[ip_off + 24 : ip_off + 40]


class _Names(dict[int, str | None]):
    """Enum names by value, looked up once each (bounded by the field's width)."""

    def __init__(self, enum: Any) -> None:
        super().__init__()
        self.enum = enum

    def __missing__(self, v: int) -> str | None:
        name = self[v] = enum_name(self.enum, v)
        return name


class _Text(NamedTuple):
    """A header's part of the line as the body of an f-string over its values tuple ``v`` (text,
    and expressions in braces that are strings, empty or starting with a space after the first),
    with the tables and helpers those expressions name (names that no other header's text uses)."""

    body: str
    ns: dict[str, Any]


def _named(ns: dict[str, Any], lay: Layout, field: str, label: str) -> str:
    """The expression: the enum name of the layout's ``field`` (its table put in ``ns``), else
    ``label=0x..``."""
    i, table = lay.field_names.index(field), f"{field}_names"
    ns[table] = _Names(lay.fields[field].enum)  # type: ignore[union-attr]
    return f'{table}[v[{i}]] or "{label}=" + format(v[{i}], "#x")'


class _FlagText(dict[Any, str]):
    """``" [A,B]"`` (or "" without flags) for ``names(*key)`` (a tuple key) or ``names(key)``,
    by key, each made once (bounded by the fields' widths): a hit is a dictionary lookup."""

    def __init__(self, names: Callable[..., list[str]]) -> None:
        super().__init__()
        self.names = names

    def __missing__(self, key: Any) -> str:
        f = _flags(self.names(*key) if isinstance(key, tuple) else self.names(key))
        t = self[key] = f" {f}" if f else ""
        return t


def _pds_text(lay: Layout) -> _Text:
    """``_pds_summary`` of tools/decode.py for one PDS layout, from its values tuple."""
    ix = {n: i for i, n in enumerate(lay.field_names)}
    i_ctl, i_opaque = ix.get("ctl_type"), ix.get("probe_opaque")
    ns: dict[str, Any] = {
        "type_names": _Names(PdsType),
        "ctl_names": _Names(ControlType),
        "ack_psn": pds.ack_psn,
        "start_psn": pds.start_psn,
        "sack_base": pds.sack_base,
        "CONTROL": int(PdsType.CONTROL),
        "PROBE": int(ControlType.PROBE),
    }
    head = 'type_names[v[0]] or "type=" + str(v[0])'
    if i_ctl is not None:
        head = f'"CONTROL " + str(ctl_names[v[{i_ctl}]]) if v[0] == CONTROL else ({head})'
    body = [f"{{{head}}}"]
    if "nack_code" in ix:
        body.append(f" {{{_named(ns, lay, 'nack_code', 'code')}}}")
    if "psn" in ix:
        body.append(f" psn={{v[{ix['psn']}]}}")
        if i_ctl is not None and i_opaque is not None:  # the control layouts (PROBE: its opaque)
            probe = f"v[0] == CONTROL and v[{i_ctl}] == PROBE"
            body.append(f'{{" opaque=" + format(v[{i_opaque}], "#06x") if {probe} else ""}}')
    if "cack_psn" in ix:
        i = ix["cack_psn"]
        body.append(f" cack={{v[{i}]}}")
        if "ack_psn_offset" in ix:
            body.append(f" ack_psn={{ack_psn(v[{i}], v[{ix['ack_psn_offset']}])}}")
        if i_opaque is not None:
            body.append(f" opaque={{v[{i_opaque}]:#06x}}")
    if "nack_code" in ix:
        body.append(f" nack_psn={{v[{ix['nack_psn']}]}}")
    body += [f" {name}={{v[{ix[name]}]}}" for name in ("pkt_id", "spdcid", "dpdcid") if name in ix]
    if "psn_offset" in ix:
        body.append(f" start_psn={{start_psn(v[{ix['psn']}], v[{ix['psn_offset']}])}}")
    if "ccc_id" in ix:
        body.append(f" ccc={{v[{ix['ccc_id']}]}} credit_target={{v[{ix['credit_target']}]}}")
    if "sack_bitmap" in ix:
        ns["cc_names"] = _Names(lay.fields["cc_type"].enum)  # type: ignore[union-attr]
        ct, base = ix["cc_type"], f"sack_base(v[{ix['cack_psn']}], v[{ix['sack_psn_offset']}])"
        body.append(f" {{cc_names[v[{ct}]] or v[{ct}]}} sack_base={{{base}}} sack={{v[{ix['sack_bitmap']}]:#x}}")
    if "expected_psn" in ix:
        body.append(f" expected_psn={{v[{ix['expected_psn']}]}}")
    if "payload" in ix:
        i = ix["payload"]
        body.append(f'{{" payload=" + format(v[{i}], "#x") if v[{i}] else ""}}')
    if "flags" in ix:
        ns["pds_flags"] = _FlagText(pds_flag_names)
        body.append(f"{{pds_flags[v[0], v[{ix['flags']}]]}}")
    return _Text("".join(body), ns)


def _ses_text(lay: Layout) -> _Text:
    """``_ses_summary`` of tools/decode.py (without the extensions) for one SES layout."""
    ix = {n: i for i, n in enumerate(lay.field_names)}
    ns: dict[str, Any] = {}
    body = [f"{{{_named(ns, lay, 'opcode', 'opcode')}}}"]
    if "return_code" in ix:
        body.append(f" {{{_named(ns, lay, 'return_code', 'rc')}}}")
    if "message_id" in ix:
        body.append(f" msg={{v[{ix['message_id']}]}}")
    if "read_request_message_id" in ix:
        body.append(f" read_msg={{v[{ix['read_request_message_id']}]}}")
    body.append(f" job={{v[{ix['job_id']}]:#x}}")
    if "pid_on_fep" in ix:
        body.append(f" pid={{v[{ix['pid_on_fep']}]}} ri={{v[{ix['resource_index']}]}}")
    offs = [f"v[{ix[n]}]" for n in ("buffer_offset", "message_offset") if n in ix]
    if offs:
        off = " + ".join(offs)
        body.append(f' offset={{format({off}, "#x") if {off} else 0}}')
    names = (
        ("len", "request_length"),
        ("mod_len", "modified_length"),
        ("pkt_len", "payload_length"),
        ("req_psn", "original_request_psn"),
    )
    body += [f" {label}={{v[{ix[name]}]}}" for label, name in names if name in ix]
    if "match_bits" in ix:
        i = ix["match_bits"]
        body.append(f'{{" match=" + format(v[{i}], "#x") if v[{i}] else ""}}')
    if "flags" in ix:
        fenum = lay.fields["flags"].enum  # type: ignore[union-attr]
        flag_enum = cast("type[IntFlag]", fenum) if fenum is not None and issubclass(fenum, IntFlag) else None
        ns["ses_flags"] = _FlagText(lambda f: flag_names(flag_enum, f))
        body.append(f"{{ses_flags[v[{ix['flags']}]]}}")
    return _Text("".join(body), ns)


def _ext_formatter(lay: Layout) -> Formatter:
    """The extension parts of ``_ses_summary`` for one extension layout."""
    ix = {n: i for i, n in enumerate(lay.field_names)}
    if "atomic_opcode" in ix:
        i_op, i_dt, i_cmp, i_swap = (
            ix["atomic_opcode"],
            ix["atomic_datatype"],
            ix.get("compare_value"),
            ix.get("swap_value"),
        )
        op_names = _Names(lay.fields["atomic_opcode"].enum)  # type: ignore[union-attr]
        dt_names = _Names(lay.fields["atomic_datatype"].enum)  # type: ignore[union-attr]

        def atomic(v: tuple[Any, ...]) -> str:
            op = v[i_op]
            s = f"{op_names[op] or hex(op)}/{dt_names[v[i_dt]]}"
            if i_cmp is not None:
                s += f" cmp={v[i_cmp]:#x} swap={v[i_swap]:#x}"  # type: ignore[index]
            return s

        return atomic
    if "eager_length" in ix:
        i_eager, i_roff = ix["eager_length"], ix["read_offset"]
        return lambda v: f"eager={v[i_eager]} read_off={v[i_roff]:#x}"
    if "group" in ix:
        i_group, i_count = ix["group"], ix["count"]
        return lambda v: f"sync group={v[i_group]} count={v[i_count]}"
    return lambda v: ""


_EXTENSIONS = frozenset({ses.ATOMIC_EXT, ses.CSWAP_EXT, ses.RENDEZVOUS_EXT, ses.SYNC_EXT})


class FastSummary:
    """Summary lines of ``uet-decode`` for capture records, or None where the general path must
    write it (module docstring). ``partial_checksum`` turns True at the first UET frame whose UDP
    checksum holds only the pseudo-header sum (the decoder's one-time note)."""

    def __init__(self, port: int = net.UET_UDP_PORT) -> None:
        self.port = port
        self.partial_checksum = False
        self._ip: dict[bytes, str] = {}
        self._addr: dict[tuple[bytes, bytes, int, int, int], tuple[str, int]] = {}
        self._addr4: dict[int, tuple[str, int]] = {}  # _addr's entries of IPv4, by one integer

    def _ip_str(self, raw: bytes) -> str:
        s = self._ip.get(raw)
        if s is None:
            if len(self._ip) >= 4096:  # bounded: a hostile capture cannot grow it for ever
                self._ip.clear()
            s = self._ip[raw] = net.ip_str(raw)
        return s

    def line(self, number: int, timestamp_ns: int | None, t0: int | None, linktype: int, data: bytes) -> str | None:
        """The summary line of one record (``t0``: the first record's timestamp), or None."""
        try:
            if linktype == 1 and data[12:14] == b"\x08\x00":  # Ethernet and IPv4: the MACs are not shown
                body = self._ipv4(data, 14, len(data))
            else:
                body = self._body(linktype, data)
        except (struct.error, IndexError):
            return None
        if body is None:
            return None
        if timestamp_ns is not None and t0 is not None:
            return "%5d %11.6f %s" % (number, (timestamp_ns - t0) / 1e9, body)  # noqa: UP031 - faster here
        return f"{number:5d} {body}"

    def _body(self, linktype: int, data: bytes) -> str | None:
        n = len(data)
        if linktype == 1:
            dst, src, etype = _ETH.unpack_from(data, 0)
            off = 14
            if etype == 0x0800:
                return self._ipv4(data, off, n)
            if etype == 0x86DD:
                return self._ipv6(data, off, n)
            macs = f"{net.mac_str(src)} → {net.mac_str(dst)}"
            if etype == 0x8100 or etype == 0x88A8:
                return None
            if etype == 0x8808:
                opcode = _H.unpack_from(data, off)[0]
                if opcode != net.PFC_OPCODE:
                    return f"{macs} not UET (MAC control opcode {opcode:#06x} (not PFC))"
                if n - off < net.PFC.size:
                    return None
                _op, enable, *quanta = _PFC.unpack_from(data, off)
                paused = " ".join(f"prio{i}={quanta[i]}" for i in range(8) if enable >> i & 1)
                return f"{macs} PFC " + (paused or "no classes enabled")
            return f"{macs} not UET (EtherType {etype:#06x})"
        if linktype in _RAW_LINKS and n:
            ver = data[0] >> 4
            if ver == 4:
                return self._ipv4(data, 0, n)
            if ver == 6:
                return self._ipv6(data, 0, n)
        return None

    def _ipv4(self, data: bytes, off: int, n: int) -> str | None:
        if n - off >= 28:  # the common case in one unpack: a 20-byte header and UDP
            vihl, tos, total, _id, frag, _ttl, proto, _csum, src, dst, sport, dport, ulen, csum = _IPV4_UDP.unpack_from(
                data, off
            )
            if vihl == 0x45 and proto == 17:
                end, udp = off + total, off + 20
                if total < 28 or end > n or frag & 0x3FFF:
                    return None
                if int.from_bytes(data[off:udp], "big") % 0xFFFF:
                    return None  # a wrong header checksum: the general path warns (net.inet_checksum, inlined)
                uend = udp + ulen
                if ulen < 8 or uend > end:
                    return None
                akey = (src << 32 | dst) << 34 | sport << 18 | dport << 2 | tos & 3
                known = self._addr4.get(akey)
                if known is None:
                    b = (src << 32 | dst).to_bytes(8, "big")
                    known = self._addr4[akey] = self._udp_addr((b[:4], b[4:], sport, dport, tos & 3))
                    if len(self._addr4) >= 4096:  # bounded, as _addr is
                        self._addr4.clear()
                return self._udp(data, off, udp, uend, sport, dport, csum, known)
        vihl, tos, total, _id, frag, _ttl, proto, _csum, bsrc, bdst = _IPV4.unpack_from(data, off)
        hlen = (vihl & 15) * 4
        end = off + total
        if vihl >> 4 != 4 or hlen < 20 or off + hlen > n or total < hlen or end > n or frag & 0x3FFF:
            return None
        if int.from_bytes(data[off : off + hlen], "big") % 0xFFFF:
            return None  # a wrong header checksum: the general path warns (net.inet_checksum, inlined)
        return self._transport(data, off, off + hlen, end, proto, bsrc, bdst, tos & 3)

    def _ipv6(self, data: bytes, off: int, n: int) -> str | None:
        word, plen, nh, _hops, src, dst = _IPV6.unpack_from(data, off)
        start = off + 40
        end = start + plen if plen else n
        if word >> 28 != 6 or end > n:
            return None
        return self._transport(data, off, start, end, nh, src, dst, (word >> 20) & 3)

    def _transport(
        self, data: bytes, ip_off: int, off: int, end: int, proto: int, src: bytes, dst: bytes, ecn: int
    ) -> str | None:
        if proto == 17 and end - off >= 8:
            sport, dport, ulen, csum = _UDP.unpack_from(data, off)
            akey = (src, dst, sport, dport, ecn)
            known = self._addr.get(akey)
            if known is None:
                known = self._udp_addr(akey)
            uend = off + ulen
            if ulen < 8 or uend > end:
                return None
            return self._udp(data, ip_off, off, uend, sport, dport, csum, known)
        s, d = self._ip_str(src), self._ip_str(dst)
        head = f" ecn={_ECN[ecn]}" if ecn else ""
        if proto == net.UET_IP_PROTO:
            if off + 4 > end or data[off + 2] or data[off + 3]:  # truncated, or reserved bits set
                return None
            uet = self._uet(memoryview(data)[:end], off + 4, end)
            if uet is None:
                return None
            entropy = _H.unpack_from(data, off)[0]
            return f"{s} → {d} ip/{net.UET_IP_PROTO} entropy={entropy:#06x}{head} {uet}"
        if proto != 17:
            return f"{s} → {d}{head} not UET (IP protocol {proto})"
        return None  # a UDP header cut short

    def _udp(
        self, data: bytes, ip_off: int, off: int, uend: int, sport: int, dport: int, csum: int, known: tuple[str, int]
    ) -> str | None:
        """The line's part from the UDP datagram ``data[off:uend]`` on (``known``: _udp_addr's)."""
        addr, pseudo = known
        if self.port != dport and self.port != sport:
            return self._not_uet_udp(data, ip_off, off, uend, sport, dport, addr)
        mv = memoryview(data)
        if csum:
            # The one's-complement sum of pseudo-header and datagram, checksum included, is 0
            # modulo 0xFFFF exactly when the checksum is right (net.udp_checksum, inlined: the
            # sum of 16-bit words is the big-endian integer modulo 0xFFFF; an odd byte is padded)
            ulen = uend - off
            whole = int.from_bytes(mv[off:uend], "big")
            if ulen & 1:
                whole <<= 8
            if ulen > 64:  # the long division is cheap on a short datagram
                whole = mod_ffff(whole)
            if (whole + pseudo + ulen) % 0xFFFF:
                if csum != partial_udp_checksum(*_addresses(data, ip_off), ulen):
                    return None
                self.partial_checksum = True
        uet = self._uet(mv[:uend], off + 8, uend)
        return None if uet is None else f"{addr} {uet}"

    def _udp_addr(self, key: tuple[bytes, bytes, int, int, int]) -> tuple[str, int]:
        """``src:sport → dst:dport`` and the ECN mark, and the pseudo-header's sum without the
        length (the addresses as one integer, plus the protocol), kept per key (a bounded table)."""
        src, dst, sport, dport, ecn = key
        s, d = self._ip_str(src), self._ip_str(dst)
        if len(src) == 16:
            s, d = f"[{s}]", f"[{d}]"
        if len(self._addr) >= 4096:
            self._addr.clear()
        addr = f"{s}:{sport} → {d}:{dport}" + (f" ecn={_ECN[ecn]}" if ecn else "")
        known = self._addr[key] = (addr, int.from_bytes(src + dst, "big") + 17)
        return known

    def _not_uet_udp(
        self, data: bytes, ip_off: int, off: int, uend: int, sport: int, dport: int, addr: str
    ) -> str | None:
        """The line of a UDP datagram to another port: RoCEv2 (with a right ICRC) or not UET."""
        if dport == net.ROCE_UDP_PORT:
            try:
                r = parse_roce(data, off + 8, uend, ip_start=ip_off)
            except DecodeError:
                return None
            return f"{addr} {_roce_summary(r)}" if r.icrc_ok else None
        return f"{addr} not UET (UDP {sport} → {dport})"

    def _uet(self, mv: memoryview, off: int, end: int) -> str | None:
        """The UET part of the line for ``mv[off:end]`` (``mv`` ends at ``end``), or None."""
        if end - off < 2:
            return None
        b = mv[off]
        if b >> 3 == tss.TSS_TYPE:
            return None
        # the plan by the bytes pds_ses_key reads, as integers in tables by how far it reads
        # (the prologue determines that), without building the key: _kind says where to look
        k = b << 8 | mv[off + 1]
        kind = _KIND.get(k)
        if kind is None:
            kind = _kind(k)
        if kind == _PROLOGUE_ONLY:
            table, key = _BY_PROLOGUE, k
        elif kind == _CC_BYTE:
            c = off + 12
            table, key = _BY_CC, k << 9 | (mv[c] if c < end else 256)
        elif kind > 0 and off + kind + 1 < end:  # the PDS header's size: the SES header's 2 bytes
            s = off + kind
            k2 = k << 16 | mv[s] << 8 | mv[s + 1]
            ext = _EXT.get(k2)
            if ext is None:
                ext = _ext(k2)
            if ext < 0:
                table, key = _BY_SES, k2
            else:
                e = s + ext
                table, key = _BY_EXT, k2 << 9 | (mv[e] if e < end else 256)
        else:
            table, key = _BY_CHAIN_KEY, 0
        try:
            plan = table[key]
        except KeyError:
            chain_key = pds_ses_key(mv, off, end)
            try:
                plan = _PLANS[chain_key]
            except KeyError:
                plan = _plan(mv, off, end, chain_key)
            if table is not _BY_CHAIN_KEY:
                if len(table) >= 4096:  # bounded: keys hold a payload byte of some requests
                    table.clear()
                table[key] = plan
        if plan is None:
            return None
        return plan(mv, off, end)


_Plan = Callable[[memoryview, int, int], str | None]
_PLANS: dict[tuple[int | None, ...] | None, _Plan | None] = {}
_COMPILED: dict[tuple[Layout, ...], _Plan] = {}  # bounded by the layouts' combinations

# FastSummary._uet's tables: the plan by the bytes pds_ses_key reads, as one integer; the prologue
# (16 bits) says which: itself only, the cc_type byte too, or the SES header's first two bytes
# after a PDS header of a size (and, by _EXT, maybe the byte after the SES header); 256: absent
_PROLOGUE_ONLY, _CC_BYTE, _ANY = 0, 1, -1
_KIND: dict[int, int] = {}  # prologue -> _PROLOGUE_ONLY, _CC_BYTE, _ANY (pds_ses_key) or the PDS size
_EXT: dict[int, int] = {}  # prologue and SES bytes -> where the byte after the SES header is, or -1
_BY_PROLOGUE: dict[int, _Plan | None] = {}
_BY_CC: dict[int, _Plan | None] = {}
_BY_SES: dict[int, _Plan | None] = {}
_BY_EXT: dict[int, _Plan | None] = {}
_BY_CHAIN_KEY: dict[int, _Plan | None] = {}  # a marker, always empty: pds_ses_key itself


def _kind(k: int) -> int:
    """_KIND's entry for a prologue (bounded: 16 bits)."""
    ptype, nh, flags = k >> 11, (k >> 7) & 0xF, k & 0x7F
    if ptype in ACK_CC_TYPES:
        kind = _CC_BYTE if nh == NextHeader.NONE else _ANY
    else:
        lay = key_pds_layout(ptype, nh, flags, None)
        kind = _PROLOGUE_ONLY if lay is None else lay.size
    _KIND[k] = kind
    return kind


def _ext(k2: int) -> int:
    """_EXT's entry for a prologue and the SES header's first two bytes (a bounded table)."""
    ext = key_ext_offset((k2 >> 23) & 0xF, (k2 >> 8) & 0xFF, k2 & 0xFF)
    if len(_EXT) >= 4096:
        _EXT.clear()
    _EXT[k2] = -1 if ext is None else ext
    return _EXT[k2]


def _plan(mv: memoryview, off: int, end: int, key: tuple[int | None, ...] | None) -> _Plan | None:
    """The plan for a chain key (:func:`uet.wire.chain.pds_ses_key`: equal keys, equal layouts),
    walked once per key; None where the chain is malformed."""
    plan: _Plan | None = None
    if key is not None:
        try:
            lays = tuple(pds_ses_layouts(mv, off, end))
            plan = _COMPILED.get(lays)
            if plan is None:  # one function per header combination (keys hold a payload byte)
                plan = _COMPILED[lays] = _compile_plan(lays)
        except DecodeError:
            plan = None
    if len(_PLANS) >= 4096:  # bounded: keys hold a payload byte of some requests
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _compile_plan(lays: tuple[Layout, ...]) -> _Plan:
    """``plan(mv, off, end)``: the UET part of the line for headers of these layouts at ``mv[off]``
    (None: truncated, reserved bits set, or the CRC-trailer hint, which the general path tells),
    one generated function with no loop or call of ours: the headers' size and reserved bits
    checked at once (one integer, the layouts' masks side by side), then per header in wire order
    its struct unpacked (and its bit fields cut, as :attr:`Layout.unpack` does) into ``v`` and its
    text formatted, then the CRC hint's payload length, then the line's UET part."""
    ns: dict[str, Any] = {"_int": int.from_bytes, "_sx": _sign_extend}
    total = sum(lay.size for lay in lays)
    mask, at = 0, 0
    for lay in lays:
        at += lay.size
        mask |= lay.reserved_mask << 8 * (total - at)
    test = f"nxt > end or _int(mv[off:nxt], 'big') & {mask:#x}" if mask else "nxt > end"
    src = ["def plan(mv, off, end):", f"    nxt = off + {total}", f"    if {test}:", "        return None"]
    hint = "None"
    at = 0
    for k, lay in enumerate(lays):
        ns[f"s{k}"] = lay._struct.unpack_from
        where = f"off + {at}" if at else "off"
        names, pre, values = lay.unpack_steps
        src += [f"    {', '.join(names)}, = s{k}(mv, {where})", *(f"    {p}" for p in pre)]
        info = _INFO[lay]
        if isinstance(info, _Text):
            ns.update(info.ns)
            text = f"    t{k} = f'{info.body}'"
        else:  # an extension's formatter: the values tuple
            ns[f"e{k}"] = info
            src.append(f"    v = ({', '.join(values)},)")
            text = f"    t{k} = e{k}(v)"
        if "request_length" in lay.fields and lay not in _EXTENSIONS:
            # tools/decode.py's _crc_hint: a single-packet message 4 bytes longer than its request
            i_rl, i_flags = lay.field_names.index("request_length"), lay.field_names.index("flags")
            text += f"\n    hint = v[{i_rl}] + 4 if v[{i_flags}] & 3 == 3 else None"
            hint = "hint"
        src.append(_fields_by_name(text, values, src))
        at += lay.size
    src += ["    plen = end - nxt", f"    if plen == {hint}:", "        return None"]
    rest = [f"t{k}" for k in range(1, len(lays))]
    if not rest:
        src.append("    return f'{t0} | payload {plen}'")
    elif len(rest) == 1:
        src.append("    return f'{t0} | {t1} | payload {plen}'")
    else:
        joined = f'" ".join(x for x in ({", ".join(rest)}) if x)'
        src.append(f"    return f'{{t0}} | {{{joined}}} | payload {{plen}}'")
    exec(compile("\n".join(src), "<summary plan>", "exec"), ns)  # noqa: S102 - our own statements
    return cast("_Plan", ns["plan"])


def _fields_by_name(text: str, values: list[str], src: list[str]) -> str:
    """``text`` with each ``v[i]`` replaced by the field's value: its struct value's name, or a
    name bound (in ``src``) to its expression once, for the fields ``text`` uses."""
    bound: set[int] = set()

    def name(m: re.Match[str]) -> str:
        i = int(m.group(1))
        expr = values[i]
        if expr.isidentifier():
            return expr
        if i not in bound:
            bound.add(i)
            src.append(f"    f{i} = {expr}")
        return f"f{i}"

    return _FIELD.sub(name, text)


_FIELD = re.compile(r"\bv\[(\d+)\]")


class _Info(dict[Layout, "_Text | Formatter"]):
    """Per layout, made on its first packet (so that only the headers a capture holds have their
    text made): the text of a PDS or SES header, the formatter function of an extension."""

    def __missing__(self, lay: Layout) -> _Text | Formatter:
        info: _Text | Formatter
        if lay in _PDS:
            info = _pds_text(lay)
        elif lay in _EXTENSIONS:
            info = _ext_formatter(lay)
        else:
            info = _ses_text(lay)
        self[lay] = info
        return info


_PDS = frozenset(pds.ALL_LAYOUTS)
_INFO = _Info()
