"""A sized receive (``post_recv(sink)``) posted after its message began to arrive: the message
takes the overflow list, so its response is guaranteed and the sender must clear it with a CLEAR
when no request follows (behaviour.md §6.4, §2.7). Posted before, the message is expected and
nothing needs clearing.

This is why a secure all-to-all run whose receivers post ``recv_into(DigestSink)`` sends CLEARs a
buffer-less ``recv()`` did not: a buffer-less receive that waits is served on the expected list
even before a message arrives (uet.ses.fep ``reserve``), while a sized receive posted after a
flow's next message started arriving finds that message on the overflow list. (A ``recv()``
called after that, too: one waiting receive is reserved by one message,
tests/test_ses_waiting_recv.py.)"""

from __future__ import annotations

from fep_harness import FepPair

from uet.fep import MessageReceived
from uet.ses.sink import DigestSink
from uet.wire.crc import crc32c

SIZE = 30_000


def _warm(pair: FepPair) -> int:
    """One message with its receive posted first: the target's proof-of-address CLEAR request
    (uet.pds.validation) comes with the first exchange; return the CLEARs sent by then."""
    r = pair.b.core.post_recv(None)
    s = pair.a.core.send(pair.b.address, b"first")
    assert pair.run_until(lambda: pair.b.result(r) is not None and pair.a.result(s) is not None)
    pair.run_until(lambda: False, max_ns=5_000_000)  # the proof of address settles
    return pair.a.core.counters().get("ctl_tx_CLEAR", 0)


def _message(n: int) -> bytes:
    return bytes((i * 7 + n) & 0xFF for i in range(SIZE))


def test_a_sized_receive_posted_late_finds_the_message_on_the_overflow_list_and_it_is_cleared() -> None:
    pair = FepPair(seed=3)
    base = _warm(pair)
    data = _message(1)
    s = pair.a.core.send(pair.b.address, data)
    assert pair.run_until(lambda: pair.a.result(s) is not None)  # acknowledged before any receive
    sink = DigestSink(SIZE)
    r = pair.b.core.post_recv(sink)
    assert pair.run_until(lambda: pair.b.result(r) is not None)
    ev = pair.b.result(r)
    assert isinstance(ev, MessageReceived) and ev.message.message_length == SIZE
    assert sink.digest() == crc32c(data)
    assert pair.run_until(lambda: pair.a.core.counters().get("ctl_tx_CLEAR", 0) > base)
    assert pair.b.core.counters().get("ctl_rx_CLEAR", 0) >= 1


def test_a_sized_receive_posted_first_takes_the_expected_list_and_nothing_is_cleared() -> None:
    pair = FepPair(seed=3)
    base = _warm(pair)
    data = _message(2)
    sink = DigestSink(SIZE)
    r = pair.b.core.post_recv(sink)
    s = pair.a.core.send(pair.b.address, data)
    assert pair.run_until(lambda: pair.b.result(r) is not None and pair.a.result(s) is not None)
    assert sink.digest() == crc32c(data)
    pair.run_until(lambda: False, max_ns=50_000_000)  # long past any CLEAR timer
    assert pair.a.core.counters().get("ctl_tx_CLEAR", 0) == base
