"""A seeded exactly-once soak of two FEP cores in memory (issue 29 item 1).

:func:`soak` runs one seed: FEP A sends ``messages`` messages of mixed sizes (mostly one packet,
some several) in a random mix of RUD, ROD and RUDI to FEP B over the in-memory link of
:mod:`fep_harness`, impaired in both directions (loss, reordering, duplication), with idle pauses
long enough for PDCs to close and re-open. Every message carries its sequence number and a body
derived from it, so B checks each one arrives exactly once and intact, and A that every message
it reports sent was delivered.

The suite runs it over many seeds (tests/test_delivery_exactly_once.py); a longer run is a command:

    python tests/fep_soak.py --seeds 500 --messages 4000
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass, field

from fep_harness import FepPair

from uet.fep import FepConfig, OpFailed
from uet.pds import Mode

MODES = (Mode.RUD, Mode.ROD, Mode.RUDI)
#: message sizes (bytes after the 4-byte sequence number): mostly one packet, some several
SIZES = (0, 8, 60, 200, 700, 1500, 3000)
PAYLOAD = 1024


def body(seq: int) -> bytes:
    """Message ``seq``: its number and a body derived from it."""
    return seq.to_bytes(4, "big") + bytes([seq & 0xFF]) * SIZES[(seq * 2654435761 >> 7) % len(SIZES)]


@dataclass
class SoakResult:
    seed: int
    sent: int = 0
    delivered: int = 0
    failed: int = 0
    duplicates: dict[int, int] = field(default_factory=dict)
    corrupt: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    #: reported sent (SendCompleted) but never delivered
    false_completions: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.corrupt or self.missing or self.false_completions or self.failed)


def soak(
    seed: int,
    messages: int = 2000,
    *,
    loss: float = 0.05,
    reorder: float = 0.05,
    dup: float = 0.025,
    window: int = 64,
    pause: float = 0.02,
) -> SoakResult:
    """One seeded run (module docstring); ``pause``: chance after each send of an idle pause of up
    to 120 ms (virtual), past the initiator's 50 ms idle close."""
    cfg = FepConfig(payload_size=PAYLOAD)
    pair = FepPair(cfg, seed=seed, loss=loss, reorder=reorder, dup=dup, delay_ns=20_000, reorder_ns=1_000_000)
    a, b = pair.a, pair.b
    rng = random.Random(seed)
    res = SoakResult(seed)
    seen: dict[int, int] = {}
    inflight: dict[int, int] = {}
    completed: list[int] = []
    resume = 0

    def take() -> None:
        while (m := b.core.recv_nowait()) is not None:
            data = bytes(m.data)
            seq = int.from_bytes(data[:4], "big")
            seen[seq] = seen.get(seq, 0) + 1
            if data != body(seq):
                res.corrupt.append(seq)

    while res.sent < messages or inflight:
        if pair.now >= resume:
            while res.sent < messages and len(inflight) < window:
                inflight[a.core.send(b.address, body(res.sent), mode=rng.choice(MODES))] = res.sent
                res.sent += 1
                if rng.random() < pause:
                    resume = pair.now + rng.randrange(1, 120_000_000)
                    break
        if not pair.step():
            pair.now = max(pair.now, resume)
        take()
        for h in [h for h in inflight if h in a.done]:
            seq = inflight.pop(h)
            if isinstance(a.done.pop(h), OpFailed):
                res.failed += 1
            else:
                completed.append(seq)
    pair.run_until(lambda: False, max_ns=100_000_000)
    take()
    res.delivered = len(seen)
    res.duplicates = {s: n for s, n in seen.items() if n > 1}
    res.missing = [s for s in range(messages) if s not in seen]
    res.false_completions = [s for s in completed if s not in seen]
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="in-memory exactly-once soak of two FEP cores")
    p.add_argument("--seeds", type=int, default=200, help="seeds 0..N-1 (default 200)")
    p.add_argument("--first", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--messages", type=int, default=2000, help="messages per seed (default 2000)")
    ns = p.parse_args(argv)
    total = bad = 0
    for seed in range(ns.first, ns.first + ns.seeds):
        r = soak(seed, ns.messages)
        total += r.delivered
        if not r.ok:
            bad += 1
            print(f"seed {seed}: {r}", flush=True)
    print(f"{ns.seeds} seeds, {total} messages delivered, {bad} seeds with a defect")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
