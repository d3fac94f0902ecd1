"""TEST-ONLY fault injection for ``uet-peer --fault NAME``: proof that the suite can fail.

Each fault makes the project's own endpoint break one rule the conformance cases check, with the
least intrusion into the protocol cores: all but one are an *outgoing-packet rewriter* —
:class:`FaultLink` sits between the endpoint and its wire link and edits the plaintext datagrams
the endpoint sends (PDS header onward) — so no core carries test-only code. ``answer-replay`` is a
configuration: it turns off the TSS receive replay window (``TssConfig.replay_window = 0``, which
is also the reference provider's behaviour, behaviour.md §5.6).

Never use a fault outside tests: a faulty peer violates the specification on purpose.
"""

from __future__ import annotations

from collections.abc import Callable

from uet.link.base import Link, ReceiveCallback, WrappedLink
from uet.wire import pds as P
from uet.wire import ses as S

__all__ = ["FAULTS", "FaultLink"]


def _nack_code(d: bytearray) -> bool:
    if d[0] >> 3 in (P.PdsType.NACK, P.PdsType.NACK_CCX) and len(d) >= 4:
        d[2] ^= 0x01  # INV_DPDCID <-> PDC_HDR_MISMATCH, PSN_OOR_WINDOW -> NO_RESOURCE, ...
        return True
    return False


def _sack(d: bytearray) -> bool:
    if d[0] >> 3 in (P.PdsType.ACK_CC, P.PdsType.ACK_CCX) and len(d) >= 24:
        d[16:24] = bytes(8)
        return True
    return False


def _response(d: bytearray) -> int | None:
    """Offset of the SES response header an ACK carries, or None."""
    t = d[0] >> 3
    nh = (int.from_bytes(d[0:2], "big") >> 7) & 0xF
    if nh not in (P.NextHeader.RESPONSE, P.NextHeader.RESPONSE_DATA):
        return None
    off = {int(P.PdsType.ACK): 12, P.PdsType.ACK_CC: 32, P.PdsType.ACK_CCX: 40, P.PdsType.RUDI_RESP: 8}.get(t)
    if off is None:
        return None
    if t == P.PdsType.ACK and d[1] & P.AckFlag.EPSN:
        off += 4
    return off if len(d) >= off + 12 else None


def _accept_bad_mkey(d: bytearray) -> bool:
    off = _response(d)
    if off is not None and d[off + 1] & 0x3F == S.ReturnCode.BAD_MKEY:
        d[off + 1] = (d[off + 1] & 0xC0) | S.ReturnCode.OK
        return True
    return False


def _ack_psn(d: bytearray) -> bool:
    if d[0] >> 3 in (P.PdsType.ACK, P.PdsType.ACK_CC, P.PdsType.ACK_CCX) and not d[1] & P.AckFlag.P:
        v = (int.from_bytes(d[2:4], "big") + 1) & 0xFFFF
        d[2:4] = v.to_bytes(2, "big")
        return True
    return False


def _probe_echo(d: bytearray) -> bool:
    if d[0] >> 3 in (P.PdsType.ACK, P.PdsType.ACK_CC, P.PdsType.ACK_CCX) and d[1] & P.AckFlag.P:
        d[2:4] = (int.from_bytes(d[2:4], "big") ^ 0xFFFF).to_bytes(2, "big")
        return True
    return False


def _no_req_clear(d: bytearray) -> bool:
    if d[0] >> 3 in (P.PdsType.ACK, P.PdsType.ACK_CC, P.PdsType.ACK_CCX) and d[1] & P.AckFlag.REQ_CLEAR:
        d[1] &= 0xFF ^ int(P.AckFlag.REQ_CLEAR)  # byte 1 also holds next_hdr's low bit
        return True
    return False


def _rudi_pkt_id(d: bytearray) -> bool:
    if d[0] >> 3 == P.PdsType.RUDI_RESP and len(d) >= 8:
        d[7] ^= 0x01
        return True
    return False


def _job_echo(d: bytearray) -> bool:
    off = _response(d)
    if off is not None:
        d[off + 7] ^= 0x01  # low bit of the echoed JobID
        return True
    return False


def _no_retx(d: bytearray) -> bool:
    """The initiator side: retransmitted requests go out without RETX (behaviour.md §2.9)."""
    if d[0] >> 3 in (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ, P.PdsType.RUD_CC_REQ, P.PdsType.ROD_CC_REQ) and d[1] & 0x10:
        d[1] &= ~0x10 & 0xFF
        return True
    return False


#: fault name -> (rewriter of one outgoing datagram, or None for a configuration fault; description)
FAULTS: dict[str, tuple[Callable[[bytearray], bool] | None, str]] = {
    "wrong-nack-code": (_nack_code, "flip the low bit of every NACK code"),
    "no-sack-bits": (_sack, "send every ACK_CC with an empty SACK bitmap"),
    "accept-bad-mkey": (_accept_bad_mkey, "report OK instead of BAD_MKEY"),
    "ack-psn-off-by-one": (_ack_psn, "name the wrong request in every ACK (ack_psn_offset + 1)"),
    "no-probe-echo": (_probe_echo, "answer a PROBE without its opaque value"),
    "no-req-clear": (_no_req_clear, "never ask for a CLEAR (REQ_CLEAR flag dropped)"),
    "rudi-wrong-pkt-id": (_rudi_pkt_id, "answer RUDI requests with another packet id"),
    "wrong-job-echo": (_job_echo, "echo another JobID in SES responses"),
    "no-retx-flag": (_no_retx, "initiator side: retransmit requests without the RETX flag"),
    "answer-replay": (None, "TSS: no receive replay window, replayed packets reach the PDS"),
}


class FaultLink(WrappedLink):
    """A link that rewrites what the endpoint sends (module docstring); counts rewrites."""

    def __init__(self, inner: Link, faults: list[str]) -> None:
        unknown = [f for f in faults if f not in FAULTS]
        if unknown:
            raise ValueError(f"unknown fault(s) {unknown}; known: {sorted(FAULTS)}")
        super().__init__(inner)
        self._rewriters = [rw for f in faults if (rw := FAULTS[f][0]) is not None]
        self.rewritten = 0

    @property
    def counters(self) -> dict[str, int]:  # type: ignore[override]
        return {**self.inner.counters, "fault_rewritten": self.rewritten}

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        if self._rewriters:
            d = bytearray(datagram)
            hit = False
            for rw in self._rewriters:
                hit = rw(d) or hit
            if hit:
                self.rewritten += 1
                datagram = bytes(d)
        self.inner.send(datagram, dst, entropy, dscp, ecn)

    def set_receiver(self, callback: ReceiveCallback) -> None:
        self.inner.set_receiver(callback)
