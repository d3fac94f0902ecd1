"""Replay-safe Start_PSN rules for secure PDCs: the seam the PDS core calls (behaviour.md §2.3.2).

With TSS on, replay protection of RUD/ROD traffic comes from the PDS PSN window, so a target must
never accept a Start_PSN that could replay an older PDC's packets. Two target methods, chosen per
FEP and interoperable; both are plain objects the PDS asks when a SYN arrives and when a PDC closes:

- :class:`Expected0RttStart` (EXPECTED_0RTT_START, default): per SDI an ``Expected_PSN`` (initially
  0). A SYN whose Start_PSN is not at or after it (serial arithmetic) is answered with NACK
  ``NEW_START_PSN`` carrying ``Expected_PSN`` and the PDC goes to PENDING; otherwise 0-RTT accept.
  On close the SDI's ``Expected_PSN`` rises to ``Start_PSN + 1`` if newer and travels back in the
  closing ACK (``EPSN`` flag).
- :class:`Random1RttStart` (RANDOM_1RTT_START): every new PDC gets a target-minted random Start_PSN
  through a ``NEW_START_PSN`` NACK; the PDS keeps the minted value in the PENDING PDC and passes it
  back as ``minted`` when the initiator re-drives the SYN.

:class:`InitiatorStartPsn` is the initiator side: ``ini_start_psn`` per SDI, adopted from closing
ACKs. A NACK ``NEW_START_PSN`` only sets the Start_PSN of the PDC it answers (the spec notes name the
closing ACK as the only source of ``ini_start_psn``).

Random Start_PSNs are uniform in ``[2^16, 2^31)`` as in the reference (§2.3.1), drawn from
:class:`secrets.SystemRandom` unless a generator is injected (simulations, tests).
"""

from __future__ import annotations

import random
import secrets
from typing import Protocol

from uet.enums import Enum
from uet.wire.pds import psn_add, psn_after

__all__ = [
    "LIMIT_PSN_RANGE",
    "NEW_PDC_TIME_NS",
    "Expected0RttStart",
    "InitiatorStartPsn",
    "Random1RttStart",
    "StartPsnMethod",
    "StartPsnPolicy",
    "psn_range_exhausted",
    "random_start_psn",
    "start_psn_policy",
]

#: A secure PDC must close once ``next_psn − Start_PSN ≥ 2^31`` (spec ``Limit_PSN_Range``, §2.3.2).
LIMIT_PSN_RANGE = 1 << 31
#: PENDING target PDCs not re-driven within this time are freed (reference default 1000 ms, §2.3.2).
NEW_PDC_TIME_NS = 1_000_000_000

_START_LO = 1 << 16
_START_HI = 1 << 31


class StartPsnMethod(Enum):
    """Target-side secure establishment method (behaviour.md §2.3.2)."""

    EXPECTED_0RTT_START = "expected_0rtt_start"
    RANDOM_1RTT_START = "random_1rtt_start"


def random_start_psn(rng: random.Random | None = None) -> int:
    """A random Start_PSN in ``[2^16, 2^31)`` (reference, behaviour.md §2.3.1)."""
    if rng is None:
        return _START_LO + secrets.randbelow(_START_HI - _START_LO)
    return rng.randrange(_START_LO, _START_HI)


def psn_range_exhausted(start_psn: int, next_psn: int) -> bool:
    """True when a secure PDC has used its PSN range and must close (``Limit_PSN_Range``)."""
    return (next_psn - start_psn) & 0xFFFFFFFF >= LIMIT_PSN_RANGE


class StartPsnPolicy(Protocol):
    """What the PDS target asks about a secure SYN and tells at close."""

    method: StartPsnMethod

    def check_start_psn(self, sdi: int, start_psn: int, minted: int | None = None) -> int | None:
        """None = accept ``start_psn``; an int = NACK ``NEW_START_PSN`` with that payload."""
        ...

    def on_close(self, sdi: int, start_psn: int) -> int | None:
        """The Expected_PSN to return in the closing ACK (``EPSN``), or None for none."""
        ...

    def offer(self, peer: str, sdi: int, start_psn: int) -> int | None:
        """:meth:`check_start_psn` as the PDS core asks it (:class:`uet.pds.startpsn.StartPsnPolicy`)."""
        ...


