"""pcap/pcapng reading and pcap writing (uet.pcap), and the committed sample capture."""

from __future__ import annotations

import io
import struct
from typing import IO, cast

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import PcapNgWriter, wrpcap
from uet.interop import samples

from uet.errors import DecodeError, UetError
from uet.pcap import PcapError, PcapRecord, PcapWriter, detect_format, read_capture
from uet.wire.capture import parse_frame


def _ns(rec: PcapRecord) -> int:
    """The record's time stamp, which it must have."""
    assert rec.timestamp_ns is not None
    return rec.timestamp_ns


FRAMES = [f for _, _, f in samples.sample_frames()]


def test_writer_roundtrip_bytes_and_path(tmp_path):
    buf = io.BytesIO()
    with PcapWriter(buf) as w:
        for i, f in enumerate(FRAMES[:5]):
            w.write(f, 1_000_000_000 * 7 + i * 123)
        w.flush()
    assert w.count == 5 and not buf.closed  # caller's file object stays open
    recs = list(read_capture(buf.getvalue()))
    assert recs == [PcapRecord(7_000_000_000 + i * 123, 1, f) for i, f in enumerate(FRAMES[:5])]
    path = tmp_path / "t.pcap"
    with PcapWriter(path, linktype=101, snaplen=40) as w:
        w.write(b"\x45" + bytes(99), 5)
    (rec,) = read_capture(path)
    assert rec == PcapRecord(5, 101, b"\x45" + bytes(39))  # truncated to snaplen
    assert detect_format(path.read_bytes()[:4]) == "pcap"
    # the header is the nanosecond magic, little-endian
    assert path.read_bytes()[:4] == struct.pack("<I", 0xA1B23C4D)


def test_reads_scapy_pcap_micro_and_nano(tmp_path):
    pkts = [Ether(f) for f in FRAMES[:4]]
    for i, p in enumerate(pkts):
        p.time = 1_700_000_000 + i / 1000
    for nano in (False, True):
        path = tmp_path / f"s{nano}.pcap"
        wrpcap(str(path), pkts, nano=nano)
        recs = list(read_capture(str(path)))
        assert [r.frame for r in recs] == FRAMES[:4]
        assert all(r.linktype == 1 for r in recs)
        assert _ns(recs[1]) - _ns(recs[0]) == pytest.approx(1_000_000, abs=1000)


def test_reads_scapy_pcapng(tmp_path):
    path = tmp_path / "s.pcapng"
    w = PcapNgWriter(str(path))
    for i, f in enumerate(FRAMES[:6]):
        p = Ether(f)
        p.time = 1_700_000_000 + i
        w.write(p)
    w.close()
    assert detect_format(path.read_bytes()[:4]) == "pcapng"
    recs = list(read_capture(path))
    assert [r.frame for r in recs] == FRAMES[:6]
    assert _ns(recs[5]) - _ns(recs[0]) == 5_000_000_000
    uet = parse_frame(recs[0].frame, recs[0].linktype).uet
    assert uet is not None and uet.payload == b"hello"


def _pcap(order: str, magic: int, recs: list[tuple[int, int, bytes]], linktype: int = 1) -> bytes:
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype)
    for sec, frac, data in recs:
        out += struct.pack(order + "IIII", sec, frac, len(data), len(data)) + data
    return out


def test_pcap_both_byte_orders_and_resolutions():
    data = [(10, 5, b"abc"), (11, 0, b"")]
    for order in "<>":
        us = list(read_capture(_pcap(order, 0xA1B2C3D4, data, linktype=113 | 0x10000000)))
        assert us == [PcapRecord(10_000_005_000, 113, b"abc"), PcapRecord(11_000_000_000, 113, b"")]
        ns = list(read_capture(_pcap(order, 0xA1B23C4D, data)))
        assert ns[0].timestamp_ns == 10_000_000_005


def _block(order: str, btype: int, body: bytes) -> bytes:
    body += bytes(-len(body) % 4)
    n = len(body) + 12
    return struct.pack(order + "II", btype, n) + body + struct.pack(order + "I", n)


def _opt(order: str, code: int, value: bytes) -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + bytes(-len(value) % 4)


