"""``uet-decode`` on real captures (issue 16): partial UDP checksums of a loopback capture are
recognised and said once, ``-q`` drops the per-packet lines, addresses in JSON are text."""

from __future__ import annotations

import json
import struct

import pytest
from uet.tools.decode import main

from uet.pcap import PcapWriter
from uet.wire.build import build_frame
from uet.wire.capture import parse_frame
from uet.wire.net import ip_bytes

pytestmark = pytest.mark.in_memory  # pcaps written and decoded here; 127.0.0.x only inside them

ACK = bytes.fromhex("380000000000100000020001")


def _partial(src: str, dst: str, udp_len: int) -> int:
    """The pseudo-header sum a host with checksum offload leaves in the field, by 16-bit words
    with end-around carry (independent of the decoder's big-integer form)."""
    s, d = ip_bytes(src), ip_bytes(dst)
    if len(s) == 4:
        pseudo = s + d + bytes((0, 17)) + udp_len.to_bytes(2, "big")
    else:
        pseudo = s + d + udp_len.to_bytes(4, "big") + b"\0\0\0\x11"
    total = 0
    for (w,) in struct.iter_unpack(">H", pseudo):
        total += w
        total = (total & 0xFFFF) + (total >> 16)
    return total


def _offloaded(src: str, dst: str, uet: bytes) -> bytes:
    f = bytearray(build_frame(uet, src, dst, entropy=0x1234))
    udp = 14 + (20 if ":" not in src else 40)
    f[udp + 6 : udp + 8] = _partial(src, dst, 8 + len(uet)).to_bytes(2, "big")
    return bytes(f)


def _pcap(tmp_path, frames: list[bytes]) -> str:  # noqa: ANN001
    path = str(tmp_path / "cap.pcap")
    with PcapWriter(path) as w:
        for i, f in enumerate(frames):
            w.write(f, timestamp_ns=i)
    return path


def test_partial_checksums_are_recognised_not_warned() -> None:
    for src, dst in (("127.0.0.2", "127.0.0.3"), ("fd00::1", "fd00::2")):
        fr = parse_frame(_offloaded(src, dst, ACK))
        assert fr.udp_checksum_partial and not fr.warnings, (src, fr.warnings)
        bad = bytearray(_offloaded(src, dst, ACK))
        udp = 14 + (20 if ":" not in src else 40)
        bad[udp + 7] ^= 0x01  # neither right nor partial: still a warning
        fr = parse_frame(bytes(bad))
        assert not fr.udp_checksum_partial and "UDP checksum" in fr.warnings[0]
    assert not parse_frame(build_frame(ACK, "10.0.0.1", "10.0.0.2", entropy=1)).udp_checksum_partial


def test_partial_checksums_said_once(tmp_path, capsys) -> None:  # noqa: ANN001
    path = _pcap(tmp_path, [_offloaded("127.0.0.2", "127.0.0.3", ACK)] * 3)
    assert main([path]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 3 and "warning" not in out
    assert err.count("pseudo-header sum") == 1


def test_quiet_stats_without_packet_lines(tmp_path, capsys) -> None:  # noqa: ANN001
    path = _pcap(tmp_path, [build_frame(ACK, "10.0.0.1", "10.0.0.2", entropy=1)] * 4)
    main(["-q", "--stats", "--json", path])
    out, _ = capsys.readouterr()
    (rec,) = [json.loads(line) for line in out.splitlines()]
    assert "frame" not in rec and rec["stats"]["packets"] == 4
    main(["--quiet", path])
    assert capsys.readouterr()[0] == ""


def test_json_addresses_in_text_form(tmp_path, capsys) -> None:  # noqa: ANN001
    frames = [build_frame(ACK, "10.0.0.1", "10.0.0.2", entropy=1), build_frame(ACK, "fd00::1", "fd00::2", entropy=1)]
    main(["--json", _pcap(tmp_path, frames)])
    recs = [json.loads(line) for line in capsys.readouterr()[0].splitlines()]
    layers = [{ly["header"]: ly for ly in r["layers"]} for r in recs]
    assert layers[0]["ethernet"]["src"] == "02:00:00:00:00:01" and layers[0]["ethernet"]["dst"] == "02:00:00:00:00:02"
    assert (layers[0]["ipv4"]["src"], layers[0]["ipv4"]["dst"]) == ("10.0.0.1", "10.0.0.2")
    assert (layers[1]["ipv6"]["src"], layers[1]["ipv6"]["dst"]) == ("fd00::1", "fd00::2")
    assert (recs[1]["src"], recs[1]["dst"]) == ("fd00::1", "fd00::2")
