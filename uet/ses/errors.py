"""SES failures as exceptions: one named class per return code (wire-format.md §11.4).

Every SES return code other than ``NULL`` and ``OK`` has a named :class:`SesError` subclass, so
the initiator can turn a response into an exception (:func:`error_for`) and the target engine can
raise deep inside a check and answer with the code at the top (spec/behaviour.md §6.3, §6.9).
Families share intermediate classes so callers can catch, say, every address-translation or
every atomic failure at once.

Registration mistakes made by the local application (a read-only buffer registered for remote
write, a duplicate key) are not return codes: they raise :class:`RegistrationError`.
"""

from __future__ import annotations

from uet.errors import UetError
from uet.wire.ses import ReturnCode

__all__ = [
    "AmoError",
    "AmoFpInexact",
    "AmoFpNan",
    "AmoFpOverflow",
    "AmoFpUnderflow",
    "AmoUnaligned",
    "AmoUnsupportedDt",
    "AmoUnsupportedOp",
    "AmoUnsupportedSize",
    "AtAtsError",
    "AtInvalid",
    "AtNoTrans",
    "AddressTranslationError",
    "BadAddr",
    "BadGeneration",
    "BadIndex",
    "BadJobId",
    "BadMkey",
    "BadPid",
    "Cancelled",
    "Disabled",
    "DisabledGen",
    "Dropped",
    "HostPoisoned",
    "HostUnsuccessfulCompletion",
    "InitiatorError",
    "NoMatch",
    "OpViolation",
    "OutOfRange",
    "PermViolation",
    "PermissionDenied",
    "RegistrationError",
    "SesError",
    "TooLong",
    "Uncorrectable",
    "UncorrectableTransient",
    "Undeliverable",
    "UnsupportedOp",
    "UnsupportedSize",
    "error_for",
]


class RegistrationError(UetError):
    """A local registration request the memory or resource table refuses."""


class SesError(UetError):
    """An SES operation failed with a return code (wire-format.md §11.4).

    Attributes:
        return_code: the :class:`~uet.wire.ses.ReturnCode`.
        detail: a human explanation (which check failed).
        generation: the target's current resource-index generation (meaningful with
            ``BAD_GENERATION``, where the response carries it, behaviour.md §6.3 step 4).
    """

    code: ReturnCode = ReturnCode.UNCOR

    def __init__(self, detail: str = "", *, return_code: int | None = None, generation: int | None = None) -> None:
        rc = ReturnCode(return_code) if return_code is not None else type(self).code
        self.return_code = rc
        self.detail = detail
        self.generation = generation
        super().__init__(f"{rc.name}: {detail}" if detail else rc.name)


# -- families -----------------------------------------------------------------------------------


class AddressTranslationError(SesError):
    """Address-translation failures (codes 0x08–0x0C)."""


class AmoError(SesError):
    """Atomic-operation failures (codes 0x0F–0x16)."""


class ResolutionError(SesError):
    """The request does not reach a valid endpoint / resource (behaviour.md §1.2, §6.3 step 2)."""


# -- one class per code -------------------------------------------------------------------------


class BadGeneration(ResolutionError):
    code = ReturnCode.BAD_GENERATION


class Disabled(SesError):
    code = ReturnCode.DISABLED


class DisabledGen(SesError):
    code = ReturnCode.DISABLED_GEN


class NoMatch(SesError):
    code = ReturnCode.NO_MATCH


class UnsupportedOp(SesError):
    code = ReturnCode.UNSUPPORTED_OP


class UnsupportedSize(SesError):
    code = ReturnCode.UNSUPPORTED_SIZE


class AtInvalid(AddressTranslationError):
    code = ReturnCode.AT_INVALID


class PermissionDenied(AddressTranslationError):
    """``AT_PERM``: address-translation permission failure."""

    code = ReturnCode.AT_PERM


class AtAtsError(AddressTranslationError):
    code = ReturnCode.AT_ATS_ERROR


class AtNoTrans(AddressTranslationError):
    code = ReturnCode.AT_NO_TRANS


class OutOfRange(AddressTranslationError):
    """``AT_OUT_OF_RANGE``: virtual address out of range."""

    code = ReturnCode.AT_OUT_OF_RANGE


