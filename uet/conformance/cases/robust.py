"""Robustness: truncated, oversized and malformed packets never stop the target (architecture.md
"Principles" 5; behaviour.md §2.6; wire-format.md §12.4). Every case is hostile: the runner sends
a liveness probe after it and fails the case if the target no longer answers. Where the spec
prescribes an answer (or silence) the case checks that too."""

from __future__ import annotations

from collections.abc import Callable

from uet.conformance.case import case
from uet.conformance.cases._util import CT, OP, check, opened, peer_pdcid
from uet.conformance.session import Session
from uet.conformance.wirekit import control, request, ses_standard
from uet.wire import pds as P

A = "robust"
_n = iter(range(1, 1000))


def _garbage(title: str, make: Callable[[Session], bytes], section: str = "wire-format.md §12.4") -> None:
    @case(f"ROB-{next(_n):03d}", A, title, section, hostile=True)
    def _t(s: Session) -> None:
        s.send(make(s))

    return None


def _syn(s: Session, ses: bytes = b"", *, next_hdr: int = P.NextHeader.STANDARD, ar: bool = True) -> bytes:
    return request(psn=s.new_start_psn(), spdcid=s.new_pdcid(), syn=True, next_hdr=next_hdr, ar=ar) + ses


_garbage("an empty datagram", lambda s: b"")
_garbage("a one-byte datagram", lambda s: b"\x10")
_garbage("a PDS prologue alone (2 bytes, RUD request type)", lambda s: b"\x11\x8c")
_garbage("a RUD request header cut at 11 bytes", lambda s: _syn(s)[:11])
_garbage("a SYN request whose SES header is cut at 20 bytes", lambda s: _syn(s, ses_standard(s.ses())[:20]))
_garbage("a SYN request with no SES header at all", lambda s: _syn(s))
_garbage("reserved PDS type 0", lambda s: bytes(16))
_garbage("unassigned PDS type 0x0F", lambda s: bytes([0x0F << 3, 0]) + bytes(30))
_garbage("unassigned PDS type 0x1F", lambda s: bytes([0x1F << 3, 0x80]) + bytes(30))
_garbage("a SYN request with reserved next_hdr 7", lambda s: _syn(s, bytes(44), next_hdr=7))
_garbage("a SYN request with reserved next_hdr 15", lambda s: _syn(s, bytes(44), next_hdr=15))
_garbage("a 60 000-byte datagram of random bytes", lambda s: s.rng.randbytes(60000))
_garbage("a SYN request carrying 60 000 bytes of payload", lambda s: _syn(s, ses_standard(s.ses(), bytes(60000))))
_garbage("a SEND claiming request_length 2^32 − 1 with 8 bytes", lambda s: _syn(
    s, ses_standard(s.ses(request_length=0xFFFFFFFF, flags=0x09), bytes(8))))  # fmt: skip
_garbage("an ACK cut at 10 bytes", lambda s: P.ACK.encode(P.ACK.make(spdcid=1, dpdcid=2))[:10])
_garbage("an ACK_CC cut inside its SACK bitmap", lambda s: P.ACK_CC[(False, "nscc")].encode(
    P.ACK_CC[(False, "nscc")].make(spdcid=1, dpdcid=s.unused_dpdcid()))[:20])  # fmt: skip
_garbage("a NACK cut at 12 bytes", lambda s: P.NACK.encode(P.NACK.make(nack_code=1, spdcid=1, dpdcid=2))[:12])
_garbage("a control packet cut at 8 bytes", lambda s: control(CT.PROBE, spdcid=1, dpdcid=2)[:8])
_garbage("a RUDI request cut at 6 bytes", lambda s: bytes([0x04 << 3 | 1, 0x80, 0, 0, 0, 1]))
_garbage("a UUD request with a truncated SES header", lambda s: bytes([0x06 << 3 | 1, 0x80, 0, 0]) + bytes(10))
_garbage("a TSS-typed header on a datagram of 12 bytes", lambda s: bytes([0x08, 0, 0, 1]) + bytes(8))
_garbage("1 500 random bytes", lambda s: s.rng.randbytes(1500))
_garbage("random bytes behind a valid RUD SYN prologue", lambda s: b"\x11\x8c" + s.rng.randbytes(200))
_garbage("an atomic request without its extension header", lambda s: _syn(s, ses_standard(s.ses(opcode=OP.ATOMIC))))
_garbage("a rendezvous send with a truncated rendezvous extension", lambda s: _syn(
    s, ses_standard(s.ses(opcode=OP.RENDEZVOUS_SEND), ext=bytes(10))))  # fmt: skip


