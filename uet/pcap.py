"""Reading pcap and pcapng captures, and writing classic pcap for capture taps.

:func:`read_capture` yields :class:`PcapRecord` ``(timestamp_ns, linktype, frame)`` from either
format, told apart by the magic number:

* **pcap** (libpcap): both byte orders, microsecond magic ``0xA1B2C3D4`` and nanosecond magic
  ``0xA1B23C4D``; the link type is the header's low 16 bits (the upper bits carry FCS hints).
* **pcapng**: every section (SHB, each with its own byte order), interface description blocks
  with their link type, ``if_tsresol`` (option 9) and ``if_tsoffset`` (option 14), enhanced
  packet blocks, simple packet blocks (no timestamp: ``timestamp_ns`` is None, interface 0) and
  the obsolete packet block; other blocks are skipped.

Input is read as a stream (a path, bytes, or any binary file object such as stdin), so large
captures are never held in memory; a path to a regular file is memory-mapped (the operating
system pages it in: no read and buffer copy per chunk), and bytes appended after the mapping are
read as a stream. Anything wrong with the file raises :class:`PcapError`, a
:class:`~uet.errors.UetError`, after the records before the problem have been yielded.

:class:`PcapWriter` writes classic pcap with the nanosecond magic, little-endian, link type
Ethernet by default: the format every tool reads and the one a tap can append to frame by frame.
:class:`PcapngWriter` writes pcapng (one section, one interface with ``if_tsresol`` = 9, so
nanosecond timestamps, and optionally its name), the simulator's taps' format. Both can be
bounded (``max_bytes``): a frame that would take the file past it is not written but counted in
``dropped``, so a long run cannot fill the disk.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import struct
import time
from collections.abc import Iterator
from typing import IO, Any, NamedTuple

from uet.errors import UetError

__all__ = [
    "PcapError",
    "PcapRecord",
    "PcapWriter",
    "PcapngWriter",
    "read_capture",
    "detect_format",
    "PCAP_MAGIC_US",
    "PCAP_MAGIC_NS",
    "PCAPNG_SHB",
    "LINKTYPE_ETHERNET",
]

PCAP_MAGIC_US = 0xA1B2C3D4
PCAP_MAGIC_NS = 0xA1B23C4D
PCAPNG_SHB = 0x0A0D0D0A
_PCAPNG_BOM = 0x1A2B3C4D
LINKTYPE_ETHERNET = 1
#: Records larger than this are taken as a corrupt length field rather than allocated.
MAX_RECORD = 1 << 26

_BT_IDB = 1
_BT_PB = 2
_BT_SPB = 3
_BT_EPB = 6
_OPT_IF_NAME = 2
_OPT_TSRESOL = 9
_OPT_TSOFFSET = 14


class PcapError(UetError):
    """A capture file that cannot be read: bad magic, truncated or inconsistent records."""


class PcapRecord(NamedTuple):
    """One captured frame. ``timestamp_ns`` is None only for pcapng simple packet blocks."""

    timestamp_ns: int | None
    linktype: int
    frame: bytes


def detect_format(head: bytes) -> str | None:
    """``"pcap"``, ``"pcapng"`` or None from a file's first four bytes."""
    if len(head) < 4:
        return None
    for order in ("<", ">"):
        (m,) = struct.unpack(order + "I", head[:4])
        if m in (PCAP_MAGIC_US, PCAP_MAGIC_NS):
            return "pcap"
    if struct.unpack("<I", head[:4])[0] == PCAPNG_SHB:
        return "pcapng"
    return None


def read_capture(source: str | os.PathLike[str] | bytes | bytearray | IO[bytes]) -> Iterator[PcapRecord]:
    """Yield every record of a pcap or pcapng capture (see the module docstring)."""
    if isinstance(source, (bytes, bytearray)):
        yield from _read_stream(io.BytesIO(bytes(source)))
        return
    if isinstance(source, (str, os.PathLike)):
        try:
            f = open(source, "rb")  # noqa: SIM115 - closed below, generator-scoped
        except OSError as e:
            raise PcapError(f"{os.fspath(source)}: {e.strerror or e}") from None
        with f:
            m = _map(f)
            try:
                yield from _read_stream(f, m)
            finally:
                if m is not None:
                    m.close()
        return
    yield from _read_stream(source)


