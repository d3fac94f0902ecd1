"""Hardening: the switch process (``uet-fabric``), the fabric link and the FEPs behind them on garbage.

Three tests: the switch fed garbage frames on its host ports keeps forwarding (below); the NIC
side's frame decoder (``FabricLink.parse``) on mutated frames (hypothesis); and two endpoints on
fabric links completing a transfer while a third host sends garbage frames and garbage UET through
the switch to both of them.

Standard under test (architecture.md "Principles" 5, rocev2-and-fabric.md §8): a frame the model
cannot forward — shorter than an Ethernet header, a truncated VLAN tag or IPv4 header, an IPv4
total length beyond the frame (cut in transit), not IPv4, TTL expired, no route, longer than the
port's maximum frame, a truncated or odd MAC-control frame — is counted as a drop by reason, never
raises, and never disturbs the frames around it.

The in-process :class:`~uet.fabric.switch.FabricProcess` runs the default topology. Two "NICs"
(plain UDP sockets on host ports 0 and 1) send a seeded stream of garbage mixed with legitimate
frames from host 0 to host 5; then, after all the garbage, a second batch of legitimate frames.
Legitimate frames carry a marker and a sequence number in their payload; every one must arrive at
host 5 exactly once and intact. Garbage that happens to still be a forwardable frame (a bit flip in
the MAC address, say) is built from *decoy* frames with another marker, so it can reach host 5
without being mistaken for a legitimate frame. The loop's exception handler must see nothing.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from collections.abc import Iterator
from dataclasses import replace

from hang_guard import within
from hypothesis import given, settings
from hypothesis import strategies as st
from uet.fabric.profiles import load_topology
from uet.fabric.switch import FabricProcess, ProcessConfig

from uet.endpoint import Endpoint, EndpointConfig
from uet.fep.events import Datagram
from uet.link.fabric import FabricLink
from uet.pds import PdsConfig
from uet.wire.build import build_frame, build_pfc_frame
from uet.wire.net import EtherType
from uet.wire.pds import ACK, NACK, REQUEST, PdsType, ReqFlag

TIMEOUT = 10.0  # a guard against a hang, in the test's own time (tests/hang_guard.py): load does not trip it
LEGIT = b"LEGIT-FRAME-0001"
DECOY = b"DECOY-FRAME-0002"


class _Nic:
    """A raw NIC: a UDP socket exchanging whole Ethernet frames with one switch host port."""

    def __init__(self, port: tuple[str, int]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.port = port

    def send(self, frame: bytes) -> None:
        self.sock.sendto(frame, self.port)

    async def recv(self) -> bytes:
        return await within(asyncio.get_running_loop().sock_recv(self.sock, 65536), TIMEOUT)

    def close(self) -> None:
        self.sock.close()


def _garbage(rng: random.Random, src: str, dst: str, n: int) -> Iterator[bytes]:
    """Frames the model must drop (or, for a few bit flips, may forward: decoys only)."""
    for _ in range(n):
        decoy = build_frame(DECOY + rng.randbytes(rng.randrange(0, 200)), src, dst, entropy=rng.getrandbits(16))
        kind = rng.randrange(10)
        if kind == 0:  # random bytes, any length up to a jumbo frame
            yield rng.randbytes(rng.randrange(0, 1600))
        elif kind == 1:  # truncated anywhere (inside Ethernet, IPv4, UDP, UET)
            yield decoy[: rng.randrange(len(decoy))]
        elif kind == 2:  # bit flips in the Ethernet / IPv4 / UDP headers
            bad = bytearray(decoy)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(42)
                bad[i] ^= 1 << rng.randrange(8)
            yield bytes(bad)
        elif kind == 3:  # oversized: far beyond any port's maximum frame
            yield decoy + rng.randbytes(rng.choice([9000, 60_000]))
        elif kind == 4:  # a VLAN tag cut short, or a tagged frame with a truncated IPv4 header
            tagged = build_frame(DECOY, src, dst, entropy=1, vlan=(rng.randrange(8), rng.randrange(4096)))
            yield tagged[: rng.choice([14, 15, 16, 17, 18, 20, 30])]
        elif kind == 5:  # not IPv4: IPv6 ethertype over an IPv4 body, random ethertypes, version 6
            bad = bytearray(decoy)
            if rng.random() < 0.5:
                bad[12:14] = rng.choice([EtherType.IPV6, 0x88B5, 0x0000, 0xFFFF]).to_bytes(2, "big")
            else:
                bad[14] = 0x65
            yield bytes(bad)
        elif kind == 6:  # TTL 0 / 1 (expired at the first switch)
            yield build_frame(DECOY, src, dst, entropy=2, ttl=rng.choice([0, 1]))
        elif kind == 7:  # no route: a destination outside the fabric
            yield build_frame(DECOY, src, f"10.{rng.randrange(200, 256)}.{rng.randrange(256)}.1", entropy=3)
        elif kind == 8:  # MAC-control frames: truncated, unknown opcode, PFC resuming (quanta 0)
            pfc = bytearray(build_pfc_frame({p: 0 for p in range(8)}))
            choice = rng.randrange(3)
            if choice == 0:
                yield bytes(pfc[: rng.randrange(14, 18)])
            elif choice == 1:
                pfc[14:16] = rng.getrandbits(16).to_bytes(2, "big")
                yield bytes(pfc)
            else:
                yield bytes(pfc)
        else:  # an IPv4 header whose IHL claims options beyond the frame, or total length lies
            bad = bytearray(decoy[:34])
            bad[14] = 0x40 | rng.choice([0, 1, 4, 15])
            yield bytes(bad)


async def test_host_ports_survive_garbage_and_keep_forwarding() -> None:
    rng = random.Random(4242)
    loop = asyncio.get_running_loop()
    errors: list[dict] = []
    old_handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    fp = FabricProcess(load_topology("default"), ProcessConfig())
    await fp.start()
    h0, h1, h5 = _Nic(fp.ports[0]), _Nic(fp.ports[1]), _Nic(fp.ports[5])
    src, dst, src1 = fp.fabric.host_ip(0), fp.fabric.host_ip(5), fp.fabric.host_ip(1)
    try:
        ip5 = socket.inet_aton(dst)  # announce (gratuitous ARP of host 5's IP: the switch learns only that)
        arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, b"\x02\x00\x00\x00\x00\x05", ip5, bytes(6), ip5)
        h5.send(b"\xff" * 6 + b"\x02\x00\x00\x00\x00\x05" + b"\x08\x06" + arp + bytes(18))
        for _ in range(100_000):
            if fp.addrs[5] is not None:
                break
            await asyncio.sleep(0)
        assert fp.addrs[5] is not None

        def legit(i: int) -> bytes:
            return build_frame(LEGIT + i.to_bytes(4, "big") + bytes([i & 0xFF]) * 200, src, dst, entropy=100 + i)

        stream: list[tuple[_Nic, bytes]] = [(h0, g) for g in _garbage(rng, src, dst, 150)]
        stream += [(h1, g) for g in _garbage(rng, src1, dst, 150)]
        rng.shuffle(stream)
        n_first = 40
        for i in range(n_first):  # legitimate frames spread through the garbage
            stream.insert(rng.randrange(len(stream) + 1), (h0, legit(i)))
        n = size = 0
        for nic, frame in stream:
            nic.send(frame)
            n += 1
            size += len(frame)
            if n >= 16 or size >= 64 << 10:  # let the switch read: its socket buffer is finite
                await asyncio.sleep(0)
                n = size = 0
        n_total = n_first + 20
        for i in range(n_first, n_total):  # after all the garbage: forwarding continues
            h0.send(legit(i))

        seen: dict[int, int] = {}
        decoys = 0
        while len(seen) < n_total:
            f = await h5.recv()
            at = f.find(LEGIT)
            if at < 0:
                assert f.find(DECOY) >= 0, f"host 5 got a frame nobody sent: {f[:64].hex()}"
                decoys += 1
                continue
            i = int.from_bytes(f[at + 16 : at + 20], "big")
            assert f == f[: at + 20] + bytes([i & 0xFF]) * 200  # payload intact
            seen[i] = seen.get(i, 0) + 1
        assert sorted(seen) == list(range(n_total)) and set(seen.values()) == {1}

        s = fp.summary()
        reasons = s["fabric"]["drops_by_reason"]
        for reason in ("oversize", "malformed", "not_ipv4", "ttl_expired", "no_route"):
            assert reasons.get(reason, 0) > 0, (reason, reasons)
        io = s["io"]
        assert io.get("rx_errors", 0) == 0
        assert io["rx_frames"] == len(stream) + (n_total - n_first) + 1  # every frame read (and the ARP)
        assert fp.fabric.counters.total("nic_malformed") > 0  # shorter than an Ethernet header: the NIC's count
    finally:
        fp.close()
        for nic in (h0, h1, h5):
            nic.close()
        loop.set_exception_handler(old_handler)
    assert errors == [], [(e.get("message"), repr(e.get("exception"))) for e in errors]


@settings(max_examples=300)
@given(
    st.binary(min_size=0, max_size=300),
    st.sampled_from([0, 5, 7, 46]),
    st.integers(0, 3),
    st.lists(st.tuples(st.integers(0, 120), st.integers(0, 255)), max_size=4),
    st.integers(0, 400),
    st.booleans(),
)
def test_fabric_link_parse_never_raises(payload: bytes, dscp: int, ecn: int, edits, cut: int, vlan: bool) -> None:
    """The endpoint side of a fabric port (``FabricLink.parse``, the NIC's frame decoder) on any
    frame — a valid one mutated, cut, VLAN-tagged — returns a datagram that lies inside the frame or
    None (counted), never raises; a valid frame afterwards still parses to its datagram."""
    loop = asyncio.new_event_loop()
    try:
        link = FabricLink("10.0.0.1", ("127.0.0.1", 9), gateway_mac=b"\x02\x00\x00\x00\x00\xfe", loop=loop)
        try:
            frame = bytearray(link.build(payload, "10.0.0.2", 0xC001, dscp, ecn))
            if vlan:
                frame[12:12] = b"\x81\x00\x00\x05"
            for i, v in edits:
                if i < len(frame):
                    frame[i] = v
            data = bytes(frame[: max(0, len(frame) - cut)])
            got = link.parse(data)
            if got is not None:
                assert not isinstance(got, Datagram)  # no owner asked for records
                dg, src, e = got
                assert dg in data and src.count(".") == 3 and 0 <= e & 3 <= 3
            good = link.build(b"hello", "10.0.0.2", 1, 0, 0)
            assert link.parse(good) == (b"hello", "10.0.0.1", 0)
        finally:
            link.close()
    finally:
        loop.close()


def _uet_garbage(rng: random.Random, n: int) -> Iterator[bytes]:
    """UET datagrams for the FEPs behind the switch: random bytes (some with a PDS type byte),
    requests / ACKs / NACKs / control packets for PDCs that do not exist, cut or oversized."""
    for _ in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            d = bytearray(rng.randbytes(rng.randrange(0, 300)))
            if d:
                d[0] = (rng.randrange(1, 15) << 3) | (d[0] & 7)
            yield bytes(d)
        elif kind == 1:
            hdr = REQUEST.make(
                type=rng.choice([PdsType.RUD_REQ, PdsType.ROD_REQ]), flags=rng.choice([0, ReqFlag.SYN, ReqFlag.AR]),
                psn=rng.getrandbits(32), spdcid=rng.getrandbits(16), dpdcid=rng.getrandbits(16),
            )  # fmt: skip
            yield (REQUEST.encode(hdr) + rng.randbytes(rng.randrange(0, 120)))[: rng.randrange(4, 140)]
        elif kind == 2:
            yield ACK.encode(
                ACK.make(cack_psn=rng.getrandbits(32), spdcid=rng.getrandbits(16), dpdcid=rng.getrandbits(16))
            )
        elif kind == 3:
            yield NACK.encode(
                NACK.make(
                    nack_code=rng.randrange(256), nack_psn=rng.getrandbits(32), spdcid=rng.getrandbits(16),
                    dpdcid=rng.getrandbits(16),
                )
            )  # fmt: skip
        else:
            yield rng.randbytes(rng.choice([1400, 8000]))


async def test_endpoints_behind_the_switch_survive_garbage() -> None:
    """Two FEPs on fabric links (hosts 0 and 5) exchange tagged messages while host 1 sends the
    switch garbage frames and well-formed frames carrying garbage UET to both FEPs' addresses
    (with host 1's and the peer's source address: the switch forwards by destination). Every
    message arrives intact once, the FEPs count what they dropped, nothing raises."""
    rng = random.Random(99)
    loop = asyncio.get_running_loop()
    errors: list[dict] = []
    old_handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    fp = FabricProcess(load_topology("default"), ProcessConfig())
    await fp.start()
    ips = [fp.fabric.host_ip(i) for i in range(6)]
    # Fabric endpoint settings of uet-run on the realtime profile (uet.scenario.derive): 1024-byte payloads fit
    # the fabric's frames; PDCs stay open (no idle close) for the whole test.
    cfg = EndpointConfig(payload_size=1024, max_inflight=16, pds=PdsConfig(rto_ns=200_000_000, close_idle_ns=None))
    eps = [Endpoint(FabricLink(ips[h], fp.ports[h]), job=1, config=replace(cfg, seed=h)) for h in (0, 5)]
    ea, eb = eps
    nic = _Nic(fp.ports[1])
    try:
        for _ in range(100_000):  # the links announce themselves (gratuitous ARP) when they open
            if fp.addrs[0] is not None and fp.addrs[5] is not None:
                break
            await asyncio.sleep(0)
        msgs = [bytes([i]) + rng.randbytes(rng.choice([10, 3000, 9000])) for i in range(12)]
        tags = [rng.getrandbits(64) for _ in msgs]
        frames = list(_garbage(rng, ips[1], ips[5], 100))
        for dst, peer in ((ips[5], ips[0]), (ips[0], ips[5])):
            for d in _uet_garbage(rng, 60):
                src = rng.choice([ips[1], peer])
                frames.append(build_frame(d, src, dst, entropy=rng.getrandbits(16), dscp=rng.choice([0, 46])))
        rng.shuffle(frames)
        before = (ea.counters, eb.counters)

        async def attack() -> None:
            n = size = 0
            for f in frames:
                nic.send(f)
                n += 1
                size += len(f)
                if n >= 16 or size >= 64 << 10:
                    await asyncio.sleep(0)
                    n = size = 0

        async def transfer() -> list[bytes]:
            futs = [ea.send_nowait(eb.address, m, tag=t) for m, t in zip(msgs, tags, strict=True)]
            got = []
            for t in tags:
                m = await within(eb.recv(tag=t), TIMEOUT)
                assert m.source == ea.address
                got.append(bytes(m.data))
            await within(asyncio.gather(*futs), TIMEOUT)
            return got

        got, _ = await within(asyncio.gather(transfer(), attack()), 3 * TIMEOUT)
        assert got == msgs
        tail = [b"after" + bytes([i]) for i in range(3)]  # forwarding and both FEPs still serve
        for i, m in enumerate(tail):
            await within(ea.send(eb.address, m, tag=i), TIMEOUT)
            assert bytes((await within(eb.recv(tag=i), TIMEOUT)).data) == m
        for ep, b in zip(eps, before, strict=True):
            c = ep.counters
            drops = sum(v - b.get(k, 0) for k, v in c.items() if k.startswith(("drop_", "link_rx_malformed")))
            assert drops > 0, {k: v for k, v in c.items() if "drop" in k or "rx_" in k}
            assert c["messages_failed"] == 0
        assert fp.summary()["fabric"]["drops"] > 0
    finally:
        await within(asyncio.gather(ea.close(), eb.close()), TIMEOUT)
        fp.close()
        nic.close()
        loop.set_exception_handler(old_handler)
    assert errors == [], [(e.get("message"), repr(e.get("exception"))) for e in errors]
