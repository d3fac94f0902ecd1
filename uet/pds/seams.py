"""Seams for congestion control and multipath: the entropy strategy and the congestion gate.

architecture.md "Congestion control seam": the PDS asks a per-CCC object before each
transmission and tells it every ACK, NACK, trim, ECN mark and timeout. The default gate is a
fixed window (the ``none`` algorithm) and the default entropy a rotating set (RUD spraying,
spec/behaviour.md §4.6 "a randomly initialised modular counter is acceptable") or one value per
PDC (ROD single path, §2.13). :mod:`uet.cc` replaces them from ``PdsConfig.cc`` / ``lb`` (or an
owner sets ``PdsCore.gate_factory`` / ``PdsCore.entropy_factory``).

A gate whose ``cc_signals`` is true (:class:`uet.cc.ccc.Ccc`) gets the full signals of §4.1 in
addition: ``on_ack_cc`` (newly received bytes from the ACK_CC state, ECN-marked bytes, an RTT
sample less the target's service time, the receiver window penalty), ``on_nack_cc`` (per NACKed
packet, trims last hop or not), ``deadline(now)`` (pacing / credit request time, into
``get_timer()``), ``ack_request(nbytes)``, ``cc_request`` with ``credit_target()`` (send CC
requests) and ``on_grant`` (CREDIT control packets), and its path selector hears about every
packet an ACK covers.
"""

from __future__ import annotations

import random
from typing import Protocol

from uet.pds.config import Mode


class EntropyStrategy(Protocol):
    """Chooses the entropy value (UDP source port) of each packet of one PDC."""

    def next_entropy(self) -> int:
        """The entropy value for the next transmission."""
        ...

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        """``event`` is ``"ack"``, ``"ecn"``, ``"trim"`` (not at the last hop), ``"loss"``
        (SACK-inferred) or ``"timeout"`` (uet.cc.entropy)."""
        ...


class RotatingEntropy:
    """Oblivious spraying over ``paths`` consecutive values from a random base (§4.6)."""

    __slots__ = ("_base", "_paths", "_i")

    def __init__(self, rng: random.Random, paths: int) -> None:
        self._paths = max(1, paths)
        self._base = rng.randrange(0x4000, 0x10000 - self._paths)
        self._i = rng.randrange(self._paths)

    def next_entropy(self) -> int:
        i = self._i + 1
        if i == self._paths:
            i = 0
        self._i = i
        return self._base + i

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        """Oblivious: feedback is ignored (REPS uses it, uet.cc.entropy)."""


class SingleEntropy:
    """One entropy value for the PDC's life: ROD single path (§2.13)."""

    __slots__ = ("value",)

    def __init__(self, rng: random.Random, paths: int = 1) -> None:
        self.value = rng.randrange(0x4000, 0x10000)

    def next_entropy(self) -> int:
        return self.value

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        """Single path: nothing to learn."""


def default_entropy(mode: Mode, rng: random.Random, paths: int) -> EntropyStrategy:
    """RUD sprays over a rotating set; ROD (and everything else) uses one value."""
    return RotatingEntropy(rng, paths) if mode == Mode.RUD else SingleEntropy(rng)


class CongestionGate(Protocol):
    """Per-CCC gate asked before every transmission of new data and told about its fate.

    A gate may also offer ``quota(now) -> int`` (first transmissions allowed now) together with
    ``on_send_many(npkts, nbytes, now)``; the PDS then asks once per burst instead of calling
    ``can_send``/``on_send`` per packet (see :class:`FixedWindowGate`)."""

    def can_send(self, nbytes: int, now: int) -> bool: ...

    def on_send(self, nbytes: int, retx: bool, now: int) -> None: ...

    def on_ack(self, npkts: int, nbytes: int, ecn: bool, rtt_ns: int | None, now: int) -> None: ...

    def on_nack(self, code: int, ecn: bool, now: int) -> None: ...

    def on_loss(self, nbytes: int, timeout: bool, now: int) -> None:
        """A packet of ``nbytes`` inferred lost and resent: by its RTO (``timeout``) or by the
        SACK (fast retransmit, ``timeout`` false)."""
        ...

    def on_done(self, npkts: int, nbytes: int = 0) -> None:
        """``npkts`` packets (``nbytes`` in all) left flight without an ACK (failed)."""
        ...


class FixedWindowGate:
    """The ``none`` algorithm: at most ``window`` first transmissions in flight per CCC."""

    __slots__ = ("window", "inflight", "acked_bytes", "nacks", "timeouts", "losses", "ecn_marks")

    cc_signals = False

    def __init__(self, window: int) -> None:
        self.window = window
        self.inflight = 0
        self.acked_bytes = 0
        self.nacks = 0
        self.timeouts = 0
        self.losses = 0
        self.ecn_marks = 0

    def can_send(self, nbytes: int, now: int) -> bool:
        return self.inflight < self.window

    def quota(self, now: int) -> int:
        """Optional fast seam: how many first transmissions may go now without asking
        :meth:`can_send` per packet; the PDS reports them with :meth:`on_send_many`."""
        q = self.window - self.inflight
        return q if q > 0 else 0

    def on_send(self, nbytes: int, retx: bool, now: int) -> None:
        if not retx:
            self.inflight += 1

    def on_send_many(self, npkts: int, nbytes: int, now: int) -> None:
        """``npkts`` first transmissions of ``nbytes`` in total (pairs with :meth:`quota`)."""
        self.inflight += npkts

    def on_ack(self, npkts: int, nbytes: int, ecn: bool, rtt_ns: int | None, now: int) -> None:
        self.inflight -= npkts
        self.acked_bytes += nbytes
        if ecn:
            self.ecn_marks += 1

    def on_nack(self, code: int, ecn: bool, now: int) -> None:
        self.nacks += 1

    def on_loss(self, nbytes: int, timeout: bool, now: int) -> None:
        if timeout:
            self.timeouts += 1
        else:
            self.losses += 1

    def on_done(self, npkts: int, nbytes: int = 0) -> None:
        self.inflight -= npkts
