"""``uet-decode``: decode UET packets from captures, hex dumps or raw bytes, next to Wireshark.

Inputs: a pcap or pcapng file (detected by magic), a text file of hex (hexdump offsets like
``0000  45 00 ...``, an ASCII column, colons, ``0x`` prefixes and commas are accepted; a blank
line or an offset of 0 starts the next packet), or a raw binary file; ``-`` or no file reads
stdin; ``--hex`` takes the hex on the command line; ``--sample`` decodes the built-in sample.

Bytes that are not a capture are decoded as follows (choices, since the spec notes are silent):
``--bare``: UET starting at TSS/PDS; ``--ether``: an Ethernet frame; otherwise an IPv4 header
(first byte 0x45..0x4F: a bare PDS header starting so would be an ACK_CC with a reserved
next_hdr) or an IPv6 header (at least 40 bytes, next header UDP or 253) is decoded from
IP, bytes whose EtherType at offset 12 is IPv4/IPv6/802.1Q/MAC control as Ethernet, and anything
else as bare UET.

Output: one tshark-like summary line per packet; ``-V`` the layered field tree with enum names and
byte offsets (coloured with rich on a terminal); ``--json`` one JSON object per packet per line
(:meth:`uet.wire.capture.Frame.to_dict`). ``--filter`` keeps packets whose PDS type, SES opcode or
control type name is listed (also ``pfc``, ``tss``, ``roce``, a RoCEv2 opcode name, ``other``);
malformed packets are always
reported. ``--count N`` stops after N reported packets. ``--stats`` ends with counts.

``--keys FILE`` decrypts TSS-protected packets with a secure-domain key file, through the TSS
sublayer's read-only decoder path (:mod:`uet.tss.decoder`, :mod:`uet.tss.keyfile`). A packet no
key authenticates stays encrypted and is not counted as malformed.

Exit status: 0 every packet decoded, 1 some packet malformed or failing its integrity check (a wrong
CRC-32C trailer with ``--crc``, a wrong RoCEv2 ICRC: counted like a malformed packet, also when
``--filter`` leaves it out), 2 usage or file error. Errors are one line, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, cast

from uet.tools.cli import int_arg, port_number

from uet.errors import DecodeError, UetError
from uet.pcap import PcapError, detect_format, read_capture
from uet.wire import net
from uet.wire.capture import Frame, LinkType, parse_frame
from uet.wire.chain import Decryptor, Sealed, UetPacket, fields_dict, parse_uet
from uet.wire.layout import Layout, Raw
from uet.wire.pds import ControlType, PdsType, ack_psn, sack_base, start_psn
from uet.wire.roce import OpCode as RoceOpCode
from uet.wire.rocepkt import RocePacket, syndrome_name
from uet.wire.ses import ResponseOpcode, SesOpcode

PROG = "uet-decode"

EPILOG = """\
examples:
  uet-decode --sample                          decode the built-in sample capture
  uet-decode capture.pcapng                    one summary line per packet
  uet-decode -V capture.pcap                   full field tree with enum names and offsets
  uet-decode --json capture.pcap | jq .uet.pds every field as JSON, one object per line
  uet-decode --filter ack,nack,send --stats capture.pcap
  uet-decode --count 5 --sample
  uet-decode --hex '45 00 00 59 00 00 40 00 40 11 26 92 0a 00 00 01 ...'
  uet-decode --bare --hex '38 00 00 00 00 00 10 00 00 02 00 01'   (a bare ACK)
  uet-decode --keys sd-keys.toml capture.pcap  decrypt TSS packets (key file mode 0600)
  tcpdump -U -w - udp port 4793 | uet-decode -

