"""Return direction of a PDC: read data travelling as PDS requests from target to initiator
(spec/behaviour.md §1.4 "Read return data ... travels on the same PDC as the read request, using
the PDC's second PSN space", §2.1 "large read data travels as PDS *requests* in the return
direction, which are congestion controlled", §6.5, wire-format.md §6.1 next_hdr 5).

A PDC is bidirectional: each role owns a *send half* and a *receive half* per direction. The
forward direction is the initiator's :class:`~uet.pds.pdc.InitiatorPdc` (send) and the target's
:class:`~uet.pds.pdc.TargetPdc` (receive). The return direction reuses the very same two classes
and code paths with the roles swapped:

- the target PDC's ``ret`` is an ``InitiatorPdc`` (``owner`` = the target PDC) that queues,
  windows, gates, transmits and retransmits return requests: its PSNs start at the PDC's
  Start_PSN (§2.3.1, the reference's choice for both spaces), SPDCID = the target's PDCID,
  DPDCID = the initiator's. It never sends SYN, never closes by itself, and shares the FEP's
  congestion gate toward that peer (traffic class 0: the target does not know the initiator's);
- the initiator PDC's ``rrx`` is a ``TargetPdc`` that classifies, delivers (``on_deliver`` with
  the initiator's PDCID and the request's ``ses`` bytes and payload, exactly once), coalesces and
  ACKs them (ACK SPDCID = the initiator's PDCID), and answers ACK_REQ and CLEAR for them.

Packets on the wire tell the directions apart by the DPDCID: a request whose DPDCID names an
initiator-role PDC is return data; an ACK or NACK whose DPDCID names a target-role PDC is for its
return half (except the ACK of a CLOSE_REQ, which the target tracks itself).

Choices where the notes are silent (inference):

- Only ``RESPONSE_DATA`` (next_hdr 5) is accepted on the return direction; anything else is
  NACKed ``PDC_HDR_MISMATCH``. Return data that reaches an initiator PDC still in SYN_SENT (its
  ACK was lost, so it does not know the target's PDCID yet) is dropped and recovered by the
  target's RTO.
- Closing waits for return data on both sides. The initiator does not close while the SES holds
  a lock (``submit(lock=True)`` → :meth:`unlock_pdc`, §6.10 ``lock_pdc``) and flushes a pending
  return-direction ACK before CLOSE. A target that gets CLOSE while return requests are still
  queued or unacknowledged keeps the CLOSE and answers it once the return direction drains
  (instead of the reference's NACK ``CLOSING_IN_ERR``, which would fail the read); a target's
  CLOSE_REQ likewise waits for the drain.
- Retry exhaustion or a fatal NACK on the return direction fails its packets (``Failed``) and
  closes the target PDC in error (§2.12).
"""

from __future__ import annotations

from uet.pds._aliases import _S_CLOSED, _S_ESTABLISHED, _S_SYN_SENT, _T_ESTABLISHED
from uet.pds.events import Failed
from uet.pds.pdc import InitiatorPdc, TargetPdc, TxPkt
from uet.pds.trimwait import TrimResendMixin


