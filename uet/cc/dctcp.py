"""A DCTCP-style window (RFC 8257), a baseline to compare NSCC and RCCC against (``pds.cc = "dctcp"``).

Not a UET algorithm (spec/behaviour.md §4 defines NSCC and RCCC only): a window in nominal bytes
that grows by one MTU per window acknowledged without marks and, once per window that saw
marks, shrinks to ``cwnd × (1 − α/2)``. ``α`` is the moving average (gain ``g`` = 1/16, RFC 8257
§4.2) of the fraction of bytes marked per window: ECN-CE marked bytes as the ACKs report them
(an ACK_CC's ``m`` names one packet; an ACK_CCX counts every marked byte), and trimmed
packets, which a trimming fabric sends instead of marking once the queue is full. An inferred
loss (RTO or SACK) halves the window, at most once per window. The window starts at MaxWnd
(1.5 × BDP, as NSCC: the fabric's base RTT is known, so there is no slow start) and stays in
``[min_cwnd, MaxWnd]`` (``CcConfig``).
"""

from __future__ import annotations

from typing import Any, Final

from uet.cc.base import CcAlgorithm, Log
from uet.cc.config import CcConfig

#: RFC 8257 §4.2: the weight of a new window's marked fraction in α
GAIN: Final = 1 / 16


class Dctcp(CcAlgorithm):
    """Per-CCC DCTCP state (module docstring)."""

    name = "dctcp"

    def __init__(self, cfg: CcConfig, now: int = 0, log: Log | None = None) -> None:
        super().__init__(cfg, now, log)
        self.mtu = cfg.mtu
        self.max_wnd = cfg.max_wnd
        self.min_cwnd = float(cfg.min_cwnd if cfg.min_cwnd is not None else cfg.mtu)
        self.cwnd = self.max_wnd
        self.inflight = 0
        self.alpha = 1.0  # RFC 8257 §4.2: start conservative
        #: the observation window: bytes acknowledged and marked since it began, and its size
        self.acked = 0
        self.marked = 0
        self.window_end = self.cwnd
        #: a reduction was made in this window (at most one per window)
        self.reduced = False
        self.reductions = 0

    def can_send(self, size: int, now: int) -> bool:
        return self.inflight <= 0 or self.inflight + size <= self.cwnd

    def on_send(self, size: int, now: int) -> None:
        self.inflight += size

    def ack_request(self, size: int = 0) -> bool:
        """AR when the window is all but full, so its ACK comes at once (as NSCC, §4.3.3)."""
        return self.cwnd - self.inflight - size < self.mtu

    def window(self) -> float | None:
        return self.cwnd

    def on_ack_bytes(self, newly_rcvd: int, ecn_bytes: int, now: int) -> None:
        self.inflight -= newly_rcvd
        if not ecn_bytes and not self.reduced:
            self.cwnd = min(self.cwnd + self.mtu * newly_rcvd / self.cwnd, self.max_wnd)
        self._observe(newly_rcvd, min(ecn_bytes, newly_rcvd), now)

    def on_nack(self, size: int, rtt: int | None, trimmed: bool, lasthop: bool, credit: bool, now: int) -> None:
        self.inflight -= size
        if trimmed:  # the fabric's congestion signal in place of a mark
            self._observe(size, size, now)

    def on_inferred_loss(self, size: int, now: int) -> None:
        self.inflight -= size
        if not self.reduced:
            self._set(self.cwnd / 2, now)

    def on_abandon(self, size: int) -> None:
        self.inflight -= size

    def _observe(self, nbytes: int, marked: int, now: int) -> None:
        """Count ``nbytes`` acknowledged (``marked`` of them marked); react once per window."""
        self.acked += nbytes
        self.marked += marked
        if marked and not self.reduced:
            self._set(self.cwnd * (1 - self.alpha / 2), now)
        if self.acked >= self.window_end:  # a window's worth: update α, start the next window
            self.alpha = (1 - GAIN) * self.alpha + GAIN * self.marked / self.acked
            self.acked = self.marked = 0
            self.window_end = self.cwnd
            self.reduced = False

    def _set(self, cwnd: float, now: int) -> None:
        self.cwnd = min(max(cwnd, self.min_cwnd), self.max_wnd)
        self.reduced = True
        self.reductions += 1
        if self._log is not None:
            self._log({"t": now, "ev": "cc", "algo": "dctcp", "cwnd": int(self.cwnd), "alpha": round(self.alpha, 4)})

    def snapshot(self) -> dict[str, Any]:
        return {"cwnd": self.cwnd, "inflight": self.inflight, "alpha": self.alpha, "reductions": self.reductions}
