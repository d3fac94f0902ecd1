"""``--pcap``, ``--pcap-per``, ``--eventlog`` and ``--capture-max``: captures and event logs, the
same options in every tool that runs endpoints (``uet-sim``, ``uet-run`` on both engines,
``uet-peer``, ``uet-demo``).

* ``--pcap DIR``: capture files in DIR. In the simulator: pcapng with virtual (model) nanosecond
  timestamps, one file per host (``--pcap-per host``, the default there: ``h0.pcapng`` has what
  host 0 sent and received) or per switch port (``--pcap-per port``: ``leaf0-p0.pcapng``). The
  live engine's switch writes classic pcap with wall-clock time, per port by default. The frames
  are the model's real bytes, built when a frame is put on a link, with ECN marks and trims as
  the fabric left them.
* ``--eventlog FILE``: the JSON-lines event log of every endpoint (:mod:`uet.eventlog`): ``t`` in
  ns (virtual in the simulator), ``ev``, and ``host`` / ``fep`` saying whose record it is.
* ``--capture-max SIZE``: the most bytes each capture file and the event log may hold (default
  256MiB); what does not fit is counted (``pcap_dropped``, ``eventlog_dropped`` in the results),
  not written.

Live endpoints without a software fabric (``uet-peer``, ``uet-demo``) capture at their link
(:class:`uet.link.tap.TapLink`: frames built at the tap around each datagram sent and received,
wall-clock timestamps) into ``DIR/<address>.pcapng``, and write their event log to FILE with
``-<address>`` before the suffix (``uet-demo``: one folder and one log per mode). No root is
needed for any of this.

Open them with ``uet-decode h0.pcapng`` or Wireshark/tshark with the shipped Lua dissector
(``tshark -X lua_script:interop/wireshark/uet.lua -r h0.pcapng``); the event log with ``jq``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from uet.tools.cli import UsageError, size_arg

__all__ = ["Captures", "add_capture_options", "open_captures", "live_captures", "DEFAULT_CAPTURE_MAX"]

#: the default bound of each capture file and event log
DEFAULT_CAPTURE_MAX = 256 << 20


def add_capture_options(p: argparse.ArgumentParser, *, pcap: bool = True, per: bool = True) -> None:
    """Add the options (``pcap=False``: the tool already has its own ``--pcap DIR``; ``per=False``:
    a tool without a fabric, whose endpoints each write their own file)."""
    g = p.add_argument_group("captures and event logs")
    if pcap:
        g.add_argument("--pcap", metavar="DIR", help="capture files in DIR (pcapng, ns timestamps)")
    if per:
        g.add_argument(
            "--pcap-per",
            choices=("host", "port"),
            help="one capture per host or per switch port (default: per host in the simulator, per port "
            "from the live engine's switch, as it always wrote them)",
        )
    g.add_argument("--eventlog", metavar="FILE", help="JSON-lines event log of every endpoint")
    g.add_argument(
        "--capture-max",
        type=size_arg(1024),
        default=DEFAULT_CAPTURE_MAX,
        metavar="SIZE",
        help="bytes each capture file and the event log may hold (256MiB)",
    )


@dataclass
class Captures:
    """What :func:`open_captures` opened: the taps, the event log (either None when not asked)."""

    taps: Any = None
    log: Any = None

    def close(self) -> None:
        if self.taps is not None:
            self.taps.close()
        if self.log is not None:
            self.log.close()

    def report(self, result: dict[str, Any]) -> None:
        """Add the files written and what the bound left out to a tool's result dict."""
        if self.taps is not None:
            result["pcaps"] = self.taps.paths()
            result["pcap_dropped"] = self.taps.dropped
        if self.log is not None:
            result["eventlog"] = self.log.path
            result["eventlog_records"] = self.log.records
            result["eventlog_dropped"] = self.log.dropped


def open_captures(args: argparse.Namespace, *, epoch_ns: int = 0, transport: str | None = None) -> Captures:
    """The taps and event log the options ask for (UsageError when a file cannot be opened).
    ``transport`` (``uet-run --transport both``): captures in ``DIR/<transport>``, the event log
    with ``-<transport>`` before its suffix."""
    cap = Captures()  # the capture modules load only where a capture is asked for
    try:
        if getattr(args, "pcap", None):
            from uet.fabric.telemetry_io import PcapTaps

            where = os.path.join(args.pcap, transport) if transport else args.pcap
            per = getattr(args, "pcap_per", None) or "host"
            cap.taps = PcapTaps(where, epoch_ns, per=per, fmt="pcapng", max_bytes=args.capture_max)
        if getattr(args, "eventlog", None):
            from uet.eventlog import EventLog

            root, ext = os.path.splitext(args.eventlog)
            path = f"{root}-{transport}{ext}" if transport else args.eventlog
            cap.log = EventLog(path, max_bytes=args.capture_max)
    except OSError as e:
        cap.close()
        raise UsageError(f"cannot write {e.filename or 'capture'}: {e.strerror or e}") from None
    return cap


def live_captures(pcap: str | None, eventlog: str | None, capture_max: int, address: str) -> tuple[Any, Any]:
    """For one live endpoint at ``address``: ``(taps, event log)`` (either None when not asked),
    the taps for :class:`~uet.link.tap.TapLink` (``pcap``: a folder), the log at ``eventlog`` with
    ``-<address>`` before its suffix. The caller closes both."""
    from uet.fabric.telemetry_io import PcapTaps

    from uet.eventlog import EventLog

    taps = PcapTaps(pcap, 0, per="host", fmt="pcapng", max_bytes=capture_max) if pcap else None
    log = None
    if eventlog:
        root, ext = os.path.splitext(eventlog)
        log = EventLog(f"{root}-{address}{ext}", max_bytes=capture_max)
    return taps, log
