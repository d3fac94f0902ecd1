"""Closing initiator PDCs (spec/behaviour.md §2.2 initiator table, §2.12).

QUIESCE stops admitting messages (messages that have not started move to another PDC, §1.4),
ACK_WAIT waits for every PSN to be acknowledged, CLOSE_ACK_WAIT sends CLOSE (new PSN, AR) and
frees the PDC on its ACK. Close in error (inference where §2.12 is silent): outstanding packets and
the rest of the message in progress fail, later queued messages move to a new PDC, and the PDC is
freed at once; the target reclaims its half by its idle CLOSE_REQ timer.

Fatal NACKs of the "close PDC; retry on a new PDC" class (§2.10: INV_DPDCID, PDC_HDR_MISMATCH,
CLOSING, INVALID_SYN, PDC_MODE_MISMATCH, UNEXP_EVENT) retry on a new PDC, from its first packet, a
message none of whose packets was acknowledged *and* that the target cannot have assembled: one of
its packets was never sent, or the NACK names a packet of it that was sent once (the NACK answers
that only copy, so it never reached the PDC). Inference where §2.10 is silent on what "retry"
covers: a message whose every packet may have arrived fails, even with nothing acknowledged, since
the target may have delivered it and lost only the ACK before its PDC went away, and nothing
recognises the copy: SES keeps no memory of completed RUD/ROD messages (PDS removes their
duplicates by PSN, which a new PDC starts afresh). Such a retry delivered the message twice
(issue 29, the live soak); reporting a failure for a message that may have arrived is the safe
side of exactly once. (A network copy of the named packet that overtook it and reached the PDC
before it went away escapes this rule; a target closes a PDC in error only after its initiator's
silence, uet.pds.control.) A message with an acknowledged packet fails as before; messages not yet
started move to a new PDC in every case (§1.4). Each packet may be moved ``max_nack_retx`` times
(issue 15 item 9, inference on the exact scope). A target that closed its PDC in error remembers
for a while what it delivered (uet.pds.control): it ACKs late copies of what it delivered, and its
``INV_DPDCID`` for the rest names the first PSN from which it delivered nothing, so a message with
a packet at or beyond that PSN, or with the packet such a NACK names (that PDC did not deliver
it), cannot have been assembled and moves too (``_never_delivered_from``).
"""

from __future__ import annotations

from typing import Any, Final

from uet.pds._aliases import _CT_CLOSE, _M32, _S_CLOSE_ACK_WAIT, _S_CLOSED, _S_ESTABLISHED, _S_SYN_SENT
from uet.pds.config import PdsLimitError
from uet.pds.events import Failed, PdcClosed
from uet.pds.pdc import InitiatorPdc, TxPkt
from uet.pds.rudi import RudiMixin
from uet.pds.states import INITIATOR_TRANSITIONS, InitiatorState, transition
from uet.wire.pds import NackCode, psn_diff

_S_ACK_WAIT: Final = InitiatorState.ACK_WAIT
_S_QUIESCE: Final = InitiatorState.QUIESCE
#: fatal NACKs whose prescribed reaction is "close PDC; retry on a new PDC" (behaviour.md §2.10)
RETRY_ON_NEW_PDC = frozenset(
    int(c)
    for c in (
        NackCode.INV_DPDCID,
        NackCode.PDC_HDR_MISMATCH,
        NackCode.CLOSING,
        NackCode.INVALID_SYN,
        NackCode.PDC_MODE_MISMATCH,
        NackCode.UNEXP_EVENT,
    )
)


