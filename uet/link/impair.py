"""Seeded network impairment applied on transmit (drop, delay/reorder, duplicate, corrupt).

Modelled on the impairment shim of the UEC reference provider: each FEP carries one, so a pair of
endpoints impairs both directions (data one way, ACKs the other). The decision logic here is
sans-I/O and deterministic for a seed; the link applies the delays with event-loop timers.

Per datagram, in this order:

1. ``loss``: drop it;
2. ``dup``: send it twice (each copy is then treated independently by steps 3–4);
3. ``corrupt``: flip one random bit (within the first ``corrupt_span`` bytes when set). Without
   TSS or the optional CRC trailer (wire-format.md §1.4) UET cannot detect a flipped payload bit
   — on a real wire the UDP checksum / FCS would drop the frame — so this is a robustness test
   for the decoders and state machines, and ``corrupt_span`` (e.g. 56: PDS + SES headers) keeps
   the flips in the headers;
4. ``reorder``: hold the copy for a uniformly random extra delay in ``(0, reorder_delay_s]`` so
   later datagrams overtake it; every copy also waits ``delay_s`` (a fixed extra latency).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["Impairment", "ImpairmentConfig"]


@dataclass(frozen=True)
class ImpairmentConfig:
    """Probabilities (0..1) and delays (seconds) of the impairment; all zero = a perfect link."""

    loss: float = 0.0
    dup: float = 0.0
    corrupt: float = 0.0
    reorder: float = 0.0
    reorder_delay_s: float = 0.001
    delay_s: float = 0.0
    corrupt_span: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("loss", "dup", "corrupt", "reorder"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be a probability, got {v}")
        if self.reorder_delay_s < 0 or self.delay_s < 0:
            raise ValueError("delays must be >= 0")

    @property
    def active(self) -> bool:
        """True when the impairment can change anything."""
        return bool(self.loss or self.dup or self.corrupt or self.reorder or self.delay_s)


class Impairment:
    """Decides the fate of each transmitted datagram from a seeded :class:`random.Random`."""

    def __init__(self, config: ImpairmentConfig | None = None, **kw: float) -> None:
        self.config = config or ImpairmentConfig(**kw)  # type: ignore[arg-type]
        self.rng = random.Random(self.config.seed)
        self.counters: dict[str, int] = {"seen": 0, "dropped": 0, "duplicated": 0, "corrupted": 0, "reordered": 0}

    def apply(self, datagram: bytes) -> list[tuple[bytes, float]]:
        """The copies to transmit, each with the extra delay in seconds (0 = now)."""
        c = self.config
        rnd = self.rng.random
        self.counters["seen"] += 1
        if c.loss and rnd() < c.loss:
            self.counters["dropped"] += 1
            return []
        copies = 1
        if c.dup and rnd() < c.dup:
            self.counters["duplicated"] += 1
            copies = 2
        out = []
        for _ in range(copies):
            data = datagram
            if c.corrupt and data and rnd() < c.corrupt:
                self.counters["corrupted"] += 1
                span = min(len(data), c.corrupt_span or len(data))
                bit = self.rng.randrange(span * 8)
                buf = bytearray(data)
                buf[bit >> 3] ^= 0x80 >> (bit & 7)
                data = bytes(buf)
            delay = c.delay_s
            if c.reorder and rnd() < c.reorder:
                self.counters["reordered"] += 1
                delay += self.rng.uniform(0.0, c.reorder_delay_s) or c.reorder_delay_s
            out.append((data, delay))
        return out
