"""Black-box conformance suite for UET endpoints (``uet-conformance``; ``uet-peer`` is the
project's own endpoint to point it at). See :mod:`uet.conformance.case` for what a case is,
:mod:`uet.conformance.session` for how packets travel, and the ``cases`` package for the cases.
"""

from __future__ import annotations

from uet.conformance.case import CASES, Case

__all__ = ["all_cases"]


def all_cases() -> list[Case]:
    """Every registered case, in registration order (areas in spec order)."""
    from uet.conformance.cases import AREA_ORDER

    rank = {a: i for i, a in enumerate(AREA_ORDER)}
    return sorted(CASES.values(), key=lambda c: rank.get(c.area, len(rank)))
