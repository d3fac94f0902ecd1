"""A raw-UDP responder that knows no SES: a test fixture for the conformance suite (issue 24).

It answers at the PDS level only, the way a broken stack might: every RUD/ROD request gets an
ACK naming its PSN (CACK = that PSN), with no SES response; a RUDI request gets a RUDI response
with its packet id and nothing else; a control packet for a PDC it never assigned gets NACK
``INV_DPDCID`` (so the tester's liveness probe is answered), a CLOSE an ACK. It never reads a SES
header, never touches memory, never delivers anything. Every SES case must fail against it.
"""

from __future__ import annotations

import socket
import threading

from uet.wire import pds as P

M32 = 0xFFFFFFFF
_REQUESTS = (P.PdsType.RUD_REQ, P.PdsType.ROD_REQ, P.PdsType.RUD_CC_REQ, P.PdsType.ROD_CC_REQ)


class RawResponder:
    """Serves on ``(address, port)`` from a daemon thread until :meth:`close`."""

    def __init__(self, address: str, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((address, port))
        self.sock.settimeout(0.2)
        self.pdcs: dict[tuple[str, int], int] = {}  # (peer, its PDCID) -> ours
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, src = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            reply = self.answer(data, src[0])
            if reply is not None:
                self.sock.sendto(reply, src)

    def answer(self, data: bytes, peer: str) -> bytes | None:
        if len(data) < 12:
            return None
        t = data[0] >> 3
        if t in _REQUESTS:
            h = (P.REQUEST_SYN if data[1] & P.ReqFlag.SYN else P.REQUEST).decode(data)
            ours = self.pdcs.setdefault((peer, h.spdcid), 0x100 + len(self.pdcs))
            return P.ACK.encode(P.ACK.make(ack_psn_offset=0, cack_psn=h.psn, spdcid=ours, dpdcid=h.spdcid))
        if t == P.PdsType.RUDI_REQ:
            h = P.RUDI.decode(data)
            return P.RUDI.encode(P.RUDI.make(type=P.PdsType.RUDI_RESP, next_hdr=0, flags=0, pkt_id=h.pkt_id))
        if t == P.PdsType.CONTROL and not data[1] & P.ReqFlag.SYN:
            h = P.CONTROL.decode(data)
            if h.dpdcid in self.pdcs.values():
                return P.ACK.encode(P.ACK.make(ack_psn_offset=0, cack_psn=h.psn, spdcid=h.dpdcid, dpdcid=h.spdcid))
            nack = P.NACK.make(nack_code=P.NackCode.INV_DPDCID, vendor_code=0, nack_psn=h.psn, spdcid=0,
                               dpdcid=h.spdcid, payload=0)  # fmt: skip
            return P.NACK.encode(nack)
        return None
