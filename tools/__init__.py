"""The ``uet-*`` command-line programs (installed as ``uet.tools``).

**Ctrl-C during start-up.** A tool spends its first second or so importing (the transport, rich,
construct); a Ctrl-C in that time used to end in a KeyboardInterrupt traceback, or, when the
tool inherited an ignored SIGINT (a background job of a non-interactive shell), be lost while
the run went ahead. This package is imported a few milliseconds after the interpreter starts (its
parent ``uet`` imports only :mod:`uet.errors`), so when the process *is* one of the tools — a
console script ``uet-NAME`` or ``python -m uet.tools.NAME`` for a NAME of
:data:`TOOL_MODULES` — it notes a SIGINT instead of raising it, and
:func:`uet.tools.cli.honour_ctrl_c` (the first thing ``run_main`` does) turns a noted one into the
usual ``interrupted`` line and exit status 130. At the other end, once ``run_main`` has its
outcome printed, :func:`uet.tools.cli.settle_ctrl_c` makes a late Ctrl-C change nothing. Any
other program importing ``uet.tools`` (a test suite, a notebook) keeps its own SIGINT handling.

**Decision**: this package and :mod:`uet.tools.cli` read and set the SIGINT handler through
``_signal``, the C module :mod:`signal` is written over: the same functions, without the enums
:mod:`signal` builds when it is imported (``Signals``, ``Handlers``, ``Sigmasks``, made by scanning
its names: about 3 M instructions of a one-flow ``uet-sim`` run, which needs none of them).
``getsignal`` then gives ``SIG_IGN`` and ``SIG_DFL`` as the plain integers those enums equal, and
a tool that uses :mod:`signal` itself (``uet-run``, ``uet-peer``) imports it as before.
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the same functions and names, typed by the signal module's stubs (module docstring)
    import signal as _signal
else:
    import _signal

#: the modules behind the console scripts of pyproject.toml (``uet-NAME`` runs ``uet.tools.NAME``)
TOOL_MODULES = ("bench", "conformance", "decode", "demo", "fabric", "peer", "run", "sim")

_start_interrupts: list[int] = []
_tool_process = False  # set below: this process is one of the tools


def is_tool_process() -> bool:
    """Whether this process was started as one of the tools (:func:`started_as_tool`)."""
    return _tool_process


def started_as_tool(argv0: str, orig_argv: list[str]) -> bool:
    """Whether the process is one of the tools: ``argv0`` a ``uet-NAME`` console script, or
    ``orig_argv`` (the interpreter's own command line) ``python ... -m uet.tools.NAME``."""
    name = os.path.basename(argv0)
    if name.startswith("uet-") and name[4:] in TOOL_MODULES:
        return True
    if "-m" in orig_argv:
        i = orig_argv.index("-m")
        return i + 1 < len(orig_argv) and orig_argv[i + 1] in {f"uet.tools.{m}" for m in TOOL_MODULES}
    return False


def note_start_interrupt(signum: int, frame: FrameType | None) -> None:
    """The SIGINT handler while a tool starts: remember the Ctrl-C for ``run_main``."""
    _start_interrupts.append(signum)


def take_start_interrupt() -> bool:
    """True if a Ctrl-C came while the tool was starting (:func:`note_start_interrupt`); it is
    then taken (a second call says False)."""
    came = bool(_start_interrupts)
    _start_interrupts.clear()
    return came


def in_main_thread() -> bool:
    """Whether this is the main thread, without importing :mod:`threading` (3.8 M instructions
    a tool does not otherwise need): a thread started through it has imported it, and until it is
    imported the thread that imports it becomes its main thread, so the answer is the same."""
    threading = sys.modules.get("threading")
    return threading is None or threading.current_thread() is threading.main_thread()


_tool_process = in_main_thread() and started_as_tool(
    sys.argv[0] if sys.argv else "", list(getattr(sys, "orig_argv", []))
)
if _tool_process and _signal.getsignal(_signal.SIGINT) in (
    _signal.default_int_handler,
    _signal.SIG_IGN,
    _signal.SIG_DFL,
):
    _signal.signal(_signal.SIGINT, note_start_interrupt)
if _tool_process:  # the patterns the tool compiles, kept between runs (uet.tools.regex_store)
    from uet.tools.regex_store import install as _keep_patterns

    _keep_patterns()
