"""The built-in sample capture ``samples/uet-sample.pcap`` and the function that generates it.

The capture is a short, representative UET conversation between 10.0.0.1 (initiator) and
10.0.0.2 (target), built only with the project's own encoders (:mod:`uet.wire`) and frame
builders (:mod:`uet.wire.build`), so regenerating it is deterministic: fixed addresses, PSNs and
virtual timestamps (10 µs apart from 2023-11-14 22:13:20 UTC). ``uet-decode --sample`` decodes it,
and tests check that :func:`sample_capture` reproduces the committed file byte for byte. After
changing this module run ``python -m uet.interop.samples`` (or call :func:`regenerate`) and commit
the new file.

Contents, in order (see :data:`DESCRIPTIONS`): the wire-format.md §13 request and ACK; a
three-packet SEND (SOM / middle / EOM) with an ACK_CC carrying a SACK bitmap, a NACK TRIMMED, the
retransmission and the final ACK; a SYN exchange on a second, ROD CC PDC (medium tagged send);
control packets ACK_REQ, PROBE with its P-flag ACK, CLOSE with its ACK; RUDI request and response;
UUD over IPv6; a READ answered by an ACK with response-with-data; a fetching compare-and-swap
answered with a small response with data; a rendezvous send; a PFC pause frame; an ARP frame
(not UET); UET directly over IP (protocol 253); a TSS-protected packet; and one deliberately
malformed packet (a request whose SES header is cut short, with consistent IP/UDP lengths).

The TSS packet is really encrypted (AES-256-GCM, *direct* mode, behaviour.md §5.4–§5.5) with the
published test key :data:`SAMPLE_TSS_KEY`, SDI 1, AN 0, epoch 0, TSC 7. It is carried over IP with
the entropy header because that is where the AAD is fully defined (IP source ‖ IP destination ‖
entropy header ‖ TSS header); IV = IPv4 source ‖ epoch/TSC.
"""

from __future__ import annotations

import io
from importlib import resources
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from uet.pcap import PcapWriter
from uet.wire import pds, ses, tss
from uet.wire.build import build_ethernet, build_frame, build_ip_packet, build_pfc_frame
from uet.wire.layout import Layout
from uet.wire.net import Ecn
from uet.wire.pds import AckFlag, ControlType, NackCode, NextHeader, PdsType, ReqFlag
from uet.wire.ses import AmoOp, AmoType, ResponseOpcode, ReturnCode, SesFlag, SesOpcode

__all__ = [
    "SAMPLE_NAME",
    "SAMPLE_TSS_KEY",
    "DESCRIPTIONS",
    "sample_frames",
    "sample_capture",
    "load_sample",
    "regenerate",
]

SAMPLE_NAME = "uet-sample.pcap"
#: AES-256 key of secure domain 1 in the sample (a test key, published on purpose).
SAMPLE_TSS_KEY = bytes(range(32))

_A, _B = "10.0.0.1", "10.0.0.2"
_MAC_A, _MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
_T0 = 1_700_000_000 * 1_000_000_000
_STEP = 10_000  # 10 µs between frames
_ENT = 0x4242

SOM_EOM = SesFlag.SOM | SesFlag.EOM


def _h(layout: Layout, **fields: int) -> bytes:
    """One header from field values (the layout's defaults for the rest), range-checked."""
    v = layout.make(**fields)
    layout.check(v)
    return layout.encode(v)


def _std(som: int = 1, **fields: int) -> bytes:
    return _h(ses.STANDARD[(som, "none")], **fields)


def _fwd(uet: bytes, **kw: object) -> bytes:
    return build_frame(uet, _A, _B, entropy=kw.pop("entropy", _ENT), src_mac=_MAC_A, dst_mac=_MAC_B, **kw)  # type: ignore[arg-type]


def _rev(uet: bytes, **kw: object) -> bytes:
    return build_frame(uet, _B, _A, entropy=kw.pop("entropy", _ENT), src_mac=_MAC_B, dst_mac=_MAC_A, **kw)  # type: ignore[arg-type]


def _req(psn: int, *, flags: int = 0, nh: int = NextHeader.STANDARD, dpdcid: int = 2, cpo: int = -1) -> bytes:
    return _h(
        pds.REQUEST,
        type=PdsType.RUD_REQ,
        next_hdr=nh,
        flags=flags,
        clear_psn_offset=cpo,
        psn=psn,
        spdcid=1,
        dpdcid=dpdcid,
    )


