"""Target half of RUD/ROD PDCs: establishment, request reception, CACK/clear, ACK generation
with coalescing and SACK (spec/behaviour.md §2.2 target table, §2.3, §2.6, §2.7, §2.8, §2.13).
Control packets and the target's close and timers are in :mod:`uet.pds.control`.

Choices where the notes are silent (inference):

- Duplicates are answered at once with the stored guaranteed response, or else with an ACK that
  carries no SES header (next_hdr 0), which the initiator reports as a default response.
- SACK base: ``cack + 1``, or ``trigger − 63`` when the trigger is more than 64 beyond CACK
  (htsim's ``max(trigger − 63, cack + 1)``). ``service_time`` is in µs (the unit is a spec gap).
- ``RCVD_SES_PROCG`` arises only with the ROD buffering option (``rod_buffer``): an ACK_REQ for
  a PSN held in the reorder buffer (received, not yet handed to SES). Otherwise SES answers
  synchronously in ``on_deliver``, so a received PSN always has its response.
  ``GTD_DEL_RESP_UNAVAIL`` cannot arise: guaranteed responses are kept in the PDC until cleared.
  The initiator still reacts to both (ignore / close) when a peer sends them.
- Return-direction requests (read data as PDS requests, uet.pds.ret): a request whose DPDCID
  names an initiator-role PDC is received by that PDC's return half (``rrx``) with the same
  rules; only next_hdr 5 (RESPONSE_DATA) is accepted there (else ``PDC_HDR_MISMATCH``).
- ROD buffering (``rod_buffer``, the default, as the reference does; §2.13): an out-of-order
  request within the window is kept, reported in the SACK and handed to SES once the gap before
  it fills; CACK never covers a buffered PSN. Every FEP holds at most ``rod_buffer_bytes`` of
  them; beyond that, and with ``rod_buffer=False``, the spec's go-back-N below applies.
- ROD go-back-N (§2.13): an out-of-order request is discarded and answered with NACK
  ``ROD_OOO`` whose payload is the next expected PSN (the dissector's "max received PSN + 1"
  reading of that word; the provider sends 0), so the initiator knows where to restart. Only
  the first out-of-order packet of a gap is NACKed; the rest of the flight behind the loss is
  discarded silently until ``rod_nack_holdoff_ns`` has passed (then the next one is NACKed
  again, in case the NACK or the restarted head was lost): one NACK per loss instead of one
  per packet in flight.
- A SYN whose SES header cannot be read (cut short, or of no known kind) is dropped and counted
  (``drop_ses_header``) before any PDC is made for it, as such a request on a PDC is: nothing
  answers it, so a PDC made for it would never be closed by its initiator. A trimmed SYN still
  opens its PDC and is NACKed ``TRIMMED`` (its header may be cut by a short ``trim_bytes``).
- A SYN for a new PDC while the core is closing (or at ``max_pdcs``) gets ``NO_PDC_AVAIL``. A SYN
  with a new Start_PSN from a PDCID whose old PDC still lingers in CLOSING replaces it; so does
  one whose old PDC is in CLOSE_WAIT (this target asked for a CLOSE the initiator, having
  forgotten that PDC, will never send: a tester or a process that restarted). The old PDC is
  closed in error at once, without the NACK ``CLOSING_IN_ERR``, which would name the reused
  PDCID and reach the new PDC. On an ESTABLISHED PDC the SYN is refused (``INVALID_SYN``, §2.2).
- Coalescing (§2.8, the rule written once in ``_accept`` and ``_coalesce``): ACK at once on
  SYN/RETX, on a guaranteed SES response, on CE (``ack_on_ecn``), with ``ack_per_pkt``. Any
  other request — with no response or a non-guaranteed one (plain RESPONSE, list 0,
  RC_OK/RC_NULL) — is coalesced: an AR request or ``ack_gen_trigger`` accumulated bytes make an
  ACK *due*: it is built by the next ``datagrams_to_send`` (which the owner calls after feeding a
  batch of datagrams, at the same ``now``), so all the ACKs due on one PDC within a batch leave as
  one ACK naming the newest trigger, with CACK/SACK covering the rest — timing unchanged, fewer
  ACK datagrams for both sides to build, send and process. Otherwise the ACK goes after
  ``ack_timer_ns``. Whichever ACK names the trigger carries the trigger's response (§2.8 "ACK
  meaning"): the coalesced ACK, a timer flush, a close flushing it, an ACK_REQ or duplicate
  answered for that PSN. An older request replaced as the trigger is acknowledged by CACK,
  which the initiator takes as success (§6.9), so its non-guaranteed response is not needed.
  An AR'd request that arrives behind a hole (sprayed packets overtake each other, so the EOM
  often does) is remembered (``ar_held``); the request that moves CACK past it makes the ACK due
  too (the reference's "ACK once the newest AR PSN fills its gap"). Without it the last
  stragglers of a message waited for ``ack_timer_ns`` (100 µs: +100 µs on about half the flows of
  a sprayed permutation, issue 11) or for a spurious RTO.
- ECN on coalesced ACKs: an ACK sets ``m`` when any byte it newly covers arrived ECN-CE, not
  only when the request it names did, so coalescing never hides a mark. With ``ack_on_ecn`` off
  the ACKs are ACK_CCX (wire-format.md §5.5) whose ``ack_ccx_state`` carries, in its upper 24
  bits, the cumulative count of ECN-CE marked nominal bytes in 256-byte units (rounded up, like
  ``rcvd_bytes``), the rest 0: the initiator takes the marked bytes per ACK by difference
  (issue 11 "ECN-marked bytes per ACK"; the spec leaves the CCX state's layout open, Δ11).
"""

