"""Conformance cases: the registry, one record per case, and how a case is run.

A case is a function ``fn(session)`` registered with an id (``AREA-NNN`` style), a one-line title,
the spec section it checks (``behaviour.md §2.6``), a level (MUST / SHOULD) and flags:

* ``hostile``: the case sends something malformed or unexpected; the runner then checks the
  target still answers (a liveness probe) and fails the case if it does not;
* ``rules``: the ids of the rules of the spec notes the case checks (:mod:`uet.conformance.rules`,
  which ``uet-conformance --coverage`` counts);
* ``needs``: preconditions (``"keys"``, ``"region:rw"``...) checked by the case itself, which
  raises :class:`~uet.conformance.session.Skipped` with the reason when one is missing.

Data-driven families register one case per parameter with :func:`case` called in a loop; each is
still a real check of its own (it sends its own packets and judges its own reply).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uet.conformance.session import CheckFailed, Overran, Session, Skipped

__all__ = ["CASES", "Case", "CaseRun", "Result", "case", "run_case"]

MUST = "MUST"
SHOULD = "SHOULD"


@dataclass(frozen=True)
class Case:
    """One conformance case (module docstring)."""

    id: str
    area: str
    title: str
    section: str
    level: str
    fn: Callable[[Session], None]
    hostile: bool = False
    rules: tuple[str, ...] = ()


CASES: dict[str, Case] = {}


def case(
    cid: str,
    area: str,
    title: str,
    section: str,
    level: str = MUST,
    *,
    hostile: bool = False,
    rules: tuple[str, ...] = (),
) -> Callable[[Callable[[Session], None]], Callable[[Session], None]]:
    """Register ``fn`` as case ``cid`` (ids are unique; a duplicate is a bug)."""

    def deco(fn: Callable[[Session], None]) -> Callable[[Session], None]:
        if cid in CASES:
            raise ValueError(f"duplicate conformance case id {cid}")
        CASES[cid] = Case(cid, area, title, section, level, fn, hostile, rules)
        return fn

    return deco


@dataclass
class Result:
    """The verdict of one case: ``pass``, ``fail``, ``skip``, ``timeout`` (it overran its time,
    :class:`~uet.conformance.session.Overran`) or ``error`` (the tester crashed). A failed SHOULD
    case is a :attr:`warning`: reported, never a reason for a non-zero exit status."""

    case: Case
    outcome: str
    seconds: float
    expected: str = ""
    got: str = ""
    reason: str = ""
    exchange: list[tuple[str, str]] = field(default_factory=list)
    saw_new_start: bool = False  # a NACK NEW_START_PSN arrived during the case
    #: the target asked to close a PDC of the case (CLOSE_REQ) or closed one in error (NACK
    #: CLOSING_IN_ERR) while the case ran (:func:`_close_asked`)
    saw_close_asked: bool = False

    @property
    def warning(self) -> bool:
        return self.outcome == "fail" and self.case.level != MUST

    @property
    def bad(self) -> bool:
        """Failed, overran or crashed the tester (warnings included)."""
        return self.outcome in ("fail", "error", "timeout")

    def as_dict(self) -> dict[str, Any]:
        c = self.case
        d: dict[str, Any] = {
            "id": c.id, "area": c.area, "title": c.title, "section": c.section, "level": c.level,
            "outcome": self.outcome, "seconds": round(self.seconds, 4),
        }  # fmt: skip
        if self.bad:
            d.update(expected=self.expected, got=self.got, exchange=[{"dir": a, "hex": b} for a, b in self.exchange])
        if self.warning:
            d["warning"] = True
        if self.outcome == "skip":
            d["reason"] = self.reason
        return d


def run_case(c: Case, s: Session, deadline: float | None = None) -> Result:
    """Run one case on a drained session; a hostile case is followed by a liveness probe. At the
    monotonic time ``deadline`` a case still waiting for the target is cut short and reported as
    ``timeout`` (``--case-time``, or the end of ``--max-time``).

    Against a secure target that mints Start PSNs (RANDOM_1RTT_START, behaviour.md §2.3.2) a PDC
    whose Start PSN was assigned waits PENDING for ``New_PDC_Time`` only (milliseconds); on a
    loaded machine the case's first SYN can miss it and draw a fresh NACK ``NEW_START_PSN``. That
    is a missed precondition, not a verdict: such a case is run once more.

    So is a case that failed after the target asked to close one of its PDCs (CLOSE_REQ) or
    closed one in error: a target closes a PDC on which nothing arrived for its idle time (a
    second in uet-peer, ``PdsConfig.target_idle_ns``), and a case never pauses that long between
    two requests of its own unless the tester got no CPU meanwhile (a loaded machine). Its next
    request then met no PDC (NACK ``INV_DPDCID``): that says nothing of the target either."""
    r = _run_once(c, s, deadline)
    if r.outcome == "fail" and (getattr(s, "one_rtt", False) and r.saw_new_start or r.saw_close_asked):
        r = _run_once(c, s, deadline)
    return r


@dataclass
class CaseRun:
    """Cases run one after another on one session within the run's time: ``max_time`` seconds
    from the monotonic time ``start`` (``--max-time``; a case still running then is cut short, the
    cases after it are reported ``skip``, "not run", so the report covers every case given) and
    ``case_time`` per case (``--case-time``). ``fail_fast`` stops at the first bad case that is
    not a warning. :attr:`results` grows case by case: a run interrupted (Ctrl-C) keeps what ran."""

    session: Session
    start: float
    max_time: float
    case_time: float
    fail_fast: bool = False
    results: list[Result] = field(default_factory=list)
    out_of_time: bool = False  # the run's time ran out: not every case ran

    def run(self, cases: list[Case]) -> list[Result]:
        run_end = self.start + self.max_time
        for c in cases:
            now = time.monotonic()
            if now >= run_end:
                self.out_of_time = True
                reason = f"not run: --max-time {self.max_time:g} s reached"
                self.results.append(Result(c, "skip", 0.0, reason=reason))
                continue
            r = run_case(c, self.session, min(run_end, now + self.case_time))
            self.results.append(r)
            self.out_of_time |= r.outcome == "timeout" and time.monotonic() >= run_end
            if self.fail_fast and r.bad and not r.warning:
                break
        return self.results


def _new_start_nacked(logged: list[tuple[str, bytes]]) -> bool:
    from uet.conformance.wirekit import decode_reply

    for d, b in logged:
        if d == "received":
            rep = decode_reply(b)
            if rep.is_nack and rep.pds is not None and rep.pds.nack_code == 0x17:
                return True
    return False


def _close_asked(logged: list[tuple[str, bytes]]) -> bool:
    """The target sent a CLOSE_REQ for a PDC the case sent from, or the NACK ``CLOSING_IN_ERR``
    that ends one unanswered (behaviour.md §2.12)."""
    from uet.conformance.wirekit import decode_reply
    from uet.wire import pds as P

    ours: set[int] = set()
    for d, b in logged:
        rep = decode_reply(b)
        if rep.pds is None or rep.error is not None:
            continue
        if d == "sent":
            if sp := getattr(rep.pds, "spdcid", 0):
                ours.add(sp)
        elif d == "received" and getattr(rep.pds, "dpdcid", None) in ours:
            if rep.is_control and rep.pds.ctl_type == P.ControlType.REQ_CLOSE:
                return True
            if rep.is_nack and rep.pds.nack_code == P.NackCode.CLOSING_IN_ERR:
                return True
    return False


def _run_once(c: Case, s: Session, deadline: float | None = None) -> Result:
    s.drain()
    s.log.clear()
    t0 = time.monotonic()
    s.case_deadline = deadline
    try:
        c.fn(s)
        if c.hostile:
            try:
                s.assert_alive()
            except CheckFailed as e:
                raise CheckFailed("the target still answers after the hostile packet(s)", str(e)) from e
        outcome, expected, got, reason = "pass", "", "", ""
    except Skipped as e:
        outcome, expected, got, reason = "skip", "", "", str(e)
    except CheckFailed as e:
        outcome, expected, got, reason = "fail", e.expected, e.got, ""
    except Overran as e:
        outcome, expected, got, reason = "timeout", "the case finishes in time (--case-time, --max-time)", str(e), ""
    except Exception as e:  # noqa: BLE001 - a tester bug is reported, never hides other cases
        outcome, expected, got, reason = "error", "no exception in the tester", traceback.format_exc(limit=4), str(e)
    finally:
        s.case_deadline = None
        logged = list(s.log)
        try:
            s.cleanup()
        except Exception:  # noqa: BLE001, S110 - closing is courtesy, never a verdict
            pass
    dt = time.monotonic() - t0
    exchange = [(d, b.hex()) for d, b in logged[-12:]] if outcome in ("fail", "error", "timeout") else []
    asked = outcome == "fail" and _close_asked(logged)
    return Result(c, outcome, dt, expected, got, reason, exchange, _new_start_nacked(logged), asked)
