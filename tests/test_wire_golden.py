"""Golden vectors: exact bytes worked out by hand from spec/wire-format.md.

Part 1 rebuilds the worked example of wire-format.md §13 byte for byte (IPv4, UDP, PDS, SES and
payload, checksums included) with the wire layouts and checks the decoders read it back.

Part 2 holds ONE hand-checked vector per layout of ``pds``, ``ses``, ``tss`` and ``net``. The
expected hex was written from the spec tables, not produced by the code under test: each vector's
comment shows the bit packing of every word that is not a plain byte-aligned field. Values are
chosen distinctive (no two neighbouring fields alike, signed fields negative, extremes where a
field is narrow) so a field at the wrong offset or width cannot go unnoticed.
"""

from __future__ import annotations

from typing import Any

import pytest
from wire_strategies import HEADER_LAYOUTS

from uet.wire import net, pds, roce, ses, tss
from uet.wire.chain import parse_uet
from uet.wire.layout import Layout

# -- Part 1: wire-format.md §13 ------------------------------------------------------------------

A = net.ip_bytes("10.0.0.1")
B = net.ip_bytes("10.0.0.2")

REQUEST_PACKET = bytes.fromhex(
    """
    45 00 00 59 00 00 40 00 40 11 26 92 0a 00 00 01
    0a 00 00 02 42 42 12 b9 00 45 2b b9 11 8c ff ff
    00 00 10 00 00 01 00 00 05 03 00 01 00 00 00 42
    00 03 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00
    00 00 00 05 68 65 6c 6c 6f
    """
)
ACK_PACKET = bytes.fromhex(
    """
    45 b8 00 34 00 00 40 00 40 11 25 ff 0a 00 00 02
    0a 00 00 01 42 42 12 b9 00 20 4b 64 3a 00 00 00
    00 00 10 00 00 02 00 01 01 01 00 01 00 00 00 42
    00 00 00 05
    """
)
BARE_ACK = bytes.fromhex("38 00 00 00 00 00 10 00 00 02 00 01")

SYN_REQUEST = dict(type=2, next_hdr=3, flags=0x0C, clear_psn_offset=-1, psn=4096, spdcid=1, use_rsv_pdc=0, psn_offset=0)
SEND_SOM = dict(
    opcode=5,
    version=0,
    flags=3,
    message_id=1,
    ri_generation=0,
    job_id=0x42,
    pid_on_fep=3,
    resource_index=0,
    buffer_offset=0,
    initiator=0,
    match_bits=0,
    header_data=0,
    request_length=5,
)
ACK_13_2 = dict(type=7, next_hdr=4, flags=0, ack_psn_offset=0, cack_psn=4096, spdcid=2, dpdcid=1)
RESPONSE_OK = dict(
    list=0, opcode=1, version=0, return_code=1, message_id=1, ri_generation=0, job_id=0x42, modified_length=5
)


def build_ipv4_udp(src: bytes, dst: bytes, dscp: int, entropy: int, uet: bytes) -> bytes:
    """An IPv4/UDP packet around ``uet`` with both checksums computed (wire-format.md §1.1, §1.3)."""
    udp_len = net.UDP.size + len(uet)
    udp0 = net.UDP.make(src_port=entropy, dst_port=net.UET_UDP_PORT, length=udp_len, checksum=0)
    csum = net.udp_checksum(src, dst, net.UDP.encode(udp0) + uet)
    udp = net.UDP.encode(udp0._replace(checksum=csum))
    ip0 = net.IPV4.make(
        dscp=dscp, ecn=0, total_length=net.IPV4.size + udp_len, identification=0, src=src, dst=dst, checksum=0
    )
    ip = net.IPV4.encode(ip0._replace(checksum=net.inet_checksum(net.IPV4.encode(ip0))))
    return ip + udp + uet


def test_13_1_request_uet_bytes() -> None:
    pds_b = pds.REQUEST_SYN.encode(pds.REQUEST_SYN.make(**SYN_REQUEST))
    ses_b = ses.STANDARD[(1, "none")].encode(ses.STANDARD[(1, "none")].make(**SEND_SOM))
    assert pds_b + ses_b + b"hello" == REQUEST_PACKET[0x1C:]
    assert pds_b == bytes.fromhex("118c ffff 00001000 0001 0000")
    assert pds.pds_layout(pds_b[0] >> 3, pds_b[1] & 0x7F) is pds.REQUEST_SYN
    assert ses.ses_layout(3, ses_b[0], ses_b[1]) is ses.STANDARD[(1, "none")]


def test_13_1_whole_packet() -> None:
    uet = REQUEST_PACKET[0x1C:]
    pkt = build_ipv4_udp(A, B, dscp=0, entropy=0x4242, uet=uet)
    assert len(pkt) == 89
    assert pkt[10:12] == bytes.fromhex("2692")
    assert pkt[26:28] == bytes.fromhex("2bb9")
    assert pkt == REQUEST_PACKET


