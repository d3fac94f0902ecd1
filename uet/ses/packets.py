"""SES request and response packets as Python values: decode and build (wire-format.md §8–§11).

The wire layouts in :mod:`uet.wire.ses` define every byte; this module turns them into one flat
:class:`SesRequest` whatever the header variant (standard, medium, small; SOM and non-SOM; restart
token unions) and builds request and response headers from keyword values, so the initiator and
target engines never deal with the unions themselves.

Where the extension header travels: the PDS hands SES the bytes after the PDS header split into
``ses`` and ``payload`` (contract ``Delivery``). :func:`parse_request` accepts the extension
either at the end of ``ses`` or at the start of ``payload`` (our choice: the PDS cannot know SES
extension lengths, and initiators built here put the extension in ``ses``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from uet.errors import DecodeError
from uet.wire.pds import NextHeader
from uet.wire.ses import (
    ATOMIC_EXT,
    CSWAP_EXT,
    CSWAP_OPS,
    DEFERRABLE_OPCODES,
    MEDIUM,
    MEDIUM_HD,
    RESPONSE,
    RESPONSE_DATA,
    SMALL,
    SMALL_RESPONSE_DATA,
    STANDARD,
    SYNC_EXT,
    ResponseOpcode,
    ReturnCode,
    SesFlag,
    SesOpcode,
    extension_layout,
    ses_layout,
)

__all__ = [
    "MAX_WIRE_PAYLOAD",
    "Response",
    "SesRequest",
    "build_request",
    "build_response",
    "build_response_data",
    "parse_request",
    "parse_response",
]

#: Largest payload the 14-bit ``payload_length`` fields can describe (wire-format.md §12.3).
MAX_WIRE_PAYLOAD = 0x3FFF

_REQUEST_HEADERS = (NextHeader.SMALL, NextHeader.MEDIUM, NextHeader.STANDARD)


@dataclass(slots=True)
class SesRequest:
    """One decoded SES request packet, all header variants flattened (§8).

    Fields absent from the variant are 0 (``message_id`` of small/medium headers, ``initiator``
    and ``match_bits`` of the small header). ``payload_length``/``message_offset`` are derived for
    SOM packets (offset 0, length of the payload present). ``src_token``/``dst_token`` hold the
    restart tokens of DEFERRABLE_SEND/TSEND (bytes 12–19) and DEFERRABLE_RTR (bytes 24–31).
    ``ext`` is the decoded extension namedtuple (atomic, compare-and-swap, rendezvous, sync) or
    None; ``payload`` is what follows the headers.
    """

    next_hdr: int
    opcode: int
    version: int
    flags: int
    message_id: int
    ri_generation: int
    job_id: int
    pid_on_fep: int
    resource_index: int
    buffer_offset: int
    initiator: int
    match_bits: int
    header_data: int
    payload_length: int
    message_offset: int
    request_length: int
    src_token: int
    dst_token: int
    ext: Any
    payload: bytes | memoryview

    @property
    def som(self) -> bool:
        return bool(self.flags & SesFlag.SOM)

    @property
    def eom(self) -> bool:
        return bool(self.flags & SesFlag.EOM)

    @property
    def hd(self) -> bool:
        return bool(self.flags & SesFlag.HD)

    @property
    def rel(self) -> bool:
        return bool(self.flags & SesFlag.REL)

    @property
    def ie(self) -> bool:
        return bool(self.flags & SesFlag.IE)

    @property
    def dc(self) -> bool:
        return bool(self.flags & SesFlag.DC)


def parse_request(next_hdr: int, ses: bytes | memoryview, payload: bytes | memoryview = b"") -> SesRequest:
    """Decode an SES request (next_hdr 1, 2 or 3) and its extension. Raises
    :class:`~uet.errors.DecodeError` for a reserved next_hdr or a short header/extension."""
    if next_hdr not in _REQUEST_HEADERS:
        raise DecodeError("ses_request", 0, f"next_hdr {next_hdr} is not a request header")
    if len(ses) < 2:
        raise DecodeError("ses_request", len(ses), "fewer than 2 bytes")
    layout = ses_layout(next_hdr, ses[0], ses[1])
    assert layout is not None
    v = layout.decode(ses)
    op = v.opcode
    rest = ses[layout.size :]
    ext = None
    ext_layout = extension_layout(op, rest[0] if len(rest) else (payload[0] if len(payload) else None))
    if op == SesOpcode.SYNC_ATOMIC:
        ext_layout = None  # sync + atomic: decoded below as a pair
    if ext_layout is not None:
        ext, payload = _take_ext(ext_layout, rest, payload, layout.size)
    elif op == SesOpcode.SYNC_ATOMIC:
        sync, payload = _take_ext(SYNC_EXT, rest, payload, layout.size)
        nb = payload[0] if len(payload) else None
        amo, payload = _take_ext(CSWAP_EXT if nb in CSWAP_OPS else ATOMIC_EXT, b"", payload, layout.size + 4)
        ext = (sync, amo)
    elif len(rest):
        payload = bytes(rest) + bytes(payload)
    flags = v.flags
    d = v._asdict()
    if next_hdr == NextHeader.STANDARD:
        som = flags & SesFlag.SOM
        src = dst = 0
        if op in DEFERRABLE_OPCODES:
            src, dst, bo, mb = d["src_restart_token"], d["dst_restart_token"], 0, d["match_bits"]
        elif op == SesOpcode.DEFERRABLE_RTR:
            src, dst, bo, mb = d["src_restart_token"], d["dst_restart_token"], d["buffer_offset"], 0
        else:
            bo, mb = d["buffer_offset"], d["match_bits"]
        return SesRequest(
            next_hdr,
            op,
            v.version,
            flags,
            v.message_id,
            v.ri_generation,
            v.job_id,
            v.pid_on_fep,
            v.resource_index,
            bo,
            v.initiator,
            mb,
            d["header_data"] if som else 0,
            len(payload) if som else d["payload_length"],
            0 if som else d["message_offset"],
            v.request_length,
            src,
            dst,
            ext,
            payload,
        )
    hd = bool(flags & SesFlag.HD) and next_hdr == NextHeader.MEDIUM
    return SesRequest(
        next_hdr,
        op,
        v.version,
        flags,
        0,
        v.ri_generation,
        v.job_id,
        v.pid_on_fep,
        v.resource_index,
        0 if hd else d["buffer_offset"],
        d.get("initiator", 0),
        d.get("match_bits", 0),
        d["header_data"] if hd else 0,
        len(payload),
        0,
        v.request_length,
        0,
        0,
        ext,
        payload,
    )


def _take_ext(lay: Any, rest: bytes | memoryview, payload: bytes | memoryview, base: int) -> tuple[Any, Any]:
    """Decode extension ``lay`` from ``rest`` (end of the SES bytes) then ``payload``."""
    need = lay.size
    if len(rest) >= need:
        ext = lay.decode(rest)
        tail = rest[need:]
        return ext, (bytes(tail) + bytes(payload)) if len(tail) else payload
    have = bytes(rest) + bytes(payload[: need - len(rest)])
    if len(have) < need:
        raise DecodeError(lay.name, base + len(have), f"extension needs {need} bytes, {len(have)} present")
    return lay.decode(have), payload[need - len(rest) :]


def build_request(
    opcode: int,
    *,
    flags: int,
    message_id: int = 0,
    ri_generation: int = 0,
    job_id: int = 0,
    pid_on_fep: int = 0,
    resource_index: int = 0,
    buffer_offset: int = 0,
    initiator: int = 0,
    match_bits: int = 0,
    header_data: int = 0,
    payload_length: int = 0,
    message_offset: int = 0,
    request_length: int = 0,
    src_token: int = 0,
    dst_token: int = 0,
    header: int = NextHeader.STANDARD,
    ext: bytes = b"",
) -> bytes:
    """Encode one request header (plus already-encoded extension bytes ``ext``).

    ``header`` picks standard (3), medium (2) or small (1); the union members are chosen from
    ``opcode``, SOM and HD exactly as :func:`uet.wire.ses.ses_layout` decodes them.
    """
    som = 1 if flags & SesFlag.SOM else 0
    if header == NextHeader.STANDARD:
        if opcode in DEFERRABLE_OPCODES:
            tok = "buffer"
            pre: tuple[int, ...] = (src_token, dst_token, initiator, match_bits)
        elif opcode == SesOpcode.DEFERRABLE_RTR:
            tok = "match"
            pre = (buffer_offset, initiator, src_token, dst_token)
        else:
            tok = "none"
            pre = (buffer_offset, initiator, match_bits)
        tail = (header_data,) if som else (payload_length, message_offset)
        head = (opcode, 0, flags, message_id, ri_generation, job_id, pid_on_fep, resource_index)
        return STANDARD[(som, tok)].encode(head + pre + tail + (request_length,)) + ext
    head = (opcode, 0, flags, request_length, ri_generation, job_id, pid_on_fep, resource_index)
    if header == NextHeader.MEDIUM:
        if flags & SesFlag.HD:
            return MEDIUM_HD.encode(head + (header_data, initiator, match_bits)) + ext
        return MEDIUM.encode(head + (buffer_offset, initiator, match_bits)) + ext
    if header == NextHeader.SMALL:
        return SMALL.encode(head + (buffer_offset,)) + ext
    raise ValueError(f"next_hdr {header} is not a request header")


@dataclass(frozen=True, slots=True)
class Response:
    """A decoded SES response (§11): the union of the three response headers.

    ``data`` is the returned data (response with data), empty otherwise; ``message_offset`` and
    ``read_request_message_id`` are 0 where the variant lacks them; ``original_request_psn`` is
    set only by the small response with data.
    """

    next_hdr: int
    list: int
    opcode: int
    return_code: int
    message_id: int = 0
    ri_generation: int = 0
    job_id: int = 0
    modified_length: int = 0
    read_request_message_id: int = 0
    payload_length: int = 0
    message_offset: int = 0
    original_request_psn: int = 0
    data: bytes = b""


def parse_response(next_hdr: int, data: bytes | memoryview, payload: bytes | memoryview = b"") -> Response:
    """Decode a response header of kind ``next_hdr`` (4, 5, 6); the data after a response-with-data
    header comes from the rest of ``data`` followed by ``payload``."""
    if next_hdr == NextHeader.RESPONSE:
        lst, op, _ver, rc, mid, gen, job, ml = RESPONSE.unpack(data)
        return Response(next_hdr, lst, op, rc, mid, gen, job, ml)
    if next_hdr == NextHeader.RESPONSE_DATA:
        lst, op, _ver, rc, mid, job, rmid, plen, ml, moff = RESPONSE_DATA.unpack(data)
        body = bytes(data[RESPONSE_DATA.size :]) + bytes(payload)
        return Response(next_hdr, lst, op, rc, mid, 0, job, ml, rmid, plen, moff, 0, body)
    if next_hdr == NextHeader.SMALL_RESPONSE_DATA:
        lst, op, _ver, rc, plen, job, psn = SMALL_RESPONSE_DATA.unpack(data)
        body = bytes(data[SMALL_RESPONSE_DATA.size :]) + bytes(payload)
        return Response(next_hdr, lst, op, rc, 0, 0, job, len(body), 0, plen, 0, psn, body)
    raise DecodeError("ses_response", 0, f"next_hdr {next_hdr} is not a response header")


def build_response(
    rc: int,
    *,
    message_id: int = 0,
    job_id: int = 0,
    ri_generation: int = 0,
    modified_length: int = 0,
    list_: int = 0,
    opcode: int = ResponseOpcode.RESPONSE,
) -> bytes:
    """A 12-byte RESPONSE header (§11.1)."""
    return RESPONSE.encode((list_, opcode, 0, rc, message_id, ri_generation, job_id, modified_length))


def build_response_data(
    data: bytes,
    *,
    message_id: int = 0,
    job_id: int = 0,
    read_request_message_id: int = 0,
    modified_length: int | None = None,
    message_offset: int = 0,
    rc: int = ReturnCode.OK,
    list_: int = 0,
    header_only: bool = False,
) -> bytes:
    """A RESPONSE_DATA header (§11.2) followed by ``data`` (just the header with
    ``header_only``, for data that travels as a separate payload); ``modified_length`` is the
    total response length (defaults to ``len(data)``). ``payload_length`` is ``len(data)``, or 0
    beyond the 14-bit field (the jumbo convention of ``uet.ses.message``)."""
    ml = len(data) if modified_length is None else modified_length
    plen = len(data) if len(data) <= MAX_WIRE_PAYLOAD else 0
    hdr = RESPONSE_DATA.encode(
        (
            list_,
            ResponseOpcode.RESPONSE_W_DATA,
            0,
            rc,
            message_id,
            job_id,
            read_request_message_id,
            plen,
            ml,
            message_offset,
        )
    )
    return hdr if header_only else hdr + bytes(data)
