"""Retransmission back-off and retry budget (spec/behaviour.md §2.9), written once for PDCs,
RUDI and the target's CLEAR_REQ / CLOSE_REQ.

The notes give ``RTO_Init_Time`` and ``Max_RTO_Retx_Cnt`` but no back-off; a fixed RTO with five
retries gives up after ~6 × RTO of silence (a brief CPU stall, a SYN flood or a quick peer restart
kills honest transfers; issue "reliability" items 10 and 18). Choices (inference, TCP's RFC 6298
§5.5 rule):

- **Back-off**: the RTO in force is ``rto_ns << shift``, capped at ``rto_max_ns``. ``shift`` is
  kept per PDC (and once for the FEP's RUDI requests): one timer round that retransmits anything
  raises it by one, an ACK or response that acknowledges something new resets it to 0. Every
  packet of a PDC shares the PDC's RTO, so the outstanding packets stay ordered by deadline.
- **Retry budget in count and in time**: a packet fails only when it has used
  ``max_rto_retx`` retries **and** ``retry_time_ns`` have passed since its first transmission.
  The count guarantees a minimum number of attempts on a fast fabric, the time a minimum
  patience on a slow or stalled one; the cap on the RTO bounds the number of attempts the time
  budget allows (≈ ``retry_time_ns / rto_max_ns`` beyond the count).
- **Burst after back-off**: a round that finds the RTO already backed off (nothing acknowledged
  since the last timeout) retransmits at most ``rto_burst`` packets of the PDC and re-arms the
  rest, so a peer that went silent — or a forger whose packet made the target send a window of
  read requests — draws ``window + rounds × rto_burst`` packets over the whole budget instead of
  ``window × rounds``.
"""

from __future__ import annotations

from uet.pds.config import PdsConfig

#: the shift never grows past this (2^16 × any sane RTO is beyond every cap)
MAX_SHIFT = 16


def rto_for(cfg: PdsConfig, shift: int) -> int:
    """The RTO in force after ``shift`` back-offs: ``rto_ns << shift``, at most ``rto_max_ns``
    (a cap below ``rto_ns`` means no back-off at all)."""
    r = cfg.rto_ns << shift
    cap = cfg.rto_max_ns if cfg.rto_max_ns > cfg.rto_ns else cfg.rto_ns
    return r if r <= cap else cap


def next_shift(shift: int) -> int:
    """One more back-off step (bounded)."""
    return shift + 1 if shift < MAX_SHIFT else shift


def retries_spent(cfg: PdsConfig, retries: int, first_tx: int, now: int) -> bool:
    """Has a packet first sent at ``first_tx`` with ``retries`` RTO retries used its budget?
    Both the count (``max_rto_retx``) and the time (``retry_time_ns``) must be spent."""
    return retries >= cfg.max_rto_retx and now - first_tx >= cfg.retry_time_ns
