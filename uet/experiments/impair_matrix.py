"""Impairment matrix: two PDS cores on a seeded lossy link in virtual time (issue "reliability").

For each delivery mode (RUD, ROD, RUDI), loss rate and seed, one FEP's PDS sends ``packets``
single-packet requests (grouped into messages of ``msg_packets``) to another across a link that
drops, duplicates and reorders datagrams in both directions, and the run reports:

- ``intact``: every request acknowledged once, nothing failed, every request delivered (RUD/ROD
  exactly once, ROD in order; RUDI at least once — its duplicates are allowed by §2.14);
- ``duplicates``: deliveries beyond the first of the same request (must be 0 for RUD/ROD);
- ``retx_per_lost``: request retransmissions (RETX copies the initiator sent) per forward request
  datagram the link dropped — the cost of recovery (behaviour.md §2.9, §2.13).

The runs use the real :class:`~uet.pds.core.PdsCore` with its default configuration (only the
idle closes are off, so a run ends when the last packet is acknowledged); time is an integer
nanosecond clock that jumps to the next arrival or timer, so the figures are deterministic per
seed and independent of the machine's speed. ``uet-bench matrix`` prints the full-size table; the
CI test (tests/test_impair_matrix.py) runs small sizes.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import asdict, dataclass, replace
from typing import Any

from uet.pds import Acked, Delivery, Failed, Mode, PdsConfig, PdsCore
from uet.wire import ses as ses_wire
from uet.wire.pds import NextHeader

_A = "10.0.0.1"
_B = "10.0.0.2"
_SES = ses_wire.SMALL.encode(ses_wire.SMALL.make(flags=int(ses_wire.SesFlag.SOM | ses_wire.SesFlag.EOM)))
_REQUEST_TYPES = (2, 3, 4)  # RUD, ROD, RUDI request PDS types (wire-format.md §2)
_RETX_BIT = 0x10  # request flags: RETX (wire-format.md §4)


@dataclass(frozen=True)
class CellResult:
    """One (mode, loss, seed) run of the matrix."""

    mode: str
    loss: float
    seed: int
    packets: int
    intact: bool
    acked: int
    failed: int
    delivered: int
    duplicates: int
    in_order: bool
    lost: int
    #: forward request datagrams the link delayed past later ones
    reordered: int
    retransmissions: int
    retx_per_lost: float
    virtual_ms: float


def _is_request(data: bytes) -> bool:
    return bool(data) and (data[0] >> 3) in _REQUEST_TYPES


def run_cell(
    mode: Mode,
    loss: float,
    seed: int,
    *,
    packets: int = 2000,
    msg_packets: int = 16,
    reorder: float = 0.05,
    dup: float = 0.01,
    payload: int = 1024,
    delay_ns: int = 10_000,
    config: PdsConfig | None = None,
    max_ns: int = 600_000_000_000,
    rx_ns: int = 0,
    rx_queue: int = 64,
) -> CellResult:
    """Run one cell: ``packets`` requests from A to B in ``mode`` across the impaired link.
    ``rx_ns``: a slow receiver — B takes one datagram per ``rx_ns`` from a socket queue of
    ``rx_queue`` datagrams, and what arrives at a full queue is lost (counted in ``lost``)."""
    cfg = replace(config or PdsConfig(), close_idle_ns=None, target_idle_ns=None)
    rng = random.Random(seed)
    a = PdsCore(_A, cfg, rng=random.Random(seed * 2 + 1))
    b = PdsCore(_B, cfg, rng=random.Random(seed * 2 + 2))
    got: list[int] = []

    def deliver(d: Delivery) -> Any:
        got.append(int.from_bytes(d.payload[:4], "big"))
        return None

    b.on_deliver = deliver
    for i in range(packets):
        som = mode in (Mode.RUDI, Mode.UUD) or i % msg_packets == 0
        eom = mode in (Mode.RUDI, Mode.UUD) or i % msg_packets == msg_packets - 1 or i == packets - 1
        body = i.to_bytes(4, "big") + bytes(payload - 4)
        a.submit(_B, mode, int(NextHeader.SMALL), _SES, body, token=i, som=som, eom=eom, now=0)
    now = 0
    flight: list[tuple[int, int, str, bytes, str, int]] = []
    seq = 0
    lost = 0
    reordered = 0
    retx = 0
    acked: list[int] = []
    failed = 0
    end = max_ns
    rxq: list[tuple[bytes, str, int]] = []  # B's socket queue (rx_ns > 0)
    b_free = 0

    def collect() -> None:
        nonlocal seq, lost, retx, reordered
        for src, core in ((_A, a), (_B, b)):
            for data, dst, ent in core.datagrams_to_send(now):
                fwd = src == _A and _is_request(data)
                if fwd and data[1] & _RETX_BIT:
                    retx += 1
                if loss and rng.random() < loss:
                    lost += fwd
                    continue
                for _ in range(2 if dup and rng.random() < dup else 1):
                    t = now + delay_ns
                    if reorder and rng.random() < reorder:
                        t += rng.randrange(1, 4 * delay_ns)
                        reordered += fwd
                    seq += 1
                    heapq.heappush(flight, (t, seq, dst, data, src, ent))

    def events() -> None:
        nonlocal failed
        while (ev := a.next_event()) is not None:
            if isinstance(ev, Acked):
                acked.append(ev.token)
            elif isinstance(ev, Failed):
                failed += 1
        while b.next_event() is not None:
            pass

    while len(acked) + failed < packets and now <= end:
        collect()
        events()
        cands = [flight[0][0]] if flight else []
        if rxq:
            cands.append(max(b_free, now))
        for core in (a, b):
            t = core.get_timer()
            if t is not None:
                cands.append(max(t, now))
        if not cands:
            break
        now = max(now, min(cands))
        while flight and flight[0][0] <= now:
            _t, _s, dst, data, src, ent = heapq.heappop(flight)
            if rx_ns and dst == _B:
                if len(rxq) < rx_queue:
                    rxq.append((data, src, ent))
                else:
                    lost += _is_request(data)
                continue
            (a if dst == _A else b).receive_datagram(data, now, source=src, source_port=ent)
        while rxq and b_free <= now:
            data, src, ent = rxq.pop(0)
            b.receive_datagram(data, now, source=src, source_port=ent)
            b_free = max(b_free, now) + rx_ns
        for core in (a, b):
            t = core.get_timer()
            if t is not None and t <= now:
                core.handle_timer(now)
        collect()
        events()
    uniq = set(got)
    dups = len(got) - len(uniq)
    in_order = mode != Mode.ROD or got == sorted(uniq)
    exact = mode == Mode.RUDI or dups == 0
    intact = not failed and sorted(acked) == list(range(packets)) and uniq == set(range(packets)) and exact and in_order
    return CellResult(
        mode=mode.name,
        loss=loss,
        seed=seed,
        packets=packets,
        intact=intact,
        acked=len(acked),
        failed=failed,
        delivered=len(uniq),
        duplicates=dups,
        in_order=in_order,
        lost=lost,
        reordered=reordered,
        retransmissions=retx,
        retx_per_lost=round(retx / lost, 2) if lost else 0.0,
        virtual_ms=round(now / 1e6, 3),
    )


def run_matrix(
    modes: tuple[Mode, ...] = (Mode.RUD, Mode.ROD, Mode.RUDI),
    losses: tuple[float, ...] = (0.01, 0.05, 0.10, 0.20),
    seeds: tuple[int, ...] = (1, 2, 3),
    **kw: Any,
) -> list[CellResult]:
    """Every (mode, loss, seed) cell, in that order."""
    return [run_cell(m, loss, s, **kw) for m in modes for loss in losses for s in seeds]


def as_dicts(results: list[CellResult]) -> list[dict[str, Any]]:
    """JSON-ready records."""
    return [asdict(r) for r in results]