def test_13_1_decode() -> None:
    ip = net.IPV4.decode(REQUEST_PACKET)
    assert (ip.version, ip.ihl, ip.dscp, ip.ecn, ip.total_length, ip.df, ip.ttl) == (4, 5, 0, 0, 89, 1, 64)
    assert ip.protocol == net.IpProto.UDP and ip.checksum == 0x2692
    assert net.ip_str(ip.src) == "10.0.0.1" and net.ip_str(ip.dst) == "10.0.0.2"
    assert net.inet_checksum(REQUEST_PACKET[:20]) == 0  # a valid header sums to 0xFFFF
    udp = net.UDP.decode(REQUEST_PACKET, 20)
    assert udp == (0x4242, 4793, 69, 0x2BB9)
    assert pds.REQUEST_SYN.decode(REQUEST_PACKET, 28)._asdict() == SYN_REQUEST
    assert ses.STANDARD[(1, "none")].decode(REQUEST_PACKET, 40)._asdict() == SEND_SOM
    assert pds.clear_psn(4096, -1) == 0xFFF and pds.start_psn(4096, 0) == 4096
    # with REL set the SES byte 1 becomes 0b and only the UDP checksum changes (§13.1 note)
    uet = bytearray(REQUEST_PACKET[0x1C:])
    uet[12 + 1] = 0x0B
    rel = build_ipv4_udp(A, B, dscp=0, entropy=0x4242, uet=bytes(uet))
    assert rel[:26] == REQUEST_PACKET[:26] and rel[26:28] != REQUEST_PACKET[26:28]


def test_13_2_ack_with_response() -> None:
    pds_b = pds.ACK.encode(pds.ACK.make(**ACK_13_2))
    ses_b = ses.RESPONSE.encode(ses.RESPONSE.make(**RESPONSE_OK))
    assert len(pds_b + ses_b) == 24
    pkt = build_ipv4_udp(B, A, dscp=46, entropy=0x4242, uet=pds_b + ses_b)
    assert len(pkt) == 52
    assert pkt[1] == 0xB8
    assert pkt[10:12] == bytes.fromhex("25ff")
    assert pkt[26:28] == bytes.fromhex("4b64")
    assert pkt == ACK_PACKET
    assert pds.ACK.decode(ACK_PACKET, 28)._asdict() == ACK_13_2
    assert ses.RESPONSE.decode(ACK_PACKET, 40)._asdict() == RESPONSE_OK
    assert net.IPV4.decode(ACK_PACKET).dscp == 46


def test_13_2_bare_ack() -> None:
    bare = pds.ACK.make(**{**ACK_13_2, "next_hdr": 0})
    assert pds.ACK.encode(bare) == BARE_ACK
    assert pds.ACK.decode(BARE_ACK) == bare
    assert pds.pds_layout(BARE_ACK[0] >> 3, BARE_ACK[1] & 0x7F) is pds.ACK


def test_tss_example_section_3() -> None:
    """wire-format.md §3: SP = 0, AN = 0, SDI = 1, epoch 0, TSC 7."""
    want = bytes.fromhex("08 00 00 01 00 00 00 00 00 00 00 07")
    v = tss.TSS.make(sdi=1, tsc=7)
    assert tss.TSS.encode(v) == want
    assert tss.TSS.decode(want) == (1, 0, 0, 1, 0, 7)
    assert tss.tss_layout(want[0]) is tss.TSS


# -- Part 2: one hand-checked vector per layout --------------------------------------------------
#
# Prologue (wire-format.md §4): 16-bit word type<<11 | next_hdr<<7 | flags.
#   type 2 -> 0x1000, 3 -> 0x1800, 5 -> 0x2800, 6 -> 0x3000, 7 -> 0x3800, 8 -> 0x4000, 9 -> 0x4800,
#   10 -> 0x5000, 11 -> 0x5800, 12 -> 0x6000, 13 -> 0x6800, 14 -> 0x7000;
#   next_hdr 1 -> 0x080, 2 -> 0x100, 3 -> 0x180, 4 -> 0x200, 5 -> 0x280, 6 -> 0x300.

