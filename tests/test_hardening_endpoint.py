"""Hardening: two endpoints complete transfers over real UDP while a third party floods them.

Standard under test (architecture.md "Principles" 5, spec/behaviour.md §2.6, §2.10, §5.8): every
endpoint survives truncated, oversized, corrupted, replayed and out-of-window packets — a counted
drop or the prescribed NACK, never an exception, never a hang, never a lost or duplicated message.

Each scenario (RUD, ROD, RUDI; TSS off and on) runs two FEPs on random 127.x addresses in this
process. A tap on each FEP's wire link records what it transmits (sealed bytes when TSS is on).
Three phases, all seeded:

1. warm-up: a batch of messages A→B, captured by the taps (the raw material of the attacks);
2. under fire: a second batch while attacker sockets send both FEPs random bytes, truncated,
   oversized (60 KB) and bit-flipped copies of captured packets, packets with out-of-window PSNs,
   wrong DPDCID / SPDCID / mode, and ACKs / NACKs / control packets for PDCs that do not exist;
3. after the fact: replays of every captured packet, more garbage, then a last batch (which also
   proves the FEPs still serve, and — the sockets being FIFO — that every attack packet sent
   before it was processed).

Who may claim what (the threat model, spec/behaviour.md §2.16 and §5): without TSS nothing
authenticates a packet (the project does not implement the §2.16 CRC), so a forger who knows the
PDCIDs and an in-window PSN can inject data, and a replayed SYN from a closed PDC is accepted
(§2.3.1 trusts the first SYN). The attacks that arrive *from the peer's own address* without TSS
are therefore limited to those the PDS must reject on its own: out-of-window PSNs (§2.4, §2.6
step 5), wrong DPDCID / SPDCID / mode (§2.6 steps 1 and 3), replays of non-SYN requests of a
still-open PDC (duplicates, §2.6 step 5) and ACKs / NACKs naming PDCs that do not exist. Everything
else comes from a stranger's address (a third loopback IP) and may at most create the stranger's
own PDCs and messages, which are counted apart. With TSS on, every attack — from the stranger and
spoofed from the peer — must be dropped by the TSS layer (§5.8): nothing unauthenticated or
replayed reaches the PDS core.

The FEPs keep their PDCs open between phases (``close_idle_ns=None``) so that the forgeries name
the live PDC and draw the NACKs §2.6 prescribes for them (an idle close under CPU load would turn
them all into ``INV_DPDCID``).

Assertions: the loop's exception handler records nothing; the peer's messages arrive intact, each
exactly once; every send completes; the drop / NACK counters moved; ``close()`` finishes.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from tss_e2e_support import config, domain, pair, security

from uet.endpoint import Endpoint, Mode
from uet.link import loopback_addresses
from uet.link.base import Link, ReceiveCallback
from uet.link.direct import DirectLink
from uet.wire.pds import ACK, CONTROL, NACK, REQUEST, REQUEST_SYN, ControlType, NackCode, PdsType, ReqFlag
from uet.wire.ses import STANDARD, SesFlag, SesOpcode

BIG = 60_000  # oversized datagram (UDP on IPv4 carries at most 65507 bytes)
TIMEOUT = 30.0  # generous bound per awaited step: a hang fails the test instead of blocking it


class _TapLink(Link):
    """A direct link that records ``(dst, datagram)`` for everything it transmits.

    A wrapper given to ``Endpoint.open(link=...)`` rather than a patch of ``link.send`` after
    the fact: the endpoint may bind a link's batch method at construction (``send_many``), which a
    later patch would not see. This wrapper keeps the base class's batch method, which hands every
    datagram to :meth:`send`, so every datagram passes here.
    """

    port: int

    def __init__(self, inner: DirectLink) -> None:
        self.inner = inner
        self.address = inner.address
        self.port = inner.port
        self.peer_port = inner.peer_port
        self.sent: list[tuple[str, bytes]] = []

    @property
    def counters(self) -> dict[str, int]:  # type: ignore[override]
        return self.inner.counters

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        self.sent.append((dst, bytes(datagram)))
        self.inner.send(datagram, dst, entropy, dscp, ecn)

    def set_receiver(self, callback: ReceiveCallback) -> None:
        self.inner.set_receiver(callback)

    def close(self) -> None:
        self.inner.close()


class _PlainTap:
    """Under TSS: records the plaintext datagrams the endpoint hands its secure link (at the TSS
    stage's ``seal``, which the per-datagram transmit calls, and ``seal_packed``, the batch's)."""

    def __init__(self, link: Any) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self._seal = link.stage.seal
        self._seal_packed = link.stage.seal_packed
        link.stage.seal = self._tap
        link.stage.seal_packed = self._tap_packed

    def _tap(self, datagram: bytes, dst: str, entropy: int, now: int) -> bytes | None:
        self.sent.append((dst, bytes(datagram)))
        return self._seal(datagram, dst, entropy, now)

    def _tap_packed(self, datagrams: list[tuple[bytes, str, int]], now: int) -> list[Any]:
        self.sent.extend((dst, bytes(d)) for d, dst, _ in datagrams)
        return self._seal_packed(datagrams, now)


async def _open_pair(secure: bool, seed: int, **cfg: Any) -> tuple[Endpoint, Endpoint, _TapLink, _TapLink]:
    """Two FEPs on random 127.x addresses, each over a :class:`_TapLink` (``seed`` and ``cfg``:
    their configurations, as :func:`tss_e2e_support.config` takes them)."""
    # Addresses and port are not seeded: concurrent test runs on one machine must not collide.
    sysrng = random.SystemRandom()
    a, b = loopback_addresses(2, seed=sysrng.getrandbits(32))
    port = 20000 + sysrng.randrange(20000)
    sd = domain() if secure else None
    eps, taps = [], []
    for i, addr in enumerate((a, b)):
        tap = _TapLink(DirectLink(addr, port))
        sec = security(sd) if sd is not None else None
        # PDCs stay open between the phases (no idle close): the forgeries name the live PDC. The
        # strangers never answer a close: the FEPs' closes at the end wait for them only briefly
        # (close_timeout_s, 2 s by default), what the FEPs owe each other closes within it.
        ep_cfg = config(seed + i, **{"close_idle_ns": None, "close_timeout_s": 0.5, **cfg})
        eps.append(await Endpoint.open(addr, port=port, config=ep_cfg, security=sec, link=tap))
        taps.append(tap)
    return eps[0], eps[1], taps[0], taps[1]


@dataclass
class _Attacker:
    """UDP sockets that send to the FEPs' port: one on a stranger's address, one per FEP address
    (spoofing that FEP as the source: same IP, another port; the direct link keys peers by IP)."""

    port: int
    stranger: str
    socks: dict[str, socket.socket] = field(default_factory=dict)
    sent: int = 0

    def sock(self, src: str) -> socket.socket:
        s = self.socks.get(src)
        if s is None:
            s = self.socks[src] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
            s.bind((src, 0))
        return s

    async def fire(self, packets: list[tuple[bytes, str, str]], burst: int = 16, burst_bytes: int = 64 << 10) -> None:
        """Send ``(datagram, src, dst)`` in bursts (``burst`` datagrams or ``burst_bytes``), yielding to
        the loop between bursts so the FEPs read their sockets: a socket buffer that overflowed
        (``net.core.rmem_default`` may be 208 KiB) would be loss, not an attack."""
        n = size = 0
        for data, src, dst in packets:
            self.sock(src).sendto(data, (dst, self.port))
            self.sent += 1
            n += 1
            size += len(data)
            if n >= burst or size >= burst_bytes:
                await asyncio.sleep(0)
                n = size = 0
        await asyncio.sleep(0)

    def close(self) -> None:
        for s in self.socks.values():
            s.close()


def _flip(rng: random.Random, pkt: bytes, upto: int) -> bytes:
    """``pkt`` with 1–3 random bits flipped among its first ``upto`` bytes (PDS and SES headers)."""
    bad = bytearray(pkt)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(min(upto, len(bad)))
        bad[i] ^= 1 << rng.randrange(8)
    return bytes(bad)


def _requests(captured: list[tuple[str, bytes]], syn: bool | None = None) -> list[bytes]:
    """Captured plaintext RUD/ROD requests (SYN or not, or both when ``syn`` is None)."""
    out = []
    for _dst, d in captured:
        if len(d) >= REQUEST.size and d[0] >> 3 in (PdsType.RUD_REQ, PdsType.ROD_REQ):
            if syn is None or bool(d[1] & ReqFlag.SYN) == syn:
                out.append(d)
    return out


def _forged(rng: random.Random, reqs: list[bytes], n: int) -> Iterator[bytes]:
    """Valid-looking requests the PDS must refuse on its own (§2.4, §2.6 steps 1, 3, 5), built
    from captured non-SYN requests: out-of-window PSN (far ahead or far behind), wrong DPDCID,
    wrong SPDCID, the other mode (RUD↔ROD)."""
    for _ in range(n):
        if not reqs:
            return
        pkt = rng.choice(reqs)
        h = REQUEST.decode(pkt)
        kind = rng.randrange(5)
        if kind == 0:
            h = h._replace(psn=(h.psn + rng.randrange(1 << 12, 1 << 31)) & 0xFFFFFFFF)
        elif kind == 1:
            h = h._replace(psn=(h.psn - rng.randrange(1 << 10, 1 << 30)) & 0xFFFFFFFF)
        elif kind == 2:
            h = h._replace(dpdcid=h.dpdcid ^ rng.randrange(1, 1 << 16))
        elif kind == 3:
            h = h._replace(spdcid=h.spdcid ^ rng.randrange(1, 1 << 16))
        else:
            other = PdsType.ROD_REQ if h.type == PdsType.RUD_REQ else PdsType.RUD_REQ
            h = h._replace(type=other)
        yield REQUEST.encode(h) + pkt[REQUEST.size :]


def _orphan_feedback(rng: random.Random, live: set[int], n: int) -> Iterator[bytes]:
    """ACKs, NACKs (every code) and control packets naming PDCs that do not exist."""

    def pdcid() -> int:
        while True:
            v = rng.randrange(1, 1 << 16)
            if v not in live:
                return v

    codes = list(NackCode)
    for _ in range(n):
        kind = rng.randrange(3)
        if kind == 0:
            yield ACK.encode(
                ACK.make(
                    cack_psn=rng.getrandbits(32),
                    ack_psn_offset=rng.randrange(-(1 << 15), 1 << 15),
                    spdcid=pdcid(),
                    dpdcid=pdcid(),
                )
            )
        elif kind == 1:
            yield NACK.encode(
                NACK.make(
                    nack_code=int(rng.choice(codes)), nack_psn=rng.getrandbits(32), spdcid=pdcid(), dpdcid=pdcid(),
                    payload=rng.getrandbits(32),
                )
            )  # fmt: skip
        else:
            yield CONTROL.encode(
                CONTROL.make(
                    ctl_type=int(rng.choice(list(ControlType))), psn=rng.getrandbits(32), spdcid=pdcid(),
                    dpdcid=pdcid(), payload=rng.getrandbits(32),
                )
            )  # fmt: skip


def _garbage(rng: random.Random, captured: list[bytes], n: int) -> Iterator[bytes]:
    """Random bytes (some with a plausible PDS type byte), truncations and bit flips of captured
    packets, and oversized datagrams (random, or a captured header with 60 KB behind it)."""
    for _ in range(n):
        kind = rng.randrange(5)
        if kind == 0 or not captured:
            data = bytearray(rng.randbytes(rng.randrange(0, 1500)))
            if data and rng.random() < 0.5:
                data[0] = (rng.randrange(1, 15) << 3) | (data[0] & 7)
            yield bytes(data)
        elif kind == 1:
            pkt = rng.choice(captured)
            yield pkt[: rng.randrange(len(pkt))]
        elif kind == 2:
            yield _flip(rng, rng.choice(captured), 12 + 44)
        elif kind == 3:
            yield rng.randbytes(BIG)
        else:
            pkt = rng.choice(captured)
            yield pkt[:56] + rng.randbytes(BIG)


def _payloads(rng: random.Random, n: int, tag: int) -> list[bytes]:
    """``n`` distinct messages of 1 B – 20 KB (several packets each at 4 KB payload)."""
    return [bytes([tag, i]) + rng.randbytes(rng.choice([0, 10, 3000, 9000, 20000])) for i in range(n)]


async def _batch(ea: Endpoint, eb: Endpoint, msgs: list[bytes], mode: Mode, rng: random.Random) -> list[bytes]:
    """Send ``msgs`` A→B, each with a fresh random tag, and receive each by its tag.

    Tags, not untagged receives: without TSS a stranger may legitimately deliver its own
    messages (replayed SYNs, §2.3.1), even ones whose SES header claims A as initiator (see
    ``test_recv_source_filter_trusts_the_claimed_initiator``), and an untagged receive binds to the
    first unexpected entry whatever it is (§6.4) — a forged partial message then fails it with
    ``DROPPED`` after the reassembly timeout. A fresh tag is matched by A's message only.
    """
    tags = [rng.getrandbits(64) for _ in msgs]
    futs = [ea.send_nowait(eb.address, m, mode=mode, tag=t) for m, t in zip(msgs, tags, strict=True)]
    got = []
    for t in tags:
        m = await asyncio.wait_for(eb.recv(tag=t), TIMEOUT)
        assert m.source == ea.address
        got.append(bytes(m.data))
    await asyncio.wait_for(asyncio.gather(*futs), TIMEOUT)
    return got


def _diff(got: list[bytes], want: list[bytes]) -> tuple[list[str], list[str]]:
    """(missing, unexpected) messages, described by their 2-byte prefix and length."""
    g, w = list(got), list(want)
    for m in want:
        if m in g:
            g.remove(m)
            w.remove(m)
    return [f"{m[:2].hex()}/{len(m)}" for m in w], [f"{m[:2].hex()}/{len(m)}" for m in g]


def _sum(counters: dict[str, int], prefix: str) -> int:
    return sum(v for k, v in counters.items() if k.startswith(prefix))


MODES = {"rud": Mode.RUD, "rod": Mode.ROD, "rudi": Mode.RUDI}
#: NACK codes the forged requests and control packets draw (§2.6 steps 1, 3, 5; §2.11).
FORGERY_NACKS = ("PSN_OOR_WINDOW", "INV_DPDCID", "PDC_HDR_MISMATCH", "PDC_MODE_MISMATCH", "INVALID_SYN", "UNEXP_EVENT")


@pytest.mark.parametrize("secure", [False, True], ids=["plain", "tss"])
@pytest.mark.parametrize("mode_name", list(MODES))
async def test_transfers_survive_hostile_traffic(mode_name: str, secure: bool) -> None:
    mode = MODES[mode_name]
    seed = 1000 + 10 * list(MODES).index(mode_name) + secure
    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    errors: list[dict] = []
    old_handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    ea, eb, tap_a, tap_b = await _open_pair(secure, seed)
    plain_a = _PlainTap(ea.link) if secure else tap_a  # plaintext requests (PDCIDs, PSNs) under TSS
    stranger = next(a for a in loopback_addresses(3) if a not in (ea.address, eb.address))
    atk = _Attacker(port=tap_b.port, stranger=stranger)
    A, B = ea.address, eb.address
    got: list[bytes] = []
    try:
        # 1. warm-up: the first batch opens the PDC (its packets carry SYN), the second one yields
        # non-SYN requests to forge from; RUDI has no PDC, so RUDI runs two RUD batches as well.
        first: list[bytes] = []
        for i, m in enumerate([mode, mode] + [Mode.RUD, Mode.RUD] * (mode == Mode.RUDI)):
            batch = _payloads(rng, 4, 1 + i)
            got += await _batch(ea, eb, batch, m, rng)
            first += batch
        before_b = eb.counters
        before_a = ea.counters

        # 2. under fire
        wire = [d for _, d in tap_a.sent + tap_b.sent]
        reqs = _requests(plain_a.sent, syn=False)
        assert reqs, "no established-PDC request captured: the forgeries would test nothing"
        live = {REQUEST.decode(p).spdcid for p in reqs} | {REQUEST.decode(p).dpdcid for p in reqs}
        attacks: list[tuple[bytes, str, str]] = []
        for dst in (A, B):
            attacks += [(d, stranger, dst) for d in _garbage(rng, wire, 60)]
            attacks += [(d, stranger, dst) for d in _orphan_feedback(rng, live, 20)]
            spoof = B if dst == A else A
            attacks += [(d, spoof, dst) for d in _orphan_feedback(rng, live, 20)]
            if secure:  # anything at all from the peer's address: TSS must authenticate it away
                attacks += [(d, spoof, dst) for d in _garbage(rng, wire, 40)]
        attacks += [(d, A, B) for d in _forged(rng, reqs, 40)]
        attacks += [(d, stranger, B) for d in _forged(rng, reqs, 20)]
        rng.shuffle(attacks)
        second = _payloads(rng, 8, 8)
        under_fire = asyncio.gather(_batch(ea, eb, second, mode, rng), atk.fire(attacks))
        got += (await asyncio.wait_for(under_fire, TIMEOUT))[0]

        # 3. after the fact: replays of everything captured, more garbage, then a last batch
        replays: list[tuple[bytes, str, str]] = []
        for dst, d in tap_a.sent + tap_b.sent:
            src = A if dst == B else B
            t = d[0] >> 3
            if secure:
                replays.append((d, src, dst))  # sealed: the TSS replay window must refuse them
            elif t in (PdsType.RUD_REQ, PdsType.ROD_REQ) and not d[1] & ReqFlag.SYN:
                replays.append((d, src, dst))  # duplicates on a still-open PDC: never re-delivered
            elif t == PdsType.RUDI_REQ:
                replays.append((d, src, dst))  # RUDI copies: the message layer absorbs duplicates
            replays.append((d, stranger, dst))  # a stranger replaying: its own PDC at most
        replays += [(d, stranger, dst) for dst in (A, B) for d in _garbage(rng, wire, 20)]
        await atk.fire(replays)
        third = _payloads(rng, 4, 9)
        got += await _batch(ea, eb, third, mode, rng)

        # The peer's messages: intact, each exactly once; whatever else arrived came from the stranger.
        assert _diff(got, first + second + third) == ([], [])
        strangers = []
        for tagged in (False, True):
            while (rx := eb.recv_nowait(tag=0 if tagged else None, ignore=~0 if tagged else 0)) is not None:
                strangers.append(rx)
        assert all(s.source == stranger for s in strangers)
        for tagged in (False, True):  # A only sent: at most a stranger's forgery reached it
            while (rx := ea.recv_nowait(tag=0 if tagged else None, ignore=~0 if tagged else 0)) is not None:
                strangers.append(rx)
        assert all(s.source == stranger for s in strangers)
        if secure:
            assert strangers == []  # nothing unauthenticated reached either SES

        # The drops and NACKs were counted, not ignored.
        cb, ca = eb.counters, ea.counters
        if secure:
            assert cb["link_tss_dropped"] - before_b["link_tss_dropped"] > 0
            assert ca["link_tss_dropped"] - before_a["link_tss_dropped"] > 0
            assert cb["link_tss_drop_replay"] > 0  # the replayed sealed packets
            for code in FORGERY_NACKS:  # nothing forged reached the PDS, so nothing forged was NACKed
                assert cb.get("nack_tx_" + code, 0) == before_b.get("nack_tx_" + code, 0), code
        else:
            assert _sum(cb, "drop_") > _sum(before_b, "drop_")
            assert _sum(ca, "drop_") > _sum(before_a, "drop_")
            # §2.6: the forged requests were answered with the prescribed NACKs.
            for code in FORGERY_NACKS[:4]:
                assert cb.get("nack_tx_" + code, 0) > before_b.get("nack_tx_" + code, 0), code
            assert cb.get("duplicates", 0) > before_b.get("duplicates", 0)  # replays: ACKed, not delivered
        assert cb["messages_failed"] == ca["messages_failed"] == 0
    finally:
        atk.close()
        await asyncio.wait_for(asyncio.gather(ea.close(), eb.close()), TIMEOUT)
        loop.set_exception_handler(old_handler)
    assert errors == [], [(e.get("message"), repr(e.get("exception"))) for e in errors]


async def test_recv_source_filter_checks_the_arrival_address() -> None:
    """``recv(source=A)`` promises messages "from ``source`` only"; a stranger replaying A's
    single-packet SYN (no TSS: it opens the stranger's own PDC, §2.3.1) delivers a message whose SES
    header still names A's initiator id. Filtering on the id alone returns it as A's."""
    ea, eb, tap_a, _tap_b = await _open_pair(False, 77)
    stranger = next(a for a in loopback_addresses(3) if a not in (ea.address, eb.address))
    atk = _Attacker(port=tap_a.port, stranger=stranger)
    try:
        await ea.send(eb.address, b"only once", tag=5)
        first = await asyncio.wait_for(eb.recv(tag=5, source=ea.address), TIMEOUT)
        assert first.source == ea.address
        (syn,) = _requests(tap_a.sent, syn=True)
        await atk.fire([(syn, stranger, eb.address)])
        for _ in range(10_000):  # until B has processed the stranger's datagram
            await asyncio.sleep(0)
            if eb.pending_messages:
                break
        assert eb.pending_messages == 1  # B took it: the stranger's own message (its PDC, its address)
        got = eb.recv_nowait(tag=5, source=ea.address)
        assert got is None or got.source == ea.address, got
    finally:
        atk.close()
        await asyncio.wait_for(asyncio.gather(ea.close(), eb.close()), TIMEOUT)


async def test_secure_pdc_reestablishment_adopts_the_closing_epsn() -> None:
    """behaviour.md §2.3.2 (EXPECTED_0RTT_START): on close the target returns ``Expected_PSN`` in the
    closing ACK; the initiator adopts it as ``ini_start_psn`` and starts its next PDC there, so the
    next SYN is accepted at once. Several close / re-open rounds: never a NEW_START_PSN NACK."""
    sd = domain()
    ea, eb = await pair(security(sd), security(sd), seed=11, close_idle_ns=1_000_000)
    loop = asyncio.get_running_loop()
    try:
        for rnd in range(4):
            futs = [ea.send_nowait(eb.address, bytes(9000), tag=i) for i in range(3)]
            for i in range(3):
                await asyncio.wait_for(eb.recv(tag=i), TIMEOUT)
            await asyncio.wait_for(asyncio.gather(*futs), TIMEOUT)
            deadline = loop.time() + TIMEOUT
            while ea.counters["pdcs_closed"] <= rnd and loop.time() < deadline:  # the idle close
                await asyncio.sleep(0.001)
            assert ea.counters["pdcs_closed"] == rnd + 1
        ca, cb = ea.counters, eb.counters
        assert ca.get("epsn_ignored", 0) == 0 and ca.get("epsn_adopted", 0) >= 3
        assert cb.get("nack_tx_NEW_START_PSN", 0) == 0
    finally:
        await asyncio.wait_for(asyncio.gather(ea.close(), eb.close()), TIMEOUT)


async def test_claimed_lengths_cannot_starve_other_messages() -> None:
    """A stranger (no TSS) opens 16 PDCs, each with one first packet of a "64 MiB" send it never
    finishes. A's 3-packet message to B must still arrive — at worst after the claimants'
    reassembly timeout (300 ms here) — rather than fail: §2.6 step 7 makes NO_SES_MSG_AVAIL a
    transient condition the initiator waits out."""
    ea, eb, _ta, tap_b = await _open_pair(False, 21, reassembly_timeout_ns=300_000_000)
    stranger = next(a for a in loopback_addresses(3) if a not in (ea.address, eb.address))
    atk = _Attacker(port=tap_b.port, stranger=stranger)
    try:
        claims = []
        for i in range(16):
            pds = REQUEST_SYN.encode(REQUEST_SYN.make(psn=1 << 20, spdcid=100 + i, psn_offset=0, flags=ReqFlag.SYN))
            ses = STANDARD[(1, "none")].make(
                opcode=SesOpcode.SEND, flags=SesFlag.SOM | SesFlag.REL, message_id=i, job_id=eb.job, pid_on_fep=eb.pid,
                resource_index=eb.resource_index, initiator=7, request_length=64 << 20,
            )  # fmt: skip
            claims.append((pds + STANDARD[(1, "none")].encode(ses) + bytes(4096), stranger, eb.address))
        await atk.fire(claims)
        for _ in range(10_000):  # until B has taken the 16 claims
            await asyncio.sleep(0)
            if eb.counters.get("ses_fast_packets", 0) >= 16:
                break
        msg = bytes(range(256)) * 36  # 9216 bytes: 3 packets
        await asyncio.wait_for(ea.send(eb.address, msg, tag=3), TIMEOUT)
        assert bytes((await asyncio.wait_for(eb.recv(tag=3), TIMEOUT)).data) == msg
    finally:
        atk.close()
        await asyncio.wait_for(asyncio.gather(ea.close(), eb.close()), TIMEOUT)
