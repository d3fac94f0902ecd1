"""A waiting buffer-less ``recv()`` is one receive on the expected list, matched on a message's
first-arriving packet like a posted buffer (behaviour.md §6.3 step 5, §6.4), not a standing
"every new message is expected".

A ``recv()`` posts no buffer, so it waits beside the SES expected list (uet.fep.receives). It
used to be *asked* whether it would take a new message, and kept waiting: while it waited, every
message whose first packet arrived was reported on the expected list (``list`` = 0, a plain
response) and skipped the unexpected-list byte limit, though only the first one to *complete*
went to the receive and the others were buffered on the overflow list regardless; and receives
were matched in completion order, not in the order messages arrived, so a ``recv()`` could take a
later message and leave a directed receive waiting for one it had taken. Now the first-arriving
packet of a message *reserves* the oldest matching ``recv()`` (uet.ses.fep ``reserve``): that
message alone is expected, the next ones take the overflow list with its limit and its NACK, and
a reservation whose message never completes (refused, failed, expired) is given back.

The cores are fed exact datagrams in a chosen order at exact (virtual) times; the public API is
checked on the simulator's endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fep_harness import Node, ses_of
from test_adapter_operations import sim_endpoints
from test_ses_target import DC, EOM, REL, defer_hdr, som_hdr

from uet.fep import Datagram, FepConfig, FepCore, MessageReceived, OpFailed, SendCompleted, Transmit
from uet.fep.receives import Waiter
from uet.pds import Mode
from uet.pds.events import Delivery
from uet.ses import SesFep
from uet.ses.errors import Cancelled
from uet.ses.fep import ENTRY_OVERHEAD
from uet.ses.matching import MatchLimits
from uet.ses.message import Message, MessageConfig, initiator_id
from uet.ses.target import TargetConfig
from uet.sim.loop import run
from uet.wire.pds import NextHeader, PdsType
from uet.wire.ses import RESPONSE, STANDARD, SesOpcode

A, B, C = "10.0.0.1", "10.0.0.2", "10.0.0.3"
JOB = 7
#: the target engine's tests' resource (tests/test_ses_target.py headers)
JOB_T, PID, RI = 0x42, 3, 0
#: 1,024-byte packets: a 2,000-byte message is two packets, a 500-byte one a single packet
CFG = FepConfig(payload_size=1024)
_ACKS = (PdsType.ACK, PdsType.ACK_CC, PdsType.ACK_CCX)


def _data(n: int, size: int) -> bytes:
    return bytes((n * 31 + i) & 0xFF for i in range(size))


class _Net:
    """Senders A and C and receiver B, joined by hand: each core's datagrams are collected with
    :meth:`out`, delivered one at a time with :meth:`arrive` (1 µs apart), and :meth:`settle`
    moves everything, firing timers, until every core is quiet."""

    def __init__(self, config_b: FepConfig = CFG) -> None:
        self.a = Node(FepCore(A, job=JOB, pid=1, config=CFG, seed=1))
        self.b = Node(FepCore(B, job=JOB, pid=1, config=config_b, seed=2))
        self.c = Node(FepCore(C, job=JOB, pid=1, config=CFG, seed=3))
        self.nodes = {A: self.a, B: self.b, C: self.c}
        self.now = 0
        #: every datagram handed out: (source, Transmit)
        self.wire: list[tuple[str, Transmit]] = []

    def recv(self, buffer: bytearray | None = None, **kw: object) -> int:
        """Post a receive at B (a ``recv()`` without ``buffer``); its handle (events drained)."""
        h = self.b.core.post_recv(buffer, **kw)  # type: ignore[arg-type]
        self.b.drain()
        return h

    def out(self, node: Node) -> list[Transmit]:
        ts = node.core.datagrams_to_send(self.now)
        self.wire += [(node.address, t) for t in ts]
        node.drain()
        return ts

    def arrive(self, src: Node, t: Transmit) -> None:
        self.now += 1_000
        dst = self.nodes[t.destination]
        dst.core.receive_batch([Datagram(t.data, src.address, t.ecn, source_port=t.entropy)], self.now)
        dst.drain()

    def settle(self, max_ns: int = 2_000_000_000, cut: frozenset[str] = frozenset()) -> None:
        """Deliver every datagram and what it causes, firing timers, until all are quiet (or
        ``max_ns`` passed); datagrams from the addresses in ``cut`` are lost."""
        end = self.now + max_ns
        while self.now <= end:
            moved = False
            for node in self.nodes.values():
                for t in self.out(node):
                    if node.address not in cut:
                        self.arrive(node, t)
                        moved = True
            if moved:
                continue
            due = [at for n in self.nodes.values() if (at := n.core.get_timer()) is not None]
            if not due:
                return
            self.now = max(self.now, min(due))
            for n in self.nodes.values():
                at = n.core.get_timer()
                if at is not None and at <= self.now:
                    n.core.handle_timer(self.now)

    def lists(self) -> list[int]:
        """The ``list`` field of every SES response B sent (0 expected, 1 overflow), in order."""
        out = []
        for src, t in self.wire:
            if src == B and t.data[0] >> 3 in _ACKS and (ses := ses_of(t)) is not None:
                out.append(ses.list)
        return out

    def got(self, handle: int) -> tuple[str, int | None] | None:
        """(source, header data) of the message receive ``handle`` completed with, else None."""
        ev = self.b.result(handle)
        if ev is None:
            return None
        assert isinstance(ev, MessageReceived), ev
        return ev.message.source, ev.message.header_data


def _check_message(ev: object, data: bytes) -> None:
    assert isinstance(ev, MessageReceived) and bytes(ev.message.data) == data


def test_one_waiting_recv_makes_one_message_expected_not_every_message() -> None:
    """Two messages begin while one ``recv()`` waits: the first to arrive is expected (and
    taken by the receive), the second is buffered on the overflow list, is counted there and
    says so in its response (a guaranteed response, which A then clears)."""
    net = _Net()
    w = net.recv()
    datas = [_data(i, 2000) for i in range(2)]
    sends = [net.a.core.send(B, d, header_data=i) for i, d in enumerate(datas)]
    reqs = net.out(net.a)  # M0 p0, M0 p1, M1 p0, M1 p1
    assert len(reqs) == 4
    for i in (0, 2, 1, 3):  # M1's first packet comes while M0 is still arriving
        net.arrive(net.a, reqs[i])
    _check_message(net.b.result(w), datas[0])
    assert net.b.core.pending_messages == 1  # M1 waits for a receive: it is unexpected
    net.settle()
    assert net.lists() == [0, 1]  # M0 on the expected list, M1 on the overflow list
    c = net.b.core.counters()
    assert (c["ses_fast_expected_waiting"], c["ses_fast_unexpected"]) == (1, 1)
    assert net.a.core.counters()["ctl_tx_CLEAR"] >= 1  # its guaranteed response was cleared
    w2 = net.recv()
    _check_message(net.b.result(w2), datas[1])
    assert all(isinstance(net.a.result(s), SendCompleted) for s in sends)


def test_the_unexpected_byte_limit_holds_while_a_recv_waits() -> None:
    """B's overflow list has room for one 2,000-byte message and holds one (untagged). A
    ``recv(tag=5)`` waits and three tag-5 messages begin at once: the first is the receive's; the
    first-arriving packets of the other two are NACKed ``NO_SES_MSG_AVAIL`` (counted) and resent,
    and they get in once receives take them. (Before, all three were reported expected because
    one receive waited, and two joined the full list: three times its limit, no NACK.) Each
    message is delivered once, intact."""
    limits = MatchLimits(max_unexpected_bytes=2000 + ENTRY_OVERHEAD)
    net = _Net(FepConfig(payload_size=1024, match_limits=limits))
    early = _data(0, 2000)
    net.a.core.send(B, early)
    for t in net.out(net.a):
        net.arrive(net.a, t)
    assert net.b.core.ses.unexpected_messages.nbytes == limits.max_unexpected_bytes  # full
    w = net.recv(tag=5)
    datas = [_data(i, 2000) for i in (1, 2, 3)]
    sends = [net.a.core.send(B, d, tag=5, header_data=i) for i, d in enumerate(datas)]
    reqs = net.out(net.a)
    assert len(reqs) == 6
    for i in (0, 2, 4, 1, 3, 5):  # every first packet before any message is whole
        net.arrive(net.a, reqs[i])
        assert net.b.core.ses.unexpected_messages.nbytes <= limits.max_unexpected_bytes
    _check_message(net.b.result(w), datas[0])
    assert net.b.core.counters()["ses_fast_unexpected_full"] == 4  # both packets of either other one
    ws = [net.recv(tag=5), net.recv(tag=5)]
    net.settle()
    assert [net.got(h) for h in ws] == [(A, 1), (A, 2)]
    for h, d in zip(ws, datas[1:], strict=True):
        _check_message(net.b.result(h), d)
    assert all(isinstance(net.a.result(s), SendCompleted) for s in sends)
    _check_message(net.b.result(net.recv()), early)
    assert net.b.core.pending_messages == 0
    c = net.b.core.counters()
    assert (c["ses_fast_expected_waiting"], c["ses_fast_unexpected"]) == (3, 1)


@pytest.mark.parametrize("buffered", [False, True], ids=["recv", "recv_into"])
def test_waiting_receives_take_messages_in_the_order_they_arrive(buffered: bool) -> None:
    """Two receives wait; M0 (two packets) starts arriving before M1 (one packet), which is
    whole first. The first receive is M0's, as it is for posted buffers (matched on the first
    packet, §6.3 step 5): not the message that happened to complete first."""
    net = _Net()
    r = [net.recv(bytearray(2000) if buffered else None) for _ in range(2)]
    datas = [_data(0, 2000), _data(1, 500)]
    for i, d in enumerate(datas):
        net.a.core.send(B, d, header_data=i)
    reqs = net.out(net.a)  # M0 p0, M0 p1, M1 p0
    for i in (0, 2, 1):
        net.arrive(net.a, reqs[i])
    assert [net.got(h) for h in r] == [(A, 0), (A, 1)]
    _check_message(net.b.result(r[0]), datas[0])
    _check_message(net.b.result(r[1]), datas[1])


@pytest.mark.parametrize("buffered", [False, True], ids=["recv", "recv_into"])
def test_a_directed_receive_is_not_robbed_by_an_older_receive_whose_message_came_first(buffered: bool) -> None:
    """An any-source receive waits, then one for A only. C's message starts arriving first, then
    A's one-packet message comes whole: C's message is the first receive's, A's the directed
    one's. (Before, the first receive took A's message because it completed first, C's message
    went to the overflow list though its response said expected, and the receive for A waited
    for a message that had come.)"""
    net = _Net()
    size = 2000 if buffered else None
    anyone = net.recv(None if size is None else bytearray(size))
    from_a = net.recv(None if size is None else bytearray(size), source=A)
    dc, da = _data(2, 2000), _data(3, 500)
    net.c.core.send(B, dc, header_data=2)
    net.a.core.send(B, da, header_data=3)
    rc, ra = net.out(net.c), net.out(net.a)
    net.arrive(net.c, rc[0])
    net.arrive(net.a, ra[0])
    net.arrive(net.c, rc[1])
    assert (net.got(anyone), net.got(from_a)) == ((C, 2), (A, 3))
    _check_message(net.b.result(anyone), dc)
    _check_message(net.b.result(from_a), da)
    assert net.b.core.pending_messages == 0


def test_a_reservation_whose_message_expires_is_given_back() -> None:
    """C's message reserves the waiting receive with its first packet, then C goes silent. A's
    message, whole meanwhile, waits on the overflow list; when C's partial message expires the
    receive waits again and takes A's message: a message that never completed takes nobody's
    receive, and nothing is lost."""
    net = _Net(FepConfig(payload_size=1024, reassembly_timeout_ns=2_000_000, housekeeping_s=0.001))
    w = net.recv()
    net.c.core.send(B, _data(4, 2000))
    da = _data(5, 500)
    sa = net.a.core.send(B, da)
    rc, ra = net.out(net.c), net.out(net.a)
    net.arrive(net.c, rc[0])
    net.arrive(net.a, ra[0])
    assert net.b.result(w) is None and net.b.core.pending_messages == 1  # reserved by C's message
    net.settle(max_ns=20_000_000, cut=frozenset({C}))
    assert net.b.core.counters()["ses_fast_expired"] == 1
    _check_message(net.b.result(w), da)
    assert isinstance(net.a.result(sa), SendCompleted) and net.b.core.pending_messages == 0


def test_a_cancelled_reservation_leaves_its_message_to_the_next_receive() -> None:
    """A ``recv()`` reserved by a message's first packet is cancelled: it fails with CANCELLED at
    once and the message, when whole, waits for the next receive (delivered once, intact)."""
    net = _Net()
    w = net.recv()
    d = _data(6, 2000)
    net.a.core.send(B, d)
    reqs = net.out(net.a)
    net.arrive(net.a, reqs[0])
    assert net.b.core.cancel(w) is True
    net.out(net.b)
    ev = net.b.result(w)
    assert isinstance(ev, OpFailed) and isinstance(ev.error, Cancelled)
    net.arrive(net.a, reqs[1])
    m = net.b.core.recv_nowait()
    assert m is not None and bytes(m.data) == d
    assert net.b.core.recv_nowait() is None


def test_a_refused_first_packet_gives_its_reservation_back() -> None:
    """B reassembles one message at a time (``max_partial`` 1). Two receives wait; C's message
    reserves the first; A's first packet reserves the second but is NACKed for want of a
    reassembly slot, which gives the receive back; A resends and it takes it then. And a message
    longer than B's ``max_message`` fails at once (TOO_LONG) without keeping the receive."""
    net = _Net(FepConfig(payload_size=1024, max_partial=1))
    r1, r2 = net.recv(), net.recv()
    dc, da = _data(7, 2000), _data(8, 2000)
    net.c.core.send(B, dc, header_data=7)
    net.a.core.send(B, da, header_data=8)
    rc, ra = net.out(net.c), net.out(net.a)
    net.arrive(net.c, rc[0])
    net.arrive(net.a, ra[0])  # no reassembly slot: NACKed
    assert net.b.core.counters()["ses_fast_error_no_reassembly_slot"] == 1
    net.arrive(net.c, rc[1])
    assert net.got(r1) == (C, 7) and net.got(r2) is None
    net.settle()
    assert net.got(r2) == (A, 8)
    _check_message(net.b.result(r2), da)
    net = _Net(FepConfig(payload_size=1024, max_message=4096))
    w = net.recv()
    too_long = net.a.core.send(B, _data(9, 5000))
    net.settle()
    assert isinstance(net.a.result(too_long), OpFailed) and net.b.result(w) is None
    fine = _data(10, 500)
    net.a.core.send(B, fine)
    net.settle()
    _check_message(net.b.result(w), fine)


