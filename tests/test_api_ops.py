"""The public SES API on ``uet.Endpoint``: every operation between two FEPs in one event loop over
real loopback UDP (issue 4 items 1–4). Exact packets and every return-code path are covered by the
sans-I/O tests (``tests/test_ses_*``); these check the API end to end."""

from __future__ import annotations

import asyncio
import os
import struct

import pytest

from uet import Access, AmoOp, AmoType, Endpoint, Peer, ReturnCode, SesError, UetError
from uet.endpoint import DeliveryError, EndpointConfig, Mode, with_config
from uet.link import DirectLink, loopback_addresses
from uet.ses import errors as E

T = 20.0
JOB = 42


async def _pair(config: EndpointConfig | None = None, *, job_b: int = JOB, pid_b: int = 1):
    a, b = loopback_addresses(2)
    ea = await Endpoint.open(a, job=JOB, pid=1, port=0, config=config)
    la = ea.link
    assert isinstance(la, DirectLink)
    eb = await Endpoint.open(b, job=job_b, pid=pid_b, port=0, peer_port=la.port, config=config)
    lb = eb.link
    assert isinstance(lb, DirectLink)
    la.peer_port = lb.port
    return ea, eb


def w(coro):
    return asyncio.wait_for(coro, T)


async def test_untagged_and_tagged_send_recv_with_ignore_mask_and_sources() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        await w(ea.send(eb.address, b"plain"))
        await w(ea.send(eb.address, b"tag 0x1234", tag=0x1234))
        await w(ea.send(eb.address, b"tag 0x5678", tag=0x5678, header_data=99))
        big = os.urandom(50_000)
        await w(ea.send(eb.address, big, tag=7))
        # tagged receives never take untagged messages and vice versa
        m = await w(eb.recv(tag=0x5678))
        assert (m.data, m.tag, m.header_data, m.source) == (b"tag 0x5678", 0x5678, 99, ea.address)
        m = await w(eb.recv(tag=0x1200, ignore=0xFF))  # wildcard on the low byte
        assert m.data == b"tag 0x1234" and m.tag == 0x1234
        m = await w(eb.recv(tag=0, ignore=(1 << 64) - 1, source=ea.address))  # any tag, directed
        assert m.data == big and m.tag == 7
        m = await w(eb.recv())
        assert m.data == b"plain" and m.tag is None
        # a receive from another source does not match; any-source does
        pending = asyncio.ensure_future(eb.recv(tag=3, source="127.0.0.1"))
        await w(ea.send(eb.address, b"three", tag=3))
        any_src = await w(eb.recv(tag=3))
        assert any_src.data == b"three"
        assert not pending.done()
        pending.cancel()
        # a recv() posted before the message arrives
        waiter = asyncio.ensure_future(eb.recv(tag=11))
        await asyncio.sleep(0)
        await w(ea.send(eb.address, b"eleven", tag=11))
        assert (await w(waiter)).data == b"eleven"
        assert eb.counters["messages_received"] == 6


async def test_posted_receive_buffers_truncation_and_cancel() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        buf = bytearray(100)
        h = eb.post_recv(buf, tag=1)
        await w(ea.send(eb.address, b"x" * 60, tag=1))
        m = await w(h)
        assert m.nbytes == 60 and bytes(m.data) == b"x" * 60 and buf[:60] == b"x" * 60 and not m.truncated
        # too long without truncate → TOO_LONG at both ends (the response carries it)
        small = eb.post_recv(bytearray(10), tag=2)
        with pytest.raises(E.TooLong):
            await w(ea.send(eb.address, b"y" * 50, tag=2))
        with pytest.raises(E.TooLong) as ei:
            await w(small)
        assert ei.value.return_code == ReturnCode.TOO_LONG
        # truncate keeps the first bytes
        tb = bytearray(8)
        t = eb.post_recv(tb, tag=3, truncate=True)
        await w(ea.send(eb.address, bytes(range(40)), tag=3))
        m = await w(t)
        assert bytes(tb) == bytes(range(8)) and m.truncated and m.message_length == 40
        # recv_into takes an unexpected message already waiting
        await w(ea.send(eb.address, b"early", tag=4))
        into = bytearray(16)
        m = await w(eb.recv_into(into, tag=4))
        assert bytes(m.data) == b"early"
        # cancel
        c = eb.post_recv(bytearray(10), tag=5)
        assert c.cancel()
        with pytest.raises(E.Cancelled):
            await w(c)
        assert not c.cancel()
        # cancelling the awaiting task withdraws the receive: the next message goes elsewhere
        task = asyncio.ensure_future(eb.recv_into(bytearray(10), tag=6))
        await asyncio.sleep(0)
        task.cancel()
        await w(ea.send(eb.address, b"six", tag=6))
        assert (await w(eb.recv(tag=6))).data == b"six"


