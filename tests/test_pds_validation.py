"""Address validation and anti-amplification (uet.pds.validation; issue 29 items 8, 9, 10).

Exact forged packets into a FEP core from addresses that never receive anything, in virtual
time: every reply toward such a source is at most one datagram per datagram it sent and at most
3× its bytes; a SYN flood holds a bounded number of PDCs and never reaches SES past the cap;
honest first contacts (small and large reads, sends) still complete, through the proof exchange.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fep_harness import A_ADDR, B_ADDR, FepPair, decode

from uet.fep import Datagram, FepConfig, FepCore, SendCompleted, Transmit
from uet.pds.config import PdsConfig
from uet.ses import Access
from uet.wire.pds import CONTROL, REQUEST, REQUEST_SYN, ControlType, PdsType, ReqFlag
from uet.wire.ses import STANDARD, SesFlag, SesOpcode

_SOM = STANDARD[(1, "none")]
SPOOFED = "10.0.0.66"


def _ses(core: FepCore, op: int, mid: int, length: int, key: int = 0) -> bytes:
    return _SOM.encode(
        _SOM.make(
            opcode=op, flags=SesFlag.SOM | SesFlag.EOM | SesFlag.REL, message_id=mid, ri_generation=0,
            job_id=core.job, pid_on_fep=core.pid, resource_index=core.resource_index, initiator=7,
            request_length=length, match_bits=key,
        )
    )  # fmt: skip


def _syn(core: FepCore, spdcid: int, psn: int, op: int = SesOpcode.SEND, length: int = 0, key: int = 0,
         payload: bytes = b"", offset: int = 0) -> bytes:  # fmt: skip
    """A SYN request opening PDC ``spdcid`` (``offset``: its place in the first flight, whose
    Start_PSN is ``psn - offset``; each packet a one-packet message of its own)."""
    flags = ReqFlag.SYN | ReqFlag.AR
    pds = REQUEST_SYN.encode(REQUEST_SYN.make(psn=psn, spdcid=spdcid, psn_offset=offset, flags=flags))
    return pds + _ses(core, op, spdcid + offset, length or len(payload), key) + payload


def _target(**pds: Any) -> tuple[FepCore, int]:
    cfg = FepConfig()
    if pds:
        cfg = replace(cfg, pds=replace(cfg.pds, **pds))
    b = FepCore(B_ADDR, job=7, pid=1, config=cfg, seed=4)
    return b, b.register(bytearray(1 << 20), access=Access.ALL).key


def _drive(core: FepCore, items: list[tuple[int, bytes, str]], horizon: int = 20_000_000_000) -> list[Transmit]:
    """Feed ``(time, datagram, source)`` items and run every timer up to ``horizon`` ns."""
    out: list[Transmit] = []
    items = sorted(items, key=lambda x: x[0])
    now = i = 0
    while True:
        cands = [x for x in (items[i][0] if i < len(items) else None, core.get_timer()) if x is not None]
        if not cands or min(cands) > horizon:
            return out
        now = max(now, min(cands))
        batch = []
        while i < len(items) and items[i][0] <= now:
            batch.append(Datagram(items[i][1], items[i][2]))
            i += 1
        if batch:
            core.receive_batch(batch, now)
        t = core.get_timer()
        if t is not None and t <= now:
            core.handle_timer(now)
        out += core.datagrams_to_send(now)


def test_one_forged_read_reflects_at_most_3x() -> None:
    """Item 8: one spoofed 56-byte READ drew 4,340 bytes (13 datagrams) for 4 KiB and 86,844
    bytes (29 datagrams, 1,551×) for 64 KiB toward the address it claimed; now 16 and 124."""
    for length in (4096, 65536):
        b, key = _target()
        req = _syn(b, 99, 1 << 20, SesOpcode.READ, length, key)
        assert len(req) == 56
        out = _drive(b, [(0, req, SPOOFED)])
        assert sum(len(t.data) for t in out) <= 3 * len(req), (length, out)
        # one reply, plus (64 KiB: read data waits) the few proof requests: 16-byte CLEAR_REQs
        asks = [t for t in out if t.data[0] >> 3 == PdsType.CONTROL]
        assert len(out) - len(asks) <= 1 and len(asks) <= b.config.pds.max_clear_req, (length, out)
        assert b.counters()["amp_held"] >= 1  # the response waits for a proof that never comes


def test_each_forged_packet_draws_at_most_one_reply() -> None:
    """Item 9: a forged SYN (send, or a write to a bad key) drew 13 replies (the ACK, five
    CLEAR_REQs, six CLOSE_REQs, a NACK); a packet for an unknown PDC draws its one NACK."""
    b0, _ = _target()
    forged = [
        _syn(b0, 5, 1000, payload=bytes(64)),
        _syn(b0, 6, 2000, SesOpcode.WRITE, key=12345, payload=b"x" * 8),
        REQUEST.encode(REQUEST.make(psn=5, spdcid=5, dpdcid=4242, flags=ReqFlag.AR)) + _ses(b0, SesOpcode.SEND, 1, 8),
        CONTROL.encode((11, ControlType.ACK_REQ, 0, 0, 7, 5, 4243, 0)),
    ]
    for pkt in forged:
        b, _ = _target()
        out = _drive(b, [(0, pkt, SPOOFED)])
        assert len(out) <= 1 and sum(len(t.data) for t in out) <= 3 * len(pkt), (decode(pkt), out)
        assert all(t.destination == SPOOFED for t in out)


def test_syn_flood_from_many_sources_bounded_replies_and_state() -> None:
    """Item 9: a SYN flood from 50 sources drew 13 replies per packet, also with 9,000-byte
    datagrams; now at most one, and never more than one per source's unverified PDC cap."""
    for size in (64, 9000):
        b, _ = _target(unverified_pdc_rate=1_000_000)  # (the total rate of new PDCs: the next test)
        items = [(k * 100_000, _syn(b, 1 + k, 5000 + 7 * k, payload=bytes(size)), f"10.0.1.{k % 50 + 1}")
                 for k in range(1000)]  # fmt: skip
        out = _drive(b, items)
        per: dict[str, int] = {}
        for t in out:
            per[t.destination] = per.get(t.destination, 0) + 1
        assert max(per.values()) <= b.config.pds.unverified_pdcs_per_source  # of 20 SYNs each
        assert sum(len(t.data) for t in out) <= 3 * sum(len(x[1]) for x in items)
        assert b.counters()["drop_unverified_syn"] == 1000 - 50 * b.config.pds.unverified_pdcs_per_source
        assert len(b.pds.pdcs) == 0  # idle unverified PDCs are freed silently, with no CLOSE_REQ
    # the total cap: the oldest unverified PDC makes way
    b, _ = _target(unverified_pdcs=256, unverified_pdc_rate=1_000_000)
    items = [(k * 100_000, _syn(b, 1 + k, 5000 + 7 * k), f"10.0.1.{k % 50 + 1}") for k in range(1000)]
    out = _drive(b, items, horizon=items[-1][0])
    assert len(b.pds.pdcs) == 256 and b.counters()["unverified_pdc_evicted"] == 1000 - 256