# -- the public API, in the simulator ---------------------------------------------------------------


def test_recv_through_the_simulated_endpoint_matches_in_arrival_order() -> None:
    """``recv()`` and ``recv(source=a)`` wait on b; c's 256 KiB message starts arriving, then a's
    small one comes whole while c's still arrives: the first ``recv()`` gets c's message and the
    directed one a's, and only one message was counted on the expected list by a waiting
    receive. (Before, the first took a's message and the directed one never completed.)"""
    eng, (a, b, c) = sim_endpoints(3)
    big, small = _data(11, 256 << 10), _data(12, 100)

    async def main() -> tuple[Message, Message]:
        anyone = asyncio.ensure_future(b.recv())
        from_a = asyncio.ensure_future(b.recv(source=a.address))
        sent = c.send_nowait(b.address, big)
        await asyncio.sleep(10e-6)  # c's first packets are at b, most are still to come
        assert isinstance(b.core, FepCore) and b.core.ses.fast is not None and b.core.ses.fast.partial_count == 1
        await a.send(b.address, small)
        await sent
        return await asyncio.wait_for(asyncio.gather(anyone, from_a), 1.0)

    m1, m2 = run(eng, main())
    assert (m1.source, bytes(m1.data)) == (c.address, big)
    assert (m2.source, bytes(m2.data)) == (a.address, small)
    counters = b.counters
    assert (counters["ses_fast_expected_waiting"], counters["ses_fast_unexpected"]) == (2, 0)