async def test_write_read_and_remote_write_completion() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        mem = bytearray(300_000)
        mr = eb.register(mem, access=Access.REMOTE_READ | Access.REMOTE_WRITE)
        data = os.urandom(120_000)
        await w(ea.write(eb.address, mr.key, 1000, data))
        assert mem[1000:121_000] == data
        got = await w(ea.read(eb.address, mr.key, 1000, 120_000))
        assert got == data
        into = bytearray(64)
        view = await w(ea.read(eb.address, mr.key, 1010, 64, into=into))
        assert bytes(view) == data[10:74] == bytes(into)
        await w(ea.write(eb.address, mr.key, 0, b"hd", header_data=0xABC))
        wc = await w(eb.next_write())
        assert (wc.key, wc.offset, wc.length, wc.header_data, wc.source) == (mr.key, 0, 2, 0xABC, ea.address)
        await w(ea.write(eb.address, mr.key, 5, b"dc", dc=True))
        assert mem[5:7] == b"dc"
        # a mmap-like buffer: memoryview of an array
        import array

        arr = array.array("Q", [0] * 8)
        mr2 = eb.register(arr)
        await w(ea.write(eb.address, mr2.key, 8, struct.pack("<Q", 77)))
        assert arr[1] == 77
        # an anonymous mmap
        import mmap

        mm = mmap.mmap(-1, 8192)
        mr3 = eb.register(mm, access=Access.REMOTE_WRITE | Access.REMOTE_READ)
        await w(ea.write(eb.address, mr3.key, 5000, b"mapped"))
        assert mm[5000:5006] == b"mapped"
        assert await w(ea.read(eb.address, mr3.key, 4998, 8)) == b"\0\0mapped"


async def test_atomics_fetching_non_fetching_and_compare_swap() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        mem = bytearray(64)
        mr = eb.register(mem, access=Access.ALL)
        assert await w(ea.atomic(eb.address, mr.key, 0, AmoOp.SUM, AmoType.UINT64, 5, fetch=True)) == 0
        assert await w(ea.atomic(eb.address, mr.key, 0, AmoOp.SUM, AmoType.UINT64, 7)) is None
        assert struct.unpack_from("<Q", mem, 0)[0] == 12
        assert await w(ea.compare_swap(eb.address, mr.key, 0, AmoType.UINT64, 12, 100)) == 12
        assert await w(ea.compare_swap(eb.address, mr.key, 0, AmoType.UINT64, 12, 200)) == 100  # no swap
        assert struct.unpack_from("<Q", mem, 0)[0] == 100
        await w(ea.atomic(eb.address, mr.key, 8, AmoOp.MAX, AmoType.INT32, [-3, 9]))
        assert struct.unpack_from("<ii", mem, 8) == (0, 9)
        await w(ea.atomic(eb.address, mr.key, 16, AmoOp.SUM, AmoType.DOUBLE, 2.5))
        assert await w(ea.atomic(eb.address, mr.key, 16, AmoOp.READ, AmoType.DOUBLE, fetch=True)) == 2.5
        old = await w(ea.atomic(eb.address, mr.key, 32, AmoOp.SUM, AmoType.UINT128, (1 << 100), fetch=True))
        assert old == 0 and int.from_bytes(mem[32:48], "little") == 1 << 100
        with pytest.raises(E.AmoUnsupportedOp):
            await w(ea.atomic(eb.address, mr.key, 16, AmoOp.BXOR, AmoType.DOUBLE, 1.0))
        with pytest.raises(E.AmoUnaligned):
            await w(ea.atomic(eb.address, mr.key, 4, AmoOp.SUM, AmoType.UINT64, 1))
        with pytest.raises(E.AmoUnsupportedDt):
            await w(ea.atomic(eb.address, mr.key, 0, AmoOp.SUM, AmoType.DOUBLE_COMPLEX, bytes(16)))
        with pytest.raises(E.AmoUnsupportedSize):
            await w(ea.atomic(eb.address, mr.key, 0, AmoOp.SUM, AmoType.UINT64, bytes(5)))


