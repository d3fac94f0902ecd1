"""Configuration of one Fabric Endpoint (conventions.md: one dataclass per layer).

:class:`FepConfig` is also the public ``uet.EndpointConfig`` (the same class): the sans-I/O core
reads the protocol fields, the asyncio adapter the socket and allocator ones (``max_batch``,
``rcvbuf``, ``sndbuf``, ``tune_allocator``, ``ecn_feedback``, ``udp_checksum``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from uet.pds import PdsConfig
from uet.ses.matching import MatchLimits
from uet.ses.message import MessageConfig

__all__ = ["FepConfig", "with_config"]


@dataclass(frozen=True)
class FepConfig:
    """Configuration of one FEP (conventions.md: one dataclass per layer, defaults documented).

    Attributes:
        payload_size: payload bytes per packet (default 4096; 8192 is the reference provider's
            upper bound; ≤ 16383 conforms to the 14-bit ``payload_length``; larger values up to
            65451 use the loopback-only jumbo extension of :mod:`uet.ses.message`, for eager
            sends only — the SES engine segments at min(payload_size, 16383)).
        max_message: largest message sent or reassembled (64 MiB).
        max_inflight: packets per lane submitted to the PDS core and not yet Acked/Failed. Two
            PSN windows by default, so the core always has the next window queued when ACKs
            arrive, while memory stays bounded.
        pds: the PDS core's configuration (:class:`uet.pds.PdsConfig`). The endpoint's default
            differs from the core's in two fields, for measured reasons: ``rto_ns`` = 50 ms
            (a Python receiver behind a full 128-packet window queues 5–15 ms of work, more when
            the CPU is shared; 2 ms and 10 ms RTOs retransmitted whole windows spuriously and 2 ms
            exhausted the retries of a healthy transfer), and ``ack_gen_trigger`` = 32768 bytes
            (the spec maximum, behaviour.md §2.8: half the ACKs of the 16384 default, and ACK
            processing is a large share of per-packet CPU on both sides).
        ecn_capable: mark data packets ECT(0) (the reference marks nothing, wire-format.md §1.3;
            turn on when an ECN-reacting CC is in use).
        ecn_feedback: read the ECN field of received datagrams (``IP_RECVTOS``; a CE mark sets
            ``M`` in the ACK) on the direct link. None (default): the same as ``ecn_capable``,
            since only ECT packets can be marked and the FEPs of one fabric share the setting;
            without it the link reads with ``recvfrom``, about 0.7 µs less per datagram than
            ``recvmsg`` with ancillary data. The fabric link always carries ECN.
        rendezvous_threshold: sends longer than this use RENDEZVOUS_SEND (§6.6: eager part, the
            target reads the rest); None (default) never.
        deferrable_threshold: sends longer than this use DEFERRABLE_SEND (§6.7: the target
            defers when no receive is posted and sends an RTR later); None (default) never.
        eager_length: bytes a rendezvous send carries eagerly.
        match_limits: the unexpected-list limits of the target engine (:class:`MatchLimits`).
        max_partial / reassembly_timeout_ns: limits of the unexpected-message fast path
            (:class:`MessageConfig`): messages being reassembled at once, idle timeout; the
            timeout is also the target engine's (partial messages, RTR reservations).
        close_timeout_s: how long the close sequence (``FepCore.close``) waits for PDCs to close gracefully.
        housekeeping_s: period of the reassembly expiry sweep.
        max_batch: datagrams read per readiness callback (direct link).
        rcvbuf / sndbuf: socket buffer sizes requested (bounded by ``net.core.*mem_max``).
        seed: seeds the PDS core's and the SES engines' random generators, mixed with the FEP's
            address (None = random).
        data_protect: integrity of each packet (behaviour.md §2.16, spec ``UET_Data_Protect``):
            ``"none"`` (default; TSS when the FEP is given a security configuration), ``"crc"``
            (the 4-byte CRC-32C trailer on every packet, checked on receive, a mismatch dropped
            silently and counted, :mod:`uet.fep.integrity`) or ``"tss"`` (requires the security
            configuration; CRC and TSS exclude each other).
        udp_checksum: the UDP checksum the direct link sends (IPv4): ``"auto"`` (default) sends
            it as **zero** with ``data_protect="crc"`` — behaviour.md §2.16: the CRC trailer
            protects the packet and the UDP checksum is sent as zero — and computes it otherwise
            (wire-format.md §1.1); ``"on"`` / ``"off"`` force it (``SO_NO_CHECK``). The CRC
            trailer counts the field as zero either way, so both ends agree whatever a stack
            writes there. UET over IP protocol 253 has no UDP header and ignores it.
        tune_allocator: keep freed heap memory in the process (glibc ``M_TRIM_THRESHOLD`` =
            32 MiB, :func:`uet.tuning.tune_allocator`; process-wide, applied once): without it
            every burst of datagrams freed is handed back to the kernel and faulted back in by the
            next (measured 5.4 → 3.6–3.9 µs per 8 KiB packet to build and queue datagrams).
            False leaves the allocator alone.
    """

    payload_size: int = 4096
    max_message: int = 64 << 20
    max_inflight: int = 256
    pds: PdsConfig = field(default_factory=lambda: PdsConfig(rto_ns=50_000_000, ack_gen_trigger=32768))
    ecn_capable: bool = False
    ecn_feedback: bool | None = None
    rendezvous_threshold: int | None = None
    deferrable_threshold: int | None = None
    eager_length: int = 4096
    match_limits: MatchLimits = field(default_factory=MatchLimits)
    max_partial: int = 1024
    reassembly_timeout_ns: int = 5_000_000_000
    close_timeout_s: float = 2.0
    housekeeping_s: float = 0.5
    max_batch: int = 64
    rcvbuf: int = 4 << 20
    sndbuf: int = 4 << 20
    seed: int | None = None
    tune_allocator: bool = True
    data_protect: str = "none"
    udp_checksum: str = "auto"

    def __post_init__(self) -> None:
        if self.udp_checksum not in ("auto", "on", "off"):
            raise ValueError(f"udp_checksum must be auto, on or off, not {self.udp_checksum!r}")
        if self.data_protect not in ("none", "crc", "tss"):
            raise ValueError(f"data_protect must be none, crc or tss, not {self.data_protect!r}")
        if self.max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")
        self.message_config()  # validates payload_size / max_message

    def message_config(self) -> MessageConfig:
        """The fast path's (message layer's) configuration derived from these fields."""
        return MessageConfig(
            payload_size=self.payload_size,
            max_message=self.max_message,
            max_partial=self.max_partial,
            reassembly_timeout_ns=self.reassembly_timeout_ns,
        )


def with_config(config: FepConfig, **changes: Any) -> FepConfig:
    """A copy of ``config`` with fields changed (``dataclasses.replace``; PDS fields by name too)."""
    pds_fields = {k: v for k, v in changes.items() if k in PdsConfig.__dataclass_fields__}
    ep_fields = {k: v for k, v in changes.items() if k not in pds_fields}
    if pds_fields:
        ep_fields["pds"] = replace(config.pds, **pds_fields)
    return replace(config, **ep_fields)
