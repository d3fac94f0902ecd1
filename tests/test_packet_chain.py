"""The UET header chain and frame decoding (uet.wire.chain and uet.wire.capture, wire-format.md §1–§2, §13)."""

from __future__ import annotations

import json
import struct
from typing import TypeVar

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st
from uet.interop.samples import SAMPLE_TSS_KEY, sample_frames

from uet.errors import DecodeError, UetError
from uet.wire import net, pds, ses, tss
from uet.wire.build import build_ethernet, build_frame, build_ip_packet, build_pfc_frame, build_udp_ipv4, default_dscp
from uet.wire.capture import LinkType, parse_frame
from uet.wire.chain import Sealed, parse_uet
from uet.wire.pds import AckFlag, ControlType, NackCode, NextHeader, PdsType, ReqFlag
from uet.wire.ses import AmoOp, ResponseOpcode, SesFlag, SesOpcode

pytestmark = pytest.mark.in_memory  # the word socket in a comment (tests/conftest.py)

T = TypeVar("T")


def _some(x: T | None) -> T:
    """``x``, which the packet must have (a header, a layer, a field)."""
    assert x is not None
    return x


# wire-format.md §13.1 and §13.2, the dumps copied verbatim from the spec.
_DUMP_13_1 = """
0000  45 00 00 59 00 00 40 00 40 11 26 92 0a 00 00 01
0010  0a 00 00 02 42 42 12 b9 00 45 2b b9 11 8c ff ff
0020  00 00 10 00 00 01 00 00 05 03 00 01 00 00 00 42
0030  00 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0040  00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
0050  00 00 00 05 68 65 6c 6c 6f
"""
_DUMP_13_2 = """
0000  45 b8 00 34 00 00 40 00 40 11 25 ff 0a 00 00 02
0010  0a 00 00 01 42 42 12 b9 00 20 4b 64 3a 00 00 00
0020  00 00 10 00 00 02 00 01 01 01 00 01 00 00 00 42
0030  00 00 00 05
"""


def undump(text: str) -> bytes:
    return bytes.fromhex("".join(line[6:] for line in text.strip().splitlines()))


REQ_13 = undump(_DUMP_13_1)
ACK_13 = undump(_DUMP_13_2)
BARE_ACK = bytes.fromhex("380000000000100000020001")

SAMPLE = sample_frames()


def h(layout, **kw) -> bytes:
    return layout.encode(layout.make(**kw))


def std(**kw) -> bytes:
    return h(ses.STANDARD[(1, "none")], **{"flags": SesFlag.SOM | SesFlag.EOM, **kw})


def req(nh: int = NextHeader.STANDARD, **kw) -> bytes:
    return h(pds.REQUEST, **{"next_hdr": nh, "psn": 10, "spdcid": 1, "dpdcid": 2, **kw})


# -- §13 golden vectors ---------------------------------------------------------------------------


def test_section13_request_fields():
    assert len(REQ_13) == 89
    fr = parse_frame(REQ_13, LinkType.RAW)
    assert fr.kind == "uet" and fr.encap == "udp" and not fr.warnings
    assert (fr.src, fr.dst, fr.sport, fr.dport) == ("10.0.0.1", "10.0.0.2", 0x4242, 4793)
    u = _some(fr.uet)
    assert u.pds_layout is pds.REQUEST_SYN
    assert u.pds == pds.REQUEST_SYN.T(2, 3, 0x0C, -1, 4096, 1, 0, 0)
    assert u.ses_layout is ses.STANDARD[(1, "none")]
    s = _some(u.ses)
    assert (s.opcode, s.flags, s.message_id, s.job_id, s.pid_on_fep, s.request_length) == (5, 3, 1, 0x42, 3, 5)
    assert u.payload == b"hello" and u.offsets == [28, 40]
    d = u.to_dict()
    assert d["pds"]["type_name"] == "RUD_REQ" and d["pds"]["flags_names"] == ["SYN", "AR"]
    assert d["pds"]["clear_psn"] == 0xFFF and d["pds"]["start_psn"] == 4096
    assert d["ses"]["opcode_name"] == "SEND" and d["ses"]["flags_names"] == ["SOM", "EOM"]


