"""Structured telemetry of the switch model (conventions.md, "Structured event logs").

Records are small frozen dataclasses, one type per kind of observation (§9.1 metrics: queue
occupancy, ECN marks, drops by reason, trims, PFC frames sent and received, watchdog storms, bytes
per port). A :class:`Telemetry` collects them in order; :meth:`Telemetry.drain` hands them to a
writer (the asyncio switch process writes them as JSON lines). Counters that every test and report
needs (drops by reason, marks, trims, pause frames, bytes) live in :class:`Counters`, which cost
one dict update per event whether or not records are kept.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True, slots=True)
class Record:
    """Base of all records: the virtual time ``t`` (ns) and the switch or NIC name ``node``."""

    kind: ClassVar[str] = "record"
    t: int
    node: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict with the record kind under ``"event"``."""
        d = {"event": self.kind}
        d.update(dataclasses.asdict(self))
        return d


@dataclass(frozen=True, slots=True)
class QueueDepth(Record):
    """Bytes and packets in an (egress port, TC) queue, sampled on change at most every
    ``SwitchConfig.sample_ns``."""

    kind: ClassVar[str] = "queue_depth"
    port: int
    tc: int
    bytes: int
    packets: int


@dataclass(frozen=True, slots=True)
class EcnMarked(Record):
    """A packet set to CE at dequeue; ``qbytes`` is the queue the decision saw."""

    kind: ClassVar[str] = "ecn_mark"
    port: int
    tc: int
    qbytes: int


@dataclass(frozen=True, slots=True)
class Dropped(Record):
    """A dropped packet; ``reason`` is one of the :data:`DROP_REASONS`."""

    kind: ClassVar[str] = "drop"
    port: int
    tc: int
    reason: str
    size: int


@dataclass(frozen=True, slots=True)
class Trimmed(Record):
    """A UET packet trimmed from ``size`` to ``trimmed`` bytes and re-marked ``dscp``."""

    kind: ClassVar[str] = "trim"
    port: int
    size: int
    trimmed: int
    dscp: int


@dataclass(frozen=True, slots=True)
class PfcSent(Record):
    """A PFC frame sent out of ``port`` (towards the upstream peer) for ``prio``; 0 quanta = XON."""

    kind: ClassVar[str] = "pfc_tx"
    port: int
    prio: int
    quanta: int
    ingress_bytes: int
    refresh: bool


@dataclass(frozen=True, slots=True)
class PfcReceived(Record):
    """A PFC frame received on ``port``: its egress ``prio`` queue pauses for ``quanta``."""

    kind: ClassVar[str] = "pfc_rx"
    port: int
    prio: int
    quanta: int


@dataclass(frozen=True, slots=True)
class WatchdogEvent(Record):
    """The PFC watchdog declared a storm (``state`` "storm") or restored a queue ("restored")."""

    kind: ClassVar[str] = "pfc_watchdog"
    port: int
    tc: int
    state: str
    action: str
    dropped: int


@dataclass(frozen=True, slots=True)
class PortBytes(Record):
    """Cumulative bytes and frames sent and received on a port, sampled with queue depths."""

    kind: ClassVar[str] = "port_bytes"
    port: int
    tx_bytes: int
    rx_bytes: int
    tx_frames: int
    rx_frames: int


@dataclass(frozen=True, slots=True)
class NicBytes(Record):
    """Cumulative bytes and frames a host NIC sent and received (``node`` is the host), sampled
    at most every ``SwitchConfig.sample_ns`` as frames come and go: the host-side throughput."""

    kind: ClassVar[str] = "nic_bytes"
    port: int
    tx_bytes: int
    rx_bytes: int
    tx_frames: int
    rx_frames: int


#: Why a packet was dropped.
DROP_REASONS = (
    "queue_limit",  # lossy queue over its static limit (trimming off or not eligible)
    "dynamic_threshold",  # lossy queue over α × free shared buffer
    "buffer_full",  # shared buffer exhausted
    "headroom_overflow",  # lossless PG headroom exceeded (mis-sized headroom, §8.3)
    "trim_queue_full",  # trimmed-header queue over its limit (§8.4 rule 4)
    "wred",  # Not-ECT packet selected by WRED with wred_drop on (§8.2)
    "watchdog",  # PFC watchdog flushing a stormed queue (§8.5)
    "no_route",
    "oversize",  # frame longer than the ingress link's MTU + 18
    "ttl_expired",
    "not_ipv4",
    "malformed",
)


class Telemetry:
    """Collects records of the kinds in ``kinds`` (None: all) in time order."""

    def __init__(self, kinds: set[str] | None = None, *, enabled: bool = True) -> None:
        self.kinds = kinds
        self.enabled = enabled
        self.records: list[Record] = []

    def wants(self, kind: str) -> bool:
        """True when records of ``kind`` are kept (callers skip building them otherwise)."""
        return self.enabled and (self.kinds is None or kind in self.kinds)

    def add(self, rec: Record) -> None:
        if self.enabled and (self.kinds is None or rec.kind in self.kinds):
            self.records.append(rec)

    def drain(self) -> list[Record]:
        """Return and forget the records collected so far."""
        out, self.records = self.records, []
        return out

    def of(self, kind: type[Record] | str) -> list[Any]:
        """The kept records of one kind (a record class or its ``kind`` string)."""
        k = kind if isinstance(kind, str) else kind.kind
        return [r for r in self.records if r.kind == k]


class Counters(Counter[tuple[Any, ...]]):
    """Event counts keyed by tuples: ``("drop", node, reason)``, ``("drop_port", node, port, tc,
    reason)``, ``("mark", node, port, tc)``, ``("trim", node, port)``, ``("pfc_tx", node, port, prio,
    "xoff"|"xon")``, ``("pfc_rx", ...)``, ``("watchdog", node, port, tc)``. :meth:`total` sums every
    key that starts with the given prefix."""

    def total(self, *prefix: Any) -> int:
        n = len(prefix)
        return sum(v for k, v in self.items() if k[:n] == prefix)
