"""The sans-I/O FEP core, driven in memory (tests/fep_harness.py): every public operation, with
the exact packets it puts on the wire, under a fake clock and seeded impairments."""

from __future__ import annotations

import pytest
from fep_harness import A_ADDR, B_ADDR, FepPair, decode, pds_of, ses_of

from uet.fep import (
    Closed,
    Datagram,
    DeliveryError,
    EndpointClosed,
    FepConfig,
    FepCore,
    MessageReceived,
    OpFailed,
    Peer,
    SendCompleted,
    Transmit,
)
from uet.fep.marking import DSCP_CONTROL, DSCP_DATA
from uet.pds import Mode, PdsConfig
from uet.ses.errors import BadMkey, Cancelled, TooLong
from uet.ses.memory import Access
from uet.tss import SdMode, SecureDomain, SecureDomainTable
from uet.wire.pds import ControlType, PdsType
from uet.wire.ses import AmoOp, AmoType, SesFlag, SesOpcode


def _requests(pair: FepPair, node) -> list:
    """Decoded request packets ``node`` sent (PDS request types)."""
    out = []
    for t in pair.sent_by(node):
        k = decode(t)
        if k.ses is not None and t.data[0] >> 3 in (
            PdsType.RUD_REQ,
            PdsType.ROD_REQ,
            PdsType.RUDI_REQ,
            PdsType.UUD_REQ,
        ):
            out.append((t, k))
    return out


def _opcodes(pair: FepPair, node) -> list[int]:
    return [k.ses.opcode for _t, k in _requests(pair, node)]


def test_send_exact_packets_dscp_and_completion() -> None:
    p = FepPair(seed=1)
    data = bytes(range(256)) * 40  # 10240 bytes: 3 packets of 4096
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, data)
    (msg,) = p.complete(p.b, r)
    p.complete(p.a, h)
    assert bytes(msg.data) == data and msg.source == A_ADDR and msg.tag is None
    reqs = _requests(p, p.a)
    assert [k.ses.opcode for _t, k in reqs] == [SesOpcode.SEND] * 3
    assert [k.ses.message_id for _t, k in reqs] == [reqs[0][1].ses.message_id] * 3
    assert reqs[0][1].ses.request_length == len(data)
    assert [(t.dscp, t.ecn) for t, _k in reqs] == [(DSCP_DATA, 0)] * 3
    acks = [t for t in p.sent_by(p.b)]
    assert acks and all(t.dscp == DSCP_CONTROL and t.ecn == 0 for t in acks)
    # the receive waited: the completing response says "expected list" (list 0, §6.4)
    resp = [ses_of(t) for t in acks if ses_of(t) is not None]
    assert resp and resp[-1].list == 0 and resp[-1].modified_length == len(data)
    assert isinstance(p.a.done[h], SendCompleted)
    c = p.a.core.counters()
    assert c["messages_sent"] == 1 and c["bytes_sent"] == len(data)


def test_unexpected_message_is_reported_on_the_overflow_list() -> None:
    p = FepPair(seed=2)
    h = p.a.core.send(B_ADDR, b"early")
    p.complete(p.a, h)
    resp = [ses_of(t) for t in p.sent_by(p.b) if ses_of(t) is not None]
    assert resp[-1].list == 1  # no receive waited: overflow (unexpected) list
    assert p.b.core.pending_messages == 1
    m = p.b.core.recv_nowait()
    assert m is not None and bytes(m.data) == b"early"
    assert p.b.core.recv_nowait() is None


