"""Control packets (both roles) and the target's close and timers (spec/behaviour.md §2.11,
§2.12, §2.2 target table).

Choices where the notes are silent (inference):

- A CLOSE is accepted once every PSN before it is received; it implicitly clears everything,
  is ACKed, reported as ``PdcClosed`` at once, and the PDC lingers in CLOSING for
  ``close_linger_ns`` (re-ACK a lost CLOSE, NACK ``CLOSING`` for newer PSNs) before it is freed.
- A target closes by CLOSE_REQ (new return-direction PSN, AR, retransmitted on RTO); when no
  CLOSE arrives within ``close_req_ns`` it closes in error and sends NACK ``CLOSING_IN_ERR``
  (linux). Triggers: owner request, core close, or ``target_idle_ns`` without arrivals.
- ``Close_REQ_Time`` measures the initiator's *silence*, not the time since CLOSE_REQ: every
  arrival from the initiator on the PDC (new or retransmitted request, ACK_REQ, the ACK of the
  CLOSE_REQ) restarts it, so CLOSE_WAIT ends in error only after ``close_req_ns`` with nothing
  from the initiator. §2.12 has the initiator ACK the CLOSE_REQ and then quiesce (its active
  message completes, every PSN is acknowledged) before it may send CLOSE, which takes as long as
  its traffic needs; a fixed deadline closed PDCs in error under initiators that were still
  quiescing after a stall (both ends of a stalled process: the idle timer fires first, the
  initiator's buffered packets arrive after the deadline, meet ``INV_DPDCID`` and fail messages
  with acknowledged packets; issue 15). A conforming initiator sends no new message on a PDC
  once it has ACKed the CLOSE_REQ and its retransmissions have a budget, so the wait is bounded;
  an initiator that never ACKs the CLOSE_REQ still meets the CLOSE_REQ retry budget.
- The CLOSE_REQ's retry budget is every packet's (uet.pds.backoff ``retries_spent``: the count
  *and* ``retry_time_ns``), its time counted from the first CLOSE_REQ or the initiator's last
  arrival on the PDC, whichever is later. With the count alone (5 retries, ~450 ms at the
  endpoint's 50 ms RTO) a round trip longer than that — a loaded machine's socket queues — closed
  the PDC in error under an initiator that was answering, and its next packets failed with
  ``CLOSING_IN_ERR`` / ``INV_DPDCID`` (issue 29, the live soak).
- A target PDC closed in error is remembered (at most ``TOMBS`` of them, each for
  ``retry_time_ns``, the initiator's retry horizon) with what it delivered: a late request or
  ACK_REQ of its initiator for a PSN it delivered is ACKed from its last state, one it did not
  deliver draws ``INV_DPDCID`` whose payload is the first PSN beyond every PSN it delivered (the
  notes give this NACK no payload; the provider sends 0). Without it, a PDC closed in error while
  its initiator was only slow (a stalled process) failed messages it had delivered and messages
  it never saw alike: the initiator cannot tell them apart, and resending a delivered one on a
  new PDC would deliver it twice (issue 29, tests/test_api_stress.py).
- CLEAR_REQ is sent after ``clear_ns``, then spaced by the backed-off RTO (uet.pds.backoff), at
  most ``max_clear_req`` times per arrival from the initiator (a forged request cannot draw an
  unbounded stream of replies); it is sent while a guaranteed response waits for its clear with
  nothing arriving; its payload is the newest PSN to clear.
"""

from __future__ import annotations

from typing import Final