def test_a_waiting_recv_takes_one_message_over_roce_and_the_rest_count_unexpected() -> None:
    """The RoCE comparison mode has no expected/overflow list on the wire: a receive matches a
    message when the queue pair has it whole. One waiting ``recv()`` takes the first of three
    messages; the other two are counted unexpected and wait for the next receives, in order."""
    eng, (a, b) = sim_endpoints(2, roce=True)
    datas = [_data(13 + i, 20_000) for i in range(3)]

    async def main() -> list[bytes]:
        first = asyncio.ensure_future(b.recv())
        await asyncio.gather(*(a.send_nowait(b.address, d) for d in datas))
        got = [await first]
        assert b.counters["unexpected"] == 2
        got += [await b.recv(), await b.recv()]
        return [bytes(m.data) for m in got]

    assert run(eng, main()) == datas


# -- entries of the target engine's unexpected list (deferrable, rendezvous, DC sends) --------------


def _engine_fep() -> SesFep:
    """An SES whose buffer-less receives hold at most 4,096 bytes (``MessageConfig.max_message``)."""
    return SesFep(
        B,
        target=TargetConfig(max_payload=64),
        fast=MessageConfig(payload_size=64, max_message=4096),
        default=(PID, RI, JOB_T),
    )


def _deliver(f: SesFep, ses: bytes, payload: bytes, peer: str = A) -> Any:
    return f.on_deliver(Delivery(peer, Mode.RUD, 5, 0, NextHeader.STANDARD, ses, payload, 0, False))


