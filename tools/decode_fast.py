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

import struct
from collections.abc import Callable
from enum import IntFlag
from typing import Any, cast

from uet.tools.decode import _flags, _roce_summary

from uet.errors import DecodeError
from uet.wire import net, pds, ses, tss
from uet.wire.capture import partial_udp_checksum
from uet.wire.chain import enum_name, flag_names, pds_flag_names, pds_ses_key, pds_ses_layouts
from uet.wire.layout import Layout
from uet.wire.net import mod_ffff
from uet.wire.pds import ControlType, PdsType
from uet.wire.rocepkt import parse_roce

__all__ = ["FastSummary"]

_ETH = struct.Struct(">6s6sH")
_IPV4 = struct.Struct(">BBHHHBBH4s4s")
_IPV6 = struct.Struct(">IHBB16s16s")
_UDP = struct.Struct(">HHHH")
_H = struct.Struct(">H")
_PFC = struct.Struct(">HH8H")
_RAW_LINKS = frozenset({101, 12, 14, 228, 229})  # capture.LinkType.RAW and its kin
_ECN = {int(e): e.name for e in net.Ecn}

Formatter = Callable[[tuple[Any, ...]], str]


class _Names(dict[int, str | None]):
    """Enum names by value, looked up once each (bounded by the field's width)."""

    def __init__(self, enum: Any) -> None:
        super().__init__()
        self.enum = enum

    def __missing__(self, v: int) -> str | None:
        name = self[v] = enum_name(self.enum, v)
        return name


def _compile(name: str, pieces: list[str], ns: dict[str, Any]) -> Formatter:
    """One function ``fmt(v)`` returning the concatenation of ``pieces`` (expressions over the
    values tuple ``v``, each a string that is empty or starts with a space after the first): a
    single f-string per layout, made once, instead of a list of parts filtered and joined per
    packet."""
    body = "".join("{" + x + "}" for x in pieces)
    src = f"def fmt(v):\n    return f'{body}'"
    exec(compile(src, f"<summary {name}>", "exec"), ns)  # noqa: S102 - our own expressions, from field positions
    return cast("Formatter", ns["fmt"])


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


def _pds_formatter(lay: Layout) -> Formatter:
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
    pieces = [head]
    if "nack_code" in ix:
        pieces.append(f'" " + ({_named(ns, lay, "nack_code", "code")})')
    if "psn" in ix:
        pieces.append(f'" psn=" + str(v[{ix["psn"]}])')
        if i_ctl is not None and i_opaque is not None:  # the control layouts (PROBE: its opaque)
            probe = f"v[0] == CONTROL and v[{i_ctl}] == PROBE"
            pieces.append(f'" opaque=" + format(v[{i_opaque}], "#06x") if {probe} else ""')
    if "cack_psn" in ix:
        i = ix["cack_psn"]
        pieces.append(f'" cack=" + str(v[{i}])')
        if "ack_psn_offset" in ix:
            pieces.append(f'" ack_psn=" + str(ack_psn(v[{i}], v[{ix["ack_psn_offset"]}]))')
        if i_opaque is not None:
            pieces.append(f'" opaque=" + format(v[{i_opaque}], "#06x")')
    if "nack_code" in ix:
        pieces.append(f'" nack_psn=" + str(v[{ix["nack_psn"]}])')
    pieces += [f'" {name}=" + str(v[{ix[name]}])' for name in ("pkt_id", "spdcid", "dpdcid") if name in ix]
    if "psn_offset" in ix:
        pieces.append(f'" start_psn=" + str(start_psn(v[{ix["psn"]}], v[{ix["psn_offset"]}]))')
    if "ccc_id" in ix:
        pieces.append(f'" ccc=" + str(v[{ix["ccc_id"]}]) + " credit_target=" + str(v[{ix["credit_target"]}])')
    if "sack_bitmap" in ix:
        ns["cc_names"] = _Names(lay.fields["cc_type"].enum)  # type: ignore[union-attr]
        ct, base = ix["cc_type"], f"sack_base(v[{ix['cack_psn']}], v[{ix['sack_psn_offset']}])"
        pieces.append(
            f'" " + str(cc_names[v[{ct}]] or v[{ct}]) + " sack_base=" + str({base})'
            f' + " sack=" + format(v[{ix["sack_bitmap"]}], "#x")'
        )
    if "expected_psn" in ix:
        pieces.append(f'" expected_psn=" + str(v[{ix["expected_psn"]}])')
    if "payload" in ix:
        i = ix["payload"]
        pieces.append(f'" payload=" + format(v[{i}], "#x") if v[{i}] else ""')
    if "flags" in ix:
        ns["flags"] = _FlagText(pds_flag_names)
        pieces.append(f"flags[v[0], v[{ix['flags']}]]")
    return _compile(lay.name, pieces, ns)