@case(f"ROB-{next(_n):03d}", A, "NACKs of every code for a PDC that does not exist are ignored (no reply)",
      "behaviour.md §2.10", hostile=True)  # fmt: skip
def _orphan_nacks(s: Session) -> None:
    mine = s.new_pdcid()
    for code in P.NackCode:
        s.send(P.NACK.encode(P.NACK.make(nack_code=code, nack_psn=1, spdcid=mine, dpdcid=s.unused_dpdcid())))
    s.assert_silent(lambda r: r.pds is not None and getattr(r.pds, "dpdcid", None) == mine,
                    "no reply to NACKs for unknown PDCs (a reply could start a NACK storm)")  # fmt: skip


@case(f"ROB-{next(_n):03d}", A, "ACKs for a PDC that does not exist are ignored (no reply)", "behaviour.md §2.8",
      hostile=True)  # fmt: skip
def _orphan_acks(s: Session) -> None:
    mine = s.new_pdcid()
    for k in range(8):
        s.send(P.ACK.encode(P.ACK.make(cack_psn=k * 1000, spdcid=mine, dpdcid=s.unused_dpdcid())))
    s.assert_silent(lambda r: r.pds is not None and getattr(r.pds, "dpdcid", None) == mine, "no reply to stray ACKs")


@case(f"ROB-{next(_n):03d}", A, "an ACK naming a live target PDC but a wrong PSN is ignored; the PDC keeps working",
      "behaviour.md §2.8", hostile=True)  # fmt: skip
def _stray_ack_live(s: Session) -> None:
    p = opened(s)
    s.send(P.ACK.encode(P.ACK.make(cack_psn=p.start + 99, spdcid=p.spdcid, dpdcid=peer_pdcid(p))))
    psn = p.send(ses_standard(s.ses(opcode=OP.NO_OP)))
    r = p.ack_for(psn)
    check(r.pds.cack_psn == psn, f"CACK = {psn:#x}", r)


#: how many ``--timeout``s (at least seconds) a target may take to answer after a burst: working
#: through 100-200 datagrams on a loaded host is slow, not wrong (the liveness probe still judges it)
_BACKLOG = 10


@case(f"ROB-{next(_n):03d}", A, "a burst of 200 malformed datagrams does not stop the target", "wire-format.md §12.4",
      hostile=True)  # fmt: skip
def _burst(s: Session) -> None:
    for _ in range(200):
        k = s.rng.randrange(3)
        if k == 0:
            s.send(s.rng.randbytes(s.rng.randrange(0, 64)))
        elif k == 1:
            s.send(_syn(s, ses_standard(s.ses()))[: s.rng.randrange(1, 56)])
        else:
            b = bytearray(_syn(s, ses_standard(s.ses(), b"payload")))
            b[s.rng.randrange(len(b))] ^= 1 << s.rng.randrange(8)
            s.send(bytes(b))
    s.assert_alive(_BACKLOG * max(1.0, s.timeout))


@case(f"ROB-{next(_n):03d}", A, "a flood of SYNs from one address opens PDCs without stopping the target",
      "behaviour.md §2.2", hostile=True)  # fmt: skip
def _syn_flood(s: Session) -> None:
    for _ in range(100):
        s.send(_syn(s, ses_standard(s.ses(opcode=OP.NO_OP)), ar=False))
    s.assert_alive(_BACKLOG * max(1.0, s.timeout))