def _map(f: IO[bytes]) -> mmap.mmap | None:
    """A read-only mapping of the whole of ``f`` with ``f`` positioned after it, or None where
    ``f`` cannot be mapped (empty, a pipe or a terminal)."""
    try:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    with contextlib.suppress(OSError):
        f.seek(len(m))
        return m
    m.close()
    return None


_CHUNK = 1 << 18  # bytes read at a time into the block buffer


class _Stream:
    """Exact reads with the byte position, for error messages; from a buffer that holds the
    file's next bytes (``buf[bpos:]``), refilled a chunk at a time, so that the pcapng loop can
    take whole packet blocks out of it without a read call per block. A refill asks only for the
    bytes at hand (``read1``: a live pipe is decoded as it comes)."""

    def __init__(self, f: IO[bytes], buf: bytes | mmap.mmap = b"") -> None:
        self.f = f
        self.pos = 0
        self.buf: bytes | mmap.mmap = buf  # the first bytes; ``f`` is positioned after them
        self.bpos = 0
        self._read1 = getattr(f, "read1", None)

    def fill(self, n: int) -> bool:
        """Make at least ``n`` bytes buffered (False: the input ends before)."""
        have = len(self.buf) - self.bpos
        if have >= n:
            return True
        chunks = [self.buf[self.bpos :]]
        while have < n:
            try:
                c = self._read1(max(_CHUNK, n - have)) if self._read1 is not None else self.f.read(n - have)
            except OSError as e:
                raise PcapError(f"read error at byte {self.pos + have}: {e}") from None
            if not c:
                break
            chunks.append(c)
            have += len(c)
        self.buf, self.bpos = b"".join(chunks), 0
        return have >= n

    def read(self, n: int, what: str, *, eof_ok: bool = False) -> bytes | None:
        p = self.bpos
        if len(self.buf) - p >= n or self.fill(n):
            p = self.bpos
            self.bpos = p + n
            self.pos += n
            return self.buf[p : p + n]
        return self._rest(self.buf[self.bpos :], n, what, eof_ok)

    def _rest(self, first: bytes, n: int, what: str, eof_ok: bool) -> bytes | None:
        """The input ends before ``n`` bytes (``first``: those there are)."""
        self.buf, self.bpos = b"", 0
        chunks = [first]
        got = len(first)
        while got < n and chunks[-1]:
            try:
                c = self.f.read(n - got)
            except OSError as e:
                raise PcapError(f"read error at byte {self.pos + got}: {e}") from None
            chunks.append(c)
            got += len(c)
        if got == 0 and eof_ok:
            return None
        if got < n:
            raise PcapError(f"truncated {what} at byte {self.pos}: {n} bytes needed, {got} present")
        self.pos += n
        return b"".join(chunks)


def _read_stream(f: IO[bytes], mapped: mmap.mmap | None = None) -> Iterator[PcapRecord]:
    """The records of ``f`` (``mapped``: its first bytes, mapped, ``f`` positioned after them):
    reads the file header now (:func:`read_capture` calls it when first asked for a record) and
    returns the format's reader, a generator (not one itself: one ``yield from`` level fewer per
    record)."""
    s = _Stream(f, b"" if mapped is None else mapped)
    head = s.read(4, "file header", eof_ok=True)
    if head is None:
        raise PcapError("empty file: not a pcap or pcapng capture")
    fmt = detect_format(head)
    if fmt == "pcap":
        return _read_pcap(s, head)
    if fmt == "pcapng":
        return _read_pcapng(s, head)
    raise PcapError(f"not a pcap or pcapng file (magic {head.hex()})")


