"""Run Python code in a child interpreter with or without the compiled build (``UET_COMPILED``),
for the tests that compare the compiled modules with pure Python. Other tests may import it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from typing import Any

from uet import compiled

__all__ = ["have_current_build", "run_child"]


def have_current_build() -> bool:
    """A build from the current sources for this interpreter is there."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compiled.current() is not None


def run_child(code: str, flag: str, timeout: float) -> dict[str, Any]:
    """The JSON object ``code`` prints on stdout, run with ``UET_COMPILED=flag``; a warning (a
    stale or missing build) is an error there, so the child never silently runs pure Python."""
    env = {**os.environ, compiled.ENV: flag}
    out = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    ).stdout
    res: dict[str, Any] = json.loads(out)
    return res
