"""Command-line plumbing shared by every ``uet-*`` tool.

One size parser and one rate parser, one argument parser class whose usage errors are a single
line, and :func:`run_main`, the wrapper every entry point runs its body in, so that all tools
behave alike:

* usage or configuration error: one stderr line ``tool: error: ...``, exit status 2;
* a run that failed: exit status 1 (the tool says why);
* Ctrl-C: ``tool: interrupted`` (after any partial results the tool printed), exit status 130,
  whatever SIGINT disposition the tool inherited (see :func:`honour_ctrl_c`);
* stdout closed by the reader (``uet-bench codec --json | head``): no message, the rest of the
  output discarded, exit status 1 (the handling the Python documentation prescribes for
  SIGPIPE: point stdout at ``/dev/null`` so the interpreter's final flush cannot fail again);
* never a Python traceback for any of these.

Units (the same in every tool):

* sizes are bytes: a whole number with an optional decimal (``k``, ``M``, ``G``: powers of 1000)
  or binary (``KiB``, ``MiB``, ``GiB``: powers of 1024) suffix; ``B`` may follow (``64MB``);
* rates are bit/s: ``100M``, ``1G``, ``100G``, ``25Gbit``, ``25Gbit/s``, ``10Gbps``, ``10e6``,
  ``100000000`` (decimal multipliers only: link rates are never binary);
* probabilities are numbers in [0, 1].
"""

from __future__ import annotations

import argparse
import gettext
import ipaddress
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from uet.config_file import parse_rate, parse_size

if TYPE_CHECKING:  # the same functions and names, typed by the signal module's stubs (uet.tools)
    import signal as _signal
else:
    import _signal

__all__ = [
    "ArgumentParser",
    "RunFailed",
    "UsageError",
    "add_version",
    "format_bytes",
    "output_dir",
    "output_file",
    "warn_low_rate",
    "format_rate",
    "format_cell",
    "format_number",
    "format_seconds",
    "honour_ctrl_c",
    "parse_rate",
    "parse_seeds",
    "parse_size",
    "plain_text",
    "port_number",
    "probability",
    "quiet_interrupt",
    "rate_arg",
    "report_usage_error",
    "run_main",
    "settle_ctrl_c",
    "size_arg",
    "table_console",
    "transport_label",
    "int_arg",
    "float_arg",
    "version",
    "yes_no",
]


def transport_label(name: str) -> str:
    """:func:`uet.transport.transport_label`, imported when first called: ``uet.transport`` defines
    the transport contract's Protocols (about 1.4 M instructions at import), which a tool that only
    parses its arguments (every ``uet-sim`` run) does not need."""
    from uet.transport import transport_label as label

    return label(name)


def _argparse_gettext(message: str) -> str:
    """``gettext.gettext`` for :mod:`argparse`, without the catalogue search when there is no
    catalogue folder to search (**decision**).

    argparse translates each of its own texts (``options``, ``show this help message and exit``,
    ...) through ``gettext.gettext`` as it builds a parser, and each call looks for a catalogue
    again: it imports :mod:`locale` and expands the ``LANGUAGE``/``LC_*``/``LANG`` names before it
    looks for ``<folder>/<language>/LC_MESSAGES/<domain>.mo`` and finds none (about 4.6 M
    instructions of a one-flow ``uet-sim`` run; the interpreter ships no ``.mo`` files). When the
    folder gettext would look in (the one bound to the current domain, else its default) does not
    exist, no catalogue can be found there and the text comes back unchanged, as gettext would
    return it; otherwise (a folder there, a domain bound elsewhere) gettext does exactly what it
    did."""
    domain = gettext._current_domain  # type: ignore[attr-defined]  # gettext's own state, read as dgettext reads it
    folder = gettext._localedirs.get(domain) or gettext._default_localedir  # type: ignore[attr-defined]
    known = _FOLDER_EXISTS.get(folder)
    if known is None:
        known = _FOLDER_EXISTS[folder] = os.path.isdir(folder)
    return gettext.dgettext(domain, message) if known else message


#: whether each catalogue folder :func:`_argparse_gettext` was asked about exists
_FOLDER_EXISTS: dict[str, bool] = {}

if getattr(argparse, "_", None) is gettext.gettext:  # argparse's own binding, not replaced by anyone else
    argparse._ = _argparse_gettext  # type: ignore[attr-defined]


class UsageError(Exception):
    """A mistake in the command line or the configuration: one line, exit status 2."""


