"""The asyncio switch process: a whole :class:`~uet.fabric.model.Fabric` behind UDP sockets.

architecture.md ("Link modes: fabric", principle 3) and rocev2-and-fabric.md §8: every host-facing
port of the topology is one UDP socket on ``host`` (127.0.0.1 by default) at ``base_port + i``
for host ``i`` (``base_port`` 0: ephemeral ports, reported by :attr:`FabricProcess.ports`). Each
datagram is one whole Ethernet frame without FCS, the way QEMU's socket netdev carries frames.
Leaves, spines and their links are modelled in-process.

**Clock and pacing.** Model time is the process's :class:`uet.clock.DilatedClock` (on
``time.monotonic_ns()``, the clock asyncio's default loop reads; uvloop's ``loop.time()`` is
truncated to milliseconds, so it is not used) minus the start instant: real nanoseconds since the
start, divided by the time-dilation factor (``ProcessConfig.dilation``, 1 = real time; ``uet-run``
hands every process of a run the same start instant and factor, so the endpoints' virtual time and
the model's advance together). Link rates and delays are the model's, so they are virtual: under a
factor of 10 a 100 Mb/s link carries 10 Mb/s of real time. A frame read from host ``i``'s socket
is injected into host ``i``'s NIC model at the time it was read; the model serialises it at the
modelled link rates and queues it in its switches. One timer (fabric/timers.py: a ``timerfd`` by
default, else ``call_at``) is re-armed at the real instant of ``fabric.next_deadline()``; when it
fires the model runs every event due by *now* and the frames it delivered to hosts are sent to
their NIC sockets. A late timer therefore never changes the model's timing (departures are
computed from link rates, exactly as in virtual time), only when the bytes leave the process.
:attr:`FabricProcess.lateness` records, for every firing, how late it ran against the model
deadline it was armed for, in model (virtual) time (``pacing`` in :meth:`FabricProcess.summary`);
fabric/timers.py tabulates the measured figures: median ≈ 20–50 µs late with the timerfd timer on
a loaded two-core machine, i.e. within one 100 Mb/s frame time (85 µs), p99 well under 1 ms.

**Learning host addresses.** A host port sends to the UDP address configured for it
(``host_addrs``, fixed) or else to the address it learnt from that host's own frames: an ARP
frame (EtherType 0x0806, e.g. the gratuitous ARP :class:`uet.link.fabric.FabricLink` sends when it
opens) whose sender protocol address is the host's IPv4 address, or — while nothing is known yet
— an IPv4 frame whose source address is the host's. Once learnt, the address changes only by such
an ARP announcement (a restarted host re-announces itself from its new socket); any other
datagram from another UDP address is dropped and counted (``host_spoofed``) without reaching the
model or moving the address. Before, the latest datagram of *any* sender took the port over: a
local process sending one junk datagram per ms received another host's frames (issue 15 item 5).
A sender that forges a well-formed ARP announcement of the victim's IP can still move it — on one
machine UDP cannot tell processes apart; use ``host_addrs`` where that matters. ARP frames never
reach the model (which would count them as ``not_ipv4`` drops). Frames for a host whose address
is not known yet are dropped and counted (``host_unknown``).

**PFC towards hosts.** The fabric is built with ``deliver_pfc=True``: pause frames a leaf sends to
a host are delivered to the host's socket like any frame, so a fabric-mode NIC can honour them.
The model's own NIC (which serialises the host's frames onto the host link) honours them too.

**The buffer outside the model.** A frame waits in its host socket's kernel receive queue until
the process reads it, and the model only sees it then. :meth:`FabricProcess.kernel` (``kernel`` in
:meth:`FabricProcess.summary`) reports the frames the kernel dropped from those queues and the
deepest queue seen on the ``sample_ns`` grid (fabric/kernel_queues.py); ``uet-run`` names them in
its CPU-starvation note. Both stay near zero while the process keeps up.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uet.fabric.counters import fabric_counters, uplink_imbalance
from uet.fabric.kernel_queues import KernelQueue, read_udp_queues
from uet.fabric.model import Fabric
from uet.fabric.model.faults import FaultConfig
from uet.fabric.model.telemetry import PortBytes, QueueDepth, Telemetry
from uet.fabric.telemetry_io import JsonLines, PcapTaps, install_taps
from uet.fabric.timers import make_timer
from uet.fabric.topology import Topology

from uet.clock import DilatedClock
from uet.stats import percentile

__all__ = ["FabricProcess", "ProcessConfig", "fabric_counters", "uplink_imbalance"]

_ETH_ARP = 0x0806
_MAX_LATENESS_SAMPLES = 200_000


@dataclass
class ProcessConfig:
    """I/O settings of the switch process (the model's settings live in the :class:`Topology`).

    ``host``/``base_port``: where the host-port sockets bind (``base_port`` 0 = ephemeral).
    ``host_addrs``: fixed NIC UDP addresses per host index (others are learned, module doc).
    ``telemetry``: JSON-lines output path; ``keep_telemetry`` keeps the records for plots.
    ``sample_ns``: period of the ``port_bytes`` snapshots of every switch port and of the
    telemetry flush. ``pcap_dir``: one pcap per switch port. ``timer``: ``auto``, ``timerfd`` or
    ``loop`` (fabric/timers.py). ``seed``: the model's random seed. ``max_batch``: datagrams read
    per socket readiness callback. ``rcvbuf``/``sndbuf``: socket buffer sizes requested.
    ``dilation``: the time-dilation factor (module docstring; 1 = real time); ``start_ns``: the
    run's shared start instant on the monotonic clock (None: when the process starts).
    ``sample_ns`` is a real-time period (the kernel queues fill in real time).
    """

    host: str = "127.0.0.1"
    base_port: int = 0
    host_addrs: dict[int, tuple[str, int]] = field(default_factory=dict)
    telemetry: str | None = None
    keep_telemetry: bool = False
    sample_ns: int = 50_000_000
    pcap_dir: str | None = None
    #: one capture per switch port or per host; the most bytes each file holds (PcapTaps)
    pcap_per: str = "port"
    pcap_max: int | None = None
    timer: str = "auto"
    seed: int = 0
    max_batch: int = 64
    rcvbuf: int = 4 << 20
    sndbuf: int = 4 << 20
    dilation: float = 1.0
    start_ns: int | None = None
    #: the fault schedule the model applies (uet.fabric.model.faults); None: none
    faults: FaultConfig | None = None


class FabricProcess:
    """Runs ``topology`` in real time behind one UDP socket per host port; see the module doc.

    Use: ``fp = FabricProcess(topo, cfg)``; ``await fp.start()``; ``fp.ports`` lists the bound
    ``(host, port)`` of each host; ``await fp.run(stop_event)`` serves until the event is set,
    then closes (flushing pcaps and telemetry); :meth:`summary` has the counters.
    """

    def __init__(
        self, topology: Topology, config: ProcessConfig | None = None, *, clock: DilatedClock | None = None
    ) -> None:
        self.cfg = cfg = config or ProcessConfig()
        self._given_clock = clock
        self.topology = topology
        want_records = bool(cfg.telemetry or cfg.keep_telemetry)
        self.telemetry = Telemetry(enabled=want_records)
        self._queue_last: dict[tuple[str, int, int], int] = {}
        self.fabric = Fabric(topology, seed=cfg.seed, telemetry=self.telemetry, deliver_pfc=True, faults=cfg.faults)
        self.sink = JsonLines(cfg.telemetry, keep=cfg.keep_telemetry)
        self.socks: list[socket.socket] = []
        self.ports: list[tuple[str, int]] = []
        self.addrs: list[tuple[str, int] | None] = [cfg.host_addrs.get(i) for i in range(len(self.fabric.hosts))]
        self._host_ips = [socket.inet_aton(h.ip) for h in self.fabric.hosts]
        self.stats: Counter[str] = Counter()
        self.lateness: list[int] = []
        self.taps: PcapTaps | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: Any = None
        self.t0 = 0
        #: the process's clock (module docstring): ``clock`` when given (a test's), else one of
        #: ``cfg.dilation`` from ``cfg.start_ns``, made when the process starts
        self.clock = clock or DilatedClock(cfg.dilation, cfg.start_ns)
        self.epoch_ns = 0
        self.closed = False
        self._armed_for: int | None = None
        self._periodic: asyncio.Task[None] | None = None
        #: per host socket: the largest kernel receive queue seen on the sampling grid (bytes)
        #: and the kernel's drop count at the last reading (fabric/kernel_queues.py)
        self.kernel_rx_max: list[int] = []
        self.kernel_drops: list[int] = []
        #: the same for the endpoints' NIC sockets, when they are on this machine (/proc/net/udp
        #: lists them): frames the switch delivered that wait for a starved endpoint
        self.nic_rx_max: list[int] = []
        self.nic_drops: list[int] = []
        self._kernel_seen = False

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the host-port sockets, start the clock and the timer."""
        cfg = self.cfg
        self.loop = loop = asyncio.get_running_loop()
        try:
            for i in range(len(self.fabric.hosts)):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                self.socks.append(s)
                s.setblocking(False)
                for opt, size in ((socket.SO_RCVBUF, cfg.rcvbuf), (socket.SO_SNDBUF, cfg.sndbuf)):
                    try:
                        s.setsockopt(socket.SOL_SOCKET, opt, size)
                    except OSError:  # pragma: no cover - bounded by net.core.*mem_max
                        pass
                s.bind((cfg.host, cfg.base_port + i if cfg.base_port else 0))
                self.ports.append(s.getsockname()[:2])
        except OSError:
            for s in self.socks:
                s.close()
            raise
        self.clock = clock = self._given_clock or DilatedClock(cfg.dilation, cfg.start_ns)
        self.t0 = clock.start_ns
        self.epoch_ns = time.time_ns() - (time.monotonic_ns() - self.t0)  # the start instant's
        if cfg.pcap_dir:
            self.taps = PcapTaps(cfg.pcap_dir, self.epoch_ns, per=cfg.pcap_per, max_bytes=cfg.pcap_max)
            self._install_taps()
        self.timer = make_timer(loop, self._on_timer, cfg.timer)
        for i, s in enumerate(self.socks):
            loop.add_reader(s.fileno(), self._on_readable, i)
        self.sink.write([self._start_record()])
        self.kernel_rx_max = [0] * len(self.socks)
        self.kernel_drops = [0] * len(self.socks)
        self.nic_rx_max = [0] * len(self.socks)
        self.nic_drops = [0] * len(self.socks)
        self._periodic = asyncio.ensure_future(self._sampler())

    def now(self) -> int:
        """Model time: virtual ns since the start instant (module docstring)."""
        return self.clock() - self.t0

    async def run(self, stop: asyncio.Event) -> dict[str, Any]:
        """Serve until ``stop`` is set; close and return :meth:`summary`."""
        if self.loop is None:
            await self.start()
        await stop.wait()
        self.close()
        return self.summary()

    def close(self) -> None:
        """Stop serving; flush telemetry, pcaps; release sockets and the timer (idempotent)."""
        if self.closed:
            return
        self.closed = True
        if self._periodic is not None:
            self._periodic.cancel()
        loop = self.loop
        if loop is not None:
            for s in self.socks:
                loop.remove_reader(s.fileno())
        self._sample_kernel()  # the drop counters die with the sockets
        for s in self.socks:
            s.close()
        if self.timer is not None:
            self.timer.close()
        self._flush_telemetry(final=True)
        self.sink.close()
        if self.taps is not None:
            self.taps.close()

    # -- data path ---------------------------------------------------------------------------------

    def _on_readable(self, host: int) -> None:
        sock = self.socks[host]
        fabric = self.fabric
        st = self.stats
        now = self.now()
        n = 0
        for _ in range(self.cfg.max_batch):
            try:
                frame, addr = sock.recvfrom(65536)
            except BlockingIOError:
                break
            except OSError:
                st["rx_errors"] += 1
                break
            n += 1
            arp = len(frame) >= 14 and frame[12] == 0x08 and frame[13] == 0x06
            if addr != self.addrs[host] and not self._learn(host, frame, addr, arp):
                st["host_spoofed"] += 1
                continue
            if arp:
                st["arp_rx"] += 1
                continue
            fabric.inject(host, frame, now)
        st["rx_frames"] += n
        self._pump(now)

    def _learn(self, host: int, frame: bytes, addr: tuple[str, int], arp: bool) -> bool:
        """Take ``addr`` as host ``host``'s NIC address if ``frame`` proves it is that host
        (module docstring): an ARP announcement of the host's IP, or the first IPv4 frame from
        the host's IP. A configured address never changes."""
        if host in self.cfg.host_addrs:
            return False
        ip = self._host_ips[host]
        if arp:
            ok = len(frame) >= 42 and frame[28:32] == ip  # ARP sender protocol address
        else:
            ok = self.addrs[host] is None and len(frame) >= 34 and frame[12:14] == b"\x08\x00" and frame[26:30] == ip
        if ok:
            self.addrs[host] = addr
            self.stats["host_learned"] += 1
        return ok

    def _on_timer(self) -> None:
        now = self.now()
        due = self._armed_for
        self._armed_for = None
        if due is not None:
            lat = self.lateness
            if len(lat) < _MAX_LATENESS_SAMPLES:
                lat.append(now - due)
            self.stats["timer_fires"] += 1
        self._pump(now)

    def _pump(self, now: int) -> None:
        """Run the model up to ``now``, send what reached hosts, re-arm the timer."""
        if self.closed:
            return
        out = self.fabric.poll(now)
        if out:
            socks, addrs, st = self.socks, self.addrs, self.stats
            for host, frame in out:
                addr = addrs[host]
                if addr is None:
                    st["host_unknown"] += 1
                    continue
                try:
                    socks[host].sendto(frame, addr)
                except BlockingIOError:
                    st["tx_sock_full"] += 1
                except OSError:
                    st["tx_errors"] += 1
                else:
                    st["tx_frames"] += 1
        nxt = self.fabric.next_deadline()
        if nxt is not None and nxt != self._armed_for:
            self._armed_for = nxt
            self.timer.arm(self.clock.real_at(self.t0 + nxt))

    # -- taps and telemetry ------------------------------------------------------------------------

    def _install_taps(self) -> None:
        """Every frame on a switch port's link to that port's pcap (:func:`install_taps`)."""
        assert self.taps is not None
        install_taps(self.fabric, self.taps)

    def _start_record(self) -> dict[str, Any]:
        topo = self.topology
        return {
            "event": "start",
            "t": 0,
            "epoch_ns": self.epoch_ns,
            "kind": topo.kind,
            "hosts": [
                {"host": h.name, "ip": h.ip, "leaf": h.switch, "leaf_port": h.port, "udp": list(self.ports[i])}
                for i, h in enumerate(self.fabric.hosts)
            ],
            "host_rate_bps": topo.host_link.rate_bps,
            "fabric_rate_bps": topo.fabric_link.rate_bps,
            "timer": getattr(self.timer, "backend", None),
        }

    async def _sampler(self) -> None:
        period = self.cfg.sample_ns / 1e9
        while True:
            await asyncio.sleep(period)
            self._sample_kernel()
            self._flush_telemetry()

    def _sample_kernel(self) -> None:
        """Read the kernel's receive queue and drop count of every host socket
        (fabric/kernel_queues.py): the one buffer of the live fabric the model does not see."""
        if not self.socks:
            return
        nics = [a for a in self.addrs if a is not None]
        seen = read_udp_queues([*self.ports, *nics])
        if not seen:
            return
        self._kernel_seen = True
        for i, addr in enumerate(self.ports):
            q: KernelQueue | None = seen.get(addr)
            if q is not None:
                self.kernel_rx_max[i] = max(self.kernel_rx_max[i], q.rx_bytes)
                self.kernel_drops[i] = q.drops
        for i, nic in enumerate(self.addrs):
            q = seen.get(nic) if nic is not None else None
            if q is not None:  # the endpoint's NIC socket on this machine: its side of the link
                self.nic_rx_max[i] = max(self.nic_rx_max[i], q.rx_bytes)
                self.nic_drops[i] = q.drops

    def kernel(self) -> dict[str, Any]:
        """The host sockets' kernel receive queues (module doc, "the one unmodelled buffer"):
        datagrams the kernel dropped before the model saw them and the largest queue seen on the
        sampling grid, in total and per host that had any; ``nic_rx_drops`` and
        ``nic_rx_queue_max_bytes`` the same for the endpoints' NIC sockets on this machine (the
        frames delivered to an endpoint that has not read them yet); empty where the kernel does
        not report them."""
        if not self._kernel_seen:
            return {}
        return {
            "rx_drops": sum(self.kernel_drops),
            "rx_queue_max_bytes": max(self.kernel_rx_max, default=0),
            "nic_rx_drops": sum(self.nic_drops),
            "nic_rx_queue_max_bytes": max(self.nic_rx_max, default=0),
            "hosts": {
                self.fabric.hosts[i].name: {"rx_drops": d, "rx_queue_max_bytes": m}
                for i, (d, m) in enumerate(zip(self.kernel_drops, self.kernel_rx_max, strict=True))
                if d or m
            },
        }

    def _sample_queues(self, node: str, port: Any, now: int) -> None:
        """Queue depth on the sampling grid (every ``sample_ns``), not only when a frame arrives:
        every queue that holds bytes, or held bytes at the previous grid point (so a drain to
        zero is recorded); idle queues add nothing."""
        for tc, depth in enumerate(port.qbytes):
            key = (node, port.index, tc)
            if depth or self._queue_last.get(key):
                self.telemetry.add(QueueDepth(now, node, port.index, tc, depth, len(port.queues[tc])))
                self._queue_last[key] = depth

    def _flush_telemetry(self, final: bool = False) -> None:
        """Snapshot every switch port's byte counters and write the records collected so far."""
        if not self.telemetry.enabled:
            return
        # the model's clock, not the wall clock: events due since the last timer have not run yet
        now = self.fabric.now
        grid = self.telemetry.wants("queue_depth")
        for sw in self.fabric.switches.values():
            for p in sw.ports:
                self.telemetry.add(PortBytes(now, sw.name, p.index, p.tx_bytes, p.rx_bytes, p.tx_frames, p.rx_frames))
                if grid:
                    self._sample_queues(sw.name, p, now)
        self.sink.write(r.as_dict() for r in self.telemetry.drain())
        if final:
            self.sink.write([{"event": "summary", "t": now, **self.summary()}])
        self.sink.flush()
        if self.taps is not None:
            self.taps.flush()

    # -- reporting ---------------------------------------------------------------------------------

    def pacing(self) -> dict[str, Any]:
        """Lateness of timer firings against the model deadlines they were armed for (µs of model
        time, i.e. virtual under dilation), and the dilation factor."""
        lat = sorted(self.lateness)
        out: dict[str, Any] = {
            "timer": getattr(self.timer, "backend", None),
            "firings": len(lat),
            "dilation": self.clock.factor,
        }
        if lat:

            def q(p: float) -> float:
                return round(percentile(lat, p) / 1000, 1)

            out.update(
                mean_us=round(statistics.fmean(lat) / 1000, 1),
                p50_us=q(50),
                p90_us=q(90),
                p99_us=q(99),
                p999_us=q(99.9),
                max_us=round(lat[-1] / 1000, 1),
            )
        return out

    def summary(self) -> dict[str, Any]:
        """Counters of the run (JSON-ready): fabric counters, process I/O stats, pacing."""
        return {
            "duration_s": round(self.now() / 1e9, 3),
            "fabric": fabric_counters(self.fabric),
            "io": dict(self.stats),
            "pacing": self.pacing(),
            "kernel": self.kernel(),
            **({"faults": self.fabric.failover.summary()} if self.fabric.failover is not None else {}),
            "hosts": [
                {"host": h.name, "ip": h.ip, "udp": list(self.ports[i]) if i < len(self.ports) else None}
                for i, h in enumerate(self.fabric.hosts)
            ],
        }
