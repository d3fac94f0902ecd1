"""In-memory pair harness for FEP cores (aioquic-style client/server pair tests).

Two :class:`~uet.fep.FepCore` objects joined by a simulated link with a fixed one-way delay,
optional seeded loss, duplication, reordering (random extra delay) and corruption, and a fake
clock that jumps to the next arrival or timer — the same code the asyncio adapter and the
virtual-time engine drive, with no event loop. Every datagram handed out is recorded on
:attr:`FepPair.wire` (before loss) as a :class:`~uet.fep.Transmit`, so tests check exact packets.

    pair = FepPair(seed=1, loss=0.1)
    h = pair.a.core.send(pair.b.address, b"hello")
    r = pair.b.core.post_recv(None)
    pair.run_until(lambda: pair.b.result(r) is not None)
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

from uet.fep import (
    Closed,
    Datagram,
    FepConfig,
    FepCore,
    MessageReceived,
    OpCompleted,
    OpFailed,
    SendCompleted,
    Transmit,
    WriteCompleted,
)
from uet.wire.chain import UetPacket, parse_uet

A_ADDR = "10.0.0.1"
B_ADDR = "10.0.0.2"


class Node:
    """One end of the pair: the core plus every event it reported, by handle."""

    def __init__(self, core: FepCore) -> None:
        self.core = core
        self.address = core.address
        self.events: list[Any] = []
        self.done: dict[int, Any] = {}
        self.writes: list[WriteCompleted] = []
        self.closed: Closed | None = None

    def drain(self) -> None:
        while (ev := self.core.next_event()) is not None:
            self.events.append(ev)
            if isinstance(ev, WriteCompleted):
                self.writes.append(ev)
            elif isinstance(ev, Closed):
                self.closed = ev
            else:
                assert ev.handle not in self.done, f"two completions for handle {ev.handle}"
                self.done[ev.handle] = ev

    def result(self, handle: int) -> Any:
        """The completion event of ``handle`` (None while pending)."""
        return self.done.get(handle)

    def value(self, handle: int) -> Any:
        """The value of a completed operation (message for receives); raises its error."""
        ev = self.done[handle]
        if isinstance(ev, OpFailed):
            raise ev.error
        if isinstance(ev, MessageReceived):
            return ev.message
        if isinstance(ev, OpCompleted):
            return ev.value
        assert isinstance(ev, SendCompleted)
        return None


class FepPair:
    """Two FEP cores A and B on a lossy in-memory link with a fake clock (integer ns)."""

    def __init__(
        self,
        config_a: FepConfig | None = None,
        config_b: FepConfig | None = None,
        *,
        seed: int = 0,
        loss: float = 0.0,
        dup: float = 0.0,
        reorder: float = 0.0,
        corrupt: float = 0.0,
        delay_ns: int = 10_000,
        reorder_ns: int | None = None,
        job: int = 7,
        pid: int = 1,
        security_a: Any = None,
        security_b: Any = None,
        log: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.records: list[dict] = []
        lg = self.records.append if log else None
        cfg_b = config_b or config_a
        self.a = Node(FepCore(A_ADDR, job=job, pid=pid, config=config_a, security=security_a, seed=seed * 2 + 1,
                              event_log=lg))  # fmt: skip
        self.b = Node(FepCore(B_ADDR, job=job, pid=pid, config=cfg_b, security=security_b, seed=seed * 2 + 2,
                              event_log=lg))  # fmt: skip
        self.loss = loss
        self.dup = dup
        self.reorder = reorder
        self.corrupt = corrupt
        self.delay_ns = delay_ns
        #: largest extra delay of a reordered datagram (default 4 × ``delay_ns``)
        self.reorder_ns = 4 * delay_ns if reorder_ns is None else reorder_ns
        self.now = 0
        self._seq = 0
        self._flight: list[tuple[int, int, str, Datagram]] = []
        #: every datagram handed out, as (time, source, Transmit), before loss
        self.wire: list[tuple[int, str, Transmit]] = []
        #: optional hook: (transmit, source) -> replacement list of datagram bytes ([] drops it)
        self.filter: Callable[[Transmit, str], list[bytes]] | None = None

    def node(self, addr: str) -> Node:
        return self.a if addr == A_ADDR else self.b

    def _collect(self) -> None:
        for node in (self.a, self.b):
            for t in node.core.datagrams_to_send(self.now):
                assert 0 <= t.entropy <= 0xFFFF
                self.wire.append((self.now, node.address, t))
                if t.destination not in (A_ADDR, B_ADDR):
                    continue  # to a forged source (exact-packet tests): nobody there answers
                assert t.destination == (B_ADDR if node is self.a else A_ADDR)
                outs = [t.data] if self.filter is None else self.filter(t, node.address)
                for d in outs:
                    self._launch(d, node.address, t)
            node.drain()

    def _launch(self, data: bytes, src: str, t: Transmit) -> None:
        r = self.rng
        if self.loss and r.random() < self.loss:
            return
        copies = 2 if self.dup and r.random() < self.dup else 1
        for _ in range(copies):
            d = data
            if self.corrupt and r.random() < self.corrupt and d:
                b = bytearray(d)
                b[r.randrange(len(b))] ^= 1 << r.randrange(8)
                d = bytes(b)
            at = self.now + self.delay_ns
            if self.reorder and r.random() < self.reorder:
                at += r.randrange(1, self.reorder_ns)
            self._seq += 1
            heapq.heappush(self._flight, (at, self._seq, t.destination, Datagram(d, src, t.ecn, source_port=t.entropy)))

    def step(self) -> bool:
        """Move datagrams, then advance the clock to the next arrival or timer. False if idle."""
        self._collect()
        cands = []
        if self._flight:
            cands.append(self._flight[0][0])
        for n in (self.a, self.b):
            t = n.core.get_timer()
            if t is not None:
                cands.append(max(t, self.now))
        if not cands:
            return False
        self.now = max(self.now, min(cands))
        batches: dict[str, list[Datagram]] = {}
        while self._flight and self._flight[0][0] <= self.now:
            _t, _s, dst, dg = heapq.heappop(self._flight)
            batches.setdefault(dst, []).append(dg)
        for dst, batch in batches.items():
            self.node(dst).core.receive_batch(batch, self.now)
        for n in (self.a, self.b):
            t = n.core.get_timer()
            if t is not None and t <= self.now:
                n.core.handle_timer(self.now)
        self._collect()
        return True

    def run_until(self, cond: Callable[[], bool], max_ns: int = 10_000_000_000, max_steps: int = 200_000) -> bool:
        """Step until ``cond()`` holds; False if the time or step budget ran out or all idle."""
        end = self.now + max_ns
        for _ in range(max_steps):
            if cond():
                return True
            if self.now > end or not self.step():
                return cond()
        return cond()

    def complete(self, node: Node, *handles: int, max_ns: int = 10_000_000_000) -> list[Any]:
        """Run until every handle of ``node`` completed; their values (errors raise)."""
        assert self.run_until(lambda: all(h in node.done for h in handles), max_ns), f"{handles} still pending"
        return [node.value(h) for h in handles]

    def sent_by(self, node: Node) -> list[Transmit]:
        """Every datagram ``node`` handed out so far."""
        return [t for _at, src, t in self.wire if src == node.address]


def decode(t: Transmit | bytes) -> UetPacket:
    """The decoded headers of a plaintext datagram."""
    return parse_uet(t.data if isinstance(t, Transmit) else t)


def pds_of(t: Transmit | bytes) -> Any:
    """The PDS header of a plaintext datagram (which must have one)."""
    h = decode(t).pds
    assert h is not None
    return h


def ses_of(t: Transmit | bytes) -> Any:
    """The SES header of a plaintext datagram, or None (an ACK without a response, a CP)."""
    return decode(t).ses
