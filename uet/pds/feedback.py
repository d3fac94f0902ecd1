"""Initiator feedback: ACK and NACK processing (spec/behaviour.md §2.8 "Sender processing of an
ACK", §2.9, §2.10, §2.13, §2.3 NEW_START_PSN).

Choices where the notes are silent (inference):

- SACK fast retransmit: once per packet, when the newest PSN known received (SACK bit or ACK_PSN)
  is at least ``fast_retx_threshold`` beyond it, it is not itself known received, and an ACK
  reported it missing: it is the PSN after CACK, or some ACK's SACK bitmap covered it with a 0 bit
  below that bitmap's newest set bit. A PSN above CACK that no bitmap covered is unknown, not lost
  (the target slides the SACK base to ``trigger − 63`` when CACK is held by an uncleared guaranteed
  response, so with more than 64 PSNs beyond CACK the older ones are never described; counting
  them as holes fast-retransmitted delivered packets). It does not count toward ``max_rto_retx``.
- ROD_OOO → go-back-N: the target puts its next expected PSN in the NACK payload (the dissector
  labels that word "max received PSN + 1"; the provider sends 0); the initiator resends every
  unacknowledged packet from there (from ``tx_base`` if the payload is out of range) in PSN order,
  paced by the halved ROD window (uet.pds.initiator ``_go_back``).
  Further ROD_OOO NACKs naming a point inside the restarted range within ``rod_gbn_holdoff`` ×
  SRTT of the restart are stale (they answer copies sent before the restart) and are ignored; a later one
  means the restarted head was lost as well and restarts the window again (the target sends at
  most one per ``rod_nack_holdoff_ns`` per gap, uet.pds.target).
- Resource shortages, NO_PDC_AVAIL .. NO_RESOURCE (0x04–0x0A: "retry establishment later" and
  "retransmit", both transient): the packet is *parked* and resent after ``NACK_Retx_Time``
  (``PdsConfig.nack_retx_ns``, default the RTO) doubled per NACK it drew (at most 64×), not at
  once: an immediate resend would meet the same shortage and spend ``Max_NACK_Retx_Cnt`` in
  microseconds (behaviour.md §2.10 "normal" class, §2.6 step 7). SACK fast retransmit skips parked
  packets. Other retransmit-class NACKs resend at once, as the reference does.
  Fatal NACKs close the PDC in error (uet.pds.closing).
  Unknown codes are ignored (reference). NACKs for PSNs not outstanding are ignored (§2.10).
- NEW_START_PSN naming the Start_PSN already in use (a re-NACK) is ignored.
"""

from __future__ import annotations

from typing import Final

from uet.pds._aliases import (
    _A_CLR,
    _A_EPSN,
    _A_M,
    _A_P,
    _A_RETX,
    _GATED,
    _M32,
    _N_M,
    _N_RETX,
    _NA_IGNORE,
    _NACK_LEN,
    _NC_NAMES,
    _NC_NEW_START_PSN,
    _NC_NO_PDC_AVAIL,
    _NC_NO_RESOURCE,
    _NC_PKT_NOT_RCVD,
    _NC_ROD_OOO,
    _NC_TRIMMED,
    _NC_TRIMMED_LASTHOP,
    _P_ACK,
    _P_ACK_CC,
    _P_ACK_CCX,
    _S_CLOSED,
    _S_ESTABLISHED,
    _S_SYN_SENT,
)
from uet.pds.backoff import rtt_sample
from uet.pds.closing import CloseMixin
from uet.pds.events import Acked, NackReceived, ProbeAnswered
from uet.pds.pdc import InitiatorPdc, TxPkt
from uet.pds.scoreboard import AckInfo, AckTally, ack_cc_info, parse_ack
from uet.pds.states import INITIATOR_TRANSITIONS, transition
from uet.wire.pds import ACK_CC, ACK_EPSN, NACK, NACK_ACTION, AckFlag, NackAction, NackFlag
from uet.wire.pds import psn_diff as _diff  # the one serial-number difference (wire-format.md §15)
from uet.wire.pdsfast import unpack_ack_cc_raw

