"""RUDI and UUD: the PDC-less modes (spec/behaviour.md §2.14, §2.15).

RUDI initiator: each request gets a 32-bit packet id unique among its outstanding requests
(a counter, skipping ids in use), a per-request RTO (``rto_ns``, ``max_rto_retx``) and is resent
with RETX and the same id until its RUDI response arrives; at least once, duplicates reach SES.
A response for no outstanding id is a late duplicate and is dropped. RUDI target: stateless;
every copy is handed to SES and answered by exactly one RUDI response (type 5) echoing the id
and carrying the SES response. When ``on_deliver`` returns None (SES has nothing to say yet,
e.g. a non-final packet of a multi-packet message) the core regenerates the default SES response
itself, as PDS does for coalesced and duplicate ACKs (behaviour.md §2.14, §6.9):
``DEFAULT_RESPONSE``, ``RC_NULL``, the request's message id (0 for small/medium headers, which
have none), RI generation and JobID, modified length = the packet's payload bytes. A RUDI
response never goes out without its SES response (next_hdr NONE is not a RUDI response).
A transient SES shortage (:class:`~uet.pds.config.SesNack`) or a trimmed request is answered
with a RUDI NACK (NT = 1, PDCIDs 0). The initiator resends a request NACKed for a resource
shortage (``NO_PDC_AVAIL`` .. ``NO_RESOURCE``) after ``PdsConfig.nack_retx_ns`` doubled per NACK,
not at once, exactly as on a PDC (uet.pds.feedback, behaviour.md §2.10); other NACKs at once.

UUD: one packet (SOM and EOM), no PDC, no ACK; ``Acked`` is reported when the datagram is
handed out. The target hands it to SES and ignores the return value.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

from uet.pds._aliases import (
    _M32,
    _MODE_RUDI,
    _MODE_UUD,
    _NA_IGNORE,
    _NC_NO_PDC_AVAIL,
    _NC_NO_RESOURCE,
    _NC_NO_SES_MSG_AVAIL,
    _NC_TRIMMED,
    _NC_TRIMMED_LASTHOP,
    _P_RUDI_REQ,
    _P_RUDI_RESP,
    _P_UUD_REQ,
)
from uet.pds.backoff import next_shift, retries_spent, rto_ns_for
from uet.pds.config import Mode, PdsError, PdsLimitError, SesNack
from uet.pds.events import Failed, NackReceived, new_acked, new_delivery
from uet.pds.pdc import RudiPkt, earliest_deadline
from uet.pds.target import TargetMixin, normalize_response, ses_end, ses_extension_missing
from uet.wire.pds import NACK_ACTION, RUDI, UUD, NackAction, NackCode, NackFlag, NextHeader, RudiFlag
from uet.wire.ses import RESPONSE, ResponseOpcode, ReturnCode

#: RUDI request / response header length (wire-format.md §5.9)
_RUDI_LEN: Final = RUDI.size

_NA_RETRANSMIT: Final = NackAction.RETRANSMIT
_NH_STANDARD: Final = int(NextHeader.STANDARD)
_DEFAULT_RESP: Final = int(ResponseOpcode.DEFAULT_RESPONSE)
_RC_NULL: Final = int(ReturnCode.NULL)
_NT: Final = int(NackFlag.NT)


def default_response(ses: bytes | memoryview, nh: int, payload_len: int) -> bytes:
    """The PDS-regenerated default SES response (wire-format.md §11.1, behaviour.md §6.9) to a
    RUDI request whose SES layer returned nothing: ``DEFAULT_RESPONSE`` with ``RC_NULL`` (the
    initiator counts the packet done without a length check), echoing the request's message id
    (standard header bytes 2–3; small and medium headers carry none: 0), RI generation (byte 4)
    and JobID (bytes 5–7; the same place in all three request headers)."""
    mid = int.from_bytes(ses[2:4], "big") if nh == _NH_STANDARD else 0
    job = int.from_bytes(ses[5:8], "big")
    return RESPONSE.encode((0, _DEFAULT_RESP, 0, _RC_NULL, mid, ses[4], job, payload_len & _M32))


class RudiMixin(TargetMixin):
    """RUDI/UUD behaviour of :class:`uet.pds.core.PdsCore` (see the module docstring)."""

    def _rudi_init(self) -> None:
        self._rudi_next = self.rng.randrange(1 << 32)
        #: outstanding RUDI requests by packet id, in order of latest transmission
        self._rudi_out: dict[int, RudiPkt] = {}
        self._rudi_wait: deque[RudiPkt] = deque()
        #: outstanding RUDI requests per peer (the per-peer window, :meth:`_rudi_flush`)
        self._rudi_peer_out: dict[str, int] = {}
        #: RUDI requests parked after a resource-shortage NACK (an upper bound, recounted)
        self._rudi_parked = 0
        #: RTO back-offs in force for RUDI requests (uet.pds.backoff); a response resets it
        self._rudi_shift = 0
        self._uud_q: list[tuple[bytes, str, Any]] = []

    def _submit_unreliable(
        self, peer: str, mode: Mode, nh: int, ses: bytes, payload: Any, token: Any, som: bool, eom: bool, now: int
    ) -> None:
        if not (som and eom):
            raise PdsError(f"{mode.name} packets are single-packet messages (SOM and EOM)")
        if mode == _MODE_UUD:
            self._uud_q.append((UUD.encode((_P_UUD_REQ, nh, 0)) + ses + payload, peer, token))
            return
        out = self._rudi_out
        if len(out) + len(self._rudi_wait) >= 0xFFFFFFFF:
            raise PdsLimitError("RUDI packet id space exhausted")
        pid = self._rudi_next
        while pid in out:  # ids come from a counter: queued ones are unique until 2^32 wraps
            pid = (pid + 1) & _M32
        self._rudi_next = (pid + 1) & _M32
        self._rudi_wait.append(RudiPkt(pid, token, peer, nh, bytes(ses) + bytes(payload)))

    def _rudi_flush(self, now: int) -> None:
        """Hand out queued UUD datagrams (→ Acked) and start waiting RUDI requests."""
        if self._uud_q:
            ent = self._misc_entropy
            for data, peer, token in self._uud_q:
                self._out.append((data, peer, ent.next_entropy()))
                self._events.append(new_acked(token, 0, b""))
            self._count("uud_tx", len(self._uud_q))
            self._uud_q = []
        wait = self._rudi_wait
        if not wait:
            return
        lim = self.config.rudi_max_outstanding
        win = self.config.max_outstanding
        per = self._rudi_peer_out
        out = self._rudi_out
        keep: deque[RudiPkt] = deque()
        # requests to a peer whose window is full wait, in order, behind the others; the scan
        # is bounded (a window's worth of blocked requests), so a slow peer costs O(window)
        skipped = 0
        while wait and len(out) < lim and skipped <= win:
            pkt = wait.popleft()
            n = per.get(pkt.peer, 0)
            if n >= win:
                keep.append(pkt)
                skipped += 1
                continue
            per[pkt.peer] = n + 1
            out[pkt.pid] = pkt
            pkt.first_tx = now
            self._rudi_send(pkt, now, False)
        if keep:
            keep.extend(wait)
            self._rudi_wait = keep

    def _rudi_done(self, pkt: RudiPkt) -> None:
        """``pkt`` left the outstanding requests (answered or failed): its peer's window opens."""
        del self._rudi_out[pkt.pid]
        per = self._rudi_peer_out
        n = per[pkt.peer] - 1
        if n:
            per[pkt.peer] = n
        else:
            del per[pkt.peer]

    def _rudi_send(self, pkt: RudiPkt, now: int, retx: bool) -> None:
        flags = int(RudiFlag.RETX) if retx else 0
        pkt.entropy = self._misc_entropy.next_entropy()
        pkt.tx_time = now
        if retx:
            pkt.parked = 0
            del self._rudi_out[pkt.pid]
            self._rudi_out[pkt.pid] = pkt
        self._out.append((RUDI.encode((_P_RUDI_REQ, pkt.next_hdr, flags, pkt.pid)) + pkt.body, pkt.peer, pkt.entropy))
        self._count("rudi_retransmits" if retx else "rudi_tx")
        if self._log is not None:
            self._log(
                {"t": now, "ev": "retx" if retx else "tx", "peer": pkt.peer, "pdc": 0, "psn": pkt.pid, "type": "RUDI"}
            )

    def _rudi_deadline(self) -> int | None:
        if self._rudi_out:
            if self._rudi_parked:
                return self._rudi_parked_deadline()
            return next(iter(self._rudi_out.values())).tx_time + rto_ns_for(
                self._rto_ns, self._rto_max_ns, self._rudi_shift
            )
        return None

    def _rudi_parked_deadline(self) -> int | None:
        """Earliest RTO or parked resend among outstanding RUDI requests (a scan, only while some
        are parked); recounts ``_rudi_parked``."""
        best, self._rudi_parked = earliest_deadline(
            self._rudi_out.values(), rto_ns_for(self._rto_ns, self._rto_max_ns, self._rudi_shift)
        )
        return best

    def _rudi_timer(self, now: int) -> None:
        """Per-request RTO (§2.14) with the back-off and retry budget of uet.pds.backoff."""
        rto0 = self.counters.get("rto", 0)
        self._rudi_timer_rto(now, rto_ns_for(self._rto_ns, self._rto_max_ns, self._rudi_shift))
        if self.counters.get("rto", 0) != rto0:
            self._rudi_shift = next_shift(self._rudi_shift)
        if self._rudi_wait:
            self._rudi_flush(now)

    def _rudi_timer_rto(self, now: int, rto: int) -> None:
        out = self._rudi_out
        cfg = self.config
        if self._rudi_parked:  # parked requests break the RTO order: visit each once
            for pkt in list(out.values()):
                if out.get(pkt.pid) is not pkt:
                    continue
                if pkt.parked:
                    if pkt.parked <= now:
                        self._count("nack_resends")
                        self._rudi_send(pkt, now, True)
                    continue
                if pkt.tx_time + rto > now:
                    continue
                if retries_spent(cfg, pkt.retries, pkt.first_tx, now):
                    self._rudi_done(pkt)
                    self._events.append(Failed(pkt.token, "retry exhausted", None))
                    self._count("rudi_failed")
                    continue
                pkt.retries += 1
                self._count("rto")
                self._rudi_send(pkt, now, True)
            self._rudi_parked_deadline()
        # a round after a silent one resends at most ``rto_burst`` requests and re-arms the rest
        # without sending, as a PDC does (uet.pds.backoff): a receiver that cannot keep up is
        # not sent its whole window again each round (issue 29 item 2)
        burst = cfg.rto_burst if self._rudi_shift else 0
        sent = 0
        while out and not self._rudi_parked:
            pkt = next(iter(out.values()))
            if pkt.tx_time + rto > now:
                break
            if retries_spent(cfg, pkt.retries, pkt.first_tx, now):
                self._rudi_done(pkt)
                self._events.append(Failed(pkt.token, "retry exhausted", None))
                self._count("rudi_failed")
                continue
            if burst and sent >= burst:
                pkt.tx_time = now
                del out[pkt.pid]
                out[pkt.pid] = pkt
                self._count("rudi_rto_rearmed")
                continue
            pkt.retries += 1
            sent += 1
            self._count("rto")
            self._rudi_send(pkt, now, True)

    def _rx_rudi_request(
        self,
        data: bytes,
        src: str,
        now: int,
        nh: int,
        flags: int,
        ecn: int,
        trimmed: bool,
        lasthop: bool,
        entropy: int | None,
    ) -> None:
        if len(data) < _RUDI_LEN:
            self._drop("short_rudi", now, src)
            return
        pid = RUDI.unpack(data)[3]
        retx = flags & RudiFlag.RETX
        nfl = _NT | (int(NackFlag.M) if ecn == 3 else 0) | (int(NackFlag.RETX) if retx else 0)
        if trimmed:
            code = _NC_TRIMMED_LASTHOP if lasthop else _NC_TRIMMED
            self._send_nack(src, code, pid, 0, 0, nfl, now, entropy=entropy)
            return
        end = ses_end(data, 8, nh)
        if end is None:
            if not ses_extension_missing(data, 8, nh):
                self._drop("ses_header", now, src)
                return
            end = len(data)  # answered OP_VIOLATION by SES (uet.pds.target.ses_extension_missing)
        try:
            r = self.on_deliver(new_delivery(src, _MODE_RUDI, 0, pid, nh, data[8:end], data[end:], ecn, bool(retx)))
        except SesNack:
            self._send_nack(src, _NC_NO_SES_MSG_AVAIL, pid, 0, 0, nfl, now, entropy=entropy)
            return
        if r is None:
            rnh, resp = 4, default_response(data[8:end], nh, len(data) - end)
        else:
            rnh, resp, _g = normalize_response(r)
        rfl = (int(RudiFlag.M) if ecn == 3 else 0) | (int(RudiFlag.RETX) if retx else 0)
        ent = self.config.control_entropy if entropy is None else entropy
        self._out.append((RUDI.encode((_P_RUDI_RESP, rnh, rfl, pid)) + resp, src, ent))
        self._count("rudi_delivered")

    def _rx_rudi_response(self, data: bytes, src: str, now: int, nh: int) -> None:
        if len(data) < _RUDI_LEN:
            self._drop("short_rudi", now, src)
            return
        pid = RUDI.unpack(data)[3]
        pkt = self._rudi_out.get(pid)
        if pkt is None or pkt.peer != src:
            self._drop("rudi_late_response", now, src)
            return
        self._rudi_done(pkt)
        self._rudi_shift = 0
        self._events.append(new_acked(pkt.token, nh, data[8:] if nh else b""))
        self._count("rudi_acked")
        if self._log is not None:
            self._log({"t": now, "ev": "ack", "peer": src, "pdc": 0, "psn": pid, "type": "RUDI"})
        if self._rudi_wait:
            self._rudi_flush(now)

    def _rudi_nack(self, src: str, code: int, pid: int, now: int) -> None:
        pkt = self._rudi_out.get(pid)
        if pkt is None or pkt.peer != src:
            self._drop("rudi_nack_unknown", now, src)
            return
        self._events.append(NackReceived(src, 0, code, pid))
        action = NACK_ACTION.get(code, _NA_IGNORE)
        if action == _NA_IGNORE:
            return
        shortage = _NC_NO_PDC_AVAIL <= code <= _NC_NO_RESOURCE
        if shortage and pkt.parked:
            self._count("nack_while_parked")  # it answers a copy sent before the wait began
            return
        pkt.nack_retries += 1
        if action != _NA_RETRANSMIT or pkt.nack_retries > self.config.max_nack_retx:
            self._rudi_done(pkt)
            self._events.append(Failed(pkt.token, f"nack {NackCode(code).name}", code))
            return
        if shortage:  # transient: resend after NACK_Retx_Time, doubling (as for PDCs, uet.pds.feedback)
            pkt.parked = now + (self._nack_retx_ns << min(pkt.nack_retries - 1, 6))
            self._rudi_parked += 1
            self._count("nack_parked")
            return
        self._rudi_send(pkt, now, True)

    def _rx_uud(self, data: bytes, src: str, now: int, nh: int, ecn: int, trimmed: bool) -> None:
        if trimmed:
            self._drop("uud_trimmed", now, src)
            return
        end = ses_end(data, 4, nh)
        if end is None:
            self._drop("ses_header", now, src)
            return
        try:
            self.on_deliver(new_delivery(src, _MODE_UUD, 0, 0, nh, data[4:end], data[end:], ecn, False))
        except SesNack:
            self._drop("uud_no_resource", now, src)
            return
        self._count("uud_delivered")