def test_section13_ack_and_bare_ack():
    fr = parse_frame(ACK_13, LinkType.IPV4)
    assert fr.dscp == 46 and not fr.warnings
    u = _some(fr.uet)
    h = _some(u.pds)
    assert u.pds_type == PdsType.ACK and h.cack_psn == 4096 and (h.spdcid, h.dpdcid) == (2, 1)
    assert u.ses == ses.RESPONSE.T(0, 1, 0, 1, 1, 0, 0x42, 5)
    bare = parse_uet(BARE_ACK)
    assert bare.pds == pds.ACK.T(7, 0, 0, 0, 4096, 2, 1) and bare.ses is None and bare.payload == b""


def test_builders_reproduce_section13_bytes():
    assert build_udp_ipv4(REQ_13[28:], "10.0.0.1", "10.0.0.2", entropy=0x4242) == REQ_13
    # DSCP 46 chosen automatically for an ACK (wire-format.md §1.3)
    assert build_udp_ipv4(ACK_13[28:], "10.0.0.2", "10.0.0.1", entropy=0x4242) == ACK_13
    assert default_dscp(BARE_ACK) == 46 and default_dscp(REQ_13[28:]) == 0
    frame = build_frame(REQ_13[28:], "10.0.0.1", "10.0.0.2", entropy=0x4242)
    assert frame[14:] == REQ_13 and frame[12:14] == b"\x08\x00"


# -- fast and construct paths agree -------------------------------------------------------------


@pytest.mark.parametrize("ts,desc,frame", SAMPLE, ids=[d for _, d, _ in SAMPLE])
def test_fast_and_slow_agree_on_sample(ts, desc, frame):
    try:
        a = parse_frame(frame, fast=True)
    except DecodeError as e:
        with pytest.raises(DecodeError) as ei:
            parse_frame(frame, fast=False)
        assert (ei.value.header, ei.value.offset) == (e.header, e.offset)
        assert desc.startswith("malformed")
        return
    b = parse_frame(frame, fast=False)
    assert a.to_dict() == b.to_dict()
    if a.uet is not None:
        assert _some(b.uet).sections == a.uet.sections
        json.dumps(a.to_dict())  # JSON-safe


def test_to_dict_has_every_field():
    for _, _, frame in SAMPLE[:-1]:
        fr = parse_frame(frame)
        if fr.uet is None:
            continue
        d = fr.uet.to_dict()
        flat = [d[k] for k in ("entropy", "tss", "pds", "ses") if k in d] + d["extensions"]
        assert len(flat) == len(fr.uet.sections)
        for (lay, _), sd in zip(fr.uet.sections, flat, strict=True):
            assert sd["header"] == lay.name
            assert set(lay.field_names) <= set(sd)


# -- every header kind -------------------------------------------------------------------------


def test_all_pds_variants_decode():
    cases = [
        (pds.ACK_EPSN, h(pds.ACK_EPSN, cack_psn=5, expected_psn=99)),
        (pds.ACK_PROBE_EPSN, h(pds.ACK_PROBE_EPSN, probe_opaque=7)),
        (pds.ACK_CC[(False, "credit")], h(pds.ACK_CC[(False, "credit")], credit=12)),
        (pds.ACK_CC[(True, "nscc")], h(pds.ACK_CC[(True, "nscc")], rc=1)),
        (pds.ACK_CC[(False, "raw")], h(pds.ACK_CC[(False, "raw")], cc_type=5)),
        (pds.ACK_CCX[(False, "nscc")], h(pds.ACK_CCX[(False, "nscc")], ack_ccx_state=3)),
        (pds.NACK_CCX, h(pds.NACK_CCX, nack_code=NackCode.NEW_START_PSN, payload=77, nccx_type=2)),
        (pds.CONTROL_SYN, h(pds.CONTROL_SYN, ctl_type=ControlType.CLOSE, psn_offset=3)),
        (pds.CC_REQUEST, h(pds.CC_REQUEST, ccc_id=1) + std()),
        (pds.UUD, h(pds.UUD) + std(opcode=SesOpcode.DATAGRAM_SEND)),
    ]
    for lay, data in cases:
        for fast in (True, False):
            u = parse_uet(data, fast=fast)
            assert u.pds_layout is lay
            assert u.pds == lay.decode(data)


