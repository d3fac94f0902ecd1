"""FabricLink unit tests: a plain UDP socket plays the switch port (uet/link/fabric.py)."""

from __future__ import annotations

import asyncio
import socket
import struct
import time

import pytest

from uet.link.fabric import ECN_LASTHOP, ECN_TRIMMED, FabricLink, fa_mac
from uet.wire.build import build_frame, build_pfc_frame
from uet.wire.net import UET_UDP_PORT, inet_checksum, ip_bytes, udp_checksum

FA = "10.0.0.1"
PEER = "10.0.1.2"
GW_MAC = b"\x02\x5a\x00\x00\x00\x00"
TIMEOUT = 10.0


class FakePort:
    """The switch side: a UDP socket the link is connected to."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.addr = self.sock.getsockname()
        self.peer: tuple[str, int] | None = None

    async def recv(self, timeout: float = TIMEOUT) -> bytes:
        loop = asyncio.get_running_loop()
        data, addr = await asyncio.wait_for(loop.sock_recvfrom(self.sock, 65536), timeout)
        self.peer = addr
        return data

    def send(self, frame: bytes) -> None:
        assert self.peer is not None
        self.sock.sendto(frame, self.peer)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
async def port_and_link():
    port = FakePort()
    link = FabricLink(FA, port.addr, rate_bps=1_000_000)
    batches: asyncio.Queue = asyncio.Queue()
    link.set_receiver(lambda b: batches.put_nowait(list(b)))
    arp = await port.recv()  # the announcement
    assert arp[12:14] == b"\x08\x06" and arp[6:12] == fa_mac(FA) and len(arp) == 60
    yield port, link, batches
    link.close()
    port.close()


async def test_data_frame_headers(port_and_link):
    port, link, _ = port_and_link
    payload = bytes(range(200))
    link.send(payload, PEER, entropy=0xBEEF, dscp=0)
    f = await port.recv()
    assert f[0:6] == b"\xff" * 6  # gateway not learned yet
    assert f[6:12] == b"\x02\x00" + ip_bytes(FA)
    assert f[12:14] == b"\x08\x00"
    ip = f[14:34]
    ver_ihl, tos, total, ident, frag, ttl, proto, _c, src, dst = struct.unpack("!BBHHHBBH4s4s", ip)
    assert (ver_ihl, tos >> 2, tos & 3, ident, frag, ttl, proto) == (0x45, 0, 2, 0, 0x4000, 64, 17)
    assert total == 20 + 8 + len(payload) and inet_checksum(ip) == 0
    assert src == ip_bytes(FA) and dst == ip_bytes(PEER)
    sport, dport, ulen, csum = struct.unpack("!HHHH", f[34:42])
    assert (sport, dport, ulen) == (0xBEEF, UET_UDP_PORT, 8 + len(payload)) and csum != 0
    assert udp_checksum(src, dst, f[34 : 42 - 2] + b"\0\0" + f[42:]) == csum
    assert f[42:] == payload


async def test_control_dscp_and_explicit_ecn(port_and_link):
    port, link, _ = port_and_link
    link.send(b"\x40\x00" + bytes(30), PEER, entropy=7, dscp=46)
    f = await port.recv()
    assert f[15] == 0xB8  # DSCP 46, Not-ECT
    link.send(b"\x10\x00" + bytes(30), PEER, entropy=7, dscp=0, ecn=1)
    f = await port.recv()
    assert f[15] == 0x01  # the caller's ECT(1) is kept
    assert link.counters["tx_packets"] == 3  # ARP + 2


async def test_receive_ce_padding_and_gateway_learning(port_and_link):
    port, link, batches = port_and_link
    uet = b"\x10\x00" + bytes(6)  # short: the frame is padded to 60 bytes
    frame = build_frame(uet, PEER, FA, entropy=99, src_mac=GW_MAC, dst_mac=fa_mac(FA), ecn=3)
    assert len(frame) == 60
    port.send(frame)
    batch = await asyncio.wait_for(batches.get(), TIMEOUT)
    assert batch == [(uet, PEER, 3)]
    assert link.counters["rx_ce"] == 1 and link.counters["rx_packets"] == 1
    link.send(b"x" * 10, PEER, entropy=1, dscp=0)
    f = await port.recv()
    assert f[0:6] == GW_MAC


async def test_non_uet_and_malformed_are_dropped(port_and_link):
    port, link, batches = port_and_link
    good = build_frame(b"\x10\x00" + bytes(40), PEER, FA, entropy=5)
    other_port = build_frame(b"\x10\x00" + bytes(40), PEER, FA, entropy=5, dport=4791)
    bad_sum = bytearray(good)
    bad_sum[24] ^= 0xFF  # IP header checksum
    arp = b"\xff" * 6 + GW_MAC + b"\x08\x06" + bytes(46)
    for f in (other_port, bytes(bad_sum), arp, b"\x00" * 10, good):
        port.send(f)
    batch = await asyncio.wait_for(batches.get(), TIMEOUT)
    while len(batch) < 1:
        batch += await asyncio.wait_for(batches.get(), TIMEOUT)
    assert [src for _, src, _ in batch] == [PEER]
    c = link.counters
    assert c["rx_not_uet"] == 2 and c["rx_malformed"] == 2


async def test_trimmed_dropped_by_default_and_flagged_on_request(port_and_link):
    port, link, batches = port_and_link
    trimmed = build_frame(b"\x10\x00" + bytes(40), PEER, FA, entropy=5, dscp=7)
    port.send(trimmed)
    marker = build_frame(b"\x11\x00" + bytes(40), PEER, FA, entropy=5)
    port.send(marker)
    batch = await asyncio.wait_for(batches.get(), TIMEOUT)
    assert [d[:1] for d, _, _ in batch] == [b"\x11"]
    assert link.counters["rx_trimmed"] == 1
    link.deliver_trimmed = True
    port.send(build_frame(b"\x10\x00" + bytes(40), PEER, FA, entropy=5, dscp=5, ecn=2))
    batch = await asyncio.wait_for(batches.get(), TIMEOUT)
    assert batch[0][2] == 2 | ECN_TRIMMED | ECN_LASTHOP


async def test_pfc_pause_holds_class_until_xon(port_and_link):
    port, link, _ = port_and_link
    port.send(build_pfc_frame({0: 0xFFFF}, src_mac=GW_MAC))
    # wait until the link has taken the pause (its reader runs on this loop)
    for _ in range(1000):
        if link.counters["pfc_rx_xoff"]:
            break
        await asyncio.sleep(0)  # yields to the loop, no wall-clock wait
    assert link.counters["pfc_rx_xoff"] == 1
    link.send(b"data-1", PEER, entropy=1, dscp=0)
    link.send(b"data-2", PEER, entropy=1, dscp=0)
    assert link.held == 2 and link.counters["tx_held"] == 2
    link.send(b"ctrl", PEER, entropy=1, dscp=46)  # TC6 is not paused
    f = await port.recv()
    assert f[42:46] == b"ctrl"
    port.send(build_pfc_frame({0: 0}, src_mac=GW_MAC))
    got = [(await port.recv())[42:48], (await port.recv())[42:48]]
    assert got == [b"data-1", b"data-2"]  # in order
    assert link.held == 0 and link.counters["pfc_rx_xon"] == 1


async def test_pfc_pause_expires(port_and_link):
    port, link, _ = port_and_link
    # 200 × 512 bit times at 1 Mb/s = 102.4 ms: long enough that a loaded machine still sends "late"
    # while the pause holds (with 10 quanta, 5.12 ms, it sometimes ran out before the send)
    quanta = 200
    port.send(build_pfc_frame({0: quanta}, src_mac=GW_MAC))
    for _ in range(1000):
        if link.counters["pfc_rx_xoff"]:
            break
        await asyncio.sleep(0)
    t0 = time.monotonic_ns()
    link.send(b"late", PEER, entropy=1, dscp=0)
    assert link.held == 1
    f = await port.recv()
    assert f[42:46] == b"late"
    assert link.paused_until[0] == 0
    # it cannot have left before the pause ran out (a lower bound only)
    assert time.monotonic_ns() - t0 >= quanta * 512 * 1000 - 1_000_000


async def test_classic_pause_stops_every_class(port_and_link):
    port, link, _ = port_and_link
    body = struct.pack("!HH", 0x0001, 0xFFFF)
    frame = b"\x01\x80\xc2\x00\x00\x01" + GW_MAC + b"\x88\x08" + body + bytes(42)
    port.send(frame)
    for _ in range(1000):
        if link.counters["pfc_rx_xoff"]:
            break
        await asyncio.sleep(0)
    link.send(b"a", PEER, entropy=1, dscp=0)
    link.send(b"b", PEER, entropy=1, dscp=46)
    assert link.held == 2
