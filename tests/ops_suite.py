"""Every SES operation between two open endpoints, checked end to end: the suite the
link tests (IP protocol 253 on loopback) and the network-namespace tests run over each link.

:func:`every_operation` covers send, tagged send, RMA write and read (with a remote write
completion), fetching and non-fetching atomics, compare-and-swap, a delivery-complete send, a
rendezvous and a deferrable send (deferred first, restarted by the receive's RTR), and the
delivery modes RUD (all of the above), ROD (send, write, read), RUDI (idempotent write and read on
an idempotent-safe region, behaviour.md §2.14) and UUD (a datagram), then the provider opcodes:
a sync group (two SYNC_WRITEs and its SYNC_ATOMIC sent first, applied last) and the tagged
atomics (TSEND_ATOMIC, TSEND_FETCH_ATOMIC on posted receives). It returns the names of the
operations it checked, so a caller can assert the list is whole."""

from __future__ import annotations

import asyncio
import os
import struct

from uet import Access, AmoOp, AmoType
from uet.endpoint import Endpoint, Mode

T = 20.0

#: what :func:`every_operation` checks, in order
OPERATIONS = (
    "send",
    "tagged_send",
    "write",
    "write_with_completion",
    "read",
    "atomic",
    "fetch_atomic",
    "compare_swap",
    "dc_send",
    "rendezvous",
    "deferrable",
    "rod",
    "rudi",
    "uud",
    "sync_write_and_atomic",
    "tagged_atomic",
    "tagged_fetch_atomic",
)


def _w(coro):
    return asyncio.wait_for(coro, T)


async def every_operation(ea: Endpoint, eb: Endpoint) -> list[str]:
    """Run every operation from ``ea`` to ``eb`` and check its effect; returns the names done."""
    done: list[str] = []
    b = eb.address
    big = os.urandom(20_000)
    await _w(ea.send(b, big))
    assert (await _w(eb.recv())).data == big
    done.append("send")
    await _w(ea.send(b, b"tagged", tag=0x77, header_data=5))
    m = await _w(eb.recv(tag=0x77))
    assert (m.data, m.header_data, m.source) == (b"tagged", 5, ea.address)
    done.append("tagged_send")

    mem = bytearray(40_000)
    mr = eb.register(mem, access=Access.ALL)
    data = os.urandom(30_000)
    await _w(ea.write(b, mr.key, 100, data))
    assert mem[100:30_100] == data
    done.append("write")
    await _w(ea.write(b, mr.key, 0, b"hd", header_data=0xABC))
    wc = await _w(eb.next_write())
    assert (wc.offset, wc.length, wc.header_data) == (0, 2, 0xABC)
    done.append("write_with_completion")
    assert await _w(ea.read(b, mr.key, 100, 30_000)) == data
    done.append("read")

    amo = bytearray(16)
    ar = eb.register(amo, access=Access.ALL)
    assert await _w(ea.atomic(b, ar.key, 0, AmoOp.SUM, AmoType.UINT64, 7)) is None
    done.append("atomic")
    assert await _w(ea.atomic(b, ar.key, 0, AmoOp.SUM, AmoType.UINT64, 5, fetch=True)) == 7
    done.append("fetch_atomic")
    assert await _w(ea.compare_swap(b, ar.key, 0, AmoType.UINT64, 12, 99)) == 12
    assert struct.unpack_from("<Q", amo)[0] == 99
    done.append("compare_swap")

    h = eb.post_recv(bytearray(64), tag=4)
    await _w(ea.send(b, b"delivered", tag=4, dc=True))
    assert bytes((await _w(h)).data) == b"delivered"
    done.append("dc_send")

    rdv = os.urandom(30_000)
    fut = ea.send_nowait(b, rdv, tag=5, protocol="rendezvous")
    assert (await _w(eb.recv(tag=5))).data == rdv
    await _w(fut)
    done.append("rendezvous")

    d2 = os.urandom(20_000)
    fut = ea.send_nowait(b, d2, tag=6, protocol="deferrable")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + T
    while not eb.counters["ses_tgt_deferred"] and loop.time() < deadline:
        await asyncio.sleep(0.005)  # waits for the deferral itself (an event), bounded
    assert eb.counters["ses_tgt_deferred"] >= 1 and not fut.done()
    buf = bytearray(20_000)
    await _w(eb.recv_into(buf, tag=6))
    await _w(fut)
    assert bytes(buf) == d2
    done.append("deferrable")

    await _w(ea.send(b, b"o" * 9000, mode=Mode.ROD, tag=7))
    assert (await _w(eb.recv(tag=7))).data == b"o" * 9000
    await _w(ea.write(b, mr.key, 0, b"rod-write", mode=Mode.ROD))
    assert await _w(ea.read(b, mr.key, 0, 9, mode=Mode.ROD)) == b"rod-write"
    done.append("rod")

    safe = bytearray(8192)
    sr = eb.register(safe, access=Access.REMOTE_READ | Access.REMOTE_WRITE | Access.IDEMPOTENT_SAFE)
    payload = os.urandom(6000)
    await _w(ea.write(b, sr.key, 10, payload, mode=Mode.RUDI))
    assert safe[10:6010] == payload
    assert await _w(ea.read(b, sr.key, 10, 6000, mode=Mode.RUDI)) == payload
    done.append("rudi")

    h = eb.post_recv(bytearray(100), tag=8)
    await _w(ea.send(b, b"datagram", tag=8, mode=Mode.UUD))
    assert bytes((await _w(h)).data) == b"datagram"
    done.append("uud")

    sync_mem = bytearray(64)
    gr = eb.register(sync_mem, access=Access.ALL)
    await _w(ea.atomic(b, gr.key, 56, AmoOp.SUM, AmoType.UINT64, 1, sync=(3, 3)))
    assert sync_mem[56:] == bytes(8)  # the terminator waits for the group's two writes
    await _w(ea.write(b, gr.key, 0, b"s" * 20, sync=(3, 3)))
    await _w(ea.write(b, gr.key, 20, b"t" * 20, sync=(3, 3)))
    assert struct.unpack_from("<Q", sync_mem, 56)[0] == 1 and sync_mem[:40] == b"s" * 20 + b"t" * 20
    done.append("sync_write_and_atomic")

    acc = bytearray(struct.pack("<Q", 40))
    h = eb.post_recv(acc, tag=0x5151)
    assert await _w(ea.atomic(b, 0x5151, 0, AmoOp.SUM, AmoType.UINT64, 2, tagged=True)) is None
    assert (await _w(h)).tag == 0x5151 and struct.unpack_from("<Q", acc)[0] == 42
    done.append("tagged_atomic")
    h = eb.post_recv(acc, tag=0x5152)
    assert await _w(ea.atomic(b, 0x5152, 0, AmoOp.SUM, AmoType.UINT64, 1, tagged=True, fetch=True)) == 42
    await _w(h)
    assert struct.unpack_from("<Q", acc)[0] == 43
    done.append("tagged_fetch_atomic")
    return done
