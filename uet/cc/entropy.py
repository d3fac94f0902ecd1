"""Multipath path selection: which entropy value (EV) each packet carries (spec/behaviour.md §4.6).

Every selector draws from ``paths`` consecutive EVs above a random base (the UDP source ports a
switch hashes for ECMP) and follows the :class:`uet.cc.base.PathSelector` seam:
``next_entropy()`` and ``feedback(entropy, event, now)``. Events:

- ``"ack"``: the packet was delivered unmarked (also a last-hop trim without ``m``, §3.4);
- ``"ecn"``: delivered (or last-hop trimmed) with ECN-CE;
- ``"trim"``: trimmed before the last hop (a congested path, §3.4);
- ``"loss"``: inferred lost from the SACK (fast retransmit);
- ``"timeout"``: its retransmission timer fired.

Selectors: :class:`Reps` (recycled entropies), :class:`Bitmap` (STrack-style penalties),
:class:`Oblivious` (each EV once per round, a random modular counter, which the notes accept) and
:class:`Single` (one EV, ROD). Inference where the notes are silent: REPS's freeze ends at the
first call after ``freeze_ns`` (REPS keeps the newest ``now`` from its feedback, since
``next_entropy`` takes no time); a ``"loss"`` does not freeze REPS (only timeouts do, §4.6) and
counts as a trim (+4) for the bitmap.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final

from uet.cc.base import PathSelector
from uet.cc.config import CcConfig

PENALTY_MAX: Final = 15
PENALTY: Final = {"ecn": 1, "trim": 4, "loss": 4}


def below(rng: random.Random, n: int) -> int:
    """``rng.randrange(n)`` for ``n`` > 0, the same draw: CPython's ``Random._randbelow`` (3.11
    onwards) written out — ``getrandbits(n.bit_length())`` until the result is below ``n`` — so
    that a selector drawing per packet calls the generator's C method instead of two interpreted
    functions (the compiled build, issue 28). tests/test_cc_entropy.py checks the draws are
    randrange's."""
    k = n.bit_length()
    r = rng.getrandbits(k)
    while r >= n:
        r = rng.getrandbits(k)
    return r


def _base(rng: random.Random, paths: int) -> int:
    return rng.randrange(0x4000, 0x10000 - paths + 1)


class Single(PathSelector):
    """One EV for the whole life of the PDC (single path, ROD, §2.13)."""

    __slots__ = ("value",)

    def __init__(self, rng: random.Random, cfg: CcConfig | None = None) -> None:
        self.value = rng.randrange(0x4000, 0x10000)

    def next_entropy(self) -> int:
        return self.value

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        """Nothing to learn with one path."""


class Oblivious(PathSelector):
    """Oblivious spraying (§4.6): a modular counter from a random start over ``paths`` EVs, so
    each EV is used once before any repeats. Feedback is ignored."""

    __slots__ = ("base", "paths", "i")

    def __init__(self, rng: random.Random, cfg: CcConfig) -> None:
        self.paths = cfg.paths
        self.base = _base(rng, self.paths)
        self.i = rng.randrange(self.paths)

    def next_entropy(self) -> int:
        i = self.i + 1
        if i == self.paths:
            i = 0
        self.i = i
        return self.base + i

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        """Oblivious: nothing to learn."""