def _read_pcap(s: _Stream, magic: bytes) -> Iterator[PcapRecord]:
    order = "<" if struct.unpack("<I", magic)[0] in (PCAP_MAGIC_US, PCAP_MAGIC_NS) else ">"
    nano = struct.unpack(order + "I", magic)[0] == PCAP_MAGIC_NS
    rest = s.read(20, "pcap file header")
    assert rest is not None
    major, _minor, _zone, _sigfigs, _snaplen, network = struct.unpack(order + "HHiIII", rest)
    if major != 2:
        raise PcapError(f"unsupported pcap version {major}")
    linktype = network & 0xFFFF
    rec = struct.Struct(order + "IIII")
    n = 0
    while True:
        hdr = s.read(16, f"record header {n + 1}", eof_ok=True)
        if hdr is None:
            return
        sec, frac, incl, _orig = rec.unpack(hdr)
        if incl > MAX_RECORD:
            raise PcapError(f"record {n + 1} at byte {s.pos - 16}: implausible length {incl}")
        data = s.read(incl, f"record {n + 1}")
        assert data is not None
        n += 1
        ts = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        yield PcapRecord(ts, linktype, data)


class _Iface(NamedTuple):
    linktype: int
    snaplen: int
    units: int  # timestamp units per second
    offset_s: int


def _read_pcapng(s: _Stream, first: bytes) -> Iterator[PcapRecord]:
    order = "<"
    ifaces: list[_Iface] = []
    nblock = 0
    pending: bytes | None = first  # the block type, read to detect the format
    epb, u32 = _EPB_HEAD.unpack_from, _U32.unpack_from
    new = tuple.__new__  # a record without the named tuple's __new__ frame (the hot loop)
    while True:
        # the hot loop: the whole packet blocks of a little-endian section, straight from the
        # buffer, its position kept in a local and stored back when a block is not one of them
        buf, p = s.buf, s.bpos
        if order == "<" and pending is None:
            n, nif, p0 = len(buf), len(ifaces), p
            while n - p >= 32:
                btype, total, iface, hi, lo, caplen = epb(buf, p)
                if (
                    btype != _BT_EPB
                    or total < 32
                    or total > n - p
                    or total & 3
                    or iface >= nif
                    or 20 + caplen > total - 12
                    or u32(buf, p + total - 4)[0] != total
                ):
                    break
                q = p + 28
                p += total
                nblock += 1
                linktype, _snaplen, units, offset_s = ifaces[iface]
                ts = (hi << 32) | lo
                if units != 1_000_000_000:
                    ts = ts * 1_000_000_000 // units
                if offset_s:
                    ts += offset_s * 1_000_000_000
                yield new(PcapRecord, (ts, linktype, buf[q : q + caplen]))
            s.bpos = p
            s.pos += p - p0
        # any other block, or one not whole in the buffer: its type and length in one read
        if pending is not None:
            rest4 = s.read(4, "block header")
            assert rest4 is not None
            head = pending + rest4
            pending = None
        else:
            got = s.read(8, "block header", eof_ok=True)
            if got is None:
                return
            head = got
        start = s.pos - 8
        nblock += 1
        if struct.unpack_from("<I", head)[0] == PCAPNG_SHB:
            bom = s.read(4, "section header block")
            assert bom is not None
            if struct.unpack("<I", bom)[0] == _PCAPNG_BOM:
                order = "<"
            elif struct.unpack(">I", bom)[0] == _PCAPNG_BOM:
                order = ">"
            else:
                raise PcapError(f"section header at byte {start}: bad byte-order magic {bom.hex()}")
            (total,) = struct.unpack_from(order + "I", head, 4)
            _check_len(total, start, 28)
            body = s.read(total - 16, "section header block")
            assert body is not None
            major = struct.unpack(order + "H", body[:2])[0]
            if major != 1:
                raise PcapError(f"section header at byte {start}: unsupported pcapng version {major}")
            ifaces = []
            tail = s.read(4, f"block {nblock} trailer")
            assert tail is not None
            _check_trailer(tail, total, order, start)
            continue
        btype, total = struct.unpack(order + "II", head)
        _check_len(total, start, 12)
        rest = s.read(total - 8, f"block {nblock}")  # body and trailer: one read
        assert rest is not None
        if rest[-4:] != head[4:]:  # the trailing length (the same bytes as the leading one)
            _check_trailer(rest[-4:], total, order, start)
        if btype == _BT_EPB and total >= 32:  # the packet block of every capture, inline: one copy of the frame
            iface, hi, lo, caplen, _orig = _EPB[order].unpack_from(rest)
            if iface < len(ifaces) and 20 + caplen <= total - 12:
                ifc = ifaces[iface]
                ts = ((hi << 32) | lo) * 1_000_000_000 // ifc.units + ifc.offset_s * 1_000_000_000
                yield PcapRecord(ts, ifc.linktype, rest[20 : 20 + caplen])
                continue
        rec = _block(btype, rest[:-4], order, ifaces, start)
        if rec is not None:
            yield rec


