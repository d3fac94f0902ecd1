"""The bulk-data fast paths stay exact: segmenter header templates, payload views, in-place
reassembly, the reassembler's header cache, the direct link's batch send, and the trim marks the
endpoint passes from a link to the PDS core."""

from __future__ import annotations

import asyncio
import random
import socket
from collections.abc import Callable
from itertools import islice
from typing import Any

import pytest
from ses_response import response_fields

from uet.endpoint import Endpoint, EndpointConfig
from uet.link import DSCP_CONTROL, DSCP_DATA, DirectLink
from uet.link.base import Link
from uet.link.direct import loopback_addresses
from uet.pds import Mode, PdsConfig, PdsCore
from uet.pds.config import PdsError, PdsLimitError
from uet.pds.pdc import InitiatorPdc
from uet.ses import reassembly
from uet.ses.message import MAX_WIRE_PAYLOAD, MessageConfig
from uet.ses.reassembly import Reassembler
from uet.ses.segmenter import Segmenter
from uet.wire.pds import PdsType
from uet.wire.ses import STANDARD, ReturnCode, SesFlag, SesOpcode

T = 10.0
PEER = "10.0.0.1"


# -- segmenter ---------------------------------------------------------------------------------


def _reference_headers(length: int, ps: int, mid: int, **kw: Any) -> list[bytes]:
    """The standard headers built field by field with the layouts (what the segmenter must emit)."""
    tag = kw.get("tag")
    rel = int(SesFlag.REL) if kw.get("relative", True) else 0
    hd = kw.get("header_data")
    n = max(1, -(-length // ps))
    out = []
    for i in range(n):
        off = i * ps
        plen = min(ps, length - off)
        eom = int(SesFlag.EOM) if i == n - 1 else 0
        common: dict[str, Any] = dict(
            opcode=int(SesOpcode.SEND if tag is None else SesOpcode.TAGGED_SEND),
            message_id=mid,
            ri_generation=kw.get("generation", 0),
            job_id=kw.get("job_id", 3),
            pid_on_fep=kw.get("pid_on_fep", 0),
            resource_index=kw.get("resource_index", 0),
            initiator=0x0A000001,
            match_bits=0 if tag is None else tag,
            request_length=length,
        )
        if i == 0:
            lay = STANDARD[(1, "none")]
            flags = int(SesFlag.SOM) | rel | eom | (int(SesFlag.HD) if hd is not None else 0)
            out.append(lay.encode(lay.make(flags=flags, header_data=hd or 0, **common)))
        else:
            lay = STANDARD[(0, "none")]
            pl = plen if plen <= MAX_WIRE_PAYLOAD else 0
            out.append(lay.encode(lay.make(flags=rel | eom, payload_length=pl, message_offset=off, **common)))
    return out


@pytest.mark.parametrize(
    ("length", "ps", "kw"),
    [
        (10 * 4096, 4096, {}),
        (10 * 4096 + 17, 4096, {"tag": 0xFEDCBA9876543210, "header_data": 5}),
        (3 * 20000 + 1, 20000, {"relative": False, "generation": 7, "pid_on_fep": 9, "resource_index": 2}),
        (1, 4096, {"job_id": 0xFFFFFF}),
        (2 * 8192, 8192, {"header_data": 0}),
    ],
)
def test_segmenter_headers_equal_the_layout_encoding(length: int, ps: int, kw: dict) -> None:
    seg = Segmenter(job_id=3, initiator=0x0A000001, payload_size=ps)
    data = random.Random(length).randbytes(length)
    got = list(seg.packets(data, 0x1234, **kw))
    assert [h for h, _p, _s, _e in got] == _reference_headers(length, ps, 0x1234, **kw)
    assert b"".join(bytes(p) for _h, p, _s, _e in got) == data
    assert [(s, e) for _h, _p, s, e in got] == [(i == 0, i == len(got) - 1) for i in range(len(got))]


# -- payload views -------------------------------------------------------------------------------


def _one_packet_pair(views: bool) -> list:
    a = PdsCore("10.0.0.1", PdsConfig(), rng=random.Random(1))
    b = PdsCore("10.0.0.2", PdsConfig(), rng=random.Random(2))
    b.payload_views = views
    got: list = []
    b.on_deliver = lambda d: got.append(d)
    seg = Segmenter(job_id=0, initiator=1, payload_size=1000)
    for ses, payload, som, eom in seg.packets(b"x" * 2500, 1):
        a.submit("10.0.0.2", Mode.RUD, 3, ses, payload, token=None, som=som, eom=eom, now=0)
    for d, _dst, _e in a.datagrams_to_send(0):
        b.receive_datagram(d, 0, source="10.0.0.1")
    return got


def test_payload_views_deliver_memoryviews_of_the_same_bytes() -> None:
    plain, views = _one_packet_pair(False), _one_packet_pair(True)
    assert len(plain) == len(views) == 3
    assert all(type(d.payload) is bytes for d in plain)
    assert all(type(d.payload) is memoryview and d.payload.readonly for d in views)
    assert [bytes(d.payload) for d in views] == [d.payload for d in plain]
    assert [d.ses for d in views] == [d.ses for d in plain]


# -- in-place reassembly and the header cache ------------------------------------------------------


def _packets(data: bytes, mid: int, ps: int = 100, **kw: Any) -> list[tuple[bytes, bytes]]:
    seg = Segmenter(job_id=0, initiator=7, payload_size=ps)
    return [(h, bytes(p)) for h, p, _s, _e in seg.packets(data, mid, **kw)]


def _reasm(threshold: int = 1000) -> Reassembler:
    return Reassembler(config=MessageConfig(payload_size=100, inplace_threshold=threshold), decline=True)


@pytest.mark.parametrize("threshold", [1000, 1 << 30])
def test_interleaved_out_of_order_messages_with_duplicates(threshold: int) -> None:
    rng = random.Random(5)
    d1, d2 = rng.randbytes(2345), rng.randbytes(1999)
    p1, p2 = _packets(d1, 1), _packets(d2, 2, header_data=9)
    order = [(1, p) for p in p1] + [(2, p) for p in p2]
    rng.shuffle(order)
    order.insert(4, order[3])  # duplicates of packets just placed (their messages are incomplete)
    order.insert(12, order[11])
    r = _reasm(threshold)
    for _k, (h, p) in order:
        r.deliver(PEER, 0, 3, h, memoryview(p))
    got = {m.message_id: m for m in r.completed}
    assert set(got) == {1, 2} and got[1].data == d1 and got[2].data == d2 and got[2].header_data == 9
    if threshold == 1000:  # in place: read-only views of one buffer, hashable like bytes
        view = got[1].data
        assert isinstance(view, memoryview) and view.readonly
        assert hash(got[1].data) == hash(d1)
    else:
        assert type(got[1].data) is bytes
    assert r.counters["duplicate_packets"] == 2 and r.partial_count == 0


def _answer(r: object) -> tuple[int, bytes]:
    """A reassembler's answer that must be a response (next header, bytes)."""
    assert isinstance(r, tuple)
    return r


def test_cached_header_still_checks_lengths_and_bounds() -> None:
    data = bytes(range(256)) * 10
    pk = _packets(data, 4)
    r = _reasm()
    for h, p in pk[:3]:
        assert r.deliver(PEER, 0, 3, h, p) is None
    h, p = pk[3]
    nh, resp = _answer(r.deliver(PEER, 0, 3, h, p[:-1]))  # payload shorter than payload_length
    assert nh == 4 and response_fields(resp)[1] == ReturnCode.OP_VIOLATION
    assert r.counters["error_bad_payload_length"] == 1
    # the message is in error now: later packets (same cached header) get the error again
    h, p = pk[4]
    nh, resp = _answer(r.deliver(PEER, 0, 3, h, p))
    assert response_fields(resp)[1] == ReturnCode.OP_VIOLATION


def test_cached_header_rechecks_after_a_generation_change() -> None:
    data = bytes(1000)
    pk = _packets(data, 4)
    r = _reasm()
    for h, p in pk[:3]:
        r.deliver(PEER, 0, 3, h, p)
    r.generation = 1  # the resource was re-created: requests of generation 0 no longer match
    nh, resp = _answer(r.deliver(PEER, 0, 3, *pk[3]))
    assert response_fields(resp)[1] == ReturnCode.OP_VIOLATION
    assert r.counters["error_changed_header"] == 1


def test_expired_message_is_not_resumed_from_the_cache() -> None:
    pk = _packets(bytes(1500), 4)
    r = _reasm()
    r.now = 0
    for h, p in pk[:4]:
        r.deliver(PEER, 0, 3, h, p)
    assert r.expire(10**12) == 1 and r.partial_count == 0
    r.now = 10**12
    for h, p in pk[4:]:  # a restarted message: needs its SOM again, nothing completes
        r.deliver(PEER, 0, 3, h, p)
    assert not r.completed and r.counters["expired"] == 1


def test_in_place_without_populate_support(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reassembly, "_MADV_POPULATE_WRITE", 0x7FFF)  # an advice the kernel rejects
    data = random.Random(2).randbytes(5000)
    r = _reasm()
    for h, p in _packets(data, 8):
        r.deliver(PEER, 0, 3, h, p)
    assert r.completed[0].data == data


# -- direct link batch send --------------------------------------------------------------------


def _is_data() -> tuple[bool, ...]:
    data = {PdsType.RUD_REQ, PdsType.ROD_REQ}
    return tuple(t in data for t in range(32))


@pytest.mark.parametrize("ecn", [0, 2])  # 0: the one-sendto fast path; 2: per-datagram IP_TOS
async def test_send_many_keeps_order_and_classes(ecn: int) -> None:
    a, b = loopback_addresses(2, seed=11 + ecn)
    la = DirectLink(a, 0)
    lb = DirectLink(b, 0, peer_port=la.port)
    la.peer_port = lb.port
    got: list[tuple[bytes, int]] = []
    done = asyncio.Event()

    def sink(batch) -> None:
        got.extend((d, e) for d, _s, e in batch)
        if len(got) >= 40:
            done.set()

    lb.set_receiver(sink)
    tos_seen: list[int] = []
    orig = lb.sock.recvmsg

    class _Spy:  # record the TOS of each datagram the receiver reads
        def __init__(self, sock: socket.socket) -> None:
            self.sock = sock

        def recvmsg(self, *a: int):  # noqa: ANN202
            r = orig(*a)
            tos_seen.append(r[1][0][2][0] if r[1] else -1)
            return r

    lb.sock = _Spy(lb.sock)  # type: ignore[assignment]
    try:
        items = []
        for i in range(40):
            t = PdsType.RUD_REQ if i % 5 else PdsType.ACK
            items.append((bytes([int(t) << 3]) + i.to_bytes(2, "big") * 20, b, i))
        la.send_many(items, _is_data(), ecn)
        await asyncio.wait_for(done.wait(), T)
        assert [d for d, _e in got] == [d for d, _dst, _e in items]
        assert tos_seen == [(DSCP_CONTROL << 2) if i % 5 == 0 else (DSCP_DATA << 2 | ecn) for i in range(40)]
        assert la.counters["tx_packets"] == 40 and la.counters["tx_bytes"] == sum(len(d) for d, _x, _y in items)
    finally:
        lb.sock = lb.sock.sock  # type: ignore[attr-defined]
        la.close()
        lb.close()


# -- trim marks --------------------------------------------------------------------------------


class _MemLink(Link):
    """Two of these shuttle datagrams between endpoints in one process; ``mark`` may rewrite a
    datagram (and its ``ecn``) on arrival, as a fabric link does for a trimmed packet."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.counters = {"tx_packets": 0}
        self.peer: _MemLink | None = None
        self.mark: Callable[[bytes, int], tuple[bytes, int]] | None = None
        self._cb = None

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        self.counters["tx_packets"] += 1
        peer = self.peer
        assert peer is not None
        data, e = bytes(datagram), ecn
        if peer.mark is not None:
            data, e = peer.mark(data, e)
        asyncio.get_running_loop().call_soon(lambda: peer._cb and peer._cb([(data, self.address, e)]))

    def set_receiver(self, callback) -> None:  # noqa: ANN001
        self._cb = callback

    def close(self) -> None:
        self._cb = None


@pytest.mark.parametrize(("mark", "code"), [(0x100, "TRIMMED"), (0x300, "TRIMMED_LASTHOP")])
async def test_trimmed_packet_gets_a_trimmed_nack_and_is_resent(mark: int, code: str) -> None:
    la, lb = _MemLink("10.1.0.1"), _MemLink("10.1.0.2")
    la.peer, lb.peer = lb, la
    seen = {"data": 0}

    def trim(data: bytes, ecn: int) -> tuple[bytes, int]:
        if data[0] >> 3 in (PdsType.RUD_REQ, PdsType.ROD_REQ):
            seen["data"] += 1
            if seen["data"] == 2:  # the second data packet: cut to its headers, marked trimmed
                return data[:64], ecn | mark
        return data, ecn

    lb.mark = trim
    cfg = EndpointConfig(payload_size=1000, seed=3)
    a, b = Endpoint(la, config=cfg), Endpoint(lb, config=cfg)
    try:
        payload = random.Random(4).randbytes(5000)
        send = asyncio.ensure_future(a.send(lb.address, payload))
        m = await asyncio.wait_for(b.recv(), T)
        await asyncio.wait_for(send, T)
        assert m.data == payload
        assert b.core.counters.get("nack_tx_" + code) == 1
        assert sum(v for k, v in b.core.counters.items() if k.startswith("nack_tx_")) == 1
        assert a.counters.get("nack_rx_" + code) == 1 and a.counters["retransmits"] >= 1
        assert a.counters.get("rto", 0) == 0  # recovered by the NACK, not by a timeout
    finally:
        await a.close()
        await b.close()


def test_in_place_packet_far_ahead_of_the_front() -> None:
    """A packet megabytes ahead of the in-order front (RUD reordering, a lost SOM) is placed
    without populating the buffer up to it; the message still completes intact."""
    data = random.Random(9).randbytes(5 << 20)
    seg = Segmenter(job_id=0, initiator=7, payload_size=60000)
    pk = [(h, bytes(p)) for h, p, _s, _e in seg.packets(data, 3)]
    r = Reassembler(config=MessageConfig(payload_size=60000, inplace_threshold=1 << 20), decline=True)
    for h, p in [pk[-1], pk[1], pk[0], *pk[2:-1]]:
        r.deliver(PEER, 0, 3, h, p)
    assert len(r.completed) == 1 and r.completed[0].data == data


async def test_send_many_queues_the_rest_in_order_when_the_buffer_fills() -> None:
    a, b = loopback_addresses(2, seed=21)
    la = DirectLink(a, 0)
    lb = DirectLink(b, 0, peer_port=la.port)
    la.peer_port = lb.port
    got: list[bytes] = []
    done = asyncio.Event()

    def sink(batch) -> None:
        got.extend(d for d, _s, _e in batch)
        if len(got) >= 40:
            done.set()

    lb.set_receiver(sink)
    real = la.sock

    class _Full:  # the 10th sendto finds the send buffer full once
        n = 0

        def sendto(self, data: bytes, addr: tuple[str, int]) -> int:
            _Full.n += 1
            if _Full.n == 10:
                raise BlockingIOError
            return real.sendto(data, addr)

        def __getattr__(self, name: str):  # noqa: ANN204
            return getattr(real, name)

    la.sock = _Full()  # type: ignore[assignment]
    try:
        items = [(bytes([int(PdsType.RUD_REQ) << 3]) + i.to_bytes(2, "big"), b, i) for i in range(40)]
        la.send_many(items, _is_data(), 0)
        assert la.backlog > 0 and la.counters["tx_backlog"] == 1
        await asyncio.wait_for(done.wait(), T)
        assert got == [d for d, _x, _y in items] and la.backlog == 0
        assert la.counters["tx_packets"] == 40
    finally:
        la.sock = real
        la.close()
        lb.close()


# -- submit_run --------------------------------------------------------------------------------


def _pkts(n: int, mid: int = 1) -> list:
    seg = Segmenter(job_id=0, initiator=1, payload_size=100)
    return list(seg.packets(random.Random(mid).randbytes(n * 100), mid))


def _initiator(core: PdsCore, pdcid: int) -> InitiatorPdc:
    pdc = core.pdcs[pdcid]
    assert isinstance(pdc, InitiatorPdc)
    return pdc


def _state(core: PdsCore) -> list:
    return [
        (p.lpdcid, [(t.token, t.ses, bytes(t.payload), t.som, t.eom) for t in p.pending], p.active)
        for p in core.pdcs.values()
        if isinstance(p, InitiatorPdc)
    ]


def test_submit_run_equals_submit_per_packet() -> None:
    """Two interleaved messages on one key (the second waits behind the first): the same queues,
    open messages and PDCs whether the rest of each message goes in per packet or as a run."""
    cores = [PdsCore("10.0.0.1", PdsConfig(), rng=random.Random(1)) for _ in range(2)]
    m1, m2 = _pkts(7, 1), _pkts(5, 2)
    for i, core in enumerate(cores):
        for mid, pk in ((1, m1), (2, m2)):
            ses, pl, som, eom = pk[0]
            core.submit("10.0.0.2", Mode.RUD, 3, ses, pl, token=mid, som=som, eom=eom, now=0, msg_id=mid)
        for mid, pk in ((2, m2), (1, m1)):  # the waiting message first, then the active one
            if i == 0:
                for ses, pl, som, eom in pk[1:]:
                    core.submit("10.0.0.2", Mode.RUD, 3, ses, pl, token=mid, som=som, eom=eom, now=0, msg_id=mid)
            else:
                it = iter(pk[1:])
                assert core.submit_run("10.0.0.2", Mode.RUD, 3, islice(it, 2), token=mid, now=0, msg_id=mid) == 2
                assert core.submit_run("10.0.0.2", Mode.RUD, 3, it, token=mid, now=0, msg_id=mid) == len(pk) - 3
    assert _state(cores[0]) == _state(cores[1]) and not cores[1].open_msg
    assert len(_state(cores[1])) == len(cores[1].pdcs)  # initiators only
    tokens = [t.token for p in cores[1].pdcs.values() if isinstance(p, InitiatorPdc) for t in p.pending]
    assert tokens == [1] * 7 + [2] * 5


def test_submit_run_limits_and_errors() -> None:
    core = PdsCore("10.0.0.1", PdsConfig(max_queued=4), rng=random.Random(1))
    pk = _pkts(8)
    with pytest.raises(PdsError):  # no open message yet
        core.submit_run("10.0.0.2", Mode.RUD, 3, iter(pk[1:]), token=1, now=0)
    ses, pl, som, eom = pk[0]
    core.submit("10.0.0.2", Mode.RUD, 3, ses, pl, token=1, som=som, eom=eom, now=0)
    it = iter(pk[1:])
    assert core.submit_run("10.0.0.2", Mode.RUD, 3, it, token=1, now=0) == 3  # stops at max_queued
    with pytest.raises(PdsLimitError):  # nothing fits: raises, like submit, and consumes nothing
        core.submit_run("10.0.0.2", Mode.RUD, 3, it, token=1, now=0)
    assert next(it)[0] == pk[4][0]
    with pytest.raises(PdsError):
        core.submit_run("10.0.0.2", Mode.RUD, 3, iter(pk[:1]), token=1, now=0, msg_id=None)


@pytest.mark.parametrize("sent", [False, True])
def test_submit_run_after_the_pdc_closed_in_error(sent: bool) -> None:
    """The PDC of the open message closes in error (before or after its SOM left): the rest of
    the message meets the same fate (moved to a new PDC, or Failed) as with submit per packet."""
    outcomes = []
    for run in (False, True):
        core = PdsCore("10.0.0.1", PdsConfig(), rng=random.Random(1))
        pk = _pkts(4)
        ses, pl, som, eom = pk[0]
        pdcid = core.submit("10.0.0.2", Mode.RUD, 3, ses, pl, token=0, som=som, eom=eom, now=0)
        if sent:
            core.datagrams_to_send(0)
        core._close_error(_initiator(core, pdcid), "test", None, 0)
        while core.next_event() is not None:
            pass
        if run:
            n = core.submit_run("10.0.0.2", Mode.RUD, 3, iter(pk[1:]), token=9, now=0)
        else:
            n = 0
            for ses, pl, som, eom in pk[1:]:
                core.submit("10.0.0.2", Mode.RUD, 3, ses, pl, token=9, som=som, eom=eom, now=0)
                n += 1
        evs = []
        while (ev := core.next_event()) is not None:
            evs.append((type(ev).__name__, getattr(ev, "token", None)))
        outcomes.append((n, evs, dict(core.open_msg), _state(core)))
    assert outcomes[0] == outcomes[1]
    if sent:
        assert outcomes[1][1] == [("Failed", 9)] * 3


def test_take_events_returns_what_next_event_would() -> None:
    seqs = []
    for take in (False, True):
        core = PdsCore("10.0.0.1", PdsConfig(), rng=random.Random(1))
        for ses, pl, som, eom in _pkts(5):
            pdcid = core.submit("10.0.0.2", Mode.RUD, 3, ses, pl, token=len(ses), som=som, eom=eom, now=0)
        core.datagrams_to_send(0)
        core._close_error(_initiator(core, pdcid), "test", None, 0)
        if take:
            got = list(core.take_events())
            assert list(core.take_events()) == [] and core.next_event() is None
        else:
            got = []
            while (ev := core.next_event()) is not None:
                got.append(ev)
        seqs.append(got)
    assert seqs[0] == seqs[1] and len(seqs[1]) >= 5
