"""``PdsCore.receive_batch`` (header prediction) against one ``receive_datagram`` per item.

Two receiving cores with the same seed and the same message layer get the same datagrams — one
through ``receive_batch`` (with the ``on_data`` hook of :class:`~uet.ses.message.Reassembler`),
the twin one ``receive_datagram`` at a time — while an initiator sends several messages through
seeded loss, reordering, duplication and CE marks, in batches of random sizes. After every batch
both must have sent byte-identical datagrams and hold the same PDC state and counters; at the end
both delivered the same messages, byte for byte."""

from __future__ import annotations

import random
from collections.abc import Callable
from operator import attrgetter

from hypothesis import example, given, settings
from hypothesis import strategies as st

from uet.pds import Acked, Delivery, Failed, Mode, PdsConfig, PdsCore
from uet.pds.pdc import TargetPdc
from uet.ses.message import DECLINED, MessageConfig
from uet.ses.reassembly import Reassembler
from uet.ses.segmenter import Segmenter

A, B = "10.0.0.1", "10.0.0.2"
PAYLOAD = 512
#: the target PDC fields receive_batch writes back at the end of a run
FIELDS = (
    "rx_base", "rod_next", "high_rcvd", "rcvd_bytes", "last_rx", "max_clear", "ack.gen_count",
    "ack.trigger", "ack.flags", "entropy", "ack.due", "ack.deadline", "first_rx", "state",
)  # fmt: skip


def receiver(batch: bool) -> tuple[PdsCore, Reassembler]:
    core = PdsCore(B, PdsConfig(ack_gen_trigger=4096), rng=random.Random(7))
    ra = Reassembler(config=MessageConfig(payload_size=PAYLOAD, inplace_threshold=2048))
    core.on_deliver = lambda d: ra.deliver(d.peer, d.mode, d.next_hdr, d.ses, d.payload)
    core.payload_views = True
    if batch:
        core.on_data = ra.deliver_datagram
    return core, ra


def state(core: PdsCore) -> list:
    return [
        (pid, tuple(attrgetter(f)(p) for f in FIELDS), sorted(p.rcvd))
        for pid, p in sorted(core.pdcs.items())
        if isinstance(p, TargetPdc)
    ]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    mode=st.sampled_from([Mode.RUD, Mode.ROD]),
    loss=st.sampled_from([0.0, 0.02, 0.1]),
    dup=st.sampled_from([0.0, 0.05]),
    reorder=st.sampled_from([0.0, 0.05]),
    ce=st.sampled_from([0.0, 0.05]),
)
# RUD: a predicted run once set ``rod_next`` where one receive_datagram per packet does not
@example(seed=119, mode=Mode.RUD, loss=0.0, dup=0.0, reorder=0.0, ce=0.0)
# ROD with loss: a held run made due by its byte count, not by an AR, set ``ar_held`` where one
# receive_datagram per packet does not (its ACK then went out early when the hole filled)
@example(seed=27061, mode=Mode.ROD, loss=0.1, dup=0.0, reorder=0.0, ce=0.0)
def test_receive_batch_equals_one_receive_datagram_per_item(seed, mode, loss, dup, reorder, ce) -> None:
    rng = random.Random(seed)
    snd = PdsCore(A, PdsConfig(rto_ns=2_000_000), rng=random.Random(seed))
    fast, fast_ra = receiver(True)
    slow, slow_ra = receiver(False)
    seg = Segmenter(job_id=0, initiator=1, payload_size=PAYLOAD)
    sizes = [rng.choice([100, PAYLOAD, 3000, 20_000, 40_000]) for _ in range(4)]
    msgs = [rng.randbytes(n) for n in sizes]
    now = 1_000_000
    for i, m in enumerate(msgs):
        for ses, pl, som, eom in seg.packets(m, 100 + i):
            snd.submit(B, mode, 3, ses, bytes(pl), token=i, som=som, eom=eom, now=now)
    total = sum(seg.count(len(m)) for m in msgs)
    acked = failed = 0
    for _step in range(4000):
        now += 50_000
        out = snd.datagrams_to_send(now)
        wire = []
        for d, _dst, _e in out:
            if rng.random() < loss:
                continue
            ecn = 3 if rng.random() < ce else 2
            wire.append((d, A, ecn))
            if rng.random() < dup:
                wire.append((d, A, ecn))
        for i in range(len(wire) - 1):
            if rng.random() < reorder:
                wire[i], wire[i + 1] = wire[i + 1], wire[i]
        pos = 0
        while pos < len(wire):
            k = rng.randint(1, 40)
            batch = wire[pos : pos + k]
            pos += k
            fast.receive_batch(batch, now)
            for d, src, ecn in batch:
                slow.receive_datagram(d, now, source=src, ecn=ecn)
            assert state(fast) == state(slow)
            f_out, s_out = fast.datagrams_to_send(now), slow.datagrams_to_send(now)
            assert f_out == s_out
            assert fast.counters == slow.counters
            for d, _dst, _e in f_out:
                if rng.random() >= loss:
                    snd.receive_datagram(d, now, source=B)
        for core in (snd, fast, slow):
            if (t := core.get_timer()) is not None and t <= now:
                core.handle_timer(now)
        assert fast.datagrams_to_send(now) == slow.datagrams_to_send(now)
        while (ev := snd.next_event()) is not None:
            acked += type(ev) is Acked
            failed += type(ev) is Failed
        if acked + failed == total:
            break
    assert acked + failed == total  # every packet ended (Failed only when its retries ran out)
    got_fast = {m.message_id: bytes(m.data) for m in fast_ra.completed}
    got_slow = {m.message_id: bytes(m.data) for m in slow_ra.completed}
    assert got_fast == got_slow
    if not failed:
        assert got_fast == {100 + i: m for i, m in enumerate(msgs)}
    assert fast_ra.counters == slow_ra.counters