def _ack(cack: int, *, nh: int = NextHeader.NONE, flags: int = 0, off: int = 0) -> bytes:
    return _h(pds.ACK, next_hdr=nh, flags=flags, ack_psn_offset=off, cack_psn=cack, spdcid=2, dpdcid=1)


def _ctl(ct: ControlType, psn: int, payload: int = 0, *, flags: int = 0, opaque: int = 0) -> bytes:
    return _h(pds.CONTROL, ctl_type=ct, flags=flags, probe_opaque=opaque, psn=psn, spdcid=1, dpdcid=2, payload=payload)


def _frames() -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    add = out.append
    job = dict(job_id=0x42, pid_on_fep=3)

    # §13.1 / §13.2: first packet on a new RUD PDC and its ACK with a response.
    syn = _h(pds.REQUEST_SYN, flags=ReqFlag.SYN | ReqFlag.AR, clear_psn_offset=-1, psn=4096, spdcid=1)
    add(
        (
            "§13 RUD request, SYN, SEND 'hello'",
            _fwd(syn + _std(opcode=SesOpcode.SEND, flags=SOM_EOM, message_id=1, request_length=5, **job) + b"hello"),
        )
    )
    resp = _h(
        ses.RESPONSE,
        opcode=ResponseOpcode.RESPONSE,
        return_code=ReturnCode.OK,
        message_id=1,
        job_id=0x42,
        modified_length=5,
    )
    add(("§13 ACK with RESPONSE OK", _rev(_ack(4096, nh=NextHeader.RESPONSE) + resp)))

    # A three-packet SEND (message 2, 192 bytes), the middle packet trimmed on the way.
    body = bytes(range(192))
    add(
        (
            "SEND message 2, SOM",
            _fwd(
                _req(4097)
                + _std(opcode=SesOpcode.SEND, flags=SesFlag.SOM, message_id=2, request_length=192, **job)
                + body[:64]
            ),
        )
    )
    mid = _std(
        0, opcode=SesOpcode.SEND, flags=0, message_id=2, payload_length=64, message_offset=64, request_length=192, **job
    )
    add(("SEND message 2, middle", _fwd(_req(4098) + mid + body[64:128])))
    eom = _std(
        0,
        opcode=SesOpcode.SEND,
        flags=SesFlag.EOM,
        message_id=2,
        payload_length=64,
        message_offset=128,
        request_length=192,
        **job,
    )
    add(("SEND message 2, EOM", _fwd(_req(4099, flags=ReqFlag.AR) + eom + body[128:])))
    ack_cc = _h(
        pds.ACK_CC[(False, "nscc")],
        ack_psn_offset=2,
        cack_psn=4097,
        spdcid=2,
        dpdcid=1,
        mpr=1,
        sack_psn_offset=1,
        sack_bitmap=pds.psns_to_sack(4098, [4099]),
        service_time=12,
        rcvd_bytes=256,
        ooo_count=1,
    )
    add(("ACK_CC (NSCC) with SACK: 4099 received, 4098 missing", _rev(ack_cc)))
    nack = _h(pds.NACK, nack_code=NackCode.TRIMMED, nack_psn=4098, spdcid=2, dpdcid=1)
    add(("NACK TRIMMED for PSN 4098", _rev(nack)))
    add(("retransmission of PSN 4098", _fwd(_req(4098, flags=ReqFlag.RETX | ReqFlag.AR, cpo=-2) + mid + body[64:128])))
    resp2 = _h(ses.RESPONSE, return_code=ReturnCode.OK, message_id=2, job_id=0x42, modified_length=192)
    add(
        (
            "ACK 4099 with RESPONSE for message 2",
            _rev(_ack(4099, nh=NextHeader.RESPONSE, flags=AckFlag.RETX, off=-1) + resp2),
        )
    )

    # SYN exchange on a second PDC: ROD CC request with a medium tagged send.
    rod = _h(
        pds.CC_REQUEST_SYN,
        type=PdsType.ROD_CC_REQ,
        next_hdr=NextHeader.MEDIUM,
        flags=ReqFlag.SYN | ReqFlag.AR,
        clear_psn_offset=-1,
        psn=0x20000,
        spdcid=7,
        ccc_id=3,
        credit_target=4096,
    )
    med = _h(ses.MEDIUM, opcode=SesOpcode.TAGGED_SEND, request_length=8, initiator=1, match_bits=0xBEEF, **job)
    add(("ROD CC request, SYN, medium TAGGED_SEND", _fwd(rod + med + b"tagged!!", ecn=Ecn.ECT0, entropy=0x5151)))
    rod_ack = _h(pds.ACK, cack_psn=0x20000, spdcid=9, dpdcid=7, flags=AckFlag.M)
    add(("ACK for the ROD PDC (ECN-marked)", _rev(rod_ack, entropy=0x5151)))

    # Control packets.
    add(("control ACK_REQ for PSN 4099", _fwd(_ctl(ControlType.ACK_REQ, 4099, 2))))
    add(("control PROBE", _fwd(_ctl(ControlType.PROBE, 0, 4097, opaque=0xCAFE))))
    probe_ack = _h(pds.ACK_PROBE, probe_opaque=0xCAFE, cack_psn=4099, spdcid=2, dpdcid=1)
    add(("ACK answering the PROBE (P)", _rev(probe_ack)))
    add(("control CLOSE", _fwd(_ctl(ControlType.CLOSE, 4100, flags=ReqFlag.AR))))
    add(("ACK of the CLOSE", _rev(_ack(4100))))

    # RUDI and UUD.
    small = _h(ses.SMALL, opcode=SesOpcode.WRITE, request_length=4, buffer_offset=0x1000, **job)
    add(
        (
            "RUDI request, small WRITE",
            _fwd(_h(pds.RUDI, type=PdsType.RUDI_REQ, next_hdr=NextHeader.SMALL, pkt_id=77) + small + b"abcd"),
        )
    )
    rresp = _h(ses.RESPONSE, return_code=ReturnCode.OK, job_id=0x42, modified_length=4)
    add(("RUDI response", _rev(_h(pds.RUDI, type=PdsType.RUDI_RESP, next_hdr=NextHeader.RESPONSE, pkt_id=77) + rresp)))
    uud = (
        _h(pds.UUD)
        + _std(opcode=SesOpcode.DATAGRAM_SEND, flags=SOM_EOM, message_id=9, request_length=4, **job)
        + b"dgrm"
    )
    add(("UUD DATAGRAM_SEND over IPv6", _fwd_v6(uud)))

    # READ and its data.
    read = _std(
        opcode=SesOpcode.READ,
        flags=SOM_EOM,
        message_id=3,
        buffer_offset=0x200,
        match_bits=0x77,
        request_length=16,
        **job,
    )
    add(("READ 16 bytes", _fwd(_req(4101, flags=ReqFlag.AR, dpdcid=2) + read)))
    rdata = _h(
        ses.RESPONSE_DATA,
        return_code=ReturnCode.OK,
        message_id=3,
        job_id=0x42,
        read_request_message_id=3,
        payload_length=16,
        modified_length=16,
    )
    add(
        (
            "ACK with RESPONSE_W_DATA (read data)",
            _rev(_ack(4101, nh=NextHeader.RESPONSE_DATA) + rdata + b"0123456789abcdef"),
        )
    )

    # Fetching compare-and-swap and its result.
    cswap = _h(ses.CSWAP_EXT, atomic_opcode=AmoOp.CSWAP, atomic_datatype=AmoType.UINT64, compare_value=5, swap_value=9)
    fa = _std(
        opcode=SesOpcode.FETCHING_ATOMIC,
        flags=SOM_EOM,
        message_id=4,
        buffer_offset=0x40,
        match_bits=0x77,
        request_length=8,
        **job,
    )
    add(("FETCHING_ATOMIC CSWAP", _fwd(_req(4102, flags=ReqFlag.AR) + fa + cswap)))
    sresp = _h(
        ses.SMALL_RESPONSE_DATA, return_code=ReturnCode.OK, payload_length=8, job_id=0x42, original_request_psn=4102
    )
    add(
        (
            "ACK with small RESPONSE_W_DATA (old value)",
            _rev(_ack(4102, nh=NextHeader.SMALL_RESPONSE_DATA) + sresp + (5).to_bytes(8, "big")),
        )
    )

    # Rendezvous send: 32 bytes eager, the rest to be read back.
    rv = _std(opcode=SesOpcode.RENDEZVOUS_SEND, flags=SOM_EOM, message_id=5, request_length=4096, **job)
    rext = _h(
        ses.RENDEZVOUS_EXT,
        eager_length=32,
        read_pid_on_fep=3,
        read_resource_index=1,
        read_offset=0x8000,
        read_match_bits=0x99,
    )
    add(("RENDEZVOUS_SEND (32 bytes eager)", _fwd(_req(4103, flags=ReqFlag.AR) + rv + rext + bytes(32))))

    # Link-level and encapsulation variety.
    add(("PFC pause, priority 3", build_pfc_frame({3: 0xFFFF}, src_mac=_MAC_B)))
    arp = bytes.fromhex("0001080006040001") + _MAC_A + bytes([10, 0, 0, 1]) + bytes(6) + bytes([10, 0, 0, 2])
    add(("ARP request (not UET)", build_ethernet(arp, src_mac=_MAC_A, dst_mac=b"\xff" * 6, ethertype=0x0806)))
    over_ip = (
        _req(4104, flags=ReqFlag.AR)
        + _std(opcode=SesOpcode.SEND, flags=SOM_EOM, message_id=6, request_length=2, **job)
        + b"ip"
    )
    add(("UET over IP (protocol 253)", _fwd(over_ip, encap="ip")))
    add(("TSS-protected SEND over IP (AES-256-GCM)", _tss_frame()))

    # Malformed: a standard SES header cut after 20 of its 44 bytes.
    cut = (_req(4105) + _std(opcode=SesOpcode.SEND, flags=SOM_EOM, message_id=7, request_length=0, **job))[:32]
    add(("malformed: truncated SES header", _fwd(cut)))
    return out


