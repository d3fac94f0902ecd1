"""The record types of :mod:`uet.fabric.model.telemetry`, one frozen dataclass per kind of
observation (§9.1 metrics: queue occupancy, ECN marks, drops by reason, trims, PFC frames sent and
received, watchdog storms, bytes per port).

A module of their own so that a run that keeps no records does not create their ten classes (about
10 M instructions of a one-flow ``uet-sim`` run's start-up): the switch model imports them where it
builds a record, and :mod:`uet.fabric.model.telemetry` offers their names on first use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "Dropped",
    "EcnMarked",
    "NicBytes",
    "PfcReceived",
    "PfcSent",
    "PortBytes",
    "QueueDepth",
    "Record",
    "Trimmed",
    "WatchdogEvent",
]


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