exit status: 0 all packets decoded; 1 some packet malformed or failing its CRC/ICRC check
(a wrong --crc trailer or RoCEv2 ICRC), or the hex text malformed; 2 usage or file error
"""


class UsageError(UetError):
    """Bad command-line input (unreadable file, unknown filter name, bad option): exit status 2."""


class HexError(UetError):
    """Hex text that is not hex (a stray character, an odd digit count, no bytes at all).

    Malformed input like a malformed packet: one error line and exit status 1 (the usage
    errors, exit 2, are about options and files)."""


@dataclass(slots=True)
class Item:
    """One packet to decode: its number, capture time, link type (None = bare UET) and bytes."""

    number: int
    timestamp_ns: int | None
    linktype: int | None
    data: bytes


# -- input -------------------------------------------------------------------------------------

_OFFSET = re.compile(r"^(0x)?([0-9a-fA-F]{2,8})(:?)$")
_HEXTOK = re.compile(r"^(0x)?([0-9a-fA-F]+)$")


def parse_hex(text: str) -> list[bytes]:
    """Packets from hex text (see the module docstring); raises :class:`HexError` on bad hex."""
    packets: list[bytes] = []
    cur = bytearray()
    for lineno, raw_line in enumerate(text.splitlines(), 1):
        line = raw_line.strip()
        if not line or line.startswith("#"):
            if cur:
                packets.append(bytes(cur))
                cur = bytearray()
            continue
        toks = line.replace(",", " ").split()
        first = _OFFSET.match(toks[0])
        is_offset = False
        if first and len(toks) > 1:
            value = int(first.group(2), 16)
            marked = bool(first.group(3))  # "0x0010:" (tcpdump -x) or "00000010:" (xxd)
            if marked or (len(first.group(2)) >= 4 and (value == len(cur) or value == 0)):
                is_offset = True
                if value == 0 and cur:
                    packets.append(bytes(cur))
                    cur = bytearray()
        if is_offset:
            got = 0
            for t in toks[1:]:
                m = _HEXTOK.match(t.replace(":", ""))
                if not m or len(m.group(2)) % 2 or got >= 16:
                    break  # the ASCII column of a hexdump
                b = bytes.fromhex(m.group(2))
                cur += b
                got += len(b)
            continue
        for t in toks:
            for part in t.split(":"):
                if not part:
                    continue
                m = _HEXTOK.match(part)
                if not m:
                    raise HexError(f"bad hex on line {lineno}: {part!r}")
                digits = m.group(2)
                if len(digits) % 2:
                    if m.group(1) and len(digits) == 1:
                        digits = "0" + digits
                    else:
                        raise HexError(f"bad hex on line {lineno}: odd number of digits in {part!r}")
                cur += bytes.fromhex(digits)
    if cur:
        packets.append(bytes(cur))
    if not packets:
        raise HexError("no hex bytes found")
    return packets


def _looks_textual(data: bytes) -> bool:
    return all(b in (9, 10, 13) or 32 <= b < 127 for b in data[:65536])


def _guess_linktype(data: bytes, args: argparse.Namespace) -> int | None:
    if args.bare:
        return None
    if args.ether:
        return LinkType.ETHERNET
    if data and data[0] >> 4 == 4 and data[0] & 0xF >= 5:
        return LinkType.RAW  # a bare PDS header starting 0x45..0x4F would be ACK_CC with a reserved next_hdr
    if len(data) >= 40 and data[0] >> 4 == 6 and data[6] in (net.IpProto.UDP, net.UET_IP_PROTO):
        return LinkType.RAW
    if len(data) >= 14 and int.from_bytes(data[12:14], "big") in (0x0800, 0x86DD, 0x8100, 0x88A8, 0x8808):
        return LinkType.ETHERNET
    return None


#: One packet as :func:`records` yields it: capture time, link type (None = bare UET), bytes
Record = tuple[int | None, int | None, bytes]


def _bytes_records(packets: list[bytes], args: argparse.Namespace) -> Iterator[Record]:
    return ((None, _guess_linktype(p, args), p) for p in packets)


def _read_all(f: IO[bytes], n: int = -1) -> bytes:
    try:
        if n < 0:
            return f.read()
        chunks, got = [], 0
        while got < n:
            c = f.read(n - got)
            if not c:
                break
            chunks.append(c)
            got += len(c)
        return b"".join(chunks)
    except OSError as e:
        raise UsageError(f"cannot read input: {e.strerror or e}") from None


class _Prefixed:
    """A read-only stream: ``head`` (already consumed for format detection), then ``rest``."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self.head = head
        self.rest = rest

    def read(self, n: int = -1) -> bytes:
        if self.head:
            if n < 0:
                out, self.head = self.head + self.rest.read(), b""
                return out
            out, self.head = self.head[:n], self.head[n:]
            return out
        return self.rest.read(n)


def records(args: argparse.Namespace, stdin: IO[bytes]) -> Iterator[Record]:
    """The packets named by the command line, in order (numbered from 1 by the caller): capture
    records straight from the reader, no object per packet of our own (the summary loop's cost)."""
    if args.sample:
        from uet.interop.samples import load_sample

        return read_capture(load_sample())
    if args.hex is not None:
        return _bytes_records(parse_hex(args.hex), args)
    if args.file in (None, "-"):
        name = "stdin"
        head = _read_all(stdin, 4)
        if args.format in ("auto", "pcap") and detect_format(head):
            return read_capture(cast("IO[bytes]", _Prefixed(head, stdin)))  # streamed: works behind tcpdump -U -w -
        data = head + _read_all(stdin)
    else:
        try:
            with open(args.file, "rb") as f:
                head = f.read(4)
                is_capture = args.format in ("auto", "pcap") and detect_format(head) is not None
                data = b"" if is_capture else head + f.read()
        except OSError as e:
            raise UsageError(f"{args.file}: {e.strerror or e}") from None
        if is_capture:
            return read_capture(args.file)
        name = args.file
    fmt = args.format
    if fmt == "auto":
        fmt = "pcap" if detect_format(data[:4]) else "hex" if data and _looks_textual(data) else "raw"
    if fmt == "pcap":
        if not detect_format(data[:4]):
            raise UsageError(f"{name}: not a pcap or pcapng file")
        return read_capture(data)
    if fmt == "hex":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError(f"{name}: not hex text (not UTF-8)") from None
        return _bytes_records(parse_hex(text), args)
    if not data:
        raise UsageError(f"{name}: empty input")
    return _bytes_records([data], args)