def _fwd_v6(uet: bytes) -> bytes:
    return build_frame(uet, "fd00::1", "fd00::2", entropy=_ENT, src_mac=_MAC_A, dst_mac=_MAC_B)


def _tss_frame() -> bytes:
    tss_v = tss.TSS.make(sdi=1, an=0, epoch=0, tsc=7)
    tss_hdr = tss.TSS.encode(tss_v)
    entropy = 0x1234
    ent_hdr = tss.ENTROPY.encode((entropy,))
    plain = (
        _req(4106, flags=ReqFlag.AR)
        + _std(opcode=SesOpcode.SEND, flags=SOM_EOM, message_id=8, request_length=6, job_id=0x42, pid_on_fep=3)
        + b"secret"
    )
    src, dst = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    iv = src + tss_hdr[4:12]
    sealed = AESGCM(SAMPLE_TSS_KEY).encrypt(iv, plain, src + dst + ent_hdr + tss_hdr)
    packet = build_ip_packet(tss_hdr + sealed, _A, _B, entropy=entropy, encap="ip")
    return build_ethernet(packet, src_mac=_MAC_A, dst_mac=_MAC_B)


def sample_frames() -> list[tuple[int, str, bytes]]:
    """``(timestamp_ns, description, Ethernet frame)`` for every frame of the sample capture."""
    return [(_T0 + i * _STEP, d, f) for i, (d, f) in enumerate(_frames())]


#: One line per frame of the sample, in order.
DESCRIPTIONS: list[str] = [d for _, d, _ in sample_frames()]


def sample_capture() -> bytes:
    """The sample capture's bytes, freshly generated (classic pcap, nanosecond timestamps)."""
    buf = io.BytesIO()
    with PcapWriter(buf) as w:
        for ts, _, frame in sample_frames():
            w.write(frame, ts)
    return buf.getvalue()


def load_sample() -> bytes:
    """The committed sample capture, read as package data."""
    return resources.files("uet.interop").joinpath("samples", SAMPLE_NAME).read_bytes()


def regenerate(path: str | Path | None = None) -> Path:
    """Write :func:`sample_capture` to ``path`` (default: the package's ``samples/`` folder)."""
    target = Path(path) if path is not None else Path(str(resources.files("uet.interop"))) / "samples" / SAMPLE_NAME
    target.write_bytes(sample_capture())
    return target


if __name__ == "__main__":
    regenerate()