_EPB = {o: struct.Struct(o + "IIIII") for o in "<>"}
_EPB_HEAD = struct.Struct("<IIIIII")  # block type and length, then the packet block's fixed fields
_U32 = struct.Struct("<I")  # the trailing block length


def _check_len(total: int, start: int, minimum: int) -> None:
    if total < minimum or total % 4 or total > MAX_RECORD:
        raise PcapError(f"block at byte {start}: invalid block length {total}")


def _check_trailer(tail: bytes, total: int, order: str, start: int) -> None:
    if struct.unpack(order + "I", tail)[0] != total:
        raise PcapError(f"block at byte {start}: trailing length does not match {total}")


def _options(body: bytes, pos: int, order: str) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    while pos + 4 <= len(body):
        code, ln = struct.unpack_from(order + "HH", body, pos)
        pos += 4
        if code == 0:
            break
        out.setdefault(code, body[pos : pos + ln])
        pos += (ln + 3) & ~3
    return out


def _block(btype: int, body: bytes, order: str, ifaces: list[_Iface], start: int) -> PcapRecord | None:
    if btype == _BT_IDB:
        if len(body) < 8:
            raise PcapError(f"interface description block at byte {start}: too short")
        linktype, _res, snaplen = struct.unpack_from(order + "HHI", body, 0)
        opts = _options(body, 8, order)
        units = 1_000_000
        if _OPT_TSRESOL in opts and opts[_OPT_TSRESOL]:
            r = opts[_OPT_TSRESOL][0]
            units = 2 ** (r & 0x7F) if r & 0x80 else 10 ** (r & 0x7F)
        offset_s = 0
        if _OPT_TSOFFSET in opts and len(opts[_OPT_TSOFFSET]) == 8:
            offset_s = struct.unpack(order + "q", opts[_OPT_TSOFFSET])[0]
        ifaces.append(_Iface(linktype, snaplen, units, offset_s))
        return None
    if btype in (_BT_EPB, _BT_PB):
        if btype == _BT_EPB:
            fixed = 20
            if len(body) < fixed:
                raise PcapError(f"enhanced packet block at byte {start}: too short")
            iface, hi, lo, caplen, _orig = struct.unpack_from(order + "IIIII", body, 0)
        else:
            fixed = 20
            if len(body) < fixed:
                raise PcapError(f"packet block at byte {start}: too short")
            iface, _drops, hi, lo, caplen, _orig = struct.unpack_from(order + "HHIIII", body, 0)
        if iface >= len(ifaces):
            raise PcapError(f"packet block at byte {start}: unknown interface {iface}")
        if fixed + caplen > len(body):
            raise PcapError(f"packet block at byte {start}: captured length {caplen} exceeds the block")
        ifc = ifaces[iface]
        ts = ((hi << 32) | lo) * 1_000_000_000 // ifc.units + ifc.offset_s * 1_000_000_000
        return PcapRecord(ts, ifc.linktype, body[fixed : fixed + caplen])
    if btype == _BT_SPB:
        if not ifaces:
            raise PcapError(f"simple packet block at byte {start}: no interface described")
        if len(body) < 4:
            raise PcapError(f"simple packet block at byte {start}: too short")
        (orig,) = struct.unpack_from(order + "I", body, 0)
        caplen = min(orig, len(body) - 4)
        if ifaces[0].snaplen:
            caplen = min(caplen, ifaces[0].snaplen)
        return PcapRecord(None, ifaces[0].linktype, body[4 : 4 + caplen])
    return None


