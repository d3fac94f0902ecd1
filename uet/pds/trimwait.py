"""Fixed-window resends of trimmed packets on the ACK clock (``PdsConfig.clocked_trim_resend``).

Without congestion control (the ``none`` gate: a fixed window, architecture.md "Congestion
control seam") nothing ever shrinks a sender's window. If every trimmed packet were resent the
moment its NACK arrives (the reference's rule, behaviour.md §2.10 "reference resends at once"),
each of N incast senders would keep its whole window in the network for good: the trimmed
header comes back within a round trip, the copy goes out again, and the bottleneck trims it
again. The work then grows with N × window per round trip while the bottleneck still delivers
one packet per serialisation time (uet-sim's 127→1 incast with 48-packet windows: 0 of 127 flows
done after 27 CPU-minutes).

The rule here (inference: §2.10 gives trims a ``NACK_Retx_Time`` delay, "mirror 1 ms; reference
resends at once", and §3.4 says the trimmed packet leaves flight; neither says what clocks the
resend when no CCC does):

- A trimmed packet (``TRIMMED`` / ``TRIMMED_LASTHOP``) leaves the network but keeps its place in
  the window: it is not acknowledged. It joins the PDC's retransmission queue (``cc_rtx``, the
  queue a CCC uses, §4.1 ``mark_for_retransmit``).
- **Packet conservation**: every packet an ACK shows received for the first time (named by
  ACK_PSN, covered by CACK or set in the SACK bitmap) lets the PDC resend one waiting packet
  (``InitiatorPdc.rtx_credit``). Waiting resends go before new data, and no new data goes
  while any wait (§4.1: a CCC sends its retransmissions first). So while a PDC recovers, it puts
  a packet into the network only when one has left it by arriving, and a trim takes one out;
  once nothing waits, new data refills the fixed window as before.
- **Liveness**: when nothing of the PDC is left in the network (every outstanding packet is
  waiting, known received, or parked), no ACK can come to clock it, so the oldest waiting packet
  goes at once (``trim_resend_idle``). A single packet in flight therefore behaves exactly as
  with the reference's rule, and a lone sender never waits for its RTO.
- An RTO of a waiting packet only re-arms its timer (uet.pds.initiator ``_rto_one``): it is out
  of flight and nothing was lost that the ACK clock will not resend.

Effect on uet-sim's incasts (2 MB each, 100 Gb/s fat tree, issue 10): the number of resends is
bounded by the number of packets delivered plus one per sender per round trip, instead of
growing with N × window per round trip.
"""

from __future__ import annotations

from uet.pds.pdc import InitiatorPdc, TxPkt
from uet.pds.state import PdsState


class TrimResendMixin(PdsState):
    """Trim resends of fixed-window PDCs, part of :class:`uet.pds.core.PdsCore` (module doc)."""

    def _trim_wait(self, pdc: InitiatorPdc, pkt: TxPkt, now: int) -> None:
        """A trim NACK of ``pkt`` on a fixed-window PDC: queue it for the ACK clock."""
        if pkt.rtx_wait:
            return  # already waiting (a NACK of an older copy)
        pkt.rtx_wait = True
        pkt.fast_done = True  # recovered by this NACK: a SACK gap behind it is no new loss
        pdc.cc_rtx.append(pkt)
        self._count("trim_rtx_wait")
        self._dirty[pdc] = None

    def _clocked_resend(self, pdc: InitiatorPdc, now: int) -> bool:
        """Resend waiting trimmed packets as the ACK clock allows (module doc); True when none
        is left waiting (new data may go)."""
        rq = pdc.cc_rtx
        out = pdc.outstanding
        credit = pdc.rtx_credit
        while rq:
            pkt = rq[0]
            if not pkt.rtx_wait or out.get(pkt.psn) is not pkt or pkt.dst_received:
                rq.popleft()  # acknowledged, known received or resent otherwise meanwhile
                pkt.rtx_wait = False
                continue
            if credit <= 0:
                if self._pdc_in_network(pdc):
                    break
                self._count("trim_resend_idle")  # nothing left to clock the PDC: go now
            else:
                credit -= 1
            rq.popleft()
            self._transmit(pdc, pkt, now, True, True)
        pdc.rtx_credit = credit if rq else 0
        return not rq

    @staticmethod
    def _pdc_in_network(pdc: InitiatorPdc) -> bool:
        """Is some outstanding packet of ``pdc`` still on its way (sent, not waiting, not parked,
        not known received), so that its ACK, NACK or RTO will clock the PDC? The newest
        transmissions come last in ``outstanding``, so the scan usually stops at once."""
        for q in reversed(pdc.outstanding.values()):
            if not q.rtx_wait and not q.dst_received and not q.parked:
                return True
        return False
