"""Hardening: ``uet-decode`` and the pcap reader on hostile captures.

Standard under test (architecture.md "Principles" 5; tools/decode.py "Exit status"): every decoder
raises one project error type with header, offset and reason. ``uet-decode`` on a capture of
random, truncated, bit-flipped and oversized frames prints one line per frame — an error line for
each malformed one — and exits 1; it never prints a traceback and never reaches its last-resort
``internal error`` handler (that handler turns any unexpected exception into exit 2, so a test that
only checked "no traceback" could not fail). The pcap/pcapng reader, given a valid capture cut at
any byte or with any bytes overwritten, yields records or raises :class:`uet.pcap.PcapError` (a
:class:`~uet.errors.UetError`) — nothing else.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether
from scapy.utils import PcapNgWriter
from uet.interop.samples import sample_capture, sample_frames
from uet.tools.decode import main

from uet.pcap import PcapError, PcapWriter, read_capture

pytestmark = pytest.mark.processes  # uet-decode children, no network (tests/conftest.py)

FRAMES = [f for _, _, f in sample_frames()]


def _hostile_frames(rng: random.Random, n: int) -> list[bytes]:
    """Random bytes, truncations, bit flips and oversized copies of the sample frames, and one
    frame certainly malformed (a UET request cut inside its PDS header)."""
    out = [FRAMES[1][: 42 + 5]]
    for _ in range(n):
        f = rng.choice(FRAMES)
        kind = rng.randrange(5)
        if kind == 0:
            out.append(rng.randbytes(rng.randrange(0, 200)))
        elif kind == 1:
            out.append(f[: rng.randrange(len(f))])
        elif kind == 2:
            b = bytearray(f)
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            out.append(bytes(b))
        elif kind == 3:
            out.append(f + rng.randbytes(60_000))
        else:
            b = bytearray(f)
            b[rng.randrange(len(b))] = rng.randrange(256)
            out.append(bytes(b[: rng.randrange(14, len(b) + 1)]))
    return out


def _pcap(frames: list[bytes]) -> bytes:
    buf = io.BytesIO()
    w = PcapWriter(buf)
    for i, f in enumerate(frames):
        w.write(f, timestamp_ns=1_700_000_000_000_000_000 + i * 1000)
    return buf.getvalue()


def _run(*argv: str) -> tuple[int, str, str]:
    """``uet-decode argv`` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@settings(max_examples=15)
@given(st.integers(0, 2**32 - 1), st.sampled_from([[], ["-V"], ["--json"], ["--stats"], ["--bare"], ["--ether"]]))
def test_uet_decode_on_a_hostile_capture_reports_every_frame(tmp_path_factory, seed, opts) -> None:
    frames = _hostile_frames(random.Random(seed), 30)
    path = tmp_path_factory.mktemp("cap") / "hostile.pcap"
    path.write_bytes(_pcap(frames))
    rc, out, err = _run(*opts, str(path))
    assert "Traceback" not in out + err and "internal error" not in err, err
    # uet.wire.chain turns an unexpected exception inside a decoder into a DecodeError whose reason
    # says "internal decoder error": such a line is a decoder bug reported as a malformed packet.
    assert "internal decoder error" not in out, [line for line in out.splitlines() if "internal decoder" in line]
    assert err == ""
    assert rc == 1  # the cut request at least is malformed
    if opts == ["--json"]:  # one JSON object per frame, malformed ones with header/offset/reason
        recs = [json.loads(line) for line in out.splitlines()]
        assert [r["frame"] for r in recs] == list(range(1, len(frames) + 1))
        bad = [r["malformed"] for r in recs if "malformed" in r]
        assert bad and all(set(b) == {"header", "offset", "reason"} for b in bad)
        return
    errors = [line for line in out.splitlines() if ": malformed: " in line]
    assert errors and all(line.strip().startswith("frame ") for line in errors)
    if not opts:  # one summary or error line per frame, numbered in order
        lines = out.splitlines()
        assert len(lines) == len(frames)
        for i, line in enumerate(lines, 1):
            assert line.startswith(f"frame {i}: malformed: ") or line.split()[0] == str(i), line


def test_uet_decode_process_on_a_hostile_capture(tmp_path: Path) -> None:
    """The console entry point itself: exit 1, error lines on stdout, nothing on stderr."""
    path = tmp_path / "hostile.pcap"
    path.write_bytes(_pcap(_hostile_frames(random.Random(7), 200)))
    proc = subprocess.run(
        [sys.executable, "-m", "uet.tools.decode", "--stats", str(path)], capture_output=True, timeout=120
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == b""
    assert b"malformed: " in proc.stdout and b"Traceback" not in proc.stdout
    assert b"internal decoder error" not in proc.stdout


def _pcapng(tmp_path: Path) -> bytes:
    path = tmp_path / "s.pcapng"
    w = PcapNgWriter(str(path))
    for i, f in enumerate(FRAMES[:5]):
        p = Ether(f)
        p.time = 1_700_000_000 + i
        w.write(p)
    w.close()
    return path.read_bytes()


_VALID: dict[str, bytes] = {}


def _valid(kind: str, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A valid capture of ``kind`` (pcap, pcapng or the project's sample), built once."""
    if kind not in _VALID:
        if kind == "pcap":
            _VALID[kind] = _pcap(FRAMES[:5])
        elif kind == "sample":
            _VALID[kind] = sample_capture()
        else:
            _VALID[kind] = _pcapng(tmp_path_factory.mktemp("ng"))
    return _VALID[kind]


@settings(max_examples=300)
@given(
    st.sampled_from(["pcap", "pcapng", "sample"]),
    st.integers(0, 10_000),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
)
def test_pcap_reader_raises_only_pcap_error(tmp_path_factory, kind: str, cut: int, edits) -> None:
    data = bytearray(_valid(kind, tmp_path_factory))
    for i, v in edits:
        data[i % len(data)] = v
    data = data[: len(data) - cut % (len(data) + 1)]
    n = 0
    try:
        for rec in read_capture(bytes(data)):
            assert isinstance(rec.frame, bytes) and len(rec.frame) <= len(data)
            n += 1
    except PcapError as e:
        assert str(e)  # a reason, not an empty message
    assert n <= len(data) // 16


@settings(max_examples=30)
@given(st.integers(0, 10_000), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3))
def test_uet_decode_on_a_corrupted_capture_file(tmp_path_factory, cut: int, edits) -> None:
    """A damaged file: the records before the damage are decoded, then one error line; exit 1
    (some frame malformed) or 2 (the file itself is broken), never an internal error."""
    data = bytearray(sample_capture())
    for i, v in edits:
        data[i % len(data)] = v
    data = data[: len(data) - cut % (len(data) + 1)]
    path = tmp_path_factory.mktemp("bad") / "bad.pcap"
    path.write_bytes(bytes(data))
    rc, out, err = _run(str(path))
    assert "Traceback" not in out + err and "internal error" not in err, err
    assert "internal decoder error" not in out
    assert rc in (0, 1, 2)
    if rc == 2:
        assert len(err.splitlines()) == 1 and err.startswith("uet-decode: error: ")
    else:
        assert err == ""
