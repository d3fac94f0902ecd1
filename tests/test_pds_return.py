"""Return-direction requests: read data as PDS requests on the same PDC (spec/behaviour.md §1.4,
§2.1, §6.5; wire-format.md §6.1 next_hdr 5), see uet.pds.ret."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, ses_small

from uet.pds import Failed, Mode, PdsConfig
from uet.pds.pdc import InitiatorPdc, TargetPdc
from uet.pds.states import TargetState
from uet.wire import pds as pds_wire
from uet.wire import ses as ses_wire

# exact packet sequences without the anti-amplification proof exchange (uet.pds.validation,
# tested in tests/test_pds_validation.py)
CFG = PdsConfig(
    close_idle_ns=None, target_idle_ns=None, rto_ns=200_000, max_rto_retx=25, max_nack_retx=25, amp_factor=0
)
NH_RD = 5  # RESPONSE_DATA


def resp_hdr(off: int, n: int) -> bytes:
    return ses_wire.RESPONSE_DATA.encode(
        ses_wire.RESPONSE_DATA.make(message_id=9, read_request_message_id=9, modified_length=n, message_offset=off)
    )


def _serve_reads(pair: Pair, chunks: int, size: int = 64) -> list[tuple[str, int, int]]:
    """B answers every delivered request with ``chunks`` return packets (tokens ('r', psn, i))."""
    tokens: list[tuple[str, int, int]] = []

    def respond(d):
        if d.next_hdr == NH_RD:
            return None
        for i in range(chunks):
            tok = ("r", d.psn, i)
            tokens.append(tok)
            body = bytes([d.psn & 0xFF, i]) * (size // 2)
            pair.b.core.submit_return(
                d.pdc, NH_RD, resp_hdr(i * size, size), body, token=tok, som=i == 0, eom=i == chunks - 1, now=pair.now
            )
        return None

    pair.b.respond = respond
    return tokens


def test_return_packets_exact() -> None:
    pair = Pair(CFG, seed=1)
    _serve_reads(pair, 2)
    a, b = pair.a.core, pair.b.core
    pdcid = a.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"", token="rd", som=True, eom=True, now=0, lock=True)
    ipdc = a.pdcs[pdcid]
    assert isinstance(ipdc, InitiatorPdc) and ipdc.locks == 1
    [(req, _, _)] = pair.take(pair.a)
    pair.inject(pair.b, req, A_ADDR)
    out = pair.take(pair.b)
    # two return requests on the same PDC, the first ahead of the ACK of the read request (the
    # first packet of a flush leaves before the ACKs queued ahead of it, uet.pds.core)
    assert len(out) == 3
    ack = hdr(out[1][0])
    assert ack.type == pds_wire.PdsType.ACK_CC
    tpdc = next(iter(b.pdcs.values()))
    assert isinstance(tpdc, TargetPdc) and ack.spdcid == tpdc.lpdcid
    r0, r1 = hdr(out[0][0]), hdr(out[2][0])
    for i, r in enumerate((r0, r1)):
        assert r.type == pds_wire.PdsType.RUD_REQ and r.next_hdr == NH_RD
        assert not r.flags & pds_wire.ReqFlag.SYN
        assert r.spdcid == tpdc.lpdcid and r.dpdcid == pdcid
        assert r.psn == (tpdc.start_psn + i) & 0xFFFFFFFF  # its own PSN space, from Start_PSN
    assert r1.flags & pds_wire.ReqFlag.AR  # EOM
    pair.inject(pair.a, out[0][0], B_ADDR)  # the first return request, before the read's ACK
    pair.inject(pair.a, out[1][0], B_ADDR)
    pair.inject(pair.a, out[0][0], B_ADDR)  # duplicate: not delivered again
    pair.inject(pair.a, out[2][0], B_ADDR)
    got = [d for d in pair.a.deliveries]
    assert [(d.pdc, d.next_hdr, d.mode) for d in got] == [(pdcid, NH_RD, Mode.RUD)] * 2
    assert got[0].ses == resp_hdr(0, 64) and got[1].payload == bytes([got[1].payload[0], 1]) * 32
    acks = pair.take(pair.a)
    assert acks and all(hdr(x[0]).dpdcid == tpdc.lpdcid and hdr(x[0]).spdcid == pdcid for x in acks)
    for x in acks:
        pair.inject(pair.b, x[0], A_ADDR)
    assert {e.token for e in pair.b.acked()} == {("r", req_psn(req), 0), ("r", req_psn(req), 1)}
    assert [e.token for e in pair.a.acked()] == ["rd"]
    # close: the lock holds the PDC open until the SES releases it
    a.close(pair.now)
    pair.run_until(lambda: False, max_ns=2_000_000)
    assert pdcid in a.pdcs
    a.unlock_pdc(pdcid, pair.now)
    assert pair.run_until(lambda: not a.pdcs and a.idle())
    pair.run_idle()
    assert not b.pdcs and not pair.a.failed() and not pair.b.failed()


def req_psn(req: bytes) -> int:
    return hdr(req).psn


def test_close_waits_for_return_data() -> None:
    """The initiator closes right after its request is ACKed (no lock); the first return packet
    is lost, so CLOSE reaches the target with return data unacknowledged: the CLOSE is kept and
    answered once the return direction drains, and every return packet is Acked."""
    pair = Pair(CFG, seed=2)
    tokens = _serve_reads(pair, 4)
    dropped: list[bytes] = []

    def filt(data: bytes, src: str, dst: str) -> list[bytes]:
        h = hdr(data)
        if src == B_ADDR and h.type == pds_wire.PdsType.RUD_REQ and not dropped:
            dropped.append(h.psn)
            return []
        return [data]

    pair.filter = filt
    a = pair.a.core
    a.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x", token="rd", som=True, eom=True, now=0)
    assert pair.run_until(lambda: len(pair.a.acked()) == 1)
    a.close(pair.now)
    assert pair.run_until(lambda: not a.pdcs and not pair.b.core.pdcs, max_ns=1_000_000_000)
    assert pair.b.core.counters.get("close_deferred", 0) >= 1
    assert sorted(e.token for e in pair.b.acked()) == sorted(tokens) and not pair.b.failed()
    assert len(pair.a.deliveries) == 4
    assert all(c.error is None for c in pair.a.closed() + pair.b.closed())


def test_submit_return_unknown_pdc_fails() -> None:
    pair = Pair(CFG)
    pair.b.core.submit_return(4242, NH_RD, resp_hdr(0, 4), b"abcd", token="x", som=True, eom=True, now=0)
    pair.b.drain_events()
    assert [(e.token, type(e)) for e in pair.b.events] == [("x", Failed)]


def test_return_to_syn_sent_initiator_is_dropped_then_recovered() -> None:
    """Return data that overtakes the ACK of the read (initiator still in SYN_SENT) is dropped
    and retransmitted by the target's RTO once the initiator is established."""
    pair = Pair(CFG, seed=3)
    tokens = _serve_reads(pair, 1)
    held: list[bytes] = []

    def filt(data: bytes, src: str, dst: str) -> list[bytes]:
        if src == B_ADDR and hdr(data).type in (pds_wire.PdsType.ACK, pds_wire.PdsType.ACK_CC) and not held:
            held.append(data)  # hold the first ACK back: it arrives after the return data
            return []
        if src == B_ADDR and held and len(held) == 1:
            held.append(b"")
            return [data, held[0]]
        return [data]

    pair.filter = filt
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x", token="rd", som=True, eom=True, now=0)
    assert pair.run_until(lambda: len(pair.b.acked()) == 1 and len(pair.a.acked()) == 1)
    assert pair.a.core.counters.get("drop_return_before_established", 0) == 1
    assert [e.token for e in pair.b.acked()] == tokens
    assert len(pair.a.deliveries) == 1


