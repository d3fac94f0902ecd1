"""Telemetry out of the switch process: JSON lines, PNG plots and per-port pcap taps.

* :class:`JsonLines` writes the model's telemetry records (``uet.fabric.model.telemetry``: queue
  depth, ECN marks, drops, trims, PFC frames, watchdog events, port bytes) one JSON object per
  line, each with ``event`` (the record kind) and ``t`` (ns of model time since the fabric
  started), in the order the model produced them; it can keep the dicts for plotting.
* :func:`plot` renders ``queue_depth.png`` (bytes per (switch, port, TC) queue over time) and
  ``throughput.png`` (transmit rate per switch port in about 100 time bins, from the cumulative
  ``port_bytes`` samples)
  with matplotlib's Agg backend (the ``plot`` extra).
* :class:`PcapTaps` writes one capture (Ethernet link type, nanosecond timestamps) per switch
  port with both directions of that port's link, or per host: a frame sent at the time it starts
  on the link, a frame received at the time it finished arriving (:func:`install_taps`).
  Timestamps are the fabric's start time (wall clock in the switch process, 0 in the simulator)
  plus model time.
"""

from __future__ import annotations

import bisect
import json
import os
from collections import defaultdict
from collections.abc import Iterable
from typing import IO, Any

from uet.pcap import PcapngWriter, PcapWriter

__all__ = ["UNITS", "switch_thresholds", "JsonLines", "PcapTaps", "install_taps", "plot", "read_jsonl", "throughput"]


class JsonLines:
    """JSON-lines sink for telemetry dicts; ``path`` None writes nothing, ``keep`` keeps a copy."""

    def __init__(self, path: str | os.PathLike[str] | None, *, keep: bool = False) -> None:
        if path and os.path.dirname(os.fspath(path)):
            os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
        self._f: IO[str] | None = open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
        self.keep = keep
        self.kept: list[dict[str, Any]] = []
        self.count = 0

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        f = self._f
        keep = self.keep
        for r in records:
            self.count += 1
            if f is not None:
                f.write(json.dumps(r, separators=(",", ":")))
                f.write("\n")
            if keep:
                self.kept.append(r)

    def flush(self) -> None:
        if self._f is not None:
            self._f.flush()

    def close(self) -> None:
        if self._f is not None and not self._f.closed:
            self._f.close()


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every JSON object of a JSON-lines file (blank lines skipped)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


#: Time units the plots can use: name → nanoseconds. The live fabric runs for seconds at
#: 100 Mb/s (ms), the simulator for microseconds at 100 Gb/s and more (µs).
UNITS = {"ms": 1_000_000, "µs": 1_000}