def test_runs_take_the_hook_and_a_declined_packet_takes_the_general_path() -> None:
    fast, ra = receiver(True)
    calls = []
    hook = fast.on_data
    assert hook is not None

    def counting(*a):
        r = hook(*a)
        calls.append(r is None)
        return r

    fast.on_data = counting
    snd = PdsCore(A, PdsConfig(), rng=random.Random(3))
    seg = Segmenter(job_id=0, initiator=1, payload_size=PAYLOAD)
    # a first message establishes the PDC (its packets carry SYN until the first ACK)
    (first,) = seg.packets(b"hello", 8)
    snd.submit(B, Mode.RUD, 3, first[0], bytes(first[1]), token=0, som=True, eom=True, now=0)
    fast.receive_batch([(d, A, 2) for d, _dst, _e in snd.datagrams_to_send(0)], 5)
    for d, _dst, _e in fast.datagrams_to_send(5):
        snd.receive_datagram(d, 6, source=B)
    assert calls == [False]  # (offered by the general path too, it declined a whole message)
    calls.clear()
    data = random.Random(4).randbytes(PAYLOAD * 20)
    for ses, pl, som, eom in seg.packets(data, 9):
        snd.submit(B, Mode.RUD, 3, ses, bytes(pl), token=1, som=som, eom=eom, now=7)
    out = [(d, A, 2) for d, _dst, _e in snd.datagrams_to_send(7)]
    assert len(out) == 20 and not calls
    fast.receive_batch(out, 10)
    # packet 0 (SOM) takes receive_datagram and starts a run predicting SOM headers; packet 1 (the
    # first middle packet: another SES header kind) ends it, takes receive_datagram (the message
    # layer checks that header in full) and starts a run of middle packets: 2..18 are predicted;
    # the last one (EOM: another header kind again) takes receive_datagram, which completes it.
    # receive_datagram offers each of those three to the hook first, which declines them (a new
    # message, a header not yet checked, the packet that completes it)
    assert calls == [False, False] + [True] * 17 + [False]
    _hello, m = ra.completed
    assert bytes(m.data) == data
    assert fast.counters["rx"] == fast.counters["delivered"] == 21


def test_the_hook_declines_whatever_it_cannot_place_without_changing_anything() -> None:
    ra = Reassembler(config=MessageConfig(payload_size=PAYLOAD, inplace_threshold=2048))
    seg = Segmenter(job_id=0, initiator=1, payload_size=PAYLOAD)
    data = random.Random(6).randbytes(PAYLOAD * 6)
    pk = [b"\0" * 12 + s + bytes(p) for s, p, _som, _eom in seg.packets(data, 3)]
    som_ses = pk[0][12 : len(pk[0]) - PAYLOAD]
    assert ra.deliver(A, 0, 3, som_ses, pk[0][len(som_ses) + 12 :]) is None
    assert ra.deliver(A, 0, 3, pk[1][12:56], pk[1][56:]) is None  # a middle header, checked in full
    before = (ra.counters, ra.partial_count)
    declined = [
        ra.deliver_datagram("10.9.9.9", 3, pk[2], 56, 1),  # another peer
        ra.deliver_datagram(A, 2, pk[2], 56, 1),  # another next header
        ra.deliver_datagram(A, 3, pk[1], 56, 1),  # an offset already received
        ra.deliver_datagram(A, 3, pk[5], 56, 1),  # would complete the message
        ra.deliver_datagram(A, 3, pk[2][:100], 56, 1),  # payload shorter than its payload_length
    ]
    assert all(r is DECLINED for r in declined)
    assert (ra.counters, ra.partial_count) == before
    for p in pk[2:5]:
        assert ra.deliver_datagram(A, 3, p, 56, 2) is None
    assert ra.deliver(A, 0, 3, pk[5][12:56], pk[5][56:]) is not None  # completes: RC_OK response
    (m,) = ra.completed
    assert bytes(m.data) == data


