"""Helpers for the TSS tests: one real plaintext per PDS packet type, and FEP pairs.

The plaintexts are built with the wire layouts (``uet.wire.pds``/``uet.wire.ses``), so the bit-flip
and replay tests seal the very bytes the PDS core will hand to the TSS.
"""

from __future__ import annotations

from uet.tss import SecureDomain, SecureDomainTable, TssConfig, TssContext
from uet.tss.domain import KeySlot
from uet.wire import pds, ses
from uet.wire.pds import AckFlag, ControlType, NackCode, NextHeader, PdsType, ReqFlag

A_IP = "10.0.0.1"
B_IP = "10.0.0.2"
PAYLOAD = bytes(range(16))


def slot(sd: SecureDomain, an: int) -> KeySlot:
    """Key slot ``an`` of ``sd``, which must hold one."""
    ks = sd.slots[an]
    assert ks is not None, f"no key in slot {an}"
    return ks


def _std() -> bytes:
    layout = ses.STANDARD[(1, "none")]
    return layout.encode(
        layout.make(
            opcode=ses.SesOpcode.SEND,
            flags=ses.SesFlag.SOM | ses.SesFlag.EOM,
            message_id=9,
            job_id=0x1234,
            pid_on_fep=3,
            request_length=len(PAYLOAD),
            initiator=7,
            match_bits=0xAB,
        )
    )


def _small() -> bytes:
    return ses.SMALL.encode(ses.SMALL.make(request_length=len(PAYLOAD), job_id=0x1234, buffer_offset=64))


def _response() -> bytes:
    return ses.RESPONSE.encode(ses.RESPONSE.make(message_id=9, job_id=0x1234, modified_length=16))


def plaintexts() -> dict[str, bytes]:
    """A plaintext (PDS ‖ SES ‖ payload) for every PDS packet type, keyed by a readable name."""
    req = pds.REQUEST
    syn = pds.REQUEST_SYN
    cc = pds.CC_REQUEST
    out = {
        "rud_req": req.encode(req.make(psn=1000, spdcid=1, dpdcid=2)) + _std() + PAYLOAD,
        "rod_req_syn": syn.encode(syn.make(type=PdsType.ROD_REQ, psn=70000, spdcid=1, psn_offset=0)) + _std() + PAYLOAD,
        "rudi_req": pds.RUDI.encode(pds.RUDI.make(pkt_id=42, next_hdr=NextHeader.SMALL)) + _small() + PAYLOAD,
        "rudi_resp": pds.RUDI.encode(pds.RUDI.make(type=PdsType.RUDI_RESP, pkt_id=42, next_hdr=NextHeader.RESPONSE))
        + _response(),
        "uud_req": pds.UUD.encode(pds.UUD.make(next_hdr=NextHeader.SMALL)) + _small() + PAYLOAD,
        "ack": pds.ACK.encode(pds.ACK.make(cack_psn=1000, spdcid=2, dpdcid=1, next_hdr=NextHeader.RESPONSE))
        + _response(),
        "ack_cc": (lambda lay: lay.encode(lay.make(cack_psn=1000, spdcid=2, dpdcid=1, sack_bitmap=0xF0)))(
            pds.ACK_CC[(False, "nscc")]
        ),
        "ack_ccx": (lambda lay: lay.encode(lay.make(cack_psn=1000, spdcid=2, dpdcid=1, ack_ccx_state=5)))(
            pds.ACK_CCX[(False, "raw")]
        ),
        "ack_epsn": pds.ACK_EPSN.encode(pds.ACK_EPSN.make(flags=AckFlag.EPSN, cack_psn=5, expected_psn=77)),
        "nack": pds.NACK.encode(pds.NACK.make(nack_code=NackCode.NEW_START_PSN, nack_psn=1, payload=65536)),
        "nack_ccx": pds.NACK_CCX.encode(pds.NACK_CCX.make(nack_code=NackCode.TRIMMED, nack_psn=3)),
        "control": pds.CONTROL.encode(pds.CONTROL.make(ctl_type=ControlType.ACK_REQ, psn=1000, spdcid=1, dpdcid=2)),
        "control_syn": pds.CONTROL_SYN.encode(
            pds.CONTROL_SYN.make(ctl_type=ControlType.NOOP, flags=ReqFlag.SYN, psn=1000, spdcid=1)
        ),
        "rud_cc_req": cc.encode(cc.make(psn=1001, spdcid=1, dpdcid=2, ccc_id=4, credit_target=100)) + _std() + PAYLOAD,
        "rod_cc_req": cc.encode(
            cc.make(type=PdsType.ROD_CC_REQ, psn=1001, spdcid=1, dpdcid=2, next_hdr=NextHeader.SMALL)
        )
        + _small()
        + PAYLOAD,
    }
    return out


def pair(
    sd: SecureDomain, config: TssConfig | None = None, *, a_ssi: int | None = None, b_ssi: int | None = None
) -> tuple[TssContext, TssContext]:
    """Two FEPs (A at 10.0.0.1, B at 10.0.0.2), each with its own copy of ``sd``."""
    a_sd = sd.provision(**({"ssi": a_ssi} if a_ssi is not None else {}))
    b_sd = sd.provision(**({"ssi": b_ssi} if b_ssi is not None else {}))
    return (
        TssContext(SecureDomainTable([a_sd]), A_IP, config),
        TssContext(SecureDomainTable([b_sd]), B_IP, config),
    )
