"""The SES API end to end between two OS processes over real UDP on loopback (issue 4).

A spawned target process opens an Endpoint (job 42, PIDonFEP 1), registers a read-write region
with known contents and a read-only one, and echoes every tagged message back reversed with tag
+ 1. The test process (another Endpoint) runs tagged send/receive, RMA write and read, a fetching
atomic, compare-and-swap, and the error paths — bad key (``BAD_MKEY``), out of bounds
(``BAD_ADDR`` for a read, ``UNSUPPORTED_SIZE`` for a write, §6.5), permission
(``PERM_VIOLATION``) and wrong job (``BAD_JOB_ID``) — then checks the target's final memory.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import struct
from multiprocessing.connection import Connection
from typing import Any

from uet import Access, AmoOp, AmoType, Endpoint, Peer, ReturnCode, SesError
from uet.link import loopback_addresses
from uet.ses import errors as E

JOB = 42
T = 20.0
MEM = bytes(range(256)) * 16


def _target(conn: Connection, address: str) -> None:
    """The target process: serve until a tagged b"quit" arrives, then report its memory."""
    from uet.endpoint import run

    async def main() -> None:
        ep = await Endpoint.open(address, job=JOB, pid=1)
        mem = bytearray(MEM)
        rw = ep.register(mem, access=Access.REMOTE_READ | Access.REMOTE_WRITE | Access.REMOTE_ATOMIC)
        ro = ep.register(bytearray(1024), access=Access.REMOTE_READ)
        conn.send((rw.key, ro.key))
        while True:
            m = await ep.recv(tag=0, ignore=(1 << 64) - 1)
            if m.data == b"quit":
                break
            assert m.tag is not None
            await ep.send(m.source, m.data[::-1], tag=m.tag + 1)
        conn.send(bytes(mem))
        await ep.close()

    run(main())


async def _get(conn: Connection) -> Any:
    ok = await asyncio.to_thread(conn.poll, T)
    assert ok, "target process did not answer"
    return conn.recv()


async def test_operations_and_error_paths_between_processes() -> None:
    a, b = loopback_addresses(2)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_target, args=(child, b), daemon=True)
    proc.start()
    child.close()
    try:
        rw, ro = await _get(parent)
        async with await Endpoint.open(a, job=JOB, pid=1) as ep:
            # tagged send/receive, both ways
            data = os.urandom(30_000)
            await asyncio.wait_for(ep.send(b, data, tag=0x100), T)
            back = await asyncio.wait_for(ep.recv(tag=0x101), T)
            assert back.data == data[::-1] and back.source == b and back.tag == 0x101
            # write then read it back
            blob = os.urandom(10_000)
            await asyncio.wait_for(ep.write(b, rw, 2048, blob[:2048]), T)
            assert await asyncio.wait_for(ep.read(b, rw, 2048, 2048), T) == blob[:2048]
            assert await asyncio.wait_for(ep.read(b, rw, 0, 16), T) == MEM[:16]
            # fetching atomic and compare-and-swap on the first 8 bytes
            start = struct.unpack_from("<Q", MEM, 0)[0]
            old = await asyncio.wait_for(ep.atomic(b, rw, 0, AmoOp.SUM, AmoType.UINT64, 5, fetch=True), T)
            assert old == start
            assert await asyncio.wait_for(ep.compare_swap(b, rw, 0, AmoType.UINT64, start + 5, 99), T) == start + 5
            assert await asyncio.wait_for(ep.compare_swap(b, rw, 0, AmoType.UINT64, 1, 2), T) == 99
            # error paths, each carrying its return code
            cases = [
                (ep.read(b, rw ^ 0x10, 0, 8), E.BadMkey, ReturnCode.BAD_MKEY),
                (ep.read(b, rw, 4090, 100), E.BadAddr, ReturnCode.BAD_ADDR),
                (ep.write(b, rw, 4000, b"x" * 200), E.UnsupportedSize, ReturnCode.UNSUPPORTED_SIZE),
                (ep.write(b, ro, 0, b"x"), E.PermViolation, ReturnCode.PERM_VIOLATION),
                (ep.atomic(b, ro, 0, AmoOp.SUM, AmoType.UINT64, 1), E.PermViolation, ReturnCode.PERM_VIOLATION),
                (ep.write(Peer(b, job=7), rw, 0, b"x"), E.BadJobId, ReturnCode.BAD_JOB_ID),
                (ep.send(Peer(b, pid=5), b"x"), E.BadPid, ReturnCode.BAD_PID),
            ]
            for coro, cls, rc in cases:
                try:
                    await asyncio.wait_for(coro, T)
                except SesError as e:
                    assert isinstance(e, cls) and e.return_code == rc, (e, cls)
                else:
                    raise AssertionError(f"expected {cls.__name__}")
            # the target still serves after the errors
            await asyncio.wait_for(ep.send(b, b"ping", tag=7), T)
            assert (await asyncio.wait_for(ep.recv(tag=8), T)).data == b"gnip"
            await asyncio.wait_for(ep.send(b, b"quit", tag=1), T)
            final = await _get(parent)
        assert final[2048:4096] == blob[:2048]
        assert struct.unpack_from("<Q", final, 0)[0] == 99
        assert final[8:2048] == MEM[8:2048]
        proc.join(T)
        assert proc.exitcode == 0
    finally:
        if proc.is_alive():
            proc.kill()