def test_tagged_send_into_posted_buffer_and_too_long() -> None:
    p = FepPair(seed=3)
    buf = bytearray(100)
    r = p.b.core.post_recv(buf, tag=0x1234)
    small = p.b.core.post_recv(bytearray(4), tag=0x99)
    h1 = p.a.core.send(B_ADDR, b"tagged!", tag=0x1234)
    h2 = p.a.core.send(B_ADDR, b"too long for four", tag=0x99)
    (m,) = p.complete(p.b, r)
    assert bytes(m.data) == b"tagged!" and m.tag == 0x1234 and bytes(buf[:7]) == b"tagged!"
    assert p.run_until(lambda: small in p.b.done and h1 in p.a.done and h2 in p.a.done)
    with pytest.raises(TooLong):
        p.b.value(small)
    reqs = _requests(p, p.a)
    assert [k.ses.opcode for _t, k in reqs] == [SesOpcode.TAGGED_SEND] * 2
    assert [k.ses.match_bits for _t, k in reqs] == [0x1234, 0x99]


def test_cancel_posted_and_bufferless_receives() -> None:
    p = FepPair(seed=4)
    r1 = p.b.core.post_recv(bytearray(10), tag=5)
    r2 = p.b.core.post_recv(None, tag=6)
    assert p.b.core.cancel(r1) and p.b.core.cancel(r2)
    assert not p.b.core.cancel(r1) or r1 in p.b.done
    p.run_until(lambda: r1 in p.b.done and r2 in p.b.done, max_ns=1_000_000)
    for r in (r1, r2):
        assert isinstance(p.b.done[r], OpFailed)
        with pytest.raises(Cancelled):
            p.b.value(r)
    # a message sent afterwards is not taken by the cancelled receives
    h = p.a.core.send(B_ADDR, b"later", tag=6)
    p.complete(p.a, h)
    assert p.b.core.recv_nowait(tag=6) is not None


def test_write_read_atomic_compare_swap_exact_opcodes() -> None:
    p = FepPair(seed=5)
    mem = bytearray(64)
    mr = p.b.core.register(mem, Access.REMOTE_READ | Access.REMOTE_WRITE | Access.REMOTE_ATOMIC)
    hw = p.a.core.write(B_ADDR, mr.key, 8, b"\x05" + bytes(7), header_data=0xABC)
    p.complete(p.a, hw)
    assert mem[8] == 5 and p.b.writes and p.b.writes[0].header_data == 0xABC
    hr = p.a.core.read(B_ADDR, mr.key, 8, 8)
    into = bytearray(8)
    hr2 = p.a.core.read(B_ADDR, mr.key, 8, 8, into=into)
    data, view = p.complete(p.a, hr, hr2)
    assert bytes(data) == b"\x05" + bytes(7) and bytes(view) == bytes(into) == bytes(data)
    ha = p.a.core.atomic(B_ADDR, mr.key, 8, AmoOp.SUM, AmoType.UINT64, 10, fetch=True)
    (old,) = p.complete(p.a, ha)
    assert old == 5 and int.from_bytes(mem[8:16], "little") == 15
    hc = p.a.core.compare_swap(B_ADDR, mr.key, 8, AmoType.UINT64, 15, 99)
    (old2,) = p.complete(p.a, hc)
    assert old2 == 15 and int.from_bytes(mem[8:16], "little") == 99
    hbad = p.a.core.read(B_ADDR, mr.key + 1, 0, 8)
    p.run_until(lambda: hbad in p.a.done)
    with pytest.raises(BadMkey):
        p.a.value(hbad)
    ops = _opcodes(p, p.a)
    assert ops[:5] == [SesOpcode.WRITE, SesOpcode.READ, SesOpcode.READ, SesOpcode.FETCHING_ATOMIC,
                       SesOpcode.FETCHING_ATOMIC]  # fmt: skip
    with pytest.raises(ValueError):
        p.a.core.compare_swap(B_ADDR, mr.key, 0, AmoType.UINT64, 1, 2, op=AmoOp.SUM)


