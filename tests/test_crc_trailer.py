"""The CRC-32C trailer of unencrypted packets (behaviour.md §2.16, wire-format.md §1.4, Δ23):
the codec against an independent bitwise CRC-32C, the FEP core's CRC stage sending, verifying and
silently dropping, exact packets."""

from __future__ import annotations

import asyncio
import json
import struct

import pytest
from fep_harness import A_ADDR, B_ADDR, FepPair
from uet.tools.decode import main

from uet.endpoint import Endpoint, EndpointConfig
from uet.fep import FepConfig, FepCore, Transmit
from uet.link import DirectLink, loopback_addresses
from uet.pcap import PcapWriter
from uet.wire import crc
from uet.wire.build import build_frame
from uet.wire.net import ip_bytes


def ref_crc32c(data: bytes) -> int:
    """Bit-at-a-time CRC-32C (Castagnoli, reflected 0x82F63B78), written independently of the
    table-driven codec under test."""
    c = 0xFFFFFFFF
    for byte in data:
        c ^= byte
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


#: the worked example's IPv4 request (wire-format.md §13.1), a full frame without trailer
EXAMPLE = bytes.fromhex(
    "45000059000040004011 2692 0a000001 0a000002"
    "424212b900452bb9"
    "118cffff0000100000010000"
    "05030001000000420003000000000000000000000000000000000000000000000000000000000000 00000005"
    "68656c6c6f"
)


def test_crc32c_check_value() -> None:
    assert ref_crc32c(b"123456789") == 0xE3069283  # the published CRC-32C check value
    assert crc.crc32c(b"123456789") == 0xE3069283
    assert crc.crc32c(b"56789", crc.crc32c(b"1234")) == 0xE3069283  # continued


def test_golden_trailer_over_the_worked_example_frame() -> None:
    """The trailer of the §13.1 frame: CRC-32C over IP source + destination, the UDP header with
    its checksum counted as zero and the length including the trailer, and the UET bytes; stored
    little-endian. ``fb2e8456`` was computed by the bitwise reference above and by the PyPI
    ``crc32c`` package (C implementation)."""
    assert len(EXAMPLE) == 89
    src, dst, uet = EXAMPLE[12:16], EXAMPLE[16:20], EXAMPLE[28:]
    covered = src + dst + struct.pack(">HHHH", 0x4242, 4793, 8 + len(uet) + 4, 0) + uet
    want = bytes.fromhex("fb2e8456")
    assert ref_crc32c(covered).to_bytes(4, "little") == want
    prefix = crc.udp_prefix(src, dst, 0x4242, 4793, len(uet))
    assert prefix == covered[:16]
    sealed = crc.append_trailer(uet, prefix)
    assert sealed == uet + want
    assert crc.check_trailer(sealed, prefix) == uet
    for i in range(len(sealed)):  # any single flipped bit is caught
        bad = bytearray(sealed)
        bad[i] ^= 0x10
        assert crc.check_trailer(bytes(bad), prefix) is None
    assert crc.check_trailer(b"\x01\x02\x03", prefix) is None


def test_entropy_prefix_for_uet_over_ip() -> None:
    src, dst = ip_bytes("10.0.0.1"), ip_bytes("10.0.0.2")
    p = crc.entropy_prefix(src, dst, bytes.fromhex("42420000"))
    assert p == src + dst + bytes.fromhex("42420000")
    assert crc.append_trailer(b"x", p)[1:] == ref_crc32c(p + b"x").to_bytes(4, "little")


def _trailer_ok(t: Transmit, src: str) -> bool:
    uet = t.data[:-4]
    covered = ip_bytes(src) + ip_bytes(t.destination) + struct.pack(">HHHH", t.entropy, 4793, len(t.data) + 8, 0)
    return ref_crc32c(covered + uet).to_bytes(4, "little") == t.data[-4:]


CRC = FepConfig(data_protect="crc")