def _ses_formatter(lay: Layout) -> Formatter:
    """``_ses_summary`` of tools/decode.py (without the extensions) for one SES layout."""
    ix = {n: i for i, n in enumerate(lay.field_names)}
    ns: dict[str, Any] = {}
    pieces = [_named(ns, lay, "opcode", "opcode")]
    if "return_code" in ix:
        pieces.append(f'" " + ({_named(ns, lay, "return_code", "rc")})')
    if "message_id" in ix:
        pieces.append(f'" msg=" + str(v[{ix["message_id"]}])')
    if "read_request_message_id" in ix:
        pieces.append(f'" read_msg=" + str(v[{ix["read_request_message_id"]}])')
    pieces.append(f'" job=" + format(v[{ix["job_id"]}], "#x")')
    if "pid_on_fep" in ix:
        pieces.append(f'" pid=" + str(v[{ix["pid_on_fep"]}]) + " ri=" + str(v[{ix["resource_index"]}])')
    offs = [f"v[{ix[n]}]" for n in ("buffer_offset", "message_offset") if n in ix]
    if offs:
        off = " + ".join(offs)
        pieces.append(f'" offset=" + format({off}, "#x") if {off} else " offset=0"')
    names = (
        ("len", "request_length"),
        ("mod_len", "modified_length"),
        ("pkt_len", "payload_length"),
        ("req_psn", "original_request_psn"),
    )
    pieces += [f'" {label}=" + str(v[{ix[name]}])' for label, name in names if name in ix]
    if "match_bits" in ix:
        i = ix["match_bits"]
        pieces.append(f'" match=" + format(v[{i}], "#x") if v[{i}] else ""')
    if "flags" in ix:
        fenum = lay.fields["flags"].enum  # type: ignore[union-attr]
        flag_enum = cast("type[IntFlag]", fenum) if fenum is not None and issubclass(fenum, IntFlag) else None
        ns["flags"] = _FlagText(lambda f: flag_names(flag_enum, f))
        pieces.append(f"flags[v[{ix['flags']}]]")
    return _compile(lay.name, pieces, ns)


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
            body = self._body(linktype, data)
        except (struct.error, IndexError):
            return None
        if body is None:
            return None
        if timestamp_ns is not None and t0 is not None:
            return f"{number:5d} {(timestamp_ns - t0) / 1e9:11.6f} {body}"
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
        vihl, tos, total, _id, frag, _ttl, proto, _csum, src, dst = _IPV4.unpack_from(data, off)
        hlen = (vihl & 15) * 4
        end = off + total
        if vihl >> 4 != 4 or hlen < 20 or off + hlen > n or total < hlen or end > n or frag & 0x3FFF:
            return None
        if int.from_bytes(data[off : off + hlen], "big") % 0xFFFF:
            return None  # a wrong header checksum: the general path warns (net.inet_checksum, inlined)
        return self._transport(data, off, off + hlen, end, proto, src, dst, tos & 3)

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
            addr, pseudo = known if known is not None else self._udp_addr(akey)
            uend = off + ulen
            if ulen < 8 or uend > end:
                return None
            if self.port != dport and self.port != sport:
                return self._not_uet_udp(data, ip_off, off, uend, sport, dport, addr)
            mv = memoryview(data)
            if csum:
                # The one's-complement sum of pseudo-header and datagram, checksum included, is 0
                # modulo 0xFFFF exactly when the checksum is right (net.udp_checksum, inlined: the
                # sum of 16-bit words is the big-endian integer modulo 0xFFFF; an odd byte is padded)
                whole = int.from_bytes(mv[off:uend], "big")
                if ulen & 1:
                    whole <<= 8
                if ulen > 64:  # the long division is cheap on a short datagram
                    whole = mod_ffff(whole)
                if (whole + pseudo + ulen) % 0xFFFF:
                    if csum != partial_udp_checksum(src, dst, ulen):
                        return None
                    self.partial_checksum = True
            uet = self._uet(mv[:uend], off + 8, uend)
            return None if uet is None else f"{addr} {uet}"
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
        if off >= end or mv[off] >> 3 == tss.TSS_TYPE:
            return None
        key = pds_ses_key(mv, off, end)
        try:
            plan = _PLANS[key]
        except KeyError:
            plan = _plan(mv, off, end, key)
        if plan is None:
            return None
        return plan(mv, off, end)


