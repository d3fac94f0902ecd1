"""The record of one packet on an initiator PDC (spec/behaviour.md §2.5 "record per packet"),
re-exported by :mod:`uet.pds.pdc`.

Its own module so that :mod:`uet.pds.scoreboard`, which :mod:`uet.pds.pdc` imports, can name it
without an import cycle: the scoreboard reads and marks its fields per SACK bit, natively in the
compiled build only when it names the class (issue 28).
"""

from __future__ import annotations

from typing import Any

__all__ = ["TxPkt"]


class TxPkt:
    """One packet on an initiator PDC: a queued/outstanding request or a tracked CLOSE CP.

    ``ctl`` is None for SES requests and the ControlType for tracked control packets. ``tx_seq``
    orders transmissions on the PDC (go-back-N ignores NACKs for copies sent before a restart).

    Speed: the constructor sets only what ``submit`` knows; the transmission fields are set when
    the packet is first sent, and the rarely changed ones (``ctl``, retry counts, SACK marks) are
    class-level defaults shadowed per instance on first write (the ``__dict__`` slot), so a
    packet costs one small allocation on the data path.
    """

    __slots__ = (
        "psn",
        "token",
        "next_hdr",
        "ses",
        "payload",
        "nbytes",
        "som",
        "eom",
        "tx_time",
        "tx_seq",
        "sends",
        "entropy",
        "first_tx",
        "__dict__",
    )

    #: set at the first transmission (uet.pds.initiator._transmit)
    tx_seq: int
    entropy: int
    ctl: int | None = None
    retries = 0
    nack_retries = 0
    #: resend time (ns) while waiting out a resource-shortage NACK, 0 otherwise (uet.pds.feedback)
    parked = 0
    dst_received = False
    fast_done = False
    #: an ACK's SACK bitmap covered it and said "not received" (uet.pds.feedback fast retransmit)
    sack_hole = False
    #: when an ACK first reported it missing (0: never; uet.pds.feedback reordering window)
    hole_at = 0
    #: waiting in its PDC's CCC-gated retransmission queue (``InitiatorPdc.cc_rtx``)
    rtx_wait = False
    #: its RTO re-armed ``tx_time`` without sending it (the peer window forbade it, or the
    #: round's burst was spent): until it is sent again, an ACK naming it gives no RTT sample
    #: (``now - tx_time`` would measure from a moment nothing was sent; uet.pds.initiator)
    rearmed = False

    def __init__(self, token: Any, next_hdr: int, ses: bytes, payload: Any, som: bool, eom: bool) -> None:
        self.psn = -1
        self.token = token
        self.next_hdr = next_hdr
        self.ses = ses
        self.payload = payload
        self.nbytes = len(ses) + len(payload)
        self.som = som
        self.eom = eom
        self.sends = 0
        self.tx_time = 0
        #: time of the first transmission (the retry budget's time part, uet.pds.backoff)
        self.first_tx = 0

    def forget_feedback(self) -> None:
        """Forget what ACKs, NACKs and timers said about this packet under its old PSN: it is
        renumbered (a new Start_PSN, §2.3) or moved to a new PDC (uet.pds.closing), so its
        received / SACK-hole / fast-retransmit marks and its waiting state (``rtx_wait`` in a
        retransmission queue it has left, ``parked``, ``rearmed``) no longer apply."""
        self.dst_received = False
        self.fast_done = False
        self.sack_hole = False
        self.hole_at = 0
        self.rtx_wait = False
        self.rearmed = False
        self.parked = 0