def test_extensions_sync_atomic_cswap_rendezvous():
    atomic = h(ses.ATOMIC_EXT, atomic_opcode=AmoOp.SUM)
    cswap = h(ses.CSWAP_EXT, atomic_opcode=AmoOp.CSWAP_GT, compare_value=1, swap_value=2)
    sync = h(ses.SYNC_EXT, group=3, count=4)
    u = parse_uet(req() + std(opcode=SesOpcode.SYNC_ATOMIC) + sync + atomic + b"\0" * 8)
    assert [lay for lay, _ in u.extensions] == [ses.SYNC_EXT, ses.ATOMIC_EXT]
    assert _some(u.ext).atomic_opcode == AmoOp.SUM and len(u.payload) == 8
    u = parse_uet(req() + std(opcode=SesOpcode.SYNC_ATOMIC) + sync + cswap)
    assert _some(u.ext).compare_value == 1 and u.payload == b""
    u = parse_uet(req() + std(opcode=SesOpcode.TSEND_ATOMIC) + cswap)
    assert _some(u.ext).swap_value == 2
    u = parse_uet(req() + std(opcode=SesOpcode.SYNC_WRITE) + sync + b"x")
    assert _some(u.ext).group == 3 and u.payload == b"x"
    rv = h(ses.RENDEZVOUS_EXT, eager_length=4)
    u = parse_uet(req() + std(opcode=SesOpcode.RENDEZVOUS_TSEND) + rv + b"abcd")
    assert _some(u.ext).eager_length == 4
    # atomic in a medium header: the extension still follows
    med = h(ses.MEDIUM, opcode=SesOpcode.ATOMIC)
    u = parse_uet(req(NextHeader.MEDIUM) + med + atomic)
    assert u.ses_layout is ses.MEDIUM and u.ext is not None


def test_ses_variants_selected():
    tok = h(ses.STANDARD[(1, "buffer")], opcode=SesOpcode.DEFERRABLE_SEND, src_restart_token=5)
    assert _some(parse_uet(req() + tok).ses).src_restart_token == 5
    rtr = h(ses.STANDARD[(0, "match")], opcode=SesOpcode.DEFERRABLE_RTR, dst_restart_token=6)
    assert _some(parse_uet(req() + rtr).ses).dst_restart_token == 6
    mhd = h(ses.MEDIUM_HD, header_data=9)
    assert parse_uet(req(NextHeader.MEDIUM) + mhd).ses_layout is ses.MEDIUM_HD
    rd = h(ses.RESPONSE_DATA, payload_length=3)
    u = parse_uet(req(NextHeader.RESPONSE_DATA) + rd + b"abc")  # read data on the return PDC (§6.1)
    assert u.ses_opcode_name == "RESPONSE_W_DATA" and u.payload == b"abc"


# -- validation ---------------------------------------------------------------------------------


def _err(data: bytes, **kw) -> DecodeError:
    with pytest.raises(DecodeError) as ei:
        parse_uet(data, **kw)
    return ei.value


@pytest.mark.parametrize("ptype", [0x00, 0x0F, 0x10, 0x1F])
def test_reserved_pds_type(ptype):
    e = _err(bytes([ptype << 3, 0]) + bytes(30), offset=0)
    assert e.header == "pds" and e.offset == 0 and "reserved PDS type" in e.reason