from uet.pds._aliases import (
    _A_RETX,
    _AR,
    _CONTROL_LEN,
    _CT_ACK_REQ,
    _CT_CLEAR,
    _CT_CLOSE,
    _CT_CREDIT,
    _CT_CREDIT_REQ,
    _CT_NAMES,
    _CT_NOOP,
    _CT_PROBE,
    _CT_REQ_CLEAR,
    _CT_REQ_CLOSE,
    _CT_RX_KEYS,
    _ISROD,
    _M32,
    _MODE_ROD,
    _NC_CLOSING,
    _NC_INV_DPDCID,
    _NC_PDC_HDR_MISMATCH,
    _NC_PKT_NOT_RCVD,
    _NC_PSN_OOR_WINDOW,
    _NC_UNEXP_EVENT,
    _P_CONTROL,
    _RETX,
    _SYN,
    _T_CLOSE_WAIT,
    _T_CLOSED,
    _T_CLOSING,
    _T_ESTABLISHED,
    _T_PENDING,
)
from uet.pds.backoff import retries_spent, rto_ns_for
from uet.pds.events import PdcClosed
from uet.pds.pdc import InitiatorPdc, TargetPdc
from uet.pds.ret import ReturnMixin
from uet.pds.states import TARGET_TRANSITIONS, transition
from uet.wire.pds import CONTROL, CONTROL_SYN, NackCode, psn_diff
from uet.wire.pdsfast import unpack_control

_NC_CLOSING_IN_ERR: Final = NackCode.CLOSING_IN_ERR
_NC_RCVD_SES_PROCG: Final = NackCode.RCVD_SES_PROCG


#: target PDCs closed in error remembered at once (module docstring)
TOMBS: Final = 256


