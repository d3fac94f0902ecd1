"""Initiator half of RUD/ROD PDCs: submission, transmission, RTO timers, CPs from the target.
ACK/NACK processing lives in :mod:`uet.pds.feedback`, closing in :mod:`uet.pds.closing`.

Rules from spec/behaviour.md §2.2 (initiator table), §2.3 (SYN, Start_PSN), §2.4 (windows, MPR),
§2.5 (transmission), §2.9 (retransmission), §2.11 (control packets).

Choices where the notes are silent (inference):

- AR is set on EOM, on retransmissions, with ``ack_per_pkt``, when the CCC asks (§2.5 step 3),
  and on the last packet sent before the queue empties or the window fills *unless an earlier
  AR'd packet is still in flight* (``InitiatorPdc.ar_psn`` at or after ``tx_base``): its ACK
  is on its way and will pump the PDC again, so no sender waits for the coalescing timer, while
  a sender whose window refills by one or a few packets per ACK no longer asks for an ACK per
  packet (that made every ACK trigger the next: one ACK per data packet instead of one per
  ``ack_gen_trigger`` bytes).
- SACK fast retransmit: once per packet, when the newest PSN known received (SACK bit or ACK_PSN)
  is at least ``fast_retx_threshold`` beyond it and it is not itself known received. It does not
  count toward ``max_rto_retx``.
- ROD_OOO → go-back-N: the target puts its next expected PSN in the NACK payload (the dissector
  labels that word "max received PSN + 1"; the provider sends 0); the initiator resends every
  unacknowledged packet from there (from ``tx_base`` if the payload is out of range) in PSN order,
  at once only as many as the halved ROD window holds, the rest as ACKs open it (``_go_back``).
  Further ROD_OOO NACKs naming the same restart point are stale (they answer copies sent before
  the restart) and are ignored; if the restarted head is lost again its RTO recovers it.
- NO_PDC_AVAIL / NO_CCC_AVAIL / NO_BITMAP ("retry establishment later"): the packet is left to
  its RTO instead of being resent at once. Fatal NACKs close the PDC in error: its outstanding
  packets and the rest of the active message fail; messages queued behind it move to a new PDC.
- A closed-in-error PDC is freed at once; the target reclaims its half by idle CLOSE_REQ.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from uet.cc.base import SenderCc
from uet.pds._aliases import (
    _AR,
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
    _GATED,
    _ISROD,
    _M32,
    _MODE_ROD,
    _MODE_RUD,
    _NC_UNEXP_EVENT,
    _P_ACK,
    _P_CC_REQ_DELTA,
    _P_CONTROL,
    _P_ROD_REQ,
    _P_RUD_REQ,
    _REQUEST_LEN,
    _RETX,
    _S_CLOSE_ACK_WAIT,
    _S_CLOSED,
    _S_ESTABLISHED,
    _S_SYN_SENT,
    _SYN,
)
from uet.pds.backoff import next_shift, retries_spent, rto_ns_for
from uet.pds.config import Mode, PdsClosedError, PdsError, PdsLimitError
from uet.pds.events import Failed, PdcOpened
from uet.pds.feedback import FeedbackMixin
from uet.pds.pdc import InitiatorPdc, TxPkt, earliest_deadline
from uet.pds.states import INITIATOR_TRANSITIONS, transition
from uet.wire.pds import (
    ACK,
    CONTROL_SYN,
    REQUEST,
    psn_diff,
)
from uet.wire.pdsfast import cc_request, control, request

#: REQUEST's own struct (one definition of the header, uet.wire.pds): prologue word, fields
_REQ_PACK: Final = REQUEST._struct.pack


class InitiatorMixin(FeedbackMixin):
    """Initiator-role behaviour of :class:`uet.pds.core.PdsCore` (see the module docstring)."""

    # -- submission ------------------------------------------------------------------------------

    def submit(
        self,
        peer: str,
        mode: Mode,
        next_hdr: int,
        ses: bytes,
        payload: bytes | memoryview,
        *,
        token: object,
        som: bool,
        eom: bool,
        now: int,
        job_id: int = 0,
        tc: int = 0,
        msg_id: object = None,
        sdi: int | None = None,
        lock: bool = False,
        reply: bool = False,
    ) -> int:
        """Queue one SES packet (see the PDS core contract). Raises :class:`PdsLimitError` when a
        configured limit would be exceeded and :class:`PdsClosedError` after :meth:`close`.

        ``msg_id`` (addition to the contract) names the message when the owner interleaves the
        submission of several messages to one ``(mode, job_id, peer, tc)`` key; without it the
        packets of one message must be submitted without another multi-packet message of the
        same key starting in between. A message that starts while another is open on the PDC
        waits behind it (messages never interleave on a PDC, spec/behaviour.md §1.4).

        Additions: ``sdi`` (secure domain) is part of the PDC key (§1.4 ``tss_context``: all
        packets of a PDC share one SDI; :meth:`sdi_of` tells the TSS layer which one to seal a
        datagram with). ``lock=True`` takes an SES lock on the PDC (§6.10 ``lock_pdc``): it will
        not send CLOSE until :meth:`unlock_pdc` releases it, so a read's return data can still
        arrive. ``reply=True``: the packet answers a request from ``peer`` (read data the owner
        sends on a PDC of its own), so ``peer`` is not verified by it (uet.pds.validation);
        otherwise the owner's choice of ``peer`` verifies it. Returns the local PDCID used (0
        for RUDI/UUD)."""
        if self._closing:
            raise PdsClosedError("PDS core is closed")
        g = self.guard
        if g is not None and som and not reply and peer not in g.verified:
            g.trust(peer)
        if mode != 0 and mode != 1:  # not RUD / ROD (int compare: Mode is an IntEnum)
            if mode == 3 or mode == 2:
                self._submit_unreliable(peer, Mode(mode), next_hdr, ses, payload, token, som, eom, now)
                return 0
            raise PdsError(f"unknown mode {mode!r}")
        pkt = TxPkt(token, next_hdr, ses, payload, som, eom)
        if som:
            key = (mode, job_id, peer, tc, sdi)
            pdc = self.usable.get(key)
            if pdc is None or (pdc.sdi is not None and self._psn_range_used(pdc)):
                if pdc is not None:  # Limit_PSN_Range (§2.3.2): close it, re-establish
                    self._start_close(pdc, "psn range limit", now)
                pdc = self._new_ipdc(key, now)
            mq = self._max_queued
            if mq is not None and len(pdc.pending) >= mq:
                raise PdsLimitError(f"more than {mq} packets queued on PDC {pdc.lpdcid}")
            if eom:
                if pdc.active is None:
                    pdc.pending.append(pkt)
                else:
                    pdc.waiting.append((None, [pkt]))
            else:
                mk = (mode, job_id, peer, tc, sdi, msg_id)
                was = self.open_msg.get(mk)
                if was is not None and was.state is not _S_CLOSED:
                    raise PdsError(f"SOM for message {msg_id!r} of {key} while it is still open")
                # an open message whose PDC closed in error was abandoned by its owner (the rest
                # of it would only fail): a new message may take its key (issue 15 item 1)
                self.open_msg[mk] = pdc
                if pdc.active is None:
                    pdc.pending.append(pkt)
                    pdc.active = mk
                    pdc.active_som = pkt
                else:
                    lst = [pkt]
                    pdc.waiting.append((mk, lst))
                    pdc.wait_map[mk] = lst
        else:
            mk = (mode, job_id, peer, tc, sdi, msg_id)
            pdc = self.open_msg.get(mk)
            if pdc is None:
                raise PdsError(f"non-SOM packet for message {msg_id!r} of {mk[:5]} without an open message")
            if eom:
                del self.open_msg[mk]
            if pdc.state is _S_CLOSED:
                self._events.append(Failed(token, pdc.closed_error or "pdc closed", None))
                return pdc.lpdcid
            mq = self._max_queued
            if mq is not None and len(pdc.pending) >= mq:
                raise PdsLimitError(f"more than {mq} packets queued on PDC {pdc.lpdcid}")
            if pdc.active == mk:
                pdc.pending.append(pkt)
                if eom:
                    pdc.active = None
                    pdc.active_som = None
                    if pdc.waiting:
                        self._promote(pdc)
            else:
                pdc.wait_map[mk].append(pkt)
                if eom:
                    del pdc.wait_map[mk]
        if lock:
            pdc.locks += 1
        self._dirty[pdc] = None
        return pdc.lpdcid

    def submit_run(
        self,
        peer: str,
        mode: Mode,
        next_hdr: int,
        packets: Iterable[tuple[bytes, Any, bool, bool]],
        *,
        token: object,
        now: int,
        job_id: int = 0,
        tc: int = 0,
        msg_id: object = None,
        sdi: int | None = None,
    ) -> int:
        """Addition: queue a run of non-SOM packets of the RUD/ROD message open for ``(mode,
        job_id, peer, tc, sdi, msg_id)`` — each item of ``packets`` an ``(ses, payload, som,
        eom)`` — exactly as one :meth:`submit` per packet would, in one call (the endpoint's bulk
        path: the open message is looked up once per run, not per packet). Consumes ``packets``
        up to and including the EOM packet; returns the number queued (a closed PDC fails each
        with a ``Failed`` event, as :meth:`submit` does). Raises like :meth:`submit` before
        queueing anything; with ``max_queued`` set, a run stops before the packet that would
        exceed it and returns the count, and raises only when it could queue none."""
        if self._closing:
            raise PdsClosedError("PDS core is closed")
        if mode != 0 and mode != 1:
            raise PdsError(f"submit_run takes RUD/ROD packets, not mode {mode!r}")
        mk = (mode, job_id, peer, tc, sdi, msg_id)
        pdc = self.open_msg.get(mk)
        if pdc is None:
            raise PdsError(f"non-SOM packet for message {msg_id!r} of {mk[:5]} without an open message")
        closed = pdc.state is _S_CLOSED
        mq = None if closed else self._max_queued
        pending = pdc.pending
        active = pdc.active == mk
        lst = None if active or closed else pdc.wait_map[mk]
        n = 0
        it = iter(packets)
        while True:
            if mq is not None and len(pending) >= mq:
                if n:
                    break
                raise PdsLimitError(f"more than {mq} packets queued on PDC {pdc.lpdcid}")
            item = next(it, None)
            if item is None:
                break
            ses, payload, som, eom = item
            if som:
                raise PdsError("submit_run takes the packets after a message's SOM")
            if eom:
                del self.open_msg[mk]
            n += 1
            if closed:
                self._events.append(Failed(token, pdc.closed_error or "pdc closed", None))
            elif active:
                pending.append(TxPkt(token, next_hdr, ses, payload, False, eom))
                if eom:
                    pdc.active = None
                    pdc.active_som = None
                    if pdc.waiting:
                        self._promote(pdc)
            else:
                lst.append(TxPkt(token, next_hdr, ses, payload, False, eom))  # type: ignore[union-attr]
                if eom:
                    del pdc.wait_map[mk]
            if eom:
                break
        if n and not closed:
            self._dirty[pdc] = None
        return n

    def unlock_pdc(self, pdcid: int, now: int) -> None:
        """Release one SES lock taken with ``submit(lock=True)`` (§6.10 "unlock PDC"); a closing
        PDC proceeds to CLOSE once its last lock is gone. Unknown PDCIDs are ignored."""
        pdc = self.pdcs.get(pdcid)
        if pdc is None or pdc.role != "initiator" or pdc.locks <= 0:
            return
        pdc.locks -= 1
        if not pdc.locks:
            self._check_close_progress(pdc, now)
            self._dirty[pdc] = None

    def _psn_range_used(self, pdc: InitiatorPdc) -> bool:
        """``Limit_PSN_Range`` (§2.3.2): a secure PDC has used (or queued for) its PSN range."""
        used = (pdc.next_psn - pdc.start_psn) & _M32
        return used + len(pdc.pending) >= self.config.psn_range_limit

    def _promote(self, pdc: InitiatorPdc) -> None:
        """The active message is fully submitted: queue the waiting messages behind it, up to and
        including the first one that is still open (it becomes the active message)."""
        waiting = pdc.waiting
        while pdc.active is None and waiting:
            mk, lst = waiting.popleft()
            pdc.pending.extend(lst)
            if mk in pdc.wait_map:
                del pdc.wait_map[mk]
                pdc.active = mk
                pdc.active_som = lst[0]

    def _new_ipdc(self, key: tuple[Any, ...], now: int) -> InitiatorPdc:
        """CLOSED → SYN_SENT: PDCID, Start_PSN, CCC attach. Start_PSN: ``config.start_psn`` if
        set; for a secure PDC (``sdi`` in the key) the ``initiator_start_psn`` hook's choice
        (``ini_start_psn`` of the SDI, else random, §2.3.2); else random in [2^16, 2^31) (§2.3.1)."""
        cfg = self.config
        if len(self.pdcs) >= cfg.max_pdcs:
            raise PdsLimitError(f"max_pdcs={cfg.max_pdcs} reached")
        mode, _job, peer, tc, sdi = key
        hook = self.initiator_start_psn
        if cfg.start_psn is not None:
            start = cfg.start_psn
        elif sdi is not None and hook is not None:
            start = hook.start_psn(sdi)
        else:
            start = self.rng.randrange(1 << 16, 1 << 31)
        g = self.gates.get((peer, tc))
        if g is None:
            g = self.gates[(peer, tc)] = [self.gate_factory(peer, tc), 0]
        g[1] += 1
        # a CCC with its own path selector shares it among its RUD PDCs (§4.6: feedback per CCC);
        # ROD keeps one entropy per PDC (single path, §2.13)
        ent = g[0].entropy if mode == Mode.RUD else None
        if ent is None:
            ent = self.entropy_factory(mode, self.rng, cfg.entropy_paths)
        pdc = InitiatorPdc(key, peer, mode, self._alloc_pdcid(), start & _M32, ent, g[0])
        pdc.sdi = sdi
        if sdi is not None and cfg.secure_syn_window and cfg.start_psn is None:
            # a secure first flight a 1-RTT target will refuse: send little of it (config doc)
            if hook is None or not hook.ini_start_psn(sdi):
                pdc.syn_cap = cfg.secure_syn_window
        pdc.peer_mp = min(128, self._mp_range)
        pdc.state = transition(INITIATOR_TRANSITIONS, pdc.state, _S_SYN_SENT)
        pdc.last_activity = now
        self.pdcs[pdc.lpdcid] = pdc
        self._tdirty.add(pdc.lpdcid)
        self.usable[key] = pdc
        if self._closing:  # created to carry messages moved off a closing PDC: close after them
            pdc.close_requested = True
            pdc.close_reason = "owner close"
        self._count("pdc_open_initiator")
        self._events.append(PdcOpened(peer, pdc.lpdcid, mode, "initiator"))
        self._emit(
            {
                "t": now,
                "ev": "pdc_open",
                "peer": peer,
                "pdc": pdc.lpdcid,
                "role": "initiator",
                "mode": mode.name,
                "start_psn": pdc.start_psn,
            }
        )
        return pdc

    # -- transmission ------------------------------------------------------------------------------

    def _pump(self, pdc: InitiatorPdc, now: int) -> None:
        """Send queued packets while the local window, the peer's MPR window, the SYN offset
        limit and the congestion gate allow (§2.4, §2.5).

        First transmissions of requests on an established PDC are built here inline (header
        packed with the REQUEST layout's own struct, one ``join`` for header + SES + payload);
        SYN packets, control packets and retransmissions go through :meth:`_transmit`. A gate
        with ``quota(now)`` is asked once per pump and told once (``on_send_many``); other gates
        are asked per packet (seams.CongestionGate)."""
        st = pdc.state
        if st is _S_CLOSED:
            return
        if pdc.cc_rtx and not (
            self._cc_resend(pdc, now) if pdc.gate.resend is _GATED else self._clocked_resend(pdc, now)
        ):
            return  # retransmissions first; the gate (or the fixed window's ACK clock) says wait
        if pdc.gbn_next is not None:
            self._gbn_resend(pdc, now)
            if pdc.gbn_next is not None:
                return  # the rest of a ROD go-back first; the window is full
        if st is not _S_CLOSE_ACK_WAIT and pdc.pending:
            pending = pdc.pending
            win = pdc.rod_win or self._max_outstanding
            gate = pdc.gate
            per_pkt = self._acks.per_pkt  # (``ack_per_pkt``, kept natively by the ACK builder)
            lim = (pdc.max_cack + pdc.peer_mp) & _M32  # the peer's MPR window (§2.4)
            quota = gate.quota(now)
            out = pdc.outstanding
            psn = pdc.next_psn
            base = pdc.tx_base
            word = (_P_RUD_REQ if pdc.mode == _MODE_RUD else _P_ROD_REQ) << 11
            lp = pdc.lpdcid
            rp = pdc.rpdcid
            peer = pdc.peer
            sel = pdc.entropy
            outq = self._out  # (a list: its append is native in the compiled build, a bound method not)
            seq = pdc.tx_seq
            sent = nbytes = 0
            log = self._log
            if quota >= 0 and st is not _S_SYN_SENT:
                # established PDC, gate with a quota: how many go now is known up front
                used = (psn - base) & _M32
                n = win - used  # local window
                r = (lim - psn) & _M32  # peer's MPR window: PSNs up to lim
                r = r + 1 if r < 0x80000000 else 0
                if r < n:
                    n = r
                if quota < n:
                    n = quota
                if len(pending) < n:
                    n = len(pending)
                popleft = pending.popleft
                # an AR'd packet not yet cumulatively acknowledged: its ACK will come (module doc)
                ar_wait = ((pdc.ar_psn - base) & _M32) < used
                ar_psn = -1
                for _ in range(n):
                    pkt = popleft()
                    used += 1
                    if pkt.eom or per_pkt or (not ar_wait and (not pending or used >= win)):
                        arf = _AR
                        ar_wait = True
                        ar_psn = psn
                    else:
                        arf = 0
                    # clear_psn_offset = (tx_base - 1) - psn = -used (|used| <= mp_range <= 4096)
                    hdr = _REQ_PACK(word | (pkt.next_hdr << 7) | arf, -used, psn, lp, rp)
                    ent = sel.next_entropy()
                    outq.append((b"".join((hdr, pkt.ses, pkt.payload)), peer, ent))
                    out[psn] = pkt
                    pkt.psn = psn
                    pkt.entropy = ent
                    pkt.tx_time = pkt.first_tx = now
                    pkt.sends = 1
                    seq += 1
                    pkt.tx_seq = seq
                    nbytes += pkt.nbytes
                    if log is not None:
                        self._log_tx(pdc, pkt, now, False, _REQUEST_LEN + pkt.nbytes, False)
                    psn = (psn + 1) & _M32
                if n > 0:
                    sent = n
                if ar_psn >= 0:
                    pdc.ar_psn = ar_psn
            elif st is not _S_SYN_SENT and not gate.cc_request and self.fast_paths:
                self._pump_gated(pdc, gate, now, win, lim, per_pkt)
                psn = pdc.next_psn
                seq = pdc.tx_seq
            else:
                # SYN phase (psn_offset limit, SYN header) or a credit gate: one at a time
                while pending:
                    used = (psn - base) & _M32
                    if used >= win:
                        break
                    d = (psn - lim) & _M32
                    if d and d < 0x80000000:
                        break
                    if pdc.state is _S_SYN_SENT and (
                        ((psn - pdc.start_psn) & _M32) > 4095 or (pdc.syn_cap and used >= pdc.syn_cap)
                    ):
                        break
                    pkt = pending[0]
                    if quota < 0:
                        if not gate.can_send(pkt.nbytes, now) and not (
                            psn == pdc.start_psn and gate.may_open(pkt.nbytes, now)
                        ):
                            self._cc_blocked(pdc, now)  # pacing / credit: when to try without an ACK
                            break
                    elif quota == 0:
                        break
                    else:
                        quota -= 1
                        sent += 1
                        nbytes += pkt.nbytes
                    pending.popleft()
                    pkt.psn = psn
                    out[psn] = pkt
                    psn = pdc.next_psn = (psn + 1) & _M32
                    pdc.tx_seq = seq
                    ar = pkt.eom or per_pkt
                    if not ar and (not pending or used + 1 >= win):
                        ar = ((pdc.ar_psn - base) & _M32) >= used  # no AR'd packet in flight
                    if not ar:
                        ar = gate.ack_request(pkt.nbytes)  # §4.3.3
                    self._transmit(pdc, pkt, now, False, ar, quota >= 0)
                    seq = pdc.tx_seq
            pdc.next_psn = psn
            pdc.tx_seq = seq
            if sent:
                pdc.last_activity = now
                pdc.clear_needed = False
                gate.on_send_many(sent, nbytes, now)
                c = self.counters
                c["tx"] = c.get("tx", 0) + sent
        if st is not _S_ESTABLISHED:
            self._check_close_progress(pdc, now)
        if pdc.clear_needed and pdc.state is not _S_CLOSED:
            self._send_clear(pdc, now)

    def _pump_gated(self, pdc: InitiatorPdc, gate: SenderCc, now: int, win: int, lim: int, per_pkt: bool) -> None:
        """:meth:`_pump`'s loop for an established PDC whose gate is asked per packet
        (``quota`` < 0) and sends plain requests (no credit algorithm, so no CC request header):
        the CCC of NSCC / DCTCP. Each packet is checked with ``can_send`` (window, pacing), its
        AR decided as the general loop does, then sent as :meth:`_transmit` sends a first
        transmission on an established PDC (REQUEST header packed with its own struct, entropy,
        transmission fields, ``on_send``), inline and without the checks that cannot apply here:
        a queued packet is a request (``ctl`` None: tracked CPs never queue), first sent (no
        RETX), not in SYN_SENT (no SYN header, no ``psn_offset`` limit); a new PDC's first
        packet is still offered to ``may_open`` when refused. The per-packet ``tx`` counter,
        ``last_activity``, ``clear_needed`` and ``ar_psn`` are written once at the end (nothing
        in the loop reads them from the PDC); a refusal asks only the gate's ``deadline``, not
        :meth:`_cc_blocked`'s backlog and CREDIT_REQ, which only a credit algorithm uses
        (without one, the backlog ``Ccc`` keeps is read by nothing and ``credit_request_due``
        is False).
        ``fast_paths`` False takes the general loop instead; tests/test_pds_fastpath.py checks
        the two give the same packets, times and counters. ``gate`` is typed by its base class:
        the compiled build calls its methods natively (3–4 a packet), not as generic calls."""
        pending = pdc.pending
        out = pdc.outstanding
        psn = pdc.next_psn
        base = pdc.tx_base
        word = (_P_RUD_REQ if pdc.mode == _MODE_RUD else _P_ROD_REQ) << 11
        lp = pdc.lpdcid
        rp = pdc.rpdcid
        peer = pdc.peer
        # the selector and the gate, not their bound methods: the compiled build (uet.compiled)
        # calls a native class's methods natively, a bound method only through Python's call
        sel = pdc.entropy
        outq = self._out
        log = self._log
        seq = pdc.tx_seq
        ar_psn = pdc.ar_psn
        sent = 0
        blocked = False
        while pending:
            used = (psn - base) & _M32
            if used >= win:
                break
            d = (psn - lim) & _M32
            if d and d < 0x80000000:
                break
            pkt = pending[0]
            nb = pkt.nbytes
            if not gate.can_send(nb, now) and not (psn == pdc.start_psn and gate.may_open(nb, now)):
                blocked = True
                break
            pending.popleft()
            pkt.psn = psn
            out[psn] = pkt  # (inserted last: already where _transmit's move-to-end puts it)
            ar = pkt.eom or per_pkt
            if not ar and (not pending or used + 1 >= win):
                ar = ((ar_psn - base) & _M32) >= used  # no AR'd packet in flight
            if not ar:
                ar = gate.ack_request(nb)  # §4.3.3
            if ar:
                ar_psn = psn
                pkt.rtx_wait = False
                if pkt.parked:
                    pkt.parked = 0
            cpo = -used - 1  # CLEAR_PSN = tx_base - 1, as a signed offset
            if cpo < -0x8000:
                cpo = -0x8000
            hdr = _REQ_PACK(word | (pkt.next_hdr << 7) | (_AR if ar else 0), cpo, psn, lp, rp)
            data = b"".join((hdr, pkt.ses, pkt.payload)) if nb else hdr
            ent = sel.next_entropy()
            pkt.entropy = ent
            pkt.tx_time = now
            if pkt.rearmed:
                pkt.rearmed = False
            if not pkt.sends:
                pkt.first_tx = now
            pkt.sends += 1
            seq += 1
            pkt.tx_seq = seq
            gate.on_send(nb, False, now)
            outq.append((data, peer, ent))
            sent += 1
            if log is not None:
                self._log_tx(pdc, pkt, now, False, len(data), False)
            psn = (psn + 1) & _M32
        pdc.next_psn = psn
        pdc.tx_seq = seq
        pdc.ar_psn = ar_psn
        if sent:
            pdc.last_activity = now
            pdc.clear_needed = False
            c = self.counters
            c["tx"] = c.get("tx", 0) + sent
        if blocked:
            # pacing: when to try without an ACK. (_cc_blocked's backlog report and CREDIT_REQ
            # are for credit algorithms: this gate runs none, so they would do nothing)
            pdc.cc_wake = gate.deadline(now)

    def _transmit(self, pdc: InitiatorPdc, pkt: TxPkt, now: int, retx: bool, ar: bool, gated: bool = False) -> None:
        """Build and queue one request or tracked CP; restamp clear PSN, SYN and flags (§2.5).
        ``gated``: the caller already accounted this first transmission with the gate."""
        psn = pkt.psn
        flags = _AR if ar else 0
        if retx:
            flags |= _RETX | _AR
        if flags:
            pdc.ar_psn = psn
            pkt.rtx_wait = False
            if pkt.parked:  # resent (by its delay or otherwise): no longer waiting out a shortage
                pkt.parked = 0
            # move to the end: outstanding stays ordered by latest transmission (= RTO deadline)
            out = pdc.outstanding
            del out[psn]
            out[psn] = pkt
        syn = pdc.state is _S_SYN_SENT
        if pkt.ctl is None:
            cpo = (pdc.tx_base - 1 - psn) & _M32  # CLEAR_PSN = tx_base - 1, as a signed offset
            cpo = cpo - 0x100000000 if cpo & 0x80000000 else cpo
            if cpo < -0x8000:
                cpo = -0x8000
            t = _P_RUD_REQ if pdc.mode == _MODE_RUD else _P_ROD_REQ
            gate = pdc.gate
            if gate.cc_request:
                # RCCC: a CC request carrying the CCC ID and the credit target (wire §5.2, §4.5)
                self._cc_backlog(pdc)
                cst = (gate.ccc_id, gate.credit_target())
                if syn:
                    # CC_REQUEST_SYN's bytes (use_rsv_pdc 0, psn_offset in the low 12 bits of the
                    # DPDCID word, as the layout masks it) by the compiled CC request encoder, not
                    # the layout's interpreted codec (compiled on first use, then about 2.5 k
                    # instructions a packet: every packet sent before the first ACK carries SYN)
                    hdr = cc_request(
                        t + _P_CC_REQ_DELTA, pkt.next_hdr, flags | _SYN, cpo, psn, pdc.lpdcid,
                        (psn - pdc.start_psn) & 0xFFF, cst[0], cst[1],
                    )  # fmt: skip
                else:
                    hdr = cc_request(
                        t + _P_CC_REQ_DELTA, pkt.next_hdr, flags, cpo, psn, pdc.lpdcid, pdc.rpdcid, cst[0], cst[1]
                    )
            elif syn:
                # REQUEST_SYN's bytes (use_rsv_pdc 0, psn_offset in the low 12 bits of the DPDCID
                # word) by the compiled request encoder, not the layout's interpreted codec
                hdr = request(t, pkt.next_hdr, flags | _SYN, cpo, psn, pdc.lpdcid, (psn - pdc.start_psn) & 0xFFF)
            else:
                hdr = request(t, pkt.next_hdr, flags, cpo, psn, pdc.lpdcid, pdc.rpdcid)
            data = b"".join((hdr, pkt.ses, pkt.payload)) if pkt.nbytes else hdr
        else:
            if pdc.mode == 1:
                flags |= _ISROD
            data = control(_P_CONTROL, pkt.ctl, flags, 0, psn, pdc.lpdcid, pdc.rpdcid, 0)
        ent = pdc.entropy.next_entropy()
        pkt.entropy = ent
        pkt.tx_time = now
        if pkt.rearmed:
            pkt.rearmed = False
        if not pkt.sends:
            pkt.first_tx = now
        pkt.sends += 1
        pdc.tx_seq += 1
        pkt.tx_seq = pdc.tx_seq
        pdc.last_activity = now
        pdc.clear_needed = False
        if not gated:
            pdc.gate.on_send(pkt.nbytes, retx, now)
        self._out.append((data, pdc.peer, ent))
        c = self.counters
        if retx:
            c["retransmits"] = c.get("retransmits", 0) + 1
            c["retransmitted_bytes"] = c.get("retransmitted_bytes", 0) + pkt.nbytes  # §9.1 amplification
            key = "retransmits_to:" + str(pdc.peer)  # per destination: uet-run's per-flow figure
            c[key] = c.get(key, 0) + 1
        elif not gated:
            c["tx"] = c.get("tx", 0) + 1
        if self._log is not None:
            self._log_tx(pdc, pkt, now, retx, len(data), syn)

    def _log_tx(self, pdc: InitiatorPdc, pkt: TxPkt, now: int, retx: bool, n: int, syn: bool) -> None:
        log = self._log
        assert log is not None  # callers log only when a log is set
        log(
            {
                "t": now,
                "ev": "retx" if retx else "tx",
                "peer": pdc.peer,
                "pdc": pdc.lpdcid,
                "psn": pkt.psn,
                "type": "ctl" if pkt.ctl is not None else pdc.mode.name,
                "len": n,
                "syn": syn,
                "dir": "return" if pdc.owner is not None else "forward",
            }
        )

    def _send_ctl(self, pdc: InitiatorPdc, ctl: int, psn: int, payload: int, now: int, flags: int = 0) -> None:
        """An untracked control packet on an initiator PDC (ACK_REQ, CLEAR, PROBE)."""
        if pdc.mode == _MODE_ROD:
            flags |= _ISROD
        if pdc.state is _S_SYN_SENT:
            hdr = CONTROL_SYN.encode(
                (
                    _P_CONTROL,
                    ctl,
                    flags | _SYN,
                    0,
                    psn & _M32,
                    pdc.lpdcid,
                    0,
                    (psn - pdc.start_psn) & 0xFFF,
                    payload & _M32,
                )
            )
        else:
            hdr = control(_P_CONTROL, ctl, flags, 0, psn & _M32, pdc.lpdcid, pdc.rpdcid, payload & _M32)
        self._out.append((hdr, pdc.peer, self._control_entropy))
        self._count("ctl_tx_" + _CT_NAMES[ctl])

    def _send_clear(self, pdc: InitiatorPdc, now: int) -> None:
        """CLEAR CP: payload = CLEAR_PSN = tx_base − 1, PSN 0, untracked (§2.7)."""
        pdc.clear_needed = False
        self._send_ctl(pdc, _CT_CLEAR, 0, (pdc.tx_base - 1) & _M32, now)

    def send_probe(self, pdcid: int, opaque: int, now: int) -> bool:
        """Send a PROBE CP on initiator PDC ``pdcid`` (payload = SACK base = CACK + 1); the
        target answers with an ACK carrying P and ``opaque`` (§2.11). False if no such PDC."""
        pdc = self.pdcs.get(pdcid)
        if pdc is None or pdc.role != "initiator" or pdc.state is _S_CLOSED:
            return False
        opaque &= 0xFFFF
        pdc.probes[opaque] = now
        if pdc.mode == _MODE_ROD:
            flags = _ISROD
        else:
            flags = 0
        if pdc.state is _S_SYN_SENT:
            hdr = CONTROL_SYN.encode(
                (
                    _P_CONTROL,
                    _CT_PROBE,
                    flags | _SYN,
                    opaque,
                    pdc.tx_base,
                    pdc.lpdcid,
                    0,
                    (pdc.tx_base - pdc.start_psn) & 0xFFF,
                    (pdc.max_cack + 1) & _M32,
                )
            )
        else:
            hdr = control(
                _P_CONTROL, _CT_PROBE, flags, opaque, pdc.tx_base, pdc.lpdcid, pdc.rpdcid, (pdc.max_cack + 1) & _M32
            )
        self._out.append((hdr, pdc.peer, self._control_entropy))
        self._count("ctl_tx_PROBE")
        return True

    # -- timers ------------------------------------------------------------------------------------

    def _ipdc_deadline(self, pdc: InitiatorPdc) -> int | None:
        d = self._ipdc_deadline_tx(pdc)
        rr = pdc.rrx
        if rr is not None:
            ad = rr.ack.deadline
            if ad is not None and (d is None or ad < d):
                d = ad
        w = pdc.cc_wake  # the gate's pacing / credit-request time (seams: deadline)
        if w is not None and (d is None or w < d):
            d = w
        f = pdc.fast_at  # a SACK hole waiting out the reordering window (uet.pds.feedback)
        if f is not None and (d is None or f < d):
            d = f
        return d

    def _ipdc_deadline_tx(self, pdc: InitiatorPdc) -> int | None:
        out = pdc.outstanding
        if out:
            if pdc.parked:
                return self._parked_deadline(pdc)
            # the oldest outstanding packet (``outstanding`` is in order of latest transmission):
            # the first value of a loop, which the compiled build iterates natively and reads as a
            # TxPkt, where next(iter(out.values())) makes a view and an iterator, calls the builtin
            # and reads the field generically (about 0.9 k instructions a call, one per refresh)
            for first in out.values():
                return first.tx_time + rto_ns_for(self._rto_ns, self._rto_max_ns, pdc.rto_shift, pdc.rto)
        if self._window_stalled(pdc):
            return pdc.last_activity + rto_ns_for(self._rto_ns, self._rto_max_ns, pdc.rto_shift, pdc.rto)
        if pdc.owner is not None or pdc.locks:
            return None
        ci = self.config.close_idle_ns
        if (
            ci is not None
            and pdc.state is _S_ESTABLISHED
            and not pdc.pending
            and pdc.active is None
            and not pdc.waiting
        ):
            return pdc.last_activity + ci
        return None

    def _parked_deadline(self, pdc: InitiatorPdc) -> int | None:
        """Earliest deadline of ``pdc``'s outstanding packets while some are parked (waiting out a
        resource-shortage NACK, :meth:`_park`): their resend times and the others' RTOs. A scan
        of at most ``max_outstanding`` packets, only while something is parked; it also recounts
        ``pdc.parked`` (packets acknowledged while parked leave the count stale-high)."""
        best, pdc.parked = earliest_deadline(
            pdc.outstanding.values(), rto_ns_for(self._rto_ns, self._rto_max_ns, pdc.rto_shift, pdc.rto)
        )
        return best

    def _park(self, pdc: InitiatorPdc, pkt: TxPkt, now: int) -> None:
        """Resend ``pkt`` after ``NACK_Retx_Time`` doubled per NACK it has drawn, not at once: the
        target NACKed it for a transient resource shortage (``NO_PDC_AVAIL`` .. ``NO_RESOURCE``,
        behaviour.md §2.10 "normal" class; §2.6 step 7) that an immediate resend would only meet
        again, using up ``Max_NACK_Retx_Cnt`` in microseconds. The wait does not count as an RTO
        retry and does not tell the congestion gate about a loss (nothing was lost)."""
        base = self._nack_retx_ns
        delay = base << min(max(pkt.nack_retries - 1, 0), 6)  # doubling, at most 64 × the base
        pkt.parked = now + delay
        pdc.parked += 1
        self._count("nack_parked")

    def _held_behind_gap(self, pdc: InitiatorPdc, pkt: TxPkt, now: int) -> bool:
        """ROD with target buffering (``rod_buffer``): a SACKed packet behind the oldest
        unacknowledged one is held in the target's reorder buffer until that gap fills (§2.13),
        so an ACK_REQ could only draw ``RCVD_SES_PROCG``. Its RTO re-arms it without spending
        its retries or the round's burst (True); the head's RTO drives the recovery and fails
        the PDC if its budget runs out (inference: the notes leave RTO of buffered packets open)."""
        if not (pkt.dst_received and pdc.mode == 1 and pkt.psn != pdc.tx_base and pkt.ctl is None):
            return False
        if not self.config.rod_buffer:
            return False
        out = pdc.outstanding
        pkt.tx_time = now
        pkt.rearmed = True
        del out[pkt.psn]
        out[pkt.psn] = pkt
        self._count("rto_behind_buffered_gap")
        return True

    def _rto_one(self, pdc: InitiatorPdc, pkt: TxPkt, now: int) -> bool:
        """The RTO of one due packet (§2.9): ACK_REQ if known received, else retransmit; limits →
        error. False when the PDC was closed or freed (stop)."""
        cfg = self.config
        out = pdc.outstanding
        gbn = pdc.mode == 1 and not cfg.rod_buffer and pkt.ctl is None
        if gbn and pkt.psn != pdc.tx_base:
            # ROD go-back-N: a packet behind the oldest unacknowledged one was discarded with the
            # gap (§2.13); it is resent without spending its own retries (the head's count)
            self._count("rto_behind_gap")
            pdc.gate.on_discarded(pkt.nbytes)
            self._transmit(pdc, pkt, now, True, True)
            return True
        if self._held_behind_gap(pdc, pkt, now):
            return True
        if pkt.rtx_wait:
            # already marked for retransmission (NACK, SACK loss, an earlier RTO) and waiting for
            # its CCC's gate (§4.1): it is out of flight, so no new loss and no resend past the
            # gate; re-arm the RTO from now
            self._count("rto_rtx_wait")
            pkt.tx_time = now
            del out[pkt.psn]
            out[pkt.psn] = pkt
            return True
        if retries_spent(cfg, pkt.retries, pkt.first_tx, now):
            if pkt.ctl == _CT_CLOSE:
                self._free_ipdc(pdc, "CLOSE not acknowledged", now)
            else:
                self._close_error(pdc, "retry exhausted", None, now)
            return False
        pkt.retries += 1
        self._count("rto")
        if gbn and not pkt.dst_received:
            pdc.entropy.feedback(pkt.entropy, "timeout", now)
            self._go_back(pdc, pkt.psn, now)
            return True
        if not pkt.dst_received:  # a loss inferred by the RTO (§4.1 on_inferred_loss)
            pdc.gate.on_loss(pkt.nbytes, True, now)
            pdc.entropy.feedback(pkt.entropy, "timeout", now)
        if pkt.dst_received and pkt.ctl is None:
            self._send_ctl(pdc, _CT_ACK_REQ, pkt.psn, 0, now, _AR)
            pkt.tx_time = now
            pkt.rearmed = True
            del out[pkt.psn]
            out[pkt.psn] = pkt
        elif psn_diff(pkt.psn, (pdc.max_cack + pdc.peer_mp) & _M32) > 0:
            # the peer window forbids it: wait (§2.9) one more RTO, and take no RTT sample from
            # an ACK naming it (it was not sent now; ``rearmed``)
            pkt.tx_time = now
            pkt.rearmed = True
            self._count("rto_window_wait")
            del out[pkt.psn]
            out[pkt.psn] = pkt
        elif pkt.ctl is None:
            # §4.1 on_inferred_loss: marked for retransmission, resent when the CCC allows
            pkt.tx_time = now
            del out[pkt.psn]
            out[pkt.psn] = pkt
            self._cc_retransmit(pdc, pkt, now)
        else:
            self._transmit(pdc, pkt, now, True, True)
        return True

    def _ipdc_timer(self, pdc: InitiatorPdc, now: int) -> None:
        """RTO per packet (§2.9) and the delayed resends of parked packets (:meth:`_park`).
        Also flushes the return direction's coalesced ACK (uet.pds.ret)."""
        if pdc.rrx is not None:
            self._rrx_timer(pdc, now)
        w = pdc.cc_wake
        if w is not None and w <= now:
            self._cc_wake(pdc, now)
        f = pdc.fast_at
        if f is not None and f <= now:
            pdc.fast_at = None
            thr = self._fast_retx_thr
            if thr and pdc.outstanding and psn_diff(pdc.board.high_sack, pdc.tx_base) >= thr:
                self._fast_retransmit(pdc, now, thr)
        rto = rto_ns_for(self._rto_ns, self._rto_max_ns, pdc.rto_shift, pdc.rto)
        rto0 = self.counters.get("rto", 0)
        try:
            self._ipdc_timer_rto(pdc, now, rto)
        finally:
            if self.counters.get("rto", 0) != rto0:  # a timer round that retransmitted: back off
                pdc.rto_shift = next_shift(pdc.rto_shift)

    def _ipdc_timer_rto(self, pdc: InitiatorPdc, now: int, rto: int) -> None:
        out = pdc.outstanding
        if pdc.parked:
            # parked packets break the RTO order of ``outstanding``: visit every packet once
            for pkt in list(out.values()):
                if pdc.state is _S_CLOSED or out.get(pkt.psn) is not pkt:
                    if pdc.state is _S_CLOSED:
                        return
                    continue
                due = pkt.parked
                if due:
                    if due <= now:
                        self._count("nack_resends")
                        self._transmit(pdc, pkt, now, True, True)  # clears pkt.parked
                elif pkt.tx_time + rto <= now and not self._rto_one(pdc, pkt, now):
                    return
            self._parked_deadline(pdc)  # recount
        burst = self.config.rto_burst if pdc.rto_shift else 0
        sent = 0
        while out and pdc.state is not _S_CLOSED:
            pkt = next(iter(out.values()))
            if pdc.parked or pkt.tx_time + rto > now:
                break
            if self._held_behind_gap(pdc, pkt, now):
                continue
            if burst and sent >= burst:
                # a repeated timeout (the peer stayed silent through a backed-off RTO): re-arm the
                # rest without sending; they go in a later round if the silence lasts, at once
                # when an ACK shows the peer alive (uet.pds.backoff)
                pkt.tx_time = now
                pkt.rearmed = True
                del out[pkt.psn]
                out[pkt.psn] = pkt
                self._count("rto_deferred")
                continue
            if not self._rto_one(pdc, pkt, now):
                return
            sent += 1
        if self._window_stalled(pdc):
            if pdc.last_activity + rto <= now:
                self._window_probe(pdc, now)
            return
        if pdc.state is _S_ESTABLISHED and not out and pdc.owner is None:
            d = self._ipdc_deadline_tx(pdc)
            if d is not None and d <= now:
                self._start_close(pdc, "idle", now)
                self._dirty[pdc] = None

    def _go_back(self, pdc: InitiatorPdc, e: int, now: int) -> None:
        """ROD go-back-N from PSN ``e`` (§2.13): halve the PDC's ROD send window (at least 4
        packets) and resend the unacknowledged packets from ``e`` in PSN order, only as many as
        that window holds now; the rest follow as ACKs open it (:meth:`_gbn_resend`). Resending
        the whole old flight at once would send up to ``max_outstanding`` copies that one
        reordered or lost packet among them discards again (inference: §2.13 fixes only the
        restart point; the window after a go-back is the sender's choice). The window grows back by
        one packet per window acknowledged (uet.pds.feedback)."""
        pdc.rod_win = max((pdc.rod_win or self._max_outstanding) // 2, min(4, self._max_outstanding))
        pdc.rod_acc = 0
        pdc.gbn_from = e
        pdc.gbn_end = pdc.next_psn
        pdc.gbn_time = now
        pdc.gbn_next = e
        self._count("go_back_n")
        self._gbn_resend(pdc, now, True)

    def _gbn_resend(self, pdc: InitiatorPdc, now: int, restart: bool = False) -> None:
        """Resend the packets of the last ROD go-back from ``gbn_next`` while they fit in the ROD
        window counted from ``tx_base`` (the head always goes on a ``restart``)."""
        p = pdc.gbn_next
        if p is None:
            return
        base = pdc.tx_base
        if psn_diff(p, base) < 0:
            p = base  # acknowledged meanwhile
        out = pdc.outstanding
        nxt = pdc.gbn_end
        win = pdc.rod_win or self._max_outstanding
        gate = pdc.gate
        while p != nxt and psn_diff(nxt, p) > 0:
            if psn_diff(p, base) >= win and not restart:
                pdc.gbn_next = p
                return
            q = out.get(p)
            if q is not None:
                if restart:  # the head was lost (one loss signal); the target discarded the rest
                    gate.on_loss(q.nbytes, False, now)
                else:
                    gate.on_discarded(q.nbytes)
                self._transmit(pdc, q, now, True, True)
                restart = False
            p = (p + 1) & _M32
        pdc.gbn_next = None

    def _cc_retransmit(self, pdc: InitiatorPdc, pkt: TxPkt, now: int) -> None:
        """Resend ``pkt`` now (the ``none`` gate), or queue it behind the CCC's gate: a CCC
        retransmits only when every algorithm allows sending (§4.1 ``mark_for_retransmit`` then
        ``update_state``), so resends spend window and credit like new data."""
        if pdc.gate.resend is not _GATED:
            self._transmit(pdc, pkt, now, True, True)
        elif not pkt.rtx_wait:
            pkt.rtx_wait = True
            pdc.cc_rtx.append(pkt)
            self._dirty[pdc] = None

    def _cc_resend(self, pdc: InitiatorPdc, now: int) -> bool:
        """Send queued retransmissions while the CCC allows; False if some must still wait."""
        rq = pdc.cc_rtx
        out = pdc.outstanding
        gate = pdc.gate
        while rq:
            pkt = rq[0]
            if not pkt.rtx_wait or out.get(pkt.psn) is not pkt:
                rq.popleft()  # acknowledged, or resent by its RTO meanwhile
                pkt.rtx_wait = False
                continue
            if not gate.can_send(pkt.nbytes, now):
                self._cc_blocked(pdc, now)
                return False
            rq.popleft()
            self._transmit(pdc, pkt, now, True, True)
        return True

    def _cc_wake(self, pdc: InitiatorPdc, now: int) -> None:
        """The gate's deadline passed: pump again (pacing), and a source still blocked without
        credit restates its target in a CREDIT_REQ CP, at most once per ``credit_req_ns``
        (§4.5 "Timeout with no credit")."""
        pdc.cc_wake = None
        self._cc_backlog(pdc)
        self._credit_request(pdc, now)
        self._dirty[pdc] = None

    def _credit_request(self, pdc: InitiatorPdc, now: int) -> None:
        """Send a CREDIT_REQ CP restating the credit target if one is due (§4.5)."""
        gate = pdc.gate
        if gate.credit_request_due(now):
            if pdc.state is _S_ESTABLISHED:
                self._send_ctl(pdc, _CT_CREDIT_REQ, 0, gate.credit_target(), now)
            gate.on_credit_request(now)  # (also when it could not go: never a timer in the past)

    def _cc_blocked(self, pdc: InitiatorPdc, now: int) -> None:
        """The CCC refused to send: note when it may allow it without an ACK (its pacing or
        CREDIT_REQ deadline, with the backlog brought up to date first). A source without credit
        whose receiver has granted all it asked for announces its new backlog at once in a
        CREDIT_REQ (§4.5 ``on_new_data``; :meth:`uet.cc.rccc.CreditSender.request_deadline`)."""
        self._cc_backlog(pdc)
        self._credit_request(pdc, now)
        pdc.cc_wake = pdc.gate.deadline(now)

    def _cc_backlog(self, pdc: InitiatorPdc) -> None:
        """Tell the gate the PDC's backlog (RCCC's credit target): queued packets and waiting
        retransmissions, each counted at the size of the next one (an estimate that costs O(1),
        §4.5)."""
        n = len(pdc.pending) + len(pdc.cc_rtx)
        q = pdc.cc_rtx[0] if pdc.cc_rtx else pdc.pending[0] if n else None
        pdc.gate.set_backlog(pdc.lpdcid, n, q.nbytes if q is not None else 0)

    def _window_stalled(self, pdc: InitiatorPdc) -> bool:
        """Packets wait, none is outstanding, and the next PSN lies beyond the peer's window
        (CACK + MPR, §2.4): only an ACK with a newer CACK can open it, and no RTO will ask for one
        (the ACK that carried it may have been lost)."""
        if pdc.outstanding or not pdc.pending or pdc.state is not _S_ESTABLISHED or pdc.owner is not None:
            return False
        d = (pdc.next_psn - ((pdc.max_cack + pdc.peer_mp) & _M32)) & _M32
        return 0 < d < 0x80000000

    def _window_probe(self, pdc: InitiatorPdc, now: int) -> None:
        """A window stalled for an RTO (:meth:`_window_stalled`): send a PROBE CP; the target
        answers with an ACK carrying its current CACK (§2.11), which opens the window. One per
        RTO while it lasts, like a persist timer (inference: the notes say nothing about a window
        that only a lost ACK could open)."""
        self._probe_seq = (self._probe_seq + 1) & 0xFFFF
        self.send_probe(pdc.lpdcid, self._probe_seq, now)
        pdc.last_activity = now
        self._tdirty.add(pdc.lpdcid)
        self._count("window_probes")

    # -- control packets from the target -----------------------------------------------------------

    def _rx_control_initiator(self, pdc: InitiatorPdc, ctl: int, psn: int, payload: int, flags: int, now: int) -> None:
        """CPs a target sends: REQ_CLEAR (send CLEAR), REQ_CLOSE (ACK it, start close), NOOP."""
        if ctl == _CT_REQ_CLEAR:
            self._send_clear(pdc, now)
        elif ctl == _CT_REQ_CLOSE:
            # ACK the CLOSE_REQ's return-direction PSN, then begin our own close (§2.12)
            hdr = ACK.encode((_P_ACK, 0, 0, 0, psn & _M32, pdc.lpdcid, pdc.rpdcid))
            self._out.append((hdr, pdc.peer, self._control_entropy))
            self._count("acks_tx")
            self._start_close(pdc, "target CLOSE_REQ", now)
        elif ctl == _CT_NOOP:
            pass
        elif ctl == _CT_CREDIT and pdc.gate.on_grant(payload, now):
            self._dirty[pdc] = None  # RCCC grant (§4.5): payload = cumulative credit
        else:
            self._send_nack(pdc.peer, _NC_UNEXP_EVENT, psn, pdc.lpdcid, pdc.rpdcid, 0, now)