def test_rendezvous_and_deferrable_sends() -> None:
    cfg = FepConfig(rendezvous_threshold=16384, eager_length=4096, deferrable_threshold=None, seed=6)
    p = FepPair(cfg, seed=6)
    big = bytes(range(256)) * 200  # 51200 bytes
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, big)
    (m,) = p.complete(p.b, r)
    p.complete(p.a, h)
    assert bytes(m.data) == big
    assert SesOpcode.RENDEZVOUS_SEND in _opcodes(p, p.a)
    assert SesOpcode.READ in _opcodes(p, p.b)  # the target reads the rest (§6.6)
    # deferrable, forced: the target defers (no buffer posted) and asks with an RTR later
    h2 = p.a.core.send(B_ADDR, big[:20000], protocol="deferrable", tag=3)
    p.run_until(lambda: False, max_ns=2_000_000)
    r2 = p.b.core.post_recv(bytearray(20000), tag=3)
    (m2,) = p.complete(p.b, r2)
    p.complete(p.a, h2)
    assert bytes(m2.data) == big[:20000]
    assert SesOpcode.DEFERRABLE_TSEND in _opcodes(p, p.a)
    assert SesOpcode.DEFERRABLE_RTR in _opcodes(p, p.b)


@pytest.mark.parametrize("mode", [Mode.RUD, Mode.ROD, Mode.RUDI, Mode.UUD])
def test_modes_and_pds_types(mode: Mode) -> None:
    p = FepPair(seed=7)
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, b"m" * 9000, mode=mode)
    (m,) = p.complete(p.b, r)
    p.complete(p.a, h)
    assert bytes(m.data) == b"m" * 9000
    want = {Mode.RUD: PdsType.RUD_REQ, Mode.ROD: PdsType.ROD_REQ, Mode.RUDI: PdsType.RUDI_REQ,
            Mode.UUD: PdsType.UUD_REQ}[mode]  # fmt: skip
    assert {t.data[0] >> 3 for t, _k in _requests(p, p.a)} == {want}


def test_ecn_capable_marks_requests_ect0_only() -> None:
    p = FepPair(FepConfig(ecn_capable=True), seed=8)
    h = p.a.core.send(B_ADDR, b"x" * 5000)
    p.complete(p.a, h)
    assert {(t.dscp, t.ecn) for t, _k in _requests(p, p.a)} == {(DSCP_DATA, 2)}
    assert {(t.dscp, t.ecn) for t in p.sent_by(p.b)} == {(DSCP_CONTROL, 0)}


def test_impaired_link_delivers_every_message_intact() -> None:
    cfg = FepConfig(seed=9, pds=PdsConfig(rto_ns=2_000_000))
    p = FepPair(cfg, seed=9, loss=0.05, dup=0.05, reorder=0.2)
    msgs = [bytes([i]) * (1000 + 3000 * i) for i in range(8)]
    hs = [p.a.core.send(B_ADDR, m, tag=i) for i, m in enumerate(msgs)]
    rs = [p.b.core.post_recv(None, tag=i) for i in range(8)]
    got = p.complete(p.b, *rs, max_ns=60_000_000_000)
    p.complete(p.a, *hs, max_ns=60_000_000_000)
    assert [bytes(m.data) for m in got] == msgs


def test_corruption_never_crashes_or_hangs() -> None:
    """Flipped bits (no UDP checksum in memory): a corrupted header is dropped or NACKed, a
    corrupted payload may arrive as data; every operation still completes one way or the other."""
    cfg = FepConfig(seed=16, pds=PdsConfig(rto_ns=2_000_000))
    p = FepPair(cfg, seed=16, corrupt=0.05, loss=0.02)
    hs = [p.a.core.send(B_ADDR, bytes([i]) * 7000, tag=i) for i in range(6)]
    assert p.run_until(lambda: all(h in p.a.done for h in hs), max_ns=60_000_000_000)
    assert p.a.core.counters()["messages_sent"] + p.a.core.counters()["messages_failed"] == 6