_Plan = Callable[[memoryview, int, int], str | None]
_PLANS: dict[tuple[int | None, ...] | None, _Plan | None] = {}
_COMPILED: dict[tuple[Layout, ...], _Plan] = {}  # bounded by the layouts' combinations


def _plan(mv: memoryview, off: int, end: int, key: tuple[int | None, ...] | None) -> _Plan | None:
    """The plan for a chain key (:func:`uet.wire.chain.pds_ses_key`: equal keys, equal layouts),
    walked once per key; None where the chain is malformed."""
    plan: _Plan | None = None
    if key is not None:
        try:
            lays = tuple(pds_ses_layouts(mv, off, end))
            plan = _COMPILED.get(lays)
            if plan is None:  # one function per header combination (keys hold a payload byte)
                plan = _COMPILED[lays] = _compile_plan(tuple(_INFO[lay] for lay in lays))
        except DecodeError:
            plan = None
    if len(_PLANS) >= 4096:  # bounded: keys hold a payload byte of some requests
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


def _compile_plan(infos: tuple[tuple[int, int, Callable[..., tuple[Any, ...]], Formatter, Any], ...]) -> _Plan:
    """``plan(mv, off, end)``: the UET part of the line for headers of these layouts at ``mv[off]``
    (None: truncated, reserved bits set, or the CRC-trailer hint, which the general path tells),
    one generated function with no loop: each header's size and reserved-bit check, unpack and
    formatter in wire order, the CRC hint's payload length, then the line's UET part."""
    ns: dict[str, Any] = {"_int": int.from_bytes}
    src = ["def plan(mv, off, end):", "    hint = None"]
    for k, (size, rmask, unpack, fmt, hint) in enumerate(infos):
        ns[f"u{k}"], ns[f"f{k}"], ns[f"h{k}"] = unpack, fmt, hint
        src.append(f"    nxt = off + {size}")
        test = f"nxt > end or _int(mv[off:nxt], 'big') & {rmask:#x}" if rmask else "nxt > end"
        src += [f"    if {test}:", "        return None", f"    v = u{k}(mv, off)", f"    t{k} = f{k}(v)"]
        if hint is not None:
            src.append(f"    hint = h{k}(v)")
        src.append("    off = nxt")
    src += ["    plen = end - off", "    if plen == hint:", "        return None"]
    rest = [f"t{k}" for k in range(1, len(infos))]
    if not rest:
        src.append("    return f'{t0} | payload {plen}'")
    elif len(rest) == 1:
        src.append("    return f'{t0} | {t1} | payload {plen}'")
    else:
        joined = f'" ".join(x for x in ({", ".join(rest)}) if x)'
        src.append(f"    return f'{{t0}} | {{{joined}}} | payload {{plen}}'")
    exec(compile("\n".join(src), "<summary plan>", "exec"), ns)  # noqa: S102 - our own statements
    return cast("_Plan", ns["plan"])


def _crc_hint(lay: Layout) -> Callable[[tuple[Any, ...]], int | None] | None:
    """For an SES layout with ``request_length``: the payload length for which tools/decode.py's
    ``_crc_hint`` warns (a single-packet message 4 bytes longer than its request), else None."""
    if "request_length" not in lay.fields:
        return None
    i_rl, i_flags = lay.field_names.index("request_length"), lay.field_names.index("flags")
    return lambda v: v[i_rl] + 4 if v[i_flags] & 3 == 3 else None


class _Info(dict[Layout, tuple[int, int, Callable[..., tuple[Any, ...]], Formatter, Any]]):
    """Per layout, made on its first packet (so that only the headers a capture holds have their
    codec compiled): size, reserved-bit mask, tuple decoder, formatter, CRC-hint length."""

    def __missing__(self, lay: Layout) -> tuple[int, int, Callable[..., tuple[Any, ...]], Formatter, Any]:
        if lay in _PDS:
            fmt, hint = _pds_formatter(lay), None
        elif lay in _EXTENSIONS:
            fmt, hint = _ext_formatter(lay), None
        else:
            fmt, hint = _ses_formatter(lay), _crc_hint(lay)
        info = self[lay] = (lay.size, lay.reserved_mask, lay.unpack, fmt, hint)
        return info


_PDS = frozenset(pds.ALL_LAYOUTS)
_INFO = _Info()
