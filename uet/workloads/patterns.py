"""The flow-pattern workloads: pairs, incast, incast with a victim flow, permutation, all-to-all.

Ranks are numbered as the topology numbers hosts (leaf by leaf), so the patterns below keep the
meaning ``uet-run`` gave them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from uet.workloads.base import Workload

__all__ = ["AllToAll", "Incast", "IncastVictim", "Pairs", "Permutation"]


class Pairs(Workload):
    """Rank i sends to rank i + n/2 (n even): with hosts numbered leaf by leaf, the pairs cross
    the spines."""

    name = "pairs"

    def pairs(self) -> list[tuple[int, int]]:
        if self.n % 2:
            raise ValueError("pairs needs an even number of endpoints")
        h = self.n // 2
        return [(i, i + h) for i in range(h)]


class Incast(Workload):
    """Ranks 1..``senders`` send to rank 0 (``senders`` : 1; all n−1 other ranks by default): an
    8:1 incast on a fabric of 128 hosts is ``n = 128`` with ``senders = 8``."""

    name = "incast"

    @dataclass(frozen=True)
    class Params:
        """``senders``: how many ranks send (1 … n−1; None: every other rank)."""

        senders: int | None = None

    def pairs(self) -> list[tuple[int, int]]:
        k = self.n - 1 if self.params.senders is None else self.params.senders
        if not 1 <= k <= self.n - 1:
            raise ValueError(f"workload incast: senders = {k}: 1 to {self.n - 1} with {self.n} endpoints")
        return [(i, 0) for i in range(1, 1 + k)]


class IncastVictim(Workload):
    """Ranks 2..n−1 send to rank 0 while a *victim* flow, rank 1 → rank n−1, shares their fabric
    (**decision**: the victim's sender sits beside the incast receiver and its receiver is an
    incast sender, so it crosses the congested leaf and competes with the incast's ACKs; its
    completion time against its ideal shows how far congestion spreads). Flow 0 is the victim."""

    name = "incast_victim"
    min_ranks = 4

    def pairs(self) -> list[tuple[int, int]]:
        return [(1, self.n - 1)] + [(i, 0) for i in range(2, self.n)]


class Permutation(Workload):
    """A random derangement (seeded): every rank sends one flow and receives one."""

    name = "permutation"

    def pairs(self) -> list[tuple[int, int]]:
        rng = random.Random(self.seed)
        while True:
            perm = list(range(self.n))
            rng.shuffle(perm)
            if all(perm[i] != i for i in range(self.n)):
                return [(i, perm[i]) for i in range(self.n)]


class AllToAll(Workload):
    """Every rank sends one flow to every other rank."""

    name = "all_to_all"

    def pairs(self) -> list[tuple[int, int]]:
        return [(i, j) for i in range(self.n) for j in range(self.n) if i != j]