def test_a_receive_without_buffer_does_not_take_a_deferral_longer_than_its_memory() -> None:
    """A deferrable send that claims 1 MiB is remembered (the deferred signal, §6.7) at no cost;
    a ``recv()`` would have to hold it in the endpoint's memory, which takes at most
    ``max_message`` bytes, as the fast path does: it leaves the deferral to a receive posted with
    a buffer that can hold it (which then sends the RTR). (Before, it allocated the claimed
    length at once: a stranger's one packet claiming 4 GiB allocated 4 GiB.)"""
    f = _engine_fep()
    r = _deliver(f, defer_hdr(1, REL, 1, 1 << 20, 0x21, 0), b"a" * 64)
    assert r is not None and RESPONSE.unpack(r[1])[0] == 1  # deferred: overflow list
    assert f.take_unexpected(tagged=False) is None
    assert [u.kind for u in f.default.matcher.unexpected] == ["deferred"]  # type: ignore[union-attr]
    posted = f.post_recv(bytearray(1 << 20))  # a buffer that holds it takes it: the RTR goes out
    [rtr] = f.packets_to_send()
    assert posted.buffer is not None and STANDARD[(1, "match")].decode(rtr.ses).opcode == SesOpcode.DEFERRABLE_RTR
    small = _deliver(f, defer_hdr(1, REL | EOM, 2, 64, 0x22, 0), b"b" * 64)
    assert small is not None and RESPONSE.unpack(small[1])[0] == 1
    got = f.take_unexpected(tagged=False)
    assert got is not None and not isinstance(got, Message) and len(got.buffer) == 64