# -- decoding ------------------------------------------------------------------------------------


@dataclass
class Decoded:
    item: Item
    frame: Frame | None = None  # None for bare UET
    uet: UetPacket | None = None
    error: DecodeError | None = None

    @property
    def integrity_failed(self) -> bool:
        """A CRC-32C trailer (``--crc``) or RoCEv2 ICRC that is wrong or missing: counted like a
        malformed packet (exit status 1)."""
        fr = self.frame
        if fr is None:
            return False
        return fr.crc in ("bad", "short") or (fr.roce is not None and fr.roce.icrc_ok is False)

    @property
    def kind(self) -> str:
        if self.error:
            return "malformed"
        if self.frame is not None:
            return self.frame.kind
        return "uet"


def decode_item(item: Item, port: int, decrypt: Decryptor | None = None, crc: bool = False) -> Decoded:
    """Decode one item; ``crc``: frames carry the CRC-32C trailer (checked and stripped)."""
    d = Decoded(item)
    try:
        if item.linktype is None:
            d.uet = parse_uet(item.data, decrypt=decrypt)
        else:
            d.frame = parse_frame(item.data, item.linktype, port=port, decrypt=decrypt, crc=crc)
            d.uet = d.frame.uet
            if not crc:
                _crc_hint(d.frame)
    except DecodeError as e:
        d.error = e
    return d


def _crc_hint(fr: Frame) -> None:
    """Say so when a single-packet message carries exactly 4 bytes more than its request length:
    most likely the CRC-32C trailer of wire-format.md §1.4, shown as payload without ``--crc``."""
    u = fr.uet
    s = u.ses if u is not None else None
    rl = getattr(s, "request_length", None)
    if u is None or s is None or rl is None or (s.flags & 3) != 3 or len(u.payload) != rl + 4:
        return
    fr.warnings.append(f"payload is 4 bytes longer than request_length {rl}: a CRC-32C trailer? (try --crc)")


def _key_decryptor(path: str) -> Decryptor:
    """A decryptor over the TSS sublayer's read-only decoder path (``uet.tss.decoder``) and a key
    file (``uet.tss.keyfile``). Packets need their IP addresses and entropy for the AAD, so bare
    UET input stays encrypted. Imported here so that decoding without ``--keys`` never loads the TSS
    sublayer."""
    from uet.keyfile import load_key_file
    from uet.tss.decoder import decrypt_for_decoder

    table = load_key_file(path, wall_ns=0)  # opens packets only, never seals

    def decrypt(s: Sealed) -> bytes | None:
        if s.src_ip is None or s.dst_ip is None or s.entropy is None:
            return None
        return decrypt_for_decoder(table, s.datagram, s.src_ip, s.dst_ip, s.entropy)

    return decrypt


def _names(d: Decoded) -> set[str]:
    """Names a --filter can match: PDS type, control type, SES opcode, pfc/tss/other."""
    out: set[str] = set()
    if d.frame is not None and d.frame.kind != "uet":
        out.add(d.frame.kind)
    if d.frame is not None and d.frame.roce is not None:
        out.add(d.frame.roce.opcode_name.lower())
    u = d.uet
    if u is None:
        return out
    if u.tss is not None:
        out.add("tss")
    if u.pds_type_name:
        out.add(u.pds_type_name.lower())
    p = u.pds
    if p is not None and u.pds_type == PdsType.CONTROL:
        out.add(ControlType(p.ctl_type).name.lower())
    if u.ses_opcode_name:
        out.add(u.ses_opcode_name.lower())
    return out


FILTER_NAMES = (
    {m.name.lower() for m in PdsType if m != PdsType.TSS}
    | {m.name.lower() for m in SesOpcode}
    | {m.name.lower() for m in ResponseOpcode}
    | {m.name.lower() for m in ControlType}
    | {m.name.lower() for m in RoceOpCode}
    | {"pfc", "tss", "roce", "other"}
)


# -- summary line --------------------------------------------------------------------------------


def _flags(names: list[str]) -> str:
    return "[" + ",".join(names) + "]" if names else ""


#: per layout: the indexes of the fields whose derived output (enum names, flag names, hex of raw
#: bytes) :func:`fields_dict` adds — the key of :data:`_DERIVED`
_DERIVING: dict[Layout, tuple[int, ...]] = {}
#: ``fields_dict`` output beyond the plain integers, per (layout, values of the deriving fields)
_DERIVED: dict[tuple[Any, ...], dict[str, Any]] = {}


_NAMES: dict[tuple[Any, ...], str | None] = {}


def _pds_name(u: UetPacket) -> str | None:
    """``u.pds_type_name``, looked up once per PDS type (the summary and ``--stats`` hot path)."""
    key = ("pds", u.pds_type)
    try:
        return _NAMES[key]
    except KeyError:
        name = _NAMES[key] = u.pds_type_name
        return name


