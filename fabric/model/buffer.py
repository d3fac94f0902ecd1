"""Shared-buffer accounting of one switch (§8.3, §8.5): admission, pools, PFC thresholds.

**Decision — pools.** The switch buffer is split when the switch is built into

* a *reserve* of ``BufferConfig.reserve`` bytes per (ingress port, lossless priority group),
* a *headroom* of ``PfcConfig.headroom`` bytes per (ingress port, lossless PG), which only takes
  what arrives after that PG has sent XOFF,
* the *shared* pool: everything else.

Lossy packets are charged to the shared pool and admitted when their egress queue stays within its
static limit and, if dynamic, within α × (free shared bytes), and the shared pool has room.
Lossless packets are charged to the PG's reserve while it lasts, then to the shared pool while the
PG is below its XOFF point, then to its headroom; a full headroom drops with "headroom_overflow"
(the lossless class never drops otherwise). Each packet remembers its pool and gives the bytes
back there when it leaves. Counters are kept per egress queue and per (ingress port, priority)
for every class, lossless or not.
"""

from __future__ import annotations

from uet.fabric.model.config import FabricError, SwitchConfig
from uet.fabric.model.port import Packet, shared_table


class Mmu:
    """Buffer state of one switch with ``nports`` ports."""

    def __init__(self, cfg: SwitchConfig, nports: int) -> None:
        # what a packet reads and writes at every hop first, in one or two cache lines (the
        # compiled build lays attributes out in the order of their first assignment: Port)
        lossless = tuple(tc for tc in range(8) if cfg.tcs[tc].lossless and cfg.pfc.enabled)
        npg = nports * len(lossless)
        self.shared_size = cfg.buffer.size - npg * (cfg.buffer.reserve + cfg.pfc.headroom)
        if self.shared_size <= 0:
            raise FabricError("buffer too small for the reserve and headroom of every lossless PG")
        self.shared_used = 0
        #: bytes in the buffer, all pools, and the highest value seen
        self.used = 0
        self.peak_used = 0
        #: per class, read once here like the rest of the switch's configuration
        # read per packet per hop: one list for every switch with the same (port.shared_table)
        self._static: list[int | None] = shared_table("static", [t.limit for t in cfg.tcs])
        self._dynamic: list[bool] = shared_table("dynamic", [t.dynamic for t in cfg.tcs])
        self._alpha = cfg.buffer.alpha
        #: bytes charged per (ingress port, priority), all classes
        self.ingress = [[0] * 8 for _ in range(nports)]
        self.pg_reserve = [[0] * 8 for _ in range(nports)]
        self.pg_shared = [[0] * 8 for _ in range(nports)]
        self.pg_headroom = [[0] * 8 for _ in range(nports)]
        #: XOFF sent and not yet cancelled, per (ingress port, priority)
        self.paused = [[False] * 8 for _ in range(nports)]
        self.cfg = cfg
        self.lossless = lossless
        self.reserve = cfg.buffer.reserve
        self.headroom = cfg.pfc.headroom

    def free_shared(self) -> int:
        return self.shared_size - self.shared_used

    def lossy_limit(self, tc: int) -> tuple[int | None, int | None]:
        """(static limit, dynamic limit) of a lossy egress queue of class ``tc``; None = unlimited."""
        dyn = int(self._alpha * (self.shared_size - self.shared_used)) if self._dynamic[tc] else None
        return self._static[tc], dyn

    def admit_lossy(self, pkt: Packet, qbytes: int) -> str:
        """Charge a lossy packet going to a queue holding ``qbytes``; '' or the drop reason.
        (:meth:`lossy_limit` and :meth:`_charge` to the shared pool, inlined: once per packet
        per hop.)"""
        size = pkt.size
        tc = pkt.tc
        static = self._static[tc]
        if static is not None and qbytes + size > static:
            return "queue_limit"
        used = self.shared_used
        if self._dynamic[tc] and qbytes + size > int(self._alpha * (self.shared_size - used)):
            return "dynamic_threshold"
        if used + size > self.shared_size:
            return "buffer_full"
        pkt.pool = "shared"
        self.ingress[pkt.in_port][tc] += size
        self.shared_used = used + size
        u = self.used = self.used + size
        if u > self.peak_used:
            self.peak_used = u
        return ""

    def admit_lossless(self, pkt: Packet) -> str:
        """Charge a lossless packet to its PG's reserve, the shared pool or its headroom."""
        p, tc, size = pkt.in_port, pkt.tc, pkt.size
        if self.pg_reserve[p][tc] + size <= self.reserve:
            self._charge(pkt, "reserve")
            return ""
        if not self.paused[p][tc] and self._below_xoff(p, tc, size) and self.shared_used + size <= self.shared_size:
            self._charge(pkt, "shared")
            return ""
        if self.pg_headroom[p][tc] + size <= self.headroom:
            self._charge(pkt, "headroom")
            return ""
        return "headroom_overflow"

    def _below_xoff(self, p: int, tc: int, size: int) -> bool:
        pfc = self.cfg.pfc
        if pfc.dynamic:
            return self.pg_shared[p][tc] + size <= pfc.alpha * (self.shared_size - self.shared_used)
        return self.ingress[p][tc] < pfc.xoff

    def _charge(self, pkt: Packet, pool: str) -> None:
        p, tc, size = pkt.in_port, pkt.tc, pkt.size
        pkt.pool = pool
        self.ingress[p][tc] += size
        if pool == "shared":
            self.shared_used += size
            if tc in self.lossless:
                self.pg_shared[p][tc] += size
        elif pool == "reserve":
            self.pg_reserve[p][tc] += size
        else:
            self.pg_headroom[p][tc] += size
        self.used += size
        if self.used > self.peak_used:
            self.peak_used = self.used

    def charge_unconditional(self, pkt: Packet) -> None:
        """Charge a packet that bypasses admission (a trimmed header, checked against its own
        queue limit by the caller) to the shared pool."""
        self._charge(pkt, "shared")

    def release(self, pkt: Packet) -> None:
        """Give a departing or dropped packet's bytes back to its pool.

        A lossless PG gives its bytes back headroom first, then shared, then reserve, whichever
        packet leaves (as the HPCC ns-3 MMU does): the headroom charged during a pause belongs to
        the PG, not to the frames that happened to arrive last. Releasing per packet left the
        headroom full after XON (its frames are at the queue's tail), so the next XOFF had no
        headroom and dropped with "headroom_overflow" (issue 12: 142 drops on a 100 Gb/s 8:1
        RoCE incast)."""
        p, tc, size, pool = pkt.in_port, pkt.tc, pkt.size, pkt.pool
        self.ingress[p][tc] -= size
        self.used -= size
        pkt.pool = ""
        if pool and tc in self.lossless:
            hr = min(self.pg_headroom[p][tc], size)
            self.pg_headroom[p][tc] -= hr
            sh = min(self.pg_shared[p][tc], size - hr)
            self.pg_shared[p][tc] -= sh
            self.shared_used -= sh
            self.pg_reserve[p][tc] -= size - hr - sh
            return
        if pool == "shared":
            self.shared_used -= size

    # -- PFC sender thresholds (§8.5) ---------------------------------------------------------

    def should_xoff(self, p: int, tc: int) -> bool:
        """The (ingress port, priority) has reached its XOFF point and has not paused yet."""
        if self.paused[p][tc]:
            return False
        pfc = self.cfg.pfc
        if pfc.dynamic:
            return self.pg_headroom[p][tc] > 0 or self.pg_shared[p][tc] >= pfc.alpha * self.free_shared()
        return self.ingress[p][tc] >= pfc.xoff

    def should_xon(self, p: int, tc: int) -> bool:
        """The (ingress port, priority) paused earlier and has drained below its XON point."""
        if not self.paused[p][tc]:
            return False
        pfc = self.cfg.pfc
        if pfc.dynamic:
            return (
                self.pg_headroom[p][tc] == 0
                and self.pg_shared[p][tc] + pfc.resume_offset <= pfc.alpha * self.free_shared()
            )
        return self.ingress[p][tc] < pfc.xon
