"""The project's exception hierarchy.

Every error the library raises derives from :class:`UetError`. Decoding problems raise
:class:`DecodeError`, which always names the header, the byte offset (from the start of the
buffer handed to the decoder) and a human reason, so tools can print one precise line.
"""

from __future__ import annotations


class UetError(Exception):
    """Root of every exception raised by the project."""


class DecodeError(UetError):
    """Bytes that do not decode as the expected header.

    Attributes:
        header: name of the header being decoded (``"rud_request"``, ``"ipv4"``, ...).
        offset: byte offset of the problem from the start of the decoded buffer.
        reason: what is wrong, in words.
    """

    def __init__(self, header: str, offset: int, reason: str) -> None:
        self.header = header
        self.offset = offset
        self.reason = reason
        super().__init__(f"{header} at offset {offset}: {reason}")


class EncodeError(UetError):
    """A header could not be encoded (a field value does not fit its width)."""

    def __init__(self, header: str, field: str, reason: str) -> None:
        self.header = header
        self.field = field
        self.reason = reason
        super().__init__(f"{header}.{field}: {reason}")
