"""How a conformance run is judged beyond each case's outcome: the MUST cases skipped for a
precondition the user can supply (they make the run's verdict "not shown conformant"), and the
JobIDs the target answered with other than the one the tester was told (the usual cause of a
suite full of failures)."""

from __future__ import annotations

from uet.conformance.case import Result
from uet.conformance.wirekit import decode_reply

__all__ = ["foreign_jobs", "must_skipped"]


def must_skipped(results: list[Result]) -> list[Result]:
    """The MUST cases skipped for a missing precondition the user can supply: a region or a
    receive the tester was not told of (their reasons name ``--region`` / ``--receive``). Cases
    that do not apply to this target (TSS cases without ``--keys``, fixed Start PSNs of a secure
    target, a send the target did not defer) are not counted."""
    return [
        r
        for r in results
        if r.outcome == "skip" and r.case.level == "MUST" and ("--region" in r.reason or "--receive" in r.reason)
    ]


def foreign_jobs(log: list[tuple[str, bytes]], job: int) -> list[int]:
    """The JobIDs other than ``job`` in the SES responses the target sent (``Session.log``)."""
    seen: set[int] = set()
    for direction, data in log:
        if direction != "received":
            continue
        ses = decode_reply(data).ses
        jid = getattr(ses, "job_id", None)
        if jid is not None and jid != job:
            seen.add(jid)
    return sorted(seen)
