"""Property tests (issue 30 item 9) of codecs the data path relies on: SES request headers built
then parsed (uet.ses.packets), atomic operand values encoded then decoded (uet.ses.atomics), the
CRC-32C trailer (uet.wire.crc), and the SACK bitmap the target builds read back by the sender's
scoreboard (uet.pds.ackbuilder then uet.pds.scoreboard: the two fast copies end to end). Each has a
bounded number of examples, to keep the suite's time."""

from __future__ import annotations

import math
import struct
from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pds_harness import SES_NH
from test_pds_sack_edges import Pdc

from uet.pds.ackbuilder import sack_window
from uet.pds.events import Event
from uet.pds.pdc import TxPkt
from uet.pds.scoreboard import AckInfo, AckTally, SackScoreboard
from uet.ses import atomics
from uet.ses.packets import build_request, parse_request
from uet.wire import crc
from uet.wire.layout import F, Layout
from uet.wire.pds import NextHeader, PdsType
from uet.wire.ses import DEFERRABLE_OPCODES, MEDIUM, MEDIUM_HD, SMALL, STANDARD, AmoType, SesFlag, SesOpcode

M32 = 0xFFFFFFFF
FEW = settings(max_examples=60)

# -- SES request headers -------------------------------------------------------------------------------------

#: opcodes without an extension header (build_request takes extension bytes as given)
PLAIN_OPS = [
    SesOpcode.SEND,
    SesOpcode.TAGGED_SEND,
    SesOpcode.DATAGRAM_SEND,
    SesOpcode.WRITE,
    SesOpcode.READ,
    SesOpcode.DEFERRABLE_SEND,
    SesOpcode.DEFERRABLE_TSEND,
    SesOpcode.DEFERRABLE_RTR,
]


def _widths(*layouts: Layout) -> dict[str, int]:
    out: dict[str, int] = {}
    for lay in layouts:
        for it in lay.items:
            if isinstance(it, F):
                out[it.name] = max(out.get(it.name, 0), it.bits)
    return out


_W = _widths(*STANDARD.values(), MEDIUM, MEDIUM_HD, SMALL)


def _field(name: str) -> st.SearchStrategy[int]:
    return st.integers(0, (1 << _W[name]) - 1)


@st.composite
def requests(draw: st.DrawFn) -> tuple[int, dict[str, Any]]:
    """(next header, build_request keyword values) with every value inside its field."""
    header = draw(st.sampled_from([NextHeader.STANDARD, NextHeader.MEDIUM, NextHeader.SMALL]))
    op = draw(st.sampled_from(PLAIN_OPS if header == NextHeader.STANDARD else PLAIN_OPS[:5]))
    flags = draw(st.sampled_from([0, SesFlag.SOM, SesFlag.EOM, SesFlag.SOM | SesFlag.EOM]))
    flags |= draw(st.sampled_from([0, SesFlag.REL, SesFlag.DC | SesFlag.IE]))
    if header == NextHeader.MEDIUM:
        flags |= draw(st.sampled_from([0, SesFlag.HD]))
    kw: dict[str, Any] = {"opcode": op, "flags": int(flags)}
    for name in ("ri_generation", "job_id", "pid_on_fep", "resource_index", "request_length"):
        kw[name] = draw(st.integers(0, (1 << min(_W[name], 14 if header != NextHeader.STANDARD else 32)) - 1))
    if header == NextHeader.STANDARD:
        for name in ("message_id", "initiator", "buffer_offset", "match_bits", "header_data"):
            kw[name] = draw(_field(name))
        kw["payload_length"] = draw(_field("payload_length"))
        kw["message_offset"] = draw(_field("message_offset"))
        kw["src_token"] = draw(_field("src_restart_token"))
        kw["dst_token"] = draw(_field("dst_restart_token"))
    elif header == NextHeader.MEDIUM:
        for name in ("initiator", "match_bits"):
            kw[name] = draw(_field(name))
        key = "header_data" if flags & SesFlag.HD else "buffer_offset"
        kw[key] = draw(st.integers(0, (1 << _widths(MEDIUM_HD if key == "header_data" else MEDIUM)[key]) - 1))
    else:
        kw["buffer_offset"] = draw(st.integers(0, (1 << _widths(SMALL)["buffer_offset"]) - 1))
    return header, kw