def _ses_name(u: UetPacket) -> str | None:
    """``u.ses_opcode_name``, looked up once per (SES layout, opcode)."""
    sec = u.section("ses")
    if sec is None:
        return None
    key = (sec[0], sec[1].opcode)
    try:
        return _NAMES[key]
    except KeyError:
        name = _NAMES[key] = u.ses_opcode_name
        return name


def _summary_fields(lay: Layout, values: Any) -> dict[str, Any]:
    """:func:`~uet.wire.chain.fields_dict` for the summary line, fast: the names it derives from
    enum, flag and raw fields depend only on those fields (and the PDS type, field 0), so they are
    computed once per distinct combination by ``fields_dict`` itself and reused; the plain
    integers are taken as they are. A test checks it equals ``fields_dict`` on every packet of
    the sample captures."""
    idx = _DERIVING.get(lay)
    if idx is None:
        idx = _DERIVING[lay] = tuple(
            i
            for i, name in enumerate(lay.field_names)
            if i == 0 or name == "flags" or getattr(lay.fields[name], "enum", True) is not None  # Raw: no enum
        )
    key = (lay, *[values[i] for i in idx])
    derived = _DERIVED.get(key)
    if derived is None:
        full = fields_dict(lay, values)
        plain = {name for name in lay.field_names if not isinstance(lay.fields[name], Raw)}
        derived = {k: v for k, v in full.items() if k not in plain}
        if len(_DERIVED) >= 8192:  # bounded: hostile captures cannot grow it for ever
            _DERIVED.clear()
        _DERIVED[key] = derived
    out = dict(zip(lay.field_names, values, strict=True))
    out.update(derived)
    return out


def _pds_summary(u: UetPacket) -> str:
    lay, p = u.section("pds") or (None, None)
    if p is None:
        return ""
    d = _summary_fields(lay, p)  # type: ignore[arg-type]
    t = u.pds_type
    parts = [_pds_name(u) or f"type={t}"]
    if t == PdsType.CONTROL:
        parts[0] = f"CONTROL {ControlType(p.ctl_type).name}"
    if "psn" in d and t != PdsType.CONTROL:
        parts.append(f"psn={d['psn']}")
    if t == PdsType.CONTROL:
        parts.append(f"psn={d['psn']}")
        if p.ctl_type == ControlType.PROBE:
            parts.append(f"opaque={d['probe_opaque']:#06x}")
    if "cack_psn" in d:
        parts.append(f"cack={d['cack_psn']}")
        if "ack_psn_offset" in d:
            parts.append(f"ack_psn={ack_psn(d['cack_psn'], d['ack_psn_offset'])}")
        if "probe_opaque" in d:
            parts.append(f"opaque={d['probe_opaque']:#06x}")
    if "nack_code" in d:
        parts.insert(1, d["nack_code_name"] or f"code={d['nack_code']:#x}")
        parts.append(f"nack_psn={d['nack_psn']}")
    if "pkt_id" in d:
        parts.append(f"pkt_id={d['pkt_id']}")
    if "spdcid" in d:
        parts.append(f"spdcid={d['spdcid']}")
    if "dpdcid" in d:
        parts.append(f"dpdcid={d['dpdcid']}")
    if "psn_offset" in d:
        parts.append(f"start_psn={start_psn(d['psn'], d['psn_offset'])}")
    if "ccc_id" in d:
        parts.append(f"ccc={d['ccc_id']} credit_target={d['credit_target']}")
    if "sack_bitmap" in d:
        base = sack_base(d["cack_psn"], d["sack_psn_offset"])
        parts.append(f"{d['cc_type_name'] or d['cc_type']} sack_base={base} sack={d['sack_bitmap']:#x}")
    if "expected_psn" in d:
        parts.append(f"expected_psn={d['expected_psn']}")
    if "payload" in d and d["payload"]:
        parts.append(f"payload={d['payload']:#x}")
    parts.append(_flags(d.get("flags_names", [])))
    return " ".join(x for x in parts if x)


def _ses_summary(u: UetPacket) -> str:
    sec = u.section("ses")
    if sec is None:
        return ""
    lay, s = sec
    d = _summary_fields(lay, s)
    parts = [d.get("opcode_name") or f"opcode={d['opcode']:#x}"]
    if "return_code" in d:
        parts.append(d["return_code_name"] or f"rc={d['return_code']:#x}")
    if "message_id" in d:
        parts.append(f"msg={d['message_id']}")
    if "read_request_message_id" in d:
        parts.append(f"read_msg={d['read_request_message_id']}")
    parts.append(f"job={d['job_id']:#x}")
    if "pid_on_fep" in d:
        parts.append(f"pid={d['pid_on_fep']} ri={d['resource_index']}")
    off = d.get("buffer_offset", 0) + d.get("message_offset", 0)
    if "buffer_offset" in d or "message_offset" in d:
        parts.append(f"offset={off:#x}" if off else "offset=0")
    if "request_length" in d:
        parts.append(f"len={d['request_length']}")
    if "modified_length" in d:
        parts.append(f"mod_len={d['modified_length']}")
    if "payload_length" in d:
        parts.append(f"pkt_len={d['payload_length']}")
    if "original_request_psn" in d:
        parts.append(f"req_psn={d['original_request_psn']}")
    if d.get("match_bits"):
        parts.append(f"match={d['match_bits']:#x}")
    parts.append(_flags(d.get("flags_names", [])))
    for elay, e in u.extensions:
        ed = _summary_fields(elay, e)
        if "atomic_opcode" in ed:
            parts.append(f"{ed['atomic_opcode_name'] or hex(ed['atomic_opcode'])}/{ed['atomic_datatype_name']}")
            if "compare_value" in ed:
                parts.append(f"cmp={ed['compare_value']:#x} swap={ed['swap_value']:#x}")
        elif "eager_length" in ed:
            parts.append(f"eager={ed['eager_length']} read_off={ed['read_offset']:#x}")
        elif "group" in ed:
            parts.append(f"sync group={ed['group']} count={ed['count']}")
    return " ".join(x for x in parts if x)