V: list[tuple[Layout, dict[str, Any], str]] = [
    # ---- PDS ------------------------------------------------------------------------------------
    (
        pds.REQUEST,
        # ROD request, STANDARD, RETX|AR: 0x1800 | 0x180 | 0x18 = 0x1998; -2 = 0xfffe
        dict(type=3, next_hdr=3, flags=0x18, clear_psn_offset=-2, psn=0x01020304, spdcid=0xABCD, dpdcid=0x1234),
        "1998 fffe 01020304 abcd 1234",
    ),
    (
        pds.REQUEST_SYN,
        # RUD, SMALL, SYN|AR: 0x1000 | 0x080 | 0x0c = 0x108c
        # bytes 10-11: use_rsv_pdc at bit 15 (0x8000) | rsvd 3 | psn_offset 0xabc -> 0x8abc
        dict(
            type=2,
            next_hdr=1,
            flags=0x0C,
            clear_psn_offset=0x7FFF,
            psn=0xFFFFFFFE,
            spdcid=1,
            use_rsv_pdc=1,
            psn_offset=0xABC,
        ),
        "108c 7fff fffffffe 0001 8abc",
    ),
    (
        pds.CC_REQUEST,
        # RUD CC, MEDIUM, AR: 0x6800 | 0x100 | 0x08 = 0x6908; -0x8000 = 0x8000; ccc 0x5a, credit 0x123456
        dict(
            type=13,
            next_hdr=2,
            flags=0x08,
            clear_psn_offset=-0x8000,
            psn=0x01020304,
            spdcid=0xABCD,
            dpdcid=0xEF01,
            ccc_id=0x5A,
            credit_target=0x123456,
        ),
        "6908 8000 01020304 abcd ef01 5a 123456",
    ),
    (
        pds.CC_REQUEST_SYN,
        # ROD CC, STANDARD, RETX|AR|SYN: 0x7000 | 0x180 | 0x1c = 0x719c; pdc_info 0 | psn_offset 0xfff
        dict(
            type=14,
            next_hdr=3,
            flags=0x1C,
            clear_psn_offset=-1,
            psn=0x80000000,
            spdcid=0x0102,
            use_rsv_pdc=0,
            psn_offset=0xFFF,
            ccc_id=0xFF,
            credit_target=1,
        ),
        "719c ffff 80000000 0102 0fff ff 000001",
    ),
    (
        pds.ACK,
        # ACK, RESPONSE_DATA, M|RETX|REQ_CLEAR: 0x3800 | 0x280 | 0x32 = 0x3ab2; -3 = 0xfffd
        dict(type=7, next_hdr=5, flags=0x32, ack_psn_offset=-3, cack_psn=0x01020304, spdcid=0xABCD, dpdcid=0x1234),
        "3ab2 fffd 01020304 abcd 1234",
    ),
    (
        pds.ACK_PROBE,
        # ACK, P: 0x3800 | 0x08 = 0x3808; bytes 2-3 = probe_opaque
        dict(type=7, next_hdr=0, flags=0x08, probe_opaque=0xBEEF, cack_psn=0xA0B0C0D0, spdcid=0x0011, dpdcid=0x2200),
        "3808 beef a0b0c0d0 0011 2200",
    ),
    (
        pds.ACK_EPSN,
        # ACK, EPSN|REQ_CLOSE: 0x3800 | 0x44 = 0x3844; expected_psn at 12
        dict(
            type=7,
            next_hdr=0,
            flags=0x44,
            ack_psn_offset=5,
            cack_psn=0x1000,
            spdcid=2,
            dpdcid=1,
            expected_psn=0x01020304,
        ),
        "3844 0005 00001000 0002 0001 01020304",
    ),
    (
        pds.ACK_PROBE_EPSN,
        # ACK, RESPONSE, EPSN|P: 0x3800 | 0x200 | 0x48 = 0x3a48
        dict(
            type=7,
            next_hdr=4,
            flags=0x48,
            probe_opaque=0x1357,
            cack_psn=0xFEDCBA98,
            spdcid=0x0A0B,
            dpdcid=0x0C0D,
            expected_psn=0x11223344,
        ),
        "3a48 1357 fedcba98 0a0b 0c0d 11223344",
    ),
    (
        pds.ACK_CC[(False, "nscc")],
        # ACK_CC, M: 0x4000 | 0x20 = 0x4020; byte 12 = cc_type 0 << 4 | cc_flags 5 = 0x05; mpr 0x01
        # sack_psn_offset -64 = 0xffc0; byte 26 = rc 1 << 7 | rcv_cwnd_pend 0x22 = 0xa2
        dict(
            type=8,
            next_hdr=0,
            flags=0x20,
            ack_psn_offset=1,
            cack_psn=0x01020304,
            spdcid=0xABCD,
            dpdcid=0x1234,
            cc_type=0,
            cc_flags=5,
            mpr=1,
            sack_psn_offset=-64,
            sack_bitmap=0x8000000000000001,
            service_time=0x1111,
            rc=1,
            rcv_cwnd_pend=0x22,
            rcvd_bytes=0x333333,
            ooo_count=0x4444,
        ),
        "4020 0001 01020304 abcd 1234 05 01 ffc0 8000000000000001 1111 a2 333333 4444",
    ),
    (
        pds.ACK_CC[(False, "credit")],
        # ACK_CC, RESPONSE, RETX: 0x4000 | 0x200 | 0x10 = 0x4210; byte 12 = 1 << 4 | 0 = 0x10
        # credit 24 bits at 24, 24 reserved bits, ooo_count at 30
        dict(
            type=8,
            next_hdr=4,
            flags=0x10,
            ack_psn_offset=0,
            cack_psn=0xFFFFFFFF,
            spdcid=1,
            dpdcid=2,
            cc_type=1,
            cc_flags=0,
            mpr=0x10,
            sack_psn_offset=0x7FFF,
            sack_bitmap=0x0123456789ABCDEF,
            credit=0xABCDEF,
            ooo_count=0x0102,
        ),
        "4210 0000 ffffffff 0001 0002 10 10 7fff 0123456789abcdef abcdef 000000 0102",
    ),
    (
        pds.ACK_CC[(False, "raw")],
        # ACK_CC, SMALL_RESPONSE_DATA, REQ_CLEAR: 0x4000 | 0x300 | 0x02 = 0x4302; byte 12 = 0xf << 4 | 0xe
        dict(
            type=8,
            next_hdr=6,
            flags=0x02,
            ack_psn_offset=-1,
            cack_psn=0x01020304,
            spdcid=0xABCD,
            dpdcid=0x1234,
            cc_type=0xF,
            cc_flags=0xE,
            mpr=0xFF,
            sack_psn_offset=0x0100,
            sack_bitmap=0xFFFFFFFFFFFFFFFF,
            ack_cc_state=0x1122334455667788,
        ),
        "4302 ffff 01020304 abcd 1234 fe ff 0100 ffffffffffffffff 1122334455667788",
    ),
    (
        pds.ACK_CC[(True, "nscc")],
        # ACK_CC, P: 0x4008; byte 26 = rc 0 | 0x7f = 0x7f
        dict(
            type=8,
            next_hdr=0,
            flags=0x08,
            probe_opaque=0xCAFE,
            cack_psn=0x01020304,
            spdcid=0xABCD,
            dpdcid=0x1234,
            cc_type=0,
            cc_flags=0,
            mpr=2,
            sack_psn_offset=0,
            sack_bitmap=0xFF,
            service_time=0xFFFF,
            rc=0,
            rcv_cwnd_pend=0x7F,
            rcvd_bytes=0x000100,
            ooo_count=0,
        ),
        "4008 cafe 01020304 abcd 1234 00 02 0000 00000000000000ff ffff 7f 000100 0000",
    ),
    (
        pds.ACK_CC[(True, "credit")],
        # ACK_CC, M|P: 0x4028; byte 12 = 1 << 4 | 3 = 0x13; -2 = 0xfffe
        dict(
            type=8,
            next_hdr=0,
            flags=0x28,
            probe_opaque=0x0102,
            cack_psn=0x0A0B0C0D,
            spdcid=0x0E0F,
            dpdcid=0x1011,
            cc_type=1,
            cc_flags=3,
            mpr=4,
            sack_psn_offset=-2,
            sack_bitmap=2,
            credit=0x000400,
            ooo_count=0xFFFF,
        ),
        "4028 0102 0a0b0c0d 0e0f 1011 13 04 fffe 0000000000000002 000400 000000 ffff",
    ),
    (
        pds.ACK_CC[(True, "raw")],
        # ACK_CC, RESPONSE_DATA, P: 0x4000 | 0x280 | 0x08 = 0x4288; byte 12 = 2 << 4 | 1 = 0x21
        dict(
            type=8,
            next_hdr=5,
            flags=0x08,
            probe_opaque=0xFFFF,
            cack_psn=0,
            spdcid=0xFFFF,
            dpdcid=0,
            cc_type=2,
            cc_flags=1,
            mpr=0x80,
            sack_psn_offset=0x1234,
            sack_bitmap=0x0102030405060708,
            ack_cc_state=0xF0E0D0C0B0A09080,
        ),
        "4288 ffff 00000000 ffff 0000 21 80 1234 0102030405060708 f0e0d0c0b0a09080",
    ),
    (
        pds.ACK_CCX[(False, "nscc")],
        # ACK_CCX, RESPONSE, RETX: 0x4800 | 0x200 | 0x10 = 0x4a10; byte 12 = 0 | 0xf = 0x0f
        # byte 26 = 1 << 7 | 0x7f = 0xff; ack_ccx_state at 32
        dict(
            type=9,
            next_hdr=4,
            flags=0x10,
            ack_psn_offset=2,
            cack_psn=0x01020304,
            spdcid=0xABCD,
            dpdcid=0x1234,
            cc_type=0,
            cc_flags=0xF,
            mpr=1,
            sack_psn_offset=-1,
            sack_bitmap=0xFFFFFFFF,
            service_time=0x0A0B,
            rc=1,
            rcv_cwnd_pend=0x7F,
            rcvd_bytes=0xFFFFFF,
            ooo_count=1,
            ack_ccx_state=0x0102030405060708,
        ),
        "4a10 0002 01020304 abcd 1234 0f 01 ffff 00000000ffffffff 0a0b ff ffffff 0001 0102030405060708",
    ),
    (
        pds.ACK_CCX[(False, "raw")],
        # ACK_CCX, SMALL_RESPONSE_DATA, every flag but P: 0x4800 | 0x300 | 0x77 = 0x4b77; byte 12 = 3 << 4 | 0xc
        dict(
            type=9,
            next_hdr=6,
            flags=0x77,
            ack_psn_offset=-0x8000,
            cack_psn=0x01020304,
            spdcid=0xABCD,
            dpdcid=0x1234,
            cc_type=3,
            cc_flags=0xC,
            mpr=0,
            sack_psn_offset=0,
            sack_bitmap=0,
            ack_cc_state=0xDEADBEEFCAFEF00D,
            ack_ccx_state=0x0011223344556677,
        ),
        "4b77 8000 01020304 abcd 1234 3c 00 0000 0000000000000000 deadbeefcafef00d 0011223344556677",
    ),
    (
        pds.ACK_CCX[(True, "nscc")],
        # ACK_CCX, P: 0x4808; byte 12 = 0 | 1; byte 26 = 0 | 0x01
        dict(
            type=9,
            next_hdr=0,
            flags=0x08,
            probe_opaque=0x4242,
            cack_psn=0xFFFFFFFE,
            spdcid=1,
            dpdcid=2,
            cc_type=0,
            cc_flags=1,
            mpr=3,
            sack_psn_offset=0x40,
            sack_bitmap=0x8000000000000000,
            service_time=0x0100,
            rc=0,
            rcv_cwnd_pend=1,
            rcvd_bytes=0x010203,
            ooo_count=0x0405,
            ack_ccx_state=0xFFFFFFFFFFFFFFFF,
        ),
        "4808 4242 fffffffe 0001 0002 01 03 0040 8000000000000000 0100 01 010203 0405 ffffffffffffffff",
    ),
    (
        pds.ACK_CCX[(True, "raw")],
        # ACK_CCX, M|P: 0x4828; byte 12 = 0xf << 4 | 0xf; -0x7fff = 0x8001
        dict(
            type=9,
            next_hdr=0,
            flags=0x28,
            probe_opaque=0x8001,
            cack_psn=0x7FFFFFFF,
            spdcid=0xFFFE,
            dpdcid=2,
            cc_type=0xF,
            cc_flags=0xF,
            mpr=0xFF,
            sack_psn_offset=-0x7FFF,
            sack_bitmap=0x5555555555555555,
            ack_cc_state=0xAAAAAAAAAAAAAAAA,
            ack_ccx_state=1,
        ),
        "4828 8001 7fffffff fffe 0002 ff ff 8001 5555555555555555 aaaaaaaaaaaaaaaa 0000000000000001",
    ),
    (
        pds.NACK,
        # NACK, M|RETX: 0x5000 | 0x30 = 0x5030; code 0x17 NEW_START_PSN, vendor 0x9a
        dict(
            type=10,
            next_hdr=0,
            flags=0x30,
            nack_code=0x17,
            vendor_code=0x9A,
            nack_psn=0x01020304,
            spdcid=0xABCD,
            dpdcid=0x1234,
            payload=0x00010000,
        ),
        "5030 17 9a 01020304 abcd 1234 00010000",
    ),
    (
        pds.NACK_CCX,
        # NACK_CCX, NT: 0x6000 | 0x08 = 0x6008
        # bytes 16-23: nccx_type 0xa << 60 | state1 0x0123456789abcde (60 bits) = 0xa0123456789abcde
        dict(
            type=12,
            next_hdr=0,
            flags=0x08,
            nack_code=0x0B,
            vendor_code=0,
            nack_psn=0xDEADBEEF,
            spdcid=0,
            dpdcid=0,
            payload=0xFFFFFFFF,
            nccx_type=0xA,
            nack_ccx_state1=0x0123456789ABCDE,
            nack_ccx_state2=0x0FEDCBA987654321,
        ),
        "6008 0b 00 deadbeef 0000 0000 ffffffff a0123456789abcde 0fedcba987654321",
    ),
    (
        pds.CONTROL,
        # Control, ctl_type 6 PROBE, ISROD|RETX: 0x5800 | 6 << 7 (0x300) | 0x30 = 0x5b30
        dict(
            type=11,
            ctl_type=6,
            flags=0x30,
            probe_opaque=0xBEEF,
            psn=0x01020304,
            spdcid=0xABCD,
            dpdcid=0x1234,
            payload=0x05060708,
        ),
        "5b30 beef 01020304 abcd 1234 05060708",
    ),
    (
        pds.CONTROL_SYN,
        # Control, ctl_type 4 CLOSE, SYN|AR: 0x5800 | 0x200 | 0x0c = 0x5a0c; 0x8000 | psn_offset 1 = 0x8001
        dict(
            type=11,
            ctl_type=4,
            flags=0x0C,
            probe_opaque=0,
            psn=0x1000,
            spdcid=1,
            use_rsv_pdc=1,
            psn_offset=1,
            payload=0,
        ),
        "5a0c 0000 00001000 0001 8001 00000000",
    ),
    (
        pds.RUDI,
        # RUDI response, RESPONSE, RETX: 0x2800 | 0x200 | 0x10 = 0x2a10; 16 reserved bits
        dict(type=5, next_hdr=4, flags=0x10, pkt_id=0x01020304),
        "2a10 0000 01020304",
    ),
    (
        pds.UUD,
        # UUD, SMALL: 0x3000 | 0x080 = 0x3080
        dict(type=6, next_hdr=1, flags=0),
        "3080 0000",
    ),
    # ---- SES (§8.1: byte 0 = rsvd 2 | opcode 6; byte 1 = version 2 | flags 6) -------------------
    (
        ses.STANDARD[(0, "none")],
        # byte 1 = 1 << 6 | REL|EOM 0x0a = 0x4a; bytes 8-9 = rsvd 4 | 0xabc; 10-11 = rsvd 4 | 0x123
        # bytes 32-35 (SOM = 0) = 16 rsvd | 2 rsvd | payload_length 0x3fff
        dict(
            opcode=0x09,
            version=1,
            flags=0x0A,
            message_id=0xABCD,
            ri_generation=0x12,
            job_id=0x345678,
            pid_on_fep=0xABC,
            resource_index=0x123,
            buffer_offset=0x0102030405060708,
            initiator=0x11223344,
            match_bits=0xA1A2A3A4A5A6A7A8,
            payload_length=0x3FFF,
            message_offset=0x4000,
            request_length=0x10000,
        ),
        "09 4a abcd 12 345678 0abc 0123 0102030405060708 11223344 a1a2a3a4a5a6a7a8 0000 3fff 00004000 00010000",
    ),
    (
        ses.STANDARD[(0, "buffer")],
        # DEFERRABLE_SEND: restart tokens at 12 (src) and 16 (dst); byte 1 = 0 | DC 0x20
        dict(
            opcode=0x08,
            version=0,
            flags=0x20,
            message_id=1,
            ri_generation=0xFF,
            job_id=1,
            pid_on_fep=0xFFF,
            resource_index=0,
            src_restart_token=0xDEADBEEF,
            dst_restart_token=0xCAFEF00D,
            initiator=1,
            match_bits=0,
            payload_length=1,
            message_offset=0xFFFFFFF0,
            request_length=0xFFFFFFFF,
        ),
        "08 20 0001 ff 000001 0fff 0000 deadbeef cafef00d 00000001 0000000000000000 0000 0001 fffffff0 ffffffff",
    ),
    (
        ses.STANDARD[(0, "match")],
        # DEFERRABLE_RTR: tokens at 24 (src) and 28 (dst); byte 1 = 2 << 6 | IE 0x10 = 0x90
        dict(
            opcode=0x0C,
            version=2,
            flags=0x10,
            message_id=0x8000,
            ri_generation=0,
            job_id=0xFFFFFF,
            pid_on_fep=1,
            resource_index=0xFFF,
            buffer_offset=0xFFFFFFFFFFFFFFFF,
            initiator=0x0A0B0C0D,
            src_restart_token=0x01020304,
            dst_restart_token=0x05060708,
            payload_length=0x2000,
            message_offset=0x2000,
            request_length=0x4000,
        ),
        "0c 90 8000 00 ffffff 0001 0fff ffffffffffffffff 0a0b0c0d 01020304 05060708 0000 2000 00002000 00004000",
    ),
    (
        ses.STANDARD[(1, "none")],
        # WRITE, HD|EOM|SOM = 0x07; header_data at 32 (SOM = 1)
        dict(
            opcode=0x01,
            version=0,
            flags=0x07,
            message_id=0x1234,
            ri_generation=0x56,
            job_id=0x789ABC,
            pid_on_fep=0x0DE,
            resource_index=0xF01,
            buffer_offset=0x0000100000000000,
            initiator=0xFEDCBA98,
            match_bits=0x0123456789ABCDEF,
            header_data=0x1122334455667788,
            request_length=5,
        ),
        "01 07 1234 56 789abc 00de 0f01 0000100000000000 fedcba98 0123456789abcdef 1122334455667788 00000005",
    ),
    (
        ses.STANDARD[(1, "buffer")],
        # DEFERRABLE_TSEND, byte 1 = 3 << 6 | 0x3f = 0xff
        dict(
            opcode=0x0B,
            version=3,
            flags=0x3F,
            message_id=0xFFFF,
            ri_generation=1,
            job_id=2,
            pid_on_fep=3,
            resource_index=4,
            src_restart_token=0x0A0A0A0A,
            dst_restart_token=0x0B0B0B0B,
            initiator=0x0C0C0C0C,
            match_bits=0x0D0D0D0D0D0D0D0D,
            header_data=0,
            request_length=0x12345678,
        ),
        "0b ff ffff 01 000002 0003 0004 0a0a0a0a 0b0b0b0b 0c0c0c0c 0d0d0d0d0d0d0d0d 0000000000000000 12345678",
    ),
    (
        ses.STANDARD[(1, "match")],
        # DEFERRABLE_RTR, SOM|EOM; bytes 8-9 = 0 | 0x708, 10-11 = 0 | 0x90a
        dict(
            opcode=0x0C,
            version=0,
            flags=0x03,
            message_id=0x0102,
            ri_generation=0x03,
            job_id=0x040506,
            pid_on_fep=0x708,
            resource_index=0x90A,
            buffer_offset=0x0B0C0D0E0F101112,
            initiator=0x13141516,
            src_restart_token=0x17181920,
            dst_restart_token=0x21222324,
            header_data=0x2526272829303132,
            request_length=0x33343536,
        ),
        "0c 03 0102 03 040506 0708 090a 0b0c0d0e0f101112 13141516 17181920 21222324 2526272829303132 33343536",
    ),
    (
        ses.SMALL,
        # byte 1 = REL|EOM|SOM 0x0b; bytes 2-3 = rsvd 2 | request_length 0x2abc
        dict(
            opcode=0x01,
            version=0,
            flags=0x0B,
            request_length=0x2ABC,
            ri_generation=0x7E,
            job_id=0xABCDEF,
            pid_on_fep=0x123,
            resource_index=0x456,
            buffer_offset=0x8877665544332211,
        ),
        "01 0b 2abc 7e abcdef 0123 0456 8877665544332211",
    ),
    (
        ses.MEDIUM,
        # byte 1 = 1 << 6 | 0x03 = 0x43; buffer_offset at 12 (HD = 0)
        dict(
            opcode=0x05,
            version=1,
            flags=0x03,
            request_length=0x0400,
            ri_generation=0,
            job_id=0x42,
            pid_on_fep=3,
            resource_index=0,
            buffer_offset=0x10,
            initiator=0xABCDEF01,
            match_bits=0x0102030405060708,
        ),
        "05 43 0400 00 000042 0003 0000 0000000000000010 abcdef01 0102030405060708",
    ),
    (
        ses.MEDIUM_HD,
        # HD|EOM|SOM = 0x07; header_data at 12 (HD = 1)
        dict(
            opcode=0x09,
            version=0,
            flags=0x07,
            request_length=0x3FFF,
            ri_generation=0x80,
            job_id=0x800000,
            pid_on_fep=0x800,
            resource_index=0x800,
            header_data=0xFEDCBA9876543210,
            initiator=0x80000000,
            match_bits=0x8000000000000001,
        ),
        "09 07 3fff 80 800000 0800 0800 fedcba9876543210 80000000 8000000000000001",
    ),
    (
        ses.ATOMIC_EXT,
        # SUM, UINT64, cacheable|coherent, reserved byte
        dict(atomic_opcode=0x02, atomic_datatype=0x07, sem_ctl=0x03),
        "02 07 03 00",
    ),
    (
        ses.CSWAP_EXT,
        dict(
            atomic_opcode=0x0D,
            atomic_datatype=0x09,
            sem_ctl=0x01,
            compare_value=0x000102030405060708090A0B0C0D0E0F,
            swap_value=0xF0E0D0C0B0A090807060504030201000,
        ),
        "0d 09 01 00 000102030405060708090a0b0c0d0e0f f0e0d0c0b0a090807060504030201000",
    ),
    (
        ses.RENDEZVOUS_EXT,
        # bytes 4-7: 0xab << 24 | 0xcde << 12 | 0xf01 = 0xabcdef01
        dict(
            eager_length=0x1000,
            read_ri_generation=0xAB,
            read_pid_on_fep=0xCDE,
            read_resource_index=0xF01,
            read_offset=0x0102030405060708,
            read_match_bits=0x1112131415161718,
        ),
        "00001000 abcdef01 0102030405060708 1112131415161718",
    ),
    (ses.SYNC_EXT, dict(group=0x1234, count=0xABCD), "1234 abcd"),
    (
        ses.RESPONSE,
        # byte 0 = list 1 << 6 | NO_RESPONSE 3 = 0x43; byte 1 = 2 << 6 | TOO_LONG 0x22 = 0xa2
        dict(
            list=1,
            opcode=3,
            version=2,
            return_code=0x22,
            message_id=0xBEEF,
            ri_generation=0x07,
            job_id=0x123456,
            modified_length=0x89ABCDEF,
        ),
        "43 a2 beef 07 123456 89abcdef",
    ),
    (
        ses.RESPONSE_DATA,
        # byte 4 reserved; bytes 10-11 = rsvd 2 | payload_length 0x400
        dict(
            list=0,
            opcode=2,
            version=0,
            return_code=1,
            message_id=0x0102,
            job_id=0xABCDEF,
            read_request_message_id=0x0304,
            payload_length=0x0400,
            modified_length=0x10000,
            message_offset=0xC00,
        ),
        "02 01 0102 00 abcdef 0304 0400 00010000 00000c00",
    ),
    (
        ses.SMALL_RESPONSE_DATA,
        # byte 0 = 3 << 6 | 2 = 0xc2; byte 1 = 1 << 6 | 0x3f = 0x7f; byte 4 reserved
        dict(
            list=3,
            opcode=2,
            version=1,
            return_code=0x3F,
            payload_length=0x1234,
            job_id=0x42,
            original_request_psn=0x01020304,
        ),
        "c2 7f 1234 00 000042 01020304",
    ),
    # ---- TSS (§3: byte 0 = type 5 | SP | rsvd | AN) ---------------------------------------------
    (
        tss.TSS,
        # 1 << 3 | SP 0 | AN 1 = 0x09; epoch at 4, 48-bit TSC at 6
        dict(type=1, sp=0, an=1, sdi=0xABCDEF, epoch=0x1234, tsc=0x010203040506),
        "09 abcdef 1234 010203040506",
    ),
    (
        tss.TSS_SSI,
        # 1 << 3 | SP 1 << 2 | AN 0 = 0x0c; SSI at 4
        dict(type=1, sp=1, an=0, sdi=0x000102, ssi=0xC0A80001, epoch=0xFFFF, tsc=0xFFFFFFFFFFFF),
        "0c 000102 c0a80001 ffff ffffffffffff",
    ),
    (tss.ENTROPY, dict(entropy=0x4242), "4242 0000"),
    # ---- link and IP --------------------------------------------------------------------------
    (
        net.ETHERNET,
        dict(dst=bytes.fromhex("020000000001"), src=bytes.fromhex("020000000002"), ethertype=0x86DD),
        "020000000001 020000000002 86dd",
    ),
    (
        net.VLAN,
        # TCI = pcp 5 << 13 (0xa000) | dei 1 << 12 (0x1000) | vid 0x123 = 0xb123
        dict(pcp=5, dei=1, vid=0x123, ethertype=0x0800),
        "b123 0800",
    ),
    (
        net.IPV4,
        # byte 1 = dscp 46 << 2 | ECT(0) 2 = 0xba; bytes 6-7 = rsvd | df 0 | mf 1 << 13 | 0x123 = 0x2123
        dict(
            version=4,
            ihl=5,
            dscp=46,
            ecn=2,
            total_length=0x54,
            identification=0x1C46,
            df=0,
            mf=1,
            frag_offset=0x123,
            ttl=64,
            protocol=253,
            checksum=0xABCD,
            src=bytes.fromhex("c0a80001"),
            dst=bytes.fromhex("0a000002"),
        ),
        "45 ba 0054 1c46 2123 40 fd abcd c0a80001 0a000002",
    ),
    (
        net.IPV6,
        # first word = 6 << 28 | dscp 0x0a << 22 | ecn 3 << 20 | flow 0xabcde = 0x62babcde
        dict(
            version=6,
            dscp=0x0A,
            ecn=3,
            flow_label=0xABCDE,
            payload_length=0x20,
            next_header=17,
            hop_limit=64,
            src=net.ip_bytes("fe80::1"),
            dst=net.ip_bytes("2001:db8::2"),
        ),
        "62babcde 0020 11 40 fe800000000000000000000000000001 20010db8000000000000000000000002",
    ),
    (net.UDP, dict(src_port=0xC001, dst_port=4793, length=0x100, checksum=0xFFFF), "c001 12b9 0100 ffff"),
    (
        net.PFC,
        # opcode 0x0101, reserved byte, class-enable vector 0x81, eight quanta
        dict(
            opcode=0x0101,
            class_enable=0x81,
            quanta0=0,
            quanta1=0xFFFF,
            quanta2=0x0102,
            quanta3=0x0304,
            quanta4=0x0506,
            quanta5=0x0708,
            quanta6=0x090A,
            quanta7=0x0B0C,
        ),
        "0101 00 81 0000 ffff 0102 0304 0506 0708 090a 0b0c",
    ),
    (
        net.SLL,
        dict(packet_type=4, arphrd=1, addr_len=6, addr=bytes.fromhex("0200000000010000"), protocol=0x0800),
        "0004 0001 0006 0200000000010000 0800",
    ),
    (
        net.SLL2,
        # protocol, 2 reserved bytes, ifindex, arphrd, packet_type, addr_len, addr
        dict(protocol=0x86DD, ifindex=3, arphrd=1, packet_type=0, addr_len=6, addr=bytes.fromhex("0200000000020000")),
        "86dd 0000 00000003 0001 00 06 0200000000020000",
    ),
    # RoCEv2 (rocev2-and-fabric.md §2.1, §3, §5.1)
    (
        roce.BTH,
        # byte 1 = se 1 << 7 | m 0 | pad 3 << 4 | tver 0 = 0xb0; byte 4 = fecn 1 << 7 = 0x80; byte 8 = ackreq 0x80
        dict(
            opcode=0x0A,
            se=1,
            m=0,
            pad_cnt=3,
            tver=0,
            pkey=0x1234,
            fecn=1,
            becn=0,
            dest_qp=0xABCDEF,
            ack_req=1,
            psn=0x123456,
        ),
        "0a b0 1234 80 abcdef 80 123456",
    ),
    (roce.RETH, dict(va=0x0102030405060708, rkey=0xDEADBEEF, dma_len=0x10000), "0102030405060708 deadbeef 00010000"),
    (roce.AETH, dict(syndrome=0x60, msn=0xABCD), "60 00abcd"),
    (
        roce.ATOMIC_ETH,
        dict(va=0x1000, rkey=0x11223344, swap_add=0xFFFFFFFFFFFFFFFF, compare=0x8000000000000001),
        "0000000000001000 11223344 ffffffffffffffff 8000000000000001",
    ),
    (roce.ATOMIC_ACK_ETH, dict(orig=0x0123456789ABCDEF), "0123456789abcdef"),
    (roce.IMMDT, dict(imm=0xCAFEF00D), "cafef00d"),
    (roce.IETH, dict(rkey=1), "00000001"),
    # the §4.2 CNP vector's BTH and reserved bytes: opcode 0x81, P_Key 0xffff, BECN (0x40), DestQP 0x22
    (
        roce.CNP,
        dict(opcode=0x81, se=0, m=0, pad_cnt=0, tver=0, pkey=0xFFFF, fecn=0, becn=1, dest_qp=0x22, ack_req=0, psn=0),
        "81 00 ffff 40 000022 00 000000" + "00" * 16,
    ),
]


