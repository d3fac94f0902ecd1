"""Per-PDC state records (spec/behaviour.md §2.5 "record per packet" and "per PDC").

Plain ``__slots__`` classes: one allocation per packet, attribute access without dict lookups.
The behaviour lives in :mod:`uet.pds.initiator` and :mod:`uet.pds.target`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, Literal, Protocol

from uet.cc.base import PathSelector, SenderCc
from uet.pds._aliases import _P_ROD_REQ, _P_RUD_REQ
from uet.pds.ackbuilder import AckPending
from uet.pds.config import Mode
from uet.pds.scoreboard import SackScoreboard
from uet.pds.states import InitiatorState, TargetState
from uet.pds.txpkt import TxPkt

__all__ = ["InitiatorPdc", "Resendable", "RudiPkt", "TargetPdc", "TxPkt", "earliest_deadline"]


class Resendable(Protocol):
    """What :func:`earliest_deadline` reads: a :class:`TxPkt` or a RUDI request (uet.pds.rudi)."""

    parked: int
    tx_time: int


def earliest_deadline(packets: Iterable[Resendable], rto_ns: int) -> tuple[int | None, int]:
    """``(earliest deadline, number parked)`` over outstanding ``packets``: a parked packet's
    resend time (waiting out a resource-shortage NACK), else its RTO. Used only while something is
    parked, by PDCs and by RUDI alike; the count refreshes a stale-high parked counter."""
    best = None
    parked = 0
    for q in packets:
        if q.parked:
            parked += 1
            d = q.parked
        else:
            d = q.tx_time + rto_ns
        if best is None or d < best:
            best = d
    return best, parked


class InitiatorPdc:
    """Initiator half of a RUD/ROD PDC (§2.5): send window, outstanding packets, close state."""

    __slots__ = (
        "key",
        "peer",
        "mode",
        "lpdcid",
        "rpdcid",
        "state",
        "start_psn",
        "next_psn",
        "tx_base",
        "max_cack",
        "peer_mp",
        "pending",
        "outstanding",
        "close_requested",
        "close_reason",
        "close_pkt",
        "clear_needed",
        "last_activity",
        "entropy",
        "gate",
        "tx_seq",
        "gbn_from",
        "board",
        "restarts",
        "probes",
        "closed_error",
        "active",
        "active_som",
        "waiting",
        "wait_map",
        "sdi",
        "owner",
        "rrx",
        "locks",
        "srtt",
        "min_rtt",
        "rttvar",
        "rto",
        "gbn_time",
        "gbn_end",
        "gbn_next",
        "tkey",
        "tdl",
        "tent",
        "tentd",
        "parked",
        "rto_shift",
        "rod_win",
        "rod_acc",
        "fast_at",
        "cc_rcvd",
        "cc_ecn",
        "cc_wake",
        "cc_rtx",
        "ar_psn",
        "syn_cap",
        "rtx_credit",
    )

    role: Literal["initiator"] = "initiator"

    def __init__(
        self,
        key: tuple[Any, ...],
        peer: str,
        mode: Mode,
        lpdcid: int,
        start_psn: int,
        entropy: PathSelector,
        gate: SenderCc,
    ) -> None:
        self.key = key
        self.peer = peer
        self.mode = mode
        self.lpdcid = lpdcid
        self.rpdcid = 0
        self.state = InitiatorState.CLOSED
        self.start_psn = start_psn
        self.next_psn = start_psn
        self.tx_base = start_psn
        self.max_cack = (start_psn - 1) & 0xFFFFFFFF
        self.peer_mp = 128
        self.pending: deque[TxPkt] = deque()
        #: unacknowledged packets by PSN, in order of their latest transmission (= RTO deadline)
        self.outstanding: dict[int, TxPkt] = {}
        self.close_requested = False
        self.close_reason = ""
        self.close_pkt: TxPkt | None = None
        self.clear_needed = False
        self.last_activity = 0
        self.entropy: PathSelector = entropy
        self.gate: SenderCc = gate
        self.tx_seq = 0
        self.gbn_from: int | None = None
        #: what the target is known to have received (uet.pds.scoreboard)
        self.board = SackScoreboard(self.max_cack)
        self.restarts = 0
        #: packets parked after a resource-shortage NACK (an upper bound; recounted by the timer)
        self.parked = 0
        self.probes: dict[int, int] = {}
        self.closed_error: str | None = None
        #: message being queued on this PDC (SOM submitted, EOM not yet) and its SOM packet
        self.active: Any = None
        self.active_som: TxPkt | None = None
        #: messages that started while another was active: (message key, packets), in order
        self.waiting: deque[tuple[Any, list[TxPkt]]] = deque()
        #: the still-open waiting messages, by message key
        self.wait_map: dict[Any, list[TxPkt]] = {}
        #: secure domain (SDI) of every packet on this PDC, None when TSS is off (§1.4, §2.3.2)
        self.sdi: int | None = None
        #: return-direction send half only: the target PDC it belongs to (§1.4 "second PSN space")
        self.owner: TargetPdc | None = None
        #: the receive half of the return direction (read data arriving as requests), lazily made
        self.rrx: TargetPdc | None = None
        #: SES locks (``submit(lock=True)`` until ``unlock_pdc``): no close while > 0 (§6.10)
        self.locks = 0
        #: smoothed RTT (ns, EWMA 1/8 of valid samples, §2.9); 0 until the first sample
        self.srtt = 0
        #: smallest valid RTT sample (ns; 0 until the first): an acknowledgement that comes
        #: sooner than this after a packet's resend was caused by its earlier copy (RFC 8985
        #: §6.2 step 2; uet.pds.feedback ``_late``)
        self.min_rtt = 0
        #: RTT variation and the adaptive RTO before back-off (ns; ``PdsConfig.rto_adaptive``,
        #: uet.pds.backoff); ``rto`` 0 = no sample yet or fixed mode: ``rto_ns`` applies
        self.rttvar = 0
        self.rto = 0
        #: time of the last go-back-N restart (ROD)
        self.gbn_time = 0
        #: next_psn at that restart: [gbn_from, gbn_end) was resent
        self.gbn_end = start_psn
        #: ROD: next PSN of the last go-back still to be resent as the window opens, or None
        self.gbn_next: int | None = None
        #: timer heap (uet.pds.core ``_refresh_timers``): the sequence number of this PDC's last
        #: refresh and the deadline it found (None: none), the sequence number and deadline of
        #: its live heap entry (``tent`` 0: none; an entry earlier than ``tdl`` is re-pushed at
        #: ``tdl`` when it reaches the top)
        self.tkey = 0
        self.tdl: int | None = None
        self.tent = 0
        self.tentd = 0
        #: last ACK_CC ``rcvd_bytes`` seen (256-byte units, 24 bits): newly received bytes (§4.2)
        self.cc_rcvd = 0
        #: last ACK_CCX ECN-marked byte count seen (256-byte units, 24 bits), uet.pds.feedback
        self.cc_ecn = 0
        #: when a gate that refused to send can go again without an ACK (pacing / CREDIT_REQ)
        self.cc_wake: int | None = None
        #: NACKed / SACK-lost packets waiting for the CCC to allow their retransmission (§4.1)
        self.cc_rtx: deque[TxPkt] = deque()
        #: fixed window only: trimmed packets ``cc_rtx`` may resend now, one per packet newly
        #: known received since they began waiting (uet.pds.initiator ``_clocked_resend``)
        self.rtx_credit = 0
        #: RTO back-offs in force (uet.pds.backoff): reset by an ACK that acknowledges something
        self.rto_shift = 0
        #: ROD go-back-N send window (packets) and its additive-increase counter (§2.13)
        self.rod_win = 0
        #: when the earliest hole waiting out ``board.reo_wnd`` may be fast-retransmitted (a deadline)
        self.fast_at: int | None = None
        self.rod_acc = 0
        #: PSN of the packet most recently sent with AR (§2.5 step 3); while it is not yet
        #: cumulatively acknowledged an ACK is on its way, so a refill needs no AR of its own
        self.ar_psn = (start_psn - 1) & 0xFFFFFFFF
        #: packets this PDC may send in SYN_SENT (0 = the window): a secure PDC whose Start_PSN
        #: the target may refuse (``PdsConfig.secure_syn_window``)
        self.syn_cap = 0


class TargetPdc:
    """Target half of a RUD/ROD PDC (§2.6–§2.8): receive window, CACK, clears, ACK coalescing."""

    __slots__ = (
        "peer",
        "mode",
        "lpdcid",
        "rpdcid",
        "state",
        "start_psn",
        "rx_base",
        "rcvd",
        "gtd",
        "max_clear",
        "rod_next",
        "high_rcvd",
        "ar_held",
        "ack",
        "rcvd_bytes",
        "last_rx",
        "first_rx",
        "close_psn",
        "linger_until",
        "pending_until",
        "ret_psn",
        "close_req",
        "close_wait_until",
        "clear_req_at",
        "clear_reqs",
        "clear_req_last",
        "entropy",
        "rod_buf",
        "ptype",
        "sdi",
        "ret",
        "close_deferred",
        "epsn",
        "rod_nack",
        "tkey",
        "tdl",
        "tent",
        "tentd",
        "close_req_wanted",
        "ccc",
        "ecn_bytes",
        "proven",
    )

    role: Literal["target"] = "target"

    def __init__(self, peer: str, mode: Mode, lpdcid: int, rpdcid: int, start_psn: int, now: int) -> None:
        self.peer = peer
        self.mode = mode
        self.lpdcid = lpdcid
        self.rpdcid = rpdcid
        self.state = TargetState.CLOSED
        self.start_psn = start_psn
        self.rx_base = start_psn
        #: received PSNs at or above rx_base (not yet covered by CACK)
        self.rcvd: set[int] = set()
        #: guaranteed-delivery responses kept until cleared: psn -> (next_hdr, bytes)
        self.gtd: dict[int, tuple[int, bytes]] = {}
        self.max_clear = (start_psn - 1) & 0xFFFFFFFF
        self.rod_next = start_psn
        self.high_rcvd = (start_psn - 1) & 0xFFFFFFFF
        #: newest AR'd PSN received above CACK (behind a hole): ACK once CACK passes it
        self.ar_held: int | None = None
        #: the coalesced ACK not yet sent (uet.pds.ackbuilder)
        self.ack = AckPending()
        self.rcvd_bytes = 0
        #: nominal bytes received ECN-CE marked (``ack.ecn_acked``: when the last ACK left)
        self.ecn_bytes = 0
        self.last_rx = now
        self.first_rx = now
        self.close_psn: int | None = None
        self.linger_until = 0
        self.pending_until = 0
        #: return-direction PSN space (used by CLOSE_REQ only), starts at Start_PSN (§2.3.1)
        self.ret_psn = start_psn
        #: outstanding CLOSE_REQ: [psn, tx_time, retries, first_tx] or None
        self.close_req: list[int] | None = None
        self.close_wait_until = 0
        self.clear_req_at: int | None = None
        #: CLEAR_REQs sent since the last arrival, and when the latest left (uet.pds.control)
        self.clear_reqs = 0
        self.clear_req_last = 0
        self.entropy = 0
        #: ROD buffering option: out-of-order requests by PSN, (data, flags, ecn, entropy)
        self.rod_buf: dict[int, tuple[bytes, int, int, int]] = {}
        #: PDS type of its requests (2 RUD, 3 ROD): the receive fast path compares it
        self.ptype = _P_ROD_REQ if mode == Mode.ROD else _P_RUD_REQ
        #: secure domain the PDC was established in (None when TSS is off, §2.3.2)
        self.sdi: int | None = None
        #: return-direction send half (read data as requests, §1.4), made on first use
        self.ret: InitiatorPdc | None = None
        #: a CLOSE that arrived while return data was still unacknowledged: (psn, retx flag)
        self.close_deferred: tuple[int, int] | None = None
        #: Expected_PSN returned in the closing ACK (``EPSN``, secure 0-RTT), None for none
        self.epsn: int | None = None
        #: last ROD_OOO sent: (expected PSN, time) — one NACK per gap and hold-off
        self.rod_nack: tuple[int, int] | None = None
        #: a CLOSE_REQ waits for the return direction to drain (uet.pds.ret)
        self.close_req_wanted = False
        #: RCCC: CCC ID of the sender's last CC request (keys its credit, uet.cc.rccc)
        self.ccc = 0
        #: its peer proved it receives (uet.pds.validation); set by the core at creation
        self.proven = True
        #: timer heap (uet.pds.core ``_refresh_timers``): the sequence number of this PDC's last
        #: refresh and the deadline it found (None: none), the sequence number and deadline of
        #: its live heap entry (``tent`` 0: none; an entry earlier than ``tdl`` is re-pushed at
        #: ``tdl`` when it reaches the top)
        self.tkey = 0
        self.tdl: int | None = None
        self.tent = 0
        self.tentd = 0


class RudiPkt:
    """An outstanding RUDI request."""

    __slots__ = (
        "pid",
        "token",
        "peer",
        "next_hdr",
        "body",
        "tx_time",
        "first_tx",
        "retries",
        "nack_retries",
        "entropy",
        "parked",
    )

    def __init__(self, pid: int, token: Any, peer: str, next_hdr: int, body: bytes) -> None:
        self.pid = pid
        self.token = token
        self.peer = peer
        self.next_hdr = next_hdr
        self.body = body
        self.tx_time = 0
        self.first_tx = 0
        self.retries = 0
        self.nack_retries = 0
        self.entropy = 0
        #: resend time (ns) while waiting out a resource-shortage NACK, 0 otherwise
        self.parked = 0