def test_same_seed_same_bytes() -> None:
    def run() -> list[bytes]:
        p = FepPair(seed=10, loss=0.1)
        h = p.a.core.send(B_ADDR, b"d" * 20000)
        p.complete(p.a, h)
        return [t.data for _at, _s, t in p.wire]

    assert run() == run()


def test_reassembly_expiry_is_a_core_timer() -> None:
    cfg = FepConfig(reassembly_timeout_ns=50_000_000, housekeeping_s=0.01, seed=11)
    p = FepPair(cfg, seed=11)
    r = p.b.core.post_recv(None)
    # drop the last packet of the message for good: its partial reassembly must expire
    p.filter = lambda t, src: [] if src == A_ADDR and ses_of(t) and ses_of(t).flags & 0x2 else [t.data]
    h = p.a.core.send(B_ADDR, b"z" * 10000, mode=Mode.UUD)
    p.run_until(lambda: p.b.core.counters().get("ses_fast_expired", 0) == 1, max_ns=1_000_000_000)
    assert p.b.core.counters()["ses_fast_expired"] == 1
    assert h in p.a.done and r not in p.b.done
    # nothing held any more once the completed-id memory ages out: no sweep deadline is left
    assert p.run_until(lambda: p.b.core.get_timer() is None, max_ns=20_000_000_000)


def test_close_sequence_emits_closed_and_fails_what_is_pending() -> None:
    p = FepPair(seed=12)
    h = p.a.core.send(B_ADDR, b"before close")
    r = p.a.core.post_recv(None)  # never satisfied
    p.a.core.close(p.now)
    with pytest.raises(EndpointClosed):
        p.a.core.send(B_ADDR, b"after")
    assert p.run_until(lambda: p.a.closed is not None)
    assert isinstance(p.a.done[h], SendCompleted)  # queued work finished first
    assert isinstance(p.a.done[r], OpFailed) and isinstance(p.a.done[r].error, EndpointClosed)
    assert p.a.closed == Closed(graceful=True)
    ctl = [pds_of(t) for t in p.sent_by(p.a) if t.data[0] >> 3 == PdsType.CONTROL]
    assert any(c.ctl_type == ControlType.CLOSE for c in ctl)
    assert p.a.core.get_timer() is None and p.a.core.datagrams_to_send(p.now) == []
    with pytest.raises(EndpointClosed):
        p.a.core.post_recv(None)


def test_close_times_out_when_the_peer_is_gone() -> None:
    p = FepPair(FepConfig(close_timeout_s=0.05, seed=13), seed=13)
    h = p.a.core.send(B_ADDR, b"x")
    p.filter = lambda t, src: []  # the peer never answers
    p.a.core.close(p.now)
    assert p.run_until(lambda: p.a.closed is not None, max_ns=1_000_000_000)
    assert p.a.closed == Closed(graceful=False)
    assert isinstance(p.a.done[h].error, EndpointClosed)
    assert p.now <= 60_000_000


def test_refusals_raise_at_once() -> None:
    core = FepCore(A_ADDR, job=1, pid=1, config=FepConfig(max_message=1000))
    with pytest.raises(DeliveryError):
        core.send(B_ADDR, bytes(1001))
    with pytest.raises(ValueError):
        core.send("not an address", b"x")