from __future__ import annotations

import struct
from typing import Any, Final

from uet.pds._aliases import (
    _A_CLR,
    _A_EPSN,
    _A_M,
    _A_P,
    _A_RETX,
    _AR,
    _CC_REQUEST_LEN,
    _CT_CREDIT,
    _ISROD,
    _M32,
    _MODE_ROD,
    _MODE_RUD,
    _N_M,
    _N_RETX,
    _NC_CLOSING,
    _NC_INV_DPDCID,
    _NC_NEW_START_PSN,
    _NC_NO_PDC_AVAIL,
    _NC_NO_SES_MSG_AVAIL,
    _NC_PDC_HDR_MISMATCH,
    _NC_PSN_OOR_WINDOW,
    _NC_ROD_OOO,
    _NC_TRIMMED,
    _NC_TRIMMED_LASTHOP,
    _P_ACK,
    _P_CONTROL,
    _P_ROD_CC_REQ,
    _P_ROD_REQ,
    _P_RUD_CC_REQ,
    _REQUEST_LEN,
    _RETX,
    _S_SYN_SENT,
    _SYN,
    _T_CLOSE_WAIT,
    _T_CLOSING,
    _T_ESTABLISHED,
    _T_PENDING,
)
from uet.pds.config import Mode, PdsError, SesNack
from uet.pds.control import ControlMixin
from uet.pds.events import Delivery, PdcOpened
from uet.pds.pdc import InitiatorPdc, TargetPdc
from uet.pds.states import TARGET_TRANSITIONS, transition
from uet.wire.pds import (
    ACK_EPSN,
    REQUEST,
    NackCode,
    psn_diff,
)
from uet.wire.pdsfast import control, unpack_cc_request
from uet.wire.ses import extension_layout, ses_layout

_NC_INVALID_SYN: Final = NackCode.INVALID_SYN
_NC_PDC_MODE_MISMATCH: Final = NackCode.PDC_MODE_MISMATCH
_REQ_NH: Final = (1, 2, 3)
_NH_RESPONSE_DATA: Final = 5
_ROD: Final = _MODE_ROD
_RUD: Final = _MODE_RUD
_SES_END: Final[dict[tuple[int, int, int], int]] = {}
_tnew: Final = tuple.__new__  # (Final: a C static in the compiled build, not a globals look-up)
#: the builtin, bound once: the compiled build looks a builtin name up in the builtins module at
#: every use (about 250 instructions), a Final name not
_memoryview: Final = memoryview
#: the request header after the prologue: clear_psn_offset, psn, spdcid, dpdcid (REQUEST's own
#: struct, so the field layout stays defined once, in uet.wire.pds)
_REQ_TAIL: Final = struct.Struct(REQUEST._struct.format.replace("H", "", 1)).unpack_from


def ses_end(data: bytes, off: int, nh: int) -> int | None:
    """Offset where the SES request header (with its extension) that starts at ``off`` ends, or
    None if ``next_hdr`` is not a request header or the bytes are too short (wire-format.md §8–9)."""
    n = len(data)
    if off + 2 > n:
        return None
    b0 = data[off]
    key = (nh, b0, data[off + 1])
    size = _SES_END.get(key)
    if size is not None:  # a header kind without extension, seen before
        end = off + size
        return end if end <= n else None
    lay = ses_layout(nh, b0, data[off + 1])
    if lay is None:
        return None
    end = off + lay.size
    if end > n:
        return None
    if nh in _REQ_NH:
        ext = extension_layout(b0 & 0x3F, data[end] if end < n else None)
        if ext is not None:
            end += ext.size
            return end if end <= n else None
    if len(_SES_END) < 4096:  # bounded: fuzzed headers must not grow it without limit
        _SES_END[key] = lay.size
    return end


