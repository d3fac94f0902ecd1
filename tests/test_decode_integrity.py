"""Integrity trailers on real captures, checked by independent implementations: the CRC-32C
trailer of UET directly over IP protocol 253 (wire-format.md §1.4, the entropy header covered
once) and the exit status of ``uet-decode`` when a CRC is wrong. The captures are what the kernel
put on ``lo`` while two endpoints exchanged messages (tests/lo_capture.py; root or CAP_NET_RAW,
skipped with the reason otherwise)."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

import pytest
from lo_capture import LoCapture, capture_error
from test_crc_trailer import ref_crc32c  # the bitwise CRC-32C, independent of uet.wire.crc
from uet.tools.decode import main

from uet import EndpointConfig
from uet.endpoint import Endpoint
from uet.link import loopback_addresses
from uet.link.ip import raw_socket_error
from uet.pcap import PcapWriter, read_capture

REASON = capture_error() or raw_socket_error()
needs_root = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def _decode(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[dict]]:
    rc = main(list(argv))
    out, _err = capsys.readouterr()
    return rc, [json.loads(line) for line in out.splitlines()]


async def _ip_crc_exchange(tmp_path: Path) -> Path:
    """Two endpoints over the ip link with CRC trailers: a 3-packet message each way, captured."""
    a, b = loopback_addresses(2)
    cfg = EndpointConfig(data_protect="crc")
    with LoCapture([a, b]) as cap:
        ea = await Endpoint.open(a, job=3, pid=1, link="ip", config=cfg)
        eb = await Endpoint.open(b, job=3, pid=1, link="ip", config=cfg)
        async with ea, eb:
            for tx, rx in ((ea, eb), (eb, ea)):
                data = bytes(range(256)) * 40
                await asyncio.wait_for(tx.send(rx.address, data, tag=1), 20)
                assert (await asyncio.wait_for(rx.recv(tag=1), 20)).data == data
        return cap.write(tmp_path / "ip253-crc.pcap")


@needs_root
async def test_crc_of_a_real_ip_protocol_253_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = await _ip_crc_exchange(tmp_path)
    frames = [r.frame for r in read_capture(str(path))]
    assert len(frames) >= 8  # requests and ACKs both ways
    for f in frames:  # the independent check: IP addresses ‖ entropy header ‖ UET bytes
        assert f[14 + 9] == 253
        ihl = (f[14] & 15) * 4
        ip_len = int.from_bytes(f[16:18], "big")
        body = f[14 + ihl : 14 + ip_len]
        assert struct.unpack("<I", body[-4:])[0] == ref_crc32c(f[26:34] + body[:-4])
    rc, recs = _decode(capsys, "--crc", "--json", str(path))
    assert rc == 0
    assert [r["crc"] for r in recs] == ["ok"] * len(frames)
    assert all(r["encap"] == "ip" and "warnings" not in r for r in recs)
    # one flipped payload bit in one frame: that frame's trailer is wrong, and the exit status says so
    big = max(range(len(frames)), key=lambda i: len(frames[i]))
    bad = bytearray(frames[big])
    bad[-10] ^= 0x01
    with PcapWriter(str(tmp_path / "bad.pcap")) as w:
        for i, f in enumerate(frames):
            w.write(bytes(bad) if i == big else f, timestamp_ns=i)
    rc, recs = _decode(capsys, "--crc", "--json", str(tmp_path / "bad.pcap"))
    assert rc == 1
    assert [r["crc"] for r in recs] == ["bad" if i == big else "ok" for i in range(len(frames))]
    rc, _ = _decode(capsys, "--crc", "--json", "--stats", "--filter", "ack", str(tmp_path / "bad.pcap"))
    assert rc == 1  # filtered out of the output, still counted


def test_help_says_integrity_failures_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "1 some packet malformed or failing its CRC/ICRC check" in out


# -- RoCEv2 over the direct link: the ICRC of the bytes that actually leave -------------------------


async def _roce_direct_exchange(tmp_path: Path) -> Path:
    """Two RoCE endpoints on the direct link (UDP 4791), every operation once, captured on lo."""
    from uet.roce.cm import StaticCm
    from uet.roce_endpoint import RoceEndpoint
    from uet.wire.ses import AmoOp, AmoType

    a_ip, b_ip = loopback_addresses(2)
    with LoCapture([a_ip, b_ip]) as cap:
        a = await RoceEndpoint.open(a_ip, cm=StaticCm(11), seed=1)
        b = await RoceEndpoint.open(b_ip, cm=StaticCm(11), seed=2)
        try:
            got = asyncio.ensure_future(b.recv(tag=1))
            await asyncio.wait_for(a.send(b.address, bytes(range(256)) * 9, tag=1), 20)
            await asyncio.wait_for(got, 20)
            buf = bytearray(64)
            mr = b.register(buf)
            await asyncio.wait_for(a.write(b.address, mr.key, 8, b"written"), 20)
            assert bytes(await asyncio.wait_for(a.read(b.address, mr.key, 8, 7), 20)) == b"written"
            await asyncio.wait_for(a.atomic(b.address, mr.key, 16, AmoOp.SUM, AmoType.UINT64, 5, fetch=True), 20)
            assert a.counters.get("icrc_errors", 0) == b.counters.get("icrc_errors", 0) == 0
        finally:
            await asyncio.gather(a.close(), b.close())
        return cap.write(tmp_path / "roce-direct.pcap")


@needs_root
async def test_roce_icrc_on_the_direct_link_is_right_on_the_wire(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every captured RoCEv2 frame's ICRC, recomputed by Scapy's ``contrib.roce`` over the IP and
    UDP headers the kernel really sent (source port, IP ID), equals the one on the wire; and the
    decoder agrees (exit status 0, no warning)."""
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import IP
    from scapy.packet import raw

    path = await _roce_direct_exchange(tmp_path)
    frames = [r.frame for r in read_capture(str(path))]
    assert len(frames) >= 8
    for f in frames:
        ip = f[14 : 14 + int.from_bytes(f[16:18], "big")]
        pkt = IP(ip)
        assert BTH in pkt, pkt.summary()
        pkt[BTH].icrc = None  # Scapy computes it again
        assert raw(pkt)[-4:] == ip[-4:], pkt.summary()
    rc, recs = _decode(capsys, "--json", str(path))
    assert rc == 0 and all(r["kind"] == "roce" and r["roce"]["icrc_ok"] for r in recs)