class HostPoisoned(SesError):
    code = ReturnCode.HOST_POISONED


class HostUnsuccessfulCompletion(SesError):
    code = ReturnCode.HOST_UNSUCCESS_CMPL


class AmoUnsupportedOp(AmoError):
    code = ReturnCode.AMO_UNSUPPORTED_OP


class AmoUnsupportedDt(AmoError):
    code = ReturnCode.AMO_UNSUPPORTED_DT


class AmoUnsupportedSize(AmoError):
    code = ReturnCode.AMO_UNSUPPORTED_SIZE


class AmoUnaligned(AmoError):
    code = ReturnCode.AMO_UNALIGNED


class AmoFpNan(AmoError):
    code = ReturnCode.AMO_FP_NAN


class AmoFpUnderflow(AmoError):
    code = ReturnCode.AMO_FP_UNDERFLOW


class AmoFpOverflow(AmoError):
    code = ReturnCode.AMO_FP_OVERFLOW


class AmoFpInexact(AmoError):
    code = ReturnCode.AMO_FP_INEXACT


class PermViolation(SesError):
    """``PERM_VIOLATION``: the region lacks the permission the operation needs (§6.5)."""

    code = ReturnCode.PERM_VIOLATION


class OpViolation(SesError):
    """``OP_VIOLATION``: malformed request or lengths, bad restart token, ... (§6.9)."""

    code = ReturnCode.OP_VIOLATION


class BadIndex(ResolutionError):
    code = ReturnCode.BAD_INDEX


class BadPid(ResolutionError):
    code = ReturnCode.BAD_PID


class BadJobId(ResolutionError):
    code = ReturnCode.BAD_JOB_ID


class BadMkey(SesError):
    code = ReturnCode.BAD_MKEY


class BadAddr(SesError):
    code = ReturnCode.BAD_ADDR


class Cancelled(SesError):
    code = ReturnCode.CANCELLED


class Undeliverable(ResolutionError):
    code = ReturnCode.UNDELIVERABLE


class Uncorrectable(SesError):
    code = ReturnCode.UNCOR


class UncorrectableTransient(SesError):
    code = ReturnCode.UNCOR_TRNSNT


class TooLong(SesError):
    code = ReturnCode.TOO_LONG


class InitiatorError(SesError):
    code = ReturnCode.INITIATOR_ERR


class Dropped(SesError):
    code = ReturnCode.DROPPED


_BY_CODE: dict[int, type[SesError]] = {
    cls.code: cls
    for cls in (
        BadGeneration,
        Disabled,
        DisabledGen,
        NoMatch,
        UnsupportedOp,
        UnsupportedSize,
        AtInvalid,
        PermissionDenied,
        AtAtsError,
        AtNoTrans,
        OutOfRange,
        HostPoisoned,
        HostUnsuccessfulCompletion,
        AmoUnsupportedOp,
        AmoUnsupportedDt,
        AmoUnsupportedSize,
        AmoUnaligned,
        AmoFpNan,
        AmoFpUnderflow,
        AmoFpOverflow,
        AmoFpInexact,
        PermViolation,
        OpViolation,
        BadIndex,
        BadPid,
        BadJobId,
        BadMkey,
        BadAddr,
        Cancelled,
        Undeliverable,
        Uncorrectable,
        UncorrectableTransient,
        TooLong,
        InitiatorError,
        Dropped,
    )
}


def error_for(rc: int, detail: str = "", *, generation: int | None = None) -> SesError:
    """The exception (not raised) for return code ``rc``. ``NULL`` and ``OK`` are not errors
    (``ValueError``); a reserved code (0x25–0x3F) gives a plain :class:`SesError` with
    ``UNCOR`` (uncorrectable), since nothing more specific is known about it."""
    if rc in (ReturnCode.NULL, ReturnCode.OK):
        raise ValueError(f"return code {rc:#x} is not an error")
    cls = _BY_CODE.get(rc)
    if cls is None:
        return SesError(detail or f"reserved return code {rc:#x}", return_code=ReturnCode.UNCOR)
    return cls(detail, generation=generation)