def _shb(order: str) -> bytes:
    return _block(order, 0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def _idb(order: str, linktype: int, snaplen: int = 0, opts: bytes = b"") -> bytes:
    end = _opt(order, 0, b"") if opts else b""
    return _block(order, 1, struct.pack(order + "HHI", linktype, 0, snaplen) + opts + end)


def _epb(order: str, iface: int, ts: int, data: bytes) -> bytes:
    return _block(order, 6, struct.pack(order + "IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data)) + data)


def test_pcapng_blocks_interfaces_sections_both_orders():
    for order in "<>":
        cap = _shb(order)
        cap += _idb(order, 1)  # default microseconds
        cap += _idb(order, 101, opts=_opt(order, 9, b"\x09") + _opt(order, 14, struct.pack(order + "q", 2)))
        cap += _block(order, 5, b"statistics are skipped")  # interface statistics block
        cap += _epb(order, 0, 1_500_000, b"eth")
        cap += _epb(order, 1, 7, b"raw")
        cap += _block(order, 2, struct.pack(order + "HHIIII", 1, 0, 0, 9, 2, 2) + b"pb")  # obsolete PB
        cap += _block(order, 3, struct.pack(order + "I", 5) + b"simple")  # SPB: original length 5
        # a second section, other byte order, binary timestamp resolution 2^-10
        other = ">" if order == "<" else "<"
        cap += _shb(other) + _idb(other, 113, opts=_opt(other, 9, b"\x8a")) + _epb(other, 0, 1024, b"sll")
        recs = list(read_capture(io.BytesIO(cap)))
        assert recs == [
            PcapRecord(1_500_000_000, 1, b"eth"),
            PcapRecord(2_000_000_007, 101, b"raw"),
            PcapRecord(2_000_000_009, 101, b"pb"),
            PcapRecord(None, 1, b"simpl"),
            PcapRecord(1_000_000_000, 113, b"sll"),
        ], order


@pytest.mark.parametrize(
    "data,match",
    [
        (b"", "empty file"),
        (b"GIF89a....", "not a pcap"),
        (_pcap("<", 0xA1B2C3D4, [])[:10], "truncated pcap file header"),
        (_pcap("<", 0xA1B2C3D4, [(1, 0, b"abcdef")])[:-2], "truncated record 1"),
        (_pcap("<", 0xA1B2C3D4, [(1, 0, b"a")]) + struct.pack("<IIII", 0, 0, 1 << 30, 0), "implausible length"),
        (_shb("<") + struct.pack("<II", 6, 13) + bytes(5), "invalid block length"),
        (_shb("<") + _idb("<", 1)[:-4] + b"\0\0\0\0", "trailing length"),
        (_shb("<") + _epb("<", 3, 0, b"x"), "unknown interface 3"),
        (_shb("<")[:8] + b"\0\0\0\0" + _shb("<")[12:], "byte-order magic"),
        (_shb("<") + _block("<", 3, b"\0\0\0\1x"), "no interface described"),
    ],
)
def test_bad_files(data, match):
    with pytest.raises(PcapError, match=match):
        list(read_capture(data))
    assert issubclass(PcapError, UetError)


def test_records_before_a_truncation_are_yielded():
    data = _pcap("<", 0xA1B2C3D4, [(1, 0, b"one"), (2, 0, b"two")])[:-1]
    it = read_capture(data)
    assert next(it).frame == b"one"
    with pytest.raises(PcapError):
        next(it)


def test_missing_file():
    with pytest.raises(PcapError, match="No such file"):
        list(read_capture("/nonexistent/x.pcap"))


# -- the sample capture -------------------------------------------------------------------------


def test_sample_regenerates_identically():
    assert samples.sample_capture() == samples.load_sample()


def test_sample_regenerate_writes_file(tmp_path):
    out = samples.regenerate(tmp_path / "x.pcap")
    assert out.read_bytes() == samples.load_sample()


def test_sample_contents():
    recs = list(read_capture(samples.load_sample()))
    assert len(recs) == len(samples.DESCRIPTIONS)
    kinds: list[str] = []
    errors = []
    names: set[str] = set()
    for r in recs:
        try:
            fr = parse_frame(r.frame, r.linktype)
        except DecodeError as e:
            errors.append(e)
            continue
        kinds.append(fr.kind)
        u = fr.uet
        if u is not None:
            if u.pds_type_name:
                names.add(u.pds_type_name)
            if u.ses_opcode_name:
                names.add(u.ses_opcode_name)
            if u.tss is not None:
                names.add("TSS")
            if fr.encap == "ip":
                names.add("over_ip")
            for lay, _ in u.sections:
                names.add(lay.name)
    assert len(errors) == 1 and "truncated" in errors[0].reason
    assert kinds.count("pfc") == 1 and kinds.count("other") == 1
    expected = {
        "RUD_REQ", "ROD_CC_REQ", "ACK", "ACK_CC", "NACK", "CONTROL", "RUDI_REQ", "RUDI_RESP", "UUD_REQ",
        "SEND", "READ", "FETCHING_ATOMIC", "RENDEZVOUS_SEND", "RESPONSE", "RESPONSE_W_DATA", "TSS", "over_ip",
        "rud_rod_request_syn", "ses_standard", "ses_cswap_ext", "ses_rendezvous_ext", "ses_small_response_data",
        "ack_probe", "ses_medium", "ses_small",
    }  # fmt: skip
    assert expected <= names, expected - names


class _Trickle(io.RawIOBase):
    """A pipe that hands over at most ``step`` bytes a read, and never reads ahead of its caller."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data, self.step, self.pos = data, step, 0

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        c = self.data[self.pos : self.pos + min(n, self.step)]
        self.pos += len(c)
        return c

    read = read1


@pytest.mark.parametrize("step", [1, 7, 100, 1 << 20])
def test_pcapng_read_in_chunks_gives_every_record(monkeypatch, step):
    # packet blocks are taken whole from a chunk buffer: blocks that straddle a chunk, reads that
    # give a few bytes (a live pipe) and the truncated end all give what one read of it gives
    monkeypatch.setattr("uet.pcap._CHUNK", 96)
    data = samples.load_sample()
    want = list(read_capture(data))
    assert [tuple(r) for r in read_capture(cast(IO[bytes], _Trickle(data, step)))] == [tuple(r) for r in want]
    it = read_capture(cast(IO[bytes], _Trickle(data[:-5], step)))
    assert [next(it) for _ in want[:-1]] == want[:-1]
    with pytest.raises(PcapError, match="truncated"):
        next(it)
