"""The secure establishment seams of the PDS (behaviour.md §2.3.2): what the core asks about a
Start_PSN and tells when a secure PDC closes.

Both are declared here and always present on :class:`uet.pds.core.PdsCore`, so the core calls
them without probing:

* ``PdsCore.start_psn_policy`` (target side): a :class:`StartPsnPolicy`, asked on every SYN that
  would create a target PDC and told when one closes. The default, :class:`AcceptEveryStartPsn`,
  accepts every offer and returns no Expected_PSN. :mod:`uet.tss.establish` has the two policies
  of §2.3.2 (EXPECTED_0RTT_START, RANDOM_1RTT_START); :class:`PeerStartPsn` adapts a plain
  function ``(peer, offered_start_psn) -> None | int``.
* ``PdsCore.initiator_start_psn`` (initiator side): an :class:`InitiatorStartPsnHook`
  (:class:`uet.tss.establish.InitiatorStartPsn`) for PDCs submitted with an SDI, or None for
  random Start_PSNs and no use of a closing ACK's EPSN.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["AcceptEveryStartPsn", "InitiatorStartPsnHook", "PeerStartPsn", "StartPsnPolicy"]


class StartPsnPolicy(Protocol):
    """The target's side: asked about an offered Start_PSN, told when a PDC closes."""

    def offer(self, peer: str, sdi: int, start_psn: int) -> int | None:
        """None accepts ``start_psn`` (0-RTT); an int is the Start_PSN the PDC must use (it
        goes PENDING and the target NACKs ``NEW_START_PSN`` with it). ``sdi`` is 0 when the
        SYN came without one."""
        ...

    def on_close(self, sdi: int, start_psn: int) -> int | None:
        """The Expected_PSN the closing ACK returns (``EPSN``), or None for none."""
        ...


class InitiatorStartPsnHook(Protocol):
    """The initiator's side, per SDI (``uet.tss.establish.InitiatorStartPsn``)."""

    def ini_start_psn(self, sdi: int) -> int:
        """The SDI's ``ini_start_psn``: 0 while none is known (a target may then refuse the
        first flight, so the core sends little of it)."""
        ...

    def start_psn(self, sdi: int) -> int:
        """The Start_PSN of a new PDC of ``sdi``."""
        ...

    def on_close_ack(self, sdi: int, expected_psn: int) -> None:
        """A closing ACK carried ``EPSN``: adopt it when newer."""
        ...


class AcceptEveryStartPsn:
    """The default target policy: every offered Start_PSN is accepted, no EPSN at close."""

    __slots__ = ()

    def offer(self, peer: str, sdi: int, start_psn: int) -> int | None:
        return None

    def on_close(self, sdi: int, start_psn: int) -> int | None:
        return None


class PeerStartPsn:
    """A target policy from a function ``(peer, offered_start_psn) -> None | int`` (the SDI is
    not consulted); no EPSN at close."""

    __slots__ = ("decide",)

    def __init__(self, decide: Callable[[str, int], int | None]) -> None:
        self.decide = decide

    def offer(self, peer: str, sdi: int, start_psn: int) -> int | None:
        return self.decide(peer, start_psn)

    def on_close(self, sdi: int, start_psn: int) -> int | None:
        return None
