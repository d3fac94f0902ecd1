"""Errors raised by the TSS security core.

All derive from :class:`uet.errors.UetError` (conventions.md, one exception hierarchy). Receive-side
failures never raise: :meth:`uet.tss.context.TssContext.open` drops and counts (behaviour.md §5.8).
These exceptions are for the sender and for configuration, where the caller made a mistake or the
secure domain cannot legally send. No message ever contains key bytes.
"""

from __future__ import annotations

from uet.errors import UetError


class TssError(UetError):
    """Root of the TSS errors."""


class KeyFileError(TssError):
    """A key file cannot be used: unsafe permissions, bad syntax or inconsistent values."""


class UnknownDomainError(TssError):
    """The sender asked for a secure domain (SDI) that is not in the FEP's table."""


class DomainStateError(TssError):
    """The secure domain cannot send now: disabled, latched into dropping, or no active key."""


class CounterExhaustedError(TssError):
    """The TSC reached the invoke-fatal threshold: the SD must not send again under this key
    (behaviour.md §5.6; the spec counter is ``out_invoke_fail``). Rotate the key to continue."""


class KeyRotationError(TssError):
    """An illegal key-slot operation, e.g. overwriting the slot the sender is using."""


class UnknownPeerError(TssError):
    """A SERVER-mode SD that uses SSIs does not know the SSI of the client it is sending to."""
