"""The state :class:`uet.pds.core.PdsCore` and its mixins share, declared once with its types.

``PdsCore`` is the public surface (:mod:`uet.pds.core`) over eight parts, one per part of
spec/behaviour.md §2 (initiator, feedback, closing, RUDI/UUD, target, control, return direction,
trimmed resends). The parts form one chain of single inheritance, :class:`PdsState` at its root
(``TrimResendMixin`` ← ``ReturnMixin`` ← ``ControlMixin`` ← ``TargetMixin`` ← ``RudiMixin`` ←
``CloseMixin`` ← ``FeedbackMixin`` ← ``InitiatorMixin`` ← ``PdsCore``; no method is defined in
two parts, so the order changes nothing but what each module imports), because the optional
compiled build (:mod:`uet.compiled`, mypyc) compiles single inheritance only. :class:`PdsState`
declares every attribute the parts share and the methods one part calls on another, so each
part is type checked against the whole core: attributes are annotations only
(``PdsCore.__init__`` and ``RudiMixin._rudi_init`` assign them), and each cross-part method is
a stub here that the part named beside its group overrides (mypy checks each override against
its stub, so the two cannot drift apart; a compiled call goes through the class's method table).
"""

from __future__ import annotations

import random
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uet.pds.config import Mode, PdsConfig
from uet.pds.events import Delivery, Event
from uet.pds.pdc import InitiatorPdc, TargetPdc
from uet.pds.seams import RotatingEntropy
from uet.pds.startpsn import InitiatorStartPsnHook, StartPsnPolicy

if TYPE_CHECKING:
    from uet.cc.base import PathSelector, ReceiverCc, SenderCc
    from uet.cc.config import CcConfig
    from uet.pds.ackbuilder import AckBuilder
    from uet.pds.pdc import RudiPkt, TxPkt
    from uet.pds.validation import SourceGuard
    from uet.wire.pds import NackCode