def _carried(header: int, kw: dict[str, Any]) -> dict[str, int]:
    """The values a parsed request must give back: what the header variant carries, 0 elsewhere."""
    op, flags = kw["opcode"], kw["flags"]
    som = bool(flags & SesFlag.SOM)
    want = {k: kw.get(k, 0) for k in ("ri_generation", "job_id", "pid_on_fep", "resource_index", "request_length")}
    want |= {"opcode": op, "flags": flags, "message_id": 0, "initiator": 0, "match_bits": 0, "buffer_offset": 0}
    want |= {"header_data": 0, "src_token": 0, "dst_token": 0}
    if header == NextHeader.STANDARD:
        want |= {"message_id": kw["message_id"], "initiator": kw["initiator"]}
        if op in DEFERRABLE_OPCODES:
            want |= {"src_token": kw["src_token"], "dst_token": kw["dst_token"], "match_bits": kw["match_bits"]}
        elif op == SesOpcode.DEFERRABLE_RTR:
            want |= {"src_token": kw["src_token"], "dst_token": kw["dst_token"], "buffer_offset": kw["buffer_offset"]}
        else:
            want |= {"buffer_offset": kw["buffer_offset"], "match_bits": kw["match_bits"]}
        if som:
            want["header_data"] = kw["header_data"]
        else:
            want |= {"payload_length": kw["payload_length"], "message_offset": kw["message_offset"]}
    elif header == NextHeader.MEDIUM:
        want |= {"initiator": kw["initiator"], "match_bits": kw["match_bits"]}
        if flags & SesFlag.HD:
            want["header_data"] = kw["header_data"]
        else:
            want["buffer_offset"] = kw["buffer_offset"]
    else:
        want["buffer_offset"] = kw["buffer_offset"]
    return want


@FEW
@given(requests(), st.binary(max_size=40))
def test_an_ses_request_built_parses_back_to_its_values(req: tuple[int, dict[str, Any]], payload: bytes) -> None:
    header, kw = req
    ses = build_request(header=header, **kw)
    got = parse_request(header, ses, payload)
    want = _carried(header, kw)
    assert {k: getattr(got, k) for k in want} == want
    assert bytes(got.payload) == payload and got.ext is None and got.next_hdr == header
    if header == NextHeader.STANDARD and not kw["flags"] & SesFlag.SOM:
        assert (got.payload_length, got.message_offset) == (kw["payload_length"], kw["message_offset"])
    # the same bytes from a header that carries the payload's first bytes in ``ses`` (PDS split)
    again = parse_request(header, ses + payload[:3], payload[3:])
    assert {k: getattr(again, k) for k in want} == want and bytes(again.payload) == payload


# -- atomic operand values ------------------------------------------------------------------------------------

INTS = [t for t in atomics.TYPE_INFO if not atomics.TYPE_INFO[t].is_float]


@FEW
@given(st.sampled_from(INTS), st.lists(st.integers(-(1 << 130), 1 << 130), max_size=4))
def test_integer_operands_round_trip_modulo_their_width(dtype: int, values: list[int]) -> None:
    k = atomics.TYPE_INFO[dtype]
    bits = 8 * k.size
    data = atomics.encode_values(dtype, values)
    assert len(data) == k.size * len(values)
    got = atomics.decode_values(dtype, data)
    want = [v % (1 << bits) for v in values]
    if k.signed:
        want = [w - (1 << bits) if w >> (bits - 1) else w for w in want]
    assert got == want
    for v in values:
        assert atomics.to_wire_int(dtype, v) == v % (1 << bits)


FLOATS = st.floats(allow_nan=False, width=64)


@FEW
@given(FLOATS)
def test_double_and_float_operands_are_the_ieee_encodings(x: float) -> None:
    assert atomics.decode_values(AmoType.DOUBLE, atomics.encode_values(AmoType.DOUBLE, [x])) == [x]
    f = atomics.encode_values(AmoType.FLOAT, [x])
    try:
        assert f == struct.pack("<f", x)
    except OverflowError:  # beyond binary32: rounded to an infinity of the same sign
        assert f == struct.pack("<f", math.copysign(math.inf, x))
    y = atomics.decode_values(AmoType.FLOAT, f)[0]
    assert atomics.encode_values(AmoType.FLOAT, [y]) == f  # a decoded value encodes to itself


