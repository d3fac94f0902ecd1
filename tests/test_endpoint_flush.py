"""The asyncio adapter's flush and wake-up rules (uet.endpoint): a pre-posted buffer-less receive,
the ACK leaving in the same flush as an immediate reply, and early timer wake-ups."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from uet.endpoint import Endpoint
from uet.link import loopback_addresses
from uet.link.direct import DirectLink
from uet.ses.errors import Cancelled

T = 30.0


async def _pair() -> tuple[Endpoint, Endpoint]:
    a, b = loopback_addresses(2)
    ea = await Endpoint.open(a, port=0)
    assert isinstance(ea.link, DirectLink)
    eb = await Endpoint.open(b, port=0, peer_port=ea.link.port)
    assert isinstance(eb.link, DirectLink)
    ea.link.peer_port = eb.link.port
    return ea, eb


async def test_post_recv_none_takes_the_next_message_on_the_expected_list() -> None:
    """A buffer-less receive posted before the message comes completes with it, and the message is
    placed on the expected list: its response is not guaranteed, so the sender sends no CLEAR. A
    message that comes before any receive waits on the overflow list, whose guaranteed response
    the sender must clear (behaviour.md §2.7, §6.4).

    A first exchange comes before both: the target asks a source it has not verified for the
    CLEAR that proves it receives (anti-amplification, uet.pds.validation), and that CLEAR is
    not the one under test."""
    ea, eb = await _pair()
    async with ea, eb:
        w = eb.post_recv(None)
        await asyncio.wait_for(ea.send(eb.address, b"first"), T)
        await asyncio.wait_for(w, T)
        await _until(lambda: ea.counters.get("ctl_tx_CLEAR", 0) >= 1)  # the proof of address
        base = ea.counters.get("ctl_tx_CLEAR", 0)
        r = eb.post_recv(None)
        assert not r.done()
        await asyncio.wait_for(ea.send(eb.address, b"early receive"), T)
        m = await asyncio.wait_for(r, T)
        assert m.data == b"early receive" and m.source == ea.address
        assert ea.counters.get("ctl_tx_CLEAR", 0) == base
        await asyncio.wait_for(ea.send(eb.address, b"late receive"), T)
        assert (await asyncio.wait_for(eb.recv(), T)).data == b"late receive"
        await _until(lambda: ea.counters.get("ctl_tx_CLEAR", 0) > base)  # it leaves right after the ACK asking for it
        # at least one: on a loaded machine the CLEAR's own timer may send it again before its ACK
        assert ea.counters["ctl_tx_CLEAR"] >= base + 1


async def _until(cond: Callable[[], bool]) -> None:
    """Wait (at most ``T``, in 10 ms steps) for ``cond``; the assertion after it says what failed.

    The bound is the file's generous reply timeout, not a tight one: on a loaded machine the CLEAR
    can take longer than a second to leave, and a passing test never waits for the bound."""
    for _ in range(int(T * 100)):
        if cond():
            return
        await asyncio.sleep(0.01)


async def test_post_recv_none_cancel() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        r = eb.post_recv(None, tag=5)
        assert r.cancel()
        with pytest.raises(Cancelled):
            await asyncio.wait_for(r, T)
        assert not r.cancel()


async def test_an_immediate_reply_leaves_in_the_same_flush_as_the_ack() -> None:
    """The echo side's ACK of a request and the reply its application sends as soon as the
    request completes go out in one ``send_marked`` batch (the pump runs after the completion
    callbacks), so the requester can take both in one batch."""
    ea, eb = await _pair()
    batches: list[list[int]] = []
    inner = eb.link.send_marked

    def record(datagrams: Any, tos: Any) -> None:
        batches.append([d[0] >> 3 for d, _dst, _ent in datagrams])
        inner(datagrams, tos)

    async with ea, eb:
        r0 = eb.post_recv(None)  # posted first: no CLEAR exchange follows the warm-up
        await asyncio.wait_for(ea.send(eb.address, b"warm-up"), T)  # the PDCs exist
        await asyncio.wait_for(r0, T)
        nxt = eb.post_recv(None)

        async def echo() -> None:
            m = await nxt
            await eb.send(m.source, m.data)

        task = asyncio.create_task(echo())
        await asyncio.sleep(0.001)  # the echo task waits on its receive (well inside close_idle_ns)
        eb._send_marked = record
        fut = ea.send_nowait(eb.address, b"ping")
        assert (await asyncio.wait_for(ea.recv(), T)).data == b"ping"
        await asyncio.wait_for(asyncio.gather(fut, task), T)
        # the first flush after the ping: the ACK (PDS type 7-9) and the reply request (2: RUD)
        first = batches[0]
        assert any(7 <= t <= 9 for t in first) and 2 in first


async def test_an_early_wake_up_only_re_arms() -> None:
    """A wake-up before the core's earliest deadline (it moved later after the wake-up was armed)
    runs no timer and re-arms for the deadline; a due one runs the timers."""
    ea, eb = await _pair()
    async with ea, eb:
        fep = ea.fep
        fired: list[int] = []
        real_handle = fep.handle_timer

        def handle_timer(now: int) -> None:
            fired.append(now)
            real_handle(now)

        fep.handle_timer = handle_timer  # type: ignore[method-assign]  # counts the runs
        ahead = ea.clock() + 5_000_000_000
        fep.get_timer = lambda: ahead  # type: ignore[method-assign]
        ea._on_timer()
        assert fired == []
        assert ea._timer is not None and ea._timer_at == ahead
        past = ea.clock() - 1_000_000
        fep.get_timer = lambda: past  # type: ignore[method-assign]
        ea._on_timer()
        assert len(fired) == 1
        del fep.get_timer


async def test_each_link_batch_is_answered_before_the_next_is_taken() -> None:
    """Two link batches taken in one wake-up: the first one's ACKs leave before the second is
    received, so one flush never answers more than one batch (the PDS coalescing and its 64-PSN
    SACK bitmap are sized for a batch; answering several at once while CACK was held by an
    uncleared guaranteed response made the sender resend packets that had arrived)."""
    ea, eb = await _pair()
    captured: list[tuple[bytes, str, int]] = []
    flushes: list[int] = []
    inner = eb.link.send_marked

    def record(datagrams: Any, tos: Any) -> None:
        flushes.append(len(datagrams))
        inner(datagrams, tos)

    async with ea, eb:
        data = bytes(range(256)) * (128 * 4096 // 256)
        r = eb.post_recv(None)
        ea._send_marked = lambda datagrams, tos: captured.extend(datagrams)
        fut = ea.send_nowait(eb.address, data)
        for _ in range(100):
            if len(captured) >= 128:
                break
            await asyncio.sleep(0)
        assert len(captured) == 128  # the first window, held back from the wire
        ea._send_marked = ea.link.send_marked
        eb._send_marked = record
        eb._on_batch([(d, ea.address, 0) for d, _dst, _ent in captured[:64]])
        eb._on_batch([(d, ea.address, 0) for d, _dst, _ent in captured[64:]])
        assert len(flushes) == 1  # the first batch's ACK, sent before the second batch went in
        await asyncio.wait_for(fut, T)
        assert (await asyncio.wait_for(r, T)).data == data
