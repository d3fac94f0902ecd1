"""The raw-UDP references of ``uet-bench pair`` and ``uet-bench rtt``: the fastest raw Python
transfer and round trip this machine allows, measured in the same run as UET (architecture.md
principle 6; issue 17 item 5).

UET's direct link uses no kernel offload (no UDP GSO/GRO: one datagram per ``sendto`` and per
``recvmsg``, :mod:`uet.link.direct`), so neither do the references. Python offers no
``recvmmsg``/``sendmmsg``, and ``recvmsg_into`` with several buffers scatters one datagram rather
than reading several, so a batched system call is not among the candidates; the readiness
batching UET's link does (one wakeup, then reads until EAGAIN) is.

Blast (``pair``): the sender is the same for every candidate — a blocking socket without a Python
timeout (a Python ``settimeout`` puts a ``poll()`` before every call), the datagrams sliced before
the clock starts, a window of credits from the receiver so the kernel buffer does not just drop,
and a credit wait bounded by the kernel's ``SO_RCVTIMEO`` (free per call) so a lost credit
reopens the window instead of hanging. The receiver candidates (:data:`BLAST_CANDIDATES`):

* ``blocking``: a blocking socket without a Python timeout: one ``recv_into`` per datagram (the
  sender's address learnt from the first one), ``SO_RCVTIMEO`` ending the run if the end marker
  is lost;
* ``drain``: a non-blocking socket, one ``poll()`` per burst, then ``recv_into`` until EAGAIN;
* ``asyncio``: a datagram protocol on the run's event loop (uvloop unless ``--no-uvloop``).

Goodput is bytes received / (arrival of the end marker − first send); each round runs every
candidate and the best is the round's reference (``raw_udp_gbps``; ``raw_candidate`` names it).

Round trip (``rtt``), candidates :data:`RTT_CANDIDATES`: ``blocking`` — both sides blocking
sockets without a Python timeout, one ``sendto`` and one ``recv`` per trip (the plain blocking
ping-pong) —, ``spin`` — both sides non-blocking sockets retried in a loop until the datagram is
there (the busy-polling ping-pong, perftest's default way of waiting for a completion) — and
``asyncio`` — datagram protocols on both sides; the lower p50 is the reference. ``spin`` is what
keeps the reference honest on an idle machine: there a blocked process sleeps in the kernel and
each wake-up from the idle CPU adds tens of µs to every trip (blocking p50 ≈ 40–50 µs against a
minimum of 10 µs on the two-core machine), while a loaded one wakes at once; a spinning process
never sleeps, so its round trip is the same either way (≈ 7 µs there).
"""

from __future__ import annotations

import asyncio
import select
import socket
import struct
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

__all__ = [
    "BLAST_CANDIDATES",
    "RAW_BUF",
    "RTT_CANDIDATES",
    "CoroRunner",
    "blast_receive",
    "blast_send",
    "loop_runner",
    "ping_pong",
    "pong",
    "raw_socket",
    "raw_window",
]

_T = TypeVar("_T")


class CoroRunner(Protocol):
    """Runs a coroutine to completion on the run's event loop and returns its result."""

    def __call__(self, coro: Coroutine[Any, Any, _T], /) -> _T: ...


def loop_runner(use_uvloop: bool) -> CoroRunner:
    """The :class:`CoroRunner` of a benchmark process (:func:`uet.runner.run`, on uvloop or not)."""
    from uet.runner import run

    def on_loop(coro: Coroutine[Any, Any, _T]) -> _T:
        return run(coro, use_uvloop=use_uvloop)

    return on_loop


#: receive and send buffer of the raw sockets (the direct link's default, uet/link/direct.py)
RAW_BUF = 4 << 20
#: the blast receivers, measured in this order each round
BLAST_CANDIDATES = ("blocking", "drain", "asyncio")
#: the ping-pong candidates, measured in this order each round
RTT_CANDIDATES = ("blocking", "spin", "asyncio")

#: how long a receiver waits for the first datagram, and then for each next one (s)
FIRST_WAIT, IDLE_WAIT = 10.0, 2.0
#: how long the sender waits for a credit before it reopens the window (s)
CREDIT_WAIT = 0.2


