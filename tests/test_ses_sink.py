"""Receive memory that consumes a message as it is placed (uet.ses.sink): the digest of the bytes
in message order, whatever order the packets come in, holding only the pieces ahead of a gap."""

from __future__ import annotations

import random

import pytest

from uet.ses.sink import DigestSink, ReceiveSink, digest, receive_view
from uet.wire.crc import crc32c, crc32c_reference


def _pieces(data: bytes, size: int) -> list[tuple[int, bytes]]:
    return [(at, data[at : at + size]) for at in range(0, len(data), size)]


def test_out_of_order_pieces_give_the_digest_of_the_message_in_order() -> None:
    data = random.Random(1).randbytes(100_000)
    pieces = _pieces(data, 4096)
    random.Random(2).shuffle(pieces)
    sink = DigestSink(len(data))
    most = 0
    for at, piece in pieces:
        sink[at : at + len(piece)] = memoryview(piece)
        most = max(most, sink.held)
    assert sink.digest() == digest(data) == crc32c(data)
    assert sink.received == len(data) and sink.held == 0
    assert 0 < most < len(data)  # only what arrived ahead of a gap was ever kept


def test_pieces_in_order_are_never_held() -> None:
    data = bytes(range(256)) * 64
    sink = DigestSink(len(data))
    for at, piece in _pieces(data, 1000):
        sink[at : at + len(piece)] = piece
        assert sink.held == 0
    assert sink.digest() == digest(data) == crc32c(data)


def test_a_gap_or_a_byte_written_twice_withholds_the_digest() -> None:
    data = bytes(8192)
    gap = DigestSink(len(data))
    gap[0:4096] = data[:4096]
    assert gap.digest() is None and gap.received == 4096

    twice = DigestSink(len(data))
    twice[0:8192] = data
    twice[0:4096] = b"\xff" * 4096  # the memory no longer holds what was hashed
    assert twice.digest() is None

    overlap = DigestSink(len(data))
    overlap[4096:8192] = data[4096:]
    overlap[4096:6000] = data[4096:6000]  # a second piece at an offset already held
    overlap[0:4096] = data[:4096]
    assert overlap.digest() is None


def test_a_prefix_is_the_same_memory_and_the_digest_of_a_shorter_message() -> None:
    sink = DigestSink(10_000)
    head = sink[:300]
    assert isinstance(head, DigestSink) and len(head) == 300 and sink[:] is sink and sink[0:10_000] is sink
    head[0:300] = b"a" * 300
    assert head.digest() == digest(b"a" * 300)
    assert sink.received == 300 and sink.digest() is None  # the whole sink was not written


def test_writes_must_fit_their_slice_and_slices_start_at_zero() -> None:
    sink = DigestSink(16)
    with pytest.raises(ValueError):
        sink[0:8] = b"abc"
    with pytest.raises(ValueError):
        sink[4:8]
    with pytest.raises(ValueError):
        sink[0:16:2]
    with pytest.raises(ValueError):
        DigestSink(-1)
    sink[16:16] = b""  # an empty write is nothing
    assert sink.received == 0


def test_receive_view_keeps_a_sink_and_flattens_a_buffer() -> None:
    sink = DigestSink(4)
    assert receive_view(sink) is sink
    view = receive_view(bytearray(8))
    assert isinstance(view, memoryview) and view.format == "B" and len(view) == 8
    import array

    wide = receive_view(array.array("I", [0, 0]))
    assert isinstance(wide, memoryview) and wide.format == "B" and len(wide) == 8
    with pytest.raises(ValueError):
        receive_view(b"read-only")
    with pytest.raises(NotImplementedError):
        ReceiveSink(4)[0:4] = b"abcd"


def test_every_bit_flipped_and_two_packets_swapped_change_the_digest() -> None:
    """The digest is a real check of the bytes (uet.ses.sink's decision): each one-bit change of
    a message, and the same bytes with two packets in each other's place (what a check of the
    bytes' multiset, a sum or an XOR of pieces, would pass), give a digest other than the
    sender's."""
    data = random.Random(7).randbytes(1024)
    sent = digest(data)
    flipped = bytearray(data)
    for bit in range(len(data) * 8):
        flipped[bit >> 3] ^= 1 << (bit & 7)
        assert digest(flipped) != sent, bit
        flipped[bit >> 3] ^= 1 << (bit & 7)
    sink = DigestSink(len(data))
    sink[0:256] = data[256:512]  # two packets, each at the other's offset
    sink[256:512] = data[0:256]
    sink[512:1024] = data[512:]
    got = sink.digest()
    assert got is not None and got != sent


def test_the_digest_is_crc32c_of_bytes_a_bytearray_or_a_view_alike() -> None:
    data = random.Random(3).randbytes(5000)
    want = crc32c_reference(data)
    assert digest(data) == digest(bytearray(data)) == digest(memoryview(data)[0:]) == want
    sink = DigestSink(len(data))
    sink[2000:5000] = memoryview(bytearray(data))[2000:]  # held ahead of the gap, then folded in
    sink[0:2000] = memoryview(data)[:2000]
    assert sink.digest() == want
