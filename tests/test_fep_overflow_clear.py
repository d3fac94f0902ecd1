"""A flow's second message whose first packet overtakes the first message's last one lands on
the overflow list when the receiver posts its receives one at a time, and its guaranteed
response is cleared (behaviour.md §6.4, §2.7): the exact sequence behind the CLEARs of the
secure all-to-all run in the simulator (tests/test_sim_secure.py).

The workloads receive each message of a flow into a sized receive (a ``DigestSink``) and post the
next one only when the previous one completed. The sender has both messages in flight; packets
sprayed over several paths arrive out of order, so the second message's first-arriving packet can
come while the first message still misses a packet. No posted receive matches it then (the first
one was consumed by the first message, the second is not posted yet): it is buffered on the
overflow list, and its response says so (``list`` = overflow), which makes it a guaranteed
response (§2.7): the target keeps it and holds CACK below it, and the ACK carrying it asks for a
clear (``REQ_CLEAR``). The initiator, with nothing left to send, clears it with a CLEAR CP; the
target, its CACK released, reports the new CACK at once (uet.pds.control) in an ACK naming a PSN
the initiator had already seen acknowledged (one duplicate ACK). The receive posted meanwhile
takes the message when it completes: each message is delivered once, intact.
(tests/test_sized_receive_clear.py: one message whose receive is posted after it arrived.)
"""

from __future__ import annotations

import pytest
from fep_harness import A_ADDR, B_ADDR, Node, pds_of, ses_of

from uet.fep import Datagram, FepCore, MessageReceived, SendCompleted, Transmit
from uet.ses.sink import DigestSink
from uet.wire.crc import crc32c
from uet.wire.pds import AckFlag, ControlType, PdsType

SIZE = 30_000  # 8 packets of at most 4,096 bytes, as in the simulator's run
PKTS = 8
_ACKS = (PdsType.ACK, PdsType.ACK_CC, PdsType.ACK_CCX)
_M32 = 0xFFFFFFFF


class _Run:
    """A sends two messages of one flow to B; B receives them one at a time into digest sinks,
    posting the second receive when the first completes (the workloads' ``_receive``)."""

    def __init__(self, arrival: list[int]) -> None:
        self.a = Node(FepCore(A_ADDR, job=7, pid=1, seed=1))
        self.b = Node(FepCore(B_ADDR, job=7, pid=1, seed=2))
        self.now = 0
        self.wire: list[tuple[str, Transmit]] = []
        self.data = [bytes([i + 1]) * SIZE for i in range(2)]
        self.sinks = [DigestSink(SIZE), DigestSink(SIZE)]
        self.recvs = [self.b.core.post_recv(self.sinks[0], source=A_ADDR)]
        # B sends to A too (into a posted receive), as every rank of an all-to-all does: sending
        # to A verifies A's address at B (uet.pds.validation), so no ACK asks A for that proof
        self.back_recv = self.a.core.post_recv(bytearray(6), source=B_ADDR)
        self.back = self.b.core.send(A_ADDR, b"from b")
        early = self._out(self.b)  # (it leaves now; A gets it after the sequence)
        self.sends = [self.a.core.send(B_ADDR, d, header_data=i) for i, d in enumerate(self.data)]
        reqs = self._out(self.a)
        assert len(reqs) == 2 * PKTS
        for i in arrival:  # A's requests reach B one by one in this order
            self._deliver(self.b, [reqs[i]], A_ADDR)
            if self.recvs[0] in self.b.done and len(self.recvs) == 1:
                self.recvs.append(self.b.core.post_recv(self.sinks[1], source=A_ADDR))
        pending = early + self._out(self.b)
        for _ in range(20):  # then every datagram is delivered, until both ends are quiet
            self._deliver(self.a, pending, B_ADDR)
            fw = self._out(self.a)
            self._deliver(self.b, fw, A_ADDR)
            pending = self._out(self.b)
            if not fw and not pending:
                break
        assert not fw and not pending

    def _out(self, node: Node) -> list[Transmit]:
        out = node.core.datagrams_to_send(self.now)
        self.wire += [(node.address, t) for t in out]
        return out

    def _deliver(self, node: Node, ts: list[Transmit], src: str) -> None:
        if ts:
            self.now += 1_000
            node.core.receive_batch([Datagram(t.data, src, t.ecn, source_port=t.entropy) for t in ts], self.now)
        node.drain()

    def sent(self, node: Node, *types: PdsType) -> list[Transmit]:
        return [t for src, t in self.wire if src == node.address and t.data[0] >> 3 in types]

    def check_delivered_once(self) -> None:
        """Both messages were received, each once, intact, in its own receive; both sends and
        B's message completed; nothing stays on B's unexpected list."""
        got = [ev for ev in self.b.events if isinstance(ev, MessageReceived)]
        assert [(ev.handle, ev.message.header_data) for ev in got] == [(self.recvs[0], 0), (self.recvs[1], 1)]
        assert [s.digest() for s in self.sinks] == [crc32c(d) for d in self.data]
        assert all(isinstance(self.a.done[h], SendCompleted) for h in self.sends)
        assert isinstance(self.b.done[self.back], SendCompleted) and self.back_recv in self.a.done
        assert self.b.core.pending_messages == 0 and self.b.core.recv_nowait() is None

    def overflow_responses(self) -> list[int]:
        """The ``list`` field of each SES response B sent for A's messages (0 expected, 1 overflow)."""
        out = []
        for t in self.sent(self.b, *_ACKS):
            ses = ses_of(t)
            if ses is not None:
                out.append(ses.list)
        return out