class RunFailed(Exception):
    """The run could not be carried out (after a valid command line): one line, exit status 1."""


def format_rate(bps: float) -> str:
    """``100_000_000`` → ``"100 Mbit/s"`` (the unit every tool prints)."""
    for unit, scale in (("Tbit/s", 1e12), ("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= scale:
            return f"{bps / scale:g} {unit}"
    return f"{bps:g} bit/s"


def output_file(path: str, option: str) -> None:
    """Check before the run that ``option``'s file ``path`` can be written: its folder exists,
    it is not a folder itself, and it is writable (a run that ended in a traceback at the end
    because ``--csv`` named a missing folder lost its results). Raises :class:`UsageError`."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: no folder {folder}")
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise UsageError(f"{option} {path}: not writable")


def output_dir(path: str, option: str) -> None:
    """Make ``option``'s output folder ``path`` (and its parents, as ``mkdir -p``) before the run,
    or raise :class:`UsageError` saying why it cannot be."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a file, not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{option} {path}: cannot make the folder ({e.strerror or e})") from None
    if not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path}: not writable")


def warn_low_rate(prog: str, option: str, bps: float) -> None:
    """One stderr warning for a rate that is most likely a missing unit (``--rate 100`` is
    100 bit/s: every flow then takes minutes and fails)."""
    if bps < 1_000_000:
        n = f"{bps:g}"
        sys.stderr.write(f"{prog}: warning: {option} {n} is {format_rate(bps)}; did you mean {n}M or {n}G?\n")


def format_bytes(n: float) -> str:
    """``3145728`` → ``"3.00 MiB"``: binary units, three significant figures (iperf3's style)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            x = n / scale
            return f"{x:,.0f} {unit}" if x >= 100 else f"{x:.1f} {unit}" if x >= 10 else f"{x:.2f} {unit}"
    return f"{int(n):,} B"


def format_seconds(s: float | None) -> str:
    """A duration in the unit that fits: ``9.969e-05`` → ``"99.7 µs"``, ``0.25`` → ``"250 ms"``,
    ``12.5`` → ``"12.5 s"``; None (no figure) → ``"–"``."""
    if s is None:
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:,.3g} {unit}" if s / scale < 1000 else f"{s / scale:,.0f} {unit}"
    return f"{s * 1e9:.3g} ns" if s else "0 s"


def format_number(v: float | None) -> str:
    """A figure for a table: thousands separators, four significant figures, never an exponent:
    ``12345.6`` → ``"12,346"``, ``1.23456`` → ``"1.235"``, ``0.0000123`` → ``"0.0000123"``;
    None (no figure) → ``"–"``."""
    if v is None:
        return "–"
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    decimals = max(0, 3 - math.floor(math.log10(abs(v))))  # four significant figures
    return f"{v:.{decimals}f}".rstrip("0").rstrip(".")


def format_cell(v: Any) -> str:
    """Any value of a result dict as a table cell: yes/no for a flag, "–" for no value,
    :func:`format_number` for a figure, the text itself otherwise (JSON keeps the raw value)."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return yes_no(v)
    if isinstance(v, int | float):
        return format_number(v)
    return str(v)


def _bounded(kind: str, value: float, lo: float | None, hi: float | None, text: str) -> None:
    def num(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:g}"

    if lo is not None and value < lo:
        raise argparse.ArgumentTypeError(f"{text!r}: {kind} must be at least {num(lo)}")
    if hi is not None and value > hi:
        raise argparse.ArgumentTypeError(f"{text!r}: {kind} must be at most {num(hi)}")


