"""The summary fast path (tools/decode_fast.py) writes exactly the general path's line
(tools/decode.py: parse_frame, then summary) on every frame it takes, and takes every frame the
general path decodes without a warning: every PDS type and layout, every SES header and opcode,
the extensions, CC packets (NSCC, credit, raw state), trims (NACK TRIMMED, trimmed payloads),
PFC, RoCEv2 and frames that are not UET; everything else (malformed, warnings, TSS) it leaves to
the general path."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uet.interop.samples import load_sample
from uet.tools import decode
from uet.tools.decode_fast import _INFO, FastSummary

from uet.errors import DecodeError
from uet.pcap import read_capture
from uet.wire import net, pds, ses
from uet.wire.build import build_ethernet, build_ip_packet, build_pfc_frame
from uet.wire.chain import ALLOWED_NEXT_HDR, pds_ses_key, pds_ses_layouts
from uet.wire.pds import ControlType, NextHeader, PdsType
from uet.wire.roce import OpCode
from uet.wire.rocepkt import encode_roce, seal
from uet.wire.ses import ResponseOpcode, SesOpcode

_TYPES = [t for t in PdsType if t != PdsType.TSS]
_FLAGS = (0, 0x04, 0x08, 0x40, 0x48, 0x7F)  # none, SYN (requests) / P, EPSN, both (ACKs), all
_CC_NIBBLES = (0x0, 0x1, 0xF)  # NSCC, credit, an unknown CC type: every ACK_CC / ACK_CCX variant
_LINKS = (1, 101)  # Ethernet, raw IP
_OPCODES = sorted({int(o) for o in SesOpcode} | {int(o) for o in ResponseOpcode} | {0x30, 0x3F})


def _general(number: int, linktype: int, data: bytes, port: int = net.UET_UDP_PORT) -> str | None:
    """The general path's line, or None where it reports the frame malformed or warns about it."""
    d = decode.decode_item(decode.Item(number, 5_000, linktype, data), port)
    if d.error is not None or decode._warnings(d):
        return None
    return decode.summary(d, 1_000)


def _fast(fast: FastSummary, number: int, linktype: int, data: bytes) -> str | None:
    return fast.line(number, 5_000, 1_000, linktype, data)


def _uet_bytes(ptype: int, nh: int, flags: int, cc: int, op: int, b1: int, fill: bytes) -> bytes:
    """UET bytes with this prologue, CC nibble, SES opcode and SES flags byte, the rest ``fill``,
    with every header's reserved bits cleared (so that the general path does not warn)."""
    b = bytearray(fill)
    b[0], b[1] = (ptype << 3) | (nh >> 1), ((nh & 1) << 7) | flags
    if len(b) > 12:
        b[12] = (cc << 4) | (b[12] & 0xF)
    lays = pds_ses_layouts(b, 0, len(b))
    off = 0
    try:
        for i, lay in enumerate(lays):
            end = off + lay.size
            if end > len(b):
                break
            word = int.from_bytes(b[off:end], "big") & ~lay.reserved_mask
            b[off:end] = word.to_bytes(lay.size, "big")
            off = end
            if i == 0 and off + 1 < len(b):  # the SES header's opcode and flags, before the chain reads them
                b[off] = op & 0x3F
                b[off + 1] = b1
    except Exception:  # noqa: BLE001 - a rule of the chain broken: the input stays as it is
        pass
    return bytes(b)


def _frame(uet: bytes, link: int, family: int, encap: str, ecn: int) -> bytes:
    src, dst = ("10.0.0.1", "10.0.0.2") if family == 4 else ("fd00::1", "fd00::2")
    ip = build_ip_packet(uet, src, dst, entropy=0xC0DE, encap=encap, ecn=ecn)
    return build_ethernet(ip, ethertype=0x0800 if family == 4 else 0x86DD) if link == 1 else ip


