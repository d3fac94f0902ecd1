"""What each flow received over time, seen from the fabric's edge (issue 27: stalls and recovery).

A :class:`FlowMeter` watches the frames a fabric hands to hosts. A *flow* is a (source,
destination) IPv4 pair; only data frames count — UDP payloads of at least :data:`DATA_MIN` bytes,
so the ACKs a receiver sends back on the same pair do not hide a stall of its data (a workload of
messages smaller than that is invisible here). Per flow it keeps the bytes received per time bin
(throughput over time) and the times of the frames, and answers two questions about an instant T
(a fault): which gap between two deliveries contains T (the flow's **stall** across the fault)
and when it ended (its **recovery**).
"""

from __future__ import annotations

from typing import Any

#: smallest UDP payload counted as data (larger than any ACK, NACK or trimmed header here)
DATA_MIN = 256


class FlowMeter:
    """Per-flow delivery record; see the module docstring. ``bin_ns``: the throughput bin."""

    def __init__(self, bin_ns: int = 10_000) -> None:
        self.bin_ns = bin_ns
        #: (src, dst) 4-byte addresses → arrival times of its data frames, in order
        self.times: dict[tuple[bytes, bytes], list[int]] = {}
        #: (src, dst) → {bin index: bytes}
        self.bins: dict[tuple[bytes, bytes], dict[int, int]] = {}

    def deliver(self, t: int, frame: bytes | bytearray) -> None:
        """A frame reached its host at ``t``."""
        if len(frame) < 42 or frame[12] != 8 or frame[13] != 0 or frame[23] != 17:
            return  # untagged IPv4 UDP only
        payload = ((frame[16] << 8) | frame[17]) - ((frame[14] & 0xF) << 2) - 8
        if payload < DATA_MIN:
            return
        key = (bytes(frame[26:30]), bytes(frame[30:34]))
        times = self.times.get(key)
        if times is None:
            times = self.times[key] = []
            self.bins[key] = {}
        times.append(t)
        b = self.bins[key]
        i = t // self.bin_ns
        b[i] = b.get(i, 0) + payload

    def gap_at(self, key: tuple[bytes, bytes], t: int) -> tuple[int, int] | None:
        """The (start, end) of the gap between two deliveries of ``key`` that contains ``t``, or
        None when the flow was not active then (it had not started or had finished)."""
        times = self.times.get(key)
        if not times or not times[0] <= t < times[-1]:
            return None
        lo, hi = 0, len(times) - 1
        while hi - lo > 1:  # times[lo] <= t < times[hi]
            mid = (lo + hi) // 2
            if times[mid] <= t:
                lo = mid
            else:
                hi = mid
        return times[lo], times[hi]

    def longest_gap(self, key: tuple[bytes, bytes]) -> int:
        """The longest time between two deliveries of ``key`` (0 for fewer than two)."""
        times = self.times.get(key, [])
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0)

    def around(self, t: int) -> dict[str, Any]:
        """Stall and recovery of the flows active at ``t`` (JSON-ready): how many, the longest and
        the 99th-percentile gap containing ``t``, and the latest end of one (µs after ``t``)."""
        gaps = []
        ends = []
        for key in self.times:
            g = self.gap_at(key, t)
            if g is not None:
                gaps.append(g[1] - g[0])
                ends.append(g[1] - t)
        gaps.sort()
        return {
            "t_ns": t,
            "active_flows": len(gaps),
            "stall_max_us": round(gaps[-1] / 1e3, 3) if gaps else 0.0,
            "stall_p99_us": round(gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))] / 1e3, 3) if gaps else 0.0,
            "recovered_after_us": round(max(ends) / 1e3, 3) if ends else 0.0,
        }

    def total_series(self) -> list[tuple[int, float]]:
        """(bin start ns, Gb/s) summed over every flow, from the first bin with data to the last."""
        tot: dict[int, int] = {}
        for b in self.bins.values():
            for i, n in b.items():
                tot[i] = tot.get(i, 0) + n
        if not tot:
            return []
        return [(i * self.bin_ns, tot.get(i, 0) * 8 / self.bin_ns) for i in range(min(tot), max(tot) + 1)]

    def stalled_at(self, t: int, n: int) -> list[tuple[bytes, bytes]]:
        """The ``n`` flows with the longest gap containing ``t``, longest first."""
        gaps = []
        for key in self.times:
            g = self.gap_at(key, t)
            if g is not None:
                gaps.append((g[1] - g[0], key))
        gaps.sort(key=lambda x: -x[0])
        return [k for _, k in gaps[:n]]

    def series(self, key: tuple[bytes, bytes]) -> list[tuple[int, float]]:
        """(bin start ns, Gb/s) of ``key``, bins without data included as 0 between its first
        and last."""
        b = self.bins.get(key, {})
        if not b:
            return []
        lo, hi = min(b), max(b)
        return [(i * self.bin_ns, b.get(i, 0) * 8 / self.bin_ns) for i in range(lo, hi + 1)]