async def test_memory_error_paths() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        mem = bytearray(4096)
        ro = eb.register(mem, access=Access.REMOTE_READ)
        with pytest.raises(E.BadMkey) as ei:
            await w(ea.read(eb.address, ro.key ^ 1, 0, 8))
        assert ei.value.return_code == ReturnCode.BAD_MKEY and isinstance(ei.value, UetError)
        with pytest.raises(E.PermViolation):
            await w(ea.write(eb.address, ro.key, 0, b"nope"))
        with pytest.raises(E.PermViolation):
            await w(ea.atomic(eb.address, ro.key, 0, AmoOp.SUM, AmoType.UINT64, 1))
        with pytest.raises(E.BadAddr):
            await w(ea.read(eb.address, ro.key, 4000, 200))
        rw = eb.register(bytearray(100), access=Access.REMOTE_WRITE)
        with pytest.raises(E.UnsupportedSize):  # the whole write must fit (§6.5)
            await w(ea.write(eb.address, rw.key, 90, b"z" * 20))
        eb.deregister(ro)
        with pytest.raises(E.BadMkey):
            await w(ea.read(eb.address, ro.key, 0, 8))
        assert mem == bytes(4096)  # nothing was written by the refused requests


async def test_addressing_errors_and_absolute_addressing() -> None:
    ea, eb = await _pair(job_b=7, pid_b=3)
    async with ea, eb:
        mem = bytearray(64)
        own = eb.register(mem)  # restricted to job 7
        anyjob = eb.register(bytearray(64), job=None)
        with pytest.raises(E.BadJobId):  # relative addressing, job 42 unknown at that FEP
            await w(ea.write(Peer(eb.address, pid=3), own.key, 0, b"a"))
        with pytest.raises(E.BadJobId):  # pid 3 belongs to job 7, not 42
            await w(ea.send(Peer(eb.address, pid=3, job=42), b"a"))
        with pytest.raises(E.BadPid):
            await w(ea.send(Peer(eb.address, pid=9, job=7), b"a"))
        with pytest.raises(E.BadIndex):
            await w(ea.send(Peer(eb.address, pid=3, ri=5, job=7), b"a"))
        with pytest.raises(E.Undeliverable):  # absolute addressing, no such process
            await w(ea.send(Peer(eb.address, pid=9, relative=False), b"a"))
        # a stale generation is adopted from the BAD_GENERATION response, as a write does (§6.4)
        await w(ea.send(Peer(eb.address, pid=3, job=7, generation=5), b"gen"))
        assert (await w(eb.recv())).data == b"gen"
        # absolute addressing from job 42: a region restricted to job 7 is "unknown"...
        with pytest.raises(E.BadMkey):
            await w(ea.write(Peer(eb.address, pid=3, relative=False), own.key, 0, b"a"))
        # ...one open to any job is reachable
        await w(ea.write(Peer(eb.address, pid=3, relative=False), anyjob.key, 0, b"ok"))
        await w(ea.send(Peer(eb.address, pid=3, relative=False), b"abs"))
        assert (await w(eb.recv())).data == b"abs"
        # the right job with relative addressing works too
        await w(ea.write(Peer(eb.address, pid=3, job=7), own.key, 0, b"rel"))
        assert mem[:3] == b"rel"
        assert issubclass(E.BadPid, SesError)


