"""The simulator's progress display: virtual time, what the run needs, the speed and an ETA.

``uet-sim`` and ``uet-run --engine sim`` show, on stderr, as the run goes::

    uet-sim: virtual 37.2 µs of ≈ 168 µs (22 %), 312 of 4,096 messages, 1.5 µs per second, ETA 1 min 28 s

* **virtual time** advanced so far (the engine's clock);
* **the virtual time the run needs**, estimated by the simulator library
  (:func:`uet.sim.progress.estimate_ns`: the workload's lower bound from the bottleneck rates, or the
  extrapolation from the payload received so far). Once the run is past every estimate the line
  says so and gives no ETA rather than a wrong one;
* **the speed** measured over the last :data:`WINDOW_S` seconds of wall time (virtual time per
  second, from the samples at which a line was shown), and **the ETA**: the virtual time left at that speed.

On a terminal the line is redrawn in place (every :data:`TTY_EVERY_S`) and erased at the end;
otherwise (``--progress`` into a file or a pipe) one line every :data:`LINE_EVERY_S`, the first
at once. The wall clock is a parameter (tests drive it); nothing here touches the simulation.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable

from uet.tools.cli import format_seconds

from uet.sim.progress import Progress, estimate_ns

__all__ = [
    "LINE_EVERY_S",
    "TTY_EVERY_S",
    "WINDOW_S",
    "SimProgress",
    "format_duration",
    "progress_lines",
]

#: the speed is measured over this much wall time (older samples are dropped)
WINDOW_S = 30.0
#: a terminal's line is redrawn at most this often
TTY_EVERY_S = 0.2
#: a file or pipe gets a line at most this often
LINE_EVERY_S = 5.0


def format_duration(s: float) -> str:
    """A wall-clock duration for an ETA: ``12 s``, ``5 min 40 s``, ``2 h 05 min``."""
    s = max(0, round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600:,} h {s % 3600 // 60:02d} min"


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


class SimProgress:
    """``simulate``'s ``on_progress``: writes the progress line (module docstring) to ``write``.

    ``tty``: redraw one line in place; ``clock``: the wall clock in seconds (``time.monotonic``)."""

    def __init__(
        self,
        prog: str,
        *,
        tty: bool,
        write: Callable[[str], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prog = prog
        self.tty = tty
        self.write = write or _stderr
        self.clock = clock
        self.every = TTY_EVERY_S if tty else LINE_EVERY_S
        self.samples: deque[tuple[float, int]] = deque()
        self.last: float | None = None
        self.shown = False

    def rate(self) -> float | None:
        """Virtual ns per wall second over the window, None before two samples."""
        if len(self.samples) < 2:
            return None
        (w0, v0), (w1, v1) = self.samples[0], self.samples[-1]
        return (v1 - v0) / (w1 - w0) if w1 > w0 else None

    def line(self, p: Progress) -> str:
        """The progress line for ``p`` at the measured speed."""
        est = estimate_ns(p)
        rate = self.rate()
        parts = [f"virtual {format_seconds(p.now_ns / 1e9)}"]
        if est is None:
            parts[0] += " (past the estimate)"
        else:
            parts[0] += f" of ≈ {format_seconds(est / 1e9)} ({100 * p.now_ns // est} %)"
        parts.append(f"{p.messages:,} of {p.messages_total:,} messages")
        if rate is not None and rate > 0:
            parts.append(f"{format_seconds(rate / 1e9)} per second")
            if est is not None:
                parts.append(f"ETA {format_duration((est - p.now_ns) / rate)}")
        else:
            parts.append("speed being measured")
        return f"{self.prog}: " + ", ".join(parts)

    def __call__(self, p: Progress) -> None:
        now = self.clock()
        if self.last is not None and now - self.last < self.every:
            return  # the engine calls often (every 16 instants): nothing to do between two lines
        self.last = now
        self.samples.append((now, p.now_ns))
        while len(self.samples) > 2 and now - self.samples[1][0] >= WINDOW_S:
            self.samples.popleft()
        text = self.line(p)
        if self.tty:
            self.write("\r\x1b[K" + text)
        else:
            self.write(text + "\n")
        self.shown = True

    def close(self) -> None:
        """Erase the terminal's line (the results follow on stdout)."""
        if self.tty and self.shown:
            self.write("\r\x1b[K")
        self.shown = False


def progress_lines(prog: str, show: bool) -> Callable[[], SimProgress] | None:
    """:func:`uet.sim.runs.simulate_runs`'s ``progress``: a fresh line on stderr for each run,
    prefixed ``prog`` (None when not ``show``)."""
    if not show:
        return None
    return lambda: SimProgress(prog, tty=sys.stderr.isatty())