def test_a_directed_receive_without_buffer_checks_where_an_engine_entry_came_from() -> None:
    """A DC send (the target engine's unexpected list) from A whose SES header claims C's
    initiator ID does not match a ``recv(source=C)``: the address PDS established must agree
    with the ID, as for fast-path messages. (Before, only the claimed ID was compared.)"""
    f = _engine_fep()
    forged = som_hdr(SesOpcode.SEND, EOM | DC | REL, 1, 8, init=initiator_id(C), pid=PID, ri=RI, job=JOB_T)
    r = _deliver(f, forged, b"x" * 8, peer=A)
    assert r is not None and RESPONSE.unpack(r[1])[0] == 1  # buffered on the overflow list
    assert f.take_unexpected(tagged=False, initiator=initiator_id(C), source=C) is None
    got = f.take_unexpected(tagged=False)
    assert got is not None and not isinstance(got, Message) and len(got.buffer) == 8


def test_a_directed_posted_receive_checks_the_address_too() -> None:
    """``recv_into(buffer, source=A)`` matches as ``recv(source=A)`` does: C's message whose SES
    header claims A's initiator ID does not land in it (the address PDS established must agree
    with the ID); it waits for a receive that takes it, and A's own message fills the buffer.
    (Before, a posted buffer compared only the claimed ID.)"""
    net = _Net()
    buf = bytearray(600)
    r = net.recv(buf, source=A)
    net.c.core.segmenter.initiator = initiator_id(A)  # C claims to be A
    forged, real = _data(20, 500), _data(21, 500)
    net.c.core.send(B, forged)
    for t in net.out(net.c):
        net.arrive(net.c, t)
    assert net.b.result(r) is None and net.b.core.pending_messages == 1
    net.a.core.send(B, real)
    for t in net.out(net.a):
        net.arrive(net.a, t)
    ev = net.b.result(r)
    assert isinstance(ev, MessageReceived) and ev.message.source == A and bytes(ev.message.data) == real
    m = net.b.core.recv_nowait()
    assert m is not None and m.source == C and bytes(m.data) == forged