def size_arg(lo: int | None = 0, hi: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: a size in bytes within [lo, hi]."""

    def conv(text: str) -> int:
        try:
            v = parse_size(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        _bounded("a size", v, lo, hi, text)
        return v

    conv.__name__ = "size"
    return conv


def rate_arg(lo: float = 1, hi: float | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: a rate in bit/s, at least ``lo``."""

    def conv(text: str) -> int:
        try:
            v = parse_rate(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        _bounded("a rate", v, lo, hi, text)
        return v

    conv.__name__ = "rate"
    return conv


def int_arg(lo: int | None = None, hi: int | None = None) -> Callable[[str], int]:
    """An argparse ``type=``: a whole number within [lo, hi]."""

    def conv(text: str) -> int:
        try:
            v = int(text) if text.strip().lstrip("+-").isdigit() else int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        _bounded("the value", v, lo, hi, text)
        return v

    conv.__name__ = "integer"
    return conv


def float_arg(lo: float | None = None, hi: float | None = None, *, open_lo: bool = False) -> Callable[[str], float]:
    """An argparse ``type=``: a finite number within [lo, hi] (``open_lo``: strictly above lo)."""

    def conv(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if v != v or v in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
        if open_lo and lo is not None and v <= lo:
            raise argparse.ArgumentTypeError(f"{text!r}: the value must be more than {lo:g}")
        _bounded("the value", v, lo, hi, text)
        return v

    conv.__name__ = "number"
    return conv


def parse_seeds(text: str) -> list[int]:
    """An argparse ``type=``: ``1,2,3`` → [1, 2, 3], 1 to 100 seeds (``uet-sim --seeds``)."""
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated integers, e.g. 1,2,3") from None
    if not seeds or any(s < 0 for s in seeds) or len(seeds) > 100:
        raise argparse.ArgumentTypeError(f"{text!r}: 1 to 100 non-negative integers")
    return seeds


def ip_address_arg(text: str) -> str:
    """An argparse ``type=``: one IPv4 or IPv6 address, as text (a port goes in its own option)."""
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        hint = " (the port is given with --port)" if text.count(":") == 1 else ""
        raise argparse.ArgumentTypeError(f"not an IP address: {text!r}{hint}") from None


ip_address_arg.__name__ = "IP address"

probability = float_arg(0.0, 1.0)
probability.__name__ = "probability"
port_number = int_arg(0, 65535)
port_number.__name__ = "port"


def table_console(width: int, *, file: Any = None) -> Any:
    """A rich ``Console`` for a tool's tables: the terminal's width on a terminal, ``width`` columns
    when stdout is a pipe or a file (rich's own default there is 80 columns, which wraps every cell
    of a wide table onto several lines and cuts its names short). rich is imported here, on first
    use, so that a run printing no table does not load it."""
    from rich.console import Console

    return Console(file=file, width=None if sys.stdout.isatty() else width)


def yes_no(flag: bool) -> str:
    """How tables show a boolean such as ``intact`` (JSON keeps true/false)."""
    return "yes" if flag else "no"


def version() -> str:
    """The installed package's version (package metadata), or ``unknown``."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as _v

    try:
        return _v("uet")
    except PackageNotFoundError:  # pragma: no cover - running from an uninstalled tree
        return "unknown"


class _VersionAction(argparse._VersionAction):
    """argparse's ``version`` action, reading the package metadata only when ``--version`` is
    given: importing :mod:`importlib.metadata` costs every tool's start-up some 30 ms."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kw: Any) -> None:
        self.version = f"{parser.prog.split()[0]} {version()}"
        super().__call__(parser, *args, **kw)


def add_version(p: argparse.ArgumentParser) -> None:
    """``--version`` printing ``prog VERSION``."""
    p.add_argument("--version", action=_VersionAction)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors raise :class:`UsageError` (one line, exit 2
    through :func:`run_main`) instead of printing the usage block; subparsers are of the same
    class. Adds ``--version`` to the top-level parser."""

    def __init__(self, *args: Any, version_option: bool = True, **kw: Any) -> None:
        super().__init__(*args, **kw)
        if version_option:
            add_version(self)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")

    def _get_formatter(self) -> argparse.HelpFormatter:
        # argparse makes a formatter for every add_argument (to check its metavar), and a formatter
        # without a width imports shutil (with bz2 and lzma: about 5 M instructions of a one-flow
        # uet-sim run's start-up) to ask for the terminal's; the same width, asked without it
        formatter_class: Callable[..., argparse.HelpFormatter] = self.formatter_class
        return formatter_class(prog=self.prog, width=terminal_columns() - 2)

    def format_help(self) -> str:
        return plain_text(super().format_help())


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing shutil: ``COLUMNS`` when set and
    positive, else the width of the terminal on standard output, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


#: reST markup a description taken from a module docstring carries: ``literal``, :role:`target`
#: (a pattern :mod:`re` compiles at the first help text: a run prints none, and compiling it cost
#: about 0.5 M instructions of every tool's start-up)
_REST = r"``(.+?)``|:[a-z]+:`~?(.+?)`"


def plain_text(text: str) -> str:
    """Help text as a terminal shows it: ``x`` and :func:`x` become x (the descriptions of the
    tools are the first paragraph of their module docstrings, written for the documentation)."""
    return re.sub(_REST, lambda m: m.group(1) or m.group(2), text)


def _stderr_line(prog: str, text: str) -> None:
    line = " ".join(str(text).split())  # one line whatever the exception text holds
    try:
        sys.stderr.write(f"{prog}: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # pragma: no cover - stderr itself gone
        pass


def _discard_stdout() -> None:
    """After EPIPE on stdout: point it at /dev/null so the interpreter's exit flush succeeds."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover
        pass


def quiet_interrupt() -> None:
    """Call where Ctrl-C is caught: a coroutine created but not yet started when it came is
    garbage now, and its "never awaited" warning says nothing to the user."""
    warnings.filterwarnings("ignore", "coroutine .* was never awaited", RuntimeWarning)


def honour_ctrl_c() -> None:
    """Make SIGINT raise :class:`KeyboardInterrupt` in this process, whatever it inherited.

    A process inherits an *ignored* SIGINT from its parent (a non-interactive shell ignores it in
    every background job it starts, ``cmd &``; so does anything launched from such a job, a CI
    script's test suite included), and Python then leaves it ignored; it also inherits the
    parent's signal mask, in which SIGINT may be blocked. Either way the tool's Ctrl-C rule
    (module docstring) silently lapsed: a SIGINT sent to the tool was dropped, or honoured only
    when it happened to land while some part of the tool (``bench.procs.spawn``) had a handler
    of its own installed, and the run went on to exit 0. The live launcher, the fabric and the
    peer always handled it (``loop.add_signal_handler`` overrides an inherited ignore), so every
    tool now does the same. A Ctrl-C that came while the tool was starting (noted by
    :mod:`uet.tools`, before ``run_main`` ran) is raised here. Main thread only (signal handlers
    can be set nowhere else)."""
    from uet.tools import in_main_thread, is_tool_process, note_start_interrupt, take_start_interrupt

    if not in_main_thread():
        return
    if _signal.getsignal(_signal.SIGINT) in (_signal.SIG_IGN, _signal.SIG_DFL, note_start_interrupt):
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGINT})
    if is_tool_process() and not isinstance(sys.unraisablehook, _KeepSwallowedCtrlC):
        sys.unraisablehook = _KeepSwallowedCtrlC(sys.unraisablehook)
    if take_start_interrupt():
        raise KeyboardInterrupt


#: Ctrl-Cs swallowed where Python cannot raise (:class:`_KeepSwallowedCtrlC`) and not raised
#: again since; ``settle_ctrl_c`` takes what is left
_swallowed_ctrl_c: list[int] = []


class _KeepSwallowedCtrlC:
    """``sys.unraisablehook`` in a tool's process: a Ctrl-C is never lost where Python cannot
    raise it.

    SIGINT raises :class:`KeyboardInterrupt` in whatever Python code the main thread runs at
    that instant. When that is a weakref callback, a ``__del__`` or a garbage-collection
    callback, Python cannot propagate it: it printed "Exception ignored in ..." with a traceback
    and the run went on as if no Ctrl-C had come (seen about once in 1,000 runs of the Ctrl-C
    tests). Here such a Ctrl-C is noted, printed nowhere, and raised again in the tool's own
    code: the SIGINT handler is wrapped for one call (:func:`_raise_swallowed_ctrl_c`) and a
    new thread makes SIGINT pending again (``_thread.interrupt_main``; made from the hook itself
    it would land inside the hook, where it is swallowed again). Should the run reach its end
    first (its handler is ignored from ``settle_ctrl_c`` on, and the pending SIGINT with it),
    ``run_main`` reports the noted Ctrl-C instead: ``interrupted``, exit status 130. Any other
    unraisable exception goes to the hook that was there before."""

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.previous(unraisable)
            return
        from uet.tools import in_main_thread

        _swallowed_ctrl_c.append(_signal.SIGINT)
        handler = _signal.getsignal(_signal.SIGINT)
        if not in_main_thread() or not callable(handler) or isinstance(handler, _RaiseSwallowedCtrlC):
            return  # not raised again (SIG_IGN: the run is settling) or already on its way
        _signal.signal(_signal.SIGINT, _RaiseSwallowedCtrlC(handler))
        import _thread

        _thread.start_new_thread(_thread.interrupt_main, ())


class _RaiseSwallowedCtrlC:
    """The SIGINT handler for one call after a swallowed Ctrl-C: puts back the tool's own
    handler and raises the Ctrl-C (:class:`_KeepSwallowedCtrlC`)."""

    def __init__(self, handler: Callable[[int, Any], object]) -> None:
        self.handler = handler

    def __call__(self, signum: int, frame: Any) -> None:
        _signal.signal(_signal.SIGINT, self.handler)
        _swallowed_ctrl_c.clear()
        raise KeyboardInterrupt


def settle_ctrl_c() -> bool:
    """The tool's outcome is decided and printed (the end of ``run_main``): from here to the
    process's exit a Ctrl-C changes nothing, and the exit status stays the run's. Before, a
    Ctrl-C in that time (interpreter shutdown: tens of milliseconds, more under load) killed the
    process silently, since Python gives SIGINT its default action back while it shuts down: a
    complete run, its results printed, then ended by SIGINT without a word. Only in a tool's own
    process (:func:`uet.tools.is_tool_process`); its children are stopped by then.

    Also forgets a KeyboardInterrupt that CPython noted as unhandled although ``run_main`` (or
    the tool) caught it: when one is raised inside code run from a *string* by ``exec`` or
    ``eval`` (``collections.namedtuple`` and ``dataclasses`` make their methods so, and a tool
    imports modules defining them while it runs), CPython 3.11 sets its "unhandled
    KeyboardInterrupt" flag, never clears it when the exception is caught, and at exit kills the
    process with SIGINT (bpo-1054041's exit path): ``uet-bench pair`` printed ``interrupted``,
    then died by SIGINT instead of exiting 130. Evaluating any string clears that flag.

    Returns whether a Ctrl-C that Python swallowed (:class:`_KeepSwallowedCtrlC`) was never
    raised again, so ``run_main`` still owes the user its ``interrupted``."""
    from uet.tools import in_main_thread, is_tool_process

    if is_tool_process() and in_main_thread():
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    eval("None")  # noqa: S307 - a constant; evaluating a string is what clears the flag
    swallowed = bool(_swallowed_ctrl_c)
    _swallowed_ctrl_c.clear()
    return swallowed


def _settle_at_the_end() -> bool:
    """:func:`settle_ctrl_c` however late a Ctrl-C comes: one that lands after the body's outcome
    is decided but before SIGINT is ignored (the calls between, a pending SIGINT raised again,
    :class:`_KeepSwallowedCtrlC`) is one ``run_main`` reports, not a traceback."""
    while True:
        try:
            return settle_ctrl_c()
        except KeyboardInterrupt:
            _swallowed_ctrl_c.append(_signal.SIGINT)


def report_usage_error(prog: str, e: Exception) -> int:
    """Print a usage error the shared way (one line) and return its exit status, 2."""
    _stderr_line(prog, f"error: {e}")
    return 2


def run_main(
    prog: str,
    body: Callable[[Sequence[str] | None], int],
    argv: Sequence[str] | None = None,
    *,
    early_version: bool = False,
) -> int:
    """Run a tool's ``body(argv)`` with the shared exit-status rules (module docstring).

    ``body`` returns the exit status; it raises :class:`UsageError` for a usage or configuration
    mistake and :class:`RunFailed` for a run that could not be carried out.

    ``early_version``: a lone ``--version`` is answered here, as the tool's parser (whose ``prog``
    is ``prog``) answers it, before ``body`` builds a parser whose choices (workloads, profiles)
    import most of the package."""
    if early_version and list(sys.argv[1:] if argv is None else argv) == ["--version"]:
        sys.stdout.write(f"{prog} {version()}\n")
        return 0
    try:
        code = _run_body(prog, body, argv)
    finally:
        swallowed = _settle_at_the_end()
    if swallowed and code != 130:
        quiet_interrupt()
        _stderr_line(prog, "interrupted")
        return 130
    return code


def _run_body(prog: str, body: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None) -> int:
    try:
        honour_ctrl_c()
        code = body(argv)
        sys.stdout.flush()
        return code
    except UsageError as e:
        return report_usage_error(prog, e)
    except RunFailed as e:
        _stderr_line(prog, f"failed: {e}")
        return 1
    except KeyboardInterrupt:
        quiet_interrupt()
        _stderr_line(prog, "interrupted")
        return 130
    except BrokenPipeError:
        _discard_stdout()
        return 1
    except SystemExit as e:  # argparse --help / --version
        if e.code is None or isinstance(e.code, int):
            return int(e.code or 0)
        _stderr_line(prog, f"error: {e.code}")
        return 2
