"""PDS configuration, delivery modes and the PDS exception types.

Defaults come from ``spec/behaviour.md`` §2 (the reference provider's values where the spec notes
give several); each field's docstring says where. Times are integer nanoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from uet.cc.config import CcConfig
from uet.enums import IntEnum
from uet.errors import UetError


class Mode(IntEnum):
    """PDS delivery mode (spec/behaviour.md §2.1)."""

    RUD = 0
    ROD = 1
    RUDI = 2
    UUD = 3


class PdsError(UetError):
    """Base of the errors the PDS core raises to its owner (never for bad input from the wire)."""


class PdsLimitError(PdsError):
    """A configured limit (``max_pdcs``, ``max_queued``, RUDI ids) would be exceeded."""


class PdcStateError(PdsError):
    """An illegal PDC state transition was attempted (a bug, never ignored)."""


class PdsClosedError(PdsError):
    """The core was closed with :meth:`PdsCore.close`; it admits no new packets."""


class SesNack(UetError):  # noqa: N818 - it is a NACK request, not a failure of the caller
    """Raised by ``on_deliver`` when SES lacks a transient resource for the packet.

    The PDS then NACKs it with ``NO_SES_MSG_AVAIL`` and does not mark the PSN received, so the
    retransmission is accepted later (spec/behaviour.md §2.6 step 7, ``ses_nack``).
    """


@dataclass(frozen=True)
class PathWindow:
    """The window of the PDCs towards one class of peers whose path differs from the one the
    endpoint's configuration was derived for: a GPU of the same server, reached over the server's
    scale-up links rather than through the NIC and the Ethernet fabric (issue 26). An owner hands
    the cores a ``peer → PathWindow | None`` function (``PdsCore(path_window=...)``,
    ``FepCore(path_window=...)``); None keeps the endpoint's own settings for that peer.

    Attributes:
        max_inflight: packets per lane towards such a peer submitted to the PDS and not yet
            Acked/Failed (``FepConfig.max_inflight`` for the other peers).
        cc_params: the CC parameters of a CCC towards such a peer (``PdsConfig.cc_params`` for
            the others): the link rate and base RTT of *that* path, from which NSCC takes its
            ``MaxWnd`` (behaviour.md §4.3.1) — and which it re-derives from the smallest RTT it
            measures, at the configured rate. None: ``PdsConfig.cc_params``.
    """

    max_inflight: int
    cc_params: CcConfig | None = None

    def __post_init__(self) -> None:
        if self.max_inflight < 1:
            raise ValueError("max_inflight must be >= 1")


@dataclass(frozen=True)
class PdsConfig:
    """Configuration of one FEP's PDS (aioquic ``QuicConfiguration`` style).

    Attributes:
        mp_range: PSN window (MP_RANGE): outstanding PSNs per PDC and the receiver's tracking
            range; the reference uses 128 (§2.4). Advertised as ``mpr = mp_range // 128``.
        max_pdcs: PDCs per FEP, initiator and target roles together. Beyond it a new initiator PDC
            raises :class:`PdsLimitError` and a target answers SYNs with NACK ``NO_PDC_AVAIL``.
        max_outstanding: unacknowledged packets per PDC (≤ ``mp_range``).
        rto_ns: retransmission timeout ``RTO_Init_Time``. The spec mirror says 1 ms and the
            reference 5 ms (§2.9); we choose 2 ms: a localhost RTT is ~50 µs, so 2 ms never fires
            spuriously yet recovers a lost tail quickly. The initial value: it backs off
            exponentially up to ``rto_max_ns`` (uet.pds.backoff).
        rto_max_ns: cap of the backed-off RTO (inference: 100 ms; uet.pds.backoff).
        rto_adaptive: each PDC's RTO follows its measured round trip (RFC 6298's ``SRTT +
            4 RTTVAR`` from §2.9-valid samples, floored at ``rto_ns``, backed off as above and
            kept backed off until a valid sample; uet.pds.backoff). Off (default): the fixed
            ``rto_ns`` of the notes, which the simulator's validation runs use; the live engine
            (``uet-run``) turns it on, because there the round trip follows the CPU load.
        max_rto_retx: ``Max_RTO_Retx_Cnt`` (5, §2.9); RTO retransmissions and ACK_REQs per packet
            before it may fail; it fails once ``retry_time_ns`` have also passed since its first
            transmission (uet.pds.backoff).
        rto_burst: packets a PDC retransmits per timer round once its RTO has backed off (the
            peer stayed silent through a whole RTO): the others are re-armed without sending,
            so a silent or forged peer draws a few packets per round instead of the whole
            window each time (0 = no limit; uet.pds.backoff). The first round after progress
            resends everything due.
        retry_time_ns: time part of the retry budget (inference: 2 s, long enough for a brief
            stall or a quick peer restart; uet.pds.backoff).
        max_clear_req: CLEAR_REQs a target sends for one held guaranteed response before it
            stops asking (it keeps the response; a later request or CLEAR still releases it).
            They are spaced by ``clear_ns`` backed off like the RTO (uet.pds.backoff), so one
            request can draw at most this many replies (issue "reliability" item 6).
        max_nack_retx: ``Max_NACK_Retx_Cnt`` (5, §2.9); NACK-driven resends per packet. NACKed
            packets are resent at once, as the reference does, except after the resource-shortage
            NACKs (``nack_retx_ns``) and trims under the fixed window (``clocked_trim_resend``).
        nack_retx_ns: ``NACK_Retx_Time`` (§2.9; mirror 1 ms, reference 0) for the transient
            resource-shortage NACKs ``NO_PDC_AVAIL`` .. ``NO_RESOURCE`` (0x04–0x0A, §2.10): the
            packet is resent after this delay, doubled per NACK it drew (at most 64×), so a
            shortage is waited out instead of spending the NACK retries at once. None = ``rto_ns``
            (inference: the RTO scales with the fabric; 2+4+8+16+32 ms before the 6th NACK fails
            the packet).
        clocked_trim_resend: with the fixed window (``cc = "none"``), a packet NACKed
            ``TRIMMED`` / ``TRIMMED_LASTHOP`` is resent on the ACK clock instead of at once:
            one waiting trimmed packet per packet an ACK shows newly received, before any new
            data, and at once only when nothing else of the PDC is still in the network
            (uet.pds.initiator ``_clocked_resend``; behaviour.md §2.10 leaves the delay to
            ``NACK_Retx_Time``, §3.4 says the packet leaves flight). False: at once, as the
            reference does (an incast of N senders then resends N windows per round trip).
            A congestion-controlled CCC always resends on its own gate (§4.1).
        ack_gen_trigger: ``ACK_Gen_Trigger`` bytes of coalescing (16384, §2.8).
        ack_gen_min_pkt_add: ``ACK_Gen_Min_Pkt_Add`` (1024, §2.8).
        ack_timer_ns: flush a pending coalesced ACK this long after the first unacknowledged
            arrival (inference: the spec notes name no value; 100 µs, well under ``rto_ns``).
        ack_per_pkt: ``Enb_ACK_Per_Pkt``: ACK every request at once.
        ack_on_ecn: ``ACK_On_ECN`` (1): a CE-marked request is ACKed at once.
        ack_format: ``"ack_cc"`` (default: ACK_CC with NSCC state, a 64-bit SACK bitmap and MPR,
            so the initiator learns about holes and recovers faster) or ``"ack"`` (plain 12-byte
            ACK, CACK only).
        fast_retx_threshold: SACK fast retransmit: an unacknowledged packet not known received is
            resent once when at least this many newer PSNs are SACKed or acknowledged (3, the TCP
            dup-ACK analogue; inference). 0 disables.
        rod_buffer: ROD receivers buffer out-of-order requests (within the window) and deliver
            them when the gap fills, as the reference does (the default), instead of the spec's
            discard + NACK ``ROD_OOO`` go-back-N (``False``). §2.13 allows both; the notes'
            inference made go-back-N the default, but strict go-back-N resends every packet in
            flight behind a loss *or a reordering*: 27–29 retransmissions per lost packet at 1 %
            loss + 5 % reorder against 4.5–9 with buffering (``uet-bench matrix``, issue 15
            #11). An initiator reacts to ``ROD_OOO`` from a go-back-N target either way.
        rod_buffer_bytes: bytes of out-of-order ROD requests one FEP holds at once (all PDCs);
            beyond it an out-of-order request is discarded and NACKed ``ROD_OOO`` as without
            buffering, so a hostile peer cannot make ROD PDCs hold unbounded memory. 64 MiB.
        close_idle_ns: the initiator closes a PDC that has had nothing queued or outstanding for
            this long (None = never). Inference (§2.12 "a few × RTO"): 50 ms.
        target_idle_ns: a target sends CLOSE_REQ for a PDC on which nothing arrived for this long
            (None = never); reclaims PDCs whose initiator vanished. 1 s (inference).
        close_req_ns: ``Close_REQ_Time``: how long a target waits for CLOSE after CLOSE_REQ, or
            after the initiator's last packet on the PDC, whichever is later, before closing in
            error (uet.pds.control). The reference's 1000 ms: well above ``rto_max_ns``, so an
            initiator still retransmitting its quiescing traffic at the capped RTO keeps the
            wait alive (the mirror's 1 ms and our former 100 ms raced that cap).
        close_linger_ns: how long a target keeps a closed PDC to re-ACK a lost CLOSE and NACK
            ``CLOSING`` late requests (a short MSL; the reference's endpoint MSL is 2 s). 10 ms.
        new_pdc_ns: ``New_PDC_Time``: a PENDING target PDC not re-driven within it is freed
            silently (reference 1000 ms, mirror 5 ms). 250 ms: an initiator re-drives its SYN one
            round trip after the NEW_START_PSN NACK, but a Python endpoint on a loaded host
            stalls for tens of ms (5 ms failed honest 1-RTT establishments under load: the
            PENDING PDC expired and the re-driven SYN was told a new Start_PSN again); a SYN
            flood still holds at most ``max_pdcs`` PENDING PDCs, each for 250 ms.
        clear_ns: ``PDS_Clear_Time``: the target sends CLEAR_REQ when it holds an uncleared
            guaranteed response this long with nothing arriving (mirror 1 ms). The initiator
            answers ``REQ_CLEAR`` at once (reference).
        max_queued: packets queued per PDC before transmission (None = unlimited); beyond it
            ``submit`` raises :class:`PdsLimitError`.
        rudi_max_outstanding: RUDI requests in flight per FEP; later ones wait in a queue. Per
            peer at most ``max_outstanding`` (a PDC's window; issue 29 item 2: a slow receiver
            was sent the whole 1,024 and lost most in its socket queue), and a backed-off RTO
            round resends at most ``rto_burst`` of them, as on a PDC.
        entropy_paths: size of the rotating entropy set used to spray RUD packets.
        cc_window: packets in flight per (peer, traffic class) allowed by the fixed-window
            ``none`` congestion gate (architecture.md "Congestion control seam").
        cc: congestion control of every CCC, by name (uet.cc.registry): ``none`` (the fixed
            window), ``nscc``, ``rccc`` or ``nscc+rccc`` (spec/behaviour.md §4).
        lb: path selection (§4.6): ``default`` (rotating spraying for RUD, one entropy per ROD
            PDC), ``single``, ``oblivious``, ``reps`` or ``bitmap``.
        cc_params: a ``uet.cc.CcConfig`` (link speed, config_base_rtt, MTU, ...); None = its
            defaults (100 Gb/s, 12 µs). A table (dict) of its fields is accepted and converted
            here (ValueError for an unknown field).
        start_psn: force every new PDC's Start_PSN (tests, conformance); None = random in
            [2^16, 2^31) (§2.3.1).
        control_entropy: entropy value for control packets and for ACK/NACKs when the request's
            entropy is unknown (reference: a fixed default, wire-format.md §1.3).
        psn_range_limit: ``Limit_PSN_Range`` (§2.3.2): a secure PDC (one with an SDI) that has
            used this many PSNs is closed at the next message boundary and a new PDC takes the
            next message. The spec's bound is 2^31; the check runs when a message starts, so the
            default keeps 2^16 PSNs of headroom for the message in progress.
        secure_syn_window: packets a secure PDC (one with an SDI) sends while in SYN_SENT, before
            the target's first ACK or NACK, unless the initiator holds an ``ini_start_psn`` for
            the SDI (learnt from a 0-RTT target's closing ACK, so its Start_PSN will be accepted);
            0 = the whole window. Choice (§2.3.2 is silent on the first flight): a
            RANDOM_1RTT_START target — our FEPs' default — refuses every new PDC's first flight
            with ``NEW_START_PSN``, and the initiator resent all of it (128 packets per PDC with
            no loss, ``uet-bench pair --tss``). With 1 the NACK comes as fast and the window
            follows at once under the minted Start_PSN; a 0-RTT target met for the first time
            costs one round trip.
        rod_gbn_holdoff: ROD go-back-N (§2.13): after a restart from PSN p, ``ROD_OOO`` NACKs
            naming p again are stale (they answer packets sent before the restart) until this
            many × the smoothed RTT has passed (``rto_ns / 4`` before the first RTT sample);
            after that they mean the restarted head was lost too, and the window restarts once
            more instead of waiting for the RTO.
        rod_nack_holdoff_ns: a ROD target NACKs ``ROD_OOO`` once per gap, then discards the
            rest of the flight silently for this long before NACKing the same gap again
            (None = ``rto_ns / 4``).
        amp_factor: anti-amplification (uet.pds.validation, QUIC RFC 9000 §8.1; the notes are
            silent): until a source address proved it receives, what this FEP sends it is at
            most one datagram per datagram it sent and this many × its bytes (0 = no limit).
        verified_sources: verified addresses remembered (LRU).
        unverified_sources: unverified sources whose budget is kept (LRU; an evicted one starts
            again from zero and its held datagrams are dropped).
        unverified_pdcs: target PDCs of unverified sources in all; the oldest makes way for a
            new one, so a SYN flood never fills ``max_pdcs``.
        unverified_pdcs_per_source: target PDCs one unverified source may hold; later SYNs
            from it are dropped without reply until it proves itself.
        unverified_held: datagrams of a source's PDCs held over its budget until it proves
            itself (per source; ``4 × unverified_pdcs`` in all); beyond, they are dropped and
            PDS recovers them as losses.
        unverified_reply_rate: replies per second to one unverified source (token bucket
            with ``unverified_reply_burst``), on top of the per-datagram budget.
        unverified_total_rate: replies per second to all unverified sources together (token
            bucket with ``unverified_total_burst``). The burst is 64 replies for each of the
            ``unverified_pdcs`` (1,024) first contacts: until its first ACK comes back, an honest
            initiator's whole first flight carries SYN and proves nothing, and in a 127→1 RCCC
            incast each drew up to 64 ACKs, NACKs and CREDITs before its proof (4,096 in all
            starved a fifth of the senders for milliseconds). The 1-per-datagram and 3× byte
            bounds still hold for every reply, so a flood buys no more amplification.
        proof_strikes: non-SYN packets naming a wrong PDC after which an unverified source can
            no longer prove itself while its budget entry lives (a PDCID has 16 bits).
        unverified_pdc_rate: new target PDCs per second for all unverified sources together
            (token bucket with ``unverified_pdc_burst``); a SYN beyond it is dropped without
            reply, so a flood from many (spoofed) sources cannot buy a PDC and an SES message
            per packet (issue 29 item 10; verified peers are not limited). The burst equals
            ``unverified_pdcs``: an incast is every sender's first contact at once, and an honest
            one as large as the unproven-PDC cap opens all its PDCs together (with a burst of 64,
            127 senders got 64 PDCs and the rest spent the run in RTO loops); a flood gets that
            once, then the rate. The spec notes are silent on rates; these are the project's.
    """

    mp_range: int = 128
    max_pdcs: int = 4096
    max_outstanding: int = 128
    rto_ns: int = 2_000_000
    rto_max_ns: int = 100_000_000
    rto_adaptive: bool = False
    max_rto_retx: int = 5
    retry_time_ns: int = 2_000_000_000
    rto_burst: int = 4
    max_clear_req: int = 5
    max_nack_retx: int = 5
    nack_retx_ns: int | None = None
    clocked_trim_resend: bool = True
    ack_gen_trigger: int = 16384
    ack_gen_min_pkt_add: int = 1024
    ack_timer_ns: int = 100_000
    ack_per_pkt: bool = False
    ack_on_ecn: bool = True
    ack_format: str = "ack_cc"
    fast_retx_threshold: int = 3
    rod_buffer: bool = True
    rod_buffer_bytes: int = 64 << 20
    close_idle_ns: int | None = 50_000_000
    target_idle_ns: int | None = 1_000_000_000
    close_req_ns: int = 1_000_000_000
    close_linger_ns: int = 10_000_000
    new_pdc_ns: int = 250_000_000
    clear_ns: int = 1_000_000
    max_queued: int | None = None
    rudi_max_outstanding: int = 1024
    entropy_paths: int = 16
    cc_window: int = 1024
    cc: str = "none"
    lb: str = "default"
    cc_params: CcConfig | None = None
    start_psn: int | None = None
    control_entropy: int = 0xC000
    psn_range_limit: int = (1 << 31) - (1 << 16)
    secure_syn_window: int = 1
    rod_gbn_holdoff: float = 1.5
    rod_nack_holdoff_ns: int | None = None
    amp_factor: int = 3
    verified_sources: int = 65536
    unverified_sources: int = 4096
    unverified_pdcs: int = 1024
    unverified_pdcs_per_source: int = 16
    unverified_held: int = 64
    unverified_reply_rate: int = 10_000
    unverified_reply_burst: int = 256
    unverified_total_rate: int = 100_000
    unverified_total_burst: int = 65_536
    unverified_pdc_rate: int = 2_000
    unverified_pdc_burst: int = 1024
    proof_strikes: int = 16

    def __post_init__(self) -> None:
        if not 1 <= self.mp_range <= 4096:
            raise ValueError("mp_range must be in 1..4096")
        if not 1 <= self.max_outstanding <= self.mp_range:
            raise ValueError("max_outstanding must be in 1..mp_range")
        if self.ack_format not in ("ack", "ack_cc"):
            raise ValueError("ack_format must be 'ack' or 'ack_cc'")
        if not 1 <= self.max_pdcs <= 0xFFFF:
            raise ValueError("max_pdcs must be in 1..65535")
        if self.rto_ns <= 0:
            raise ValueError("rto_ns must be positive")
        if self.cc != "none" or self.lb != "default":
            from uet.cc.registry import check_names

            check_names(self.cc, self.lb)
        if self.cc_params is not None and not isinstance(self.cc_params, CcConfig):
            from uet.cc.registry import as_config

            # a scenario file's ``[endpoint.pds.cc_params]`` table: typed once, here
            object.__setattr__(self, "cc_params", as_config(self.cc_params))
