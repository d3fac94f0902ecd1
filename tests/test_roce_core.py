"""RoceCore: the FEP core's surface and events over RC queue pairs (uet/roce/core.py)."""

from __future__ import annotations

import pytest

from uet.fep import Closed, MessageReceived, OpCompleted, OpFailed, SendCompleted
from uet.fep.errors import DeliveryError, EndpointClosed
from uet.roce import QpConfig
from uet.roce.core import PROVIDER_HEADER, RoceCore, UnsupportedAtomic
from uet.ses.events import WriteCompleted
from uet.wire.ses import AmoOp, AmoType


class Net:
    """Cores in one process with a lossless 1 us wire and a fake clock."""

    def __init__(self, n: int = 2, **kw) -> None:
        self.dir: dict[str, RoceCore] = {}
        cfg = QpConfig(pmtu=1024, dcqcn=None)
        self.cores = [RoceCore(f"10.0.0.{i + 1}", config=cfg, seed=i, directory=self.dir, **kw) for i in range(n)]
        self.now = 0
        self.events: dict[str, list] = {c.address: [] for c in self.cores}

    def run(self, until: int = 10**10) -> None:
        for _ in range(100_000):
            moved = False
            for c in self.cores:
                for t in c.datagrams_to_send(self.now):
                    self.dir[t.destination].receive_datagram(t.data, self.now + 1000, source=c.address, ecn=t.ecn)
                    moved = True
                while (e := c.next_event()) is not None:
                    self.events[c.address].append(e)
            if moved:
                self.now += 1000
                continue
            ts = [t for t in (c.get_timer() for c in self.cores) if t is not None]
            if not ts or min(ts) > until:
                return
            self.now = max(self.now, min(ts))
            for c in self.cores:
                c.handle_timer(self.now)
        raise AssertionError("did not settle")


def test_send_tagged_untagged_header_data_and_matching() -> None:
    net = Net()
    a, b = net.cores
    h1 = a.send(b.address, b"untagged")
    h2 = a.send(b.address, b"tagged", tag=0x1234, header_data=99)
    h3 = a.send(b.address, b"x" * 5000, tag=7)
    r_tag = b.post_recv(None, tag=0x1200, ignore=0xFF)
    net.run()
    assert net.events[a.address] == [SendCompleted(h1), SendCompleted(h2), SendCompleted(h3)]
    (ev,) = net.events[b.address]
    assert isinstance(ev, MessageReceived) and ev.handle == r_tag
    assert ev.message.data == b"tagged" and ev.message.tag == 0x1234 and ev.message.header_data == 99
    assert ev.message.source == a.address
    # the others wait on the unexpected list
    m = b.recv_nowait()
    assert m is not None and m.data == b"untagged" and m.tag is None and m.header_data is None
    buf = bytearray(100)
    r = b.post_recv(buf, tag=7, truncate=True)
    ev = b.next_event()
    assert ev.handle == r and bytes(ev.message.data) == b"x" * 100 and ev.message.message_length == 5000
    assert b.recv_nowait() is None
    assert a.counters()["messages_sent"] == 3 and b.counters()["unexpected"] == 2


def test_rma_write_with_immediate_read_and_atomics() -> None:
    net = Net()
    a, b = net.cores
    mem = bytearray(64)
    mr = b.register(mem)
    assert 0 < mr.key < 1 << 32
    hw = a.write(b.address, mr.key, 8, b"abcd", header_data=5)
    hr = a.read(b.address, mr.key, 8, 4)
    into = bytearray(8)
    hr2 = a.read(b.address, mr.key, 6, 6, into=into)
    mem[32:40] = (10).to_bytes(8, "little")
    hs = a.atomic(b.address, mr.key, 32, AmoOp.SUM, AmoType.UINT64, 5, fetch=True)
    hc = a.compare_swap(b.address, mr.key, 32, AmoType.INT64, 15, -1)
    hn = a.atomic(b.address, mr.key, 32, AmoOp.SUM, AmoType.UINT64, 1)
    hx = a.atomic(b.address, mr.key, 32, AmoOp.MIN, AmoType.UINT64, 1)
    net.run()
    ev = {e.handle: e for e in net.events[a.address]}
    assert ev[hw] == OpCompleted(hw, None)
    assert ev[hr] == OpCompleted(hr, b"abcd")
    assert bytes(ev[hr2].value) == b"\0\0abcd" and into[:6] == b"\0\0abcd"
    assert ev[hs] == OpCompleted(hs, 10) and ev[hc] == OpCompleted(hc, 15) and ev[hn] == OpCompleted(hn, None)
    assert isinstance(ev[hx], OpFailed) and isinstance(ev[hx].error, UnsupportedAtomic)
    assert int.from_bytes(mem[32:40], "little") == 0  # -1 + 1 wraps to 0
    assert net.events[b.address] == [WriteCompleted(0, 0, 4, 5, a.address, 0)]
    with pytest.raises(ValueError):
        a.write(b.address, mr.key, 0, b"x", header_data=1 << 32)