@FEW
@given(st.sampled_from([AmoType.FP16, AmoType.BFLOAT16, AmoType.FLOAT]), FLOATS, FLOATS)
def test_narrow_float_rounding_is_idempotent_monotonic_and_nearest(dtype: int, x: float, y: float) -> None:
    enc = atomics.encode_values
    dec = atomics.decode_values
    rx, ry = (dec(dtype, enc(dtype, [v]))[0] for v in (x, y))
    assert enc(dtype, [rx]) == enc(dtype, [x])  # rounding a rounded value changes nothing
    if x <= y:
        assert rx <= ry  # rounding keeps the order
    if math.isfinite(rx) and math.isfinite(x):
        assert math.copysign(1.0, rx) == math.copysign(1.0, x) or rx == 0.0
        # no other value of the format lies strictly between x and its rounding
        for v in (y, 0.0, 1.0, -1.0):
            rv = dec(dtype, enc(dtype, [v]))[0]
            if math.isfinite(rv):
                assert abs(rv - x) >= abs(rx - x) or math.isclose(abs(rv - x), abs(rx - x))


# -- CRC-32C ----------------------------------------------------------------------------------------------------


@FEW
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_crc32c_fast_equals_reference_and_continues(a: bytes, b: bytes) -> None:
    assert crc.crc32c(a) == crc.crc32c_reference(a)
    assert crc.crc32c(a + b) == crc.crc32c(b, crc.crc32c(a)) == crc.crc32c_reference(b, crc.crc32c_reference(a))


@FEW
@given(st.binary(min_size=1, max_size=200), st.binary(min_size=8, max_size=36), st.data())
def test_the_trailer_round_trips_and_any_single_bit_flip_is_caught(
    uet: bytes, prefix: bytes, data: st.DataObject
) -> None:
    pkt = crc.append_trailer(uet, prefix)
    assert len(pkt) == len(uet) + crc.TRAILER_LEN
    assert crc.check_trailer(pkt, prefix) == uet
    bit = data.draw(st.integers(0, 8 * len(pkt) - 1))
    bad = bytearray(pkt)
    bad[bit >> 3] ^= 1 << (bit & 7)
    assert crc.check_trailer(bytes(bad), prefix) is None
    pbit = data.draw(st.integers(0, 8 * len(prefix) - 1))
    other = bytearray(prefix)
    other[pbit >> 3] ^= 1 << (pbit & 7)
    assert crc.check_trailer(pkt, bytes(other)) is None  # the covered addresses and ports count
    assert crc.check_trailer(pkt[:3], prefix) is None


# -- the SACK bitmap, built by the target and read by the sender ----------------------------------------------


@FEW
@given(
    st.integers(0, M32),
    st.sets(st.integers(1, 150), max_size=40),
    st.integers(0, 150),
)
def test_the_targets_bitmap_read_by_the_scoreboard_names_exactly_what_arrived(
    cack: int, ahead: set[int], hi_ahead: int
) -> None:
    """The target places the PSNs it holds beyond CACK in its bitmap (sack_window); the sender's
    scoreboard, given that bitmap, marks exactly those of its packets received that the 64 bits
    cover, and as holes exactly the others the bits cover between CACK and the newest received."""
    rcvd = {(cack + d) & M32 for d in ahead}
    hi = (cack + max([hi_ahead, *ahead])) & M32
    soff, bm = sack_window(rcvd, cack, hi)
    base = (cack + soff) & M32
    n = 160
    pdc = Pdc(next_psn=(cack + n) & M32, tx_base=(cack + 1) & M32, max_cack=cack)
    outstanding = pdc.outstanding
    for d in range(1, n):
        p = TxPkt(d, SES_NH, b"", b"", True, True)
        p.psn, p.sends, p.entropy = (cack + d) & M32, 1, d
        outstanding[p.psn] = p
    a = AckInfo(int(PdsType.ACK_CC), 0, 16, 0, cack, 1, 2)
    a.sack_off, a.bitmap = soff, bm
    events: deque[Event] = deque()
    SackScoreboard(cack).window(pdc, a, events, False, AckTally(), 10)
    covered = {(base + i) & M32 for i in range(64)}
    got = {p for p, pkt in outstanding.items() if pkt.dst_received}
    assert got == rcvd & covered
    if got:
        top = max((p - cack) & M32 for p in got)
        holes = {p for p, pkt in outstanding.items() if pkt.sack_hole}
        assert holes == ({(cack + d) & M32 for d in range(1, top)} & covered) - rcvd  # described ones only
    assert not events  # CACK did not move: nothing acknowledged