class PcapWriter:
    """Classic pcap writer (nanosecond magic, little-endian) for capture taps.

    ``dest`` is a path (created/truncated) or a binary file object (left open on :meth:`close`
    unless ``close_file``). Frames longer than ``snaplen`` are truncated, keeping the original
    length in the record as pcap does. Use as a context manager; :meth:`flush` pushes written
    records to the file so a live tap can be read while it runs.
    """

    def __init__(
        self,
        dest: str | os.PathLike[str] | IO[bytes],
        *,
        linktype: int = LINKTYPE_ETHERNET,
        snaplen: int = 262144,
        close_file: bool | None = None,
        max_bytes: int | None = None,
    ) -> None:
        if isinstance(dest, (str, os.PathLike)):
            self._f: IO[bytes] = open(dest, "wb")  # noqa: SIM115 - owned, closed in close()
            self._own = True if close_file is None else close_file
        else:
            self._f = dest
            self._own = bool(close_file)
        self.linktype = linktype
        self.snaplen = snaplen
        #: frames written, frames not written because of ``max_bytes``, bytes written
        self.count = 0
        self.dropped = 0
        self.bytes = 0
        self.max_bytes = max_bytes
        self._put(self._header())

    def _header(self) -> bytes:
        return struct.pack("<IHHiIII", PCAP_MAGIC_NS, 2, 4, 0, 0, self.snaplen, self.linktype)

    def _record(self, data: bytes, incl: int, timestamp_ns: int) -> bytes:
        sec, ns = divmod(timestamp_ns, 1_000_000_000)
        return struct.pack("<IIII", sec, ns, incl, len(data)) + data[:incl]

    def _put(self, block: bytes) -> None:
        self._f.write(block)
        self.bytes += len(block)

    def write(self, frame: bytes | bytearray | memoryview, timestamp_ns: int | None = None) -> None:
        """Append one frame; ``timestamp_ns`` defaults to the wall clock (taps in virtual time
        pass their own)."""
        if timestamp_ns is None:
            timestamp_ns = time.time_ns()
        data = bytes(frame)
        block = self._record(data, min(len(data), self.snaplen), timestamp_ns)
        if self.max_bytes is not None and self.bytes + len(block) > self.max_bytes:
            self.dropped += 1
            return
        self._put(block)
        self.count += 1

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if self._f.closed:
            return
        self._f.flush()
        if self._own:
            self._f.close()

    def __enter__(self) -> PcapWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class PcapngWriter(PcapWriter):
    """pcapng writer: one section, one interface (link type ``linktype``, nanosecond timestamps:
    ``if_tsresol`` 9, ``if_name`` ``name`` when given), one enhanced packet block per frame.
    Otherwise as :class:`PcapWriter` (``max_bytes``, ``count``, ``dropped``)."""

    def __init__(self, dest: str | os.PathLike[str] | IO[bytes], *, name: str | None = None, **kw: Any) -> None:
        self.name = name
        super().__init__(dest, **kw)

    def _header(self) -> bytes:
        shb = struct.pack("<IIIHHq", PCAPNG_SHB, 28, _PCAPNG_BOM, 1, 0, -1) + struct.pack("<I", 28)
        opts = _option(_OPT_TSRESOL, b"\x09")
        if self.name:
            opts += _option(_OPT_IF_NAME, self.name.encode())
        opts += struct.pack("<HH", 0, 0)
        total = 20 + len(opts)
        idb = struct.pack("<IIHHI", _BT_IDB, total, self.linktype, 0, self.snaplen) + opts + struct.pack("<I", total)
        return shb + idb

    def _record(self, data: bytes, incl: int, timestamp_ns: int) -> bytes:
        pad = -incl & 3
        total = 32 + incl + pad
        head = struct.pack(
            "<IIIIIII", _BT_EPB, total, 0, timestamp_ns >> 32, timestamp_ns & 0xFFFFFFFF, incl, len(data)
        )
        return head + data[:incl] + bytes(pad) + struct.pack("<I", total)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + bytes(-len(value) & 3)