def test_remote_access_error_fails_the_operation_and_the_connection() -> None:
    net = Net()
    a, b = net.cores
    h = a.write(b.address, 0xBAD, 0, b"x")
    h2 = a.send(b.address, b"after")
    net.run()
    evs = {e.handle: e for e in net.events[a.address]}
    assert type(evs[h].error).__name__ == "RemoteAccessError"
    assert type(evs[h2].error).__name__ == "Flushed"
    with pytest.raises(DeliveryError, match="NAK 0x62"):  # the connection is dead, not the endpoint
        a.send(b.address, b"more")


def test_receiver_that_stops_consuming_pushes_back_with_rnr() -> None:
    net = Net(recv_credits=2, max_unexpected=2)
    a, b = net.cores
    hs = [a.send(b.address, bytes([i])) for i in range(5)]
    net.run(until=2_000_000)
    done = [e for e in net.events[a.address] if isinstance(e, SendCompleted)]
    assert len(done) < 5 and a.counters()["rnr_naks_received"] >= 1  # the sender is held back
    got = []
    for _ in range(5):
        while (m := b.recv_nowait()) is None:
            net.run(until=net.now + 200_000)
        got.append(m.data)
    net.run()
    assert got == [bytes([i]) for i in range(5)]
    assert [e.handle for e in net.events[a.address] if isinstance(e, SendCompleted)] == hs


def test_close_waits_for_queued_operations() -> None:
    net = Net()
    a, b = net.cores
    h = a.send(b.address, b"last")
    w = a.post_recv(None)
    a.close(net.now)
    with pytest.raises(EndpointClosed):
        a.send(b.address, b"no")
    net.run()
    evs = net.events[a.address]
    assert evs[0] == SendCompleted(h)
    assert isinstance(evs[1], OpFailed) and evs[1].handle == w and evs[-1] == Closed(True)


def test_provider_header_size_and_unknown_peer() -> None:
    assert PROVIDER_HEADER.size == 24
    lone = RoceCore("10.9.9.9")
    with pytest.raises(EndpointClosed):
        lone.send("10.9.9.8", b"x")
    lone.receive_datagram(b"\x04" + bytes(20), 0, source="10.9.9.8")
    assert lone.counters()["dropped_unknown_qp"] == 1


def test_a_peer_that_never_answers_fails_every_operation_and_bound_receive() -> None:
    """Issue 12 (live all_to_all hung): after the retry budget every pending SEND, WRITE and READ
    fails with RetryExceeded (UNDELIVERABLE), a receive bound to that peer fails too instead of
    waiting for messages the dead connection can never bring, a receive from anyone keeps
    waiting, and a later operation or bound receive towards the peer is refused at once as
    UNDELIVERABLE (it was CLOSED, the name of a closed endpoint)."""
    from uet.roce.cm import StaticCm
    from uet.roce.errors import RetryExceeded
    from uet.transport import error_name

    cfg = QpConfig(pmtu=1024, dcqcn=None, timeout=1, retry_cnt=2)
    a = RoceCore("10.0.0.1", config=cfg, seed=1, cm=StaticCm(4))
    peer = "10.0.0.2"
    ops = [a.send(peer, b"m" * 3000), a.write(peer, 0x55, 0, b"w"), a.read(peer, 0x55, 0, 8)]
    bound = a.post_recv(None, source=peer)
    anyone = a.post_recv(None)
    now, events = 0, []
    for _ in range(100):  # the peer never answers: only the timer moves things
        a.datagrams_to_send(now)
        while (e := a.next_event()) is not None:
            events.append(e)
        t = a.get_timer()
        if t is None:
            break
        now = max(now, t)
        a.handle_timer(now)
    assert a.get_timer() is None and a.counters()["retry_exceeded"] == 1
    failed = {e.handle: e.error for e in events if isinstance(e, OpFailed)}
    assert set(failed) == {*ops, bound} and len(events) == 4
    assert all(isinstance(failed[h], RetryExceeded) and error_name(failed[h]) == "UNDELIVERABLE" for h in ops)
    assert error_name(failed[bound]) == "UNDELIVERABLE" and anyone not in failed
    for later in (lambda: a.send(peer, b"later"), lambda: a.post_recv(None, source=peer)):
        with pytest.raises(DeliveryError, match="retry count 2 exhausted") as exc:
            later()
        assert error_name(exc.value) == "UNDELIVERABLE"
