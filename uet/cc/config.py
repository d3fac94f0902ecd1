"""Configuration of the congestion control contexts (one dataclass, aioquic style).

Defaults from spec/behaviour.md §4.3.1 (NSCC table) and §4.5 (RCCC, htsim's receiver-credit
model). Times are integer nanoseconds, rates bits per second, sizes bytes of *nominal* packet size
(§4.2: UDP length + 40, identical at both ends).
"""

from __future__ import annotations

from dataclasses import dataclass

#: the reference network of the NSCC scaling factors (§4.3.1): 100 Gb/s and 12 µs → 150 000 bytes
REF_BDP = 150_000
REF_RTT_NS = 12_000


@dataclass(frozen=True)
class CcConfig:
    """Parameters shared by NSCC, RCCC and the path selectors of one FEP.

    Attributes:
        link_bps: ``min(sender, receiver)`` link speed in bits/s (§4.3.1 ``BDP``); also the rate
            the RCCC receiver paces its grants at (times ``pull_rate``).
        base_rtt_ns: ``config_base_rtt``: RTT of an MTU packet over the longest path with no
            queueing (§4.3.1). 12 µs (the reference network) by default.
        mtu: the packet size the CC formulas use (§4.3.1 "MTU"): nominal bytes of a full packet.
            Default 4096 (htsim uses the payload size; inference: our scenarios carry 4 KiB
            payloads, so a full packet's nominal size is a little larger, never smaller).
        trimming: the fabric trims (§3): ``target_qdelay = 0.75 × base_rtt`` instead of 1.0,
            and REPS may freeze on timeouts (§4.6).
        qa_threshold_ns: quick-adapt delay threshold; None = ``4 × target_qdelay`` without
            trimming and disabled (infinite) with trimming, as the spec asks (§4.3.1; htsim keeps
            4 × target with trimming).
        disable_quick_adapt: turn quick adapt off (§4.3.1).
        pacing: NSCC paces first transmissions at ``cwnd / base_rtt`` (inference: the notes give
            NSCC no pacer; off by default so NSCC stays the spec's pure window). The pacing
            deadline goes into the PDS ``get_timer()``.
        grant_mtus: RCCC: credit added per grant, in MTUs (htsim: 4 × MSS, §4.5).
        pull_rate: RCCC: grants are paced at ``pull_rate × link_bps`` (0.99, §4.5).
        credit_req_ns: RCCC: a source blocked without credit repeats its CREDIT_REQ at most this
            often (None = ``base_rtt_ns``, "at most once per network RTT", §4.5).
        paths: size of the entropy space sprayed over (≥ 256 is typical, §4.6).
        reps_slots: REPS buffer size (8, htsim).
        reps_freeze_ns: REPS freezing time after a timeout (10 ms, htsim).
        reps_explore: random EVs REPS explores after a freeze (16, htsim).
        base_rtt_probe: NSCC: after a new CCC's first ACK or NACK, send one PROBE CP on the
            control class for a clean base-RTT sample (§4.3.6; the notes make it optional when
            the path's base RTT is known or the PDC sends only about one BDP).
        min_cwnd: NSCC's smallest window in nominal bytes; None = ``mtu``, the notes' "minimum
            cwnd" (§4.3.1, as htsim). A value below ``mtu`` allows a *sub-packet* window
            (inference, beyond the notes): with ``cwnd`` below the packet's size a sender keeps
            at most one packet in flight and sends the next no sooner than ``size × base_rtt /
            cwnd`` after the previous one, so a window of ``mtu / k`` means one packet every
            ``k`` base RTTs (see :class:`uet.cc.nscc.Nscc`).
        core_pull: RCCC receiver: slow the grants of a sender whose packets are trimmed before
            the last hop (inference, beyond the notes' RCCC; see :mod:`uet.cc.pullrate`).
        core_pull_ai: its additive increase per epoch without a core trim, as a share of the
            pull rate, growing 1.1× per increase in a row (htsim's receiver controller: 0.01;
            0.03 gave the shorter tail in uet-sim's 128-host single-path permutation).
        core_pull_min: the smallest share of the pull rate a sender is cut to (0.01, htsim).
        core_pull_mi: the share's growth factor after an epoch with neither a core trim nor an
            ECN-CE mark (1.5; 1 = additive increase only).
        idle_credit: RCCC receiver: a sender with no demand beyond its grants gets unsolicited
            grants in the pacer's spare time until it holds about one ``MaxWnd`` of unused credit
            (§4.5 "slow" grants to idle senders; :class:`uet.cc.rccc.CreditScheduler`). Off by
            default; the scale-up path of a server turns it on (uet.scenario.derive).
    """

    link_bps: float = 100e9
    base_rtt_ns: int = REF_RTT_NS
    mtu: int = 4096
    trimming: bool = True
    qa_threshold_ns: int | None = None
    disable_quick_adapt: bool = False
    pacing: bool = False
    grant_mtus: int = 4
    pull_rate: float = 0.99
    credit_req_ns: int | None = None
    paths: int = 256
    reps_slots: int = 8
    reps_freeze_ns: int = 10_000_000
    reps_explore: int = 16
    base_rtt_probe: bool = True
    min_cwnd: int | None = None
    core_pull: bool = True
    core_pull_ai: float = 0.03
    core_pull_min: float = 0.01
    core_pull_mi: float = 1.5
    idle_credit: bool = False

    def __post_init__(self) -> None:
        if self.link_bps <= 0 or self.base_rtt_ns <= 0 or self.mtu <= 0:
            raise ValueError("link_bps, base_rtt_ns and mtu must be positive")
        if not 1 <= self.paths <= 0xC000:
            raise ValueError("paths must be in 1..49152")
        if self.reps_slots < 1 or self.grant_mtus < 1 or not 0 < self.pull_rate <= 1:
            raise ValueError("reps_slots and grant_mtus must be ≥ 1, pull_rate in (0, 1]")
        if self.min_cwnd is not None and not 0 < self.min_cwnd <= self.mtu:
            raise ValueError("min_cwnd must be in 1..mtu")
        if not 0 < self.core_pull_min <= 1 or not 0 < self.core_pull_ai <= 1 or self.core_pull_mi < 1:
            raise ValueError("core_pull_min and core_pull_ai must be in (0, 1], core_pull_mi ≥ 1")

    @property
    def bdp(self) -> float:
        """``min(link speeds) × config_base_rtt`` in bytes (§4.3.1)."""
        return self.link_bps / 8 * self.base_rtt_ns * 1e-9

    @property
    def max_wnd(self) -> float:
        """``MaxWnd = 1.5 × BDP`` (§4.3.1); also the RCCC speculative credit (§4.5)."""
        return 1.5 * self.bdp
