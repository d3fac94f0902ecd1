"""RoCEv2 wire: the ICRC of spec/rocev2-and-fabric.md §4.2 byte for byte, Scapy and tshark
agreeing with our packets, the header chain's error paths, and ``uet-decode`` in every mode.

The per-layout codec properties and golden vectors of BTH, RETH, AETH, AtomicETH, AtomicAckETH,
ImmDt, IETH and CNP run with the UET headers in test_wire_properties.py / test_wire_golden.py.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uet.errors import DecodeError
from uet.pcap import PcapWriter
from uet.wire import net
from uet.wire.build import build_ethernet, build_ip_packet
from uet.wire.capture import parse_frame
from uet.wire.icrc import RESIDUE, check_icrc, icrc, icrc_bytes
from uet.wire.roce import (
    AETH,
    ATOMIC_ACK_ETH,
    ATOMIC_ETH,
    BTH,
    EXTENSIONS,
    IETH,
    IMMDT,
    RETH,
    WITH_PAYLOAD,
    OpCode,
    entropy_port,
    flow_label,
    psn_diff,
)
from uet.wire.rocepkt import encode_roce, parse_roce, seal, verify_icrc

# §4.2: RC SEND_ONLY, 16-byte payload, 192.168.1.1 → .2, TOS 0x6A, ID 0x1234, DestQP 0x11, AckReq.
SEND_ONLY = bytes.fromhex(
    "45 6a 00 3c 12 34 40 00 40 11 a4 bf c0 a8 01 01 c0 a8 01 02"
    "c0 00 12 b7 00 28 00 00"
    "04 00 ff ff 00 00 00 11 80 00 00 00"
    "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"
    "ae b3 d1 bf"
)
FED_TO_CRC = bytes.fromhex(
    "FF FF FF FF FF FF FF FF"
    "45 FF 00 3c 12 34 40 00 FF 11 FF FF c0 a8 01 01 c0 a8 01 02"
    "c0 00 12 b7 00 28 FF FF"
    "04 00 ff ff FF 00 00 11 80 00 00 00"
    "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"
)
CNP_PKT = bytes.fromhex(
    "45c0003c000140004011b69cc0a80102c0a80101c00012b7002800008100ffff4000002200000000" + "00" * 16 + "7cf40ba6"
)
ACK_PKT = bytes.fromhex(
    "45680030000240004011b6ffc0a80102c0a80101c00012b7001c00001100ffff00000022000000001f000001ebaa8c82"
)
NAK_PKT = bytes.fromhex(
    "45680030000340004011b6fec0a80102c0a80101c00012b7001c00001100ffff000000220000000560000001f89eb937"
)
A, B = net.ip_bytes("192.168.1.1"), net.ip_bytes("192.168.1.2")


def test_worked_example_byte_for_byte() -> None:
    import zlib

    assert zlib.crc32(FED_TO_CRC) == 0xBFD1B3AE
    assert icrc(SEND_ONLY[:-4]) == 0xBFD1B3AE
    assert icrc_bytes(SEND_ONLY[:-4]) == bytes.fromhex("aeb3d1bf")
    assert zlib.crc32(FED_TO_CRC + SEND_ONLY[-4:]) == RESIDUE
    # and the packet is what our own builders produce from the example's fields
    body = encode_roce(BTH.make(opcode=OpCode.SEND_ONLY, dest_qp=0x11, ack_req=1, psn=0), (), bytes(range(16)))
    ip = build_ip_packet(
        body + bytes(4), "192.168.1.1", "192.168.1.2", entropy=0xC000, dport=4791, dscp=26, ecn=2,
        identification=0x1234, udp_checksum=False,
    )  # fmt: skip
    assert ip[:-4] == SEND_ONLY[:-4]
    assert icrc_bytes(ip[:-4]) == SEND_ONLY[-4:]


@pytest.mark.parametrize("pkt", [SEND_ONLY, CNP_PKT, ACK_PKT, NAK_PKT], ids=["send_only", "cnp", "ack", "nak"])
def test_verified_vectors(pkt: bytes) -> None:
    assert check_icrc(pkt)
    r = parse_roce(pkt, 28, ip_start=0)
    assert r.icrc_ok


def test_variant_fields_do_not_change_the_icrc() -> None:
    """TOS 0x6B or TTL 3 (what a switch may rewrite) leave the ICRC valid; anything else breaks it."""
    for i, v in ((1, 0x6B), (8, 3), (10, 0), (26, 0x12), (32, 0xC0)):  # TOS, TTL, IP csum, UDP csum, BTH[4]
        p = bytearray(SEND_ONLY)
        p[i] = v
        assert check_icrc(p), i
    for i in (4, 5, 6, 9, 12, 19, 20, 22, 28, 29, 33, 36, 37, 40, 55):  # ID, flags, proto, addrs, ports, BTH...
        p = bytearray(SEND_ONLY)
        p[i] ^= 0x01
        assert not check_icrc(p), i


def test_cnp_and_ack_decode() -> None:
    cnp = parse_roce(CNP_PKT, 28, ip_start=0)
    assert cnp.opcode == OpCode.CNP and cnp.bth.becn == 1 and cnp.bth.dest_qp == 0x22 and cnp.bth.psn == 0
    ack = parse_roce(ACK_PKT, 28)
    assert ack.aeth == AETH.make(syndrome=0x1F, msn=1) and ack.icrc_ok is None
    nak = parse_roce(NAK_PKT, 28)
    assert nak.aeth is not None and nak.aeth.syndrome == 0x60 and nak.bth.psn == 5


def test_seal_is_the_canonical_frame_icrc() -> None:
    """The ICRC a QP computes (canonical headers) is the one of the frame this project builds."""
    body = encode_roce(BTH.make(opcode=OpCode.SEND_ONLY, dest_qp=7, psn=9), (), b"hello")
    dgram = seal(body, A, B, 0xC123)
    assert verify_icrc(dgram, A, B, 0xC123)
    assert not verify_icrc(dgram, A, B, 0xC124)
    ip = build_ip_packet(dgram, "192.168.1.1", "192.168.1.2", entropy=0xC123, dport=4791, dscp=26, ecn=3)
    assert check_icrc(ip)  # a computed UDP checksum is masked too
    fr = parse_frame(build_ethernet(ip))
    assert fr.kind == "roce" and fr.roce is not None
    assert fr.roce.icrc_ok and fr.roce.payload == b"hello" and not fr.warnings


def test_entropy_port_fold() -> None:
    assert flow_label(0x11, 0x22) == flow_label(0x22, 0x11)
    for a, b in ((1, 2), (0x11, 0x22), (0xFFFFFF, 0xFFFFFE)):
        assert 0xC000 <= entropy_port(a, b) <= 0xFFFF
    # hand-computed: 0x11 * 0x22 = 0x242 (no high bits), label 0x242, port 0xC242
    assert entropy_port(0x11, 0x22) == 0xC242


def test_psn_diff_wraps() -> None:
    assert psn_diff(0, 0xFFFFFF) == 1
    assert psn_diff(0xFFFFFF, 0) == -1
    assert psn_diff(5, 5) == 0
    assert psn_diff(0x7FFFFF, 0) == 0x7FFFFF
    assert psn_diff(0x800000, 0) == -0x800000


# -- the header chain's error paths ----------------------------------------------------------------


def _dgram(op: int, exts: tuple = (), payload: bytes = b"") -> bytes:
    return seal(encode_roce(BTH.make(opcode=op, dest_qp=0x11), exts, payload), A, B, 0xC000)  # QP 1 is the GSI (MADs)


EXT_VALUES = {
    RETH: RETH.make(va=0x1000, rkey=5, dma_len=3),
    AETH: AETH.make(),
    ATOMIC_ETH: ATOMIC_ETH.make(va=8, rkey=5, swap_add=1),
    ATOMIC_ACK_ETH: ATOMIC_ACK_ETH.make(orig=7),
    IMMDT: IMMDT.make(imm=0xCAFE),
    IETH: IETH.make(rkey=9),
}


PAYLOAD = bytes(range(30))  # pad 2


def all_rc_datagrams() -> list[bytes]:
    out = []
    for op, lays in EXTENSIONS.items():
        payload = PAYLOAD if op in WITH_PAYLOAD else b""
        out.append(_dgram(op, tuple(EXT_VALUES[lay] for lay in lays), payload))
    out.append(seal(encode_roce(BTH.make(opcode=OpCode.CNP, becn=1, dest_qp=3)), A, B, 0xC000))
    return out


def test_every_opcode_round_trips() -> None:
    for d in all_rc_datagrams():
        r = parse_roce(d)
        lays = () if r.opcode == OpCode.CNP else EXTENSIONS[r.opcode]
        assert [lay for lay, _ in r.exts] == list(lays)
        assert r.payload == (PAYLOAD if r.opcode in WITH_PAYLOAD else b"")
        assert r.bth.pad_cnt == (2 if r.opcode in WITH_PAYLOAD else 0)
        assert parse_roce(d, fast=False).exts == r.exts


@pytest.mark.parametrize(
    ("data", "header", "reason"),
    [
        (bytes(15), "bth", "truncated"),
        (_dgram(OpCode.SEND_ONLY)[:0] + bytes([0x24]) + bytes(15), "bth", "not RC"),  # UC SEND_ONLY
        (bytes([0x64]) + bytes(15), "bth", "not RC"),  # UD
        (bytes([0x15]) + bytes(15), "bth", "not defined"),
        (_dgram(OpCode.RDMA_WRITE_ONLY, (EXT_VALUES[RETH],))[:20], "reth", "truncated"),
        (_dgram(OpCode.ACKNOWLEDGE, (EXT_VALUES[AETH],), b"") + b"", None, None),
        (_dgram(OpCode.ACKNOWLEDGE, (AETH.make(),))[:16] + b"xxxx" + bytes(4), "bth", "no payload"),
        (bytes([0x04, 0x30]) + bytes(10) + b"ab" + bytes(4), "bth", "pad count 3"),
        (bytes([0x81]) + bytes(11) + bytes(8) + bytes(4), "cnp", "16 expected"),
    ],
)
def test_malformed(data: bytes, header: str | None, reason: str | None) -> None:
    if header is None:
        parse_roce(data)
        return
    with pytest.raises(DecodeError) as e:
        parse_roce(data)
    assert reason is not None and e.value.reason is not None
    assert e.value.header == header and reason in e.value.reason


@settings(max_examples=200)
@given(st.binary(max_size=80))
def test_arbitrary_bytes_decode_or_decodeerror(raw: bytes) -> None:
    try:
        parse_roce(raw)
    except DecodeError as e:
        assert 0 <= e.offset <= len(raw)


# -- Scapy computes the same ICRC ------------------------------------------------------------------

scapy_roce = pytest.importorskip("scapy.contrib.roce")


@settings(max_examples=60, deadline=None)
@given(
    op=st.sampled_from(sorted(EXTENSIONS)),
    bth=st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 0xFFFF), st.integers(0, 3)),
    qp=st.integers(0, 0xFFFFFF),
    psn=st.integers(0, 0xFFFFFF),
    ack=st.integers(0, 1),
    rest=st.binary(max_size=64),
    ip=st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 0xFFFF), st.booleans()),
    sport=st.integers(0, 0xFFFF),
    v6=st.booleans(),
)
def test_scapy_computes_the_same_icrc(op, bth, qp, psn, ack, rest, ip, sport, v6) -> None:  # noqa: ANN001
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.packet import Raw, raw

    se, fb, pkey, tver = bth
    tos, ttl, ident, df = ip
    rest = rest[: len(rest) - len(rest) % 4]
    b = scapy_roce.BTH(
        opcode=op, solicited=se, padcount=0, version=tver, pkey=pkey, fecn=fb, becn=1 - fb, dqpn=qp, ackreq=ack, psn=psn
    )
    outer: IP | IPv6
    if v6:
        outer = IPv6(src="fe80::1", dst="2001:db8::2", tc=tos, hlim=ttl, fl=ident)
    else:
        outer = IP(src="10.1.2.3", dst="10.4.5.6", tos=tos, ttl=ttl, id=ident, flags="DF" if df else 0)
    wire = raw(outer / UDP(sport=sport, dport=4791, chksum=0) / b / Raw(rest))
    assert icrc_bytes(wire[:-4]) == wire[-4:]
    assert check_icrc(wire)
    ours = BTH.make(opcode=op, se=se, tver=tver, pkey=pkey, fecn=fb, becn=1 - fb, dest_qp=qp, ack_req=ack, psn=psn)
    assert wire[(48 if v6 else 28) : (60 if v6 else 40)] == BTH.encode(ours)


# -- decoder and tshark ----------------------------------------------------------------------------


def _frames() -> list[bytes]:
    frames = []
    for d in all_rc_datagrams():
        ip = build_ip_packet(d, "192.168.1.1", "192.168.1.2", entropy=0xC000, dport=4791, udp_checksum=False)
        frames.append(build_ethernet(ip))
    return frames


def _pcap(path: Path) -> Path:
    with PcapWriter(path) as w:
        for i, f in enumerate(_frames()):
            w.write(f, timestamp_ns=i * 1000)
    return path


def test_decode_tool_every_mode(tmp_path: Path) -> None:
    from tools.decode import main

    pcap = _pcap(tmp_path / "roce.pcap")
    for mode in ([], ["-V"], ["--json"], ["--stats"], ["--json", "--stats"]):
        out = io.StringIO()
        import contextlib

        with contextlib.redirect_stdout(out):
            rc = main([*mode, str(pcap)])
        assert rc == 0, (mode, out.getvalue())
        text = out.getvalue()
        if mode == ["--json"]:
            objs = [json.loads(line) for line in text.splitlines()]
            assert len(objs) == len(EXTENSIONS) + 1
            assert all(o["kind"] == "roce" and o["roce"]["icrc_ok"] for o in objs)
        elif mode == []:
            assert text.count("RoCEv2 ") == len(EXTENSIONS) + 1 and "icrc=" in text and " BAD" not in text
        elif mode == ["-V"]:
            assert "bth  @42" in text and "reth  @54" in text and "(correct)" in text
        else:
            assert "ACKNOWLEDGE" in text


def test_decode_tool_reports_a_bad_icrc() -> None:
    from tools.decode import main

    bad = bytearray(SEND_ONLY)
    bad[-1] ^= 1
    out = io.StringIO()
    import contextlib

    with contextlib.redirect_stdout(out):
        rc = main(["--hex", bad.hex()])
    assert rc == 1  # a wrong ICRC counts like a malformed packet
    assert "ICRC aeb3d1be is wrong (should be aeb3d1bf)" in out.getvalue()
    with contextlib.redirect_stdout(io.StringIO()) as o2:
        assert main(["--filter", "send_only", "--hex", SEND_ONLY.hex()]) == 0
    assert "SEND_ONLY" in o2.getvalue()
    with contextlib.redirect_stdout(io.StringIO()) as o3:
        assert main(["--hex", bytes([*SEND_ONLY[:28], 0x64, *SEND_ONLY[29:]]).hex()]) == 1  # UD: malformed
    assert "not RC" in o3.getvalue()


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
def test_tshark_dissects_our_roce_pcap(tmp_path: Path) -> None:
    """Wireshark's InfiniBand dissector (UDP 4791) decodes every opcode with no malformed packet
    and no expert note of warning or error severity."""
    pcap = _pcap(tmp_path / "roce.pcap")
    r = subprocess.run(
        ["tshark", "-n", "-r", str(pcap), "-T", "fields", "-e", "frame.number", "-e", "infiniband.bth.opcode",
         "-e", "infiniband.bth.destqp", "-e", "infiniband.invariant.crc", "-e", "_ws.malformed",
         "-e", "_ws.expert.severity"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert len(rows) == len(EXTENSIONS) + 1
    ops = sorted(EXTENSIONS) + [OpCode.CNP]
    for row, op, f in zip(rows, ops, _frames(), strict=True):
        assert int(row[1], 0) == op, row
        assert int(row[2], 0) in (0x11, 3)
        # Wireshark shows the ICRC as a big-endian number: our bytes read that way
        # (Wireshark 4.0 does not know the RoCEv2 CNP opcode 0x81 and shows no ICRC for it)
        if op != OpCode.CNP:
            assert int(row[3], 0) == int.from_bytes(f[-4:], "big"), row
        assert row[4] == "", f"malformed: {row}"
        sev = [int(s, 0) for s in row[5].split(",") if s]
        assert all(s < 0x00600000 for s in sev), f"expert warning/error: {row}"


@settings(max_examples=100)
@given(body=st.binary(min_size=12, max_size=300), sport=st.integers(0, 0xFFFF), v6=st.booleans())
def test_icrc_context_matches_the_plain_functions(body: bytes, sport: int, v6: bool) -> None:
    from uet.wire.rocepkt import IcrcContext

    s, d = (net.ip_bytes("fe80::1"), net.ip_bytes("2001:db8::2")) if v6 else (A, B)
    ctx = IcrcContext(s, d, sport)
    sealed = ctx.seal(body)
    assert sealed == seal(body, s, d, sport)
    assert ctx.verify(sealed) and verify_icrc(sealed, s, d, sport)
    bad = bytearray(sealed)
    bad[len(bad) // 2] ^= 0x40
    assert ctx.verify(bad) == verify_icrc(bad, s, d, sport)
    if len(bad) // 2 != 4:  # BTH byte 4 is masked
        assert not ctx.verify(bad)