def plot(
    records: list[dict[str, Any]],
    outdir: str | os.PathLike[str],
    *,
    top: int = 12,
    thresholds: dict[str, int] | None = None,
    unit: str = "ms",
    label: str = "",
) -> list[str]:
    """Write ``queue_depth.png`` and ``throughput.png`` into ``outdir``; returns the paths written.
    ``label`` (e.g. the transport, ``UET`` or ``RoCEv2``) begins each title, so two runs' figures
    side by side are told apart; rates and depths are drawn from 0.

    Only the ``top`` busiest queues (by peak depth) and ports (by bytes sent) are drawn, so a
    large fabric stays readable; the legend's title says so when some are left out.
    ``thresholds`` (label → bytes, e.g. the ECN ``kmin``/``kmax`` and the PFC XOFF of
    :func:`switch_thresholds`) are drawn as dashed horizontal lines on the queue plot. A figure
    with nothing to draw (no queue ever held a byte, no port sent one) is not written: no empty
    axes. ``unit`` (:data:`UNITS`) is the time axis's unit, and the shortest throughput bin.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale = UNITS[unit]
    os.makedirs(outdir, exist_ok=True)
    queues: dict[tuple[str, int, int], list[tuple[float, int]]] = defaultdict(list)
    ports: dict[tuple[str, int], list[tuple[float, int]]] = defaultdict(list)
    for r in records:
        ev = r.get("event")
        if ev == "queue_depth":
            queues[(r["node"], r["port"], r["tc"])].append((r["t"] / scale, r["bytes"]))
        elif ev == "port_bytes":
            ports[(r["node"], r["port"])].append((r["t"] / scale, r["tx_bytes"]))
    queues = {k: sorted(v) for k, v in queues.items() if any(b for _, b in v)}
    ports = {k: sorted(v) for k, v in ports.items() if len({b for _, b in v}) > 1}
    out = []
    window = _active_window(queues, ports)
    tab20 = plt.get_cmap("tab20")
    colours = [tab20(i) for i in range(tab20.N)]  # up to 20 distinct lines (the default cycle repeats after 10)

    if queues:
        fig, ax = plt.subplots(figsize=(10, 5))
        ax.set_prop_cycle(color=colours)
        busiest = sorted(queues, key=lambda k: -max(b for _, b in queues[k]))[:top]
        for key in sorted(busiest):
            pts = queues[key]
            ax.step(
                [t for t, _ in pts], [b / 1024 for _, b in pts], where="post", label=f"{key[0]}:{key[1]} tc{key[2]}"
            )
        for i, (name, nbytes) in enumerate(sorted((thresholds or {}).items(), key=lambda kv: kv[1])):
            ax.axhline(nbytes / 1024, linestyle="--", linewidth=1, color=("0.3", "0.55", "tab:red", "0.7")[i % 4])
            ax.annotate(
                name, (1.0, nbytes / 1024), xycoords=("axes fraction", "data"), ha="right", va="bottom", fontsize=7
            )
        if window:
            ax.set_xlim(*window)
        ax.set_xlabel(f"time ({unit})")
        ax.set_ylabel("queue depth (KiB)")
        ax.set_ylim(bottom=0)
        ax.set_title(_titled(label, "Egress queue depth per port and traffic class"))
        ax.legend(fontsize="small", ncol=2, title=_shown(len(busiest), len(queues), "queues"), title_fontsize="small")
        out.append(_save(fig, outdir, "queue_depth.png"))

    if ports:
        out.append(
            throughput(
                ports,
                outdir,
                "throughput.png",
                _titled(label, "Throughput per switch port"),
                top=top,
                unit=unit,
                window=window,
            )
        )
    return out


def throughput(
    ports: dict[tuple[str, int], list[tuple[float, int]]],
    outdir: str | os.PathLike[str],
    name: str,
    title: str,
    *,
    top: int = 12,
    unit: str = "ms",
    what: str = "ports",
    window: tuple[float, float] | None = None,
) -> str:
    """Write the transmit (or receive) rate of the ``top`` busiest ``ports`` — (node, port) →
    sorted (time in ``unit``, cumulative bytes) samples, at least two different byte counts
    each — in about 100 time bins over the span in which bytes moved, as ``name``; returns its
    path. Rates in Mb/s with ``ms`` (the live fabric's 100 Mb/s links), Gb/s with ``µs``;
    ``window``: the time span to draw (default: where these ports moved bytes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5))
    tab20 = plt.get_cmap("tab20")
    ax.set_prop_cycle(color=[tab20(i) for i in range(tab20.N)])
    busiest_p = sorted(ports, key=lambda k: -(max(b for _, b in ports[k]) - min(b for _, b in ports[k])))[:top]
    window = window or _active_window({}, ports)
    t_all = [t for k in busiest_p for t, _ in ports[k]]
    t_lo, t_hi = window or (min(t_all), max(t_all))
    step = max(1.0, (t_hi - t_lo) / 100)  # units per bin: about 100 bins, at least 1 unit
    grid = [t_lo + i * step for i in range(int((t_hi - t_lo) / step) + 2)]
    per_bit = UNITS[unit] / (1e3 if unit == "ms" else 1.0)  # ns per bit at 1 Mb/s or 1 Gb/s
    for key in sorted(busiest_p):
        pts = ports[key]
        times = [t for t, _ in pts]
        cum = []
        for g in grid:  # cumulative bytes at each grid time (last sample at or before it)
            i = bisect.bisect_right(times, g) - 1
            cum.append(pts[i][1] if i >= 0 else pts[0][1])
        rates = [(b1 - b0) * 8 / (step * per_bit) for b0, b1 in zip(cum, cum[1:], strict=False)]
        ax.step(grid[1:], rates, where="pre", label=f"{key[0]}:{key[1]}")
    if window:
        ax.set_xlim(*window)
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("transmit rate (Mb/s)" if unit == "ms" else "rate (Gb/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.legend(fontsize="small", ncol=2, title=_shown(len(busiest_p), len(ports), what), title_fontsize="small")
    return _save(fig, outdir, name)


def _titled(label: str, title: str) -> str:
    """``title`` with the run's ``label`` (the transport) in front, when there is one."""
    return f"{label}: {title}" if label else title


def _shown(n: int, total: int, what: str) -> str:
    """The legend title: says when only the busiest ``n`` of ``total`` are drawn."""
    return f"busiest {n} of {total} {what}" if total > n else f"all {total} {what}"


def _save(fig: Any, outdir: str | os.PathLike[str], name: str) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(outdir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def switch_thresholds(cfg: Any) -> dict[str, int]:
    """The queue thresholds worth drawing from a :class:`~uet.fabric.model.config.SwitchConfig`:
    ECN ``kmin``/``kmax`` of each class that marks and the static PFC XOFF (when PFC is on)."""
    out: dict[str, int] = {}
    for tc, c in enumerate(cfg.tcs):
        if c.ecn is not None and (tc == 0 or c.lossless):
            out[f"ECN kmin tc{tc}"] = c.ecn.kmin
            out[f"ECN kmax tc{tc}"] = c.ecn.kmax
    if cfg.pfc.enabled and not cfg.pfc.dynamic:
        out["PFC XOFF"] = cfg.pfc.xoff
    return out


def _active_window(
    queues: dict[tuple[str, int, int], list[tuple[float, int]]], ports: dict[tuple[str, int], list[tuple[float, int]]]
) -> tuple[float, float] | None:
    """The time span (ms) in which anything happened: a queue held bytes or a port's byte count
    moved, with a 5 % margin. The fabric starts before the endpoints, so without this the plots
    would be mostly an idle run-up."""
    times = [t for pts in queues.values() for t, b in pts if b]
    for pts in ports.values():
        pts = sorted(pts)
        times += [t1 for (_, b0), (t1, b1) in zip(pts, pts[1:], strict=False) if b1 != b0]
    if not times:
        return None
    lo, hi = min(times), max(times)
    margin = max(1.0, (hi - lo) * 0.05)
    return lo - margin, hi + margin


class PcapTaps:
    """Capture files of a fabric's links, opened lazily: one per switch port
    (``per="port"``, ``{switch}-p{port}.pcap``: both directions of that port's link) or one per
    host (``per="host"``, ``{host}.pcap``: what the host's NIC sent, at the time it started on the
    link, and what reached it, at the time it finished arriving). ``fmt``: ``pcap`` (classic,
    nanosecond magic) or ``pcapng`` (nanosecond ``if_tsresol``, the interface named after the file).
    Timestamps are ``epoch_ns`` plus model time (virtual time in the simulator). ``max_bytes``
    bounds each file (:class:`~uet.pcap.PcapWriter`: frames past it are counted, not written).
    :func:`install_taps` wires it into a fabric."""

    def __init__(
        self,
        outdir: str | os.PathLike[str],
        epoch_ns: int,
        *,
        per: str = "port",
        fmt: str = "pcap",
        max_bytes: int | None = None,
    ) -> None:
        if per not in ("port", "host") or fmt not in ("pcap", "pcapng"):
            raise ValueError(f"per must be port or host, fmt pcap or pcapng (not {per!r}, {fmt!r})")
        os.makedirs(outdir, exist_ok=True)
        self.outdir = os.fspath(outdir)
        self.epoch_ns = epoch_ns
        self.per = per
        self.fmt = fmt
        self.max_bytes = max_bytes
        self.writers: dict[str, PcapWriter] = {}

    def path(self, switch: str, port: int | None = None) -> str:
        """The file of ``switch`` port ``port``, or of host ``switch`` when ``port`` is None."""
        name = switch if port is None else f"{switch}-p{port}"
        return os.path.join(self.outdir, f"{name}.{self.fmt}")

    def write(self, switch: str, port: int | None, frame: bytes | bytearray, t_ns: int) -> None:
        """Record ``frame`` seen on ``switch`` port ``port`` (or at host ``switch``, port None)
        at model time ``t_ns``."""
        path = self.path(switch, port)
        w = self.writers.get(path)
        if w is None:
            name = os.path.basename(path).rsplit(".", 1)[0]
            w = self.writers[path] = (
                PcapngWriter(path, name=name, max_bytes=self.max_bytes)
                if self.fmt == "pcapng"
                else PcapWriter(path, max_bytes=self.max_bytes)
            )
        w.write(frame, self.epoch_ns + t_ns)

    @property
    def dropped(self) -> int:
        """Frames not written because a file reached ``max_bytes``."""
        return sum(w.dropped for w in self.writers.values())

    def paths(self) -> list[str]:
        return sorted(self.writers)

    def flush(self) -> None:
        for w in self.writers.values():
            w.flush()

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


def install_taps(fabric: Any, taps: PcapTaps) -> None:
    """Wrap every node's ``on_transmit`` in ``fabric`` (a :class:`~uet.fabric.model.Fabric`) so
    each frame on a tapped link is written to ``taps``: on a switch port's link (``per="port"``)
    or on a host's link (``per="host"``); sent at its start, received at its arrival. The frames
    are the model's real bytes at that moment (ECN marks, trims and rewrites applied). A received
    frame is written by an event at its arrival time, so each file is in time order."""
    from uet.fabric.model.switch import Switch

    hosts = taps.per == "host"
    events = fabric.events

    def arrived(where: tuple[str, int | None], frame: bytes, t: int) -> None:
        taps.write(where[0], where[1], frame, t)

    for node in [*fabric.switches.values(), *fabric.nics]:
        orig = node.on_transmit

        def tapped(n: Any, p: int, frame: bytearray, start: int, end: int, _orig: Any = orig) -> None:
            port = n.ports[p]
            peer, peer_port = port.peer
            if hosts:
                mine: tuple[str, int | None] | None = None if isinstance(n, Switch) else (n.name, None)
                theirs: tuple[str, int | None] | None = None if isinstance(peer, Switch) else (peer.name, None)
            else:
                mine = (n.name, p) if isinstance(n, Switch) else None
                theirs = (peer.name, peer_port) if isinstance(peer, Switch) else None
            if mine is not None:
                taps.write(mine[0], mine[1], frame, start)
            if theirs is not None:
                events.schedule(end + port.delay_ns, arrived, theirs, bytes(frame))
            _orig(n, p, frame, start, end)

        node.on_transmit = tapped
