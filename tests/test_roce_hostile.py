"""Hostile input: a queue pair fed arbitrary datagrams (with a correct ICRC, so they reach the
parser and both state machines) never raises, never answers one datagram with more than a few,
and keeps its queues bounded (architecture.md principle 5)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from uet.roce import QpConfig, QueuePair
from uet.wire import net
from uet.wire.roce import BTH, EXTENSIONS, OpCode
from uet.wire.rocepkt import seal

ME, PEER = "10.0.0.1", "10.0.0.2"

bodies = st.one_of(
    st.binary(min_size=0, max_size=80),
    # a valid-looking BTH for our QP with a random RC opcode and PSN, then random bytes
    st.builds(
        lambda op, psn, ack, rest: BTH.encode(BTH.make(opcode=op, dest_qp=0x11, psn=psn, ack_req=ack)) + rest,
        st.sampled_from(sorted(EXTENSIONS) + [OpCode.CNP, 0x15, 0x24, 0x64]),
        st.integers(0, 0xFFFFFF) | st.integers(0, 40),
        st.integers(0, 1),
        st.binary(max_size=300),
    ),
)


@settings(max_examples=150, deadline=None)
@given(items=st.lists(st.tuples(bodies, st.integers(0, 3)), min_size=1, max_size=40), seed=st.integers(0, 99))
def test_arbitrary_datagrams_never_crash(items: list[tuple[bytes, int]], seed: int) -> None:
    qp = QueuePair(ME, 0x11, config=QpConfig(pmtu=256, max_rd_atomic=4), seed=seed, start_psn=0)
    qp.connect(PEER, 0x22, 0)
    region = qp.register(bytearray(4096))
    assert region.key
    for _ in range(3):
        qp.post_recv(1024)
    qp.post_send(b"x" * 600)
    qp.post_read(100, 0, 1)
    now = 0
    for body, ecn in items:
        now += 1_000
        data = seal(body, net.ip_bytes(PEER), net.ip_bytes(ME), qp.entropy) if len(body) >= 12 else body
        qp.receive_datagram(data, now, source=PEER, ecn=ecn)
        out = qp.datagrams_to_send(now)
        t = qp.get_timer()
        if t is not None and t <= now:
            qp.handle_timer(now)
        assert len(out) <= 8  # some request packets may go, never a storm per datagram
        assert qp.responder.reads_queued() <= qp.config.max_rd_atomic
        while qp.next_event() is not None:
            pass
