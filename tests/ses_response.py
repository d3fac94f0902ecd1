"""The fields tests read from an SES RESPONSE header, through the one response codec
(uet.ses.packets.parse_response, wire-format.md §11.1)."""

from __future__ import annotations

from uet.ses.packets import parse_response
from uet.wire.pds import NextHeader


def response_fields(data: bytes) -> tuple[int, int, int, int]:
    """``(opcode, return_code, message_id, modified_length)`` of a RESPONSE header."""
    r = parse_response(NextHeader.RESPONSE, data)
    return r.opcode, r.return_code, r.message_id, r.modified_length