def test_every_packet_carries_a_trailer_and_messages_arrive() -> None:
    p = FepPair(CRC, seed=31)
    data = bytes(range(256)) * 40  # 3 packets
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, data)
    (m,) = p.complete(p.b, r)
    p.complete(p.a, h)
    assert bytes(m.data) == data
    assert p.wire and all(_trailer_ok(t, src) for _at, src, t in p.wire)  # requests, ACKs alike
    first = p.sent_by(p.a)[0]
    assert len(first.data) == 12 + 44 + 4096 + 4  # RUD request + standard SES + payload + trailer
    assert p.run_until(lambda: not p._flight)  # what left after the completions (a CLEAR) arrives too
    cb, ca = p.b.core.counters(), p.a.core.counters()
    assert cb["crc_ok"] == len(p.sent_by(p.a)) and ca["crc_ok"] == len(p.sent_by(p.b))
    assert cb["crc_drop_bad"] == ca["crc_drop_bad"] == 0


def test_a_corrupted_packet_is_dropped_silently_and_counted() -> None:
    p = FepPair(CRC, seed=32)
    hit: list[Transmit] = []

    def corrupt_first_request(t: Transmit, src: str) -> list[bytes]:
        if src == A_ADDR and not hit:
            hit.append(t)
            b = bytearray(t.data)
            b[60] ^= 0x01  # a payload bit: headers still parse, only the CRC can tell
            return [bytes(b)]
        return [t.data]

    p.filter = corrupt_first_request
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, b"z" * 1000)
    # deliver the corrupted copy alone: B must not answer it at all (no ACK, no NACK)
    p.step()
    assert hit and p.b.core.counters()["crc_drop_bad"] == 1
    assert p.sent_by(p.b) == []
    (m,) = p.complete(p.b, r, max_ns=5_000_000_000)  # the retransmission gets through
    p.complete(p.a, h, max_ns=5_000_000_000)
    assert bytes(m.data) == b"z" * 1000
    assert p.b.core.counters()["crc_drop_bad"] == 1


def test_a_packet_without_trailer_is_dropped() -> None:
    """A peer that sends no trailer (data_protect none) is not understood: every packet dropped."""
    p = FepPair(FepConfig(), CRC, seed=33)
    p.a.core.send(B_ADDR, b"plain")
    p.run_until(lambda: p.b.core.counters()["crc_drop_bad"] >= 2, max_ns=1_000_000_000)
    assert p.b.core.counters()["crc_ok"] == 0 and p.sent_by(p.b) == []


def test_data_protect_values_and_exclusion() -> None:
    with pytest.raises(ValueError, match="data_protect"):
        FepConfig(data_protect="md5")
    with pytest.raises(ValueError, match="needs a security"):
        FepCore(A_ADDR, job=1, pid=1, config=FepConfig(data_protect="tss"))
    assert FepCore(A_ADDR, job=1, pid=1).crc is None


# -- uet-decode --crc -------------------------------------------------------------------------------


def _capture(tmp_path, frames: list[bytes]) -> str:  # noqa: ANN001
    path = str(tmp_path / "crc.pcap")
    with PcapWriter(path) as w:
        for i, f in enumerate(frames):
            w.write(f, timestamp_ns=i * 1000)
    return path


def _crc_pair_frames() -> list[bytes]:
    """Ethernet frames of a CRC-protected exchange: a 3-packet message and a 1-packet one."""
    p = FepPair(CRC, seed=34)
    r1, r2 = p.b.core.post_recv(None), p.b.core.post_recv(None)
    h1 = p.a.core.send(B_ADDR, bytes(range(256)) * 40)
    h2 = p.a.core.send(B_ADDR, b"hello")
    p.complete(p.b, r1, r2)
    p.complete(p.a, h1, h2)
    return [build_frame(t.data, src, t.destination, entropy=t.entropy) for _at, src, t in p.wire]


def _json(capsys, *argv: str) -> list[dict]:  # noqa: ANN001
    main(list(argv))
    out, _err = capsys.readouterr()
    return [json.loads(line) for line in out.splitlines()]