def raw_window(payload: int) -> int:
    """Datagrams in flight: half the receive buffer (skb overhead included), at least 16."""
    return max(16, (RAW_BUF // 2) // (payload + 512))


def raw_socket(address: str) -> socket.socket:
    """A UDP socket bound to ``(address, any port)`` with the link's buffer sizes."""
    s = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_DGRAM)
    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        s.setsockopt(socket.SOL_SOCKET, opt, RAW_BUF)
    s.bind((address, 0))
    return s


def _kernel_timeout(sock: socket.socket, seconds: float) -> None:
    """Bound blocking receives by ``SO_RCVTIMEO``: the kernel returns EAGAIN after ``seconds``
    (Python raises BlockingIOError), with no ``poll()`` before each call as ``settimeout`` adds."""
    sec = int(seconds)
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", sec, int((seconds - sec) * 1e6)))


# -- blast ----------------------------------------------------------------------------------------


def blast_send(sock: socket.socket, dst: tuple[str, int], data: memoryview, payload: int) -> dict[str, Any]:
    """Send ``data`` in datagrams of ``payload`` bytes to a :func:`blast_receive` at ``dst``,
    then three empty end markers; the sender's figures."""
    window = raw_window(payload)
    chunks = [data[off : off + payload] for off in range(0, len(data), payload)] or [data]
    n = len(chunks)
    _kernel_timeout(sock, CREDIT_WAIT)
    send, recv = sock.sendto, sock.recv
    acked = i = stalls = 0
    cpu0 = time.process_time()
    t0 = time.monotonic_ns()
    while i < n:
        top = min(n, acked + window)
        while i < top:
            send(chunks[i], dst)
            i += 1
        if i >= n:
            break
        try:
            acked = max(acked, int.from_bytes(recv(64), "big"))
        except BlockingIOError:
            stalls += 1  # a credit or data datagram was lost: reopen the window
            acked = i
    for _ in range(3):
        send(b"", dst)
    return {"t0_ns": t0, "packets": n, "stalls": stalls, "cpu_s": time.process_time() - cpu0}


def blast_receive(sock: socket.socket, payload: int, kind: str, run: CoroRunner) -> dict[str, Any]:
    """Receive one blast with the candidate ``kind`` (module docstring); ``run`` runs a coroutine
    on the run's event loop (the ``asyncio`` candidate). Every datagram goes into one reused
    buffer; none is kept."""
    every = max(1, raw_window(payload) // 4)
    if kind == "asyncio":
        return run(_blast_receive_async(sock, every))
    buf = bytearray(65536)
    cpu0 = time.process_time()
    count = nbytes = last = 0
    _kernel_timeout(sock, FIRST_WAIT)
    try:
        n, peer = sock.recvfrom_into(buf)
    except BlockingIOError:
        return {"bytes": 0, "packets": 0, "last_ns": 0, "cpu_s": time.process_time() - cpu0}
    sock.connect(peer)  # then recv_into and send: no address tuple per datagram
    recv_into, send = sock.recv_into, sock.send
    if kind == "blocking":
        _kernel_timeout(sock, IDLE_WAIT)
        count, nbytes, last, _ended = _take(n, recv_into, buf, send, every, 0, 0)
    else:
        sock.setblocking(False)
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        wait_ms = int(IDLE_WAIT * 1000)
        while True:
            count, nbytes, at, ended = _take(n, recv_into, buf, send, every, count, nbytes)
            last = at or last
            n = -1
            while not ended and n < 0 and poller.poll(wait_ms):
                try:
                    n = recv_into(buf)
                except BlockingIOError:  # a spurious wake-up: poll again
                    pass
            if n < 0:
                break
    return {"bytes": nbytes, "packets": count, "last_ns": last, "cpu_s": time.process_time() - cpu0}


def _take(
    n: int,
    recv_into: Callable[[bytearray], int],
    buf: bytearray,
    send: Callable[[bytes], int],
    every: int,
    count: int,
    nbytes: int,
) -> tuple[int, int, int, bool]:
    """Count a first datagram of ``n`` bytes and the ones after it, crediting the sender every
    ``every``, until the end marker (``ended``) or EAGAIN (the blocking socket's ``SO_RCVTIMEO``,
    or the non-blocking socket's burst drained): ``(count, nbytes, last_ns, ended)``, where
    ``last_ns`` is the end marker's arrival, else the last credit's time, else 0."""
    last = 0
    while n:
        count += 1
        nbytes += n
        if count % every == 0:
            send(count.to_bytes(8, "big"))
            last = time.monotonic_ns()
        try:
            n = recv_into(buf)
        except BlockingIOError:
            return count, nbytes, last, False
    return count, nbytes, time.monotonic_ns(), True


class _Sink(asyncio.DatagramProtocol):
    def __init__(self, every: int, done: asyncio.Future[None]) -> None:
        self.every = every
        self.done = done
        self.count = self.nbytes = self.last = 0
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        n = len(data)
        if not n:
            self.last = time.monotonic_ns()
            if not self.done.done():
                self.done.set_result(None)
            return
        self.count += 1
        self.nbytes += n
        if self.count % self.every == 0:
            self.transport.sendto(self.count.to_bytes(8, "big"), addr)
            self.last = time.monotonic_ns()


async def _blast_receive_async(sock: socket.socket, every: int) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    sock.setblocking(False)
    cpu0 = time.process_time()
    transport, sink = await loop.create_datagram_endpoint(lambda: _Sink(every, done), sock=sock)
    try:
        waited = 0.0  # give up after IDLE_WAIT with nothing new (FIRST_WAIT before the first datagram)
        while not done.done():
            before = sink.count
            await asyncio.wait({done}, timeout=IDLE_WAIT)
            waited += IDLE_WAIT
            if sink.count == before and (before or waited >= FIRST_WAIT):
                break
    finally:
        transport.abort()  # closes ``sock``
    return {"bytes": sink.nbytes, "packets": sink.count, "last_ns": sink.last, "cpu_s": time.process_time() - cpu0}


# -- ping-pong ------------------------------------------------------------------------------------


def pong(sock: socket.socket, kind: str, run: CoroRunner) -> None:
    """Echo datagrams back to their sender until an empty one (or ``FIRST_WAIT`` of silence)."""
    if kind == "asyncio":
        run(_pong_async(sock))
        return
    buf = bytearray(65536)
    view = memoryview(buf)
    _kernel_timeout(sock, FIRST_WAIT)
    try:
        n, peer = sock.recvfrom_into(buf)
    except BlockingIOError:
        return
    sock.connect(peer)
    recv_into, send = sock.recv_into, sock.send
    if kind == "spin":
        sock.setblocking(False)
        while n > 0:
            send(view[:n])
            n = _spin_recv(recv_into, buf, IDLE_WAIT)
        return
    while n:
        send(view[:n])
        try:
            n = recv_into(buf)
        except BlockingIOError:
            return


def _spin_recv(recv_into: Callable[[bytearray], int], buf: bytearray, wait: float) -> int:
    """``recv_into`` on a non-blocking socket, retried until a datagram is there: its length, or
    −1 after ``wait`` seconds without one (the ``spin`` candidate)."""
    try:
        return recv_into(buf)
    except BlockingIOError:
        pass
    end = time.monotonic() + wait
    while True:
        try:
            return recv_into(buf)
        except BlockingIOError:
            if time.monotonic() > end:
                return -1


class _Echo(asyncio.DatagramProtocol):
    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if data:
            self.transport.sendto(data, addr)
        elif not self.done.done():
            self.done.set_result(None)


async def _pong_async(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    sock.setblocking(False)
    transport, _ = await loop.create_datagram_endpoint(lambda: _Echo(done), sock=sock)
    try:
        await asyncio.wait({done}, timeout=FIRST_WAIT)
    finally:
        transport.abort()


def ping_pong(
    sock: socket.socket, dst: tuple[str, int], size: int, count: int, kind: str, run: CoroRunner
) -> list[float]:
    """``count`` round trips of ``size`` bytes (after ``count // 10`` for warm-up) to a
    :func:`pong` of the same ``kind``, in µs; a trip lost for ``IDLE_WAIT`` is left out. Sends
    the empty end marker."""
    if kind == "asyncio":
        out = run(_ping_async(sock, dst, size, count))
    else:
        spin = kind == "spin"  # else blocking: SO_RCVTIMEO bounds each receive (module docstring)
        msg = bytes(size)
        buf = bytearray(65536)
        if spin:
            sock.setblocking(False)
        else:
            _kernel_timeout(sock, IDLE_WAIT)
        sock.connect(dst)
        send, recv_into, clock = sock.send, sock.recv_into, time.perf_counter_ns
        warm = count // 10
        out = []
        for i in range(count + warm):
            t0 = clock()
            send(msg)
            if spin:
                if _spin_recv(recv_into, buf, IDLE_WAIT) < 0:
                    continue
            else:
                try:
                    recv_into(buf)
                except BlockingIOError:
                    continue
            if i >= warm:
                out.append((clock() - t0) / 1e3)
        send(b"")
    return out


class _Ping(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.waiter: asyncio.Future[None] | None = None

    def datagram_received(self, data: bytes, addr: Any) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


async def _ping_async(sock: socket.socket, dst: tuple[str, int], size: int, count: int) -> list[float]:
    loop = asyncio.get_running_loop()
    sock.setblocking(False)
    transport, ping = await loop.create_datagram_endpoint(_Ping, sock=sock)
    msg = bytes(size)
    clock = time.perf_counter_ns
    warm = count // 10
    out: list[float] = []
    try:
        for i in range(count + warm):
            ping.waiter = loop.create_future()
            t0 = clock()
            transport.sendto(msg, dst)
            try:
                await asyncio.wait_for(ping.waiter, IDLE_WAIT)
            except TimeoutError:
                continue
            if i >= warm:
                out.append((clock() - t0) / 1e3)
        sock.sendto(b"", dst)  # the end marker: asyncio's transports do not send empty datagrams
    finally:
        transport.abort()
    return out