class PdsState:
    """Declared, typed state of one FEP's PDS (assigned by ``PdsCore.__init__``)."""

    #: take the per-packet fast paths (the per-packet gate's send loop, uet.pds.initiator
    #: ``_pump_gated``; the in-order ACK, uet.pds.feedback ``_rx_ack_fast``); False sends every
    #: packet and ACK through the general code, which tests/test_pds_fastpath.py compares with
    #: them packet for packet
    fast_paths: bool = True

    #: this FEP's Fabric Address
    local: str
    config: PdsConfig
    #: NACK-triggered retransmission delay: ``config.nack_retx_ns`` or the RTO
    _nack_retx_ns: int
    #: the per-packet path's fields of ``config``, copied once as typed attributes (a field of the
    #: frozen ``PdsConfig`` is a generic attribute look-up in the compiled build; issue 28):
    #: ``rto_ns``, ``rto_max_ns``, ``mp_range``, ``fast_retx_threshold``, ``rto_adaptive``,
    #: ``max_outstanding``, ``control_entropy``, ``ack_timer_ns``
    _rto_ns: int
    _rto_max_ns: int
    _mp_range: int
    _fast_retx_thr: int
    _rto_adaptive: bool
    _max_outstanding: int
    _control_entropy: int
    _ack_timer_ns: int
    #: ``target_idle_ns`` (read at every target PDC's deadline refresh)
    _target_idle_ns: int | None
    rng: random.Random
    #: JSON-lines event log (aioquic qlog style), or None
    _log: Callable[[dict[str, Any]], None] | None
    counters: dict[str, int]
    _max_queued: int | None
    #: SDI of the datagram being processed (receive_datagram's ``sdi``)
    _rx_sdi: int | None
    #: every live PDC by local PDCID (both roles): the PDC table of this FEP
    pdcs: dict[int, InitiatorPdc | TargetPdc]
    #: target PDCs by (peer FA, peer's PDCID), for SYN lookup (§1.4)
    target_by_peer: dict[tuple[str, int], TargetPdc]
    #: target PDCs closed in error, by their former PDCID: when they are forgotten, and whether
    #: they told what they delivered (uet.pds.control ``_tomb_answer``)
    _tombs: OrderedDict[int, tuple[TargetPdc, int, bool]]
    #: initiator PDC accepting new messages, by (mode, job_id, peer, tc) (§1.4)
    usable: dict[tuple[Any, ...], InitiatorPdc]
    #: PDC of the message currently open (SOM submitted, EOM not yet) per key
    open_msg: dict[tuple[Any, ...], InitiatorPdc]
    #: per-CCC gates by (peer, tc): [gate, number of PDCs using it]
    gates: dict[tuple[str, int], list[Any]]
    #: initiator PDCs with packets to pump, in order of first touch
    _dirty: dict[InitiatorPdc, None]
    #: PDCs left with packets pending after a pump, by id of their congestion gate: pumped
    #: again when a sibling's pump touches that gate (PdsCore._pump_gate_siblings)
    _gate_waiting: dict[int, dict[InitiatorPdc, None]]
    #: target (and return-receive) halves with a plain ACK due, built by datagrams_to_send
    _ack_dirty: list[TargetPdc]
    #: bytes held in every PDC's ROD reorder buffer (``PdsConfig.rod_buffer_bytes``)
    _rod_buffered: int
    #: timer heap (deadline, key, PDC) and the PDCIDs whose deadline may have changed
    _theap: list[tuple[int, int, InitiatorPdc | TargetPdc]]
    _tdirty: set[int]
    _tseq: int
    #: datagrams to send: (bytes, destination FA, entropy)
    _out: list[tuple[bytes, str, int]]
    _events: deque[Event]
    _closing: bool
    #: ``on_deliver(Delivery) -> None | (next_hdr, bytes) | (next_hdr, bytes, guaranteed)``
    on_deliver: Callable[[Delivery], Any]
    #: Secure establishment seam (§2.3.2, uet.pds.startpsn; see PdsCore.__init__)
    start_psn_policy: StartPsnPolicy
    #: Secure initiator seam (§2.3.2): ``uet.tss.establish.InitiatorStartPsn`` or None
    initiator_start_psn: InitiatorStartPsnHook | None
    #: CCC seams (uet.pds.seams): one ``uet.cc.base.SenderCc`` per (peer, traffic class)
    gate_factory: Callable[[str, int], SenderCc]
    entropy_factory: Callable[[Mode, random.Random, int], PathSelector]
    payload_views: bool
    on_data: Callable[[str, int, bytes, int, int], Any] | None
    on_cc_data: Callable[[str, int, bytes, int, int], Any] | None
    acked_runs: bool
    wire_overhead: int
    _misc_entropy: RotatingEntropy
    #: opaque value of the last window probe (uet.pds.initiator._window_probe)
    _probe_seq: int
    #: RCCC receiver pacer and the CC parameters (uet.cc.registry.build), or None
    credit_scheduler: ReceiverCc | None
    cc_params: CcConfig | None
    #: address validation and anti-amplification (uet.pds.validation), None when off
    guard: SourceGuard | None
    #: the target's ACK encoder (uet.pds.ackbuilder)
    _acks: AckBuilder
    # RUDI/UUD (uet.pds.rudi, assigned by RudiMixin._rudi_init)
    _rudi_next: int
    #: outstanding RUDI requests by packet id, in order of latest transmission
    _rudi_out: dict[int, RudiPkt]
    _rudi_wait: deque[RudiPkt]
    _rudi_peer_out: dict[str, int]
    #: RUDI requests parked after a resource-shortage NACK (an upper bound, recounted)
    _rudi_parked: int
    #: RTO back-offs in force for RUDI requests (uet.pds.backoff); a response resets it
    _rudi_shift: int
    _uud_q: list[tuple[bytes, str, Any]]

    # uet.pds.core
    def _count(self, name: str, n: int = 1) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _drop(self, reason: str, now: int, src: str = "") -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _emit(self, rec: dict[str, Any]) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _alloc_pdcid(self) -> int:
        raise NotImplementedError  # defined in a subclass (named above)

    def _proved(self, tp: TargetPdc) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _is_proven(self, tp: TargetPdc) -> bool:
        raise NotImplementedError  # defined in a subclass (named above)

    def _send_nack(
        self,
        dst: str,
        code: NackCode,
        psn: int,
        spdcid: int,
        dpdcid: int,
        flags: int,
        now: int,
        payload: int = 0,
        entropy: int | None = None,
    ) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.pds.initiator
    def _promote(self, pdc: InitiatorPdc) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _new_ipdc(self, key: tuple[Any, ...], now: int) -> InitiatorPdc:
        raise NotImplementedError  # defined in a subclass (named above)

    def _pump(self, pdc: InitiatorPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _transmit(self, pdc: InitiatorPdc, pkt: TxPkt, now: int, retx: bool, ar: bool, gated: bool = False) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _send_clear(self, pdc: InitiatorPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def send_probe(self, pdcid: int, opaque: int, now: int) -> bool:
        raise NotImplementedError  # defined in a subclass (named above)

    def _parked_deadline(self, pdc: InitiatorPdc) -> int | None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _park(self, pdc: InitiatorPdc, pkt: TxPkt, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _ipdc_deadline(self, pdc: InitiatorPdc) -> int | None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _ipdc_timer(self, pdc: InitiatorPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _go_back(self, pdc: InitiatorPdc, e: int, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _cc_retransmit(self, pdc: InitiatorPdc, pkt: TxPkt, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _rx_control_initiator(self, pdc: InitiatorPdc, ctl: int, psn: int, payload: int, flags: int, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.pds.feedback
    def _fast_retransmit(self, pdc: InitiatorPdc, now: int, thr: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.pds.trimwait
    def _trim_wait(self, pdc: InitiatorPdc, pkt: TxPkt, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _clocked_resend(self, pdc: InitiatorPdc, now: int) -> bool:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.pds.closing
    def _start_close(self, pdc: InitiatorPdc, reason: str, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _check_close_progress(self, pdc: InitiatorPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _close_error(
        self, pdc: InitiatorPdc, reason: str, code: int | None, now: int, npsn: int = -1, payload: int = 0
    ) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _free_ipdc(self, pdc: InitiatorPdc, error: str | None, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.pds.target
    def _admit_unproven(self, src: str, now: int) -> bool:
        raise NotImplementedError  # defined in a subclass (named above)

    def _log_rx(self, tp: TargetPdc, src: str, psn: int, n: int, retx: int, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _advance_cack(self, tp: TargetPdc) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

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
    ) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _send_credit(self, tp: TargetPdc, grant: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _flush_ack(self, tp: TargetPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _drop_rod_buf(self, tp: TargetPdc) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.pds.control
    def _rx_close(self, tp: TargetPdc, psn: int, retx: int, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _rx_ack_target(
        self, tp: TargetPdc, data: bytes, now: int, off: int, cack: int, spdcid: int, probe: int
    ) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _target_close_req(self, tp: TargetPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _target_close_error(self, tp: TargetPdc, reason: str, now: int, send_nack: bool = True) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _free_tpdc(self, tp: TargetPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _tomb_answer(
        self, src: str, dpdcid: int, spdcid: int, psn: int, retx: int, nfl: int, now: int, ent: int
    ) -> bool:
        raise NotImplementedError  # defined in a subclass (named above)

    def _tpdc_deadline(self, tp: TargetPdc) -> int | None:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.pds.rudi
    def _rudi_init(self) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _submit_unreliable(
        self, peer: str, mode: Mode, nh: int, ses: bytes, payload: Any, token: Any, som: bool, eom: bool, now: int
    ) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _rudi_nack(self, src: str, code: int, pid: int, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    # uet.pds.ret
    def _ret_busy(self, tp: TargetPdc) -> bool:
        raise NotImplementedError  # defined in a subclass (named above)

    def _ret_drained(self, tp: TargetPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _ret_fail(self, tp: TargetPdc, reason: str, code: int | None) -> None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _rrx_for(self, pdc: InitiatorPdc, src: str, spdcid: int, nh: int, now: int) -> TargetPdc | None:
        raise NotImplementedError  # defined in a subclass (named above)

    def _rrx_timer(self, pdc: InitiatorPdc, now: int) -> None:
        raise NotImplementedError  # defined in a subclass (named above)