def test_every_layout_has_a_vector() -> None:
    have = [lay.name for lay, _, _ in V]
    assert len(have) == len(set(have)), "one vector per layout"
    assert set(have) == {lay.name for lay in HEADER_LAYOUTS}  # fused layouts: their parts' vectors


@pytest.mark.parametrize(("layout", "values", "hexstr"), V, ids=[lay.name for lay, _, _ in V])
def test_golden_vector(layout: Layout, values: dict[str, Any], hexstr: str) -> None:
    want = bytes.fromhex(hexstr)
    assert len(want) == layout.size, "the hand-written vector has the wrong length"
    assert set(values) | set(layout.defaults) >= set(layout.field_names), "every field given or defaulted"
    v = layout.make(**values)
    assert layout.encode(v) == want
    assert layout.build(v) == want
    got = layout.decode(want)
    assert got == v
    assert layout.parse(want) == v
    assert {k: got._asdict()[k] for k in values} == values


def test_selectors_pick_the_vector_layouts() -> None:
    """pds_layout / ses_layout / tss_layout choose these layouts from the golden bytes."""
    by_name = {lay.name: bytes.fromhex(h) for lay, _, h in V}
    for lay in pds.ALL_LAYOUTS:
        b = by_name[lay.name]
        cc = b[12] if len(b) > 12 and b[0] >> 3 in (pds.PdsType.ACK_CC, pds.PdsType.ACK_CCX) else None
        assert pds.pds_layout(b[0] >> 3, b[1] & 0x7F, cc) is lay, lay.name
        if cc is not None and lay.name.endswith("_raw"):
            assert pds.pds_layout(b[0] >> 3, b[1] & 0x7F, None) is lay  # no cc byte: raw state
    for (som, tok), lay in ses.STANDARD.items():
        b = by_name[lay.name]
        assert ses.ses_layout(pds.NextHeader.STANDARD, b[0], b[1]) is lay, (som, tok)
    assert ses.ses_layout(pds.NextHeader.SMALL, *by_name["ses_small"][:2]) is ses.SMALL
    assert ses.ses_layout(pds.NextHeader.MEDIUM, *by_name["ses_medium"][:2]) is ses.MEDIUM
    assert ses.ses_layout(pds.NextHeader.MEDIUM, *by_name["ses_medium_hd"][:2]) is ses.MEDIUM_HD
    assert ses.extension_layout(ses.SesOpcode.ATOMIC, by_name["ses_atomic_ext"][0]) is ses.ATOMIC_EXT
    assert ses.extension_layout(ses.SesOpcode.FETCHING_ATOMIC, by_name["ses_cswap_ext"][0]) is ses.CSWAP_EXT
    assert tss.tss_layout(by_name["tss"][0]) is tss.TSS
    assert tss.tss_layout(by_name["tss_ssi"][0]) is tss.TSS_SSI