class ReturnMixin(TrimResendMixin):
    """Return-direction behaviour of :class:`uet.pds.core.PdsCore` (see the module docstring)."""

    def submit_return(
        self,
        pdc: int,
        next_hdr: int,
        ses: bytes,
        payload: bytes | memoryview,
        *,
        token: object,
        som: bool,
        eom: bool,
        now: int,
    ) -> None:
        """Queue one return-direction request (read data: ``next_hdr`` 5, RESPONSE_DATA) on the
        target PDC ``pdc`` — the ``Delivery.pdc`` of the read request it answers (SES
        ``OutPacket.return_pdc``). Sent in order with its own PSN space, ACKed by the initiator,
        retransmitted and congestion-gated like forward requests; ``token`` comes back in exactly
        one ``Acked``/``Failed``. A PDC that is gone or closing yields ``Failed`` at once."""
        tp = self.pdcs.get(pdc)
        if tp is None or tp.role != "target" or tp.state is not _T_ESTABLISHED or tp.close_deferred is not None:
            self._events.append(Failed(token, "no target PDC for return data", None))
            return
        ret = tp.ret
        if ret is None:
            ret = tp.ret = self._new_ret_half(tp, now)
        ret.pending.append(TxPkt(token, next_hdr, ses, payload, som, eom))
        self._dirty[ret] = None

    def _new_ret_half(self, tp: TargetPdc, now: int) -> InitiatorPdc:
        cfg = self.config
        key = ("return", tp.lpdcid)
        g = self.gates.get((tp.peer, 0))
        if g is None:
            g = self.gates[(tp.peer, 0)] = [self.gate_factory(tp.peer, 0), 0]
        g[1] += 1
        ent = self.entropy_factory(tp.mode, self.rng, cfg.entropy_paths)
        ret = InitiatorPdc(key, tp.peer, tp.mode, tp.lpdcid, tp.ret_psn, ent, g[0])
        # born with its PDC, which is established: no SYN phase of its own
        ret.state = _S_ESTABLISHED
        ret.rpdcid = tp.rpdcid
        ret.owner = tp
        ret.sdi = tp.sdi
        ret.peer_mp = min(128, cfg.mp_range)
        ret.last_activity = now
        self._count("return_halves")
        return ret

    def _ret_busy(self, tp: TargetPdc) -> bool:
        ret = tp.ret
        return ret is not None and bool(ret.outstanding or ret.pending)

    def _ret_drained(self, tp: TargetPdc, now: int) -> None:
        """The return direction has nothing queued or unacknowledged: run what waited for it."""
        cd = tp.close_deferred
        if cd is not None:
            tp.close_deferred = None
            self._rx_close(tp, cd[0], cd[1], now)
        elif (self._closing or tp.close_req_wanted) and tp.state is _T_ESTABLISHED:
            tp.close_req_wanted = False
            self._target_close_req(tp, now)

    def _ret_fail(self, tp: TargetPdc, reason: str, code: int | None) -> None:
        """Fail every return packet of ``tp`` and release its gate share (PDC going away)."""
        ret = tp.ret
        if ret is None:
            return
        tp.ret = None
        ev = self._events
        n = 0
        for q in ret.outstanding.values():
            n += 1
            ev.append(Failed(q.token, reason, code))
        for q in ret.pending:
            ev.append(Failed(q.token, reason, code))
        ret.outstanding.clear()
        ret.pending.clear()
        ret.state = _S_CLOSED
        self._dirty.pop(ret, None)
        g = self.gates.get((tp.peer, 0))
        if g is not None:
            if n:
                g[0].on_done(n)
            g[1] -= 1
            if g[1] <= 0:
                del self.gates[(tp.peer, 0)]

    def _rrx_for(self, pdc: InitiatorPdc, src: str, spdcid: int, nh: int, now: int) -> TargetPdc | None:
        """The return receive half of initiator PDC ``pdc`` for a request from ``src``, or None
        when it must be refused (the caller drops / NACKs)."""
        st = pdc.state
        if st is _S_SYN_SENT:
            self._drop("return_before_established", now, src)
            return None
        if st is _S_CLOSED:
            self._drop("return_closed_pdc", now, src)
            return None
        pdc.last_activity = now  # return traffic keeps the PDC from idling out
        rr = pdc.rrx
        if rr is None:
            rr = pdc.rrx = TargetPdc(pdc.peer, pdc.mode, pdc.lpdcid, pdc.rpdcid, pdc.start_psn, now)
            rr.state = _T_ESTABLISHED  # a view on the initiator PDC: no life cycle of its own
            rr.sdi = pdc.sdi
        return rr

    def _rrx_deadline(self, pdc: InitiatorPdc) -> int | None:
        rr = pdc.rrx
        return None if rr is None else rr.ack.deadline

    def _rrx_timer(self, pdc: InitiatorPdc, now: int) -> None:
        rr = pdc.rrx
        if rr is not None and rr.ack.deadline is not None and now >= rr.ack.deadline:
            self._count("acks_timer")
            self._flush_ack(rr, now)
