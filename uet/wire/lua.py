"""The Wireshark Lua dissector the project ships (``interop/wireshark/uet.lua``), generated from
the header declarations: ``python -m uet.wire.lua > interop/wireshark/uet.lua``.

One source of truth: every field of every header comes from its :class:`~uet.wire.layout.Layout`
(name, byte offset, bit position, width, signedness, reserved runs), and the choice of a header's
variant from the decoder's own selection functions (:func:`~uet.wire.pds.pds_layout`,
:func:`~uet.wire.ses.ses_layout`, :func:`~uet.wire.ses.extension_layout`,
:func:`~uet.wire.tss.tss_layout`), tabulated by running them over every input byte value that
changes their answer. Only the walk of the header chain (wire-format.md §2: entropy, TSS, PDS,
SES, extensions, payload) is written by hand in the template below, as :mod:`uet.wire.chain`
writes it. A test checks that the committed file equals :func:`generate` and that tshark with it
shows exactly the fields ``uet-decode --json`` shows, frame by frame.

Fields are ``uet.<header>.<field>`` (the layout's name, as ``uet-decode --json`` calls it in
``header``), plus ``uet.payload`` / ``uet.payload_length``; a run of reserved bits that is not
zero appears as ``uet.<header>.reserved_<bit>`` with an expert warning, as in the decoder.
The dissector registers on UDP port 4793 (both directions) and IP protocol 253.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

from uet.wire import net, pds, ses, tss
from uet.wire.layout import F, Layout, Raw
from uet.wire.pds import NextHeader, PdsType
from uet.wire.ses import SesOpcode

__all__ = ["generate", "LAYOUTS"]

#: every header the dissector knows, in a fixed order
LAYOUTS: list[Layout] = list(dict.fromkeys([tss.ENTROPY, *tss.ALL_LAYOUTS, *pds.ALL_LAYOUTS, *ses.ALL_LAYOUTS]))


def _lua_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _var(lay: Layout) -> str:
    return f'LAY["{lay.name}"]'


def _fields(lay: Layout) -> tuple[list[str], list[str]]:
    """(ProtoField declarations, descriptor rows) of one layout."""
    decls, rows = [], []
    for w in lay._words:
        if isinstance(w, Raw):
            v = f'FLD["uet.{lay.name}.{w.name}"]'
            decls.append(f'{v} = ProtoField.bytes("uet.{lay.name}.{w.name}", "{w.name}")')
            rows.append(f"{{{v}, {lay.field_offset[w.name]}, {w.nbytes}, -1, 0, false}}")
            continue
        pos = 0
        for it in w.items:
            if isinstance(it, F):
                v = f'FLD["uet.{lay.name}.{it.name}"]'
                kind = "int32" if it.signed else ("uint64" if it.bits > 32 else "uint32")
                if it.bits > 64:  # wider than any ProtoField integer: its decimal digits, as a string
                    assert pos % 8 == 0 and it.bits % 8 == 0, (lay.name, it.name)
                    decls.append(f'{v} = ProtoField.string("uet.{lay.name}.{it.name}", "{it.name}")')
                else:
                    decls.append(f'{v} = ProtoField.{kind}("uet.{lay.name}.{it.name}", "{it.name}", base.DEC)')
                start, nbytes = pos // 8, (pos + it.bits + 7) // 8 - pos // 8  # the bytes the field touches
                signed = "true" if it.signed else "false"
                rows.append(f"{{{v}, {w.offset + start}, {nbytes}, {pos % 8}, {it.bits}, {signed}}}")
            pos += it.bits
    for name, at, bits in lay.reserved:
        v = f'FLD["uet.{lay.name}.{name}"]'
        decls.append(f'{v} = ProtoField.uint64("uet.{lay.name}.{name}", "{name}", base.HEX)')
        start = at // 8
        nbytes = (at + bits + 7) // 8 - start
        rows.append(f"{{{v}, {start}, {nbytes}, {at - start * 8}, {bits}, false, true}}")
    return decls, rows


def _table(name: str, entries: Iterable[tuple[int, Layout]]) -> list[str]:
    body = ", ".join(f"[{k}] = {_var(lay)}" for k, lay in entries)
    return [f"local {name} = {{{body}}}"]


def _mask(fn: Callable[[int], Layout | None], bits: int) -> int:
    """The input bits that change ``fn``'s answer somewhere in ``0 .. 2**bits - 1``."""
    vals = [fn(x) for x in range(1 << bits)]
    m = 0
    for b in range(bits):
        step = 1 << b  # inputs differing in bit b only: the halves of each block of 2 * step
        if any(vals[i : i + step] != vals[i + step : i + 2 * step] for i in range(0, 1 << bits, 2 * step)):
            m |= step
    return m