@pytest.mark.parametrize("cc_type", [1, 2, 0xF])
@pytest.mark.parametrize("probe", [False, True])
def test_ack_ccx_other_than_nscc_keeps_its_state_opaque(cc_type: int, probe: bool) -> None:
    """Issue 16: an ACK_CCX whose CCX type is not NSCC was decoded with the ACK_CC credit
    sub-layout (cc_type 1), whose reserved bits 27–29 were lost on re-encode. The notes define
    no CCX state but NSCC's (§5.5, Δ11): bytes 24–39 stay opaque and survive a round trip."""
    flags = 0x08 if probe else 0x00
    raw = bytes.fromhex(
        f"48{flags:02x} 0102 0a0b0c0d 0e0f 1011 {cc_type:x}3 04 fffe 0000000000000002"
        "  161718 19 1a1b 1c1d 2122232425262728"
    )
    lay = pds.pds_layout(raw[0] >> 3, raw[1] & 0x7F, raw[12])
    assert lay is not None and lay.size == 40
    v = lay.decode(raw)
    assert lay.encode(v) == raw and lay.build(lay.parse(raw)) == raw
    d = v._asdict()
    assert d["ack_cc_state"] == 0x161718191A1B1C1D and d["ack_ccx_state"] == 0x2122232425262728
    pkt = parse_uet(raw)
    assert pkt.pds is not None and pkt.pds.ack_cc_state == 0x161718191A1B1C1D