def _check(fast: FastSummary, link: int, data: bytes) -> bool:
    """The two paths agree; True when the fast path wrote the line."""
    want, got = _general(7, link, data), _fast(fast, 7, link, data)
    if got is not None:
        assert got == want
    d = decode.decode_item(decode.Item(7, 5_000, link, data), net.UET_UDP_PORT)
    if want is not None and not (d.uet is not None and d.uet.tss is not None):
        assert got == want  # a frame the general path writes without warning is the fast path's
    return got is not None


@pytest.mark.unit_each  # long: a unit of work of its own, started early (tests/conftest.py)
def test_every_pds_type_ses_header_and_opcode() -> None:
    """Every PDS type, next header and flag pattern, every SES opcode, both families and both
    encapsulations: the lines agree, and every PDS, SES and extension layout was formatted."""
    rng = random.Random(25)
    fast = FastSummary()
    taken = 0
    for ptype in _TYPES:
        nhs = list(ControlType) if ptype == PdsType.CONTROL else sorted(ALLOWED_NEXT_HDR[ptype])
        for nh in nhs:
            ops = _OPCODES if nh != NextHeader.NONE and ptype != PdsType.CONTROL else (0,)
            for flags in _FLAGS:
                for cc in _CC_NIBBLES if ptype in (PdsType.ACK_CC, PdsType.ACK_CCX) else (0,):
                    for op in ops:
                        b1 = rng.choice((0x03, 0x01, 0x02, 0x00, 0x07, 0x0B))  # SOM/EOM, HD
                        fill = rng.randbytes(rng.choice((48, 80, 120)))
                        uet = _uet_bytes(ptype, nh, flags, cc, op, b1, fill)
                        link, fam = rng.choice(_LINKS), rng.choice((4, 6))
                        encap = rng.choice(("udp", "udp", "ip"))
                        taken += _check(fast, link, _frame(uet, link, fam, encap, rng.randrange(4)))
    assert taken > 1000
    every = set(pds.ALL_LAYOUTS) | set(ses.ALL_LAYOUTS)
    assert every - set(_INFO) == set()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ptype=st.sampled_from(_TYPES),
    nh=st.integers(0, 15),
    flags=st.integers(0, 0x7F),
    cc=st.integers(0, 15),
    op=st.integers(0, 63),
    b1=st.integers(0, 255),
    fill=st.binary(min_size=2, max_size=96),
    link=st.sampled_from(_LINKS),
    family=st.sampled_from((4, 6)),
    encap=st.sampled_from(("udp", "ip")),
    ecn=st.integers(0, 3),
    cut=st.integers(0, 8),
)
def test_fast_path_agrees_on_arbitrary_packets(**kw: Any) -> None:
    """Arbitrary prologues, opcodes and contents, truncated ones included: the fast path writes
    the general path's line or leaves the frame to it."""
    uet = _uet_bytes(kw["ptype"], kw["nh"], kw["flags"], kw["cc"], kw["op"], kw["b1"], kw["fill"])
    data = _frame(uet, kw["link"], kw["family"], kw["encap"], kw["ecn"])
    if kw["cut"]:
        data = data[: -kw["cut"]]
    _check(FastSummary(), kw["link"], data)


def test_warnings_and_tss_go_the_general_way() -> None:
    """Reserved bits, a wrong checksum and TSS leave the line to the general path."""
    fast = FastSummary()
    req = pds.REQUEST.encode(pds.REQUEST.make(type=PdsType.RUD_REQ, next_hdr=NextHeader.SMALL, psn=9))
    small = bytearray(ses.SMALL.encode(ses.SMALL.make(opcode=SesOpcode.WRITE, job_id=5)))
    good = _frame(req + small, 1, 4, "udp", 0)
    assert _fast(fast, 1, 1, good) == _general(1, 1, good) is not None
    small[0] |= 0x80  # a reserved bit above the SES opcode
    reserved = _frame(req + small, 1, 4, "udp", 0)
    bad_sum = bytearray(good)
    bad_sum[14 + 20 + 8 + 5] ^= 0xFF  # a byte of cack_psn: the UDP checksum is now wrong
    tss_frame = _frame(bytes([0x08]) + bytes(40), 1, 4, "udp", 0)
    for frame in (reserved, bytes(bad_sum), tss_frame):
        assert _fast(fast, 1, 1, frame) is None
        assert decode.summary(decode.decode_item(decode.Item(1, None, 1, frame), net.UET_UDP_PORT), None)