class _TargetPolicy:
    """What both target policies share: the PDS core's form of :meth:`check_start_psn`."""

    def check_start_psn(self, sdi: int, start_psn: int, minted: int | None = None) -> int | None:
        raise NotImplementedError

    def offer(self, peer: str, sdi: int, start_psn: int) -> int | None:
        """The PDS core's question (uet.pds.startpsn): the peer is not consulted."""
        return self.check_start_psn(sdi, start_psn)


class Expected0RttStart(_TargetPolicy):
    """EXPECTED_0RTT_START target policy: per-SDI ``Expected_PSN`` (module docstring)."""

    method = StartPsnMethod.EXPECTED_0RTT_START

    def __init__(self) -> None:
        self._expected: dict[int, int] = {}

    def expected_psn(self, sdi: int) -> int:
        """The SDI's current ``Expected_PSN`` (0 until a PDC of that SDI closed)."""
        return self._expected.get(sdi, 0)

    def check_start_psn(self, sdi: int, start_psn: int, minted: int | None = None) -> int | None:
        """Accept when ``start_psn`` is at or after ``Expected_PSN``, else NACK with it.

        ``minted`` is ignored: a re-driven PENDING PDC passes the same test.
        """
        expected = self._expected.get(sdi, 0)
        if start_psn == expected or psn_after(start_psn, expected):
            return None
        return expected

    def on_close(self, sdi: int, start_psn: int) -> int:
        """Raise ``Expected_PSN`` to ``start_psn + 1`` if newer; return it for the closing ACK.

        "Newer" is decided on ``start_psn`` (at or after ``Expected_PSN``), not on ``start_psn + 1``:
        for the largest acceptable Start_PSN, ``Expected_PSN + 2^31 − 1``, the candidate is exactly
        half the PSN space away and a serial comparison of it would wrongly leave ``Expected_PSN``
        behind (found by the property test in tests/test_tss_establish.py).
        """
        expected = self._expected.get(sdi, 0)
        if start_psn == expected or psn_after(start_psn, expected):
            self._expected[sdi] = psn_add(start_psn, 1)
        return self._expected.get(sdi, 0)


class Random1RttStart(_TargetPolicy):
    """RANDOM_1RTT_START target policy: the target mints every Start_PSN (module docstring)."""

    method = StartPsnMethod.RANDOM_1RTT_START

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng

    def check_start_psn(self, sdi: int, start_psn: int, minted: int | None = None) -> int | None:
        """Accept only the value this target minted for the PENDING PDC; else mint a new one."""
        if minted is not None and start_psn == minted:
            return None
        return random_start_psn(self._rng)

    def on_close(self, sdi: int, start_psn: int) -> None:
        """No ``EPSN`` in the closing ACK with this method."""
        return None


def start_psn_policy(method: StartPsnMethod, rng: random.Random | None = None) -> StartPsnPolicy:
    """The target policy object for ``method``."""
    if method is StartPsnMethod.EXPECTED_0RTT_START:
        return Expected0RttStart()
    return Random1RttStart(rng)


class InitiatorStartPsn:
    """Initiator side: per-SDI ``ini_start_psn`` (behaviour.md §2.3.2)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng
        self._ini: dict[int, int] = {}

    def ini_start_psn(self, sdi: int) -> int:
        """The SDI's ``ini_start_psn`` (0 = none yet)."""
        return self._ini.get(sdi, 0)

    def start_psn(self, sdi: int) -> int:
        """Start_PSN for a new PDC of ``sdi``: ``ini_start_psn`` when non-zero, else random."""
        value = self._ini.get(sdi, 0)
        return value if value else random_start_psn(self._rng)

    def on_new_start_psn(self, sdi: int, payload: int) -> int:
        """A NACK ``NEW_START_PSN``: the PDC restarts from ``payload`` (returned, not adopted)."""
        return payload & 0xFFFFFFFF

    def on_close_ack(self, sdi: int, expected_psn: int) -> None:
        """A closing ACK with ``EPSN``: adopt ``expected_psn`` when none is set or it is newer."""
        current = self._ini.get(sdi, 0)
        if current == 0 or psn_after(expected_psn, current):
            self._ini[sdi] = expected_psn & 0xFFFFFFFF