def test_secure_pair_seals_every_datagram_and_drops_tampering() -> None:
    sd = SecureDomain.generate(0x51, SdMode.CLUSTER)
    sa, sb = SecureDomainTable([sd.provision()]), SecureDomainTable([sd.provision()])
    p = FepPair(seed=14, security_a=sa, security_b=sb)
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, b"secret" * 2000)
    (m,) = p.complete(p.b, r)
    p.complete(p.a, h)
    assert bytes(m.data) == b"secret" * 2000
    assert all(t.data[0] >> 3 == PdsType.TSS for _at, _s, t in p.wire)
    assert b"secretsecret" not in b"".join(t.data for _at, _s, t in p.wire)
    # a flipped bit anywhere: dropped silently, counted, never reaches PDS
    t0 = p.sent_by(p.a)[0]
    bad = bytearray(t0.data)
    bad[-1] ^= 1
    before = p.b.core.counters()
    p.b.core.receive_datagram(bytes(bad), p.now, source=A_ADDR, source_port=t0.entropy)
    after = p.b.core.counters()
    assert after["tss_dropped"] == before["tss_dropped"] + 1
    assert p.b.core.datagrams_to_send(p.now) == []
    # the datagram as sent, replayed: dropped as a replay
    p.b.core.receive_datagram(t0.data, p.now, source=A_ADDR, source_port=t0.entropy)
    assert p.b.core.counters()["tss_dropped"] == before["tss_dropped"] + 2


def test_transmit_and_datagram_records() -> None:
    t = Transmit(b"x", B_ADDR, 5, 46, 0)
    assert t.data == b"x" and t.destination == B_ADDR and t.entropy == 5 and t.dscp == 46
    p = FepPair(seed=15)
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, b"via receive_datagram")
    for t in p.a.core.datagrams_to_send(0):
        p.b.core.receive_datagram(t.data, 1000, source=A_ADDR, ecn=t.ecn, source_port=t.entropy)
    for t in p.b.core.datagrams_to_send(1000):
        p.a.core.receive_datagram(t.data, 2000, source=B_ADDR)
    p.a.core.datagrams_to_send(2000)
    p.a.drain()
    p.b.drain()
    assert isinstance(p.b.done[r], MessageReceived) and isinstance(p.a.done[h], SendCompleted)


def test_rudi_send_across_a_receiver_restart_fails_instead_of_succeeding() -> None:
    """Issue 15 item 2: a RUDI send whose receiver restarted mid-message completed OK — the
    restarted receiver answered the later packets of a message it did not know, and nothing
    was delivered. A RUDI message now needs the target's completing RC_OK response."""
    from fep_harness import Node

    from uet.fep import FepCore
    from uet.fep.errors import DeliveryError

    p = FepPair(FepConfig(max_inflight=4), seed=12)
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, bytes(range(256)) * 160, mode=Mode.RUDI)  # 40 KiB: 10 packets
    assert p.run_until(lambda: len(p.sent_by(p.b)) >= 3)  # B answered the first packets
    assert p.b.result(r) is None
    p.b = Node(FepCore(B_ADDR, job=7, pid=1, seed=99))  # B restarts: its reassembly state is gone
    p.b.core.post_recv(None)
    assert p.run_until(lambda: p.a.result(h) is not None, max_ns=60_000_000_000)
    ev = p.a.result(h)
    assert isinstance(ev, OpFailed) and isinstance(ev.error, DeliveryError), ev
    assert "confirmed" in str(ev.error)
    # an honest RUDI send to the restarted receiver still completes
    h2 = p.a.core.send(B_ADDR, b"after" * 2000, mode=Mode.RUDI)
    p.complete(p.a, h2)
    assert isinstance(p.a.result(h2), SendCompleted)


def test_hostile_datagrams_are_counted_and_dropped_never_raised() -> None:
    """Random bytes, truncated and bit-flipped copies of real packets, trimmed marks: the core
    never raises, answers at most with NACKs/ACKs, and the pair still works afterwards."""
    import random

    p = FepPair(seed=17)
    h = p.a.core.send(B_ADDR, b"warm-up" * 100)
    p.complete(p.a, h)
    real = [t.data for _at, _s, t in p.wire]
    rng = random.Random(17)
    junk = [rng.randbytes(rng.randrange(0, 200)) for _ in range(300)]
    for d in real:
        junk += [
            d[: rng.randrange(len(d))],
            bytes(b ^ (1 << rng.randrange(8)) if rng.random() < 0.05 else b for b in d),
        ]
    for i, d in enumerate(junk):
        node = p.b if i % 2 else p.a
        node.core.receive_batch([Datagram(d, A_ADDR if node is p.b else B_ADDR, ecn=i & 3, trimmed=i % 7 == 0)], p.now)
        out = node.core.datagrams_to_send(p.now)
        assert len(out) <= 2
        node.drain()
    r = p.b.core.post_recv(None, tag=9)
    h2 = p.a.core.send(B_ADDR, b"after the storm", tag=9)
    (m,) = p.complete(p.b, r)
    assert bytes(m.data) == b"after the storm"
    p.complete(p.a, h2)