async def test_rendezvous_and_deferrable_sends() -> None:
    cfg = EndpointConfig(rendezvous_threshold=20_000, eager_length=4096)
    ea, eb = await _pair(cfg)
    async with ea, eb:
        data = os.urandom(100_000)
        # rendezvous: eager part on the unexpected list, the rest read when a receive takes it
        fut = ea.send_nowait(eb.address, data, tag=1)
        m = await w(eb.recv(tag=1))
        assert m.data == data
        await w(fut)
        assert ea.counters["ses_init_ops"] >= 1
        # deferrable: no receive posted → deferred; the receive's RTR restarts it
        d2 = os.urandom(30_000)
        fut = ea.send_nowait(eb.address, d2, tag=2, protocol="deferrable")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + T  # wait for the deferral itself, with the file's generous bound
        while not eb.counters["ses_tgt_deferred"] and loop.time() < deadline:
            await asyncio.sleep(0.005)
        assert eb.counters["ses_tgt_deferred"] == 1 and not fut.done()
        buf = bytearray(30_000)
        m = await w(eb.recv_into(buf, tag=2))
        assert bytes(buf) == d2 and m.nbytes == 30_000
        await w(fut)
        assert ea.counters["ses_init_rtr_received"] == 1
        # a delivery-complete send: the target places it before answering (a guaranteed response)
        h = eb.post_recv(bytearray(100), tag=4)
        await w(ea.send(eb.address, b"delivered", tag=4, dc=True))
        assert bytes((await w(h)).data) == b"delivered"
        # a deferrable send that finds a posted receive goes straight in
        h = eb.post_recv(bytearray(20_000), tag=3)
        await w(ea.send(eb.address, d2[:20_000], tag=3, protocol="deferrable"))
        assert bytes((await w(h)).data) == d2[:20_000]


@pytest.mark.parametrize("mode", [Mode.ROD, Mode.RUDI])
async def test_operations_in_other_modes(mode: Mode) -> None:
    ea, eb = await _pair()
    async with ea, eb:
        mem = bytearray(16)
        mr = eb.register(mem, access=Access.ALL | Access.IDEMPOTENT_SAFE)
        await w(ea.send(eb.address, b"m" * 9000, mode=mode, tag=1))
        assert (await w(eb.recv(tag=1))).data == b"m" * 9000
        await w(ea.write(eb.address, mr.key, 0, b"12345678", mode=mode))
        assert await w(ea.read(eb.address, mr.key, 0, 8, mode=mode)) == b"12345678"


async def test_send_failure_to_absent_peer_is_delivery_error() -> None:
    (a, nobody) = loopback_addresses(2)
    # the retry budget's time part (retry_time_ns, 2 s by default) cut short: the count still applies
    ea = await Endpoint.open(a, job=JOB, pid=1, port=0, config=with_config(EndpointConfig(), retry_time_ns=200_000_000))
    async with ea:
        with pytest.raises(DeliveryError) as ei:
            await w(ea.send(nobody, b"hello"))
        assert ei.value.return_code == ReturnCode.UNDELIVERABLE
        with pytest.raises(E.Undeliverable):
            await w(ea.read(nobody, 1, 0, 8))


async def test_a_waiting_directed_recv_ignores_a_message_that_only_claims_its_source() -> None:
    """``recv(source=A)`` waiting when a message arrives from C whose SES header claims A's
    initiator ID: it is not A's message (the arrival address differs), so it stays unexpected and
    the directed receive gets A's real message."""
    ea, eb = await _pair()
    (c,) = loopback_addresses(1)
    ec = await Endpoint.open(c, job=JOB, pid=1, port=ea.link.port, peer_port=eb.link.port)  # B answers there
    async with ea, eb, ec:
        directed = asyncio.ensure_future(eb.recv(source=ea.address))
        await asyncio.sleep(0)
        ec.segmenter.initiator = ea.initiator_id  # the forger claims A's initiator ID
        await w(ec.send(eb.address, b"forged"))  # acknowledged: it is at B
        # it arrived and waits on the unexpected list, matching no directed receive: not A's
        # (another address), nor C's (A's initiator ID): both must agree
        assert eb.counters["ses_fast_messages"] == 1 and not directed.done()
        assert eb.recv_nowait(source=ea.address) is None and eb.recv_nowait(source=ec.address) is None
        await w(ea.send(eb.address, b"real"))
        m = await w(directed)
        assert (m.data, m.source) == (b"real", ea.address)
        other = await w(eb.recv())
        assert (other.data, other.source) == (b"forged", ec.address)
