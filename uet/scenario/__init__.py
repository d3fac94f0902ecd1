"""One scenario model for every engine and tool: the tables a run is given
(:mod:`uet.scenario.model`) and every default derived from their physics
(:mod:`uet.scenario.derive`)."""

from uet.scenario.derive import Physics, Settings, derive
from uet.scenario.model import ENGINES, Scenario, deep_update, run_defaults

__all__ = ["ENGINES", "Physics", "Scenario", "Settings", "deep_update", "derive", "run_defaults"]