def _addr(fr: Frame) -> str:
    if fr.src is None:
        eth = fr.layer("ethernet")
        if eth is not None:
            return f"{net.mac_str(eth.src)} → {net.mac_str(eth.dst)}"
        return ""
    if fr.sport is not None:
        s = f"[{fr.src}]" if ":" in fr.src else fr.src
        t = f"[{fr.dst}]" if ":" in (fr.dst or "") else fr.dst
        return f"{s}:{fr.sport} → {t}:{fr.dport}"
    extra = ""
    if fr.uet is not None and fr.uet.entropy is not None:
        extra = f" ip/{net.UET_IP_PROTO} entropy={fr.uet.entropy.entropy:#06x}"
    return f"{fr.src} → {fr.dst}{extra}"


def summary(d: Decoded, t0: int | None) -> str:
    it = d.item
    head = f"{it.number:5d}"
    if it.timestamp_ns is not None and t0 is not None:
        head += f" {(it.timestamp_ns - t0) / 1e9:11.6f}"
    fr = d.frame
    if fr is not None:
        a = _addr(fr)
        if a:
            head += " " + a
        if fr.ecn:
            head += f" ecn={net.Ecn(fr.ecn).name}"
    if fr is not None and fr.kind == "pfc" and fr.pfc is not None:
        p = fr.pfc
        paused = [f"prio{i}={getattr(p, f'quanta{i}')}" for i in range(8) if p.class_enable >> i & 1]
        body = "PFC " + (" ".join(paused) or "no classes enabled")
    elif fr is not None and fr.roce is not None:
        body = _roce_summary(fr.roce)
    elif fr is not None and fr.kind == "other":
        body = f"not UET ({fr.note})"
    else:
        u = d.uet
        assert u is not None
        parts = []
        if u.tss is not None:
            tv = u.tss
            done = " decrypted" if u.decrypted else ""
            parts.append(f"TSS sdi={tv.sdi} an={tv.an} epoch={tv.epoch} tsc={tv.tsc}{done}")
        if u.encrypted:
            why = " (no key authenticates it)" if u.decrypt_failed else ""
            parts.append(f"encrypted {len(u.ciphertext or b'')} bytes + {len(u.icv or b'')}-byte ICV{why}")
        else:
            parts.append(_pds_summary(u))
            s = _ses_summary(u)
            if s:
                parts.append(s)
            parts.append(f"payload {len(u.payload)}")
        body = " | ".join(parts)
    line = f"{head} {body}"
    warnings = _warnings(d)
    if warnings:
        line += "  [warning: " + "; ".join(warnings) + "]"
    return line


def _warnings(d: Decoded) -> list[str]:
    """The frame's warnings, or for bare UET bytes those of its headers (reserved bits)."""
    if d.frame is not None:
        return d.frame.warnings
    return d.uet.reserved_warnings() if d.uet is not None and d.uet.reserved else []


def _roce_summary(r: RocePacket) -> str:
    """RoCEv2 summary: opcode, QP, PSN, the extension headers' key fields, ICRC (§2–§5)."""
    b = r.bth
    parts = [f"RoCEv2 {r.opcode_name} qp={b.dest_qp:#08x} psn={b.psn}"]
    flags = [n for n, v in (("ackreq", b.ack_req), ("se", b.se), ("fecn", b.fecn), ("becn", b.becn)) if v]
    if flags:
        parts[0] += " " + _flags(flags)
    if r.reth is not None:
        parts.append(f"va={r.reth.va:#x} rkey={r.reth.rkey:#x} len={r.reth.dma_len}")
    if r.atomic_eth is not None:
        a = r.atomic_eth
        parts.append(f"va={a.va:#x} rkey={a.rkey:#x} swap_add={a.swap_add} compare={a.compare}")
    if r.aeth is not None:
        parts.append(f"{syndrome_name(r.aeth.syndrome)} msn={r.aeth.msn}")
    if r.atomic_ack is not None:
        parts.append(f"orig={r.atomic_ack.orig}")
    if r.immdt is not None:
        parts.append(f"imm={r.immdt.imm:#x}")
    icrc = {True: "ok", False: "BAD", None: "unchecked"}[r.icrc_ok]
    parts.append(f"payload {len(r.payload)} icrc={r.icrc.hex()} {icrc}")
    return " | ".join(parts)


