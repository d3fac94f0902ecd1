"""The summary fast path of ``uet-decode``: capture records straight to summary lines.

The general path (tools/decode.py) decodes a frame into :class:`~uet.wire.capture.Frame` and
:class:`~uet.wire.chain.UetPacket` objects, named tuples and field dictionaries, then writes the
line from them. This copy, the hot path of ``uet-decode FILE``, unpacks the fixed headers with
``struct`` (each layout's ``unpack``, plain tuples) and formats the line from the tuples, with
per-layout field positions worked out once. The header chain's selection and validation rules are
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
from uet.wire.chain import enum_name, flag_names, pds_flag_names, pds_ses_layouts
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


def _pds_formatter(lay: Layout) -> Formatter:
    """``_pds_summary`` of tools/decode.py for one PDS layout, from its values tuple."""
    ix = {n: i for i, n in enumerate(lay.field_names)}
    i_psn, i_cack, i_ackoff = ix.get("psn"), ix.get("cack_psn"), ix.get("ack_psn_offset")
    i_opaque, i_nack, i_nack_psn = ix.get("probe_opaque"), ix.get("nack_code"), ix.get("nack_psn")
    i_psnoff = ix.get("psn_offset")
    #: the fields shown as ``name=value``, in the line's order
    plain = [(name, ix[name]) for name in ("pkt_id", "spdcid", "dpdcid") if name in ix]
    i_ccc, i_credit, i_sack, i_sackoff = ix.get("ccc_id"), ix.get("credit_target"), ix.get("sack_bitmap"), None
    if i_sack is not None:
        i_sackoff = ix["sack_psn_offset"]
    i_cctype, i_epsn, i_payload, i_ctl, i_flags = (
        ix.get("cc_type"),
        ix.get("expected_psn"),
        ix.get("payload"),
        ix.get("ctl_type"),
        ix.get("flags"),
    )
    type_names = _Names(PdsType)
    ctl_names = _Names(ControlType)
    nack_names = _Names(lay.fields["nack_code"].enum) if i_nack is not None else None  # type: ignore[union-attr]
    cc_names = _Names(lay.fields["cc_type"].enum) if i_cctype is not None else None  # type: ignore[union-attr]
    flag_text: dict[tuple[int, int], str] = {}

    def fmt(v: tuple[Any, ...]) -> str:
        t = v[0]
        control = t == PdsType.CONTROL
        if control:
            parts = [f"CONTROL {ctl_names[v[i_ctl]]}"]  # type: ignore[index]
        else:
            parts = [type_names[t] or f"type={t}"]
        if i_psn is not None:
            parts.append(f"psn={v[i_psn]}")
            if control and v[i_ctl] == ControlType.PROBE:  # type: ignore[index]
                parts.append(f"opaque={v[i_opaque]:#06x}")  # type: ignore[index]
        if i_cack is not None:
            parts.append(f"cack={v[i_cack]}")
            if i_ackoff is not None:
                parts.append(f"ack_psn={pds.ack_psn(v[i_cack], v[i_ackoff])}")
            if i_opaque is not None:
                parts.append(f"opaque={v[i_opaque]:#06x}")
        if i_nack is not None:
            code = v[i_nack]
            parts.insert(1, nack_names[code] or f"code={code:#x}")  # type: ignore[index]
            parts.append(f"nack_psn={v[i_nack_psn]}")  # type: ignore[index]
        for label, i in plain:
            parts.append(f"{label}={v[i]}")
        if i_psnoff is not None:
            parts.append(f"start_psn={pds.start_psn(v[i_psn], v[i_psnoff])}")  # type: ignore[index]
        if i_ccc is not None:
            parts.append(f"ccc={v[i_ccc]} credit_target={v[i_credit]}")  # type: ignore[index]
        if i_sack is not None:
            base = pds.sack_base(v[i_cack], v[i_sackoff])  # type: ignore[index]
            cc = v[i_cctype]  # type: ignore[index]
            parts.append(f"{cc_names[cc] or cc} sack_base={base} sack={v[i_sack]:#x}")  # type: ignore[index]
        if i_epsn is not None:
            parts.append(f"expected_psn={v[i_epsn]}")
        if i_payload is not None and v[i_payload]:
            parts.append(f"payload={v[i_payload]:#x}")
        if i_flags is not None:
            key = (t, v[i_flags])
            text = flag_text.get(key)
            if text is None:
                text = flag_text[key] = _flags(pds_flag_names(*key))
            parts.append(text)
        return " ".join(x for x in parts if x)

    return fmt


def _ses_formatter(lay: Layout) -> Formatter:
    """``_ses_summary`` of tools/decode.py (without the extensions) for one SES layout."""
    ix = {n: i for i, n in enumerate(lay.field_names)}
    i_op, i_rc, i_msg, i_rmsg, i_job = (
        ix["opcode"],
        ix.get("return_code"),
        ix.get("message_id"),
        ix.get("read_request_message_id"),
        ix["job_id"],
    )
    i_pid, i_ri, i_buf, i_moff = (
        ix.get("pid_on_fep"),
        ix.get("resource_index"),
        ix.get("buffer_offset"),
        ix.get("message_offset"),
    )
    i_match, i_flags = ix.get("match_bits"), ix.get("flags")
    #: the fields shown as ``label=value`` after the offset, in the line's order
    names = (
        ("len", "request_length"),
        ("mod_len", "modified_length"),
        ("pkt_len", "payload_length"),
        ("req_psn", "original_request_psn"),
    )
    lengths = [(label, ix[name]) for label, name in names if name in ix]
    op_names = _Names(lay.fields["opcode"].enum)  # type: ignore[union-attr]
    rc_names = _Names(lay.fields["return_code"].enum) if i_rc is not None else None  # type: ignore[union-attr]
    fenum = lay.fields["flags"].enum if i_flags is not None else None  # type: ignore[union-attr]
    flag_enum: type[IntFlag] | None = None
    if fenum is not None and issubclass(fenum, IntFlag):
        flag_enum = cast("type[IntFlag]", fenum)
    flag_text: dict[int, str] = {}
    has_offset = i_buf is not None or i_moff is not None

    def fmt(v: tuple[Any, ...]) -> str:
        op = v[i_op]
        parts = [op_names[op] or f"opcode={op:#x}"]
        if i_rc is not None:
            rc = v[i_rc]
            parts.append(rc_names[rc] or f"rc={rc:#x}")  # type: ignore[index]
        if i_msg is not None:
            parts.append(f"msg={v[i_msg]}")
        if i_rmsg is not None:
            parts.append(f"read_msg={v[i_rmsg]}")
        parts.append(f"job={v[i_job]:#x}")
        if i_pid is not None:
            parts.append(f"pid={v[i_pid]} ri={v[i_ri]}")  # type: ignore[index]
        if has_offset:
            off = (v[i_buf] if i_buf is not None else 0) + (v[i_moff] if i_moff is not None else 0)
            parts.append(f"offset={off:#x}" if off else "offset=0")
        for label, i in lengths:
            parts.append(f"{label}={v[i]}")
        if i_match is not None and v[i_match]:
            parts.append(f"match={v[i_match]:#x}")
        if i_flags is not None:
            f = v[i_flags]
            text = flag_text.get(f)
            if text is None:
                text = flag_text[f] = _flags(flag_names(flag_enum, f))
            parts.append(text)
        return " ".join(x for x in parts if x)

    return fmt


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
        head = f"{number:5d}"
        if timestamp_ns is not None and t0 is not None:
            head += f" {(timestamp_ns - t0) / 1e9:11.6f}"
        return f"{head} {body}"

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
        if end - off < 8:
            return None
        sport, dport, ulen, csum = _UDP.unpack_from(data, off)
        uend = off + ulen
        if ulen < 8 or uend > end:
            return None
        if len(src) == 16:
            s, d = f"[{s}]", f"[{d}]"
        addr = f"{s}:{sport} → {d}:{dport}{head}"
        if self.port != dport and self.port != sport:
            if dport == net.ROCE_UDP_PORT:
                try:
                    r = parse_roce(data, off + 8, uend, ip_start=ip_off)
                except DecodeError:
                    return None
                return f"{addr} {_roce_summary(r)}" if r.icrc_ok else None
            return f"{addr} not UET (UDP {sport} → {dport})"
        if csum:
            # The one's-complement sum of pseudo-header and datagram, checksum included, is 0
            # modulo 0xFFFF exactly when the checksum is right (net.udp_checksum, inlined: the
            # sum of 16-bit words is the big-endian integer modulo 0xFFFF; an odd byte is padded)
            whole = int.from_bytes(memoryview(data)[off:uend], "big")
            if ulen & 1:
                whole <<= 8
            if (mod_ffff(whole) + int.from_bytes(src + dst, "big") + 17 + ulen) % 0xFFFF:
                if csum != partial_udp_checksum(src, dst, ulen):
                    return None
                self.partial_checksum = True
        uet = self._uet(memoryview(data)[:uend], off + 8, uend)
        return None if uet is None else f"{addr} {uet}"

    def _uet(self, mv: memoryview, off: int, end: int) -> str | None:
        """The UET part of the line for ``mv[off:end]`` (``mv`` ends at ``end``), or None."""
        if off >= end or mv[off] >> 3 == tss.TSS_TYPE:
            return None
        texts = []
        crc_hint = None
        try:
            for lay in pds_ses_layouts(mv, off, end):
                size, rmask, unpack, fmt, hint = _INFO[lay]
                nxt = off + size
                if nxt > end or rmask and int.from_bytes(mv[off:nxt], "big") & rmask:
                    return None  # truncated, or reserved bits set: the general path tells
                v = unpack(mv, off)
                texts.append(fmt(v))
                if hint is not None:
                    crc_hint = hint(v)
                off = nxt
        except DecodeError:
            return None
        plen = end - off
        if plen == crc_hint:
            return None  # the CRC-trailer hint (tools/decode.py _crc_hint) is a warning
        if len(texts) > 1:
            return f"{texts[0]} | {' '.join(x for x in texts[1:] if x)} | payload {plen}"
        return f"{texts[0]} | payload {plen}"


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