def _pds_tables() -> list[str]:
    """``PDS[type] = {mask, cc, map}``: the PDS layout from (flags & mask) and, for the types
    whose layout depends on it, the cc nibble (byte 12 >> 4): key = cc << 8 | flags & mask."""
    out = ["local PDS = {}"]
    for t in range(32):
        if t == tss.TSS_TYPE or pds.pds_layout(t, 0) is None:
            continue
        cc = t in (PdsType.ACK_CC, PdsType.ACK_CCX)

        def fn(x: int, t: int = t, cc: bool = cc) -> Layout | None:
            return pds.pds_layout(t, x & 0x7F, (x >> 7) << 4 if cc else None)

        m = _mask(fn, 11 if cc else 7)
        keys = sorted({x & m for x in range(1 << (11 if cc else 7))})
        entries = [(((k >> 7) << 8) | (k & 0x7F), fn(k)) for k in keys]
        body = ", ".join(f"[{k}] = {_var(lay)}" for k, lay in entries if lay is not None)
        out.append(f"PDS[{t}] = {{mask = {m & 0x7F}, cc = {'true' if cc else 'false'}, map = {{{body}}}}}")
    return out


def _ses_tables() -> list[str]:
    """``SES[next_hdr] = {m0, m1, map}``: the SES layout from its first two bytes, key = (b0 &
    m0) << 8 | b1 & m1."""
    out = ["local SES = {}"]
    for nh in NextHeader:
        if ses.ses_layout(nh, 0, 0) is None:
            continue

        def fn(x: int, nh: int = nh) -> Layout | None:
            return ses.ses_layout(nh, x >> 8, x & 0xFF)

        m = _mask(fn, 16)
        entries = [(k, fn(k)) for k in sorted({x & m for x in range(1 << 16)})]
        body = ", ".join(f"[{k}] = {_var(lay)}" for k, lay in entries if lay is not None)
        out.append(f"SES[{int(nh)}] = {{m0 = {m >> 8}, m1 = {m & 0xFF}, map = {{{body}}}}}")
    return out


def _ext_tables() -> list[str]:
    """``EXT[opcode] = {mask, map}``: the extension after a request, key = next byte & mask."""
    out = ["local EXT = {}"]
    for op in range(64):
        if ses.extension_layout(op, 0) is None:
            continue

        def fn(x: int, op: int = op) -> Layout | None:
            return ses.extension_layout(op, x)

        m = _mask(fn, 8)
        entries = [(k, fn(k)) for k in sorted({x & m for x in range(256)})]
        body = ", ".join(f"[{k}] = {_var(lay)}" for k, lay in entries if lay is not None)
        out.append(f"EXT[{op}] = {{mask = {m}, map = {{{body}}}}}")
    return out


