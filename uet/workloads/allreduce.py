"""Ring all-reduce: reduce-scatter, then all-gather, around a ring of ranks.

Every rank holds a vector of ``message_bytes`` bytes (:func:`~uet.workloads.base.message_data` of
flow = rank, index 0) cut into n chunks (the last takes the remainder). Rank r sends to its right
neighbour r + 1 and receives from its left neighbour r − 1 (mod n):

* reduce-scatter, steps s = 0 … n − 2: send chunk (r − s) mod n, receive chunk (r − s − 1) mod n
  and reduce it into the local copy; afterwards rank r holds the fully reduced chunk (r + 1) mod n;
* all-gather, steps s = 0 … n − 2: send chunk (r + 1 − s) mod n, receive chunk (r − s) mod n and
  keep it.

That is 2(n − 1) messages per rank, each about message_bytes / n: the bandwidth-optimal schedule.
Step k's message is tagged k and received with ``source`` = the left neighbour, so a fast
neighbour's next step can never be taken for this one.

**Decision**: the reduction is bitwise XOR of the chunks read as big integers. It is associative
and commutative like a sum, exact, and runs in C in CPython (a numeric sum would need numpy, which
is not a dependency); the data movement — what the fabric sees — is identical. Each rank checks
that its final vector equals the XOR of every rank's input (``RankReport.check``).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from uet.transport import Transport, error_name
from uet.workloads.base import Flow, FlowReport, RankReport, Workload, _retransmits, _rx, message_data

__all__ = ["RingAllReduce"]


class RingAllReduce(Workload):
    """See the module docstring; one flow per rank (to its right neighbour)."""

    name = "allreduce"

    def pairs(self) -> list[tuple[int, int]]:
        return [(r, (r + 1) % self.n) for r in range(self.n)]

    def __init__(
        self,
        n: int,
        *,
        message_bytes: int = 65536,
        messages: int = 1,
        seed: int = 0,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(n, message_bytes=message_bytes, messages=1, seed=seed, params=params)
        if message_bytes < n:
            raise ValueError("allreduce needs message_bytes >= endpoints (one chunk per rank)")
        steps = 2 * (n - 1)
        self._flows = [Flow(r, r, (r + 1) % n, steps, message_bytes // n) for r in range(n)]

    def bounds(self, c: int) -> tuple[int, int]:
        """Byte range of chunk ``c``."""
        size = self.message_bytes // self.n
        return c * size, (c + 1) * size if c < self.n - 1 else self.message_bytes

    def total_bytes(self) -> int:
        return 2 * (self.n - 1) * self.message_bytes

    def expected(self, rank: int) -> int:
        return 2 * (self.n - 1)

    async def run(
        self,
        rank: int,
        ep: Transport,
        addresses: list[str],
        report: RankReport | None = None,
        *,
        now: Callable[[], float] | None = None,
    ) -> RankReport:
        clock = now or asyncio.get_running_loop().time
        t0 = clock()
        n = self.n
        vec = bytearray(message_data(self.seed, rank, 0, self.message_bytes))
        right, left = addresses[(rank + 1) % n], addresses[(rank - 1) % n]
        report = report if report is not None else RankReport()
        hashes: list[str] = []
        sent = 0
        err = None
        for step in range(2 * (n - 1)):
            s = step if step < n - 1 else step - (n - 1)
            out_c = (rank - s) % n if step < n - 1 else (rank + 1 - s) % n
            in_c = (rank - s - 1) % n if step < n - 1 else (rank - s) % n
            a, b = self.bounds(out_c)
            chunk = bytes(vec[a:b])
            hashes.append(hashlib.sha256(chunk).hexdigest())
            sent += len(chunk)
            res = await asyncio.gather(
                ep.send(right, chunk, tag=step, header_data=(rank << 32) | step),
                ep.recv(step, source=left),
                return_exceptions=True,
            )
            failure = next((r for r in res if isinstance(r, BaseException)), None)
            if failure is not None:
                err = error_name(failure)
                break
            m = res[1]
            assert not isinstance(m, BaseException)  # no failure above
            report.add_rx(_rx(m, clock() - t0))
            a, b = self.bounds(in_c)
            got = bytes(m.data)
            if len(got) != b - a:
                err = "WRONG_LENGTH"
                break
            if step < n - 1:
                x = int.from_bytes(vec[a:b], "big") ^ int.from_bytes(got, "big")
                vec[a:b] = x.to_bytes(b - a, "big")
            else:
                vec[a:b] = got
        report.add_flow(
            FlowReport(
                rank,
                ep.address,
                right,
                sent,
                len(hashes),
                clock() - t0,
                _retransmits(ep, right),
                hashes,
                err,
            )
        )
        report.check = err is None and bytes(vec) == self.expected_result()
        return report

    def expected_result(self) -> bytes:
        """The XOR of every rank's input vector."""
        acc = 0
        for r in range(self.n):
            acc ^= int.from_bytes(message_data(self.seed, r, 0, self.message_bytes), "big")
        return acc.to_bytes(self.message_bytes, "big")