def error_line(d: Decoded) -> str:
    e = d.error
    assert e is not None
    return f"frame {d.item.number}: malformed: {e.header} at offset {e.offset}: {e.reason}"


# -- verbose tree --------------------------------------------------------------------------------

_ADDR_FIELDS = {("ethernet", "src"), ("ethernet", "dst"), ("ipv4", "src"), ("ipv4", "dst")}
_ADDR_FIELDS |= {("ipv6", "src"), ("ipv6", "dst")}


def _field_lines(lay: Layout, values: Any, base: int) -> list[tuple[str, str, str]]:
    d = fields_dict(lay, values)
    out = []
    for name in lay.field_names:
        f = lay.fields[name]
        v = getattr(values, name)
        at = f"@{base + lay.field_offset[name]}"
        if isinstance(f, Raw):
            if (lay.name, name) in _ADDR_FIELDS:
                shown = net.mac_str(v) if lay.name == "ethernet" else net.ip_str(bytes(v))
            else:
                shown = bytes(v).hex()
            out.append((at, name, shown))
            continue
        extra = ""
        if name == "flags":
            extra = _flags(d.get("flags_names", []))
        elif name + "_name" in d:
            extra = d[name + "_name"] or "(unassigned)"
        shown = f"{v} ({v:#x})" if v > 9 else str(v)
        out.append((at, name, f"{shown}  {extra}".rstrip()))
    return out


