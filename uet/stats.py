"""Summary statistics the tools report, defined once.

:func:`percentile` is the nearest-rank percentile: the smallest sample with at least ``p`` % of
the samples at or below it (no interpolation, so every figure reported is a measured value).
The workloads' FCT summary, ``uet-bench``'s latency columns and the switch process's timer
lateness all use it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["percentile"]


def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0–100) of ``values`` (0.0 when there are none)."""
    s = sorted(values)
    if not s:
        return 0.0
    return s[max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))]
