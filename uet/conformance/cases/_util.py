"""Small helpers the case modules share: verdicts and preconditions."""

from __future__ import annotations

from typing import Any

from uet.conformance.session import CheckFailed, Pdc, Region, Session, Skipped
from uet.conformance.wirekit import Reply, ses_standard
from uet.wire import pds as P
from uet.wire import ses as S

RC = S.ReturnCode
OP = S.SesOpcode
NC = P.NackCode
CT = P.ControlType
F = S.SesFlag
SOM_EOM_REL = F.SOM | F.EOM | F.REL


def check(cond: bool, expected: str, got: Reply | str | None = None) -> None:
    """Fail the case with ``expected`` (and what was seen) unless ``cond``."""
    if not cond:
        raise CheckFailed(expected, got.describe() if isinstance(got, Reply) else (got or ""))


def ack_psn(r: Reply) -> int:
    """The ACK PSN of ``r``; fails the case when ``r`` is not an ACK naming one (§5.3)."""
    psn = r.ack_psn
    if psn is None:
        raise CheckFailed("an ACK naming a PSN", r.describe())
    return psn


def peer_pdcid(p: Pdc) -> int:
    """The target's PDCID of the established PDC ``p`` (learnt from its first ACK)."""
    if p.dpdcid is None:
        raise CheckFailed("an established PDC (the target's PDCID known)", "no ACK named it")
    return p.dpdcid


def rc_name(rc: int | None) -> str:
    if rc is None:
        return "no SES response"
    return RC(rc).name if rc in RC._value2member_map_ else f"{rc:#x}"


def response(r: Reply) -> Any:
    """The SES response ``r`` carries; fails the case when it carries none (§6.9)."""
    if r.ses is None:
        raise CheckFailed("a SES response in the reply", r.describe())
    return r.ses


def expect_rc(r: Reply, rc: int, what: str = "") -> Reply:
    """The reply is an ACK carrying a SES response with return code ``rc`` (§6.9)."""
    check(r.is_ack, f"an ACK carrying a SES response {rc_name(rc)}{what}", r)
    check(r.ses is not None, f"a SES response {rc_name(rc)} in the ACK{what}", r)
    check(r.rc == rc, f"return code {rc_name(rc)}{what}, got {rc_name(r.rc)}", r)
    return r


def expect_ok(r: Reply, what: str = "") -> Reply:
    """Success: an ACK carrying a SES response that says OK (or NULL, a PDS-regenerated default
    response). The tester sends its requests one at a time and judges the ACK naming the request's
    own PSN, so that ACK is the one the target's SES answered with (§6.9 target rules: success
    without data is a DEFAULT_RESPONSE with RC_OK); implicit success by a later CACK (§6.9
    initiator rules) never applies to it. An ACK with no SES response at all is what a target
    without a SES would send, and fails."""
    check(r.is_ack, f"an ACK (success){what}", r)
    check(r.ses is not None, f"a SES response (success) in the ACK{what}", r)
    check(r.rc in (RC.OK, RC.NULL), f"success (OK / NULL){what}, got {rc_name(r.rc)}", r)
    return r


def expect_no_error(r: Reply, what: str = "") -> Reply:
    """The ACK of a packet that does not end its message: no error, and a SES response only if
    the target sends one per packet (the reference answers the message's last packet; §6.9)."""
    check(r.is_ack, f"an ACK{what}", r)
    check(r.rc in (None, RC.OK, RC.NULL), f"no error{what}, got {rc_name(r.rc)}", r)
    return r


def need_region(s: Session, rights: str, *, job: str = "own", min_size: int = 64) -> Region:
    r = s.target.region(rights, job=job)
    if r is None or r.size < min_size:
        who = {"own": "the target's job", "other": "another job", "any": "any job"}[job]
        raise Skipped(f"no memory region with rights '{rights}' for {who} (give --region KEY:SIZE:{rights})")
    return r


def opened(s: Session, **kw: Any) -> Pdc:
    """A PDC established with a zero-length SEND (its ACK names the target's PDCID)."""
    p = Pdc(s, **kw)
    p.open()
    return p


def op(s: Session, pdc: Pdc | None, opcode: int, payload: bytes = b"", ext: bytes = b"", **kw: Any) -> Reply:
    """One single-packet SES request on ``pdc`` (a fresh one when None); returns the ACK/NACK."""
    p = pdc if pdc is not None else opened(s)
    return p.exchange(ses_standard(s.ses(opcode=opcode, **kw), payload, ext))


def read_back(s: Session, pdc: Pdc, key: int, offset: int, length: int) -> bytes:
    """READ ``length`` bytes at ``offset`` of region ``key`` (data in the ACK for small reads, §6.5)."""
    r = op(s, pdc, OP.READ, match_bits=key, buffer_offset=offset, request_length=length)
    expect_rc(r, RC.OK, " for the READ used to check the region")
    check(len(r.data) >= length, f"{length} bytes of read data in the ACK", r)
    return r.data[:length]


def pattern(offset: int, length: int) -> bytes:
    """uet-peer's initial region contents: each 8-byte word holds its own offset (big-endian)."""
    out = bytearray()
    base = offset - offset % 8
    while len(out) < (offset - base) + length:
        out += (base + len(out)).to_bytes(8, "big")
    return bytes(out[offset - base : offset - base + length])