def test_pfc_roce_and_frames_that_are_not_uet() -> None:
    fast = FastSummary()
    frames = [
        build_pfc_frame({3: 65535, 5: 7}),
        build_pfc_frame({}),
        build_ethernet(bytes(46), ethertype=0x0806),
        build_ethernet(bytes.fromhex("0001") + bytes(44), ethertype=0x8808),  # MAC control, not PFC
        build_ethernet(build_ip_packet(b"x" * 20, "10.0.0.1", "10.0.0.2", entropy=1, dport=53)),
        build_ethernet(build_ip_packet(b"x" * 20, "10.0.0.1", "10.0.0.2", entropy=1, encap="ip", ip_proto=6)),
    ]
    a, b = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    for op in (OpCode.SEND_ONLY, OpCode.CNP):
        dgram = seal(encode_roce(_bth(op)), a, b, 0xC000)
        frames.append(build_ethernet(build_ip_packet(dgram, "10.0.0.1", "10.0.0.2", entropy=0xC000, dport=4791)))
    for f in frames:
        got = _fast(fast, 3, 1, f)
        assert got is not None and got == _general(3, 1, f)


def _bth(op: int) -> Any:
    from uet.wire.roce import BTH

    return BTH.make(opcode=op, dest_qp=0x11, becn=int(op == OpCode.CNP))


def test_whole_captures_print_the_same(tmp_path: Any, capsys: Any) -> None:
    """``uet-decode FILE`` with the fast path on equals the general path on the sample capture
    (every mode, control packets, IPv6, IP protocol 253, TSS, PFC, a malformed frame)."""
    sample = tmp_path / "s.pcap"
    sample.write_bytes(load_sample())
    decode.main([str(sample)])
    fast_out = capsys.readouterr().out
    lines = []
    t0 = None
    for i, rec in enumerate(read_capture(str(sample)), 1):
        t0 = rec.timestamp_ns if t0 is None else t0
        d = decode.decode_item(decode.Item(i, rec.timestamp_ns, rec.linktype, rec.frame), net.UET_UDP_PORT)
        lines.append(decode.error_line(d) if d.error is not None else decode.summary(d, t0))
    assert fast_out.splitlines() == lines


def _layouts_or_error(data: bytes) -> Any:
    try:
        return tuple(lay.name for lay in pds_ses_layouts(data, 0, len(data)))
    except DecodeError as e:
        return ("error", e.reason)


def test_chain_key_holds_every_byte_the_rules_read() -> None:
    # the fast path keeps its plans by pds_ses_key: any byte outside the key, changed, must leave
    # the layouts (or the error) as they were; every type, allowed next header, CC nibble, opcode
    rng = random.Random(2525)
    for _ in range(600):
        ptype = rng.choice(_TYPES)
        nhs = list(ControlType) if ptype == PdsType.CONTROL else sorted(ALLOWED_NEXT_HDR[ptype])
        nh = rng.choice([*nhs, rng.randrange(16)])
        b1 = rng.choice((0x03, 0x01, 0x02, 0x00, 0x07, 0x0B, rng.randrange(256)))
        op, cc = rng.choice(_OPCODES), rng.choice(_CC_NIBBLES)
        fill = rng.randbytes(rng.choice((2, 13, 30, 48, 60, 80)))
        pkt = _uet_bytes(ptype, nh, rng.choice(_FLAGS), cc, op, b1, fill)
        key, want = pds_ses_key(pkt, 0, len(pkt)), _layouts_or_error(pkt)
        for i in range(len(pkt)):
            other = bytearray(pkt)
            other[i] ^= rng.randrange(1, 256)
            if pds_ses_key(other, 0, len(other)) == key:
                assert _layouts_or_error(bytes(other)) == want, (pkt.hex(), i)