def test_get_timer_is_now_while_submitted_work_waits_for_a_pump() -> None:
    core = FepCore(A_ADDR, job=1, pid=1, seed=1)
    core.tick(500)
    assert core.get_timer() is None
    core.send(B_ADDR, b"x")
    assert core.get_timer() == 500  # the lane is dirty: pump at once
    assert [t.destination for t in core.datagrams_to_send(500)] == [B_ADDR]
    assert (timer := core.get_timer()) is not None and timer > 500  # now the PDS retransmit timer


def test_every_rudi_response_carries_its_ses_response() -> None:
    """Issue 16: the RUDI responses to the non-final packets of a multi-packet RUDI message went
    out with next_hdr NONE (no SES response), which the project's own decoder rejects. Every
    RUDI response carries its SES response (behaviour.md §2.14): the non-final packets get the
    PDS-regenerated default response (DEFAULT_RESPONSE, RC_NULL, §6.9), the last one RC_OK."""
    p = FepPair(seed=21)
    r = p.b.core.post_recv(None)
    data = bytes(range(256)) * 40  # 3 packets
    h = p.a.core.send(B_ADDR, data, mode=Mode.RUDI)
    (m,) = p.complete(p.b, r)
    p.complete(p.a, h)
    assert bytes(m.data) == data and isinstance(p.a.result(h), SendCompleted)
    resps = [t for t in p.sent_by(p.b) if t.data[0] >> 3 == PdsType.RUDI_RESP]
    assert len(resps) == 3
    assert all(pds_of(t).next_hdr == 4 for t in resps)  # next_hdr RESPONSE, never NONE
    ses = [ses_of(t) for t in resps]
    ids = {k.ses.message_id for _t, k in _requests(p, p.a)}
    assert [(s.opcode, s.return_code) for s in ses].count((0, 0)) == 2  # DEFAULT_RESPONSE, RC_NULL
    assert ses[-1].return_code == 1 and ses[-1].modified_length == len(data)
    assert {s.message_id for s in ses} == ids


def test_dc_send_before_the_receive_is_posted_completes() -> None:
    """Issue 16: ``send(..., dc=True)`` failed with NO_MATCH when no receive was posted yet.
    DC does not change matching (behaviour.md §6.4, §6.8): the target buffers it on the overflow
    list and answers with a guaranteed RC_OK response, list = overflow, after placing it."""
    p = FepPair(seed=23)
    h = p.a.core.send(B_ADDR, b"delivered", tag=4, dc=True)
    p.complete(p.a, h)
    assert isinstance(p.a.result(h), SendCompleted)
    (t, k), = _requests(p, p.a)  # fmt: skip
    assert k.ses.flags & SesFlag.DC  # DC set on the wire (wire-format.md §8.1)
    resp = [ses_of(t) for t in p.sent_by(p.b) if ses_of(t) is not None]
    assert [(s.list, s.return_code, s.modified_length) for s in resp] == [(1, 1, 9)]
    r = p.b.core.post_recv(None, tag=4)
    (m,) = p.complete(p.b, r)
    assert bytes(m.data) == b"delivered"