def test_syn_flood_from_one_source_never_reaches_ses_past_the_cap() -> None:
    """Item 10: 10,000 SYNs at 10,000/s from one source each created a PDC and an SES message
    (≈ 66 µs of CPU each), filled the 4,096-PDC table and drew 28,672 replies after the flood.
    Now the source holds ``unverified_pdcs_per_source`` PDCs and the rest are dropped before
    SES, while a verified peer opens PDCs as before."""
    b, _ = _target()
    cap = b.config.pds.unverified_pdcs_per_source
    items = [(k * 100_000, _syn(b, 1 + k, 9000 + k, payload=bytes(1024)), SPOOFED) for k in range(5_000)]
    items.append((250_000_000, _syn(b, 7, 77, payload=b"honest"), A_ADDR))
    b.pds.guard.trust(A_ADDR)  # type: ignore[union-attr]  # (A proved itself earlier)
    out = _drive(b, items, horizon=600_000_000)
    c = b.counters()
    assert c["drop_unverified_syn"] == 5_000 - cap
    assert c["ses_fast_packets"] + c.get("ses_packets", 0) <= cap + 1
    assert sum(t.destination == SPOOFED for t in out) <= cap
    assert [decode(t).sections[0][1].type for t in out if t.destination == A_ADDR][0] == PdsType.ACK_CC
    assert b.pending_messages == cap + 1


