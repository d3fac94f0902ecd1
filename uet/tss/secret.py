"""A byte string that never shows itself: key material for the secure-domain table.

Key bytes must never reach a log line, a traceback's ``repr`` of locals, or an exception message
(issue 5). :class:`SecretBytes` wraps them; ``repr``/``str``/``format`` print only the length, and
the bytes are available solely through :meth:`SecretBytes.reveal`, so every use is visible in code
review. Equality is constant-time (:func:`hmac.compare_digest`).
"""

from __future__ import annotations

import hmac

__all__ = ["SecretBytes"]


class SecretBytes:
    """Immutable secret bytes with a redacted representation."""

    __slots__ = ("_b",)

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._b = bytes(data)

    def reveal(self) -> bytes:
        """The key bytes (use only to hand them to a cipher or a KDF, or to write a key file)."""
        return self._b

    def __len__(self) -> int:
        return len(self._b)

    def __repr__(self) -> str:
        return f"<redacted {len(self._b)} bytes>"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SecretBytes):
            return NotImplemented
        return hmac.compare_digest(self._b, other._b)

    __hash__ = None  # type: ignore[assignment]  # unhashable: equality is by secret content

    def __reduce__(self) -> None:  # type: ignore[override]
        raise TypeError("SecretBytes cannot be pickled")