class Reps(PathSelector):
    """REPS, recycled entropies (§4.6): a circular buffer of EVs that came back unmarked; each is
    reused once. A timeout (with trimming) freezes the buffer for ``reps_freeze_ns``: the cached
    EVs are reused cyclically instead of exploring; leaving the freeze clears the buffer and
    explores ``reps_explore`` random EVs."""

    def __init__(self, rng: random.Random, cfg: CcConfig) -> None:
        self.rng = rng
        self.paths = cfg.paths
        self.base = _base(rng, self.paths)
        self.slots = cfg.reps_slots
        self.values = [0] * self.slots
        self.valid = [False] * self.slots
        self.head = 0  # next slot to write (the oldest)
        self.trimming = cfg.trimming
        self.freeze_ns = cfg.reps_freeze_ns
        self.explore_n = cfg.reps_explore
        self.frozen_until: int | None = None
        self.explore = 0
        self.cursor = 0  # frozen mode: next cached slot to reuse
        self.now = 0
        self.stats = {"recycled": 0, "random": 0, "explored": 0, "frozen_reuse": 0, "freezes": 0}

    def _random(self) -> int:
        return self.base + below(self.rng, self.paths)

    def _thaw(self) -> None:
        fu = self.frozen_until
        if fu is not None and self.now >= fu:
            self.frozen_until = None
            self.valid = [False] * self.slots
            self.explore = self.explore_n

    def next_entropy(self) -> int:
        self._thaw()
        st = self.stats
        if self.explore > 0:
            self.explore -= 1
            st["explored"] += 1
            return self._random()
        n = self.slots
        if self.frozen_until is not None:
            for k in range(n):
                j = (self.cursor + k) % n
                if self.valid[j]:
                    self.cursor = (j + 1) % n
                    st["frozen_reuse"] += 1
                    return self.values[j]
            st["random"] += 1
            return self._random()
        for k in range(n):  # oldest valid first: the slots from ``head`` onwards, in order
            j = (self.head + k) % n
            if self.valid[j]:
                self.valid[j] = False
                st["recycled"] += 1
                return self.values[j]
        st["random"] += 1
        return self._random()

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        if now > self.now:
            self.now = now
        self._thaw()
        if event == "ack":
            if self.frozen_until is not None:
                return  # frozen: the cached set stays as it is
            h = self.head
            self.values[h] = entropy
            self.valid[h] = True
            self.head = (h + 1) % self.slots
        elif event == "timeout":
            if self.trimming and self.frozen_until is None and self.explore == 0:
                self.frozen_until = self.now + self.freeze_ns
                self.cursor = self.head
                self.stats["freezes"] += 1


class Bitmap(PathSelector):
    """Bitmap / STrack-style selection (§4.6): walk the EVs in a pseudo-random permutation
    ``(index XOR r) mod 2^k`` (new ``r`` at each wrap, indexes ≥ ``paths`` skipped); an EV with a
    penalty is skipped once (penalty − 1), at most one full cycle. Penalties: +1 ECN, +4 trim
    (and inferred loss), 15 on timeout, capped at 15."""

    def __init__(self, rng: random.Random, cfg: CcConfig) -> None:
        self.rng = rng
        self.paths = cfg.paths
        self.base = _base(rng, self.paths)
        self.size = 1 << max(0, (self.paths - 1).bit_length())
        self.penalty = [0] * self.paths
        self.i = 0
        self.r = rng.randrange(self.size)
        self.stats = {"skipped": 0}

    def _step(self) -> int:
        while True:
            if self.i == self.size:
                self.i = 0
                self.r = below(self.rng, self.size)
            j = self.i ^ self.r
            self.i += 1
            if j < self.paths:
                return j

    def next_entropy(self) -> int:
        pen = self.penalty
        j = self._step()
        for _ in range(self.paths):
            if not pen[j]:
                break
            pen[j] -= 1
            self.stats["skipped"] += 1
            j = self._step()
        return self.base + j

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        j = entropy - self.base
        if not 0 <= j < self.paths:
            return
        if event == "timeout":
            self.penalty[j] = PENALTY_MAX
            return
        add = PENALTY.get(event)
        if add:
            self.penalty[j] = min(PENALTY_MAX, self.penalty[j] + add)


#: load-balancing selectors by name (§4.6)
SELECTORS: dict[str, Callable[[random.Random, CcConfig], PathSelector]] = {
    "single": Single,
    "oblivious": Oblivious,
    "reps": Reps,
    "bitmap": Bitmap,
}
