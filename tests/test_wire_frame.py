"""The one frame codec (uet.wire.frame) against the construct-based builder and decoder."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from uet.fabric.model.frames import IP_TOS, trim

from uet.errors import DecodeError
from uet.wire.build import build_frame
from uet.wire.frame import (
    MARK_LASTHOP,
    MARK_TRIMMED,
    FrameBuilder,
    RxFrame,
    build_udp_frame,
    ip_word_sum,
    parse_marked,
    parse_udp_frame,
)
from uet.wire.net import ip_bytes

SRC, DST = "10.0.0.1", "10.1.2.3"
SRC_MAC, DST_MAC = b"\x02\x00\x0a\x00\x00\x01", b"\x02\x5a\x00\x00\x00\x00"


@given(
    payload=st.binary(max_size=300),
    sport=st.integers(0, 0xFFFF),
    dscp=st.integers(0, 63),
    ecn=st.integers(0, 3),
)
def test_build_matches_the_construct_builder(payload: bytes, sport: int, dscp: int, ecn: int) -> None:
    fast = build_udp_frame(
        payload, ip_bytes(SRC), ip_bytes(DST), sport=sport, dscp=dscp, ecn=ecn, src_mac=SRC_MAC, dst_mac=DST_MAC
    )
    slow = build_frame(payload, SRC, DST, entropy=sport, dscp=dscp, ecn=ecn, src_mac=SRC_MAC, dst_mac=DST_MAC)
    assert fast == slow
    rx = parse_udp_frame(fast)
    assert rx == RxFrame(payload, SRC, sport, dscp, ecn, dscp in (5, 7), dscp == 5)


def test_trim_marks_are_named_fields() -> None:
    f = bytearray(build_udp_frame(bytes(200), ip_bytes(SRC), ip_bytes(DST), sport=7, ecn=2))
    cut = trim(f, 14, 64, 5)
    rx = parse_udp_frame(cut)
    assert rx is not None and (rx.trimmed, rx.last_hop, rx.ecn, len(rx.data)) == (True, True, 2, 64 - 28)
    cut7 = trim(f, 14, 64, 7)
    rx7 = parse_udp_frame(cut7)
    assert rx7 is not None and (rx7.trimmed, rx7.last_hop) == (True, False) and cut7[14 + IP_TOS] >> 2 == 7


def test_not_uet_is_none_and_hostile_frames_raise() -> None:
    f = build_udp_frame(b"x" * 40, ip_bytes(SRC), ip_bytes(DST), sport=1)
    assert parse_udp_frame(f, port=4791) is None
    assert parse_udp_frame(f[:12] + b"\x86\xdd" + f[14:]) is None
    for bad, where in (
        (f[:10], "ethernet"),
        (f[:30], "ipv4"),
        (f[:14] + b"\x46" + f[15:], "ipv4"),
        (f[:24] + bytes([f[24] ^ 1]) + f[25:], "ipv4"),
        (f[:16] + b"\xff\xff" + f[18:], "ipv4"),
        (f[:12] + b"\x81\x00\x00", "vlan"),
    ):
        with pytest.raises(DecodeError) as e:
            parse_udp_frame(bad)
        assert e.value.header == where


@given(
    payload=st.binary(max_size=300),
    sport=st.integers(0, 0x1FFFF),
    tos=st.integers(0, 255),
    dport=st.sampled_from([4793, 4791]),
    checksum=st.booleans(),
)
def test_the_simulators_builder_is_build_udp_frame(
    payload: bytes, sport: int, tos: int, dport: int, checksum: bool
) -> None:
    """FrameBuilder (the simulator's copy) gives build_udp_frame's bytes."""
    fb = FrameBuilder(ip_bytes(SRC), src_mac=SRC_MAC, dst_mac=DST_MAC, dport=dport, udp_checksum=checksum)
    dst = ip_bytes(DST)
    want = build_udp_frame(
        payload, ip_bytes(SRC), dst, sport=sport, dscp=tos >> 2, ecn=tos & 3, src_mac=SRC_MAC, dst_mac=DST_MAC,
        dport=dport, udp_checksum=checksum,
    )  # fmt: skip
    assert fb.build(payload, dst, ip_word_sum(dst), sport, tos) == want
    arr = fb.build_array(payload, dst, ip_word_sum(dst), sport, tos)  # the simulator's: a new bytearray
    assert type(arr) is bytearray and arr == want


def _packed(frame: bytes | bytearray, port: int = 4793) -> tuple[bytes, str, int] | None:
    rx = parse_udp_frame(frame, port=port, verify=False)
    if rx is None:
        return None
    return (rx.data, rx.source, rx.ecn | (MARK_TRIMMED | (MARK_LASTHOP if rx.last_hop else 0) if rx.trimmed else 0))


@given(
    payload=st.binary(max_size=120),
    tos=st.integers(0, 255),
    cut=st.integers(0, 200),
    at=st.integers(0, 60),
    x=st.integers(0, 255),
)
def test_parse_marked_is_parse_udp_frame(payload: bytes, tos: int, cut: int, at: int, x: int) -> None:
    """parse_marked (the simulator's copy) gives parse_udp_frame's fields, None and errors, on
    whole frames, trimmed ones, cut ones and frames with one byte changed."""
    f = build_udp_frame(payload, ip_bytes(SRC), ip_bytes(DST), sport=9, dscp=tos >> 2, ecn=tos & 3)
    frames = [f, bytes(trim(bytearray(f), 14, 64, 5)), bytes(trim(bytearray(f), 14, 64, 7)), f[:cut]]
    if at < len(f):
        frames.append(f[:at] + bytes([x]) + f[at + 1 :])
    names: dict[int, str] = {}
    for fr in frames:
        for port in (4793, 4791):
            try:
                want: object = _packed(fr, port)
            except DecodeError as e:
                want = e.header
            for cache in (None, names):
                for form in (fr, bytearray(fr)):  # a forwarded frame is a bytearray
                    try:
                        got: object = parse_marked(form, port, cache)
                    except DecodeError as e:
                        got = e.header
                    assert got == want
                    if isinstance(got, tuple):
                        assert type(got[0]) is bytes  # the cores' type, from either form
    assert parse_marked(bytearray(f)) == _packed(f)


def test_the_marks_are_the_cores() -> None:
    from uet.fep import ECN_LASTHOP, ECN_TRIMMED

    assert (MARK_TRIMMED, MARK_LASTHOP) == (ECN_TRIMMED, ECN_LASTHOP)