def test_the_hook_hands_receive_memory_that_digests_a_slice_of_the_datagram() -> None:
    """Into a posted receive that is a :class:`~uet.ses.sink.ReceiveSink`, the hook places each
    packet's payload as ``bytes`` (the sink's copy, sliced from the datagram), not as a view; the
    digest is the message's."""
    from types import SimpleNamespace

    from uet.ses.sink import DigestSink, digest

    class Recording(DigestSink):
        __slots__ = ("kinds",)

        def __init__(self, size: int) -> None:
            super().__init__(size)
            self.kinds: list[type] = []

        def place(self, offset: int, data: bytes | memoryview) -> None:
            self.kinds.append(type(data))
            super().place(offset, data)

    data = random.Random(8).randbytes(PAYLOAD * 6)
    sink = Recording(len(data))
    ra = Reassembler(config=MessageConfig(payload_size=PAYLOAD, inplace_threshold=2048))
    ra.decline = True  # (as the FEP runs it: posted receives are offered through ``admit``)
    ra.admit = lambda tagged, mb, init, job, length, peer: SimpleNamespace(buffer=sink)
    seg = Segmenter(job_id=0, initiator=1, payload_size=PAYLOAD)
    pk = [b"\0" * 12 + s + bytes(p) for s, p, _som, _eom in seg.packets(data, 3)]
    som_ses = pk[0][12 : len(pk[0]) - PAYLOAD]
    assert ra.deliver(A, 0, 3, som_ses, pk[0][len(som_ses) + 12 :]) is None
    assert ra.deliver(A, 0, 3, pk[1][12:56], pk[1][56:]) is None
    del sink.kinds[:]
    for p in pk[2:5]:
        assert ra.deliver_datagram(A, 3, p, 56, 2) is None
    assert sink.kinds == [bytes] * 3
    ra.deliver(A, 0, 3, pk[5][12:56], pk[5][56:])
    assert sink.digest() == digest(data)


def ra_hook(ra: Reassembler) -> Callable[[Delivery], object]:
    """``on_deliver`` of a core whose message layer is ``ra``."""
    return lambda d: ra.deliver(d.peer, d.mode, d.next_hdr, d.ses, d.payload)


def test_cc_requests_are_offered_to_the_cc_hook_with_the_same_result() -> None:
    """RCCC sends its data as CC requests (a 16-byte PDS header): every one a PDC accepts is
    offered to ``on_cc_data`` (the reassembler's ``deliver_cc_datagram``) first, which places the
    middle packets of a message itself; a twin receiver without the hook sends the same
    datagrams (ACKs, grants), keeps the same PDC state and counters, and delivers the same bytes."""
    cfg = PdsConfig(cc="rccc", ack_gen_trigger=4096)
    recv = []
    for _ in range(2):  # the hooked receiver, then its twin
        core = PdsCore(B, cfg, rng=random.Random(7))
        ra = Reassembler(config=MessageConfig(payload_size=PAYLOAD, inplace_threshold=2048))
        core.on_deliver = ra_hook(ra)
        core.payload_views = True
        recv.append((core, ra))
    calls: list[bool] = []
    fast, fast_ra = recv[0]

    def counting(*a: object) -> object:
        r = fast_ra.deliver_cc_datagram(*a)  # type: ignore[arg-type]
        calls.append(r is None)
        return r

    fast.on_cc_data = counting
    snd = PdsCore(A, cfg, rng=random.Random(3))
    seg = Segmenter(job_id=0, initiator=1, payload_size=PAYLOAD)
    data = random.Random(4).randbytes(PAYLOAD * 20)
    for ses, pl, som, eom in seg.packets(data, 9):
        snd.submit(B, Mode.RUD, 3, ses, bytes(pl), token=1, som=som, eom=eom, now=0)
    now = 0
    for _ in range(2000):
        out = snd.datagrams_to_send(now)
        assert all(d[0] >> 3 != 2 for d, _dst, _e in out)  # (no plain RUD request: CC requests only)
        for d, _dst, _e in out:
            now += 100
            for core, _ra in recv:
                core.receive_datagram(d, now, source=A)
            back = [core.datagrams_to_send(now) for core, _ra in recv]
            assert back[0] == back[1]
            for b, _dst, _e in back[0]:
                snd.receive_datagram(b, now + 50, source=B)
        now += 1000
        for core in (snd, fast, recv[1][0]):
            t = core.get_timer()
            if t is not None and t <= now:
                core.handle_timer(now)
        if fast_ra.completed:
            break
    (m,) = fast_ra.completed
    (m2,) = recv[1][1].completed
    assert bytes(m.data) == bytes(m2.data) == data
    assert state(fast) == state(recv[1][0]) and fast.counters == recv[1][0].counters
    assert fast_ra.counters == recv[1][1].counters
    assert calls.count(True) == 17 and len(calls) == 20  # the middle packets after the first one
