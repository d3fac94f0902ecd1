"""The CRC-32C trailer of unencrypted packets (``--data-protect crc``; wire-format.md §1.4,
behaviour.md §2.16): the target checks it on every packet and drops a packet whose trailer is
wrong or missing without a reply; its own packets carry a valid one (the session checks every
reply, :mod:`uet.conformance.session`). Skipped for a target without the trailer."""

from __future__ import annotations

from uet.conformance.case import case
from uet.conformance.cases._util import OP, check, need_region, opened, read_back
from uet.conformance.session import Session, Skipped
from uet.conformance.wirekit import Reply, ses_standard
from uet.wire import crc
from uet.wire import pds as P

A = "crc"


def _need(s: Session) -> None:
    if not s.target.crc:
        raise Skipped("the target does not use the CRC-32C trailer (--data-protect crc)")


def _dropped(s: Session, how: str) -> None:
    _need(s)
    reg = need_region(s, "rwa")
    p = opened(s)
    off = 2560
    before = read_back(s, p, reg.key, off, 8)
    plain = p.header() + ses_standard(  # the PSN stays next: the dropped packet was never received
        s.ses(opcode=OP.WRITE, match_bits=reg.key, buffer_offset=off), bytes(b ^ 0x3C for b in before)
    )
    good = crc.append_trailer(plain, s.trailer_prefix(outgoing=True, uet_len=len(plain)))
    wire = good[:-1] + bytes([good[-1] ^ 0x01]) if how == "corrupt" else plain
    s.send_raw(wire, plain, trailer=False)
    psn = p.next_psn

    def names_it(r: Reply) -> bool:
        if not p.mine(r):
            return False
        if r.is_nack:
            return bool(r.pds.nack_psn == psn)
        return r.is_ack and (r.ack_psn == psn or not P.psn_after(psn, r.pds.cack_psn))

    s.assert_silent(names_it, f"no ACK or NACK for a request whose CRC trailer is {how}")
    check(read_back(s, p, reg.key, off, 8) == before, "the dropped WRITE did not land")


@case("CRC-001", A, "a request whose CRC-32C trailer is wrong is dropped without a reply", "wire-format.md §1.4",
      hostile=True)  # fmt: skip
def _corrupt(s: Session) -> None:
    _dropped(s, "corrupt")


@case("CRC-002", A, "a request without its CRC-32C trailer is dropped without a reply", "wire-format.md §1.4",
      hostile=True)  # fmt: skip
def _missing(s: Session) -> None:
    _dropped(s, "missing")


@case("CRC-003", A, "every reply carries a valid CRC-32C trailer", "wire-format.md §1.4")
def _replies(s: Session) -> None:
    _need(s)
    p = opened(s)
    p.exchange(ses_standard(s.ses(opcode=OP.NO_OP)))
    bad = [b for d, b in s.log if d == "received (bad CRC trailer)"]
    check(not bad, "no reply with a wrong or missing trailer", bad[0].hex() if bad else "")
