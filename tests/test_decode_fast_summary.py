"""The summary line's fast field dictionaries (tools/decode.py ``_summary_fields``, which reuses
the names ``fields_dict`` derives) equal ``fields_dict`` on every header of every packet of the
built-in sample capture, even after the cache is warm; and the pcap reader's one-read fast path
still reports truncation and reads short reads from a pipe."""

from __future__ import annotations

import io
from typing import IO, cast

import pytest
from uet.interop.samples import load_sample
from uet.tools import decode

from uet.errors import DecodeError
from uet.pcap import PcapError, read_capture
from uet.wire.capture import parse_frame
from uet.wire.chain import fields_dict


def test_summary_fields_equal_fields_dict_on_the_sample() -> None:
    checked = 0
    for _round in range(2):  # cold, then warm cache
        for rec in read_capture(load_sample()):
            try:
                u = parse_frame(rec.frame, rec.linktype).uet
            except DecodeError:  # the sample's deliberately malformed packets
                continue
            if u is None:
                continue
            sections = [u.section(r) for r in ("pds", "ses")] + list(u.extensions)
            for sec in sections:
                if sec is None:
                    continue
                lay, values = sec
                assert decode._summary_fields(lay, values) == fields_dict(lay, values)
                checked += 1
    assert checked > 50


class _Trickle(io.RawIOBase):
    """A pipe that hands out at most 3 bytes per read."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        out, self.data = self.data[: min(n, 3)], self.data[min(n, 3) :]
        return out


def test_pcap_reader_short_reads_and_truncation() -> None:
    data = load_sample()
    want = [r.frame for r in read_capture(io.BytesIO(data))]
    assert [r.frame for r in read_capture(cast(IO[bytes], _Trickle(data)))] == want  # a raw file object
    with pytest.raises(PcapError, match="truncated"):
        list(read_capture(io.BytesIO(data[:-5])))
