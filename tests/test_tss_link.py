"""End-to-end TSS on real endpoints: the secure link (uet/link/secure.py, behaviour.md §5.5–§5.8).

Two FEPs on loopback run inside one secure domain; an *attacker* is a plain UDP socket bound to a
FEP's address and port that sends hand-sealed, tampered, replayed or foreign-domain datagrams to a
secure endpoint and watches the wire for answers. A valid packet naming an unknown PDC always
draws a NACK ``INV_DPDCID``; sent after the bad packets, it is the sentinel: its NACK is the first
and only datagram that may come back (one socket, in-order loopback, one receive batch at a time),
so "no response" is observed on the wire rather than assumed.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time

import pytest
from tss_e2e_support import SDI, Tap, domain, inner, pair, payload, security, slink, transfer
from tss_support import plaintexts

from uet.endpoint import Endpoint
from uet.link import Link, loopback_addresses
from uet.link.secure import SecureLink, rotate_keys
from uet.tss import DropReason, SdMode, SecureDomain, SecureDomainTable, TssConfig, TssContext, TssError
from uet.tss.stage import SecurityConfig, Tamper, tampered_arrivals
from uet.wire import pds, ses
from uet.wire.pds import NackCode, PdsType

# -- helpers -----------------------------------------------------------------------------------


def _request(psn: int) -> bytes:
    """A RUD request (no SYN) for a PDC the target does not have: answered by NACK INV_DPDCID."""
    std = ses.STANDARD[(1, "none")]
    head = std.encode(std.make(opcode=ses.SesOpcode.SEND, flags=ses.SesFlag.SOM | ses.SesFlag.EOM, request_length=4))
    return pds.REQUEST.encode(pds.REQUEST.make(psn=psn, spdcid=7, dpdcid=0x4242)) + head + b"data"


class Attacker:
    """A UDP socket at ``(address, port)`` — where a FEP of the domain would be — with its own
    TSS context (a copy of the domain, TSCs far from any real member's)."""

    def __init__(self, address: str, port: int, sd: SecureDomain | None, tsc: int = 1 << 40) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.bind((address, port))
        self.port = port
        self.ctx: TssContext | None = None
        if sd is not None:
            mine = sd.provision()
            mine.slots[mine.tx_an].next_tsc = tsc  # type: ignore[union-attr]
            self.ctx = TssContext(SecureDomainTable([mine]), address)

    def seal(self, plaintext: bytes, dst: str, sdi: int = SDI) -> bytes:
        assert self.ctx is not None
        return self.ctx.seal(plaintext, sdi=sdi, entropy=self.port, dst=dst)

    def send(self, datagram: bytes, dst: str) -> None:
        self.sock.sendto(datagram, (dst, self.port))

    async def recv(self, timeout: float = 5.0) -> bytes:
        loop = asyncio.get_running_loop()
        data, _ = await asyncio.wait_for(loop.sock_recvfrom(self.sock, 65536), timeout)
        return data

    async def sentinel(self, dst: str, psn: int, opener: TssContext) -> None:
        """Send a valid request; the first datagram back must be its NACK INV_DPDCID."""
        self.send(self.seal(_request(psn), dst), dst)
        got = await self.recv()
        pt = opener.open(got, entropy=self.port, src=dst)
        assert pt is not None, "the answer is sealed under the domain"
        nack = pds.NACK.decode(pt)
        assert nack.type == PdsType.NACK and nack.nack_code == NackCode.INV_DPDCID and nack.nack_psn == psn

    def close(self) -> None:
        self.sock.close()


async def _victim(sd: SecureDomain, table: SecureDomainTable | None = None, **kw) -> tuple[Endpoint, str, int]:
    """A secure FEP B and the address/port an attacker posing as A uses."""
    a, b = loopback_addresses(2, seed=random.getrandbits(32))
    port = 20000 + random.randrange(20000)
    sec = SecurityConfig(table if table is not None else SecureDomainTable([sd.provision()]), sdi=SDI, **kw)
    ep = await Endpoint.open(b, port=port, security=sec)
    return ep, a, port


def _opener(sd: SecureDomain, address: str) -> TssContext:
    """A context that opens what the victim sends to ``address`` (no replay window: read-only)."""
    return TssContext(SecureDomainTable([sd.provision()]), address, TssConfig(replay_window=0))


# -- plain operation ---------------------------------------------------------------------------


async def test_secure_transfer_both_ways_carries_only_ciphertext() -> None:
    sd = domain()
    ea, eb = await pair(security(sd), security(sd))
    tap = Tap(inner(ea))
    data = payload(300_000, seed=1)
    try:
        assert await transfer(ea, eb, data) == data
        assert await transfer(eb, ea, data[:5000]) == data[:5000]
    finally:
        await ea.close()
        await eb.close()
    ca, cb = ea.counters, eb.counters
    assert ca["link_tss_out_pkts"] >= 74 and cb["link_tss_in_auth_pkts"] == ca["link_tss_out_pkts"]
    assert ca["link_tss_dropped"] == cb["link_tss_dropped"] == 0
    # Every datagram on the wire starts with a security header of our SDI and hides the payload.
    assert tap.sent and all(d[0] >> 3 == 1 and int.from_bytes(d[1:4], "big") == SDI for _, d in tap.sent)
    assert not any(data[8192:8256] in d for _, d in tap.sent)


@pytest.mark.parametrize("mode", [SdMode.DIRECT, SdMode.CLUSTER])
def test_tx_channel_matches_seal_across_rotation(mode: SdMode) -> None:
    """The data-path sealer is byte-for-byte TssContext.seal, before and after a key rotation."""
    sd = SecureDomain.generate(9, mode)
    a1 = TssContext(SecureDomainTable([sd.provision()]), "10.0.0.1")
    a2 = TssContext(SecureDomainTable([sd.provision()]), "10.0.0.1")
    ch = a1.tx_channel(sdi=9, dst="10.0.0.2", entropy=4793)
    for pt in plaintexts().values():
        assert ch.seal(pt) == a2.seal(pt, sdi=9, entropy=4793, dst="10.0.0.2")
    key = os.urandom(32)
    a1.rotate(9, key, 0)
    a2.rotate(9, key, 0)
    for pt in plaintexts().values():
        assert ch.seal(pt) == a2.seal(pt, sdi=9, entropy=4793, dst="10.0.0.2")
    assert a1.stats["out_pkts"] == a2.stats["out_pkts"] == 2 * len(plaintexts())


def test_secure_link_refuses_a_link_without_udp_ports() -> None:
    class Bare(Link):  # a link without port / peer_port (the base class's None)
        address = "10.0.0.1"
        counters: dict = {}

        def send(self, datagram, dst, entropy, dscp, ecn=0) -> None:  # pragma: no cover - never reached
            pass

        def set_receiver(self, cb) -> None:  # pragma: no cover - never reached
            pass

        def close(self) -> None:  # pragma: no cover - never reached
            pass

    with pytest.raises(TssError, match="UDP ports"):
        SecureLink(Bare(), SecureDomainTable([domain()]))


# -- failures are silent ----------------------------------------------------------------------


async def test_tampered_packets_are_dropped_counted_and_unanswered() -> None:
    sd = domain()
    log: list[dict] = []
    ep, a, port = await _victim(sd)
    ep.link.event_log = log.append  # type: ignore[attr-defined]
    att = Attacker(a, port, sd)
    opener = _opener(sd, a)
    rng = random.Random(5)
    try:
        await att.sentinel(ep.address, 100, opener)
        bad = 0
        for pt in plaintexts().values():
            pkt = att.seal(pt, ep.address)
            for _ in range(12):  # random single-bit flips anywhere, header included
                flipped = bytearray(pkt)
                bit = rng.randrange(len(pkt) * 8)
                flipped[bit >> 3] ^= 0x80 >> (bit & 7)
                att.send(bytes(flipped), ep.address)
                bad += 1
        await att.sentinel(ep.address, 101, opener)
        c = ep.counters
        assert c["link_tss_dropped"] == bad
        assert c["link_tss_drop_bad_tag"] > bad // 2
        assert c["link_tss_in_auth_pkts"] == 2
        assert not ep.core.pdcs  # nothing reached the PDS
    finally:
        att.close()
        await ep.close()
    drops = [r for r in log if r["ev"] == "tss_drop"]
    assert len(drops) == bad and {r["peer"] for r in drops} == {a}
    assert {r["reason"] for r in drops} <= {r.value for r in DropReason}


async def test_replayed_captured_packets_are_dropped_and_unanswered() -> None:
    """Capture a whole session from A, then replay every datagram A sent: all dropped, no answer."""
    sd = domain()
    ea, eb = await pair(security(sd), security(sd))
    tap = Tap(inner(ea))
    data = payload(200_000, seed=2)
    try:
        assert await transfer(ea, eb, data) == data
        await ea.close()  # frees A's address and port for the attacker
        captured = [d for dst, d in tap.sent if dst == eb.address]
        assert len(captured) >= 49
        port = slink(eb).peer_port
        before = eb.counters["link_tss_in_auth_pkts"]
        att = Attacker(ea.address, port, sd)
        try:
            for d in captured:
                att.send(d, eb.address)
            await att.sentinel(eb.address, 7, _opener(sd, ea.address))
        finally:
            att.close()
        c = eb.counters
        assert c["link_tss_drop_replay"] + c.get("link_tss_drop_stale", 0) == len(captured)
        assert c["link_tss_in_auth_pkts"] == before + 1  # only the sentinel
        assert eb.counters["messages_received"] == 1
    finally:
        await eb.close()


async def test_packets_of_another_secure_domain_are_dropped_and_unanswered() -> None:
    sd = domain()
    other = SecureDomain.generate(SDI + 1, SdMode.CLUSTER)  # B knows it but does not use it
    same_sdi_other_key = SecureDomain.generate(SDI, SdMode.CLUSTER)
    stranger = SecureDomain.generate(0x777, SdMode.CLUSTER)  # unknown to B
    table = SecureDomainTable([sd.provision(), other.provision()])
    ep, a, port = await _victim(sd, table)
    att = Attacker(a, port, sd)
    opener = _opener(sd, a)
    try:
        for foreign, sdi in ((other, SDI + 1), (same_sdi_other_key, SDI), (stranger, 0x777)):
            ctx = TssContext(SecureDomainTable([foreign.provision()]), a)
            for pt in plaintexts().values():
                att.send(ctx.seal(pt, sdi=sdi, entropy=port, dst=ep.address), ep.address)
        att.send(_request(5), ep.address)  # not secured at all
        await att.sentinel(ep.address, 9, opener)
        c = ep.counters
        n = len(plaintexts())
        # The FEP accepts only its own SD, so a known-but-unused SD and an unknown one are both
        # "wrong_domain" (checked before the table lookup); same SDI, other key: "bad_tag".
        assert c["link_tss_drop_wrong_domain"] == 2 * n
        assert c["link_tss_drop_bad_tag"] == n
        assert c["link_tss_drop_not_secure"] == 1
        assert c["link_tss_dropped"] == 3 * n + 1
    finally:
        att.close()
        await ep.close()


async def test_tampering_during_a_transfer_is_counted_exactly() -> None:
    """An attacker flips bits in 3 % of the sealed datagrams of both FEPs: the transfer still
    arrives intact, and each receiver drops exactly the tampered datagrams that reached it."""
    sd = domain()
    ta, tb = Tamper(0.03, seed=1, record=True), Tamper(0.03, seed=2, record=True)
    ea, eb = await pair(
        security(sd, tamper=ta, record_arrivals=True, tss=TssConfig(auth_fail_threshold=None)),
        security(sd, tamper=tb, record_arrivals=True, tss=TssConfig(auth_fail_threshold=None)),
        rto_ns=5_000_000,
    )
    data = payload(1 << 20, seed=3)
    try:
        assert await transfer(ea, eb, data) == data
        assert await transfer(eb, ea, data[:100_000]) == data[:100_000]
    finally:
        await ea.close()
        await eb.close()
    la, lb = slink(ea), slink(eb)
    assert ta.tampered > 5 and tb.tampered > 0
    assert lb.arrivals is not None and la.arrivals is not None
    assert eb.counters["link_tss_dropped"] == tampered_arrivals(ta, lb.arrivals)
    assert ea.counters["link_tss_dropped"] == tampered_arrivals(tb, la.arrivals)
    assert eb.counters["link_tss_drop_bad_tag"] > 0


# -- key rotation ------------------------------------------------------------------------------


async def test_key_rotation_mid_transfer_loses_nothing() -> None:
    sd = domain()
    ea, eb = await pair(security(sd), security(sd))
    la, lb = slink(ea), slink(eb)
    loop = asyncio.get_running_loop()
    state = {"n": 0}

    def on_send(datagram: bytes, dst: str) -> None:
        state["n"] += 1
        if state["n"] == 600:  # mid-transfer, with a full window in flight
            loop.call_soon(rotate_keys, [la, lb])

    tap = Tap(la.inner, on_send)
    data = payload(8 << 20)
    try:
        assert await transfer(ea, eb, data, timeout=60) == data
    finally:
        await ea.close()
        await eb.close()
    ans = [d[0] & 1 for _, d in tap.sent]  # AN: bit 0 of the security header's first byte
    assert ans.count(0) >= 600 and ans.count(1) > 600  # both associations carried data
    assert ans.index(1) >= 600 and 0 not in ans[ans.index(1) + 300 :]  # a clean switch
    for ep in (ea, eb):
        c = ep.counters
        assert c["link_tss_dropped"] == 0 and c["link_tss_rotations"] == 1
    assert eb.counters["messages_received"] == 1


async def test_old_key_is_refused_after_its_grace_period() -> None:
    sd = domain()
    ea, eb = await pair(security(sd), security(sd))
    tap = Tap(inner(ea))
    try:
        assert await transfer(ea, eb, b"before rotation") == b"before rotation"
        old = [d for dst, d in tap.sent if dst == eb.address][0]
        # Rotate with the grace period already over on B (activation "3 s ago").
        key = os.urandom(32)
        la, lb = slink(ea), slink(eb)
        for link in (la, lb):
            link.install_key(1, key)
        la.activate(1)
        lb.activate(1, now_ns=time.monotonic_ns() - 3_000_000_000)
        assert await transfer(ea, eb, b"after rotation") == b"after rotation"
        port = lb.peer_port
        await ea.close()
        new = SecureDomain.with_key(SDI, SdMode.CLUSTER, key, an=1)
        att = Attacker(ea.address, port, new)
        try:
            att.send(old, eb.address)
            await att.sentinel(eb.address, 3, _opener(new, ea.address))  # the only answer
        finally:
            att.close()
        assert eb.counters["link_tss_drop_retired_key"] == 1
    finally:
        await eb.close()


@pytest.mark.parametrize("mode", [SdMode.DIRECT, SdMode.CLUSTER])
def test_open_fast_decides_and_counts_exactly_like_open(mode: SdMode) -> None:
    """The data-path opener against the full one on the same mixed stream: genuine packets,
    replays, bit flips, a rotation with its grace period ending, an epoch change and the latch."""
    rng = random.Random(11)
    sd = SecureDomain.generate(SDI, mode)
    sender = TssContext(SecureDomainTable([sd.provision()]), "10.0.0.1")
    cfg = TssConfig(auth_fail_threshold=20, key_grace_ns=200)
    slow = TssContext(SecureDomainTable([sd.provision()]), "10.0.0.2", cfg)
    fast = TssContext(SecureDomainTable([sd.provision()]), "10.0.0.2", cfg)
    src = bytes([10, 0, 0, 1])
    pts = list(plaintexts().values())
    sent: list[bytes] = []
    for step in range(1500):
        if step == 400:  # rotation: both receivers install, the sender switches
            key = os.urandom(32)
            for ctx in (slow, fast):
                ctx.install_key(SDI, 1, key)
            sender.install_key(SDI, 1, key)
            sender.activate(SDI, 1, 0)
            for ctx in (slow, fast):
                ctx.activate(SDI, 1, step)
        if step == 700:  # the SDME advances the epoch at the sender and the receivers
            for ctx in (sender, slow, fast):
                ctx.table[SDI].advance_epoch()
        r = rng.random()
        if r < 0.6 or not sent:
            pkt = sender.seal(rng.choice(pts), sdi=SDI, entropy=4793, dst="10.0.0.2")
            sent.append(pkt)
        elif r < 0.8:
            pkt = rng.choice(sent)  # replay (old AN after the grace period: retired_key)
        else:
            bad = bytearray(rng.choice(sent[-20:]))
            bit = rng.randrange(len(bad) * 8)
            bad[bit >> 3] ^= 0x80 >> (bit & 7)
            pkt = bytes(bad)
        now = step if step >= 400 else None
        want = slow.open(pkt, entropy=4793, src=src, now_ns=now, expected_sdi=SDI)
        if now is not None:
            fast.handle_timer(now)
        assert fast.open_fast(pkt, 4793, src, SDI) == want, step
        assert fast.drops == slow.drops and fast.stats == slow.stats, step
    assert slow.drops[DropReason.REPLAY] and slow.drops[DropReason.BAD_TAG] and slow.drops[DropReason.RETIRED_KEY]
    assert slow.table[SDI].dropping and slow.drops[DropReason.SD_DROPPING], slow.drops  # the latch engaged...
    assert fast.table[SDI].dropping  # ...at the same packet on both
