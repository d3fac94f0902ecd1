"""Per-PDC state records (spec/behaviour.md §2.5 "record per packet" and "per PDC").

Plain ``__slots__`` classes: one allocation per packet, attribute access without dict lookups.
The behaviour lives in :mod:`uet.pds.initiator` and :mod:`uet.pds.target`.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from uet.pds.config import Mode
from uet.pds.states import InitiatorState, TargetState


class TxPkt:
    """One packet on an initiator PDC: a queued/outstanding request or a tracked CLOSE CP.

    ``ctl`` is None for SES requests and the ControlType for tracked control packets. ``tx_seq``
    orders transmissions on the PDC (go-back-N ignores NACKs for copies sent before a restart).
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
        "ctl",
        "tx_time",
        "first_tx",
        "tx_seq",
        "sends",
        "retries",
        "nack_retries",
        "entropy",
        "dst_received",
        "fast_done",
    )

    def __init__(self, token: Any, next_hdr: int, ses: bytes, payload: Any, som: bool, eom: bool) -> None:
        self.psn = -1
        self.token = token
        self.next_hdr = next_hdr
        self.ses = ses
        self.payload = payload
        self.nbytes = len(ses) + len(payload)
        self.som = som
        self.eom = eom
        self.ctl: int | None = None
        self.tx_time = 0
        self.first_tx = 0
        self.tx_seq = 0
        self.sends = 0
        self.retries = 0
        self.nack_retries = 0
        self.entropy = 0
        self.dst_received = False
        self.fast_done = False


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
        "mpr_cack",
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
        "high_sack",
        "restarts",
        "probes",
        "closed_error",
        "active",
        "active_som",
        "waiting",
        "wait_map",
    )

    role = "initiator"

    def __init__(self, key: tuple, peer: str, mode: Mode, lpdcid: int, start_psn: int, entropy: Any, gate: Any) -> None:
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
        self.mpr_cack = self.max_cack
        self.pending: deque[TxPkt] = deque()
        #: unacknowledged packets by PSN, in order of their latest transmission (= RTO deadline)
        self.outstanding: dict[int, TxPkt] = {}
        self.close_requested = False
        self.close_reason = ""
        self.close_pkt: TxPkt | None = None
        self.clear_needed = False
        self.last_activity = 0
        self.entropy = entropy
        self.gate = gate
        self.tx_seq = 0
        self.gbn_from: int | None = None
        self.high_sack = self.max_cack
        self.restarts = 0
        self.probes: dict[int, int] = {}
        self.closed_error: str | None = None
        #: message being queued on this PDC (SOM submitted, EOM not yet) and its SOM packet
        self.active: Any = None
        self.active_som: TxPkt | None = None
        #: messages that started while another was active: (message key, packets), in order
        self.waiting: deque[tuple[Any, list[TxPkt]]] = deque()
        #: the still-open waiting messages, by message key
        self.wait_map: dict[Any, list[TxPkt]] = {}


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
        "ack_deadline",
        "ack_gen_count",
        "ack_trigger",
        "ack_flags",
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
        "entropy",
        "rod_buf",
    )

    role = "target"

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
        self.ack_deadline: int | None = None
        self.ack_gen_count = 0
        self.ack_trigger = 0
        self.ack_flags = 0
        self.rcvd_bytes = 0
        self.last_rx = now
        self.first_rx = now
        self.close_psn: int | None = None
        self.linger_until = 0
        self.pending_until = 0
        #: return-direction PSN space (used by CLOSE_REQ only), starts at Start_PSN (§2.3.1)
        self.ret_psn = start_psn
        #: outstanding CLOSE_REQ: [psn, tx_time, retries] or None
        self.close_req: list[int] | None = None
        self.close_wait_until = 0
        self.clear_req_at: int | None = None
        self.entropy = 0
        #: ROD buffering option: out-of-order requests by PSN, (data, flags, ecn, entropy)
        self.rod_buf: dict[int, tuple] = {}