def generate() -> str:
    """The dissector's Lua source."""
    decls: list[str] = []
    layouts: list[str] = []
    for lay in LAYOUTS:
        d, rows = _fields(lay)
        decls += d
        layouts.append(f"{_var(lay)} = {{name = {_lua_str(lay.name)}, size = {lay.size}, fields = {{")
        layouts += [f"  {r}," for r in rows]
        layouts.append("}}")
    tables = [
        *_pds_tables(),
        *_ses_tables(),
        *_ext_tables(),
        *_table("TSS", ((b, tss.tss_layout(b)) for b in (0, 0x04))),
    ]
    consts = {
        "UDP_PORT": net.UET_UDP_PORT,
        "IP_PROTO": net.UET_IP_PROTO,
        "TSS_TYPE": tss.TSS_TYPE,
        "ICV_LEN": tss.ICV_LEN,
        "CONTROL": int(PdsType.CONTROL),
        "SYNC_ATOMIC": int(SesOpcode.SYNC_ATOMIC),
        "ATOMIC": int(SesOpcode.ATOMIC),
        "TSS_SP": 0x04,
    }
    request_nh = ", ".join(f"[{int(n)}] = true" for n in (NextHeader.SMALL, NextHeader.MEDIUM, NextHeader.STANDARD))
    parts = [
        HEADER,
        *[f"local {k} = {v}" for k, v in consts.items()],
        f"local REQUEST_NH = {{{request_nh}}}",
        "local FLD = {}",
        "local LAY = {}",
        "",
        *decls,
        'local f_payload = ProtoField.bytes("uet.payload", "payload")',
        'local f_payload_length = ProtoField.uint32("uet.payload_length", "payload_length", base.DEC)',
        'local f_ciphertext = ProtoField.bytes("uet.ciphertext", "ciphertext")',
        'local f_icv = ProtoField.bytes("uet.icv", "icv")',
        "local all = {f_payload, f_payload_length, f_ciphertext, f_icv}",
        "for _, f in pairs(FLD) do all[#all + 1] = f end",
        "uet.fields = all",
        "",
        *layouts,
        "",
        *tables,
        f"local L_entropy = {_var(tss.ENTROPY)}",
        f"local L_ses_sync_ext = {_var(ses.SYNC_EXT)}",
        BODY,
    ]
    return "\n".join(parts) + "\n"


HEADER = """\
-- Ultra Ethernet Transport (UET) dissector for Wireshark / tshark.
-- GENERATED by `python -m uet.wire.lua` from uet/wire/layout.py's declarations: do not edit.
-- Install: copy to ~/.local/lib/wireshark/plugins/ (Wireshark >= 3.6), or run
--   tshark -X lua_script:uet.lua -r capture.pcapng
local uet = Proto("uet", "Ultra Ethernet Transport")
local ef_reserved = ProtoExpert.new("uet.reserved", "reserved bits not zero",
  expert.group.PROTOCOL, expert.severity.WARN)
local ef_malformed = ProtoExpert.new("uet.malformed", "malformed UET packet",
  expert.group.MALFORMED, expert.severity.ERROR)
uet.experts = {ef_reserved, ef_malformed}
"""

