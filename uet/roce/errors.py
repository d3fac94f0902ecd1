"""Work-completion errors of the RC queue pair (spec/rocev2-and-fabric.md §6.3, §6.4).

Each is a :class:`~uet.errors.UetError`; an ``OpFailed`` event carries an instance. Names follow
the verbs work-completion statuses they stand for.

Each also carries ``return_code``, the SES return code (wire-format.md §11.4) whose name the
transport contract reports for it (:func:`uet.transport.error_name`), so one workload compares
failures across transports (**decisions**, RoCE's syndromes being coarser than SES's codes):
retries exhausted → ``UNDELIVERABLE`` (UET's "PDS gave up"); a remote access error (NAK 0x62:
R_Key, bounds or rights, which RoCE does not tell apart) → ``PERM_VIOLATION``; an invalid request
(NAK 0x61) → ``OP_VIOLATION``; a remote operational error (NAK 0x63) → ``UNCOR``; a message too
long for the receive → ``TOO_LONG``; a flushed request → ``CANCELLED``.
"""

from __future__ import annotations

from typing import ClassVar

from uet.errors import UetError
from uet.wire.ses import ReturnCode


class RoceError(UetError):
    """A RoCE work request did not complete successfully."""

    return_code: ClassVar[ReturnCode] = ReturnCode.INITIATOR_ERR


class RetryExceeded(RoceError):
    """``retry_cnt`` exhausted by timeouts or sequence-error NAKs (IBV_WC_RETRY_EXC_ERR)."""

    return_code = ReturnCode.UNDELIVERABLE


class RnrRetryExceeded(RoceError):
    """``rnr_retry`` exhausted by RNR NAKs (IBV_WC_RNR_RETRY_EXC_ERR)."""

    return_code = ReturnCode.UNDELIVERABLE


class RemoteInvalidRequest(RoceError):
    """NAK 0x61: bad opcode sequence, bad length or a receive buffer too small (IBV_WC_REM_INV_REQ_ERR)."""

    return_code = ReturnCode.OP_VIOLATION


class RemoteAccessError(RoceError):
    """NAK 0x62: R_Key, bounds or access-right violation (IBV_WC_REM_ACCESS_ERR)."""

    return_code = ReturnCode.PERM_VIOLATION


class RemoteOperationalError(RoceError):
    """NAK 0x63 (IBV_WC_REM_OP_ERR)."""

    return_code = ReturnCode.UNCOR


class LocalLengthError(RoceError):
    """A message longer than the posted receive buffer (IBV_WC_LOC_LEN_ERR at the responder)."""

    return_code = ReturnCode.TOO_LONG


class Flushed(RoceError):
    """Work request flushed because the QP entered the error state (IBV_WC_WR_FLUSH_ERR)."""

    return_code = ReturnCode.CANCELLED
