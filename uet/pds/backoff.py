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

**Adaptive RTO** (``PdsConfig.rto_adaptive``; choice: the notes give only a fixed
``RTO_Init_Time``, §2.9). A fixed RTO is right when the round trip is known and stable (the
simulator's validation runs, a quiet fabric); it collapses when the round trip grows past it — on
a shared two-core machine the switch process falls behind and its socket queues hold hundreds of
milliseconds of frames, every timer fires on packets that were delivered, and the spurious copies
add the load that keeps the queues long (issue 10: 0 of 240 flows of ``uet-run --workload
all_to_all -n 16`` intact). With the option on, each PDC keeps TCP's estimator (RFC 6298 §2):

- a valid sample ``R`` (the §2.9 rule: a packet sent once and an ACK without ``retx``, or sent
  twice and an ACK with ``retx`` — Karn's rule made exact by the ACK's flag) updates
  ``RTTVAR ← ¾ RTTVAR + ¼ |SRTT − R|`` then ``SRTT ← ⅞ SRTT + ⅛ R`` (the first sample sets
  ``SRTT = R``, ``RTTVAR = R / 2``);
- ``RTO = SRTT + 4 RTTVAR``, never below ``rto_ns`` (``RTO_Init_Time`` is both the value before
  the first sample and the floor, as RFC 6298's 1 s minimum) nor above 60 s (RFC 6298 (2.5));
- the back-off above applies to it unchanged, but a timeout's doubled RTO is kept until a valid
  sample arrives (RFC 6298 (5.7)), not dropped at the first ACK of a packet sent before the
  timeout: that ACK answers the original, whose round trip is exactly what the short RTO
  underestimated.

Off by default in :class:`~uet.pds.config.PdsConfig` (the fixed RTO of the simulator's runs and
of every exact-packet test stays as it was); ``uet-run`` turns it on for the live engine.
"""

from __future__ import annotations

from typing import Final, Protocol

from uet.pds.config import PdsConfig

#: the shift never grows past this (2^16 × any sane RTO is beyond every cap)
MAX_SHIFT: Final = 16
#: upper bound of the adaptive RTO: RFC 6298 (2.5) allows a maximum of at least 60 s
RTO_EST_MAX_NS: Final = 60_000_000_000


class RttState(Protocol):
    """What :func:`rtt_sample` updates: an initiator PDC (uet.pds.pdc.InitiatorPdc)."""

    srtt: int
    rttvar: int
    rto: int
    rto_shift: int


def rto_for(cfg: PdsConfig, shift: int, base: int = 0) -> int:
    """The RTO in force after ``shift`` back-offs: ``base << shift`` (``base``: the PDC's
    adaptive RTO, 0 = none yet or fixed mode: ``rto_ns``), at most ``rto_max_ns`` (a cap below
    the base means no back-off at all)."""
    return rto_ns_for(cfg.rto_ns, cfg.rto_max_ns, shift, base)


def rto_ns_for(rto_ns: int, rto_max_ns: int, shift: int, base: int = 0) -> int:
    """:func:`rto_for` of the configuration's ``rto_ns`` and ``rto_max_ns`` given as ints: the PDS
    core's form (it keeps both as typed attributes, ``PdsCore._rto_ns`` and ``_rto_max_ns``; a
    ``PdsConfig`` field read is a generic attribute look-up in the compiled build, issue 28)."""
    b = base or rto_ns
    r = b << shift
    cap = rto_max_ns if rto_max_ns > b else b
    return r if r <= cap else cap


def rtt_sample(st: RttState, rtt: int, cfg: PdsConfig) -> None:
    """Take one valid RTT sample (ns) into the adaptive estimator (module docstring, RFC 6298
    §2): new ``srtt``, ``rttvar`` and ``rto`` (the base :func:`rto_for` backs off), and the
    back-off ends (RFC 6298 (5.7))."""
    s = st.srtt
    if not s:
        st.srtt = rtt
        st.rttvar = rtt >> 1
    else:
        d = s - rtt
        if d < 0:
            d = -d
        st.rttvar += (d - st.rttvar) >> 2
        st.srtt = s + ((rtt - s) >> 3)
    r = st.srtt + 4 * st.rttvar
    if r < cfg.rto_ns:
        r = cfg.rto_ns
    elif r > RTO_EST_MAX_NS:
        r = RTO_EST_MAX_NS
    st.rto = r
    st.rto_shift = 0


def next_shift(shift: int) -> int:
    """One more back-off step (bounded)."""
    return shift + 1 if shift < MAX_SHIFT else shift


def retries_spent(cfg: PdsConfig, retries: int, first_tx: int, now: int) -> bool:
    """Has a packet first sent at ``first_tx`` with ``retries`` RTO retries used its budget?
    Both the count (``max_rto_retx``) and the time (``retry_time_ns``) must be spent."""
    return retries >= cfg.max_rto_retx and now - first_tx >= cfg.retry_time_ns