def test_errors_name_header_offset_reason():
    e = _err(b"\0\0" + req(nh=7) + std(), offset=2)
    assert (e.header, e.offset) == ("rud_rod_request", 2) and "reserved next_hdr" in e.reason
    e = _err(h(pds.NACK, next_hdr=NextHeader.RESPONSE) + h(ses.RESPONSE))
    assert "SES header" in e.reason and "NACK" in e.reason
    e = _err(h(pds.ACK, next_hdr=NextHeader.RESPONSE) + h(ses.RESPONSE, opcode=ResponseOpcode.RESPONSE_W_DATA))
    assert (e.header, e.offset) == ("ses_response", 12) and "response opcode 2" in e.reason
    e = _err(h(pds.ACK, next_hdr=NextHeader.SMALL_RESPONSE_DATA) + h(ses.SMALL_RESPONSE_DATA, opcode=1))
    assert "response opcode 1" in e.reason
    e = _err(h(pds.ACK, next_hdr=NextHeader.STANDARD) + std())
    assert "not allowed on ACK" in e.reason
    e = _err(req(nh=NextHeader.RESPONSE) + h(ses.RESPONSE))
    assert "not allowed on RUD_REQ" in e.reason
    e = _err(h(pds.CONTROL, ctl_type=12))
    assert e.header == "control" and "reserved control type 12" in e.reason
    e = _err(req(nh=NextHeader.SMALL) + h(ses.SMALL, opcode=SesOpcode.RENDEZVOUS_SEND))
    assert "standard SES header" in e.reason
    e = _err(bytes([0x08]) + bytes(11) + h(pds.ACK))  # plaintext TSS ... fine until the ICV check
    assert e.header == "tss" and "ICV" in e.reason


def test_truncation_offsets_every_cut():
    data = req() + std(opcode=SesOpcode.ATOMIC) + h(ses.CSWAP_EXT, atomic_opcode=AmoOp.CSWAP)
    full = parse_uet(data)
    assert full.payload == b""
    for n in range(len(data)):
        for fast in (True, False):
            e = _err(b"pad" + data[:n], offset=3, fast=fast)
            assert e.offset == 3 + n, (n, e)
            assert "truncated" in e.reason


def test_tss_ciphertext_and_decrypt_seam():
    ts, desc, frame = next(s for s in SAMPLE if s[1].startswith("TSS"))
    fr = parse_frame(frame)
    u = _some(fr.uet)
    assert fr.encap == "ip" and _some(u.entropy).entropy == 0x1234
    assert _some(u.tss).sdi == 1 and _some(u.tss).tsc == 7 and u.encrypted and u.pds is None
    assert len(_some(u.icv)) == 16 and len(_some(u.ciphertext)) == len(frame) - 14 - 20 - 4 - 12 - 16
    seen: list[Sealed] = []

    def decrypt(s: Sealed) -> bytes:
        seen.append(s)
        src, dst = _some(s.src_ip), _some(s.dst_ip)
        iv = src + s.tss_header[4:12]  # direct mode, SP = 0: IPv4 source ‖ epoch/TSC (§5.5)
        aad = src + dst + tss.ENTROPY.encode((s.entropy,)) + s.tss_header
        return AESGCM(SAMPLE_TSS_KEY).decrypt(iv, s.ciphertext + s.icv, aad)

    for fast in (True, False):
        fr2 = parse_frame(frame, decrypt=decrypt, fast=fast)
        u2 = _some(fr2.uet)
        assert u2.decrypted and not u2.encrypted
        assert u2.pds_type == PdsType.RUD_REQ and u2.ses_opcode_name == "SEND" and u2.payload == b"secret"
        assert u2.offsets[2] == 14 + 20 + 4 + 12
    assert seen[0].udp_header is None and seen[0].entropy == 0x1234 and len(seen[0].tss_header) == 12
    assert seen[0].datagram == frame[14 + 20 + 4 :]
    # a decryptor that has no key for the packet: it stays encrypted, no error
    u3 = _some(parse_frame(frame, decrypt=lambda s: None).uet)
    assert u3.encrypted and u3.decrypt_failed and u3.to_dict()["decrypt_failed"] is True
    # over UDP the entropy comes from the source port
    udp = build_frame(frame[14 + 20 + 4 :], "10.0.0.1", "10.0.0.2", entropy=0x777)
    parse_frame(udp, decrypt=lambda s: seen.append(s))
    assert seen[-1].entropy == 0x777 and _some(seen[-1].udp_header)[:2] == b"\x07\x77"

    def bad(_s: Sealed) -> bytes:
        raise ValueError("tag mismatch")

    with pytest.raises(DecodeError, match="decryption failed"):
        parse_frame(frame, decrypt=bad)
    with pytest.raises(DecodeError, match="TSS header. where a PDS"):
        parse_frame(frame, decrypt=lambda s: bytes([0x08]) + bytes(20))


