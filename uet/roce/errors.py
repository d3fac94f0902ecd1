"""Work-completion errors of the RC queue pair (spec/rocev2-and-fabric.md §6.3, §6.4).

Each is a :class:`~uet.errors.UetError`; an ``OpFailed`` event carries an instance. Names follow
the verbs work-completion statuses they stand for.
"""

from __future__ import annotations

from uet.errors import UetError


class RoceError(UetError):
    """A RoCE work request did not complete successfully."""


class RetryExceeded(RoceError):
    """``retry_cnt`` exhausted by timeouts or sequence-error NAKs (IBV_WC_RETRY_EXC_ERR)."""


class RnrRetryExceeded(RoceError):
    """``rnr_retry`` exhausted by RNR NAKs (IBV_WC_RNR_RETRY_EXC_ERR)."""


class RemoteInvalidRequest(RoceError):
    """NAK 0x61: bad opcode sequence, bad length or a receive buffer too small (IBV_WC_REM_INV_REQ_ERR)."""


class RemoteAccessError(RoceError):
    """NAK 0x62: R_Key, bounds or access-right violation (IBV_WC_REM_ACCESS_ERR)."""


class RemoteOperationalError(RoceError):
    """NAK 0x63 (IBV_WC_REM_OP_ERR)."""


class LocalLengthError(RoceError):
    """A message longer than the posted receive buffer (IBV_WC_LOC_LEN_ERR at the responder)."""


class Flushed(RoceError):
    """Work request flushed because the QP entered the error state (IBV_WC_WR_FLUSH_ERR)."""
