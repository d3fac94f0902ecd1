"""DCQCN, sans-I/O: the reaction point (sender rate control) and the notification point (CNP
generation), spec/rocev2-and-fabric.md §5.2 and §7.

Rates are floats in bit/s, times integer nanoseconds, always parameters. The reaction point
(:class:`ReactionPoint`) owns a rate limiter: :meth:`ReactionPoint.next_send_time` is when the
next packet may leave, which the queue pair puts into its ``get_timer()``.

Two profiles (§7.2, §7.3), every constant a field of :class:`DcqcnConfig` (defined with the queue
pair's configuration, :mod:`uet.roce.config`, which every run's derived settings record: a UET run
does not import the reaction and notification points):

* ``"paper"`` (default): on each CNP ``Rt ← Rc``, ``α ← (1 − g)α + g`` (α = 1 on the first CNP),
  ``Rc ← max(Rmin, Rc(1 − α/2))``; α decays by ``(1 − g)`` every K without CNP; the increase timer
  (T) and the byte counter (B) drive fast recovery / additive / hyper increase over F stages. With
  the author's code, in hyper increase the timer period and byte threshold are halved, and the
  first increase after a cut divides Rt by 8 if Rt > 10 Rc (both flags on by default).
* ``"nvidia"``: α updated every Pα (+g when a CNP arrived in the period), the rate cut applied at
  most once per Pd when a CNP arrived, no byte counter, increases on the T timer only.

**Decisions** where the notes leave room: the α timers are evaluated lazily (the closed form of
repeated decay, exact, and no wake-up every Pα); the rate-increase timer stops once Rc and Rt are
both back at line rate (later firings could change nothing until the next CNP resets the stages);
the rate limiter charges each packet its frame size on the wire (``wire_bytes``), and an idle
sender gathers no credit (the next departure is ``max(now, previous) + size/rate``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from uet.roce.config import DcqcnConfig

__all__ = ["DcqcnConfig", "ReactionPoint", "NotificationPoint"]


class ReactionPoint:
    """Per-QP DCQCN sender state and rate limiter (§7.1–§7.3)."""

    def __init__(self, config: DcqcnConfig) -> None:
        self.config = config
        self.rate = config.line_rate  # Rc
        self.target = config.line_rate  # Rt
        self.alpha = 1.0
        self.time_stage = 0
        self.byte_stage = 0
        self.bytes_since_increase = 0
        self.cnps = 0
        self._alpha_at: int | None = None  # time α was last brought up to date (paper: last CNP)
        self._alpha_boundary: int | None = None  # nvidia: next Pα boundary
        self._cnp_seen_alpha = False
        self._cnp_seen_dec = False
        self._dec_anchor: int | None = None  # nvidia: Pd boundaries are anchor + k·Pd
        self._dec_deadline: int | None = None
        self._inc_deadline: int | None = None
        self._first_after_cut = False
        self._next_send = 0
        #: (time, rate) whenever the rate changes (the first 100 000 changes), for plots and tests
        self.history: list[tuple[int, float]] = []
        #: called as ``(now, self)`` after every rate change (the queue pair's event log)
        self.on_rate: Callable[[int, ReactionPoint], None] | None = None

    # -- rate limiter ------------------------------------------------------------------------

    def next_send_time(self) -> int:
        """Earliest time the next packet may leave."""
        return self._next_send

    def on_sent(self, wire_bytes: int, now: int) -> None:
        """Charge one departure of ``wire_bytes`` (frame on the wire) and run the byte counter.

        The limiter keeps a **rate**, not a minimum gap after each departure (**decision**; §7 says
        only that the sender transmits at Rc): a departure late by less than its own
        serialisation time at Rc — its caller's timer fired that late, or the packet waited that
        long for something else — is charged from when it was due, so the next one is due one
        gap after that, not one gap after ``now``; later than that, the limiter was idle and
        idle gathers no credit (the schedule restarts at ``now``). A token bucket one packet
        deep, as a NIC's shaper. Before, each late departure pushed every later one back by its
        lateness: a live endpoint (time-dilated, uet.clock) whose event loop woke 5–30 µs late
        sent a line-rate RoCEv2 flow at 93 % of the rate, 7 % slower than the simulator, whose
        timers fire on time."""
        gap = math.ceil(wire_bytes * 8e9 / self.rate)
        due = self._next_send
        self._next_send = (due if now - due < gap else now) + gap
        c = self.config
        if c.profile == "paper" and c.byte_counter:
            self.bytes_since_increase += wire_bytes
            if self.bytes_since_increase >= self._byte_threshold():
                self.bytes_since_increase = 0
                self.byte_stage += 1
                self._increase(now)

    def _byte_threshold(self) -> int:
        c = self.config
        hyper = c.hyper_halving and min(self.time_stage, self.byte_stage) >= c.stages
        return c.byte_counter // 2 if hyper else c.byte_counter

    # -- CNP ---------------------------------------------------------------------------------

    def on_cnp(self, now: int) -> None:
        """A CNP for this QP arrived (§7.2 / §7.3)."""
        c = self.config
        self.cnps += 1
        if c.profile == "paper":
            self._paper_cut(now)
            return
        first = self._alpha_boundary is None
        if first:
            self.alpha = c.alpha0
            self._alpha_boundary = now + c.alpha_period_ns
            self._dec_anchor = now
        else:
            self._advance_alpha(now)
        self._cnp_seen_alpha = True
        if not self._cnp_seen_dec:
            self._cnp_seen_dec = True
            assert self._dec_anchor is not None
            k = -(-(now - self._dec_anchor) // c.decrease_period_ns)
            self._dec_deadline = self._dec_anchor + max(1, k) * c.decrease_period_ns

    def _paper_cut(self, now: int) -> None:
        c = self.config
        if self._alpha_at is None:
            self.alpha = c.alpha0
        else:
            self._advance_alpha(now)
            self.alpha = (1 - c.g) * self.alpha + c.g
        self._alpha_at = now
        self.target = self.rate
        self._set_rate(max(c.r_min, self.rate * (1 - self.alpha / 2)), now)
        self.time_stage = self.byte_stage = self.bytes_since_increase = 0
        self._first_after_cut = True
        self._inc_deadline = now + c.increase_period_ns

    def _advance_alpha(self, now: int) -> None:
        """Bring α up to ``now``: paper, one ``(1 − g)`` decay per whole K since the last CNP
        (the restarted α timer); nvidia, one update per Pα boundary passed."""
        c = self.config
        if c.profile == "paper":
            assert self._alpha_at is not None
            n = (now - self._alpha_at) // c.alpha_period_ns
            if n:
                self.alpha *= (1 - c.g) ** n
                self._alpha_at += n * c.alpha_period_ns
            return
        b = self._alpha_boundary
        if b is None or now < b:
            return
        n = (now - b) // c.alpha_period_ns + 1  # boundaries passed
        self.alpha = (1 - c.g) * self.alpha + (c.g if self._cnp_seen_alpha else 0.0)
        self._cnp_seen_alpha = False
        if n > 1:
            self.alpha *= (1 - c.g) ** (n - 1)
        self._alpha_boundary = b + n * c.alpha_period_ns

    def current_alpha(self, now: int) -> float:
        """α as the timers would have it at ``now`` (without changing the state)."""
        c = self.config
        if c.profile == "paper":
            if self._alpha_at is None:
                return self.alpha
            return self.alpha * (1 - c.g) ** ((now - self._alpha_at) // c.alpha_period_ns)
        b = self._alpha_boundary
        if b is None or now < b:
            return self.alpha
        n = (now - b) // c.alpha_period_ns + 1
        a = (1 - c.g) * self.alpha + (c.g if self._cnp_seen_alpha else 0.0)
        return a * (1 - c.g) ** (n - 1)

    # -- timers ------------------------------------------------------------------------------

    def get_timer(self) -> int | None:
        """Earliest DCQCN deadline (rate decrease or increase); the pacing deadline is separate."""
        ds = [d for d in (self._dec_deadline, self._inc_deadline) if d is not None]
        return min(ds) if ds else None

    def handle_timer(self, now: int) -> None:
        c = self.config
        if self._dec_deadline is not None and now >= self._dec_deadline:
            self._dec_deadline = None
            self._advance_alpha(now)
            if self._cnp_seen_dec:
                self._cnp_seen_dec = False
                if c.clamp_tgt_rate or self.time_stage > 0:
                    self.target = self.rate
                new = max(self.rate * (1 - self.alpha / 2), self.rate * c.min_dec_fac)
                self._set_rate(max(c.r_min, new), now)
                self.time_stage = 0
                self._inc_deadline = now + c.increase_period_ns
        if self._inc_deadline is not None and now >= self._inc_deadline:
            self.time_stage += 1
            self._increase(now)
            if self.rate >= c.line_rate and self.target >= c.line_rate:
                self._inc_deadline = None
            else:
                hyper = c.hyper_halving and min(self.time_stage, self.byte_stage) >= c.stages
                self._inc_deadline = now + (c.increase_period_ns // 2 if hyper else c.increase_period_ns)

    # -- increase ----------------------------------------------------------------------------

    def _increase(self, now: int) -> None:
        c = self.config
        if c.rt_div8 and self._first_after_cut and self.target > 10 * self.rate:
            self.target /= 8
        elif c.profile == "nvidia":
            ts = self.time_stage
            if ts == c.stages:
                self.target = min(c.line_rate, self.target + c.r_ai)
            elif ts > c.stages:
                self.target = min(c.line_rate, self.target + c.r_hai)
        else:
            lo, hi = sorted((self.time_stage, self.byte_stage))
            if hi < c.stages:
                pass  # fast recovery
            elif lo < c.stages:
                self.target = min(c.line_rate, self.target + c.r_ai)
            else:
                self.target = min(c.line_rate, self.target + (lo - c.stages + 1) * c.r_hai)
        self._first_after_cut = False
        self._set_rate(min(c.line_rate, (self.target + self.rate) / 2), now)

    def _set_rate(self, rate: float, now: int) -> None:
        if rate != self.rate:
            self.rate = rate
            if len(self.history) < 100_000:
                self.history.append((now, rate))
            if self.on_rate is not None:
                self.on_rate(now, self)


class NotificationPoint:
    """CNP generation at the receiver (§5.2): at most one CNP per QP per hold-off interval."""

    def __init__(self, holdoff_ns: int) -> None:
        self.holdoff_ns = holdoff_ns
        self.last_cnp: int | None = None
        self.marked = 0
        self.cnps = 0

    def on_ce(self, now: int) -> bool:
        """A CE-marked packet of this QP arrived; True when a CNP must be sent now."""
        self.marked += 1
        if self.last_cnp is not None and now - self.last_cnp < self.holdoff_ns:
            return False
        self.last_cnp = now
        self.cnps += 1
        return True
