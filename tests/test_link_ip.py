"""UET directly over IP protocol 253 (uet.link.ip; wire-format.md §1.2): exact bytes on the wire,
the entropy header handed up, hostile input, the CRC trailer over the entropy header, and every
operation between two endpoints over loopback. Needs a raw socket (root or CAP_NET_RAW): skipped
with the reason otherwise (CI runs as root)."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest
from ops_suite import OPERATIONS, every_operation

from uet import EndpointConfig
from uet.endpoint import Endpoint
from uet.fep.events import Datagram
from uet.link import LinkError, loopback_addresses, open_link
from uet.link.ip import IpLink, raw_socket_error
from uet.wire import crc

REASON = raw_socket_error()
needs_raw = pytest.mark.skipif(REASON is not None, reason=REASON or "")
JOB = 7


def _raw_listener(address: str, proto: int = 253) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, proto)
    s.bind((address, 0))
    s.settimeout(10)
    return s


@needs_raw
async def test_exact_bytes_entropy_header_protocol_and_tos() -> None:
    a, b = loopback_addresses(2)
    listener = _raw_listener(b)
    link = IpLink(a)
    try:
        link.send(b"\x10\x00PDS-and-more", b, 0xBEEF, dscp=0, ecn=2)
        link.send(b"\x38ack", b, 0x1234, dscp=46)
        for want_tos, want in ((0x02, b"\xbe\xef\x00\x00\x10\x00PDS-and-more"), (0xB8, b"\x12\x34\x00\x00\x38ack")):
            pkt = await asyncio.get_running_loop().run_in_executor(None, listener.recv, 2048)
            ihl = (pkt[0] & 15) * 4
            assert pkt[9] == 253 and pkt[1] == want_tos
            assert socket.inet_ntoa(pkt[12:16]) == a and socket.inet_ntoa(pkt[16:20]) == b
            assert pkt[ihl:] == want
        assert link.counters["tx_packets"] == 2
    finally:
        link.close()
        listener.close()


@needs_raw
async def test_receive_hands_up_the_entropy_and_ecn_and_drops_what_is_not_uet() -> None:
    a, b = loopback_addresses(2)
    rx = IpLink(b)
    got: list = []
    rx.set_receiver(got.extend)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 253)
    s.bind((a, 0))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x03)
    try:
        s.sendto(b"\xab\xcd\x00\x00uet-bytes", (b, 0))
        s.sendto(b"\xab", (b, 0))  # shorter than the entropy header
        s.sendto(b"\x00\x01\x00\x07xx", (b, 0))  # reserved half not zero
        s.sendto(b"\x00\x02\x00\x00ok", (b, 0))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while len(got) < 2 and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert got == [Datagram(b"uet-bytes", a, 3, False, False, 0xABCD), Datagram(b"ok", a, 3, False, False, 2)]
        assert rx.counters["rx_errors"] == 2 and rx.counters["rx_packets"] == 2
    finally:
        rx.close()
        s.close()


def test_parse_of_an_ipv4_packet_skips_options_and_reads_the_tos() -> None:
    link = IpLink.__new__(IpLink)
    link.v6 = False
    link.counters = {"rx_errors": 0}
    hdr = bytes([0x46, 0xB9]) + bytes(22)  # IHL 6: one option word
    assert link.parse(hdr + b"\x00\x05\x00\x00body", "1.2.3.4", 0) == Datagram(b"body", "1.2.3.4", 1, False, False, 5)
    assert link.parse(b"\x45" + bytes(10), "1.2.3.4", 0) is None and link.counters["rx_errors"] == 1


def test_without_a_raw_socket_the_error_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.socket

    def refuse(family=-1, type=-1, proto=-1, fileno=None):  # noqa: A002 - socket.socket's names
        if type == socket.SOCK_RAW:
            raise PermissionError(1, "Operation not permitted")
        return real(family, type, proto, fileno)

    loop = asyncio.new_event_loop()
    monkeypatch.setattr(socket, "socket", refuse)
    try:
        msg = raw_socket_error()
        assert msg and "\n" not in msg and "CAP_NET_RAW" in msg and "253" in msg
        with pytest.raises(LinkError, match="run as root or grant CAP_NET_RAW"):
            IpLink("127.0.0.1", loop=loop)
    finally:
        loop.close()


async def test_an_unknown_link_mode_is_refused() -> None:
    with pytest.raises(LinkError, match="unknown link 'tcp'"):
        open_link("tcp", "127.0.0.1")


async def _pair(config: EndpointConfig | None = None) -> tuple[Endpoint, Endpoint]:
    a, b = loopback_addresses(2)
    ea = await Endpoint.open(a, job=JOB, pid=1, link="ip", config=config)
    eb = await Endpoint.open(b, job=JOB, pid=1, link="ip", config=config)
    return ea, eb


@needs_raw
async def test_every_operation_over_ip_protocol_253() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        assert isinstance(ea.link, IpLink)
        assert await every_operation(ea, eb) == list(OPERATIONS)
        assert ea.link.counters["rx_errors"] == eb.link.counters["rx_errors"] == 0


@needs_raw
async def test_crc_trailer_over_ip_covers_the_entropy_header() -> None:
    """The trailer covers src ‖ dst ‖ entropy header ‖ UET bytes (wire-format.md §1.4) and the
    receiver checks it with the entropy it got; a corrupted entropy header is dropped."""
    cfg = EndpointConfig(data_protect="crc")
    a, b = loopback_addresses(2)
    listener = _raw_listener(b)
    ea = await Endpoint.open(a, job=JOB, pid=1, link="ip", config=cfg)
    try:
        ea.send_nowait(b, b"hello")  # nobody answers: only the first packet is read
        pkt = await asyncio.get_running_loop().run_in_executor(None, listener.recv, 4096)
        ihl = (pkt[0] & 15) * 4
        body = pkt[ihl:]
        covered = pkt[12:20] + body[:-4]
        assert body[-4:] == struct.pack("<I", crc.crc32c_reference(covered))
    finally:
        await ea.close()
        listener.close()
    ea, eb = await _pair(cfg)
    async with ea, eb:
        await asyncio.wait_for(ea.send(eb.address, b"x" * 10_000, tag=1), 20)
        assert (await asyncio.wait_for(eb.recv(tag=1), 20)).data == b"x" * 10_000
        assert eb.counters["crc_ok"] > 0 and eb.counters["crc_drop_bad"] == 0
        good = eb.counters["crc_ok"]
        # the same packet with another entropy value: the trailer no longer matches
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 253)
        s.bind((ea.address, 0))
        s.sendto(b"\x00\x01\x00\x00" + body[4:], (eb.address, 0))
        s.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not eb.counters["crc_drop_bad"] and loop.time() < deadline:
            await asyncio.sleep(0.01)
        assert eb.counters["crc_drop_bad"] == 1 and eb.counters["crc_ok"] == good


@needs_raw
async def test_tss_over_ip_protocol_253_binds_each_datagrams_entropy() -> None:
    """Secure endpoints over the ip link: the core seals with each datagram's entropy in the AAD
    (the entropy header is on the wire, as the reference provider secures it, uet.tss.nonce) and
    the receiver opens with the entropy header's value; a packet whose entropy header was changed
    fails authentication and is dropped."""
    from tss_e2e_support import config, domain, security

    sd = domain()
    a, b = loopback_addresses(2)
    ea = await Endpoint.open(a, job=JOB, pid=1, link="ip", config=config(1), security=security(sd))
    eb = await Endpoint.open(b, job=JOB, pid=1, link="ip", config=config(2), security=security(sd))
    held: list[bytes] = []
    real = ea.link.send

    def tap(datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        if hold and not held:  # keep the first sealed packet off the wire (PDS resends it)
            held.append(struct.pack(">HH", entropy, 0) + datagram)
            return
        real(datagram, dst, entropy, dscp, ecn)

    hold = False
    ea.link.send = tap  # type: ignore[method-assign]
    async with ea, eb:
        assert await every_operation(ea, eb) == list(OPERATIONS)
        hold = True
        fut = ea.send_nowait(eb.address, b"after the forgery", tag=9)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not held and loop.time() < deadline:
            await asyncio.sleep(0.001)
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, 253)
        s.bind((ea.address, 0))
        forged = bytearray(held[0])
        forged[0] ^= 0x40  # another entropy value, the same sealed bytes
        s.sendto(bytes(forged), (eb.address, 0))
        s.close()
        assert (await asyncio.wait_for(eb.recv(tag=9), 20)).data == b"after the forgery"
        await asyncio.wait_for(fut, 20)
        assert eb.counters["tss_drop_bad_tag"] == 1


@needs_raw
@pytest.mark.parametrize(("protect", "setting", "zero"), [
    ("crc", "auto", True), ("none", "auto", False), ("none", "off", True), ("crc", "on", False),
])  # fmt: skip
async def test_udp_checksum_rule_of_the_direct_link(protect: str, setting: str, zero: bool) -> None:
    """``udp_checksum="auto"`` sends the UDP checksum as zero with the CRC trailer (behaviour.md
    §2.16) and computes it otherwise; ``on``/``off`` force it (IPv4, SO_NO_CHECK)."""
    a, b = loopback_addresses(2)
    cap = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
    cap.bind((b, 0))
    cap.settimeout(10)
    cfg = EndpointConfig(data_protect=protect, udp_checksum=setting)
    link = open_link("direct", a, config=cfg, port=0, peer_port=4793)
    try:
        link.send(b"\x10" + bytes(40), b, 0, dscp=0)
        while True:
            pkt = await asyncio.get_running_loop().run_in_executor(None, cap.recv, 2048)
            ihl = (pkt[0] & 15) * 4
            if socket.inet_ntoa(pkt[12:16]) == a:
                break
        checksum = struct.unpack_from(">H", pkt, ihl + 6)[0]
        assert (checksum == 0) is zero
    finally:
        link.close()
        cap.close()


def test_udp_checksum_setting_is_validated() -> None:
    with pytest.raises(ValueError, match="udp_checksum must be auto, on or off"):
        EndpointConfig(udp_checksum="maybe")
