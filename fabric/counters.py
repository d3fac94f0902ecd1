"""A fabric model's headline counters as JSON-ready figures (:func:`fabric_counters`), the same for
the real-time fabric process (:mod:`uet.fabric.switch`) and the simulator (:mod:`uet.sim`): a module
of its own so that a simulation does not import the asyncio fabric process to count."""

from __future__ import annotations

from collections import Counter
from typing import Any

from uet.fabric.model import Fabric
from uet.fabric.model.config import TC_DATA, TC_ROCE

__all__ = ["fabric_counters", "uplink_imbalance"]


def uplink_imbalance(fabric: Fabric) -> float | None:
    """Load balance of the leaves' uplinks (§8.7, §9.2 permutation): the most data bytes (TC0 and
    TC3) any uplink sent ÷ the mean over the uplinks, 1.0 when perfectly even; ECMP collisions
    push it towards the number of flows sharing the busiest link. None without two uplinks or
    without data on them. An uplink is a port facing a switch on a switch with host ports."""
    loads = [
        p.tx_tc_bytes[TC_DATA] + p.tx_tc_bytes[TC_ROCE]
        for sw in fabric.switches.values()
        if any(p.faces_host for p in sw.ports)
        for p in sw.ports
        if not p.faces_host
    ]
    if len(loads) < 2 or not any(loads):
        return None
    return round(max(loads) * len(loads) / sum(loads), 4)


def fabric_counters(fabric: Fabric) -> dict[str, Any]:
    """Headline counters of a fabric (JSON-ready): ``ecn_marks``, ``trims``, ``drops``,
    ``pauses`` (XOFF frames sent), ``pfc_xon``, ``watchdog``, ``paused_ns`` (time paused summed
    over every port and class), ``pause_switches`` (switches that sent XOFF) and ``paused_hosts``
    (host NICs that received one), plus per-port breakdowns keyed ``"switch:port"`` and drops by
    reason."""
    c = fabric.counters
    marks: Counter[str] = Counter()
    trims: Counter[str] = Counter()
    pauses: Counter[str] = Counter()
    drops: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for k, v in c.items():
        kind = k[0]
        if kind == "mark":
            marks[f"{k[1]}:{k[2]}"] += v
        elif kind == "trim":
            trims[f"{k[1]}:{k[2]}"] += v
        elif kind == "pfc_tx" and k[4] == "xoff":
            pauses[f"{k[1]}:{k[2]}"] += v
        elif kind == "drop_port":
            drops[f"{k[1]}:{k[2]}"] += v
        elif kind == "drop":
            reasons[k[2]] += v
    now = fabric.now
    ports = [p for sw in fabric.switches.values() for p in sw.ports] + [n.port for n in fabric.nics]
    hosts_paused = {k[1] for k in c if k[0] == "pfc_rx" and k[4] == "xoff" and k[1] not in fabric.switches}
    return {
        "ecn_marks": sum(marks.values()),
        "trims": sum(trims.values()),
        "drops": sum(reasons.values()),
        "pauses": sum(pauses.values()),
        "pfc_xon": c.total("pfc_tx") - sum(pauses.values()),
        "watchdog": c.total("watchdog"),
        # §9.1 PFC figures: time paused summed over every (port, class); the pause spread
        "paused_ns": sum(p.paused_ns(tc, now) for p in ports for tc in range(8)),
        "pause_switches": len({k.partition(":")[0] for k in pauses}),
        "paused_hosts": len(hosts_paused),
        "uplink_imbalance": uplink_imbalance(fabric),
        "marks_by_port": dict(marks),
        "trims_by_port": dict(trims),
        "pauses_by_port": dict(pauses),
        "drops_by_port": dict(drops),
        "drops_by_reason": dict(reasons),
    }
