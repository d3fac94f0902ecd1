"""Direct link receive batching: one readiness callback drains a burst in capped batches."""

from __future__ import annotations

import asyncio

from uet.link import DSCP_DATA, DirectLink
from uet.link.direct import loopback_addresses


async def test_burst_is_drained_in_capped_batches() -> None:
    a, b = loopback_addresses(2)
    la = DirectLink(a, 0)
    lb = DirectLink(b, 0, peer_port=la.port, max_batch=16, max_rounds=4)
    la.peer_port = lb.port
    sizes: list[int] = []
    got: list[bytes] = []
    done = asyncio.Event()

    def sink(batch) -> None:
        sizes.append(len(batch))
        got.extend(d for d, _s, _e in batch)
        if len(got) >= 300:
            done.set()

    lb.set_receiver(sink)
    try:
        for i in range(300):  # queued in the kernel before the reader runs: one burst
            la.send(i.to_bytes(2, "big") * 50, lb.address, entropy=i, dscp=DSCP_DATA)
        await asyncio.wait_for(done.wait(), 10.0)
        assert [int.from_bytes(d[:2], "big") for d in got] == list(range(300))
        assert max(sizes) <= 16 and lb.counters["rx_batches"] == len(sizes)
        assert lb.counters["rx_packets"] == 300
        assert sizes.count(16) >= 300 // 16 - 2  # a burst arrives as full batches
    finally:
        la.close()
        lb.close()