# -- frames -------------------------------------------------------------------------------------

UET = req(flags=ReqFlag.AR) + std(request_length=3) + b"abc"


def test_frame_link_types():
    ip = build_ip_packet(UET, "10.0.0.1", "10.0.0.2", entropy=7)
    v6 = build_ip_packet(UET, "fd00::1", "fd00::2", entropy=7, ecn=net.Ecn.CE)
    sll = h(net.SLL, protocol=0x0800) + ip
    sll2 = h(net.SLL2, protocol=0x86DD) + v6
    null_le = struct.pack("<I", 2) + ip
    null_be = struct.pack(">I", 24) + v6
    loop = struct.pack(">I", 30) + v6
    vlan = build_frame(UET, "10.0.0.1", "10.0.0.2", entropy=7, vlan=(3, 100))
    for data, lt in [
        (ip, LinkType.RAW),
        (ip, LinkType.IPV4),
        (v6, LinkType.IPV6),
        (sll, LinkType.LINUX_SLL),
        (sll2, LinkType.LINUX_SLL2),
        (null_le, LinkType.NULL),
        (null_be, LinkType.NULL),
        (loop, LinkType.LOOP),
        (vlan, LinkType.ETHERNET),
    ]:
        fr = parse_frame(data, lt)
        assert fr.kind == "uet" and _some(fr.uet).payload == b"abc" and fr.sport == 7, lt
        assert not fr.warnings
    assert _some(parse_frame(vlan).layer("vlan")).vid == 100
    fr6 = parse_frame(v6, LinkType.RAW)
    assert fr6.src == "fd00::1" and fr6.ecn == net.Ecn.CE


def test_frame_padding_options_and_checksums():
    frame = build_frame(BARE_ACK, "10.0.0.2", "10.0.0.1", entropy=1)
    assert len(frame) == 60  # padded; the padding is not UET payload
    assert _some(parse_frame(frame).uet).payload == b""
    ip = bytearray(build_ip_packet(UET, "10.0.0.1", "10.0.0.2", entropy=7))
    # add a 4-byte option (IHL 6) and fix lengths/checksum
    opt = bytearray(ip[:20]) + b"\x01\x01\x01\x00" + ip[20:]
    opt[0] = 0x46
    opt[2:4] = len(opt).to_bytes(2, "big")
    opt[10:12] = b"\0\0"
    opt[10:12] = net.inet_checksum(opt[:24]).to_bytes(2, "big")
    fr = parse_frame(bytes(opt), LinkType.RAW)
    assert _some(fr.uet).payload == b"abc" and not fr.warnings
    bad = bytearray(ip)
    bad[10] ^= 0xFF
    bad[-1] ^= 0x01  # payload byte: UDP checksum now wrong too
    fr = parse_frame(bytes(bad), LinkType.RAW)
    assert fr.kind == "uet" and len(fr.warnings) == 2
    assert "IPv4 header checksum" in fr.warnings[0] and "UDP checksum" in fr.warnings[1]