def test_honest_first_contact_reads_and_sends_complete() -> None:
    """A fresh initiator's read (each 4 KiB rides in the ACK of a 56-byte request, 74×) gets a
    CLEAR_REQ in place of each ACK, proves itself with a CLEAR, then gets the held ACKs; a send
    (its ACK is small) completes at once."""
    for n in (4096, 65536):
        pair = FepPair(seed=3)
        buf = bytes(range(256)) * (n // 256)
        key = pair.b.core.register(bytearray(buf), access=Access.ALL).key
        h = pair.a.core.read(B_ADDR, key, 0, n)
        assert pair.complete(pair.a, h, max_ns=100_000_000) == [buf]
        first = decode(pair.sent_by(pair.b)[0]).sections[0][1]
        assert first.type == PdsType.CONTROL and first.ctl_type == ControlType.REQ_CLEAR
        c = pair.b.core.counters()
        assert c["verified"] == 1 and c["amp_released"] == c["amp_held"] == n // 4096
    pair = FepPair(seed=4)
    h = pair.a.core.send(B_ADDR, b"hello")
    r = pair.b.core.post_recv(None)
    pair.complete(pair.a, h, max_ns=10_000_000)
    assert pair.complete(pair.b, r, max_ns=10_000_000)[0].data == b"hello"


def test_a_guessed_pdcid_proves_nothing_after_the_strikes() -> None:
    """The proof is the PDCID we chose (16 bits): a source that named wrong PDCs
    ``proof_strikes`` times can no longer prove itself, so spraying PDCIDs does not verify a
    victim's address."""
    b, key = _target()
    items: list[tuple[int, bytes, str]] = [(0, _syn(b, 99, 1 << 20, SesOpcode.READ, 65536, key), SPOOFED)]
    _drive(b, items, horizon=0)
    (tp,) = [p for p in b.pds.pdcs.values() if p.role == "target"]
    strikes = b.config.pds.proof_strikes
    guesses = [x for x in range(1, 0x10000) if x != tp.lpdcid][:strikes]
    clear = [CONTROL.encode((11, ControlType.CLEAR, 0, 0, 0, 99, g, 0)) for g in guesses]
    clear.append(CONTROL.encode((11, ControlType.CLEAR, 0, 0, 0, 99, tp.lpdcid, 0)))  # the right one, too late
    out = _drive(b, [(1000 + i, c, SPOOFED) for i, c in enumerate(clear)], horizon=1_000_000)
    assert b.counters().get("verified", 0) == 0
    assert sum(len(t.data) for t in out) <= 3 * sum(map(len, clear))


def _muted_target(**pds: int) -> FepCore:
    """A target the spoofed source already holds its cap of unverified PDCs on."""
    b, _ = _target(**pds)
    cap = b.config.pds.unverified_pdcs_per_source
    b.receive_batch([Datagram(_syn(b, 1 + k, 9000 + k, payload=bytes(64)), SPOOFED) for k in range(cap)], 0)
    assert b.pds.guard is not None and SPOOFED in b.pds.guard.muted
    return b


def test_a_flood_is_screened_from_a_batch_and_the_established_traffic_in_it_goes_on() -> None:
    """Item 10: a muted source's SYNs leave a received batch before any decoding (one set lookup
    each, ``SourceGuard.screen``; in-core cost ≈ 0.75 µs per flood packet against 2.1 before),
    and the honest packets of the same batch — an established PDC's — are delivered as without
    the flood."""
    pair = FepPair(seed=5)
    a, b = pair.a, pair.b.core
    assert pair.complete(a, a.core.send(B_ADDR, b"hello")) == [None]
    cap = b.config.pds.unverified_pdcs_per_source
    b.receive_batch([Datagram(_syn(b, 1 + k, 9000 + k, payload=bytes(64)), SPOOFED) for k in range(cap)], pair.now)
    honest: list[bytes] = []

    def hold_honest(t: Transmit, src: str) -> list[bytes]:
        if src != A_ADDR:
            return [t.data]
        honest.append(t.data)
        return []

    pair.filter = hold_honest
    data = bytes(range(256)) * 80  # five 4 KiB packets
    h = a.core.send(B_ADDR, data)
    pair.run_until(lambda: len(honest) >= 5, max_ns=1_000_000)
    pair.filter = None
    flood = [Datagram(_syn(b, 100 + k, 20_000 + k, payload=bytes(1024)), SPOOFED) for k in range(500)]
    batch = flood[:100] + [Datagram(d, A_ADDR) for d in honest] + flood[100:]
    pdcs, before = len(b.pds.pdcs), b.counters().get("drop_unverified_syn", 0)
    b.receive_batch(batch, pair.now)
    assert b.counters()["drop_unverified_syn"] - before == 500
    assert len(b.pds.pdcs) == pdcs and b.pending_messages == cap + 2  # the cap, hello and data
    assert pair.complete(a, h) == [None]
    got = []
    while (m := b.recv_nowait()) is not None:
        got.append(bytes(m.data))
    assert got.count(b"hello") == 1 and got.count(data) == 1 and len(got) == cap + 2


def test_the_batch_screen_and_the_per_datagram_check_agree() -> None:
    """The screen is the per-datagram check of ``PdsCore.receive_datagram`` written for a batch:
    the same flood, with SYN retransmissions for PDCs the source holds and non-SYN packets among
    it, leaves both cores with the same counters, PDCs and replies."""
    cores = [_muted_target(), _muted_target()]
    b = cores[0]
    cap = b.config.pds.unverified_pdcs_per_source
    items = [_syn(b, 1 + k % (2 * cap), 30_000 + k, payload=bytes(32)) for k in range(200)]
    items += [REQUEST.encode(REQUEST.make(psn=5, spdcid=3, dpdcid=77, flags=0)) + bytes(8)]
    cores[0].receive_batch([Datagram(d, SPOOFED) for d in items], 1000)
    for d in items:
        cores[1].pds.receive_datagram(d, 1000, source=SPOOFED)
    outs = [[(t.destination, t.data) for t in c.datagrams_to_send(1000)] for c in cores]
    assert outs[0] == outs[1]
    assert cores[0].counters() == cores[1].counters()
    assert sorted(cores[0].pds.target_by_peer) == sorted(cores[1].pds.target_by_peer)


def test_new_pdcs_of_unverified_sources_are_rate_limited_in_all() -> None:
    """Item 10: a flood from many spoofed sources, each under its own cap, bought a PDC and an SES
    message per packet; new unverified PDCs are now ``unverified_pdc_rate`` per second in all
    (burst ``unverified_pdc_burst``), while a verified peer opens PDCs as before."""
    b, _ = _target()
    cfg = b.config.pds
    n = cfg.unverified_pdc_burst + 1000  # the default burst admits an honest incast of the cap: flood beyond it
    items = [(k * 5_000, _syn(b, 1 + k, 5000 + k), f"10.1.{k >> 8}.{k & 0xFF}") for k in range(n)]
    items.append((n * 5_000, _syn(b, 7, 77, payload=b"honest"), A_ADDR))
    b.pds.guard.trust(A_ADDR)  # type: ignore[union-attr]  # (A proved itself earlier)
    _drive(b, items, horizon=n * 5_000)
    opened = b.counters()["pdc_open_target"]
    assert opened <= cfg.unverified_pdc_burst + cfg.unverified_pdc_rate * n * 5_000 // 10**9 + 1 + 1
    assert b.counters()["drop_unverified_pdc_rate"] >= n - opened > 900  # the flood beyond the burst: dropped
    assert any(p.peer == A_ADDR for p in b.pds.pdcs.values())


def _honest_incast(n: int, size: int, cfg: FepConfig | None = None, delay_ns: int = 1_000) -> FepCore:
    """``n`` honest senders, none ever heard of before by the receiver B, each send one message
    of ``size`` bytes to B at time 0 (an incast's simultaneous first contact), over a link of
    ``delay_ns`` each way; runs in virtual time until every send completed. Returns B."""
    b = FepCore(B_ADDR, job=7, pid=1, config=cfg, seed=4)
    senders = [FepCore(f"10.2.{k >> 8}.{k & 0xFF}", job=7, pid=1, config=cfg, seed=10 + k) for k in range(n)]
    by_addr = {c.address: c for c in (b, *senders)}
    handles = {c.address: c.send(B_ADDR, bytes([k & 0xFF]) * size) for k, c in enumerate(senders)}
    done: set[str] = set()
    flight: list[tuple[int, str, Datagram]] = []
    now = 0
    while len(done) < n:
        for c in by_addr.values():
            flight += [(now + delay_ns, t.destination, Datagram(t.data, c.address)) for t in c.datagrams_to_send(now)]
            while (ev := c.next_event()) is not None:
                if isinstance(ev, SendCompleted) and ev.handle == handles.get(c.address):
                    assert c.address not in done
                    done.add(c.address)
        timers = [t for c in by_addr.values() if (t := c.get_timer()) is not None]
        nxt = min([at for at, _d, _g in flight] + timers, default=None)
        assert nxt is not None and nxt < 1_000_000_000, f"{n - len(done)} sends stalled"
        now = max(now, nxt)
        batches: dict[str, list[Datagram]] = {}
        for item in [x for x in flight if x[0] <= now]:
            batches.setdefault(item[1], []).append(item[2])
        flight = [x for x in flight if x[0] > now]
        for dst, batch in batches.items():
            by_addr[dst].receive_batch(batch, now)
        for c in by_addr.values():
            if (t := c.get_timer()) is not None and t <= now:
                c.handle_timer(now)
    return b


def test_an_honest_incast_up_to_the_unproven_cap_is_admitted_at_once() -> None:
    """An incast is every sender's first contact at once: the defaults admit as many as the
    unproven-PDC cap (``unverified_pdcs``, 1,024) with no SYN dropped by the new-PDC rate limit
    and no reply lost to the total reply budget — with a burst of 64, 127 senders took 64 PDCs
    and the other 63 spent the run in RTO loops. Every message arrives exactly once."""
    n = PdsConfig().unverified_pdcs
    b = _honest_incast(n, 64)
    c = b.counters()
    assert c["pdc_open_target"] == n and c["verified"] == n
    assert not c.get("drop_unverified_pdc_rate") and not c.get("amp_dropped") and not c.get("drop_unverified_syn")
    got: list[bytes] = []
    while (m := b.recv_nowait()) is not None:
        got.append(bytes(m.data))
    assert sorted(got) == sorted(bytes([k & 0xFF]) * 64 for k in range(n))


def test_the_first_flights_of_an_incast_up_to_the_cap_draw_their_replies_at_once() -> None:
    """Until its first ACK comes back, an honest initiator's whole first flight carries SYN and
    proves nothing: an incast of ``unverified_pdcs`` first contacts, 8 packets each and an ACK
    per packet, is 8,192 replies to unverified sources at once. The total reply budget's burst
    (``unverified_total_burst``, 4,096 before) held and dropped them; now none waits."""
    b, _ = _target(ack_per_pkt=True)
    n, flight = b.config.pds.unverified_pdcs, 8
    items = [(k, _syn(b, 1, 5000 + 100 * k + j, payload=b"x", offset=j), f"10.2.{k >> 8}.{k & 0xFF}")
             for k in range(n) for j in range(flight)]  # fmt: skip
    out = _drive(b, items, horizon=n)
    c = b.counters()
    assert not c.get("amp_held") and not c.get("amp_dropped") and not c.get("drop_unverified_pdc_rate")
    assert len(out) == n * flight and c["delivered"] == n * flight  # an ACK per packet, each message once


def test_the_guard_keeps_the_configurations_limits() -> None:
    """SourceGuard reads the limits it applies per reply from its own fields, taken from the
    configuration it was made with."""
    from uet.pds.validation import SourceGuard

    cfg = PdsConfig(amp_factor=5, unverified_reply_burst=7, unverified_reply_rate=11, unverified_total_burst=13,
                    unverified_total_rate=17, unverified_pdcs_per_source=3)  # fmt: skip
    g = SourceGuard(cfg, lambda *a: None)
    assert (g._amp, g._reply_burst, g._reply_rate, g._total_burst, g._total_rate, g._per_source) == (
        5, 7, 11, 13, 17, 3,
    )  # fmt: skip
    g.credit("10.0.0.9", 100, 0)
    for lp in range(3):
        assert not g.at_cap("10.0.0.9")
        g.add_pdc("10.0.0.9", lp)
    assert g.at_cap("10.0.0.9") and "10.0.0.9" in g.muted