class ControlMixin(ReturnMixin):
    """Control packets and target close/timers, part of :class:`uet.pds.core.PdsCore`."""

    # -- control packets ---------------------------------------------------------------------------

    def _rx_control(self, data: bytes, src: str, now: int, ctl: int, flags: int, entropy: int | None) -> None:
        """Control packet dispatch: PDC lookup (SYN: by peer and SPDCID), then by role (§2.11)."""
        if len(data) < _CONTROL_LEN:
            self._drop("short_control", now, src)
            return
        pdc: InitiatorPdc | TargetPdc | None
        if flags & _SYN:
            _t, _c, _f, opq, psn, spdcid, _u, _po, payload = CONTROL_SYN.unpack(data)
            pdc = self.target_by_peer.get((src, spdcid))
            if pdc is None:
                code = _NC_PKT_NOT_RCVD if ctl == _CT_ACK_REQ else _NC_INV_DPDCID
                self._send_nack(src, code, psn, 0, spdcid, 0, now, entropy=entropy)
                return
        else:
            _t, _c, _f, opq, psn, spdcid, dpdcid, payload = unpack_control(data)
            pdc = self.pdcs.get(dpdcid)
            if pdc is None:
                ent = self._control_entropy if entropy is None else entropy
                if ctl != _CT_ACK_REQ or not self._tomb_answer(src, dpdcid, spdcid, psn, 0, 0, now, ent):
                    self._send_nack(src, _NC_INV_DPDCID, psn, 0, spdcid, 0, now, entropy=entropy)
                return
            if pdc.peer != src or spdcid != pdc.rpdcid:
                if pdc.peer == src and pdc.role == "initiator" and not pdc.rpdcid:
                    self._rx_control_before_ack(pdc, ctl, spdcid, payload, now)
                    return
                self._send_nack(src, _NC_PDC_HDR_MISMATCH, psn, pdc.lpdcid, spdcid, 0, now, entropy=entropy)
                return
        if pdc.sdi != self._rx_sdi:
            self._drop("sdi_mismatch", now, src)
            return
        self._tdirty.add(pdc.lpdcid)
        self._count(_CT_RX_KEYS[ctl] if ctl < len(_CT_RX_KEYS) else "ctl_rx_" + str(ctl))
        if pdc.role == "initiator":
            if ctl == _CT_ACK_REQ or ctl == _CT_CLEAR:  # about return data (uet.pds.ret)
                if pdc.rrx is not None:
                    self._rx_control_target(pdc.rrx, ctl, opq, psn, payload, flags, now)
                elif ctl == _CT_ACK_REQ:
                    self._send_nack(pdc.peer, _NC_PKT_NOT_RCVD, psn, pdc.lpdcid, pdc.rpdcid, 0, now)
                return
            self._rx_control_initiator(pdc, ctl, psn, payload, flags, now)
        elif ctl == _CT_REQ_CLEAR and pdc.ret is not None:
            self._send_clear(pdc.ret, now)
        else:
            self._rx_control_target(pdc, ctl, opq, psn, payload, flags, now)

    def _rx_control_before_ack(self, pdc: InitiatorPdc, ctl: int, spdcid: int, payload: int, now: int) -> None:
        """A control packet from the peer for an initiator PDC that has not learnt the target's
        PDCID yet (SYN_SENT: every ACK so far was lost). The target has established its half, so
        it is no header mismatch: a ``PDC_HDR_MISMATCH`` NACK would make the target close that
        half in error, and the SYN retransmission would then open a new target PDC and deliver
        its packets a second time (issue 29 item 1). Dropped and counted instead; the SYN
        retransmission draws the ACK that establishes the PDC. Only an RCCC grant is used: it is
        cumulative and may overtake that ACK (§4.5); and a CLEAR_REQ is answered: a target that
        holds its ACKs until we prove we receive (uet.pds.validation) asks with it, and the CLEAR
        names the target's PDCID (``spdcid``, not adopted: only an ACK establishes the PDC)."""
        self._count("ctl_rx_" + (_CT_NAMES[ctl] if ctl < len(_CT_NAMES) else str(ctl)) + "_before_ack")
        if ctl == _CT_CREDIT and pdc.gate.on_grant(payload, now):
            self._dirty[pdc] = None
        elif ctl == _CT_REQ_CLEAR and spdcid:
            fl = _ISROD if pdc.mode == _MODE_ROD else 0
            hdr = CONTROL.encode((_P_CONTROL, _CT_CLEAR, fl, 0, 0, pdc.lpdcid, spdcid, (pdc.tx_base - 1) & _M32))
            self._out.append((hdr, pdc.peer, self._control_entropy))
            self._count("ctl_tx_CLEAR")

    def _rx_control_target(
        self, tp: TargetPdc, ctl: int, opq: int, psn: int, payload: int, flags: int, now: int
    ) -> None:
        """ACK_REQ, CLEAR, CLOSE, PROBE, NOOP (and CREDIT_REQ when RCCC runs) at a target;
        anything else → UNEXP_EVENT (§2.11)."""
        ent = self._control_entropy
        st = tp.state
        retx = _A_RETX if flags & _RETX else 0
        if ctl == _CT_CLOSE:
            self._rx_close(tp, psn, retx, now)
            return
        if st is _T_PENDING or (st is _T_CLOSING and ctl != _CT_ACK_REQ):
            self._send_nack(tp.peer, _NC_UNEXP_EVENT, psn, tp.lpdcid, tp.rpdcid, 0, now)
            return
        tp.last_rx = now
        mp = self._mp_range
        if ctl == _CT_ACK_REQ:
            d = psn_diff(psn, tp.rx_base)
            if d >= mp or d < -mp:
                self._drop("ack_req_oor", now, tp.peer)
            elif d < 0:
                self._send_ack(tp, psn, retx, 0, b"", now, ent)
            elif psn in tp.rod_buf:  # received, not yet handed to SES (ROD buffering)
                self._send_nack(tp.peer, _NC_RCVD_SES_PROCG, psn, tp.lpdcid, tp.rpdcid, 0, now)
            elif psn in tp.rcvd:
                r = tp.gtd.get(psn)
                self._send_ack(tp, psn, retx, r[0] if r else 0, r[1] if r else b"", now, ent)
            else:
                self._send_nack(tp.peer, _NC_PKT_NOT_RCVD, psn, tp.lpdcid, tp.rpdcid, 0, now)
        elif ctl == _CT_CLEAR:
            if psn_diff(payload, tp.max_clear) > 0 and psn_diff(payload, tp.high_rcvd) <= 0:
                tp.max_clear = payload
                base = tp.rx_base
                self._advance_cack(tp)
                if tp.rx_base != base:
                    # The clear released PSNs that earlier ACKs had to leave out of CACK: report
                    # the new CACK at once (inference; the notes say only "recomputes CACK").
                    # An initiator sends a CLEAR CP when it has nothing it may send, typically
                    # because the uncleared PSN holds its window (CACK + MPR): without this ACK
                    # it would wait for its RTO and an ACK_REQ.
                    self._send_ack(tp, (tp.rx_base - 1) & _M32, 0, 0, b"", now, ent)
        elif ctl == _CT_PROBE:
            self._send_ack(tp, tp.rx_base, retx, 0, b"", now, ent, opaque=opq)
        elif ctl == _CT_NOOP:
            pass
        elif ctl == _CT_CREDIT_REQ and self.credit_scheduler is not None:
            # RCCC (§4.5): a source without credit restates its cumulative target; if everything
            # it asks for was granted already, a CREDIT was lost: repeat the cumulative grant
            g = self.credit_scheduler.note_target((tp.peer, tp.ccc), payload, now, tp, blocked=True)
            if g is not None:
                self._send_credit(tp, g)
        else:
            self._send_nack(tp.peer, _NC_UNEXP_EVENT, psn, tp.lpdcid, tp.rpdcid, 0, now)

    def _rx_close(self, tp: TargetPdc, psn: int, retx: int, now: int) -> None:
        """CLOSE CP (§2.12): implicitly clear everything, ACK it, → CLOSING (linger), report."""
        ent = self._control_entropy
        st = tp.state
        if st is _T_CLOSING:
            if psn == tp.close_psn:
                self._count("duplicates")
                self._send_ack(tp, psn, retx, 0, b"", now, ent, epsn=tp.epsn)
            elif tp.close_psn is not None and psn_diff(psn, tp.close_psn) > 0:
                self._send_nack(tp.peer, _NC_CLOSING, psn, tp.lpdcid, tp.rpdcid, 0, now)
            return
        if st is not _T_ESTABLISHED and st is not _T_CLOSE_WAIT:
            self._send_nack(tp.peer, _NC_UNEXP_EVENT, psn, tp.lpdcid, tp.rpdcid, 0, now)
            return
        d = psn_diff(psn, tp.rx_base)
        if d < 0 or d >= self._mp_range:
            self._send_nack(tp.peer, _NC_PSN_OOR_WINDOW, psn, tp.lpdcid, tp.rpdcid, 0, now)
            return
        if self._ret_busy(tp):  # return data still in flight: answer once it drains (uet.pds.ret)
            tp.close_deferred = (psn, retx)
            self._count("close_deferred")
            return
        rcvd = tp.rcvd
        for i in range(d):
            if (tp.rx_base + i) & _M32 not in rcvd:
                self._drop("close_before_data", now, tp.peer)
                return
        rcvd.clear()
        tp.gtd.clear()
        self._drop_rod_buf(tp)
        tp.rx_base = (psn + 1) & _M32
        tp.max_clear = psn
        tp.close_psn = psn
        tp.close_req = None
        tp.clear_req_at = None
        tp.state = transition(TARGET_TRANSITIONS, st, _T_CLOSING)
        tp.linger_until = now + self.config.close_linger_ns
        # secure 0-RTT: the policy raises the SDI's Expected_PSN and returns it (§2.3.2)
        tp.epsn = self.start_psn_policy.on_close(0 if tp.sdi is None else tp.sdi, tp.start_psn)
        self._send_ack(tp, psn, retx, 0, b"", now, ent, epsn=tp.epsn)
        self._count("pdc_close_target")
        self._events.append(PdcClosed(tp.peer, tp.lpdcid, tp.mode, "target", None))
        self._emit({"t": now, "ev": "pdc_close", "peer": tp.peer, "pdc": tp.lpdcid, "role": "target", "reason": None})

    def _rx_ack_target(
        self, tp: TargetPdc, data: bytes, now: int, off: int, cack: int, spdcid: int, probe: int
    ) -> None:
        """An ACK to a target-role PDC can only acknowledge its CLOSE_REQ (return direction)."""
        cr = tp.close_req
        if spdcid != tp.rpdcid or probe or cr is None or (cack + off) & _M32 != cr[0]:
            self._drop("ack_target_pdc", now, tp.peer)
            return
        tp.close_req = None
        tp.last_rx = now  # progress: restarts Close_REQ_Time (module docstring)
        self._count("close_req_acked")

    def _target_close_req(self, tp: TargetPdc, now: int) -> None:
        """ESTABLISHED → CLOSE_WAIT: send CLOSE_REQ (new return-direction PSN, AR), start
        ``Close_REQ_Time`` (§2.12)."""
        if self._ret_busy(tp):  # §2.12: only once the return direction is drained (uet.pds.ret)
            tp.close_req_wanted = True
            return
        tp.state = transition(TARGET_TRANSITIONS, tp.state, _T_CLOSE_WAIT)
        ret = tp.ret
        if ret is not None:  # CLOSE_REQ takes the next PSN of the return direction's space
            psn = ret.next_psn
            ret.next_psn = (psn + 1) & _M32
        else:
            psn = tp.ret_psn
            tp.ret_psn = (psn + 1) & _M32
        tp.close_req = [psn, now, 0, now]
        tp.close_wait_until = now + self.config.close_req_ns
        self._send_close_req(tp, 0)

    def _close_wait_end(self, tp: TargetPdc) -> int:
        """When CLOSE_WAIT ends in error: ``Close_REQ_Time`` after the CLOSE_REQ or after the
        initiator's last arrival on the PDC, whichever is later (§2.12, module docstring)."""
        restart = tp.last_rx + self.config.close_req_ns
        return restart if restart > tp.close_wait_until else tp.close_wait_until

    def _send_close_req(self, tp: TargetPdc, retx: int) -> None:
        flags = _AR | retx | (_ISROD if tp.mode == _MODE_ROD else 0)
        cr = tp.close_req
        assert cr is not None  # set by _target_close_req before any CLOSE_REQ is sent
        hdr = CONTROL.encode((_P_CONTROL, _CT_REQ_CLOSE, flags, 0, cr[0], tp.lpdcid, tp.rpdcid, 0))
        self._out.append((hdr, tp.peer, self._control_entropy))
        self._count("ctl_tx_REQ_CLOSE")

    def _target_close_error(self, tp: TargetPdc, reason: str, now: int, send_nack: bool = True) -> None:
        """Close a target PDC in error; NACK CLOSING_IN_ERR tells the initiator (linux, §2.12)."""
        if send_nack:
            psn = tp.close_req[0] if tp.close_req else tp.rx_base
            self._send_nack(tp.peer, _NC_CLOSING_IN_ERR, psn, tp.lpdcid, tp.rpdcid, 0, now)
        was_open = tp.state is not _T_CLOSING and tp.state is not _T_PENDING
        self._ret_fail(tp, reason, None)
        # what it delivered outlives it (``_tomb_answer``): RUD delivers every PSN it holds,
        # ROD only those below CACK (its reorder buffer goes with it)
        rcvd = set(tp.rcvd) if tp.mode != _MODE_ROD else set()
        gtd = dict(tp.gtd)
        self._free_tpdc(tp, now)
        if was_open:
            tp.rcvd = rcvd
            tp.gtd = gtd
            tombs = self._tombs
            tombs[tp.lpdcid] = (tp, now + self.config.retry_time_ns, False)
            while len(tombs) > TOMBS:
                tombs.popitem(last=False)
            self._count("pdc_close_target_error")
            self._events.append(PdcClosed(tp.peer, tp.lpdcid, tp.mode, "target", reason))
            self._emit(
                {"t": now, "ev": "pdc_close", "peer": tp.peer, "pdc": tp.lpdcid, "role": "target", "reason": reason}
            )

    def _tomb_answer(
        self, src: str, dpdcid: int, spdcid: int, psn: int, retx: int, nfl: int, now: int, ent: int
    ) -> bool:
        """A request (or ACK_REQ) from ``src`` names ``dpdcid``, a target PDC this FEP closed in
        error (module docstring): if that PDC delivered ``psn``, ACK it from the PDC's last state
        (with its guaranteed response, as for a duplicate); else ACK what it delivered (below),
        then NACK ``INV_DPDCID`` with the payload "first PSN beyond every PSN it delivered",
        which tells the initiator that the messages with a packet at or beyond it were never
        assembled (uet.pds.closing). False when there is no such PDC (a plain ``INV_DPDCID``
        answers)."""
        e = self._tombs.get(dpdcid)
        if e is None:
            return False
        tp, until, told = e
        if now >= until:
            del self._tombs[dpdcid]
            return False
        if tp.peer != src or tp.rpdcid != spdcid or tp.sdi != self._rx_sdi:
            return False
        if psn_diff(psn, tp.rx_base) < 0 or psn in tp.rcvd:
            r = tp.gtd.get(psn)
            self._send_ack(tp, psn, retx, r[0] if r else 0, r[1] if r else b"", now, ent)
            self._count("closed_pdc_acks")
        else:
            # what it delivered is acknowledged before the NACK closes the initiator's PDC,
            # whatever order the late copies come in: the first time, an ACK naming each PSN it
            # delivered beyond CACK (with its guaranteed response; at most ``mp_range``), else
            # one cumulative ACK
            held = sorted(tp.rcvd, key=lambda q: psn_diff(q, tp.rx_base)) if not told else []
            for q in held:
                r = tp.gtd.get(q)
                self._send_ack(tp, q, 0, r[0] if r else 0, r[1] if r else b"", now, ent)
            if not held:
                self._send_ack(tp, (tp.rx_base - 1) & _M32, 0, 0, b"", now, ent)
            self._tombs[dpdcid] = (tp, until, True)
            self._send_nack(src, _NC_INV_DPDCID, psn, 0, spdcid, nfl, now, (tp.high_rcvd + 1) & _M32, ent)
            self._count("closed_pdc_nacks")
        return True

    def _free_tpdc(self, tp: TargetPdc, now: int) -> None:
        if not tp.proven and self.guard is not None:
            self.guard.drop_pdc(tp.lpdcid)
        if tp.ret is not None:
            self._ret_fail(tp, "pdc closed", None)
        tp.state = transition(TARGET_TRANSITIONS, tp.state, _T_CLOSED)
        self.pdcs.pop(tp.lpdcid, None)
        tp.tent = 0  # its timer-heap entry, if any, is superseded (uet.pds.core ``_top_live``)
        if self.target_by_peer.get((tp.peer, tp.rpdcid)) is tp:
            del self.target_by_peer[(tp.peer, tp.rpdcid)]
        tp.rcvd.clear()
        tp.gtd.clear()
        self._drop_rod_buf(tp)

    # -- timers ------------------------------------------------------------------------------------

    def _tpdc_deadline(self, tp: TargetPdc) -> int | None:
        st = tp.state
        if st is _T_CLOSING:
            return tp.linger_until
        if st is _T_PENDING:
            return tp.pending_until
        best = tp.ack.deadline
        ret = tp.ret
        if ret is not None and ret.outstanding:
            if ret.parked:
                x = self._parked_deadline(ret)
            else:
                x = None
                for first in ret.outstanding.values():  # the oldest (uet.pds.initiator _ipdc_deadline_tx)
                    x = first.tx_time + rto_ns_for(self._rto_ns, self._rto_max_ns, ret.rto_shift, ret.rto)
                    break
            if x is not None and (best is None or x < best):
                best = x
        cr = tp.close_req
        if cr is not None:
            x = cr[1] + rto_ns_for(self._rto_ns, self._rto_max_ns, cr[2])
            if best is None or x < best:
                best = x
        if st is _T_CLOSE_WAIT:
            x = self._close_wait_end(tp)
            if best is None or x < best:
                best = x
        x = tp.clear_req_at
        if x is not None and (best is None or x < best):
            best = x
        ti = self._target_idle_ns
        if ti is not None and st is _T_ESTABLISHED:
            x = tp.last_rx + ti
            if best is None or x < best:
                best = x
        return best

    def _tpdc_timer(self, tp: TargetPdc, now: int) -> None:
        """Coalesced-ACK flush, CLOSE_REQ retransmission and timeout, CLEAR_REQ, idle close,
        PENDING expiry and linger end."""
        st = tp.state
        cfg = self.config
        if st is _T_CLOSING:
            if now >= tp.linger_until:
                self._free_tpdc(tp, now)
            return
        if st is _T_PENDING:
            if now >= tp.pending_until:
                self._count("pdc_pending_expired")
                self._free_tpdc(tp, now)
            return
        ret = tp.ret
        if ret is not None and ret.outstanding:
            self._ipdc_timer(ret, now)
            if tp.state is _T_CLOSED:
                return
        dl = tp.ack.deadline
        if dl is not None and now >= dl:
            self._count("acks_timer")
            self._flush_ack(tp, now)
        cr = tp.close_req
        if cr is not None and now >= cr[1] + rto_ns_for(self._rto_ns, self._rto_max_ns, cr[2]):
            last = cr[3] if cr[3] > tp.last_rx else tp.last_rx
            if retries_spent(cfg, cr[2], last, now):
                self._target_close_error(tp, "CLOSE_REQ not acknowledged", now)
                return
            cr[1] = now
            cr[2] += 1
            self._count("rto")
            self._send_close_req(tp, _RETX)
        if tp.state is _T_CLOSE_WAIT and now >= self._close_wait_end(tp):
            self._target_close_error(tp, "no CLOSE after CLOSE_REQ", now)
            return
        if tp.clear_req_at is not None and now >= tp.clear_req_at:
            if tp.last_rx > tp.clear_req_last:
                tp.clear_reqs = 0  # the initiator spoke since the last CLEAR_REQ: a fresh budget
            if tp.gtd and tp.clear_reqs < cfg.max_clear_req and self._is_proven(tp):
                hi = max(tp.gtd, key=lambda p: psn_diff(p, tp.rx_base))
                hdr = CONTROL.encode((_P_CONTROL, _CT_REQ_CLEAR, 0, 0, 0, tp.lpdcid, tp.rpdcid, hi))
                self._out.append((hdr, tp.peer, self._control_entropy))
                self._count("ctl_tx_REQ_CLEAR")
                tp.clear_reqs += 1
                tp.clear_req_last = now
                tp.clear_req_at = now + max(cfg.clear_ns, rto_ns_for(self._rto_ns, self._rto_max_ns, tp.clear_reqs))
            else:
                if tp.gtd:
                    self._count("clear_req_exhausted")
                tp.clear_req_at = None
        ti = cfg.target_idle_ns
        if ti is not None and tp.state is _T_ESTABLISHED and now >= tp.last_rx + ti:
            if not self._is_proven(tp):  # its peer never proved it receives: nothing to ask it
                self._count("unverified_pdc_idle")
                self._free_tpdc(tp, now)
                return
            self._count("target_idle_close")
            self._target_close_req(tp, now)
