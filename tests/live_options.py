"""Options the live-engine tests give ``uet-run``.

``uet-run``'s default ``--dilation auto`` slows virtual time so the CPU keeps up with the scenario's
packet rate and the event loops' millisecond timer grain (uet/live/dilation.py): on the ``realtime``
profile (100 Mb/s) that is about ×70, so a run that would take 0.3 s takes 20 s of mostly waiting.
Tests that judge the live engine's *figures* (tests/test_live_sim_differential.py, the default main
job) keep the automatic factor; every other live test checks what a run delivers, reports and
counts, which does not depend on the factor, and runs in real time (``--dilation 1``).
"""

from __future__ import annotations

#: undilated live run: for tests that do not judge FCTs or rates
FAST = ["--dilation", "1"]