def test_two_lanes_sharing_one_congestion_gate_both_complete() -> None:
    """Issue 10 item 7 end to end: two jobs' messages to one peer use two PDCs and one 4-packet
    gate; the second PDC, refused at first, goes as soon as the first PDC's ACKs free the gate."""
    cfg = FepConfig(seed=18, pds=PdsConfig(cc_window=4))
    p = FepPair(cfg, seed=18)
    r1 = p.b.core.post_recv(None)
    h1 = p.a.core.send(B_ADDR, b"1" * 30000)  # 8 packets: fills the gate
    h2 = p.a.core.send(Peer(B_ADDR, job=8, relative=False), b"2" * 100)  # its own PDC (job 8)
    p.run_until(lambda: h1 in p.a.done and h2 in p.a.done, max_ns=1_000_000_000)
    assert isinstance(p.a.done[h1], SendCompleted) and h2 in p.a.done
    assert bytes(p.b.value(r1).data) == b"1" * 30000
    assert len({pds_of(t).spdcid for t, _k in _requests(p, p.a)}) == 2


def test_a_lane_submits_a_messages_first_packet_then_the_rest_in_one_run() -> None:
    """uet.fep.lanes.refill calls the PDS core's ``submit`` for the SOM packet (it picks the PDC)
    and ``submit_run`` once for the packets after it, and submits nothing when the lane is full."""
    p = FepPair(seed=1)
    core = p.a.core.pds
    calls: list[str] = []
    submit, submit_run = core.submit, core.submit_run

    def spy_submit(*a: object, **k: object) -> object:
        calls.append("submit")
        return submit(*a, **k)  # type: ignore[arg-type]

    def spy_run(*a: object, **k: object) -> int:
        calls.append("submit_run")
        return submit_run(*a, **k)  # type: ignore[arg-type]

    core.submit = spy_submit  # type: ignore[method-assign,assignment]
    core.submit_run = spy_run  # type: ignore[method-assign]
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, bytes(4096 * 3))  # 3 packets
    (msg,) = p.complete(p.b, r)
    p.complete(p.a, h)
    assert len(msg.data) == 4096 * 3
    assert calls == ["submit", "submit_run"]


def test_stats_count_pumps_acknowledged_packets_and_timer_fires() -> None:
    """``pumps`` (one per ``datagrams_to_send``), ``packets_acked`` (each data packet once, the
    per-packet ones kept apart from the stats dict, uet.fep.state) and ``timer_fires`` (one per
    ``handle_timer``) count what happened, in the stats' own key order, and the close record
    reports them."""
    p = FepPair(seed=3, log=True)
    calls = {"pumps": 0, "timers": 0}
    core = p.a.core
    dts, ht = core.datagrams_to_send, core.handle_timer

    def counted_dts(now: int, **kw: object) -> list[Transmit]:
        calls["pumps"] += 1
        return dts(now, **kw)  # type: ignore[arg-type]

    def counted_ht(now: int) -> None:
        calls["timers"] += 1
        ht(now)

    core.datagrams_to_send = counted_dts  # type: ignore[method-assign]
    core.handle_timer = counted_ht  # type: ignore[method-assign]
    r = p.b.core.post_recv(None)
    h = p.a.core.send(B_ADDR, bytes(4096 * 5))
    p.complete(p.b, r)
    p.complete(p.a, h)

    def settled() -> bool:  # (the ACK timers and anything else due have run)
        t = core.get_timer()
        return t is None or t > p.now + 10**9

    p.run_until(settled, max_ns=10**10)
    st = core.stats
    assert st["packets_acked"] == 5
    assert st["pumps"] == calls["pumps"] > 0
    assert st["timer_fires"] == calls["timers"]
    assert list(st)[-4:] == ["packets_acked", "timer_fires", "pumps", "recvs_given_back"]
    core.close(p.now)
    p.run_until(lambda: p.a.closed is not None)
    (rec,) = [x for x in p.records if x["ev"] == "close" and x["fep"] == A_ADDR]
    assert rec["packets_acked"] == 5 and rec["pumps"] == core.stats["pumps"]