def test_frame_not_uet_and_pfc():
    # UDP 4791 is RoCEv2 (rocev2-and-fabric.md §1.2): decoded by the RoCE chain, so UET bytes there are malformed
    with pytest.raises(DecodeError) as ei:
        parse_frame(build_ip_packet(UET, "10.0.0.1", "10.0.0.2", entropy=7, dport=4791), LinkType.RAW)
    assert ei.value.header in ("bth", "cnp")
    other = parse_frame(build_ip_packet(UET, "10.0.0.1", "10.0.0.2", entropy=7, dport=53), LinkType.RAW)
    assert other.kind == "other" and other.uet is None
    # UET port as the source port counts (reply from a socket bound to 4793)
    rev = build_ip_packet(UET, "10.0.0.1", "10.0.0.2", entropy=4793, dport=5000)
    assert parse_frame(rev, LinkType.RAW).kind == "uet"
    assert parse_frame(rev, LinkType.RAW, port=5000).kind == "uet"
    pfc = parse_frame(build_pfc_frame({0: 10, 7: 0xFFFF}))
    assert pfc.kind == "pfc" and _some(pfc.pfc).class_enable == 0x81 and _some(pfc.pfc).quanta7 == 0xFFFF
    pause = build_ethernet(b"\x00\x01\xff\xff", dst_mac=net.PFC_DST_MAC, ethertype=0x8808)
    assert "not PFC" in parse_frame(pause).note
    assert parse_frame(b"\0" * 20, 147).note == "unsupported link type 147"
    frag = bytearray(build_ip_packet(UET, "10.0.0.1", "10.0.0.2", entropy=7))
    frag[6] |= 0x20  # MF
    frag[10:12] = b"\0\0"
    frag[10:12] = net.inet_checksum(frag[:20]).to_bytes(2, "big")
    assert parse_frame(bytes(frag), LinkType.RAW).note == "IPv4 fragment"


def test_frame_errors():
    ip = build_ip_packet(UET, "10.0.0.1", "10.0.0.2", entropy=7)
    with pytest.raises(DecodeError) as ei:
        parse_frame(ip[:-5], LinkType.RAW)  # capture cut short: IP total length beyond the data
    assert ei.value.header == "ipv4" and ei.value.offset == len(ip) - 5
    with pytest.raises(DecodeError, match="IP version"):
        parse_frame(b"\x55" + ip[1:], LinkType.RAW)
    with pytest.raises(DecodeError) as ei:
        parse_frame(b"\x02\0\0", LinkType.ETHERNET)
    assert ei.value.header == "ethernet"
    bad_udp = bytearray(ip)
    bad_udp[24:26] = (4).to_bytes(2, "big")
    with pytest.raises(DecodeError, match="below the 8-byte header"):
        parse_frame(bytes(bad_udp), LinkType.RAW)


def test_over_ip_builder_and_parse():
    pkt = build_ip_packet(UET, "10.0.0.1", "10.0.0.2", entropy=0xBEEF, encap="ip")
    assert pkt[9] == 253
    fr = parse_frame(pkt, LinkType.RAW)
    assert fr.encap == "ip" and _some(_some(fr.uet).entropy).entropy == 0xBEEF and _some(fr.uet).payload == b"abc"
    u = parse_uet(pkt, offset=20, over_ip=True)
    assert u.pds == _some(fr.uet).pds


# -- fuzzing: DecodeError and nothing else ------------------------------------------------------

_SAMPLE_UET = []
for _, _d, _f in SAMPLE[:-1]:
    _fr = parse_frame(_f)
    if _fr.uet is not None:
        _SAMPLE_UET.append((bytes(_f[_fr.uet.start : _fr.uet.end]), _fr.encap == "ip"))


