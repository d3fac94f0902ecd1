"""Switch configuration: one dataclass per concern, defaults from the "lab" profile.

Every default below is the lab value of ``spec/rocev2-and-fabric.md`` §8.9 (all links 1 Gb/s,
1 µs per hop, PMTU 1024 so a data frame is about 1086 bytes and takes 8.7 µs) unless its
docstring says otherwise. Units are fixed across the model: rates in bit/s, times in integer
nanoseconds, sizes in bytes.

Scaling rules (§8.9) for other link rates: keep byte thresholds in units of the bandwidth-delay
product (ECN Kmin ≥ 2 frames, Kmax ≥ Kmin + 4 frames, PFC XOFF above Kmax), scale time constants
(flowlet δ) with the base RTT and keep the watchdog ≥ 100 × RTT. :func:`scaled` applies the byte
rule to a new rate.

Traffic classes, priorities and priority groups are the same numbers in this model: a packet
classified to TC *i* is counted in ingress priority group *i* and is paused by PFC priority *i*
(**decision**, the usual one-to-one DSCP → TC → PG → priority map of lossless RoCE deployments).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from uet.errors import UetError

#: any config dataclass (for the helpers that copy one with changes and return its own type); the
#: bound for type checkers only: a bound given as text is compiled when the TypeVar is made, and
#: a process's first compile() sets up the syntax tree's types (about 9 M instructions of a
#: one-flow uet-sim run, issue 28)
if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    DataclassT = TypeVar("DataclassT", bound=DataclassInstance)
else:
    DataclassT = TypeVar("DataclassT")

KB = 1024


class FabricError(UetError, ValueError):
    """A fabric model misuse: a bad option, topology or route, or time handed in going backwards."""


#: Load-balancing modes of §8.7.
LB_MODES = ("ecmp", "flowlet", "spray_rr", "spray_random", "adaptive")

#: Traffic class numbers used by the defaults (§8.1 table).
TC_DATA = 0
TC_ROCE = 3
TC_CONTROL = 6
TC_TRIMMED = 7


def default_dscp_map() -> tuple[int, ...]:
    """DSCP → TC table of rocev2-and-fabric.md §8.1 / Appendix A.

    5 and 7 (trimmed UET) → TC7; 46 (UET ACK/NACK/control) and 48 (CNP) → TC6; 24 and 26 (RoCE)
    → TC3; everything else (UET data DSCP 0 included) → TC0.
    """
    table = [TC_DATA] * 64
    for d in (5, 7):
        table[d] = TC_TRIMMED
    for d in (46, 48):
        table[d] = TC_CONTROL
    for d in (24, 26):
        table[d] = TC_ROCE
    return tuple(table)


@dataclass
class EcnConfig:
    """WRED/ECN marking of one traffic class (§8.2).

    Marking happens at dequeue on the instantaneous bytes left in the (egress port, TC) queue after
    the departing packet is removed: p = 0 up to ``kmin``, linear to ``pmax`` at ``kmax``, 1 above.
    ``wred_drop`` drops Not-ECT packets the draw selects (never used on a lossless class).
    ``weight_shift`` n > 0 selects the classic averaged mode instead: avg ← (1 − 2⁻ⁿ)·avg + 2⁻ⁿ·q
    on each arrival and the decision at dequeue uses avg (router default n = 9); 0 (default, the
    data-centre setting) is the instantaneous queue. ``last_hop`` false leaves ports facing a
    host unmarked: with receiver credit (RCCC) pacing the last hop, "typically ECN is disabled on
    the last-hop queue for this class" (behaviour.md §4.5), as uet-htsim does when RCCC runs.
    """

    kmin: int = 4 * KB
    kmax: int = 20 * KB
    pmax: float = 0.2
    wred_drop: bool = False
    weight_shift: int = 0
    last_hop: bool = True

    def probability(self, q: float) -> float:
        """Marking probability for a queue of ``q`` bytes (the rule is written once, in the copy
        a port reads per departing packet: :class:`uet.fabric.model.port.Marking`)."""
        from uet.fabric.model.port import Marking  # here: port imports this module

        return Marking(self).probability(q)


@dataclass
class TcConfig:
    """Per traffic class: scheduling, buffering and marking (§8.1, §8.3, §8.6).

    ``limit`` is the static egress-queue limit in bytes for lossy classes (None: only the dynamic
    threshold applies); for TC0 it is also the trim threshold (§8.9: 32 KB). ``dynamic`` applies
    the shared-buffer dynamic threshold α·(free shared) on top of the static limit.
    ``weight`` is the DWRR weight (quantum = weight × one maximum frame) of non-strict classes.
    """

    strict: bool = False
    weight: int = 1
    limit: int | None = 32 * KB
    dynamic: bool = True
    lossless: bool = False
    ecn: EcnConfig | None = None


def headroom_bytes(rate_bps: int, delay_ns: int, max_frame: int = 1518, resp_ns: int | None = None) -> int:
    """PFC headroom per (ingress port, lossless PG), §8.5 decision: R·(2·t_prop + t_pfc + t_resp)
    + 2·frame_max, t_resp one maximum frame time by default, rounded up to whole frames.
    Lab link (1 Gb/s, 1 µs, 1086-byte frames): 3.6 KB, i.e. 4 frames = 4344 bytes; §8.9 configures
    8 KB to leave margin for processing delay."""
    frame_ns = (max_frame + 24) * 8 * 1_000_000_000 / rate_bps
    pfc_ns = (64 + 20) * 8 * 1_000_000_000 / rate_bps
    t = 2 * delay_ns + pfc_ns + (frame_ns if resp_ns is None else resp_ns)
    raw = rate_bps * t / 8 / 1_000_000_000 + 2 * max_frame
    return -(-int(raw) // max_frame) * max_frame


def default_tcs() -> list[TcConfig]:
    """TC table of §8.1 with the lab limits of §8.9 (TC6 16 KB, TC7 64 KB, data TCs 32 KB)."""
    tcs = [TcConfig(ecn=EcnConfig()) if i == TC_DATA else TcConfig() for i in range(8)]
    tcs[TC_ROCE] = TcConfig(lossless=True, limit=None, dynamic=False, ecn=EcnConfig())
    tcs[TC_CONTROL] = TcConfig(strict=True, limit=16 * KB, dynamic=False)
    tcs[TC_TRIMMED] = TcConfig(strict=True, limit=64 * KB, dynamic=False)
    return tcs


@dataclass
class BufferConfig:
    """Shared packet buffer of one switch (§8.3, §8.5).

    ``size`` is the whole buffer. Headroom (``PfcConfig.headroom``) and the per-(port, lossless PG)
    ``reserve`` are carved out of it when the switch is built; the rest is the shared pool that
    lossy queues (dynamic threshold ``alpha`` × free shared bytes) and lossless PGs below XOFF use.
    """

    size: int = 512 * KB
    alpha: float = 1 / 8
    reserve: int = 2 * KB


@dataclass
class PfcConfig:
    """Priority flow control, sender and receiver side (§8.5).

    Static thresholds (default): XOFF when the bytes charged to an (ingress port, priority) reach
    ``xoff``; XON when they fall below ``xon`` (28.8 KB = XOFF − 3 frames in the lab profile).
    ``dynamic`` switches to the HPCC-style rule: pause when the PG's shared usage reaches
    ``alpha`` × free shared bytes, resume when usage + ``resume_offset`` is back under it.
    XOFF frames carry ``pause_quanta`` (0xFFFF) and are re-sent every ``refresh_ns`` while paused
    (None: half the pause time at the port's rate). ``headroom`` absorbs what arrives after XOFF.
    """

    enabled: bool = True
    xoff: int = 32 * KB
    xon: int = 29_491
    headroom: int = 8 * KB
    dynamic: bool = False
    alpha: float = 1 / 8
    resume_offset: int = 3 * KB
    pause_quanta: int = 0xFFFF
    refresh_ns: int | None = 16_000_000


@dataclass
class WatchdogConfig:
    """PFC watchdog (§8.5, lab values of §8.9: poll 5 ms, detect 10 ms, restore 10 ms).

    A lossless egress queue that holds packets, is paused by its peer and sent nothing for
    ``detect_ns`` (checked every ``poll_ns``) is declared stormed: with ``action`` "drop" its
    packets and new arrivals are dropped, with "forward" the pause is ignored, for ``restore_ns``;
    then PFC is honoured again.
    """

    enabled: bool = True
    poll_ns: int = 5_000_000
    detect_ns: int = 10_000_000
    restore_ns: int = 10_000_000
    action: str = "drop"


@dataclass
class TrimConfig:
    """UET packet trimming (§8.4 decisions, behaviour.md §3.2).

    ``trim_bytes`` None keeps the UET header stack as parsed (IP, UDP or entropy, TSS, PDS, SES and
    SES extension headers), at least ``min_bytes`` of the IP packet; an integer (64–1024, a
    multiple of 4) keeps exactly that many IP bytes. The trimmed packet gets DSCP
    ``dscp_lasthop`` towards a host and ``dscp_fabric`` towards a switch and goes to ``tc``.
    Only UET packets of the classes in ``tcs`` (TC0) are trim-eligible.
    """

    enabled: bool = True
    trim_bytes: int | None = None
    min_bytes: int = 64
    dscp_fabric: int = 7
    dscp_lasthop: int = 5
    tc: int = TC_TRIMMED
    tcs: tuple[int, ...] = (TC_DATA,)

    def __post_init__(self) -> None:
        if self.trim_bytes is not None and not (64 <= self.trim_bytes <= 1024 and self.trim_bytes % 4 == 0):
            raise FabricError("trim_bytes must be a multiple of 4 in 64..1024 (spec §8.4)")


@dataclass
class LbConfig:
    """Load balancing over equal-cost next hops (§8.7).

    ``mode`` is one of :data:`LB_MODES`; ``per_tc`` overrides it for single classes. The ECMP hash
    seed is the switch id unless ``seed`` is set. ``flowlet_ns`` is the flowlet gap δ (lab 50 µs).
    RoCE (UDP 4791) and non-UET traffic are always hashed per flow: only UET is sprayed — unless
    ``spray_all``, the negative control of §9.2 experiment 2 (RoCE forced to spray: reordering,
    sequence-error NAKs, go-back-N waste).
    """

    mode: str = "ecmp"
    per_tc: dict[int, str] = field(default_factory=dict)
    seed: int | None = None
    flowlet_ns: int = 50_000
    spray_all: bool = False

    def __post_init__(self) -> None:
        for m in (self.mode, *self.per_tc.values()):
            if m not in LB_MODES:
                raise FabricError(f"unknown load-balancing mode {m!r}; one of {LB_MODES}")


@dataclass
class SwitchConfig:
    """Everything one switch needs besides its ports and routes (§8).

    ``nic_queue_bytes`` bounds each traffic class of a host NIC's transmit queue in the model: a host
    that hands the fabric frames faster than its link rate fills it, and frames beyond it are
    dropped at the NIC and counted (``drop``/``nic_queue_full``) instead of queueing without
    bound (issue 15 item 14; a real NIC's transmit ring is finite too). None = unbounded.
    ``latency_ns`` is an optional fixed switching latency between reception and enqueue.
    ``sample_ns`` is the minimum interval between two queue-depth telemetry samples of one queue
    (0 disables sampling). ``trust_pcp`` classifies 802.1Q-tagged frames by PCP instead of DSCP.
    ``police_burst_bytes``: ingress policing of host-facing ports at their link rate
    (uet.fabric.model.switch, issue 29 item 12): a frame arriving sooner than the link could have
    carried it, beyond this much burst tolerance, is dropped (``drop``/``policed``). None = off.
    """

    dscp_map: tuple[int, ...] = field(default_factory=default_dscp_map)
    tcs: list[TcConfig] = field(default_factory=default_tcs)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    pfc: PfcConfig = field(default_factory=PfcConfig)
    watchdog: WatchdogConfig = field(default_factory=WatchdogConfig)
    trim: TrimConfig = field(default_factory=TrimConfig)
    lb: LbConfig = field(default_factory=LbConfig)
    latency_ns: int = 0
    sample_ns: int = 10_000
    trust_pcp: bool = False
    strict_budget: int | None = None
    nic_queue_bytes: int | None = 4 << 20
    police_burst_bytes: int | None = 32768

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> SwitchConfig:
        """Build from a (TOML-shaped) dict: nested tables for ``buffer``, ``pfc``, ``watchdog``,
        ``trim``, ``lb``; ``tcs`` as a table keyed by TC number whose values override fields of
        the default class (``ecn`` a table or false)."""
        d = dict(d or {})
        cfg = cls()
        for name, typ in (
            ("buffer", BufferConfig),
            ("pfc", PfcConfig),
            ("watchdog", WatchdogConfig),
            ("trim", TrimConfig),
            ("lb", LbConfig),
        ):
            if name in d:
                sub = dict(d.pop(name))
                if name == "lb" and "per_tc" in sub:
                    sub["per_tc"] = {int(k): v for k, v in sub["per_tc"].items()}
                setattr(cfg, name, _replace(typ(), sub))
        if "tcs" in d:
            for key, over in d.pop("tcs").items():
                tc = int(key)
                over = dict(over)
                base = cfg.tcs[tc]
                if "ecn" in over:
                    e = over.pop("ecn")
                    base.ecn = None if e is False or e is None else _replace(base.ecn or EcnConfig(), e)
                cfg.tcs[tc] = _replace(base, over)
        if "dscp_map" in d:
            table = list(cfg.dscp_map)
            for k, v in d.pop("dscp_map").items():
                table[int(k)] = int(v)
            cfg.dscp_map = tuple(table)
        return _replace(cfg, d)


def check_thresholds(cfg: SwitchConfig, links: list[tuple[int, int]]) -> list[str]:
    """The rules the seeds state for a lossless class, checked on a switch with ports on
    ``links`` ((rate bit/s, one-way delay ns) each). Refused with a :class:`FabricError` naming
    the rule: PFC xON below xOFF, WRED min ≤ WRED max, WRED max below xOFF (ECN must act before
    PFC pauses), and per-PG headroom at least the cable's round trip at the port's rate (what is
    on the wire when the XOFF leaves; less and a pause overflows). The rule of thumb xON < WRED min
    is not enforced (**decision**): every profile here resumes at xON = xOFF − 3 frames, above
    WRED min, on purpose (short pauses, rocev2-and-fabric.md §8.9). Returns the warnings a user
    may mean (none yet: the list is the seam for them)."""
    warnings: list[str] = []
    pfc = cfg.pfc
    lossless = [tc for tc in range(8) if cfg.tcs[tc].lossless and pfc.enabled]
    if not lossless:
        return warnings
    if not pfc.dynamic and pfc.xon >= pfc.xoff:
        raise FabricError(f"PFC xON ({pfc.xon} B) must be below xOFF ({pfc.xoff} B): rule xON < xOFF")
    for tc in lossless:
        ecn = cfg.tcs[tc].ecn
        if ecn is None:
            continue
        if ecn.kmin > ecn.kmax:
            raise FabricError(
                f"TC{tc}: WRED min ({ecn.kmin} B) above WRED max ({ecn.kmax} B): rule WRED min < WRED max"
            )
        if not pfc.dynamic and ecn.kmax >= pfc.xoff:
            raise FabricError(
                f"TC{tc}: WRED max ({ecn.kmax} B) must be below PFC xOFF ({pfc.xoff} B): rule WRED max < xOFF "
                "(ECN must act before PFC pauses)"
            )
    for rate, delay in links:
        cable = -(-2 * delay * rate // 8_000_000_000)
        if pfc.headroom < cable:
            raise FabricError(
                f"PFC headroom ({pfc.headroom} B) is below the cable's round trip at {rate / 1e9:g} Gb/s over "
                f"{delay} ns ({cable} B): rule headroom ≥ round trip × rate"
            )
    return warnings


def _replace(obj: DataclassT, over: dict[str, Any]) -> DataclassT:
    names = {f.name for f in dataclasses.fields(obj)}
    bad = set(over) - names
    if bad:
        raise FabricError(f"{type(obj).__name__}: unknown option(s) {sorted(bad)}")
    return dataclasses.replace(obj, **over)


def scaled(frame: int, bdp: int, headroom: int | None = None) -> SwitchConfig:
    """A config whose byte thresholds follow the §8.9 scaling rules for another link rate or RTT.

    ``frame`` is the maximum data frame and ``bdp`` the base-RTT bandwidth-delay product, in bytes.
    Each lab threshold (ECN Kmin 4 KB / Kmax 20 KB, TC0 limit 32 KB, PFC XOFF 32 KB, all for the
    lab's 6 KB BDP) is multiplied by BDP / 6 KB, then raised to the frame floors: Kmin ≥ 2 frames,
    Kmax ≥ Kmin + 4 frames, TC0 limit ≥ Kmax + 2 frames, XOFF ≥ Kmax + 1 frame (ECN acts before
    PFC); XON = XOFF − 3 frames; TC7 limit = 2 × TC0 limit; buffer ≥ 16 × TC0 limit. ``headroom``
    defaults to the lab's 8 KB scaled the same way, at least 4 frames (better: pass
    :func:`headroom_bytes` of the real link).
    """
    r = bdp / (6 * KB)
    kmin = max(2 * frame, int(4 * KB * r))
    kmax = max(kmin + 4 * frame, int(20 * KB * r))
    limit = max(kmax + 2 * frame, int(32 * KB * r))
    xoff = max(kmax + frame, int(32 * KB * r))
    cfg = SwitchConfig()
    for tc in cfg.tcs:
        if tc.ecn is not None:
            tc.ecn = EcnConfig(kmin=kmin, kmax=kmax, pmax=tc.ecn.pmax)
    cfg.tcs[TC_DATA].limit = limit
    cfg.tcs[TC_TRIMMED].limit = 2 * limit
    hr = headroom if headroom is not None else max(4 * frame, int(8 * KB * r))
    cfg.pfc = PfcConfig(xoff=xoff, xon=xoff - 3 * frame, headroom=hr)
    cfg.buffer = BufferConfig(size=max(512 * KB, 16 * limit))
    return cfg
