"""Project-wide pytest configuration.

Hypothesis: the machine is shared by several test runs, so per-example deadlines would only
measure the neighbours' load; they are off, and the "too slow" health check with them. Test files
set their own ``max_examples`` to keep the whole suite fast. ``HYPOTHESIS_PROFILE=derandomized``
makes every run draw the same examples (for bisecting a failure).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("derandomized", settings.get_profile("default"), derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
