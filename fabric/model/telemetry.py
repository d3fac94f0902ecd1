"""Structured telemetry of the switch model (conventions.md, "Structured event logs").

Records are small frozen dataclasses, one type per kind of observation (§9.1 metrics: queue
occupancy, ECN marks, drops by reason, trims, PFC frames sent and received, watchdog storms, bytes
per port), defined in :mod:`uet.fabric.model.records` and imported from here on first use (a run
that keeps none does not create them). A :class:`Telemetry` collects them in order;
:meth:`Telemetry.drain` hands them to a writer (the asyncio switch process writes them as JSON
lines). Counters that every test and report
needs (drops by reason, marks, trims, pause frames, bytes) live in :class:`Counters`, which cost
one dict update per event whether or not records are kept.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from uet.lazy import lazy_names

if TYPE_CHECKING:
    from uet.fabric.model.records import (
        Dropped,
        EcnMarked,
        NicBytes,
        PfcReceived,
        PfcSent,
        PortBytes,
        QueueDepth,
        Record,
        Trimmed,
        WatchdogEvent,
    )

__all__ = [
    "DROP_REASONS",
    "Counters",
    "Dropped",
    "EcnMarked",
    "NicBytes",
    "PfcReceived",
    "PfcSent",
    "PortBytes",
    "QueueDepth",
    "Record",
    "Telemetry",
    "Trimmed",
    "WatchdogEvent",
]

#: the record types (:mod:`uet.fabric.model.records`): every name of ``__all__`` but this module's
#: own three, imported when one is first asked for here
_LAZY = dict.fromkeys(
    (name for name in __all__ if name not in ("DROP_REASONS", "Counters", "Telemetry")), "uet.fabric.model.records"
)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)


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