def test_decode_crc_strips_and_checks_the_trailer(tmp_path, capsys) -> None:  # noqa: ANN001
    frames = _crc_pair_frames()
    path = _capture(tmp_path, frames)
    recs = _json(capsys, "--crc", "--json", path)
    assert len(recs) == len(frames) and all(r["crc"] == "ok" and "warnings" not in r for r in recs)
    hello = [r for r in recs if r["uet"].get("payload") == b"hello".hex()]
    assert len(hello) == 1  # the trailer is not shown as payload
    # one flipped payload bit: that frame's trailer is reported wrong, the others stay ok
    bad = bytearray(frames[0])
    bad[14 + 20 + 8 + 60] ^= 0x01
    recs = _json(capsys, "--crc", "--json", _capture(tmp_path, [bytes(bad), *frames[1:]]))
    assert recs[0]["crc"] == "bad" and any("CRC-32C trailer" in w for w in recs[0]["warnings"])
    assert all(r["crc"] == "ok" for r in recs[1:])


def test_decode_without_crc_hints_at_a_trailer(tmp_path, capsys) -> None:  # noqa: ANN001
    recs = _json(capsys, "--json", _capture(tmp_path, _crc_pair_frames()))
    hinted = [r for r in recs if any("try --crc" in w for w in r.get("warnings", []))]
    assert (
        len(hinted) == 1
        and hinted[0]["uet"]["payload"][:10] == b"hello".hex()
        and len(hinted[0]["uet"]["payload"]) == 18
    )
    assert all("crc" not in r for r in recs)
    # a plain capture gets no hint
    p = FepPair(seed=35)
    h = p.a.core.send(B_ADDR, b"hello")
    p.complete(p.a, h)
    plain = [build_frame(t.data, src, t.destination, entropy=t.entropy) for _at, src, t in p.wire]
    assert not any("warnings" in r for r in _json(capsys, "--json", _capture(tmp_path, plain)))


async def test_endpoints_over_udp_with_crc() -> None:
    """Two asyncio endpoints on the direct link (real UDP sockets): the trailer covers the link's
    own ports, every packet is checked and nothing is dropped."""
    a, b = loopback_addresses(2)
    cfg = EndpointConfig(data_protect="crc")
    ea = await Endpoint.open(a, job=5, pid=1, port=0, config=cfg)
    la = ea.link
    assert isinstance(la, DirectLink)
    eb = await Endpoint.open(b, job=5, pid=1, port=0, peer_port=la.port, config=cfg)
    lb = eb.link
    assert isinstance(lb, DirectLink)
    la.peer_port = lb.port
    async with ea, eb:
        data = bytes(range(256)) * 100
        buf = bytearray(len(data))
        got = asyncio.ensure_future(eb.recv_into(buf))
        await asyncio.wait_for(ea.send(eb.address, data), 20)
        await asyncio.wait_for(got, 20)
        assert bytes(buf) == data
        ca, cb = ea.counters, eb.counters
        assert cb["crc_ok"] > 0 and ca["crc_ok"] > 0 and cb["crc_drop_bad"] == ca["crc_drop_bad"] == 0


def test_fast_crc32c_agrees_with_the_reference_definitions() -> None:
    """The fast CRC (google-crc32c) equals the module's plain-Python reference and this test's
    bitwise one on every length around the word and block sizes, continued or not."""
    import random

    rng = random.Random(16)
    for n in (*range(0, 70), 255, 256, 257, 4095, 4096, 4097, 9000):
        data = rng.randbytes(n)
        want = ref_crc32c(data)
        assert crc.crc32c(data) == crc.crc32c_reference(data) == want
        assert crc.crc32c(bytearray(data)) == crc.crc32c(memoryview(data)) == want
        cut = n // 3
        assert crc.crc32c(data[cut:], crc.crc32c(data[:cut])) == want
