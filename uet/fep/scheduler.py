"""The FEP's transmit scheduler: destinations served round-robin, one packet per turn.

**Why.** PDS pumps its PDCs one after another, and each pump sends every packet its windows
allow, so a batch from :meth:`~uet.pds.PdsCore.datagrams_to_send` is grouped by PDC: a message
(or a window's worth) to one destination, then the next destination's. The host NIC sends a
batch first in, first out, so with many destinations ready at once each host sent to one
destination at a time, and in an all-to-all every receiver met its senders' bursts as an incast
(issue 12: UET 1,075 Gb/s against RoCE's 2,227 on the §9.2 all-to-all, runs of 8 frames to one
destination). A NIC serves its send queues (RoCE's QPs, UET's CCCs) with a scheduler instead:
behaviour.md §4.1 keeps the CCCs that may send "on the scheduler's ready list" and §4.3.7 leaves
the arbitration among CCCs to the implementation.

**Rule (choice, the spec notes are silent on the discipline).** :func:`interleave` reorders
one batch so that the destinations with datagrams in it are served round-robin, one datagram per
destination per round, in the order each destination first appears in the batch. It never
reorders the datagrams of one destination (so per-PDC order, the order of a PDC's ACKs and
requests, and everything PDS decided about windows, credit and pacing stay as they were): it
only chooses which destination's next datagram the NIC gets next. Packet round-robin rather than
deficit round-robin by bytes: the data packets of a bulk transfer are all one payload size, and
the small control packets (ACKs) a destination receives should not wait for its share of bytes.
Destinations are Fabric Addresses, not (address, traffic class) pairs: the batch records carry
no class, and one FEP rarely sends two classes to one peer at once.

A batch to one destination — the single-flow fast path — is returned as it is, after one
C-speed pass over it (``set(map(itemgetter(1), batch))``).
"""

from __future__ import annotations

from itertools import chain, zip_longest
from operator import itemgetter
from typing import Any, TypeVar

__all__ = ["interleave"]

T = TypeVar("T", bound=tuple[Any, ...])

_dst = itemgetter(1)


def interleave(batch: list[T]) -> list[T]:
    """``batch`` (records whose item 1 is the destination) with its destinations served
    round-robin, one record each per round; each destination's records keep their order (module
    docstring). Returns ``batch`` itself when it holds at most one destination."""
    if len(batch) < 3 or len(set(map(_dst, batch))) == 1:
        return batch
    queues: dict[Any, list[T]] = {}
    for t in batch:
        q = queues.get(t[1])
        if q is None:
            queues[t[1]] = [t]
        else:
            q.append(t)
    return [t for t in chain.from_iterable(zip_longest(*queues.values())) if t is not None]