_NA_CLOSE: Final = NackAction.CLOSE
_A_CLS: Final = int(AckFlag.REQ_CLOSE)
_N_NT: Final = int(NackFlag.NT)
_RAW_CC: Final = ACK_CC[(False, "raw")]
_ACK_CC_LEN: Final = _RAW_CC.size
_HALF: Final = 0x80000000  # half the PSN space (serial-number arithmetic, wire-format.md §15)
_tnew: Final = tuple.__new__  # (Final: a C static in the compiled build, not a globals look-up)
_ACKED: Final = Acked  # (interpreted uet.pds.events' class as a C static, likewise)
_ACK_EPSN: Final = ACK_EPSN


def _code_name(code: int) -> str:
    name = _NC_NAMES.get(code)
    return f"0x{code:02X}" if name is None else name


class FeedbackMixin(CloseMixin):
    """ACK/NACK processing of initiator PDCs, part of :class:`uet.pds.core.PdsCore`."""

    # -- ACK processing ----------------------------------------------------------------------------

    def _rx_ack(self, data: bytes, src: str, now: int, t: int, nh: int, flags: int) -> None:
        """Sender processing of ACK / ACK_CC / ACK_CCX (§2.8 "Sender processing of an ACK"):
        parse, find and check the PDC, apply it to the PDC's scoreboard (uet.pds.scoreboard),
        then the RTT, the congestion gate, and what the ACK asks of the PDC."""
        if t == _P_ACK_CC and not flags & _A_P and self.fast_paths and self._log is None and len(data) >= _ACK_CC_LEN:
            v = unpack_ack_cc_raw(data)  # read once, for the fast path and, if it declines, for the record
            if self._rx_ack_fast(v, data, src, now, nh, flags):
                return
            a: AckInfo | None = ack_cc_info(v, flags)
        else:
            a = parse_ack(data, t, flags)
        if a is None:
            self._drop("short_ack", now, src)
            return
        if t == _P_ACK_CCX and a.ccw < 0:  # a CCX type the notes do not define (wire §5.5, Δ11)
            self._count("ack_ccx_opaque")
        pdc = self._ack_pdc(a, data, src, now)
        if pdc is None:
            return
        c = self.counters
        c["acks_rx"] = c.get("acks_rx", 0) + 1
        if pdc.state is _S_SYN_SENT:
            pdc.rpdcid = a.spdcid
            pdc.state = transition(INITIATOR_TRANSITIONS, pdc.state, _S_ESTABLISHED)
            if pdc.close_requested:
                self._start_close(pdc, pdc.close_reason, now)
        tally = AckTally()
        board = pdc.board
        if flags & _A_P:
            sent = pdc.probes.pop(a.off, None)
            if sent is not None:
                self._events.append(ProbeAnswered(src, pdc.lpdcid, a.off, a.cack, now - sent))
                tally.rtt = now - sent
        elif not board.named(pdc, a, data, nh, self._events, tally, now):
            c["acks_dup"] = c.get("acks_dup", 0) + 1
        board.window(pdc, a, self._events, self.acked_runs, tally, now)
        if tally.rtt is not None:
            self._rtt_sample(pdc, tally.rtt)
        self._ack_feedback(pdc, a, tally, now)
        if self._log is not None:
            self._log_ack(pdc, a, src, now)
        self._ack_after(pdc, a, data, now)

    def _rx_ack_fast(
        self,
        v: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int],
        data: bytes,
        src: str,
        now: int,
        nh: int,
        flags: int,
    ) -> bool:
        """:meth:`_rx_ack` in one pass for the common ACK: an ACK_CC without P (not a PROBE's
        answer) and without a SACK bitmap, for an ESTABLISHED initiator PDC of this peer and SDI,
        naming its own SPDCID, and no event log; ``v`` is its header as
        :func:`~uet.wire.pdsfast.unpack_ack_cc_raw` read it (:meth:`_rx_ack` reads it once, for
        both paths). False, having changed nothing, for any other ACK (SACK bits, another PDC
        kind or state, a wrong peer, SDI or SPDCID, PSNs never sent): the general path then
        checks, counts and drops it as before.

        What it skips and why the result is the same: no :class:`AckInfo` / :class:`AckTally`
        records (the header tuple and locals carry the same fields), no SYN_SENT transition (the
        PDC is established), no SACK walk (the bitmap is 0, so ``claims_unsent``'s bitmap test
        and ``_sack`` have nothing to do), no ACK_CCX marked-byte count (``ccx`` is -1 for
        ACK_CC) and no EPSN (plain ACKs only); the named packet, MPR, CACK
        (:meth:`SackScoreboard.cumulative`), the slide of ``tx_base`` and everything after the
        scoreboard (:meth:`_rtt_sample`, :meth:`_cc_ack`, the RTO and ROD window rules, path
        feedback, fast retransmit, close and clear requests) run in the general path's order,
        through the same helpers where they are more than a line. ``fast_paths`` False takes
        the general path; tests/test_pds_fastpath.py checks the two give the same packets,
        times and counters."""
        if v[11]:  # a SACK bitmap
            return False
        pdc = self.pdcs.get(v[6])
        if (
            type(pdc) is not InitiatorPdc
            or pdc.state is not _S_ESTABLISHED
            or pdc.peer != src
            or pdc.sdi != self._rx_sdi
            or v[5] != pdc.rpdcid
        ):
            return False
        off = v[3]
        cack = v[4]
        apsn = (cack + off) & _M32
        last = (pdc.next_psn - 1) & _M32
        # (serial-number differences written out: psn_diff(a, b) > 0 is 0 < (a - b) & M < 2^31,
        # and psn_diff(a, b) itself is ((a - b + 2^31) & M) - 2^31)
        if (
            0 < (cack - last) & _M32 < _HALF
            or 0 < (apsn - last) & _M32 < _HALF
            or ((cack - pdc.tx_base + _HALF) & _M32) - _HALF < -self._mp_range - 1
        ):
            return False  # claims PSNs never sent: the general path drops it (claims_unsent)
        c = self.counters
        c["acks_rx"] = c.get("acks_rx", 0) + 1
        board = pdc.board
        out = pdc.outstanding
        events = self._events
        # the named packet (SackScoreboard.named)
        rtt: int | None = None
        ent: int | None = None
        npk = nby = fresh = ecn_bytes = 0
        pkt = out.get(apsn)  # (get and del: the compiled build has no native dict.pop)
        if pkt is None:
            c["acks_dup"] = c.get("acks_dup", 0) + 1
        else:
            del out[apsn]
            npk = 1
            nby = pkt.nbytes
            ent = pkt.entropy
            if not pkt.dst_received:
                fresh = 1
                if pkt.hole_at:
                    board.late(pdc, pkt, now, not flags & _A_RETX)
            if flags & _A_M:
                ecn_bytes = nby
            sends = pkt.sends
            if (sends == 1 or (sends == 2 and flags & _A_RETX)) and not (pkt.rtx_wait or pkt.rearmed):
                rtt = now - pkt.tx_time
            if pkt.ctl is None:
                events.append(_tnew(_ACKED, (pkt.token, nh, data[_ACK_CC_LEN:] if nh else b"")))
            if 0 < (apsn - board.high_sack) & _M32 < _HALF:
                board.high_sack = apsn
        # the rest of the ACK (SackScoreboard.window without a bitmap)
        mpr = v[9]
        if mpr and 0 < (cack - board.mpr_cack) & _M32 < _HALF:
            pdc.peer_mp = mpr * 128
            board.mpr_cack = cack
        ents: list[int] = []
        if 0 < (cack - pdc.max_cack) & _M32 < _HALF:
            pdc.max_cack = cack
            n, b = board.cumulative(pdc, out, pdc.tx_base, pdc.next_psn, cack, events, self.acked_runs, ents, now)
            npk += n
            nby += b
        p = pdc.tx_base
        nxt = pdc.next_psn
        while p != nxt and p not in out:
            p = (p + 1) & _M32
        pdc.tx_base = p
        if rtt is not None:
            self._rtt_sample(pdc, rtt)
        # _ack_feedback (ACK_CC: no marked-byte count)
        self._cc_ack(pdc, npk, nby, ecn_bytes, rtt, v[12] | (v[7] << 64), ents, now)
        if pdc.cc_rtx and pdc.gate.resend is not _GATED:
            pdc.rtx_credit += fresh + len(ents)
        if npk:
            c["acked"] = c.get("acked", 0) + npk
            if not self._rto_adaptive:
                pdc.rto_shift = 0
            w = pdc.rod_win
            if w:
                pdc.rod_acc += npk
                if pdc.rod_acc >= w:
                    pdc.rod_acc -= w
                    pdc.rod_win = w + 1 if w + 1 < self._max_outstanding else 0
        if ent is not None:
            pdc.entropy.feedback(ent, "ecn" if flags & _A_M else "ack", now)
        # _ack_after (not a plain ACK: no EPSN)
        thr = self._fast_retx_thr
        if thr and out and ((board.high_sack - pdc.tx_base + _HALF) & _M32) - _HALF >= thr:
            self._fast_retransmit(pdc, now, thr)
        cp = pdc.close_pkt
        if cp is not None and cp.psn not in out:
            self._free_ipdc(pdc, None, now)
            return True
        if flags & _A_CLR:
            pdc.clear_needed = True
        owner = pdc.owner
        if owner is not None:
            if not out and not pdc.pending:
                self._ret_drained(owner, now)
            self._dirty[pdc] = None
            return True
        if flags & _A_CLS:
            self._start_close(pdc, "target REQ_CLOSE", now)
        pdc.last_activity = now
        if pdc.state is not _S_ESTABLISHED:
            self._check_close_progress(pdc, now)
        self._dirty[pdc] = None
        return True

    def _ack_pdc(self, a: AckInfo, data: bytes, src: str, now: int) -> InitiatorPdc | None:
        """The initiator PDC an ACK is for, checked (peer, SDI, state, SPDCID, PSNs it claims);
        None when it was dropped, or when it is for a target PDC's own CLOSE_REQ or a target
        without a return half (handled here: ``_rx_ack_target``)."""
        pdc = self.pdcs.get(a.dpdcid)
        if pdc is None:
            self._drop("ack_unknown_pdc", now, src)
            return None
        if pdc.peer != src:
            self._drop("ack_peer", now, src)
            return None
        if pdc.sdi != self._rx_sdi:
            self._drop("sdi_mismatch", now, src)
            return None
        if pdc.role != "initiator":
            cr = pdc.close_req
            tgt = pdc
            ipdc = pdc.ret
            if ipdc is None or (cr is not None and (a.cack + a.off) & _M32 == cr[0]):
                self._rx_ack_target(tgt, data, now, a.off, a.cack, a.spdcid, a.flags & _A_P)
                return None
            pdc = ipdc
        st = pdc.state
        if st is _S_CLOSED:
            self._drop("ack_closed_pdc", now, src)
            return None
        if (a.spdcid == 0) if st is _S_SYN_SENT else (a.spdcid != pdc.rpdcid):
            self._drop("ack_spdcid", now, src)
            return None
        if not a.flags & _A_P and pdc.board.claims_unsent(pdc, a, self._mp_range):
            self._drop("ack_cack_ahead", now, src)
            return None
        return pdc

    def _rtt_sample(self, pdc: InitiatorPdc, rtt: int) -> None:
        """A valid RTT sample: the PDC's smallest, and SRTT (with the adaptive RTO, uet.pds.backoff)."""
        if rtt < pdc.min_rtt or not pdc.min_rtt:
            pdc.min_rtt = rtt
        if self._rto_adaptive:
            rtt_sample(pdc, rtt, self.config)  # SRTT, RTTVAR, RTO; ends a back-off (uet.pds.backoff)
        else:
            pdc.srtt = rtt if not pdc.srtt else pdc.srtt + ((rtt - pdc.srtt) >> 3)

    def _ack_feedback(self, pdc: InitiatorPdc, a: AckInfo, t: AckTally, now: int) -> None:
        """What the ACK acknowledged goes to the congestion gate and the path selector; progress
        resets the RTO back-off and grows a ROD go-back-N window (§2.9, §2.13)."""
        ecn_bytes = t.ecn_bytes
        if a.ccx >= 0:  # the marked bytes by difference (256-byte units, 24-bit wrap)
            e = (a.ccx >> 40) & 0xFFFFFF
            d = (e - pdc.cc_ecn) & 0xFFFFFF
            if d < 0x800000:
                pdc.cc_ecn = e
                ecn_bytes = d << 8
        self._cc_ack(pdc, t.npk, t.nby, ecn_bytes, t.rtt, a.ccw, t.ents, now)
        if pdc.cc_rtx and pdc.gate.resend is not _GATED:  # trimmed packets wait: one resend per
            pdc.rtx_credit += t.fresh + len(t.ents)  # packet newly received (uet.pds.trimwait)
        npk = t.npk
        if npk:
            c = self.counters
            c["acked"] = c.get("acked", 0) + npk
            if not self._rto_adaptive:
                pdc.rto_shift = 0  # progress: the backed-off RTO returns to its initial value (§2.9)
            w = pdc.rod_win
            if w:  # ROD go-back-N window grows by one packet per window acknowledged (§2.13)
                pdc.rod_acc += npk
                if pdc.rod_acc >= w:
                    pdc.rod_acc -= w
                    pdc.rod_win = w + 1 if w + 1 < self._max_outstanding else 0
        if t.ent is not None:
            pdc.entropy.feedback(t.ent, "ecn" if a.flags & _A_M else "ack", now)

    def _log_ack(self, pdc: InitiatorPdc, a: AckInfo, src: str, now: int) -> None:
        assert self._log is not None
        self._log(
            {
                "t": now,
                "ev": "ack",
                "peer": src,
                "pdc": pdc.lpdcid,
                "cack": a.cack,
                "psn": None if a.flags & _A_P else (a.cack + a.off) & _M32,
                "sack": bool(a.bitmap),
            }
        )

    def _ack_after(self, pdc: InitiatorPdc, a: AckInfo, data: bytes, now: int) -> None:
        """What follows an applied ACK: SACK fast retransmit, an EPSN closing ACK, the end of a
        close, the target's CLEAR and CLOSE requests (§2.8, §2.11, §2.12)."""
        out = pdc.outstanding
        flags = a.flags
        thr = self._fast_retx_thr
        if thr and out and _diff(pdc.board.high_sack, pdc.tx_base) >= thr:
            self._fast_retransmit(pdc, now, thr)
        if flags & _A_EPSN and a.t == _P_ACK:
            self._rx_epsn(pdc, data, now)
        cp = pdc.close_pkt
        if cp is not None and cp.psn not in out:
            self._free_ipdc(pdc, None, now)
            return
        if flags & _A_CLR:
            pdc.clear_needed = True
        owner = pdc.owner
        if owner is not None:  # return half: no close of its own; drained → deferred work
            if not out and not pdc.pending:
                self._ret_drained(owner, now)
            self._dirty[pdc] = None
            return
        if flags & _A_CLS:
            self._start_close(pdc, "target REQ_CLOSE", now)
        pdc.last_activity = now
        if pdc.state is not _S_ESTABLISHED:  # (an ESTABLISHED PDC is not closing: nothing to check)
            self._check_close_progress(pdc, now)
        self._dirty[pdc] = None

    def _cc_ack(
        self,
        pdc: InitiatorPdc,
        npk: int,
        nby: int,
        ecn_bytes: int,
        rtt: int | None,
        ccw: int,
        ents: list[int],
        now: int,
    ) -> None:
        """Feed a CCC gate one ACK (§2.8 step 6, §4.1 ``on_ack``): newly received bytes from the
        ACK_CC ``rcvd_bytes`` difference (256-byte units, 24-bit wrap, §4.2; a plain ACK counts
        what it acknowledged), the RTT sample less the target's service time (µs, §4.2), the
        receiver window penalty (§4.4), a credit ACK's grant (§4.5), and every entropy the ACK
        covers for the first time as unmarked (the named packet's mark went with it)."""
        gate = pdc.gate
        pend = 0
        restore = False
        newly: int | None = None  # a plain ACK: what it acknowledged
        if ccw < 0:
            pass
        elif ccw >> 64:  # credit state: the cumulative grant in the upper 24 bits
            gate.on_grant(ccw >> 40 & 0xFFFFFF, now)
        else:
            r = (ccw >> 16) & 0xFFFFFF
            d = (r - pdc.cc_rcvd) & 0xFFFFFF
            if d < 0x800000:
                pdc.cc_rcvd = r
                newly = d << 8
            else:
                newly = 0  # an older ACK overtaken by a newer one
            if rtt is not None:
                rtt -= (ccw >> 48) * 1000
                if rtt < 0:
                    rtt = 0
            pend = (ccw >> 40) & 0x7F
            restore = bool(ccw >> 47 & 1)
        gate.on_ack(npk, nby, newly, ecn_bytes, rtt, pend, restore, now)
        self._cc_probe(pdc, now)
        if ents:
            sel = pdc.entropy
            for e in ents:
                sel.feedback(e, "ack", now)

    def _cc_probe(self, pdc: InitiatorPdc, now: int) -> None:
        """§4.3.6: after a new CCC's first ACK or NACK, one PROBE CP on the control class for a
        clean base-RTT sample; its ACK (P set) reaches the CCC as an RTT sample like any other."""
        if pdc.state is _S_ESTABLISHED and pdc.gate.take_probe():
            self._probe_seq = (self._probe_seq + 1) & 0xFFFF
            self.send_probe(pdc.lpdcid, self._probe_seq, now)
            self._count("cc_base_rtt_probes")

    def _rx_epsn(self, pdc: InitiatorPdc, data: bytes, now: int) -> None:
        """A closing ACK with ``EPSN`` (secure 0-RTT, §2.3.2): hand ``expected_psn`` to the
        initiator hook (``on_close_ack(sdi, expected_psn)``), which adopts it as the SDI's
        ``ini_start_psn`` when newer. Without a hook or an SDI it is counted and ignored."""
        epsn = _ACK_EPSN.unpack(data)[7]
        hook = self.initiator_start_psn
        if hook is None or pdc.sdi is None:
            self._count("epsn_ignored")
            return
        hook.on_close_ack(pdc.sdi, epsn)
        self._count("epsn_adopted")
        self._emit({"t": now, "ev": "epsn", "peer": pdc.peer, "pdc": pdc.lpdcid, "expected_psn": epsn})

    def _fast_retransmit(self, pdc: InitiatorPdc, now: int, thr: int) -> None:
        """Resend, once each, packets with ≥ ``thr`` newer PSNs known received (SACK gap) that an
        ACK reported missing: the PSN after CACK, or a 0 bit of some ACK's SACK bitmap
        (``sack_hole``). A PSN no bitmap ever described (below the window of a target that slid
        its SACK base past a held CACK, §2.8) is unknown, not lost: the RTO or the CLEAR settles it."""
        out = pdc.outstanding
        p = pdc.tx_base
        stop = (pdc.board.high_sack - thr + 1) & _M32
        head = (pdc.max_cack + 1) & _M32  # CACK says it is not received (or not yet cleared)
        # reported missing at or before ``since``: lost, not reordered (``SackScoreboard.late``)
        # before any reordering was seen: a quarter of the smallest RTT (RFC 8985 §6.2 step 4)
        wnd = min(pdc.board.reo_wnd or (pdc.min_rtt >> 2), self._rto_ns)
        since = now - wnd
        pdc.fast_at = None
        while p != stop:
            pkt = out.get(p)
            if (
                pkt is not None
                and (pkt.sack_hole or p == head)
                and not pkt.dst_received
                and not pkt.fast_done
                and pkt.ctl is None
                and not pkt.parked
                and not pkt.rtx_wait
            ):
                if not pkt.hole_at:
                    pkt.hole_at = now
                if pkt.hole_at > since:  # may still be reordered: look again when it is due
                    due = pkt.hole_at + 2 * wnd  # (no ACK came meanwhile: a margin more)
                    if pdc.fast_at is None or due < pdc.fast_at:
                        pdc.fast_at = due
                        self._tdirty.add(pdc.lpdcid)
                    p = (p + 1) & _M32
                    continue
                pkt.fast_done = True
                self._count("fast_retransmits")
                pdc.gate.on_loss(pkt.nbytes, False, now)  # SACK-inferred loss, not a timeout
                pdc.entropy.feedback(pkt.entropy, "loss", now)
                self._cc_retransmit(pdc, pkt, now)
            p = (p + 1) & _M32

    # -- NACK processing ---------------------------------------------------------------------------

    def _rx_nack(self, data: bytes, src: str, now: int, flags: int) -> None:
        """NACK / NACK_CCX reaction per NACK_ACTION (§2.10, wire-format.md §7.1)."""
        if len(data) < _NACK_LEN:
            self._drop("short_nack", now, src)
            return
        _t, _nh, _f, code, _vc, npsn, spdcid, dpdcid, payload = NACK.unpack(data)
        name = _code_name(code)
        self._count("nack_rx_" + name)
        if self._log is not None:
            self._log({"t": now, "ev": "nack_rx", "peer": src, "pdc": dpdcid, "psn": npsn, "code": name})
        if flags & _N_NT:
            self._rudi_nack(src, code, npsn, now)
            return
        pdc = self._nack_pdc(src, code, npsn, spdcid, dpdcid, now)
        if pdc is None:
            return
        self._events.append(NackReceived(src, pdc.lpdcid, code, npsn))
        if pdc.state is _S_CLOSED:
            return
        pdc.gate.on_nack(code, bool(flags & _N_M), now)
        if code == _NC_NEW_START_PSN:
            self._new_start_psn(pdc, payload, now)
            return
        pkt = pdc.outstanding.get(npsn)
        if pkt is None:
            self._count("nack_stale")
            return
        action = NACK_ACTION.get(code, _NA_IGNORE)
        if action == _NA_IGNORE:
            return
        if action == _NA_CLOSE:
            self._close_error(pdc, f"nack {name}", code, now, npsn, payload)
            return
        if code == _NC_ROD_OOO:
            self._nack_go_back(pdc, code, npsn, flags, payload, now)
            return
        # §4.1 on_nack: a trim before the last hop penalises the path; otherwise the NACK's ``m``
        # tells whether the path marked it (a last-hop trim is no path penalty, §3.4)
        ev = "trim" if code == _NC_TRIMMED else ("ecn" if flags & _N_M else "ack")
        pdc.entropy.feedback(pkt.entropy, ev, now)
        self._nack_resend(pdc, pkt, code, flags, now)

    def _nack_pdc(self, src: str, code: int, npsn: int, spdcid: int, dpdcid: int, now: int) -> InitiatorPdc | None:
        """The initiator PDC (or return-data half, uet.pds.ret) a NACK from ``src`` is for, or
        None: an unknown PDC, a wrong SDI or source PDCID is dropped; a NACK to a target PDC
        closes it when NACK_ACTION says so (§2.10) and goes no further."""
        pdc = self.pdcs.get(dpdcid)
        if pdc is None or pdc.peer != src:
            self._drop("nack_unknown_pdc", now, src)
            return None
        if pdc.sdi != self._rx_sdi:
            self._drop("sdi_mismatch", now, src)
            return None
        if pdc.role != "initiator":
            if pdc.ret is not None and code != _NC_NEW_START_PSN and npsn in pdc.ret.outstanding:
                pdc = pdc.ret  # a NACK of return data (uet.pds.ret)
            else:
                if NACK_ACTION.get(code, _NA_IGNORE) == _NA_CLOSE:
                    self._target_close_error(pdc, f"nack {_code_name(code)}", now, send_nack=False)
                return None
        if spdcid and pdc.rpdcid and spdcid != pdc.rpdcid:
            self._drop("nack_spdcid", now, src)
            return None
        return pdc

    def _nack_retries_exhausted(self, pdc: InitiatorPdc, pkt: TxPkt, code: int, now: int) -> bool:
        """One more NACK-driven resend of ``pkt``; past ``max_nack_retx`` the PDC closes in error."""
        pkt.nack_retries += 1
        if pkt.nack_retries > self.config.max_nack_retx:
            self._close_error(pdc, "nack retry exhausted", code, now)
            return True
        return False

    def _nack_go_back(self, pdc: InitiatorPdc, code: int, npsn: int, flags: int, payload: int, now: int) -> None:
        """ROD_OOO: go back to the target's next expected PSN (the payload, our extension; 0 or
        out of range means ``tx_base``) unless the NACK answers copies sent before the last
        restart (:meth:`_gbn_stale`)."""
        out = pdc.outstanding
        e = payload if 0 <= _diff(payload, pdc.tx_base) < _diff(pdc.next_psn, pdc.tx_base) else pdc.tx_base
        cfg = self.config
        hold = pdc.srtt * cfg.rod_gbn_holdoff if pdc.srtt else self._rto_ns // 4
        if e not in out or self._gbn_stale(pdc, e, npsn, flags & _N_RETX, now, hold):
            self._count("nack_gbn_stale")
            return
        if self._nack_retries_exhausted(pdc, out[e], code, now):
            return
        self._go_back(pdc, e, now)

    def _nack_resend(self, pdc: InitiatorPdc, pkt: TxPkt, code: int, flags: int, now: int) -> None:
        """A NACK that asks for ``pkt`` again (trimmed, not received, or a resource shortage that
        parks it, §2.10): the CCC hears of it, then it is resent, parked or left to the ACK clock."""
        shortage = _NC_NO_PDC_AVAIL <= code <= _NC_NO_RESOURCE
        if shortage and pkt.parked:
            self._count("nack_while_parked")  # it answers a copy sent before the wait began
            return
        gate = pdc.gate
        gated = gate.resend is _GATED
        if pkt.rtx_wait and not gated:
            self._count("nack_while_waiting")  # a trim of a copy sent before it began waiting
            return
        if self._nack_retries_exhausted(pdc, pkt, code, now):
            return
        # §4.1 on_nack: the packet leaves flight and will be resent; trims (last hop or not) are
        # their own congestion signal; the RTT sample follows the §2.9 rule
        retx = flags & _N_RETX
        ok = (pkt.sends == 1 and not retx) or (pkt.sends == 2 and retx)
        rtt = now - pkt.tx_time if ok and not (pkt.rtx_wait or pkt.rearmed) else None
        lasthop = code == _NC_TRIMMED_LASTHOP
        gate.on_nack_packet(pkt.nbytes, bool(flags & _N_M), rtt, lasthop or code == _NC_TRIMMED, lasthop, now)
        self._cc_probe(pdc, now)
        if gated:
            pkt.fast_done = True  # recovered by this NACK: a SACK gap behind it is no new loss
        if shortage:
            self._park(pdc, pkt, now)
            return
        if code == _NC_PKT_NOT_RCVD:
            pkt.dst_received = False
        elif (code == _NC_TRIMMED or code == _NC_TRIMMED_LASTHOP) and not gated:
            if self.config.clocked_trim_resend:  # the fixed window: on the ACK clock (uet.pds.trimwait)
                self._trim_wait(pdc, pkt, now)
                return
        self._cc_retransmit(pdc, pkt, now)

    def _gbn_stale(self, pdc: InitiatorPdc, e: int, npsn: int, retx: int, now: int, hold: float) -> bool:
        """Does a ROD_OOO (restart point ``e``, triggered by the copy of ``npsn`` it names,
        ``retx`` = that copy was a retransmission) answer packets sent before the last restart?

        - the triggering copy was a first transmission of a PSN that the last restart resent:
          it left before the restart, so the NACK is stale when ``e`` lies in the resent range;
        - it was a retransmission and ``e`` is the restart point itself, within ``hold`` of the
          restart: it may answer an earlier restart's copies; stale (the target re-NACKs the
          gap after its own hold-off if the restarted head really was lost);
        - otherwise (a new loss inside or after the resent range) it is fresh."""
        gf = pdc.gbn_from
        if gf is None:
            return False
        span = _diff(pdc.gbn_end, gf)
        if not 0 <= _diff(e, gf) < span:
            return False
        if not retx:
            return 0 <= _diff(npsn, gf) < span
        return e == gf and now - pdc.gbn_time < hold

    def _new_start_psn(self, pdc: InitiatorPdc, new_start: int, now: int) -> None:
        """NACK NEW_START_PSN in SYN_SENT: shift Start_PSN, next PSN and window bases by the same
        delta, re-stamp and resend every unacknowledged packet, retry counts reset (§2.2)."""
        if pdc.state is not _S_SYN_SENT or (new_start & _M32) == pdc.start_psn:
            self._count("nack_new_start_ignored")  # established, or a re-NACK of the old start
            return
        pdc.restarts += 1
        if pdc.restarts > self.config.max_nack_retx:
            self._close_error(pdc, "NEW_START_PSN loop", int(_NC_NEW_START_PSN), now)
            return
        pdc.state = transition(INITIATOR_TRANSITIONS, pdc.state, _S_SYN_SENT)
        pdc.syn_cap = 0  # the target minted this Start_PSN: the whole window may go (uet.pds.config)
        self._dirty[pdc] = None
        delta = (new_start - pdc.start_psn) & _M32
        pdc.start_psn = new_start & _M32
        pdc.next_psn = (pdc.next_psn + delta) & _M32
        pdc.tx_base = (pdc.tx_base + delta) & _M32
        pdc.max_cack = (pdc.max_cack + delta) & _M32
        pdc.board.shift(delta)
        old = sorted(pdc.outstanding.values(), key=lambda q: q.tx_seq)
        pdc.outstanding = {}
        for q in old:
            q.psn = (q.psn + delta) & _M32
            q.retries = 0
            q.nack_retries = 0
            q.forget_feedback()
            pdc.outstanding[q.psn] = q
        for q in sorted(old, key=lambda q: _diff(q.psn, pdc.start_psn)):
            self._transmit(pdc, q, now, True, True)