def _clear_requests(run: _Run) -> list[Transmit]:
    return [t for t in run.sent(run.b, *_ACKS) if pds_of(t).flags & AckFlag.REQ_CLEAR]


def _clears(run: _Run) -> list[Transmit]:
    return [t for t in run.sent(run.a, PdsType.CONTROL) if pds_of(t).ctl_type == ControlType.CLEAR]


def test_in_order_second_message_finds_its_receive_and_needs_no_clear() -> None:
    """The second message's first packet comes after the first message completed: the second
    receive is posted by then (expected list), no response is guaranteed, nothing to clear."""
    run = _Run(list(range(2 * PKTS)))
    run.check_delivered_once()
    assert run.overflow_responses() == [0, 0]
    assert not _clear_requests(run) and not _clears(run)
    c = run.a.core.counters()
    assert c.get("acks_dup", 0) == 0 and c["acks_rx"] == 2 * PKTS


#: arrival orders (PSNs from the PDC's first) in which the second message's first packet (PSN 8)
#: comes before the first message is whole: PSN 8 just ahead of PSN 7, and the order the flow
#: 10.0.0.2 → 10.0.1.1 of the simulator's secure all-to-all run (tests/test_sim_secure.py) showed
#: at its target, where the first message's PSN 6 came after PSN 8
OVERTAKING = {
    "swap": [*range(PKTS - 1), PKTS, PKTS - 1, *range(PKTS + 1, 2 * PKTS)],
    "simulated": [0, 1, 4, 2, 5, 7, 3, 8, 6, 9, 10, 11, 12, 15, 13, 14],
}


@pytest.mark.parametrize("order", OVERTAKING.values(), ids=list(OVERTAKING))
def test_second_message_overtaking_the_first_goes_overflow_and_is_cleared_once(order: list[int]) -> None:
    """The second message's first packet overtakes the first message's last one: overflow
    list, one ACK with REQ_CLEAR, one CLEAR CP naming the last PSN, one ACK answering it."""
    run = _Run(order)
    run.check_delivered_once()
    # the first message went into its posted receive; the second one over the overflow list
    assert run.overflow_responses() == [0, 1]
    start = pds_of(run.sent(run.a, PdsType.RUD_REQ)[0]).psn
    last = (start + 2 * PKTS - 1) & _M32
    # the overflow response is guaranteed: the ACK that carries it (naming the second message's
    # last-arriving packet) is the one asking for a clear, and CACK stays just below that PSN
    (ask,) = _clear_requests(run)
    h, resp = pds_of(ask), ses_of(ask)
    assert resp is not None and resp.list == 1
    assert (h.cack_psn + h.ack_psn_offset) & _M32 == (start + order[-1]) & _M32
    assert h.ack_psn_offset == 1
    # A has nothing left to send, so it clears with one CLEAR CP: CLEAR_PSN = tx_base - 1 = PSN 15
    (clear,) = _clears(run)
    assert pds_of(clear).payload == last
    # B releases CACK to PSN 15 and says so at once; that ACK names PSN 15, which A had already
    # seen acknowledged: the only duplicate ACK of the sequence
    final = run.sent(run.b, *_ACKS)[-1]
    h = pds_of(final)
    assert h.cack_psn == last and h.ack_psn_offset == 0 and ses_of(final) is None
    c = run.a.core.counters()
    assert c["ctl_tx_CLEAR"] == 1 and c["acks_dup"] == 1 and c["acks_rx"] == 2 * PKTS + 1
    assert run.b.core.counters()["ctl_rx_CLEAR"] == 1