def ses_extension_missing(data: bytes, off: int, nh: int) -> bool:
    """Whether the SES request header at ``off`` is whole but the extension its opcode requires
    (atomic, compare-and-swap, rendezvous, sync; wire-format.md §8.4–8.5) is cut short. Such a
    request is still handed to SES, which answers ``RC_OP_VIOLATION`` (malformed request,
    behaviour.md §6.3, §6.9): dropping it without an ACK would leave the initiator retrying until
    it gives up (issue 15 follow-up)."""
    if nh not in _REQ_NH or off + 2 > len(data):
        return False
    lay = ses_layout(nh, data[off], data[off + 1])
    if lay is None:
        return False
    end = off + lay.size
    n = len(data)
    return end <= n and extension_layout(data[off] & 0x3F, data[end] if end < n else None) is not None


def normalize_response(r: Any) -> tuple[int, bytes, bool]:
    """``on_deliver``'s result as (next_hdr, bytes, guaranteed); see uet.pds.core."""
    if r is None:
        return 0, b"", False
    if len(r) == 3:
        nh, b, g = r
    else:
        nh, b = r
        g = nh != 4 or len(b) < 2 or (b[0] >> 6) != 0 or (b[1] & 0x3F) > 1
    if nh not in (4, 5, 6):
        raise PdsError(f"on_deliver returned next_hdr {nh}; expected 4, 5 or 6")
    return nh, bytes(b), bool(g)


