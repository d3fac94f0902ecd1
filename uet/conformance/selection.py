"""Which cases a conformance run runs: ``uet-conformance -k EXPR``, case by case."""

from __future__ import annotations

from collections.abc import Sequence

from uet.conformance.case import Case

__all__ = ["select"]


def select(cases: list[Case], exprs: Sequence[str]) -> list[Case]:
    """The cases whose id, area or title contains one of ``exprs`` (every case when none is given),
    less those containing an expression written ``not EXPR``; case-insensitive, order kept."""
    inc = [e.lower() for e in exprs if not e.lower().startswith("not ")]
    exc = [e[4:].strip().lower() for e in exprs if e.lower().startswith("not ")]

    def text(c: Case) -> str:
        return f"{c.id} {c.area} {c.title}".lower()

    out = [c for c in cases if not inc or any(e in text(c) for e in inc)]
    return [c for c in out if not any(e in text(c) for e in exc)]
