"""Hand-built packets and decoded replies for the conformance suite (wire-format.md §4–§11).

Every packet the tester sends is assembled here from the project's one declaration per header
(:mod:`uet.wire.pds`, :mod:`uet.wire.ses`), field by field, so a case states exactly which bits it
sets. Replies are decoded into :class:`Reply`: the PDS header as a named tuple, the SES header
(when ``next_hdr`` names one) and the bytes after them. A reply that does not decode is kept as
raw bytes with the reason, so a case can report it instead of crashing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uet.errors import UetError
from uet.wire import pds as P
from uet.wire import ses as S

__all__ = [
    "Reply",
    "SesFields",
    "control",
    "decode_reply",
    "request",
    "rudi",
    "ses_standard",
    "ses_small",
    "ses_medium",
    "uud",
]

M32 = 0xFFFFFFFF


@dataclass
class SesFields:
    """The SES request fields a case sets (defaults: a single-packet SEND addressed relatively)."""

    opcode: int = S.SesOpcode.SEND
    flags: int = S.SesFlag.SOM | S.SesFlag.EOM | S.SesFlag.REL
    message_id: int = 1
    job: int = 0
    pid: int = 0
    ri: int = 0
    generation: int = 0
    buffer_offset: int = 0
    initiator: int = 0
    match_bits: int = 0
    header_data: int = 0
    request_length: int | None = None  # None: the payload length
    payload_length: int = 0  # SOM = 0 only
    message_offset: int = 0  # SOM = 0 only
    src_token: int = 0
    dst_token: int = 0
    version: int = 0


def ses_standard(f: SesFields, payload: bytes = b"", ext: bytes = b"") -> bytes:
    """A standard SES request header (§8.2) ‖ extension ‖ payload."""
    som = 1 if f.flags & S.SesFlag.SOM else 0
    tok = (
        "buffer" if f.opcode in S.DEFERRABLE_OPCODES else "match" if f.opcode == S.SesOpcode.DEFERRABLE_RTR else "none"
    )
    lay = S.STANDARD[(som, tok)]
    kw: dict[str, Any] = dict(
        opcode=f.opcode,
        version=f.version,
        flags=f.flags,
        message_id=f.message_id,
        ri_generation=f.generation,
        job_id=f.job,
        pid_on_fep=f.pid,
        resource_index=f.ri,
        initiator=f.initiator,
        request_length=len(payload) if f.request_length is None else f.request_length,
    )
    if tok == "buffer":
        kw.update(src_restart_token=f.src_token, dst_restart_token=f.dst_token, match_bits=f.match_bits)
    elif tok == "match":
        kw.update(buffer_offset=f.buffer_offset, src_restart_token=f.src_token, dst_restart_token=f.dst_token)
    else:
        kw.update(buffer_offset=f.buffer_offset, match_bits=f.match_bits)
    if som:
        kw["header_data"] = f.header_data
    else:
        kw.update(payload_length=f.payload_length, message_offset=f.message_offset)
    return lay.encode(lay.make(**kw)) + ext + payload


def ses_small(f: SesFields, payload: bytes = b"") -> bytes:
    """A small (optimized non-matching) SES request (§8.3) ‖ payload."""
    h = S.SMALL.make(
        opcode=f.opcode, version=f.version, flags=f.flags,
        request_length=len(payload) if f.request_length is None else f.request_length,
        ri_generation=f.generation, job_id=f.job, pid_on_fep=f.pid, resource_index=f.ri,
        buffer_offset=f.buffer_offset,
    )  # fmt: skip
    return S.SMALL.encode(h) + payload


def ses_medium(f: SesFields, payload: bytes = b"") -> bytes:
    """A medium SES request, HD = 0 (§8.4) ‖ payload."""
    h = S.MEDIUM.make(
        opcode=f.opcode, version=f.version, flags=f.flags,
        request_length=len(payload) if f.request_length is None else f.request_length,
        ri_generation=f.generation, job_id=f.job, pid_on_fep=f.pid, resource_index=f.ri,
        buffer_offset=f.buffer_offset, initiator=f.initiator, match_bits=f.match_bits,
    )  # fmt: skip
    return S.MEDIUM.encode(h) + payload


def request(
    *,
    psn: int,
    spdcid: int,
    dpdcid: int = 0,
    syn: bool = False,
    psn_offset: int = 0,
    ar: bool = True,
    retx: bool = False,
    rod: bool = False,
    clear_psn_offset: int = -1,
    next_hdr: int = P.NextHeader.STANDARD,
    ptype: int | None = None,
    extra_flags: int = 0,
    cc: tuple[int, int] | None = None,
) -> bytes:
    """A RUD/ROD request header (§5.1): the SYN form (pdc_info/psn_offset) when ``syn``; with
    ``cc = (ccc_id, credit_target)`` the RUD_CC / ROD_CC form (PDS types 13/14, §5.2) carrying
    that CC state after the PDCID word."""
    flags = (P.ReqFlag.SYN if syn else 0) | (P.ReqFlag.AR if ar else 0) | (P.ReqFlag.RETX if retx else 0)
    flags |= extra_flags
    t = ptype if ptype is not None else (P.PdsType.ROD_REQ if rod else P.PdsType.RUD_REQ)
    if cc is not None:
        t = P.PdsType.ROD_CC_REQ if rod else P.PdsType.RUD_CC_REQ
        lay = P.CC_REQUEST_SYN if syn else P.CC_REQUEST
        kw: dict[str, int] = {"use_rsv_pdc": 0, "psn_offset": psn_offset} if syn else {"dpdcid": dpdcid}
        return lay.encode(
            lay.make(
                type=t, next_hdr=next_hdr, flags=flags, clear_psn_offset=clear_psn_offset, psn=psn & M32,
                spdcid=spdcid, ccc_id=cc[0], credit_target=cc[1], **kw,
            )
        )  # fmt: skip
    if syn:
        return P.REQUEST_SYN.encode(
            P.REQUEST_SYN.make(
                type=t, next_hdr=next_hdr, flags=flags, clear_psn_offset=clear_psn_offset, psn=psn & M32,
                spdcid=spdcid, use_rsv_pdc=0, psn_offset=psn_offset,
            )
        )  # fmt: skip
    return P.REQUEST.encode(
        P.REQUEST.make(
            type=t, next_hdr=next_hdr, flags=flags, clear_psn_offset=clear_psn_offset, psn=psn & M32,
            spdcid=spdcid, dpdcid=dpdcid,
        )
    )  # fmt: skip


def control(
    ctl_type: int,
    *,
    psn: int = 0,
    spdcid: int,
    dpdcid: int,
    payload: int = 0,
    probe_opaque: int = 0,
    flags: int = 0,
) -> bytes:
    """A control packet (§5.8), SYN = 0."""
    return P.CONTROL.encode(
        P.CONTROL.make(
            ctl_type=ctl_type, flags=flags, probe_opaque=probe_opaque, psn=psn & M32, spdcid=spdcid, dpdcid=dpdcid,
            payload=payload & M32,
        )
    )  # fmt: skip


def rudi(pkt_id: int, *, response: bool = False, next_hdr: int = P.NextHeader.STANDARD, flags: int = 0) -> bytes:
    """A RUDI request (or response) header (§5.9)."""
    t = P.PdsType.RUDI_RESP if response else P.PdsType.RUDI_REQ
    return P.RUDI.encode(P.RUDI.make(type=t, next_hdr=next_hdr, flags=flags, pkt_id=pkt_id & M32))


def uud(next_hdr: int = P.NextHeader.STANDARD) -> bytes:
    """A UUD request header (§5.10)."""
    return P.UUD.encode(P.UUD.make(type=P.PdsType.UUD_REQ, next_hdr=next_hdr, flags=0))


@dataclass
class Reply:
    """One datagram received from the target, decoded as far as it goes."""

    raw: bytes
    ptype: int = -1
    pds: Any = None
    ses: Any = None
    data: bytes = b""
    error: str | None = None
    #: when it arrived (the kernel's stamp, else when the tester read it), on the monotonic clock in
    #: seconds: intervals between replies, never a deadline (:meth:`uet.conformance.session.Session._recv`)
    at: float = 0.0

    @property
    def flags(self) -> int:
        return self.pds.flags if self.pds is not None else 0

    @property
    def is_ack(self) -> bool:
        return self.ptype in (P.PdsType.ACK, P.PdsType.ACK_CC, P.PdsType.ACK_CCX)

    @property
    def is_nack(self) -> bool:
        return self.ptype in (P.PdsType.NACK, P.PdsType.NACK_CCX)

    @property
    def is_control(self) -> bool:
        return self.ptype == P.PdsType.CONTROL

    @property
    def has_sack(self) -> bool:
        return self.ptype in (P.PdsType.ACK_CC, P.PdsType.ACK_CCX)

    @property
    def rc(self) -> int | None:
        """The SES return code carried, or None without a SES response."""
        return None if self.ses is None else self.ses.return_code

    @property
    def ack_psn(self) -> int | None:
        """ACK PSN (CACK + offset, §5.3) of a non-probe ACK."""
        if not self.is_ack or self.flags & P.AckFlag.P:
            return None
        return int(self.pds.cack_psn + self.pds.ack_psn_offset) & M32

    def sacked(self) -> list[int]:
        """PSNs set in the SACK bitmap (§5.4), empty without one."""
        if not self.has_sack:
            return []
        return P.sack_to_psns(P.sack_base(self.pds.cack_psn, self.pds.sack_psn_offset), self.pds.sack_bitmap)

    def describe(self) -> str:
        """A one-line summary for reports."""
        if self.error:
            return f"undecodable ({self.error}): {self.raw[:48].hex()}"
        name = P.PdsType(self.ptype).name if self.ptype in P.PdsType._value2member_map_ else f"type {self.ptype}"
        fields = ", ".join(f"{k}={v}" for k, v in self.pds._asdict().items() if k not in ("type",))
        out = f"{name}({fields})"
        if self.ses is not None:
            out += " + " + ", ".join(f"{k}={v}" for k, v in self.ses._asdict().items())
        return out


def decode_reply(raw: bytes) -> Reply:
    """Decode a plaintext datagram (PDS header onward) into a :class:`Reply`."""
    r = Reply(raw=bytes(raw))
    if len(raw) < 2:
        r.error = "shorter than a PDS prologue"
        return r
    r.ptype = raw[0] >> 3
    flags = raw[1] & 0x7F
    cc = raw[12] if len(raw) > 12 else None
    lay = P.pds_layout(r.ptype, flags, cc)
    if lay is None:
        r.error = f"reserved PDS type {r.ptype}"
        return r
    try:
        r.pds = lay.decode(raw)
    except (UetError, ValueError, IndexError) as e:
        r.error = f"{lay.name}: {e}"
        return r
    off = lay.size
    nh = getattr(r.pds, "next_hdr", None)
    if r.ptype != P.PdsType.CONTROL and nh:
        sl = S.ses_layout(nh, raw[off] if len(raw) > off else 0, raw[off + 1] if len(raw) > off + 1 else 0)
        if sl is not None and len(raw) >= off + sl.size:
            try:
                r.ses = sl.decode(raw, off)
                off += sl.size
            except (UetError, ValueError, IndexError) as e:
                r.error = f"{sl.name}: {e}"
    r.data = bytes(raw[off:])
    return r