def tree(d: Decoded) -> list[tuple[int, str, str]]:
    """(indent, text, style) lines of the field tree."""
    it = d.item
    lines: list[tuple[int, str, str]] = []
    head = f"Frame {it.number}: {len(it.data)} bytes"
    if it.timestamp_ns is not None:
        ts = datetime.fromtimestamp(it.timestamp_ns // 1_000_000_000, UTC)
        head += f", {ts:%Y-%m-%d %H:%M:%S}.{it.timestamp_ns % 1_000_000_000:09d} UTC"
    if it.linktype is not None:
        head += f", link type {_linkname(it.linktype)}"
    lines.append((0, head, "bold"))
    sections: list[tuple[Layout, Any, int]] = []
    if d.frame is not None:
        sections += d.frame.layers
    u = d.uet
    if u is not None:
        sections += [(lay, v, off) for (lay, v), off in zip(u.sections, u.offsets, strict=True)]
    r = d.frame.roce if d.frame is not None else None
    if r is not None:
        sections += r.sections()
    reserved = {} if u is None else {(u.sections[i][0], u.offsets[i]): rv for i, rv in u.reserved.items()}
    for lay, v, off in sections:
        lines.append((1, f"{lay.name}  @{off}, {lay.size} bytes", "bold cyan"))
        if lay.name in ("ipv4", "ipv6"):
            ip = v
            lines.append((2, f"{net.ip_str(bytes(ip.src))} → {net.ip_str(bytes(ip.dst))}", "dim"))
        for at, name, shown in _field_lines(lay, v, off):
            lines.append((2, f"{at:<6} {name:<24} {shown}", ""))
        for name, val in reserved.get((lay, off), {}).items():
            lines.append((2, f"{'@' + str(off + int(name[9:]) // 8):<6} {name:<24} {val:#x}  [not zero]", "yellow"))
        derived = {}
        if u is not None and (lay, v) in u.sections and lay is u.pds_layout:
            full = u.to_dict()["pds"]
            derived = {k: full[k] for k in ("clear_psn", "start_psn", "ack_psn", "sack_base_psn") if k in full}
        for k, val in derived.items():
            lines.append((2, f"{'':<6} {k:<24} {val} (derived)", "dim"))
    if d.frame is not None and d.frame.note:
        lines.append((1, f"not UET: {d.frame.note}", "yellow"))
    for w in _warnings(d):
        lines.append((1, f"warning: {w}", "yellow"))
    if r is not None:
        lines.append((1, f"payload  @{r.payload_offset}, {len(r.payload)} bytes: {_hexcut(r.payload)}", "green"))
        state = {True: "correct", False: "WRONG", None: "not checked"}[r.icrc_ok]
        lines.append((1, f"icrc  {r.icrc.hex()} ({state})", "green" if r.icrc_ok else "yellow"))
    if u is not None:
        if u.decrypted:
            lines.append((1, "(the headers after the TSS header were decrypted with --keys)", "magenta"))
        if u.decrypt_failed:
            lines.append((1, "no key in the key file authenticates this packet", "yellow"))
        if u.ciphertext is not None and not u.decrypted:
            lines.append((1, f"ciphertext  {len(u.ciphertext)} bytes: {_hexcut(u.ciphertext)}", "magenta"))
            lines.append((1, f"icv  {(u.icv or b'').hex()}", "magenta"))
        else:
            end = u.end - len(u.payload)
            lines.append((1, f"payload  @{end}, {len(u.payload)} bytes: {_hexcut(u.payload)}", "green"))
    if d.error is not None:
        lines.append((1, error_line(d), "bold red"))
    return lines


def _hexcut(b: bytes, n: int = 64) -> str:
    return b[:n].hex(" ") + (" ..." if len(b) > n else "")


def _linkname(lt: int) -> str:
    try:
        return f"{LinkType(lt).name} ({lt})"
    except ValueError:
        return str(lt)


# -- main ----------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from uet.tools.cli import ArgumentParser

    p = ArgumentParser(
        prog=PROG,
        description="Decode Ultra Ethernet Transport packets from pcap/pcapng captures, hex or raw bytes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="pcap, pcapng, hex text or raw bytes; '-' or none: stdin")
    p.add_argument("--format", choices=("auto", "pcap", "hex", "raw"), default="auto", help="input format (auto)")
    p.add_argument("--hex", metavar="HEX", help="decode this hex instead of a file")
    p.add_argument("--sample", action="store_true", help="decode the built-in sample capture")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--bare", action="store_true", help="hex/raw bytes are UET starting at TSS/PDS")
    g.add_argument("--ether", action="store_true", help="hex/raw bytes are an Ethernet frame")
    p.add_argument("--port", type=port_number, default=net.UET_UDP_PORT, help="UET UDP port (default %(default)s)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("-V", "--verbose", action="store_true", help="print the full field tree")
    out.add_argument("--json", action="store_true", help="one JSON object per packet per line")
    p.add_argument(
        "--filter",
        metavar="NAMES",
        help="comma-separated exact names of PDS types (ack, rud_req...), SES opcodes (send, read...), "
        "control types (probe...), pfc, tss or other",
    )
    p.add_argument("--stats", action="store_true", help="print counts per PDS type, SES opcode and errors")
    p.add_argument("-q", "--quiet", action="store_true", help="no per-packet lines (with --stats: the counts only)")
    p.add_argument("--count", type=int_arg(1), metavar="N", help="stop after N reported packets")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour for -V (auto: TTY)")
    p.add_argument(
        "--crc",
        action="store_true",
        help="UET packets end with the CRC-32C trailer (wire-format.md §1.4): check, strip",
    )
    p.add_argument(
        "--keys",
        metavar="FILE",
        help="TSS key file (TOML, the format uet-peer --keys takes) to decrypt secured packets",
    )
    return p


class _Out:
    def __init__(self, stream: IO[str], color: str) -> None:
        self.stream = stream
        use = color == "always" or (color == "auto" and _isatty(stream))
        self.console = None
        if use:
            from rich.console import Console

            self.console = Console(file=stream, highlight=False, force_terminal=True, soft_wrap=True)

    def line(self, text: str, style: str = "") -> None:
        if self.console is not None and style:
            from rich.text import Text

            self.console.print(Text(text, style=style))
        elif self.console is not None:
            from rich.text import Text

            self.console.print(Text(text))
        else:
            self.stream.write(text + "\n")


def _isatty(s: IO[str]) -> bool:
    try:
        return s.isatty()
    except (AttributeError, ValueError):
        return False


def run(args: argparse.Namespace, stdout: IO[str], stdin: IO[bytes]) -> int:
    sources = [
        n
        for n, given in (("FILE", args.file is not None), ("--hex", args.hex is not None), ("--sample", args.sample))
        if given
    ]
    if len(sources) > 1:
        raise UsageError(f"give one input, not {' and '.join(sources)}")
    decrypt = _key_decryptor(args.keys) if args.keys is not None else None
    if args.count is not None and args.count < 0:
        raise UsageError("--count must be 0 or more")
    if not 0 <= args.port <= 0xFFFF:
        raise UsageError(f"--port {args.port} outside 0..65535")
    wanted: set[str] | None = None
    if args.filter is not None:
        wanted = {n.strip().lower() for n in args.filter.split(",") if n.strip()}
        bad = sorted(wanted - FILTER_NAMES)
        if bad:
            raise UsageError(
                f"--filter: unknown name(s) {', '.join(bad)}; names are PDS types, SES opcodes, "
                "control types, pfc, tss, other"
            )
    out = _Out(stdout, args.color)
    stats: Counter[str] = Counter()
    malformed = 0
    shown = 0
    partial_said = False
    t0: int | None = None
    file_error: UetError | None = None
    fast = None
    if not (args.json or args.verbose or args.quiet or args.stats or args.crc) and wanted is None and decrypt is None:
        if out.console is None:
            from uet.tools.decode_fast import FastSummary

            fast = FastSummary(args.port)
    count = args.count
    fast_line = fast.line if fast is not None else None
    write = stdout.write
    try:
        for number, (ts, linktype, data) in enumerate(records(args, stdin), 1):
            if count is not None and shown >= count:
                break
            if t0 is None and ts is not None:
                t0 = ts
            if fast_line is not None and linktype is not None:
                line = fast_line(number, ts, t0, linktype, data)
                if line is not None:  # the summary fast path (tools/decode_fast.py): the same line
                    shown += 1
                    if not partial_said and fast.partial_checksum:  # type: ignore[union-attr]
                        partial_said = True
                        print(f"{PROG}: note: {_PARTIAL_NOTE}", file=sys.stderr)
                    write(line + "\n")
                    continue
            d = decode_item(Item(number, ts, linktype, data), args.port, decrypt, args.crc)
            _count(stats, d)
            if d.error is not None or d.integrity_failed:
                malformed += 1
            if d.error is None and wanted is not None and not (_names(d) & wanted):
                continue
            shown += 1
            if not partial_said and d.frame is not None and d.frame.udp_checksum_partial:
                partial_said = True
                print(f"{PROG}: note: {_PARTIAL_NOTE}", file=sys.stderr)
            if not args.quiet:
                _emit(out, d, args, t0)
    except (PcapError, UsageError) as e:
        file_error = e
    if args.stats:
        _emit_stats(out, stats, args.json)
    if file_error is not None:
        raise file_error
    return 1 if malformed else 0


_PARTIAL_NOTE = (
    "UDP checksums hold only the pseudo-header sum (checksum offload on the capturing host, e.g. "
    "tcpdump -i lo): not checked"
)


def _emit(out: _Out, d: Decoded, args: argparse.Namespace, t0: int | None) -> None:
    if args.json:
        obj: dict[str, Any] = {"frame": d.item.number}
        if d.item.timestamp_ns is not None:
            obj["timestamp_ns"] = d.item.timestamp_ns
        if d.error is not None:
            obj["malformed"] = {"header": d.error.header, "offset": d.error.offset, "reason": d.error.reason}
        elif d.frame is not None:
            obj.update(d.frame.to_dict())
        elif d.uet is not None:
            obj["kind"] = "uet"
            obj["uet"] = d.uet.to_dict()
        out.line(json.dumps(obj, separators=(",", ":")))
    elif args.verbose:
        for indent, text, style in tree(d):
            out.line("  " * indent + text, style)
        out.line("")
    elif d.error is not None:
        out.line(error_line(d), "bold red")
    else:
        out.line(summary(d, t0))


def _count(stats: Counter[str], d: Decoded) -> None:
    stats["packets"] += 1
    if d.error is not None:
        stats["malformed"] += 1
        return
    if d.frame is not None and d.frame.kind != "uet":
        stats[d.frame.kind] += 1
        if d.frame.roce is not None:
            stats["roce:" + d.frame.roce.opcode_name] += 1
            stats["roce_icrc_bad"] += d.frame.roce.icrc_ok is False
        return
    u = d.uet
    if u is None:
        return
    if d.frame is not None and d.frame.crc in ("bad", "short"):
        stats["crc_bad"] += 1
    if u.tss is not None:
        stats["tss"] += 1
    if u.encrypted:
        stats["encrypted"] += 1
    name = _pds_name(u)
    if name:
        stats["pds:" + name] += 1
    if u.pds_type == PdsType.CONTROL and u.pds is not None:
        stats["control:" + ControlType(u.pds.ctl_type).name] += 1
    name = _ses_name(u)
    if name:
        stats["ses:" + name] += 1


def _emit_stats(out: _Out, stats: Counter[str], as_json: bool) -> None:
    if as_json:
        out.line(json.dumps({"stats": dict(sorted(stats.items()))}, separators=(",", ":")))
        return
    out.line("")
    out.line(f"packets: {stats['packets']}  malformed: {stats['malformed']}", "bold")
    titles = (("pds:", "PDS type"), ("control:", "control type"), ("ses:", "SES opcode"), ("roce:", "RoCEv2 opcode"))
    for prefix, title in titles:
        rows = sorted((k[len(prefix) :], v) for k, v in stats.items() if k.startswith(prefix))
        if rows:
            out.line(f"{title}:", "bold")
            for k, v in rows:
                out.line(f"  {k:<24} {v}")
    others = [
        (k, stats[k]) for k in ("tss", "encrypted", "crc_bad", "pfc", "roce", "roce_icrc_bad", "other") if stats[k]
    ]
    if others:
        out.line("other:", "bold")
        for k, v in others:
            out.line(f"  {k:<24} {v}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``uet-decode``; returns the exit status (0, 1 or 2)."""
    from uet.tools.cli import UsageError, honour_ctrl_c, report_usage_error

    parser = build_parser()
    try:
        honour_ctrl_c()  # Ctrl-C as in every tool (tools/cli.py), also one that came during start-up
        args = parser.parse_args(argv)
    except UsageError as e:  # one line, exit 2 (tools/cli.py)
        return report_usage_error(PROG, e)
    except SystemExit as e:  # --help / --version
        return int(e.code) if isinstance(e.code, int) else 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    stdout = sys.stdout
    try:
        stdin = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else io.BytesIO(b"")
        return run(args, stdout, stdin)
    except HexError as e:
        print(f"{PROG}: malformed hex: {e}", file=sys.stderr)
        return 1
    except UetError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        with contextlib.suppress(Exception):
            sys.stdout = None
        return 0
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # never a traceback: one line, exit 2
        print(f"{PROG}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
