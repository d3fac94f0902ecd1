"""Header rewrites of the switch model: ECN/TTL checksum patching, trimming, PFC frames, tuples."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from uet.fabric.model.frames import (
    flow_tuple,
    forward_rewrite,
    ipv4_checksum_ok,
    ipv4_frame,
    is_uet,
    l3_offset,
    parse_pause,
    pfc_frame,
    rewrite_tos_ttl,
    trim,
    uet_header_len,
)

from uet.wire import pds, ses, tss
from uet.wire.net import (
    ETHERNET,
    IPV4,
    PFC,
    PFC_DST_MAC,
    UDP,
    UET_IP_PROTO,
    EtherType,
    inet_checksum,
    ip_bytes,
    udp_checksum,
)

SRC, DST = "10.0.0.1", "10.0.1.2"
PAYLOAD = bytes(range(256)) * 4


def uet_request(payload: bytes = PAYLOAD) -> bytes:
    """PDS RUD request + SES standard SEND (SOM) + payload: what a data packet carries above UDP."""
    p = pds.REQUEST.encode(pds.REQUEST.make(psn=0x1234, spdcid=7, dpdcid=9, flags=pds.ReqFlag.AR))
    s = ses.STANDARD[(1, "none")]
    return p + s.encode(s.make(message_id=3, job_id=0x42, pid_on_fep=3, request_length=len(payload))) + payload


def test_ipv4_frame_matches_layouts() -> None:
    f = ipv4_frame(SRC, DST, b"hello", sport=0x4242, dscp=0, ecn=2)
    eth = ETHERNET.decode(f)
    assert eth.ethertype == EtherType.IPV4
    ip = IPV4.decode(f, 14)
    assert (ip.dscp, ip.ecn, ip.total_length, ip.ttl, ip.df) == (0, 2, 33, 64, 1)
    assert inet_checksum(f[14:34]) == 0
    udp = UDP.decode(f, 34)
    assert (udp.src_port, udp.dst_port, udp.length) == (0x4242, 4793, 13)
    assert udp_checksum(ip_bytes(SRC), ip_bytes(DST), f[34:42][:6] + b"\0\0" + f[42:]) == udp.checksum


@given(tos=st.integers(0, 255), ttl=st.integers(0, 255), ident=st.integers(0, 0xFFFF), old_ttl=st.integers(1, 255))
def test_incremental_checksum_equals_full_recompute(tos: int, ttl: int, ident: int, old_ttl: int) -> None:
    hdr = IPV4.make(
        dscp=10, ecn=1, total_length=1000, identification=ident, ttl=old_ttl, src=b"\x0a\0\0\1", dst=b"\x0a\0\1\2"
    )
    raw = bytearray(IPV4.encode(hdr))
    raw[10:12] = inet_checksum(raw).to_bytes(2, "big")
    frame = bytearray(14) + raw
    rewrite_tos_ttl(frame, 14, tos, ttl)
    assert frame[15] == tos and frame[22] == ttl
    assert ipv4_checksum_ok(frame, 14)
    fresh = bytearray(frame[14:34])
    fresh[10:12] = b"\0\0"
    # both encodings of zero are valid one's-complement results; the header must verify either way
    assert inet_checksum(fresh) in (int.from_bytes(frame[24:26], "big"), 0xFFFF - int.from_bytes(frame[24:26], "big"))


@given(
    old_tos=st.integers(0, 255),
    ident=st.integers(0, 0xFFFF),
    old_ttl=st.integers(2, 255),
    marks=st.lists(st.tuples(st.integers(0, 254), st.integers(0, 255)), max_size=4),
    data=st.data(),
)
def test_forward_rewrite_is_rewrite_tos_ttl_hop_by_hop(
    old_tos: int, ident: int, old_ttl: int, marks: list[tuple[int, int]], data: st.DataObject
) -> None:
    """A switch writes the TTL of the hops a packet made only where the frame leaves the switches,
    in one pass (forward_rewrite), and a TOS change (an ECN mark) at once: the same bytes as
    rewriting TOS and TTL at every hop (rewrite_tos_ttl)."""
    hops = data.draw(st.integers(0, old_ttl - 1))
    hdr = IPV4.make(
        dscp=old_tos >> 2, ecn=old_tos & 3, total_length=1000, identification=ident, ttl=old_ttl,
        src=b"\x0a\0\0\1", dst=b"\x0a\0\1\2",
    )  # fmt: skip
    raw = bytearray(IPV4.encode(hdr))
    raw[10:12] = inet_checksum(raw).to_bytes(2, "big")
    a = bytearray(14) + raw
    b = bytearray(a)
    at = {hop % max(hops, 1): tos for hop, tos in marks} if hops else {}
    for hop in range(hops):  # hop by hop: the TOS (marked or not) and TTL − 1
        rewrite_tos_ttl(a, 14, at.get(hop, a[15]), a[22] - 1)
    for hop in range(hops):  # deferred: marks at once, the TTL of every hop at the end
        if hop in at:
            rewrite_tos_ttl(b, 14, at[hop], b[22])
    forward_rewrite(b, 14, hops)
    assert a == b and ipv4_checksum_ok(b, 14)
    assert b[22] == old_ttl - hops


def test_uet_header_len_for_each_stack() -> None:
    data = ipv4_frame(SRC, DST, uet_request())
    assert uet_header_len(data, 14) == 20 + 8 + 12 + 44
    ctl = pds.CONTROL.encode(pds.CONTROL.make(ctl_type=pds.ControlType.ACK_REQ, psn=5))
    assert uet_header_len(ipv4_frame(SRC, DST, ctl + bytes(40)), 14) == 20 + 8 + 16
    ack = pds.ACK.encode(pds.ACK.make(next_hdr=pds.NextHeader.RESPONSE, cack_psn=1))
    resp = ses.RESPONSE.encode(ses.RESPONSE.make(opcode=1, message_id=1))
    assert uet_header_len(ipv4_frame(SRC, DST, ack + resp), 14) == 20 + 8 + 12 + 12
    secure = tss.TSS.encode(tss.TSS.make(sdi=1, tsc=7)) + bytes(200)
    assert uet_header_len(ipv4_frame(SRC, DST, secure), 14) == 20 + 8 + 12
    # UET directly over IP: 4-byte entropy header instead of UDP
    f = bytearray(ipv4_frame(SRC, DST, b""))[:34] + tss.ENTROPY.encode(tss.ENTROPY.make(entropy=0xBEEF)) + uet_request()
    f[14 + 9] = UET_IP_PROTO
    f[16:18] = (len(f) - 14).to_bytes(2, "big")
    assert is_uet(f, 14)
    assert uet_header_len(f, 14) == 20 + 4 + 12 + 44
    assert flow_tuple(f, 14) == ip_bytes(SRC) + ip_bytes(DST) + bytes((253,)) + b"\xbe\xef\0\0"
    # truncated: never more than the packet
    assert uet_header_len(data[: 14 + 30], 14) == 30


def test_trim_exact_bytes() -> None:
    """§8.4 decision 2–3: the IP packet keeps its first 84 bytes (IP + UDP + PDS + SES), DSCP 7,
    ECN untouched, IP total length 84, UDP length 64, UDP checksum 0, IP checksum recomputed."""
    upper = uet_request()
    frame = ipv4_frame(SRC, DST, upper, sport=0x4242, dscp=0, ecn=2, ttl=63)
    out = trim(frame, 14, uet_header_len(frame, 14), 7)
    ip = IPV4.make(dscp=7, ecn=2, total_length=84, ttl=63, src=ip_bytes(SRC), dst=ip_bytes(DST), checksum=0)
    ipb = bytearray(IPV4.encode(ip))
    ipb[10:12] = inet_checksum(ipb).to_bytes(2, "big")
    udp = UDP.encode(UDP.make(src_port=0x4242, dst_port=4793, length=64, checksum=0))
    expected = frame[:14] + bytes(ipb) + udp + upper[:56]
    assert bytes(out) == expected
    assert len(out) == 14 + 84
    # a packet already trimmed (DSCP 5) keeps its DSCP
    again = trim(trim(frame, 14, 84, 5), 14, 64, 7)
    assert again[15] >> 2 == 5 and ipv4_checksum_ok(again, 14)
    assert struct.unpack_from("!H", again, 16)[0] == 64 and struct.unpack_from("!H", again, 38)[0] == 44


def test_pfc_frame_layout_and_parse() -> None:
    mac = bytes.fromhex("025a00010003")
    f = pfc_frame(mac, {3: 0xFFFF})
    assert len(f) == 60
    eth = ETHERNET.decode(f)
    assert (eth.dst, eth.src, eth.ethertype) == (PFC_DST_MAC, mac, EtherType.MAC_CONTROL)
    body = PFC.decode(f, 14)
    assert (body.opcode, body.class_enable, body.quanta3, body.quanta0) == (0x0101, 0x08, 0xFFFF, 0)
    assert f[34:] == bytes(26)
    assert parse_pause(f) == {3: 0xFFFF}
    assert parse_pause(pfc_frame(mac, {3: 0, 5: 10})) == {3: 0, 5: 10}
    classic = bytearray(f)
    classic[14:18] = b"\x00\x01\x00\x20"
    assert parse_pause(classic) == dict.fromkeys(range(8), 0x20)
    other = bytearray(f)
    other[14:16] = b"\x00\x02"
    assert parse_pause(other) is None


def test_vlan_tag_is_skipped_and_pcp_read() -> None:
    f = ipv4_frame(SRC, DST, b"x")
    tagged = f[:12] + b"\x81\x00" + bytes(((5 << 5), 7)) + f[12:]
    assert l3_offset(tagged) == (EtherType.IPV4, 18, 5)
    assert l3_offset(f) == (EtherType.IPV4, 14, -1)
    with pytest.raises(Exception, match="shorter than 14"):
        l3_offset(b"\0" * 10)


def test_flow_tuple_udp() -> None:
    f = ipv4_frame(SRC, DST, b"x", sport=0x1234, dport=4791)
    assert flow_tuple(f, 14) == ip_bytes(SRC) + ip_bytes(DST) + b"\x11\x12\x34\x12\xb7"
    assert not is_uet(f, 14)
    assert is_uet(ipv4_frame(SRC, DST, b"x"), 14)


@pytest.mark.parametrize(("checksum", "hops"), [(0xFDFE, 2), (0x0000, 1), (0xFFFF, 254), (0x0100, 255)])
def test_forward_rewrite_folds_every_carry(checksum: int, hops: int) -> None:
    """Checksums whose one's-complement sum carries twice (0xFDFE and two hops: 0x201 + 0x1FDFE
    = 0x1FFFF, folded 0x10000, folded again 0x0001), at both ends of the field and of the TTL:
    still the bytes of the hop-by-hop rewrite."""
    a = bytearray(14) + bytearray(IPV4.encode(IPV4.make(ttl=255, total_length=20)))
    a[24:26] = checksum.to_bytes(2, "big")
    b = bytearray(a)
    for _ in range(hops):
        rewrite_tos_ttl(a, 14, a[15], a[22] - 1)
    forward_rewrite(b, 14, hops)
    assert a == b