class TargetMixin(ControlMixin):
    """Target-role behaviour of :class:`uet.pds.core.PdsCore` (see the module docstring)."""

    # -- requests ----------------------------------------------------------------------------------

    def _log_rx(self, tp: TargetPdc, src: str, psn: int, n: int, retx: int, now: int) -> None:
        log = self._log
        assert log is not None  # callers log only when a log is set
        log(
            {
                "t": now,
                "ev": "rx",
                "peer": src,
                "pdc": tp.lpdcid,
                "psn": psn,
                "type": tp.mode.name,
                "len": n,
                "retx": bool(retx),
            }
        )

    def _rx_request(
        self,
        data: bytes,
        src: str,
        now: int,
        t: int,
        nh: int,
        flags: int,
        ecn: int,
        trimmed: bool,
        lasthop: bool,
        entropy: int | None,
    ) -> None:
        """Receive a RUD/ROD (CC) request in the order of checks of §2.6 (the general path;
        in-order data takes the fast path in :meth:`uet.pds.core.PdsCore.receive_datagram`)."""
        cc = t == _P_RUD_CC_REQ or t == _P_ROD_CC_REQ
        hl = _CC_REQUEST_LEN if cc else _REQUEST_LEN
        if len(data) < hl:
            self._drop("short_request", now, src)
            return
        syn = flags & _SYN
        cid = ctgt = 0  # a CC request's CCC ID and credit target, wire-format.md §5.2
        # declared ints: the compiled build keeps them unboxed and does their arithmetic natively
        # (the layouts' and the struct's tuples are untyped)
        cpo: int
        psn: int
        spdcid: int
        dpdcid: int
        if syn and cc:  # (CC_REQUEST_SYN's fields by the CC request's compiled decoder: same struct)
            _t, _nh, _f, cpo, psn, spdcid, w, cid, ctgt = unpack_cc_request(data)
            poff = w & 0xFFF
        elif syn:  # REQUEST_SYN's fields by the request's struct: psn_offset, the low 12 bits of its last word
            cpo, psn, spdcid, w = _REQ_TAIL(data, 2)
            poff = w & 0xFFF
        elif cc:
            _t, _nh, _f, cpo, psn, spdcid, dpdcid, cid, ctgt = unpack_cc_request(data)
        else:  # (REQUEST.unpack's fields after the prologue, by its own struct: the length was checked)
            cpo, psn, spdcid, dpdcid = _REQ_TAIL(data, 2)
        mode = _ROD if t == _P_ROD_REQ or t == _P_ROD_CC_REQ else _RUD
        retx = flags & _RETX
        nfl = (_N_M if ecn == 3 else 0) | (_N_RETX if retx else 0)
        cfg = self.config
        tp: InitiatorPdc | TargetPdc | None  # a return-direction packet names an initiator PDC
        if syn:
            start = (psn - poff) & _M32
            tp = self.target_by_peer.get((src, spdcid))
            if tp is not None and start != tp.start_psn:
                # the initiator reused its PDCID for a new PDC: the old one is gone on its side
                if tp.state is _T_CLOSING:
                    self._free_tpdc(tp, now)
                    tp = None
                elif tp.state is _T_CLOSE_WAIT:
                    # the old PDC was waiting for a CLOSE that its initiator, having forgotten it,
                    # will never send: close it in error now (its forward direction was delivered
                    # and its return direction drained before the CLOSE_REQ, §2.12), quietly, since
                    # a NACK CLOSING_IN_ERR names the reused PDCID and would reach the new PDC
                    self._target_close_error(tp, "initiator reused its PDCID for a new PDC", now, False)
                    tp = None
            if tp is None:
                if nh not in _REQ_NH or spdcid == 0:
                    self._send_nack(src, _NC_PDC_HDR_MISMATCH, psn, 0, spdcid, nfl, now, entropy=entropy)
                    return
                if not trimmed and ses_end(data, hl, nh) is None and not ses_extension_missing(data, hl, nh):
                    # an SES header that cannot be read (cut short, unknown kind): dropped, as on
                    # a PDC, before a PDC is made for it; one would never be answered, so never
                    # closed by its initiator, and any sender could fill max_pdcs with them
                    self._drop("ses_header", now, src)
                    return
                g = self.guard
                proven = g is None or src in g.verified
                if not proven and not self._admit_unproven(src, now):
                    return
                if len(self.pdcs) >= cfg.max_pdcs or self._closing:
                    self._send_nack(src, _NC_NO_PDC_AVAIL, psn, 0, spdcid, nfl, now, entropy=entropy)
                    return
                tp = TargetPdc(src, mode, self._alloc_pdcid(), spdcid, start, now)
                if not proven:
                    tp.proven = False
                    g.add_pdc(src, tp.lpdcid)  # type: ignore[union-attr]
                self.pdcs[tp.lpdcid] = tp
                self._tdirty.add(tp.lpdcid)
                self.target_by_peer[(src, spdcid)] = tp
                tp.sdi = self._rx_sdi
                want = self._policy_start(src, tp.sdi, start)
                if want is not None and (want & _M32) != start:
                    self._tpdc_reset(tp, want & _M32)
                    tp.state = transition(TARGET_TRANSITIONS, tp.state, _T_PENDING)
                    tp.pending_until = now + cfg.new_pdc_ns
                    self._count("pdc_pending")
                    self._send_nack(src, _NC_NEW_START_PSN, psn, tp.lpdcid, spdcid, nfl, now, tp.start_psn, entropy)
                    return
                self._tpdc_establish(tp, now)
            elif tp.sdi != self._rx_sdi:
                self._drop("sdi_mismatch", now, src)
                return
            elif tp.state is _T_PENDING:
                if start != tp.start_psn:
                    tp.pending_until = now + cfg.new_pdc_ns
                    self._send_nack(src, _NC_NEW_START_PSN, psn, tp.lpdcid, spdcid, nfl, now, tp.start_psn, entropy)
                    return
                self._tpdc_establish(tp, now)
            elif start != tp.start_psn:
                self._send_nack(src, _NC_INVALID_SYN, psn, tp.lpdcid, spdcid, nfl, now, entropy=entropy)
                return
        else:
            tp = self.pdcs.get(dpdcid)
            if tp is None:
                ent = self._control_entropy if entropy is None else entropy
                if not self._tomb_answer(src, dpdcid, spdcid, psn, retx, nfl, now, ent):
                    self._send_nack(src, _NC_INV_DPDCID, psn, 0, spdcid, nfl, now, entropy=entropy)
                return
            if tp.role != "target":  # return direction: read data for an initiator PDC (uet.pds.ret)
                if tp.peer != src or spdcid != tp.rpdcid or nh != _NH_RESPONSE_DATA or tp.state is _S_SYN_SENT:
                    if tp.state is _S_SYN_SENT and tp.peer == src:
                        self._drop("return_before_established", now, src)
                        return
                    self._send_nack(src, _NC_PDC_HDR_MISMATCH, psn, tp.lpdcid, spdcid, nfl, now, entropy=entropy)
                    return
                tp = self._rrx_for(tp, src, spdcid, nh, now)
                if tp is None:
                    return
            elif tp.peer != src or spdcid != tp.rpdcid or nh not in _REQ_NH:
                self._send_nack(src, _NC_PDC_HDR_MISMATCH, psn, tp.lpdcid, spdcid, nfl, now, entropy=entropy)
                return
            if tp.sdi != self._rx_sdi:
                self._drop("sdi_mismatch", now, src)
                return
            if tp.state is _T_PENDING:
                self._drop("request_pending_pdc", now, src)
                return
        self._tdirty.add(tp.lpdcid)
        if tp.mode != mode:
            self._send_nack(src, _NC_PDC_MODE_MISMATCH, psn, tp.lpdcid, spdcid, nfl, now, entropy=entropy)
            return
        if tp.close_psn is not None and psn_diff(psn, tp.close_psn) > 0:
            self._send_nack(src, _NC_CLOSING, psn, tp.lpdcid, spdcid, nfl, now, entropy=entropy)
            return
        ent = self._control_entropy if entropy is None else entropy
        tp.last_rx = now
        if cc and self.credit_scheduler is not None:
            nominal = 0 if trimmed else len(data) + 48 + self.wire_overhead
            self._note_credit_target(tp, cid, ctgt, nominal, now, trimmed and not lasthop, ecn == 3)
        if cpo < 0:
            self._note_clear(tp, (psn + cpo) & _M32)
        d = (psn - tp.rx_base) & _M32
        mp = self._mp_range
        if d >= mp:
            if d < 0x100000000 - mp:  # neither current nor previous window
                code = _NC_INVALID_SYN if syn else _NC_PSN_OOR_WINDOW
                self._send_nack(src, code, psn, tp.lpdcid, spdcid, nfl, now, entropy=entropy)
                return
            self._count("duplicates")
            self._advance_cack(tp)
            self._send_ack(tp, psn, retx, 0, b"", now, ent)
            return
        if psn in tp.rcvd:
            self._count("duplicates")
            self._advance_cack(tp)
            r = tp.gtd.get(psn)
            if r is not None:
                self._send_ack(tp, psn, retx, r[0], r[1], now, ent)
            else:
                self._send_ack(tp, psn, retx, 0, b"", now, ent)
            return
        if trimmed:
            code = _NC_TRIMMED_LASTHOP if lasthop else _NC_TRIMMED
            self._send_nack(src, code, psn, tp.lpdcid, spdcid, nfl, now, entropy=entropy)
            return
        if tp.state is _T_CLOSING:
            self._send_nack(src, _NC_CLOSING, psn, tp.lpdcid, spdcid, nfl, now, entropy=entropy)
            return
        if mode is _ROD and psn != tp.rod_next:
            if not cfg.rod_buffer or self._rod_buffered + len(data) > cfg.rod_buffer_bytes:
                # one ROD_OOO per gap and hold-off: the rest of the flight behind a loss is
                # discarded silently (it would only repeat the same restart point)
                e = tp.rod_next
                rn = tp.rod_nack
                hold = cfg.rod_nack_holdoff_ns
                if rn is not None and rn[0] == e and now - rn[1] < (self._rto_ns // 4 if hold is None else hold):
                    self._count("rod_ooo_discarded")
                    return
                tp.rod_nack = (e, now)
                self._send_nack(src, _NC_ROD_OOO, psn, tp.lpdcid, spdcid, nfl, now, e, entropy)
                return
            # buffering option (reference behaviour, §2.13): keep it, report it in the SACK, and
            # deliver it once the gap before it fills; the ACK names only delivered PSNs, and its
            # SACK bitmap ends at this one (a bitmap based at CACK + 1 would leave a packet more
            # than 64 beyond a lost head unreported, and its RTO would resend it)
            tp.rod_buf[psn] = (data, flags, ecn, ent)
            self._rod_buffered += len(data)
            tp.rcvd.add(psn)
            self._count("rod_buffered")
            self._send_ack(tp, (tp.rx_base - 1) & _M32, 0, 0, b"", now, ent, sack_to=psn)
            return
        if not self._accept(tp, src, mode, psn, spdcid, nh, flags, data, hl, ecn, now, ent):
            return
        buf = tp.rod_buf
        while buf and tp.rod_next in buf:
            psn = tp.rod_next
            data, flags, ecn, ent = buf.pop(psn)
            self._rod_buffered -= len(data)
            tp.rcvd.discard(psn)
            if not self._accept(tp, src, mode, psn, spdcid, nh, flags, data, hl, ecn, now, ent):
                return

    def _drop_rod_buf(self, tp: TargetPdc) -> None:
        """Forget a PDC's ROD reorder buffer (close, free), releasing its share of
        ``rod_buffer_bytes``."""
        if tp.rod_buf:
            self._rod_buffered -= sum(len(v[0]) for v in tp.rod_buf.values())
            tp.rod_buf.clear()

    def _note_clear(self, tp: TargetPdc, clear: int) -> None:
        """A request's CLEAR_PSN (``psn + clear_psn_offset``, §2.7): keep the newest."""
        if psn_diff(clear, tp.max_clear) > 0:
            tp.max_clear = clear

    def _accept(
        self,
        tp: TargetPdc,
        src: str,
        mode: Mode,
        psn: int,
        spdcid: int,
        nh: int,
        flags: int,
        data: bytes,
        hl: int,
        ecn: int,
        now: int,
        ent: int,
        end: int | None = None,
    ) -> bool:
        """Deliver a new PSN to SES, record it (CACK, guaranteed response) and ACK per the
        coalescing rules (§2.6 steps 6–9, §2.8). False when SES refused it (NACK sent). ``end``:
        where the SES header ends, when the caller knows it (the receive fast path). The one
        copy of these rules: every accepted request (fast path, general path, ROD buffer drain)
        comes through here; keep it lean, it runs once per data packet."""
        cfg = self.config
        retx = flags & _RETX
        if end is None:
            end = ses_end(data, hl, nh)
            if end is None:
                if not ses_extension_missing(data, hl, nh):
                    self._drop("ses_header", now, src)
                    return False
                end = len(data)  # SES refuses it with OP_VIOLATION (ses_extension_missing)
        # the owner's lean hook first (``on_data``, PdsCore; ``on_cc_data`` for a CC request): a
        # packet it places (the expected continuation of the message the last one continued)
        # needs no Delivery record, no slices and no generic ``on_deliver``; it gets the whole
        # datagram, the SES header at bytes ``hl`` to ``end``. Anything else it declines having
        # changed nothing (a SesNack too: ``on_deliver`` then decides), and the packet goes to
        # ``on_deliver`` as before
        hook = self.on_data if hl == _REQUEST_LEN else self.on_cc_data if hl == _CC_REQUEST_LEN else None
        if hook is not None:
            try:
                placed = hook(src, nh, data, end, now) is None
            except SesNack:
                placed = False
        else:
            placed = False
        if placed:
            r: Any = None
        else:
            try:
                r = self.on_deliver(
                    _tnew(
                        Delivery,
                        (
                            src, mode, tp.lpdcid, psn, nh, data[hl:end],
                            _memoryview(data)[end:] if self.payload_views else data[end:], ecn, retx != 0,
                        ),
                    )
                )  # fmt: skip
            except SesNack:
                nfl = (_N_M if ecn == 3 else 0) | (_N_RETX if retx else 0)
                self._send_nack(src, _NC_NO_SES_MSG_AVAIL, psn, tp.lpdcid, spdcid, nfl, now, entropy=ent)
                return False
        if r is None:
            rnh = 0
            resp = b""
            gtd = False
        else:
            rnh, resp, gtd = normalize_response(r)
        nxt = (psn + 1) & _M32
        if mode is _ROD:
            tp.rod_next = nxt
        hd = (psn - tp.high_rcvd) & _M32
        if hd and hd < 0x80000000:
            tp.high_rcvd = psn
        n = len(data)
        nominal = n + 48 + self.wire_overhead  # UDP length + 40 (§4.2)
        tp.rcvd_bytes += nominal
        if ecn == 3:
            tp.ecn_bytes += nominal
        c = self.counters
        c["delivered"] = c.get("delivered", 0) + 1
        if self._log is not None:
            self._log_rx(tp, src, psn, n, retx, now)
        if psn == tp.rx_base and not gtd and not tp.rcvd:
            tp.rx_base = nxt  # in-order (no hole, nothing uncleared above)
        else:
            tp.rcvd.add(psn)
            if gtd:
                tp.gtd[psn] = (rnh, resp)
            self._advance_cack(tp)
            if tp.gtd:
                tp.clear_req_at = now + cfg.clear_ns
        aflags = (_A_M if ecn == 3 else 0) | (_A_RETX if retx else 0)
        # the AR'd PSN held above CACK (before any immediate ACK: a CE-marked or resent AR'd
        # request behind a hole is ACKed at once, and that ACK cannot cover the hole either)
        ah = tp.ar_held
        filled = ah is not None and psn_diff(tp.rx_base, ah) > 0
        if filled:
            tp.ar_held = None  # the hole below an AR'd PSN has filled: ACK now, not at the timer
        if flags & _AR and psn_diff(tp.rx_base, psn) <= 0:
            ah = tp.ar_held  # keep the newest: an older AR'd PSN arriving late must not hide it
            if ah is None or psn_diff(psn, ah) > 0:
                tp.ar_held = psn
        ab = self._acks  # (the ACK rule's configuration fields, read natively)
        if flags & (_SYN | _RETX) or gtd or ab.per_pkt or (ecn == 3 and ab.on_ecn):
            self._send_ack(tp, psn, aflags, rnh, resp, now, ent)
            return True
        n -= end
        gen = tp.ack.gen_count + (n if n > ab.min_add else ab.min_add)
        due = flags & _AR != 0 or gen >= ab.trigger or filled
        self._coalesce(tp, psn, aflags, rnh, resp, ent, gen, due, not due, now)
        return True

    def _coalesce(
        self,
        tp: TargetPdc,
        psn: int,
        aflags: int,
        rnh: int,
        resp: bytes,
        ent: int,
        gen: int,
        due: bool,
        timer: bool,
        now: int,
    ) -> None:
        """Make ``psn`` (with its SES response, if any) the trigger of the PDC's coalesced ACK
        (§2.8): ``due`` queues it for the next ``datagrams_to_send`` (one ACK per PDC and batch),
        ``timer`` arms the ``ack_timer_ns`` flush. The one place the coalescing state is written
        (``_accept`` per packet, ``PdsCore._end_run`` once per predicted run). A newer trigger
        replaces an older one: the older request is then acknowledged by CACK, which counts as
        success (§6.9) — so only non-guaranteed responses are ever coalesced."""
        a = tp.ack
        a.gen_count = gen
        a.trigger = psn
        a.flags = aflags
        a.rnh = rnh
        a.resp = resp
        tp.entropy = ent
        if due and not a.due:
            a.due = True
            self._ack_dirty.append(tp)
        if timer and a.deadline is None:
            a.deadline = now + self._ack_timer_ns
            tp.first_rx = now

    def _flush_ack(self, tp: TargetPdc, now: int) -> None:
        """Send the PDC's pending coalesced ACK (due, timer or a close flushing it): it names the
        trigger and carries the trigger's SES response (§2.8 "ACK meaning")."""
        a = tp.ack
        self._send_ack(tp, a.trigger, a.flags, a.rnh, a.resp, now, tp.entropy)

    def _policy_start(self, src: str, sdi: int | None, start: int) -> int | None:
        """Ask the secure establishment policy (uet.pds.startpsn) about an offered Start_PSN
        (§2.3.2): None accepts (0-RTT), an int is the Start_PSN the PDC must use (PENDING + NACK
        ``NEW_START_PSN``). SDI None counts as 0."""
        return self.start_psn_policy.offer(src, 0 if sdi is None else sdi, start)

    def _tpdc_reset(self, tp: TargetPdc, start: int) -> None:
        tp.start_psn = start
        tp.rx_base = start
        tp.rod_next = start
        tp.ret_psn = start
        tp.max_clear = (start - 1) & _M32
        tp.high_rcvd = (start - 1) & _M32

    def _admit_unproven(self, src: str, now: int) -> bool:
        """May a SYN from unverified ``src`` create a target PDC (uet.pds.validation)? Over the
        per-source cap it is dropped without reply; at the total cap the oldest unverified
        target PDC is freed silently to make way."""
        g = self.guard
        assert g is not None
        ok, evict = g.admit_pdc(src, now)
        if not ok:
            self._drop("unverified_syn", now, src)
            return False
        if evict is not None:
            old = self.pdcs.get(evict)
            if isinstance(old, TargetPdc):
                self._count("unverified_pdc_evicted")
                self._free_tpdc(old, now)
            else:
                g.drop_pdc(evict)
        return True

    def _tpdc_establish(self, tp: TargetPdc, now: int) -> None:
        tp.state = transition(TARGET_TRANSITIONS, tp.state, _T_ESTABLISHED)
        self._count("pdc_open_target")
        self._events.append(PdcOpened(tp.peer, tp.lpdcid, tp.mode, "target"))
        self._emit(
            {
                "t": now,
                "ev": "pdc_open",
                "peer": tp.peer,
                "pdc": tp.lpdcid,
                "role": "target",
                "mode": tp.mode.name,
                "start_psn": tp.start_psn,
            }
        )

    def _advance_cack(self, tp: TargetPdc) -> None:
        """CACK = highest PSN with everything from rx_base received and no uncleared guaranteed
        response on the way (§2.7); state below the new rx_base is released. A PSN held in the
        ROD reorder buffer (``rod_buffer``) is received but not yet handed to SES: CACK stops
        before it (SES may still refuse it; it is delivered, and CACK moves on, as the buffer
        drains in ``_rx_request``)."""
        base = tp.rx_base
        rcvd = tp.rcvd
        gtd = tp.gtd
        mc = tp.max_clear
        buf = tp.rod_buf
        while base in rcvd:
            if buf and base in buf:
                break
            if gtd and base in gtd:
                if psn_diff(base, mc) > 0:
                    break
                del gtd[base]
            rcvd.remove(base)
            base = (base + 1) & _M32
        tp.rx_base = base
        if not gtd:
            tp.clear_req_at = None

    def _send_ack(
        self,
        tp: TargetPdc,
        trig: int,
        flags: int,
        rnh: int,
        resp: bytes,
        now: int,
        ent: int,
        opaque: int | None = None,
        epsn: int | None = None,
        sack_to: int | None = None,
    ) -> None:
        """Build ACK or ACK_CC (``ack_format``) naming ``trig``, with CACK, SACK, MPR, NSCC state
        and the SES response (§2.8). An ACK naming the pending coalesced trigger without a
        response of its own (an ACK_REQ, a duplicate, a CLEAR) carries the trigger's response:
        whichever ACK names a request first brings its response. Every ACK cancels the pending
        coalesced one (its CACK/SACK say everything that one would). ``epsn``: a closing ACK of
        a secure 0-RTT PDC, a plain ACK with flag ``EPSN`` and the 4-byte Expected_PSN
        (``pds.ACK_EPSN``, §2.3.2, wire §5.3). ``sack_to``: the SACK bitmap describes the 64
        PSNs up to this one (default ``trig``) when it lies more than 64 beyond CACK."""
        cack = (tp.rx_base - 1) & _M32
        ack = tp.ack
        if tp.ecn_bytes != ack.ecn_acked:
            # this ACK covers ECN-CE marked bytes: ``m`` set, whichever request it names, so a
            # coalesced ACK never loses a mark (§2.8, §4.7); ACK_CCX says how many bytes
            flags |= _A_M
            ack.ecn_acked = tp.ecn_bytes
        if epsn is not None:
            off = psn_diff(trig, cack)
            hdr = ACK_EPSN.encode(
                (
                    _P_ACK,
                    0,
                    flags | _A_EPSN,
                    off if -0x8000 <= off <= 0x7FFF else 0,
                    cack,
                    tp.lpdcid,
                    tp.rpdcid,
                    epsn & _M32,
                )
            )
            self._out.append((hdr, tp.peer, ent))
            ack.sent()
            self._count("acks_tx")
            return
        if tp.gtd or not (tp.proven or self._is_proven(tp)):
            flags |= _A_CLR  # (an unproven peer: its CLEAR proves it receives, uet.pds.validation)
        if not rnh and ack.rnh and trig == ack.trigger and opaque is None:
            rnh = ack.rnh
            resp = ack.resp
        if opaque is None:
            off = psn_diff(trig, cack)
            if not -0x8000 <= off <= 0x7FFF:
                off = 0
        else:
            flags |= _A_P
            off = opaque
        # service time of the request the ACK names (§4.2): how long since it arrived (the newest
        # arrival on the PDC is the trigger), in µs rounded to nearest (units: a spec gap)
        st = (now - tp.last_rx + 500) // 1000 if trig == ack.trigger and opaque is None else 0
        hi = trig if sack_to is None else sack_to
        hdr = self._acks.build_from(
            tp.lpdcid,
            tp.rpdcid,
            tp.rcvd,
            tp.rcvd_bytes,
            tp.ecn_bytes,
            flags,
            rnh,
            off,
            cack,
            opaque is not None,
            hi,
            st,
        )
        self._out.append((hdr + resp if resp else hdr, tp.peer, ent))
        ack.sent()
        c = self.counters
        c["acks_tx"] = c.get("acks_tx", 0) + 1

    # -- RCCC receiver (spec/behaviour.md §4.5) ----------------------------------------------------

    def _note_credit_target(
        self, tp: TargetPdc, ccc: int, target: int, nominal: int, now: int, core_trim: bool = False, ce: bool = False
    ) -> None:
        """A CC request's credit target for the sender's CCC ``(peer, ccc)``; its grants go on
        ``tp``. ``nominal``: the request's nominal size (§4.2), 0 when it arrived trimmed; the
        pacer counts it as service to the sender (uet.cc.rccc). A trimmed one also funds its
        retransmission (one MTU more, §3.3, §4.5). ``core_trim``: trimmed before the last hop,
        which slows that sender's grants (uet.cc.pullrate)."""
        cs = self.credit_scheduler
        cp = self.cc_params
        if cs is None or cp is None:  # no RCCC receiver on this FEP (the caller checks too)
            return
        tp.ccc = ccc
        key = (tp.peer, ccc)
        cs.note_target(key, target, now, tp, nominal)
        cs.note_arrival(key, core_trim, now, ce)
        if not nominal:
            cs.add_demand(key, cp.mtu, now)

    def _send_grants(self, now: int) -> None:
        """The credit pacer's due grants, each a CREDIT CP (payload = cumulative 24-bit grant)
        on the sender's latest PDC; senders whose PDC has gone are forgotten."""
        cs = self.credit_scheduler
        if cs is None:
            return
        for key, sender, grant in cs.poll(now):
            tp = self.pdcs.get(sender.lpdcid) if isinstance(sender, TargetPdc) else None
            if tp is not sender or tp is None or tp.role != "target" or tp.state is not _T_ESTABLISHED:
                cs.forget(key)
                continue
            self._send_credit(tp, grant)

    def _send_credit(self, tp: TargetPdc, grant: int) -> None:
        """One CREDIT CP (wire-format.md §5.8): payload = the cumulative 24-bit grant."""
        flags = _ISROD if tp.mode is _ROD else 0
        hdr = control(_P_CONTROL, _CT_CREDIT, flags, 0, 0, tp.lpdcid, tp.rpdcid, grant)
        self._out.append((hdr, tp.peer, self._control_entropy))
        self._count("ctl_tx_CREDIT")