@pytest.mark.parametrize("mode", [Mode.RUD, Mode.ROD])
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_return_direction_lossy_exactly_once(mode: Mode, seed: int) -> None:
    pair = Pair(replace(CFG, fast_retx_threshold=3), seed=seed, loss=0.15, dup=0.1, reorder=0.2)
    tokens = _serve_reads(pair, 5)
    a = pair.a.core
    for m in range(6):
        a.submit(B_ADDR, mode, SES_NH, ses_small(), bytes([m]) * 40, token=("q", m), som=True, eom=True, now=0)
    assert pair.run_until(
        lambda: len(pair.a.acked()) == 6 and len(tokens) == 30 and len(pair.b.acked()) == 30, max_ns=5_000_000_000
    )
    assert not pair.a.failed() and not pair.b.failed()
    rets = [(d.payload[0], d.payload[1]) for d in pair.a.deliveries]
    assert len(rets) == 30 and len(set(rets)) == 30
    if mode == Mode.ROD:  # return data of a ROD PDC arrives in its PSN order
        sent = [(t[1] & 0xFF, t[2]) for t in tokens]
        assert rets == sent
    assert sorted(e.token for e in pair.b.acked()) == sorted(tokens)
    a.close(pair.now)
    assert pair.run_until(lambda: not a.pdcs and not pair.b.core.pdcs, max_ns=5_000_000_000)
    assert not pair.b.core.gates and not a.gates


# -- the SES engines over two PDS cores: large reads return as return-direction requests ---------