BODY = """
-- the decimal digits of a big-endian unsigned integer of any length (16-bit limbs: exact in a double)
local function decimal(r)
  local limbs = {}
  for i = 0, r:len() - 2, 2 do limbs[#limbs + 1] = r(i, 2):uint() end
  local digits = ""
  repeat
    local rem, nonzero = 0, false
    for i = 1, #limbs do
      local cur = rem * 65536 + limbs[i]
      limbs[i] = math.floor(cur / 1000000000)
      rem = cur % 1000000000
      if limbs[i] ~= 0 then nonzero = true end
    end
    digits = (nonzero and string.format("%09d", rem) or tostring(rem)) .. digits
  until not nonzero
  return digits
end

local function value(buf, off, row)
  local r = buf(off + row[2], row[3])
  if row[4] < 0 then return r, nil end
  local v
  if row[5] > 64 then
    v = decimal(r)
  elseif row[5] > 32 then
    v = r:bitfield(row[4], row[5])
    if type(v) == "number" then v = UInt64(v) end
  else
    v = r:bitfield(row[4], row[5])
    if type(v) ~= "number" then v = v:tonumber() end
    if row[6] and v >= 2 ^ (row[5] - 1) then v = v - 2 ^ row[5] end
  end
  return r, v
end

-- one header: its fields, and its reserved runs when not zero; false when the bytes run out
local function header(buf, tree, pinfo, off, L)
  if buf:len() < off + L.size then
    tree:add_proto_expert_info(ef_malformed, L.name .. ": truncated")
    return false
  end
  local sub = tree:add(uet, buf(off, L.size), L.name)
  for _, row in ipairs(L.fields) do
    local r, v = value(buf, off, row)
    if row[7] then
      if v ~= 0 and not (type(v) ~= "number" and v == UInt64(0)) then
        local item = sub:add(row[1], r, type(v) == "number" and UInt64(v) or v)
        item:add_proto_expert_info(ef_reserved)
      end
    elseif v == nil then
      sub:add(row[1], r)
    else
      sub:add(row[1], r, v)
    end
  end
  return true
end

local function byte(buf, off)
  if off < buf:len() then return buf(off, 1):uint() end
  return nil
end

local function payload(buf, tree, off, stop)
  local n = stop - off
  if n < 0 then n = 0 end
  tree:add(f_payload_length, n)
  if n > 0 then tree:add(f_payload, buf(off, n)) end
end

local function chain(buf, pinfo, tree, over_ip)
  local off = 0
  local stop = buf:len()
  local function bad(why)
    tree:add_proto_expert_info(ef_malformed, why)
  end
  if over_ip then
    if not header(buf, tree, pinfo, off, L_entropy) then return end
    off = off + L_entropy.size
  end
  local b0 = byte(buf, off)
  if b0 ~= nil and bit.rshift(b0, 3) == TSS_TYPE then
    local L = TSS[bit.band(b0, TSS_SP)]
    if not header(buf, tree, pinfo, off, L) then return end
    off = off + L.size
    if stop - off < ICV_LEN then return bad("no room for the ICV") end
    if stop - ICV_LEN > off then tree:add(f_ciphertext, buf(off, stop - ICV_LEN - off)) end
    tree:add(f_icv, buf(stop - ICV_LEN, ICV_LEN))
    return
  end
  if b0 == nil or off + 2 > stop then return bad("truncated PDS header") end
  local b1 = buf(off + 1, 1):uint()
  local ptype = bit.rshift(b0, 3)
  local nh = bit.bor(bit.lshift(bit.band(b0, 7), 1), bit.rshift(b1, 7))
  local flags = bit.band(b1, 0x7f)
  local sel = PDS[ptype]
  if sel == nil then return bad(string.format("reserved PDS type 0x%02x", ptype)) end
  local key = bit.band(flags, sel.mask)
  if sel.cc then
    local c = byte(buf, off + 12) or 0
    key = key + bit.lshift(bit.rshift(c, 4), 8)
  end
  local L = sel.map[key]
  if L == nil then return bad("no PDS layout") end
  if not header(buf, tree, pinfo, off, L) then return end
  off = off + L.size
  pinfo.cols.info:set(L.name)
  if ptype == CONTROL or nh == 0 then return payload(buf, tree, off, stop) end
  local s = SES[nh]
  if s == nil then return bad(string.format("reserved next_hdr 0x%x", nh)) end
  local c0, c1 = byte(buf, off) or 0, byte(buf, off + 1) or 0
  local S = s.map[bit.bor(bit.lshift(bit.band(c0, s.m0), 8), bit.band(c1, s.m1))]
  if S == nil then return bad("no SES layout") end
  if not header(buf, tree, pinfo, off, S) then return end
  off = off + S.size
  pinfo.cols.info:append(" " .. S.name)
  if REQUEST_NH[nh] then
    local op = bit.band(c0, 0x3f)
    if op == SYNC_ATOMIC then
      if not header(buf, tree, pinfo, off, L_ses_sync_ext) then return end
      off = off + L_ses_sync_ext.size
      op = ATOMIC
    end
    local e = EXT[op]
    if e ~= nil then
      local E = e.map[bit.band(byte(buf, off) or 0, e.mask)]
      if E ~= nil then
        if not header(buf, tree, pinfo, off, E) then return end
        off = off + E.size
      end
    end
  end
  payload(buf, tree, off, stop)
end

local function dissect(buf, pinfo, tree, over_ip)
  pinfo.cols.protocol:set("UET")
  local t = tree:add(uet, buf(), "Ultra Ethernet Transport")
  chain(buf, pinfo, t, over_ip)
  return buf:len()
end

function uet.dissector(buf, pinfo, tree)
  return dissect(buf, pinfo, tree, false)
end

local uet_ip = Proto("uet_ip", "UET over IP")
function uet_ip.dissector(buf, pinfo, tree)
  return dissect(buf, pinfo, tree, true)
end

DissectorTable.get("udp.port"):add(UDP_PORT, uet)
DissectorTable.get("ip.proto"):add(IP_PROTO, uet_ip)  -- IPv4 and IPv6 alike"""


def main() -> int:
    sys.stdout.write(generate())
    return 0


if __name__ == "__main__":
    sys.exit(main())
