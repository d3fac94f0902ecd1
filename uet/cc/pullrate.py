"""RCCC receiver: each sender's share of the pull rate, cut when its packets are trimmed in the core.

RCCC paces credit at the receiver's own link rate (spec/behaviour.md §4.5), which is right for the
last hop, the link the receiver sees. The notes add that "RCCC needs another mechanism (NSCC) for
core congestion" and say nothing more. Without one, a receiver keeps granting its full rate to a
sender whose path shares a fabric link with ``k − 1`` other flows: the link is offered ``k`` times
its rate, trims ``(k − 1) / k`` of what arrives, and every trim funds its own resend (§3.3) — with
one entropy per flow about one retransmission per delivered packet (uet-sim's 1,024-host
single-path RCCC permutation: 487,318 for 500,736 data packets; 16 hosts: 4,576 for 7,824, every
one a non-last-hop trim NACK).

**Choice** (inference; uet-htsim has the same idea as its opt-in ``oversubscribed_cc`` receiver
controller): the receiver watches each sender's data for trims *before* the last hop — the
trimmed DSCP says which (§3.2: ``DSCP_TRIMMED`` vs ``DSCP_TRIMMED_LASTHOP``). A last-hop trim is
the receiver's own link, which its pacer already shares out, and never counts. Per sender, in
epochs of ``1.5 × base_rtt`` (htsim's period), each begun by the first packet that arrives after
the last one ended:

- a fraction ``f`` of its packets trimmed in the core → ``rate ×= 1 − f / 2``, at most a halving
  per epoch;
- an epoch without a core trim → ``rate += core_pull_ai × 1.1^n`` (``n`` = increases in a row:
  htsim's accelerating additive increase), at most 1;
- an epoch with neither a core trim nor an ECN-CE mark → at least ``rate × core_pull_mi`` (1.5):
  no queue on the path, so the flows it shared a link with have gone and the share can grow
  back quickly (a mark may come from the last hop, which only slows this growth);
- never below ``core_pull_min``.

``rate`` multiplies the pacer's rate for that sender only: the pacer still serves every sender of
its link in turn and stays work-conserving (uet.cc.rccc).

Tried on uet-sim's 128-host single-path RCCC permutation (seeds 1–3; without this: tails 907 /
811 / 831 µs, about 44,000 retransmissions each): htsim's cut (``rate −= f``) or ``× (1 − f)``
send a sender whose packets lose one unlucky epoch of a trimming FIFO to the floor (tail +5 %
on seed 1); skipping the epoch after a cut (its packets were granted before the cut) left 16,000
retransmissions instead of 11,600 and no better tail. Kept: 867 / 789 / 858 µs, 13,044 /
12,894 / 11,833 retransmissions. Additive increase alone (``core_pull_mi = 1``) had the same
mean tail there (904 / 808 / 803 µs, about 11,600) but recovers slowly when a colliding flow
ends: at 8 hosts (two flows on one link) 415 µs without core pull, 482 with additive increase
alone, 424 with ``core_pull_mi``.
"""

from __future__ import annotations

from uet.cc.config import CcConfig


class PullRate:
    """One sender's pull-rate share at a receiver (module doc)."""

    __slots__ = ("rate", "pkts", "trims", "marks", "epoch_end", "ups")

    def __init__(self) -> None:
        #: share of the receiver's pull rate this sender gets (1 = all of it)
        self.rate = 1.0
        #: data packets (trimmed or not), core trims and CE-marked packets in the current epoch
        self.pkts = 0
        self.trims = 0
        self.marks = 0
        self.epoch_end: int | None = None
        #: increases in a row since the last cut
        self.ups = 0

    def on_data(self, core_trim: bool, now: int, cfg: CcConfig, ce: bool = False) -> None:
        """A data packet of this sender arrived (``core_trim``: trimmed before the last hop;
        ``ce``: untrimmed and ECN-CE marked)."""
        end = self.epoch_end
        if end is None or now >= end:
            if end is not None:
                self._close(cfg)
            self.epoch_end = now + cfg.base_rtt_ns * 3 // 2
        self.pkts += 1
        if core_trim:
            self.trims += 1
        elif ce:
            self.marks += 1

    def _close(self, cfg: CcConfig) -> None:
        n = self.pkts
        t = self.trims
        m = self.marks
        self.pkts = self.trims = self.marks = 0
        if t:
            r = self.rate * (1.0 - t / n / 2)
            self.rate = r if r > cfg.core_pull_min else cfg.core_pull_min
            self.ups = 0
        elif self.rate < 1.0:
            r = self.rate + cfg.core_pull_ai * 1.1**self.ups
            if not m:  # nor a CE mark: no queue on its path, grow faster
                g = self.rate * cfg.core_pull_mi
                if g > r:
                    r = g
            self.rate = r if r < 1.0 else 1.0
            self.ups += 1