def test_ses_reads_return_data_on_the_read_pdc() -> None:
    """SesFep over PdsCore with the reference Max_ACK_Data_Size (16 bytes): every read larger
    than that returns as RESPONSE_DATA requests submitted with ``submit_return`` on the PDC the
    read arrived on (``OutPacket.return_pdc``), with 5 % loss both ways."""
    import random

    from uet.pds import Acked as _Acked
    from uet.pds import PdsCore
    from uet.ses import Access, OpCompleted, SesFep
    from uet.ses.initiator import InitiatorConfig, SesAddress
    from uet.ses.target import TargetConfig

    job = 5
    rng = random.Random(7)

    class Node:
        def __init__(self, fa: str, pid: int) -> None:
            self.ses = SesFep(
                fa,
                initiator=InitiatorConfig(initiator_id=pid, max_payload=512, local_pid=pid),
                target=TargetConfig(max_payload=512),  # max_ack_data stays 16
                rng=rng,
            )
            self.ses.resources.add(pid, 0, job)
            self.pds = PdsCore(fa, CFG, rng=rng)
            self.pds.on_deliver = self.ses.on_deliver

        def pump(self, now: int) -> None:
            for p in self.ses.packets_to_send():
                if p.return_pdc is not None:
                    self.pds.submit_return(
                        p.return_pdc, p.next_hdr, p.ses, p.payload, token=p.token, som=p.som, eom=p.eom, now=now
                    )
                else:
                    self.pds.submit(
                        p.peer, Mode(p.mode), p.next_hdr, p.ses, p.payload,
                        token=p.token, som=p.som, eom=p.eom, now=now, job_id=p.job_id,
                    )  # fmt: skip
            while (e := self.pds.next_event()) is not None:
                if isinstance(e, _Acked):
                    self.ses.on_ack(e.token, e.response_next_hdr, e.response, now)
                elif isinstance(e, Failed):
                    self.ses.on_failed(e.token, e.reason, e.nack_code, now)

    a, b = Node(A_ADDR, 1), Node(B_ADDR, 2)
    nodes = {A_ADDR: a, B_ADDR: b}
    mem = bytearray(rng.randbytes(8192))
    reg = b.ses.memory.register(mem, Access.ALL)
    dest = SesAddress(B_ADDR, 2, 0, 0, job)
    want = {}
    for _ in range(12):
        off, ln = rng.randint(0, 4000), rng.randint(17, 3000)
        want[a.ses.initiator.read(dest, reg.key, off, ln)] = bytes(mem[off : off + ln])
    now = 0
    for _ in range(100_000):
        for n in nodes.values():
            n.pump(now)
        wire = [(src, d) for src, n in nodes.items() for d in n.pds.datagrams_to_send(now)]
        if wire:
            for src, (data, dst, _e) in wire:
                if rng.random() >= 0.05:
                    nodes[dst].pds.receive_datagram(data, now, source=src)
            now += 1000
            continue
        ts = [t for n in nodes.values() for t in (n.pds.get_timer(), n.ses.get_timer()) if t is not None]
        if not ts:
            break
        now = max(now + 1, min(ts))
        for n in nodes.values():
            n.pds.handle_timer(now)
            n.ses.handle_timer(now)
        if now > 5_000_000_000:
            break
    done = {}
    while (e := a.ses.next_event()) is not None:
        assert isinstance(e, OpCompleted), e
        done[e.op] = e.result
    assert done == want
    # the data came back on the read's PDC: B never opened an initiator PDC of its own
    assert b.pds.counters["return_halves"] == 1 and "pdc_open_initiator" not in b.pds.counters
    n_ret = sum(-(-len(v) // 512) for v in want.values())
    assert b.pds.counters["acked"] == n_ret and a.pds.counters["delivered"] >= n_ret


def test_target_close_req_waits_for_return_data() -> None:
    """``request_close`` on a target PDC with return data unacknowledged: the CLOSE_REQ goes only
    once the return direction drains, then the initiator closes the PDC normally."""
    pair = Pair(CFG, seed=5)
    tokens = _serve_reads(pair, 3)
    held: list[bytes] = []

    def filt(data: bytes, src: str, dst: str) -> list[bytes]:
        h = hdr(data)
        if src == B_ADDR and h.type == pds_wire.PdsType.RUD_REQ and not held:
            held.append(data)  # lose the first return packet once
            return []
        return [data]

    pair.filter = filt
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x", token="rd", som=True, eom=True, now=0)
    assert pair.run_until(lambda: len(pair.b.deliveries) == 1)
    pair.step()  # the return packets go out (the first is lost)
    [tp] = pair.b.core.pdcs.values()
    assert isinstance(tp, TargetPdc) and tp.ret is not None and tp.ret.outstanding
    pair.b.core.request_close(tp.lpdcid, pair.now)
    assert tp.state is TargetState.ESTABLISHED and tp.close_req_wanted  # not yet: data in flight
    assert pair.run_until(lambda: not pair.a.core.pdcs and not pair.b.core.pdcs)
    assert sorted(e.token for e in pair.b.acked()) == sorted(tokens) and not pair.b.failed()
    assert pair.b.core.counters["ctl_tx_REQ_CLOSE"] == 1
    assert all(c.error is None for c in pair.a.closed() + pair.b.closed())