class CloseMixin(RudiMixin):
    """Close and reclamation of initiator PDCs, part of :class:`uet.pds.core.PdsCore`."""

    # -- close -------------------------------------------------------------------------------------

    def _start_close(self, pdc: InitiatorPdc, reason: str, now: int) -> None:
        """Decision to close (§2.12): stop admitting messages → QUIESCE; queued messages that have
        not started move to a new PDC."""
        st = pdc.state
        if st is _S_SYN_SENT:
            pdc.close_requested = True
            pdc.close_reason = reason
            if self.usable.get(pdc.key) is pdc:
                del self.usable[pdc.key]
            return
        if st is not _S_ESTABLISHED:
            return
        pdc.state = transition(INITIATOR_TRANSITIONS, st, _S_QUIESCE)
        pdc.close_reason = reason
        if self.usable.get(pdc.key) is pdc:
            del self.usable[pdc.key]
        self._migrate_unstarted(pdc, now)
        self._check_close_progress(pdc, now)
        self._dirty[pdc] = None

    def _migrate_unstarted(self, pdc: InitiatorPdc, now: int) -> None:
        """Move the messages that have not started on ``pdc`` (queued from the first unsent SOM
        on, and every waiting message) to the key's usable PDC or a new one (§1.4: a closing PDC
        is never used for new messages). The message in progress, if any, stays."""
        pend = pdc.pending
        cut = next((i for i, q in enumerate(pend) if q.som), len(pend))
        moved = [pend[j] for j in range(cut, len(pend))]
        for _ in range(len(pend) - cut):
            pend.pop()
        act = pdc.active
        act_moves = act is not None and pdc.active_som is not None and pdc.active_som.psn == -1
        waiting = list(pdc.waiting)
        wait_map = pdc.wait_map
        pdc.waiting.clear()
        pdc.wait_map = {}
        if act_moves:
            pdc.active = None
            pdc.active_som = None
        if not moved and not waiting:
            return
        key = pdc.key
        try:
            new = self.usable.get(key) or self._new_ipdc(key, now)
        except PdsLimitError:
            for q in moved:
                self._events.append(Failed(q.token, "no PDC available", None))
            for _mk, lst in waiting:
                for q in lst:
                    self._events.append(Failed(q.token, "no PDC available", None))
            return
        # replay the moved messages into the new PDC in their original order
        if act_moves:
            # packets after the active message's SOM belong to it; it stays open
            i = max(k for k, q in enumerate(moved) if q.som)
            complete, active_pkts = moved[:i], moved[i:]
            entries: list[tuple[Any, list[TxPkt]]] = [(None, complete)] if complete else []
            entries.append((act, active_pkts))
            wait_map = dict(wait_map)
            wait_map[act] = active_pkts
        else:
            entries = [(None, moved)] if moved else []
        entries.extend(waiting)
        for mk, lst in entries:
            if mk is not None and mk in wait_map:
                new.wait_map[mk] = lst
                self.open_msg[mk] = new
            new.waiting.append((mk, lst))
        self._promote(new)
        self._dirty[new] = None

    def _check_close_progress(self, pdc: InitiatorPdc, now: int) -> None:
        """QUIESCE → ACK_WAIT when the active message is fully sent; ACK_WAIT → CLOSE_ACK_WAIT
        when every PSN is acknowledged: send CLOSE with a new PSN and AR (§2.2, §2.12)."""
        st = pdc.state
        if pdc.locks:  # the SES still expects return data (§6.10 lock_pdc, uet.pds.ret)
            return
        if st is _S_QUIESCE and not pdc.pending and pdc.active is None and not pdc.waiting:
            st = pdc.state = transition(INITIATOR_TRANSITIONS, st, _S_ACK_WAIT)
        if st is _S_ACK_WAIT and not pdc.outstanding:
            rr = pdc.rrx
            if rr is not None and rr.ack.deadline is not None:  # flush the return-direction ACK
                self._flush_ack(rr, now)
            pdc.state = transition(INITIATOR_TRANSITIONS, st, _S_CLOSE_ACK_WAIT)
            pkt = TxPkt(None, 0, b"", b"", False, False)
            pkt.ctl = int(_CT_CLOSE)
            pkt.psn = pdc.next_psn
            pdc.next_psn = (pdc.next_psn + 1) & _M32
            pdc.outstanding[pkt.psn] = pkt
            pdc.close_pkt = pkt
            self._count("ctl_tx_CLOSE")
            self._transmit(pdc, pkt, now, False, True)

    def _close_error(
        self, pdc: InitiatorPdc, reason: str, code: int | None, now: int, npsn: int = -1, payload: int = 0
    ) -> None:
        """Close in error (§2.12): fail outstanding packets and the rest of the active message;
        later queued messages move to a new PDC; free the PDC. For a return-direction half
        (uet.pds.ret) its packets fail and its target PDC closes in error. ``npsn``: the PSN a
        fatal NACK named (-1: none); ``payload``: that NACK's payload."""
        if pdc.owner is not None:
            owner = pdc.owner
            self._ret_fail(owner, reason, code)
            self._target_close_error(owner, reason, now)
            return
        ev = self._events
        salvaged = (
            self._salvage(pdc, npsn, self._never_delivered_from(pdc, code, payload)) if code in RETRY_ON_NEW_PDC else []
        )
        n = nb = 0
        for q in pdc.outstanding.values():
            n += 1
            nb += q.nbytes
            if q.ctl is None:
                ev.append(Failed(q.token, reason, code))
        pdc.outstanding.clear()
        if n:
            pdc.gate.on_done(n, nb)
        if self.usable.get(pdc.key) is pdc:
            del self.usable[pdc.key]
        pdc.closed_error = reason
        self._migrate_unstarted(pdc, now)
        for q in pdc.pending:
            ev.append(Failed(q.token, reason, code))
        pdc.pending.clear()
        self._free_ipdc(pdc, reason, now)
        if salvaged:
            self._retry_elsewhere(pdc, salvaged, reason, code, now)

    def _never_delivered_from(self, pdc: InitiatorPdc, code: int | None, payload: int) -> int | None:
        """The PSN from which a closed-in-error target PDC delivered nothing, when an
        ``INV_DPDCID`` from it says so (its payload, uet.pds.control): None for other NACKs, a
        payload of 0 (the NACK of a target that remembers nothing) or one outside what this PDC
        sent (never before ``tx_base - mp_range``, never beyond ``next_psn``)."""
        if code != NackCode.INV_DPDCID or not payload:
            return None
        back = psn_diff(pdc.tx_base, payload)
        if back > self._mp_range or psn_diff(payload, pdc.next_psn) > 0:
            return None
        return payload & _M32

    def _salvage(self, pdc: InitiatorPdc, npsn: int, floor: int | None = None) -> list[tuple[Any, list[TxPkt]]]:
        """Take off ``pdc`` every message none of whose packets was acknowledged and that
        the target cannot have assembled (module docstring): the
        outstanding packets in PSN order, then the rest of the message in progress, grouped
        from each SOM; a group is whole when its PSNs are contiguous (no acknowledged packet in
        between) and it ends with EOM or is the message still being submitted; it may move when
        one of its packets never reached the target's PDC: never sent, or sent once and named by
        the fatal NACK ``npsn`` (the NACK answers that only copy). Returns
        ``[(message key or None, packets)]`` with the packets reset for a first transmission."""
        out = pdc.outstanding
        base = pdc.tx_base
        seq = sorted(
            (q for q in out.values() if q.ctl is None), key=lambda q: (q.psn - base) & _M32
        )  # fmt: skip
        pend = pdc.pending
        cut = next((i for i, q in enumerate(pend) if q.som), len(pend))
        seq.extend(pend[i] for i in range(cut))
        groups: list[list[TxPkt]] = []
        cur: list[TxPkt] | None = None
        for q in seq:
            if q.som:
                cur = [q]
                groups.append(cur)
            elif cur is not None:
                prev = cur[-1].psn
                if q.psn != -1 and prev != -1 and q.psn != (prev + 1) & _M32:
                    groups.pop()  # an acknowledged packet lies in between: not whole
                    cur = None
                elif q.psn == -1 and prev != -1 and prev != (pdc.next_psn - 1) & _M32:
                    groups.pop()
                    cur = None
                else:
                    cur.append(q)
        act = pdc.active
        act_som = pdc.active_som
        taken: list[tuple[Any, list[TxPkt]]] = []
        limit = self.config.max_nack_retx
        for g in groups:
            is_active = act is not None and g[0] is act_som
            if not (g[-1].eom or is_active) or g[0].nack_retries >= limit:
                continue
            if not any(
                q.psn == -1
                or (q.psn == npsn and (q.sends == 1 or floor is not None))
                or (floor is not None and psn_diff(q.psn, floor) >= 0)
                for q in g
            ):
                continue  # every packet may have arrived: the target may have delivered it
            n_out = b_out = 0
            for q in g:
                if q.psn != -1:
                    if out.pop(q.psn, None) is not None:
                        n_out += 1
                        b_out += q.nbytes
                else:
                    pend.remove(q)
                q.psn = -1
                q.sends = 0
                q.retries = 0
                q.nack_retries += 1
                q.forget_feedback()
            if n_out:
                pdc.gate.on_done(n_out, b_out)
            if is_active:
                pdc.active = None
                pdc.active_som = None
            taken.append((act if is_active else None, g))
        if taken:
            self._count("messages_retried_new_pdc", len(taken))
        return taken

    def _retry_elsewhere(
        self, old: InitiatorPdc, groups: list[tuple[Any, list[TxPkt]]], reason: str, code: int | None, now: int
    ) -> None:
        """Queue the salvaged messages of ``old`` on the key's usable PDC or a new one, ahead of
        the messages :meth:`_migrate_unstarted` moved there (they are older)."""
        try:
            new = self.usable.get(old.key) or self._new_ipdc(old.key, now)
        except PdsLimitError:
            for _mk, g in groups:
                for q in g:
                    self._events.append(Failed(q.token, reason, code))
            return
        for i in range(len(groups) - 1, -1, -1):  # newest first (not reversed(): mypyc 2.4 crashes on it)
            mk, g = groups[i]
            if mk is not None:
                new.wait_map[mk] = g
                self.open_msg[mk] = new
            new.waiting.appendleft((mk, g))
        self._promote(new)
        self._dirty[new] = None

    def _free_ipdc(self, pdc: InitiatorPdc, error: str | None, now: int) -> None:
        """→ CLOSED: release the PDCID, the CCC reference and every table entry."""
        pdc.state = transition(INITIATOR_TRANSITIONS, pdc.state, _S_CLOSED)
        pdc.closed_error = error
        n = 0
        for q in pdc.outstanding.values():
            n += 1
            if q.ctl is None:  # only reachable if a CLOSE timed out with data pending (never)
                self._events.append(Failed(q.token, error or "pdc closed", None))
        pdc.outstanding.clear()
        for q in pdc.pending:
            self._events.append(Failed(q.token, error or "pdc closed", None))
        pdc.pending.clear()
        self.pdcs.pop(pdc.lpdcid, None)
        pdc.tent = 0  # its timer-heap entry, if any, is superseded (uet.pds.core ``_top_live``)
        if self.usable.get(pdc.key) is pdc:
            del self.usable[pdc.key]
        self._dirty.pop(pdc, None)
        g = self.gates.get((pdc.peer, pdc.key[3]))
        if g is not None:
            if n:
                g[0].on_done(n)
            g[1] -= 1
            if g[1] <= 0:
                del self.gates[(pdc.peer, pdc.key[3])]
        self._count("pdc_close_initiator" if error is None else "pdc_close_initiator_error")
        self._events.append(PdcClosed(pdc.peer, pdc.lpdcid, pdc.mode, "initiator", error))
        self._emit(
            {"t": now, "ev": "pdc_close", "peer": pdc.peer, "pdc": pdc.lpdcid, "role": "initiator", "reason": error}
        )
