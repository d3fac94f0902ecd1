"""Queue pair configuration: one dataclass, defaults from spec/rocev2-and-fabric.md §1, §6, App. A,
and the DCQCN constants it carries (:class:`DcqcnConfig`, §7.4; the algorithm: :mod:`uet.roce.dcqcn`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from uet.wire.net import Ecn
from uet.wire.roceconst import DSCP_CNP, DSCP_DATA, PMTUS

_US = 1_000
_MBPS = 1e6

#: Frame bytes around a RoCE datagram on the wire: Ethernet 14 + FCS 4 + preamble/SFD and
#: inter-frame gap 20 + IPv4 20 + UDP 8 (§1.1), what the rate limiter and byte counter charge.
WIRE_OVERHEAD = 66


@dataclass(frozen=True)
class DcqcnConfig:
    """DCQCN constants (§7.4); build with :meth:`paper` or :meth:`nvidia` and :meth:`scaled`."""

    profile: str = "paper"
    #: line rate Rline, bit/s
    line_rate: float = 100e9
    #: α gain g
    g: float = 1 / 256
    #: α on a QP's first CNP
    alpha0: float = 1.0
    #: α timer K (paper) / α period Pα (nvidia), ns
    alpha_period_ns: int = 55 * _US
    #: rate-decrease period Pd (nvidia only), ns
    decrease_period_ns: int = 4 * _US
    #: rate-increase timer T, ns
    increase_period_ns: int = 55 * _US
    #: byte counter B, bytes (0 disables it)
    byte_counter: int = 10 * 1024 * 1024
    #: fast-recovery stages F
    stages: int = 5
    #: additive and hyper increase steps, bit/s
    r_ai: float = 100 * _MBPS
    r_hai: float = 500 * _MBPS
    #: rate floor Rmin, bit/s
    r_min: float = 250 * _MBPS
    #: paper: halve T and B in hyper increase; Rt/8 on the first increase after a cut if Rt > 10 Rc
    hyper_halving: bool = True
    rt_div8: bool = True
    #: nvidia: Rt ← Rc on every cut (otherwise only when time_stage > 0)
    clamp_tgt_rate: bool = False
    #: nvidia: one cut never takes the rate below this fraction of it
    min_dec_fac: float = 0.0
    #: notification point hold-off N between two CNPs of one QP, ns
    cnp_holdoff_ns: int = 50 * _US

    @classmethod
    def paper(cls, line_rate: float = 100e9) -> DcqcnConfig:
        """The paper profile (§7.2) with R_AI, R_HAI and Rmin scaled from their 40 Gb/s values
        ∝ line rate (§8.9: 40 / 200 / 100 Mb/s at 40 Gb/s) and B scaled likewise (10 MB)."""
        k = line_rate / 40e9
        return cls(
            profile="paper",
            line_rate=line_rate,
            r_ai=40 * _MBPS * k,
            r_hai=200 * _MBPS * k,
            r_min=100 * _MBPS * k,
            byte_counter=round(10 * 1024 * 1024 * k),
        )

    @classmethod
    def nvidia(cls, line_rate: float = 100e9) -> DcqcnConfig:
        """The ConnectX-style profile (§7.3, §7.4): Pα 1 µs, Pd 4 µs, T 300 µs, F 1, R_AI 5 and
        R_HAI 50 Mb/s at 25 Gb/s scaled ∝ line rate, Rmin 1 Mb/s, α0 1023/1024, hold-off 4 µs."""
        k = line_rate / 25e9
        return cls(
            profile="nvidia",
            line_rate=line_rate,
            g=1 / 256,
            alpha0=1023 / 1024,
            alpha_period_ns=1 * _US,
            decrease_period_ns=4 * _US,
            increase_period_ns=300 * _US,
            byte_counter=0,
            stages=1,
            r_ai=5 * _MBPS * k,
            r_hai=50 * _MBPS * k,
            r_min=1 * _MBPS,
            hyper_halving=False,
            rt_div8=False,
            cnp_holdoff_ns=4 * _US,
        )

    def scaled(self, k_t: float) -> DcqcnConfig:
        """Time constants (and the byte counter) × ``k_t`` (§8.9 scaling for a model whose base RTT
        is ``k_t`` times the reference's)."""
        return replace(
            self,
            alpha_period_ns=round(self.alpha_period_ns * k_t),
            decrease_period_ns=round(self.decrease_period_ns * k_t),
            increase_period_ns=round(self.increase_period_ns * k_t),
            byte_counter=round(self.byte_counter * k_t),
            cnp_holdoff_ns=round(self.cnp_holdoff_ns * k_t),
        )

    def __post_init__(self) -> None:
        if self.profile not in ("paper", "nvidia"):
            raise ValueError(f"DCQCN profile must be 'paper' or 'nvidia', not {self.profile!r}")
        if self.line_rate <= 0 or not 0 < self.g <= 1:
            raise ValueError("DCQCN needs a positive line rate and 0 < g <= 1")


@dataclass(frozen=True)
class QpConfig:
    """RC queue pair settings (IB encodings where the verbs use them).

    Attributes:
        pmtu: path MTU, the payload of every FIRST/MIDDLE packet (§1.1 Decision: 1024).
        timeout: local ACK timeout code; RTO = 4.096 µs × 2^timeout, 0 = no timer (§6.6). The
            default 8 (≈1.05 ms) is the reference-scale value of §6.6.
        retry_cnt: retries after timeouts and sequence-error NAKs, 0–7; 7 is finite (§6.4 Decision).
        rnr_retry: retries after RNR NAKs, 0–7; 7 means infinite (§6.4).
        min_rnr_timer: RNR timer code the responder puts in its RNR NAKs (§3.1 table; 1 = 10 µs).
        ack_req_every: the requester sets AckReq at least once every this many packets, and on the
            last packet of every message (§6.5 Decision: 16).
        window: most PSNs outstanding (sent and not acknowledged) at once (§6.2: 128).
        max_rd_atomic: most READ/atomic requests outstanding at once, at either side (§6.2: 16).
        dscp, ecn: IP DSCP and ECN of data, responses and ACKs (§1.4: 26, ECT(0)).
        cnp_dscp: DSCP of CNPs, sent Not-ECT (§1.4, §5.1: 48).
        dcqcn: DCQCN constants, or None for no congestion control (no rate limiter, no CNPs).
        wire_overhead: frame bytes around each datagram charged by the rate limiter.
        check_icrc: verify the ICRC of every received datagram and drop a bad one (§4).
        max_message: longest SEND a receive posted without a length accepts (bounds the memory a
            peer can make the responder hold; the verbs' limit is 2^31).
    """

    pmtu: int = 1024
    timeout: int = 8
    retry_cnt: int = 7
    rnr_retry: int = 7
    min_rnr_timer: int = 1
    ack_req_every: int = 16
    window: int = 128
    max_rd_atomic: int = 16
    dscp: int = DSCP_DATA
    ecn: int = Ecn.ECT0
    cnp_dscp: int = DSCP_CNP
    dcqcn: DcqcnConfig | None = field(default_factory=DcqcnConfig.paper)
    wire_overhead: int = WIRE_OVERHEAD
    check_icrc: bool = True
    max_message: int = 64 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.pmtu not in PMTUS:
            raise ValueError(f"pmtu must be one of {PMTUS}")
        if not 0 <= self.timeout < 32 or not 0 <= self.retry_cnt <= 7 or not 0 <= self.rnr_retry <= 7:
            raise ValueError("timeout is 5 bits, retry_cnt and rnr_retry 3 bits")
        if not 0 <= self.min_rnr_timer < 32:
            raise ValueError("min_rnr_timer is a 5-bit code")
        if not 1 <= self.window < 1 << 23 or self.ack_req_every < 1 or self.max_rd_atomic < 1:
            raise ValueError("window must be in 1 .. 2^23 - 1; ack_req_every and max_rd_atomic >= 1")

    @property
    def rto_ns(self) -> int | None:
        """The local ACK timeout in ns, None when disabled (§6.6)."""
        return None if self.timeout == 0 else 4096 << self.timeout


#: Base RTT of the reference scale the RoCE time constants are given for (rocev2-and-fabric.md
#: §8.9: "reference ≈ 10 µs"), and the reference local ACK timeout code (§6.6: 8, ≈ 1.05 ms).
REFERENCE_RTT_NS = 10_000
REFERENCE_TIMEOUT = 8


def timeout_for_rtt(rtt_ns: float | None) -> int:
    """The local ACK timeout code for a fabric of base RTT ``rtt_ns`` (§8.9 scaling: the reference
    RTO 1.05 ms × k_t, k_t = RTT ÷ 10 µs, never below the reference), to the nearest code (codes
    are powers of two): the lab profile's 50 µs gives code 10 (4.2 ms), as §8.9 lists; the
    real-time profile's effective 1 ms gives 15 (134 ms). With the reference code 8 at 100 Mb/s,
    go-back-N timed out behind PFC pauses until ``retry_cnt`` ran out (issue 12: an 8:1 incast
    with a victim failed every flow; all-to-all on 9 hosts needs code 15: each host's QPs queue
    about 1 MB at its own NIC, 84 ms at 100 Mb/s)."""
    if not rtt_ns or rtt_ns <= REFERENCE_RTT_NS:
        return REFERENCE_TIMEOUT
    return min(31, REFERENCE_TIMEOUT + round(math.log2(rtt_ns / REFERENCE_RTT_NS)))


def config_for_link(
    rate_bps: float, ip_mtu: int = 1500, *, dcqcn: str | None = "paper", rtt_ns: float | None = None
) -> QpConfig:
    """A queue pair configuration for hosts on links of ``rate_bps`` and ``ip_mtu``: the largest
    PMTU that fits (PMTU + 64 ≤ IP MTU, §1.1), DCQCN's ``dcqcn`` profile scaled to the line
    rate (None: no congestion control) and, given the fabric's base RTT ``rtt_ns``, the local
    ACK timeout scaled to it (:func:`timeout_for_rtt`)."""
    fits = [p for p in PMTUS if p + 64 <= ip_mtu]
    if not fits:
        raise ValueError(f"IP MTU {ip_mtu} is below the smallest RoCE path MTU + 64")
    cc = None
    if dcqcn == "paper":
        cc = DcqcnConfig.paper(rate_bps)
    elif dcqcn == "nvidia":
        cc = DcqcnConfig.nvidia(rate_bps)
    elif dcqcn is not None:
        raise ValueError(f"DCQCN profile must be 'paper', 'nvidia' or None, not {dcqcn!r}")
    return QpConfig(pmtu=max(fits), dcqcn=cc, timeout=timeout_for_rtt(rtt_ns))


def config_at_rate(config: QpConfig, rate_bps: float) -> QpConfig:
    """``config`` for a QP whose frames leave on a link of ``rate_bps``: its DCQCN profile scaled
    to that rate as :func:`config_for_link` scales it (the rate limiter starts at, and recovers
    to, the line rate of the port the QP sends on), everything else unchanged."""
    cc = config.dcqcn
    if cc is None or cc.line_rate == rate_bps:
        return config
    scaled = DcqcnConfig.nvidia(rate_bps) if cc.profile == "nvidia" else DcqcnConfig.paper(rate_bps)
    return replace(config, dcqcn=scaled)