def _check_uet(data: bytes, over_ip: bool) -> None:
    results: list[object] = []
    for fast in (True, False):
        try:
            u = parse_uet(data, fast=fast, over_ip=over_ip)
            json.dumps(u.to_dict())
            results.append(u.to_dict())
        except DecodeError as e:
            results.append((e.header, e.offset))
    assert results[0] == results[1]


@settings(max_examples=300)
@given(st.binary(max_size=120), st.booleans())
def test_fuzz_random_bytes(data, over_ip):
    _check_uet(data, over_ip)


@st.composite
def mutated(draw):
    base, over_ip = draw(st.sampled_from(_SAMPLE_UET))
    b = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "set"]))
        if op == "cut" and b:
            del b[draw(st.integers(0, len(b) - 1)) :]
        elif op == "insert":
            i = draw(st.integers(0, len(b)))
            b[i:i] = draw(st.binary(min_size=1, max_size=8))
        elif b:
            i = draw(st.integers(0, len(b) - 1))
            b[i] = draw(st.integers(0, 255)) if op == "set" else b[i] ^ (1 << draw(st.integers(0, 7)))
    return bytes(b), over_ip


@settings(max_examples=300)
@given(mutated())
def test_fuzz_mutated_packets(case):
    _check_uet(*case)


@settings(max_examples=200)
@given(
    st.sampled_from([f for _, _, f in SAMPLE]),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=4),
    st.integers(0, 200),
    st.sampled_from(list(LinkType)),
)
def test_fuzz_frames(frame, edits, cut, linktype):
    b = bytearray(frame)
    for i, v in edits:
        if i < len(b):
            b[i] = v
    del b[len(b) - min(cut, len(b)) // 4 :]
    try:
        fr = parse_frame(bytes(b), linktype)
        json.dumps(fr.to_dict())
    except DecodeError:
        pass
    except UetError as e:  # pragma: no cover - only DecodeError is allowed
        pytest.fail(f"unexpected {e!r}")


def test_control_ack_flag_names():
    u = parse_uet(h(pds.CONTROL, ctl_type=ControlType.PROBE, flags=ReqFlag.ISROD | ReqFlag.RETX))
    assert u.to_dict()["pds"]["flags_names"] == ["RETX", "ISROD"]
    u = parse_uet(h(pds.ACK, flags=AckFlag.REQ_CLOSE | AckFlag.M))
    assert u.to_dict()["pds"]["flags_names"] == ["REQ_CLOSE", "M"]
    # ISROD's bit on a request is reserved: shown as a number
    u = parse_uet(req(flags=0x20 | ReqFlag.AR) + std())
    assert u.to_dict()["pds"]["flags_names"] == ["AR", "0x20"]


def test_checksums_and_layers_agree_with_scapy():
    """An independent stack (scapy) reads our frames the same way and computes the same checksums."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether

    checked = 0
    for _, _, frame in SAMPLE:
        pkt = Ether(frame)
        ip = pkt.getlayer(IP) or pkt.getlayer(IPv6)
        if ip is None:
            continue
        fresh = Ether(frame)
        fip = fresh.getlayer(IP) or fresh.getlayer(IPv6)
        if isinstance(fip, IP):
            del fip.chksum
        if fresh.getlayer(UDP) is not None:
            del fresh[UDP].chksum
        rebuilt = Ether(bytes(fresh))
        assert bytes(rebuilt)[: len(frame)] == frame[: len(bytes(rebuilt))]
        try:
            fr = parse_frame(frame)
        except DecodeError:
            continue
        assert fr.src == ip.src and fr.dst == ip.dst and not fr.warnings
        if pkt.getlayer(UDP) is not None:
            assert (fr.sport, fr.dport) == (pkt[UDP].sport, pkt[UDP].dport)
            u = _some(fr.uet)
            assert bytes(pkt[UDP].payload)[: u.end - u.start] == frame[u.start : u.end]
        checked += 1
    assert checked >= 25