def test_a_waiting_recv_takes_an_engine_message_that_arrived_first_in_the_same_batch() -> None:
    """One ``recv()`` waits. In one batch, the first packet of C's delivery-complete send (the
    target engine's path: it is buffered on the engine's unexpected list) comes before A's
    one-packet eager send (the fast path): the receive is C's, the message that arrived first,
    as it would be in two batches. (Before, the engine's entry was served to waiting receives
    only after the batch, by which time A's message had taken the receive.)"""
    net = _Net()
    w = net.recv()
    dc, da = _data(22, 2000), _data(23, 500)
    net.c.core.send(B, dc, dc=True, header_data=22)
    net.a.core.send(B, da, header_data=23)
    rc, ra = net.out(net.c), net.out(net.a)
    net.now += 1_000
    batch = [Datagram(rc[0].data, C, rc[0].ecn, source_port=rc[0].entropy)]
    batch.append(Datagram(ra[0].data, A, ra[0].ecn, source_port=ra[0].entropy))
    net.b.core.receive_batch(batch, net.now)
    net.b.drain()
    net.arrive(net.c, rc[1])
    assert net.got(w) == (C, 22)
    _check_message(net.b.result(w), dc)
    m = net.b.core.recv_nowait()
    assert m is not None and bytes(m.data) == da


def test_serve_keeps_the_queue_the_core_holds() -> None:
    """Waiters.serve puts the receives it could not serve back in the same deque, never a new
    one: FepCore tests that deque through its own reference (``_wq``) at every drain."""
    core = FepCore(B, job=JOB, pid=1, config=CFG, seed=2)
    q = core.waiters.queue
    assert core._wq is q
    w = Waiter(1, True, 5, 0, None, None)
    core.waiters.add(w)
    core.waiters.serve()  # nothing unexpected: the receive stays waiting
    assert core.waiters.queue is q and core._wq is q
    assert list(q) == [w]
