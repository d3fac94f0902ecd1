"""TSS is a stage of the FEP core, so secure endpoints work over the fabric link too: there the
core seals and opens with each datagram's own entropy (the frame's UDP source port) in the AAD.

Two endpoints on fabric links joined back to back (each link's "switch" is the other link's
socket: a cable), with one secure domain."""

from __future__ import annotations

import asyncio
import socket

from uet.endpoint import Endpoint, EndpointConfig
from uet.fep import Datagram
from uet.link.fabric import FabricLink
from uet.tss import SdMode, SecureDomain, SecureDomainTable
from uet.tss.stage import SecurityConfig
from uet.wire.pds import PdsType

A, B = "10.0.0.1", "10.0.1.1"


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


async def test_secure_transfer_over_the_fabric_link_seals_every_frame() -> None:
    pa, pb = _free_ports(2)
    la = FabricLink(A, ("127.0.0.1", pb), bind=("127.0.0.1", pa), rate_bps=10_000_000_000)
    lb = FabricLink(B, ("127.0.0.1", pa), bind=("127.0.0.1", pb), rate_bps=10_000_000_000)
    frames: list[bytes] = []
    build = la.build

    def tap(datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int) -> bytes:
        frame = build(datagram, dst, entropy, dscp, ecn)
        frames.append(frame)
        return frame

    la.build = tap  # type: ignore[method-assign]
    sd = SecureDomain.generate(0x42, SdMode.CLUSTER)
    cfg = EndpointConfig(seed=5)
    ea = Endpoint(la, job=1, pid=1, config=cfg, security=SecurityConfig(SecureDomainTable([sd.provision()])))
    eb = Endpoint(lb, job=1, pid=1, config=cfg, security=SecureDomainTable([sd.provision()]))
    try:
        assert ea.link is la and la.records  # no facade: the core seals with per-datagram entropy
        data = bytes(range(256)) * 300
        fut = ea.send_nowait(B, data)
        msg = await asyncio.wait_for(eb.recv(), 20)
        await asyncio.wait_for(fut, 20)
        assert bytes(msg.data) == data
        await asyncio.wait_for(eb.send(A, b"back"), 20)
        assert bytes((await asyncio.wait_for(ea.recv(), 20)).data) == b"back"
    finally:
        await ea.close()
        await eb.close()
    uet = [f for f in frames if len(f) > 42 and f[12:14] == b"\x08\x00" and f[23] == 17]
    assert uet and all(f[42] >> 3 == PdsType.TSS for f in uet)  # every UET datagram is sealed
    assert b"\x00\x01\x02\x03\x04\x05\x06\x07" * 2 not in b"".join(uet)
    ca, cb = ea.counters, eb.counters
    assert ca["tss_out_pkts"] == len(uet) and cb["tss_in_auth_pkts"] > 0 and cb["tss_dropped"] == 0


async def test_fabric_records_carry_source_port_and_trim_marks() -> None:
    pa, pb = _free_ports(2)
    la = FabricLink(A, ("127.0.0.1", pb), bind=("127.0.0.1", pa), deliver_trimmed=True)
    try:
        frame = la.build(b"\x10" + bytes(40), B, 0xBEEF, 5, 0)  # DSCP 5: trimmed at the last hop
        frame = frame[:26] + bytes([10, 0, 1, 1]) + frame[30:]  # as if it came from B
        la.records = True
        from uet.wire.net import inet_checksum

        ip = bytearray(frame[14:34])
        ip[10:12] = b"\x00\x00"
        ip[10:12] = inet_checksum(ip).to_bytes(2, "big")
        frame = frame[:14] + bytes(ip) + frame[34:]
        rec = la.parse(frame)
        assert isinstance(rec, Datagram)
        assert rec.source == B and rec.source_port == 0xBEEF and rec.trimmed and rec.last_hop
    finally:
        la.close()
