"""Two RoCE queue pairs in memory with a fake clock and seeded impairment (like pds_harness).

``Pair.run()`` shuttles datagrams between the QPs over a link with a fixed one-way delay,
dropping, duplicating or reordering them as the seeded impairment says, fires timers and collects
events, until nothing is in flight and no timer is due before ``until``.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field
from typing import Any

from uet.roce import QpConfig, QueuePair
from uet.roce.events import Event, Transmit
from uet.wire.rocepkt import parse_roce

A_ADDR, B_ADDR = "10.0.0.1", "10.0.0.2"


@dataclass
class Impair:
    loss: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0  # probability a datagram gets extra delay
    reorder_ns: int = 5_000
    ce: float = 0.0  # probability a datagram arrives CE-marked
    seed: int = 0
    drop: Any = None  # optional callable(direction, Transmit, parsed) -> bool

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)


@dataclass
class Pair:
    config: QpConfig = field(default_factory=lambda: QpConfig(dcqcn=None))
    config_b: QpConfig | None = None
    delay_ns: int = 1_000
    impair: Impair = field(default_factory=Impair)
    seed: int = 1

    def __post_init__(self) -> None:
        self.a = QueuePair(A_ADDR, 0x11, config=self.config, seed=self.seed)
        self.b = QueuePair(B_ADDR, 0x22, config=self.config_b or self.config, seed=self.seed + 1)
        self.a.connect(B_ADDR, 0x22, self.b.start_psn)
        self.b.connect(A_ADDR, 0x11, self.a.start_psn)
        self.now = 0
        self._q: list[tuple[int, int, str, Transmit, int]] = []
        self._n = 0
        self.events: dict[str, list[Event]] = {"a": [], "b": []}
        self.wire: list[tuple[int, str, Transmit]] = []  # everything sent, (time, "a"/"b", tx)

    def qp(self, side: str) -> QueuePair:
        return self.a if side == "a" else self.b

    def _emit(self, side: str) -> None:
        qp = self.qp(side)
        for tx in qp.datagrams_to_send(self.now):
            self.wire.append((self.now, side, tx))
            im = self.impair
            if im.drop is not None and im.drop(side, tx, parse_roce(tx.data)):
                continue
            if im.rng.random() < im.loss:
                continue
            copies = 2 if im.rng.random() < im.dup else 1
            for _ in range(copies):
                at = self.now + self.delay_ns
                if im.rng.random() < im.reorder:
                    at += im.rng.randrange(im.reorder_ns)
                ecn = 3 if im.rng.random() < im.ce else tx.ecn
                self._n += 1
                heapq.heappush(self._q, (at, self._n, "b" if side == "a" else "a", tx, ecn))

    def _collect(self) -> None:
        for side in ("a", "b"):
            qp = self.qp(side)
            while (e := qp.next_event()) is not None:
                self.events[side].append(e)

    def step(self) -> bool:
        """Advance to the next arrival or timer; False when there is nothing left."""
        self._emit("a")
        self._emit("b")
        timers = [t for t in (self.a.get_timer(), self.b.get_timer()) if t is not None]
        nxt = min([self._q[0][0]] if self._q else [] + timers) if (self._q or timers) else None
        if self._q and timers:
            nxt = min(self._q[0][0], min(timers))
        if nxt is None:
            return False
        self.now = max(self.now, nxt)
        while self._q and self._q[0][0] <= self.now:
            _, _, to, tx, ecn = heapq.heappop(self._q)
            src = A_ADDR if to == "b" else B_ADDR
            self.qp(to).receive_datagram(tx.data, self.now, source=src, ecn=ecn)
            self._emit(to)
        for side in ("a", "b"):
            qp = self.qp(side)
            t = qp.get_timer()
            if t is not None and t <= self.now:
                qp.handle_timer(self.now)
        self._collect()
        return True

    def run(self, until: int = 10**12, max_steps: int = 2_000_000) -> None:
        for _ in range(max_steps):
            if self.now > until or not self.step():
                self._collect()
                return
        raise AssertionError("harness did not settle")

    def sent(self, side: str) -> list[Any]:
        """Parsed datagrams ``side`` sent, in order."""
        return [parse_roce(tx.data) for _, s, tx in self.wire if s == side]
