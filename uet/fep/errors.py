"""Errors a Fabric Endpoint reports for its own reasons (not a target's return code).

Both are raised to the application by :class:`uet.Endpoint` and carried by
:class:`~uet.fep.events.OpFailed` events of the :class:`~uet.fep.core.FepCore`.
"""

from __future__ import annotations

from uet.errors import UetError
from uet.ses.errors import Undeliverable

__all__ = ["DeliveryError", "EndpointClosed"]


class DeliveryError(Undeliverable):
    """A message or operation did not reach the target: a packet Failed in PDS, or it was
    refused locally before any packet left. An :class:`~uet.ses.errors.SesError` with return code
    ``UNDELIVERABLE`` unless ``return_code`` says otherwise.

    Attributes: ``reason`` (words), ``nack_code`` (the PDS NACK code when one caused it).
    """

    def __init__(self, reason: str, *, nack_code: int | None = None, return_code: int | None = None) -> None:
        self.reason = reason
        self.nack_code = nack_code
        extra = f" (nack {nack_code:#x})" if nack_code is not None else ""
        super().__init__(reason + extra, return_code=return_code)


class EndpointClosed(UetError):
    """The endpoint is closed (or closing): no new operations; pending ones fail with this."""
