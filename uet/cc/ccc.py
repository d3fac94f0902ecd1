"""One congestion control context (CCC) as the PDS sees it: the gate of spec/behaviour.md §4.1.

A :class:`Ccc` composes the algorithms of one (local FEP, peer, traffic class) — any list of
:class:`uet.cc.base.CcAlgorithm` (NSCC, the RCCC source, DCTCP, ... by name from
:mod:`uet.cc.registry`), or none (the ``none`` fixed window, counted in packets) — and owns the
path selector every RUD PDC of the CCC shares (§4.6: feedback is per CCC). It is the PDS's
:class:`uet.cc.base.SenderCc`: nominal sizes, newly received bytes from the ACK_CC state, RTT
samples without the service time, the receiver window penalty, trims (last hop or not) apart
from other NACKs, timeouts apart from SACK-inferred losses go to every algorithm.

``can_send`` is the AND of every algorithm (§4.1 ``update_state``). The PDS sizes are
``TxPkt.nbytes`` (SES header + payload); the CCC adds ``overhead`` to get the nominal size the
target counts (§4.2: UDP length + 40 = PDS header + nbytes + 48).
"""

from __future__ import annotations

import random
from typing import Any, Final, TypeVar

from uet.cc.base import CcAlgorithm, ResendPolicy, SenderCc
from uet.cc.config import CcConfig
from uet.cc.entropy import SELECTORS

#: nominal size − ``TxPkt.nbytes``: UDP (8) + 40, plus the PDS request header (12, CC request 16)
OVERHEAD_REQ: Final = 12 + 48
OVERHEAD_CC_REQ: Final = 16 + 48

A = TypeVar("A", bound=CcAlgorithm)


class Ccc(SenderCc):
    """Per-CCC gate over a list of algorithms (see the module docstring)."""

    def __init__(
        self,
        cfg: CcConfig,
        algorithms: list[CcAlgorithm],
        *,
        lb: str,
        rng: random.Random,
        window: int = 1024,
        ccc_id: int = 0,
    ) -> None:
        self.cfg = cfg
        self.algorithms = algorithms
        #: resends wait for every algorithm (§4.1); without one the CCC is the ``none`` packet
        #: window, which counts first transmissions only: its resends go at once, as the fixed
        #: window's (uet.pds.seams.FixedWindowGate) — gated, a window of lost packets could never
        #: be resent, its count never falling
        self.resend = ResendPolicy.GATED if algorithms else ResendPolicy.ACK_CLOCKED
        #: RUD path selector shared by the CCC's PDCs (None: each PDC gets the PDS default)
        self.entropy = SELECTORS[lb](rng, cfg) if lb in SELECTORS else None
        self.window = window
        self.inflight_pkts = 0
        self.ccc_id = ccc_id & 0xFF
        #: a credit algorithm runs: the PDS sends data as CC requests carrying a credit target
        #: (wire-format.md §5.2), and the first packet of a new PDC needs no credit (may_open)
        self.cc_request = any(a.credit_based for a in algorithms)
        self.overhead = OVERHEAD_CC_REQ if self.cc_request else OVERHEAD_REQ
        #: backlog (nominal bytes) per PDC that uses this CCC, for the credit target (§4.5)
        self.backlogs: dict[int, int] = {}
        #: the sum of ``backlogs`` (set_backlog keeps it)
        self._backlog_total = 0
        self.counters = {"acks": 0, "ecn_acks": 0, "nacks": 0, "trims": 0, "timeouts": 0, "losses": 0}
        #: §4.3.6: a PROBE CP is wanted after the first ACK or NACK (an algorithm asks for it);
        #: the PDS sends it on the PDC that got that feedback and clears the flag (take_probe)
        self._probe = 1 if cfg.base_rtt_probe and any(a.base_rtt_probe for a in algorithms) else 0

    def get(self, kind: type[A]) -> A | None:
        """The CCC's algorithm of class ``kind``, if it runs one (tests, tools)."""
        for a in self.algorithms:
            if isinstance(a, kind):
                return a
        return None

    def take_probe(self) -> bool:
        """True once, after the CCC's first ACK or NACK, when it wants its base-RTT PROBE."""
        if self._probe == 2:
            self._probe = 0
            return True
        return False

    def _fed(self) -> None:
        if self._probe == 1:
            self._probe = 2

    # -- sending -----------------------------------------------------------------------------------

    def quota(self, now: int) -> int:
        """Always ask per packet (:meth:`can_send`)."""
        return -1

    def can_send(self, nbytes: int, now: int) -> bool:
        algos = self.algorithms
        if not algos:
            return self.inflight_pkts < self.window
        size = nbytes + self.overhead
        for a in algos:  # (a loop, not all() over a generator: once per packet sent)
            if not a.can_send(size, now):
                return False
        return True

    def may_open(self, nbytes: int, now: int) -> bool:
        """May the first packet of a new PDC go although the gate refuses it? Yes when only
        credit holds it back (window and pacing algorithms still apply). A new PDC that shares
        this CCC with another (two modes to one peer, or a PDC opened while the previous one
        closes) finds the credit spent by the other; a CREDIT_REQ needs an established PDC, and
        only a packet of its own carries its credit target to the receiver, so without this it
        would wait for a grant nobody knows to send (issue 29 item 3). Inference (§4.5 is silent
        on a CCC's second PDC): one packet per new PDC, like the speculative start of a new CCC."""
        if not self.cc_request:
            return False
        size = nbytes + self.overhead
        return all(a.credit_based or a.can_send(size, now) for a in self.algorithms)

    def deadline(self, now: int) -> int | None:
        """When a sender blocked now could go again without any packet arriving: the earliest
        deadline of an algorithm (NSCC's pacer, RCCC's next CREDIT_REQ, §4.5). None: only an
        ACK or a grant can unblock it."""
        d = None
        for a in self.algorithms:
            r = a.deadline(now)
            if r is not None and (d is None or r < d):
                d = r
        return d

    def on_send(self, nbytes: int, retx: bool, now: int) -> None:
        size = nbytes + self.overhead
        if not retx:
            self.inflight_pkts += 1
        for a in self.algorithms:
            a.on_send(size, now)

    def on_send_many(self, npkts: int, nbytes: int, now: int) -> None:
        """Not used (:meth:`quota` is -1): each packet goes through :meth:`on_send`."""
        raise NotImplementedError("Ccc.quota is -1: the PDS reports each packet with on_send")

    def ack_request(self, nbytes: int) -> bool:
        """Set AR on the packet of ``nbytes`` about to go (§4.3.3 ``ack_request``, evaluated as
        if it were already in flight; RCCC: it spends the last of the credit)."""
        size = nbytes + self.overhead
        for a in self.algorithms:  # (a loop, as in can_send)
            if a.ack_request(size):
                return True
        return False

    def set_backlog(self, pdcid: int, npkts: int, nbytes: int) -> None:
        """The PDS reports a PDC's queued packets, each about ``nbytes`` (an estimate)."""
        b = self.backlogs
        old = b.get(pdcid, 0)
        if npkts:
            new = npkts * (nbytes + self.overhead)
            if new != old:
                b[pdcid] = new
        else:
            new = 0
            if old:
                del b[pdcid]
        # the sum of ``backlogs``, kept as it changes (a sum over the PDCs per report, two or
        # three a packet, and a write of an unchanged entry cost about 0.4 k instructions in the
        # compiled build)
        total = self._backlog_total + new - old
        self._backlog_total = total
        if self.cc_request:
            for a in self.algorithms:
                a.set_backlog(total)

    def credit_target(self) -> int:
        """Cumulative 24-bit credit target for the next CC request or CREDIT_REQ (§4.5), capped
        by the smallest window a window algorithm keeps."""
        if not self.cc_request:
            return 0
        cwnd = None
        for a in self.algorithms:
            w = a.window()
            if w is not None and (cwnd is None or w < cwnd):
                cwnd = w
        t = 0
        for a in self.algorithms:
            if a.credit_based:
                t = a.credit_target(cwnd)
        return t

    def credit_request_due(self, now: int) -> bool:
        """A credit algorithm wants its target restated in a CREDIT_REQ now (§4.5)."""
        for a in self.algorithms:  # (a loop, as in can_send: once per blocked pump)
            if a.credit_request_due(now):
                return True
        return False

    def on_credit_request(self, now: int) -> None:
        for a in self.algorithms:
            a.on_request_sent(now)

    def on_grant(self, grant: int, now: int) -> bool:
        if not self.cc_request:
            return False
        for a in self.algorithms:
            a.on_grant(grant, now)
        return True

    # -- feedback ----------------------------------------------------------------------------------

    def on_ack(
        self,
        npkts: int,
        nbytes: int,
        newly_rcvd: int | None,
        ecn_bytes: int,
        rtt: int | None,
        pend: int,
        restore: bool,
        now: int,
    ) -> None:
        """An ACK (:meth:`uet.cc.base.SenderCc.on_ack`); a plain ACK (``newly_rcvd`` None)
        counts the nominal size of what it acknowledged as newly received."""
        self.inflight_pkts -= npkts
        if newly_rcvd is None:
            newly_rcvd = nbytes + npkts * self.overhead
        if self._probe == 1:  # (_fed, once per ACK without the call)
            self._probe = 2
        c = self.counters
        c["acks"] += 1
        if ecn_bytes:
            c["ecn_acks"] += 1
            c["ecn_bytes"] = c.get("ecn_bytes", 0) + ecn_bytes + self.overhead
        ecn = ecn_bytes > 0
        for a in self.algorithms:
            a.on_ack(newly_rcvd, ecn, rtt, now, pend, restore)
            a.on_ack_bytes(newly_rcvd, ecn_bytes, now)

    def on_nack(self, code: int, ecn: bool, now: int) -> None:
        """Every NACK: nothing to do until it is attributed to a packet (:meth:`on_nack_packet`)."""

    def on_nack_packet(self, nbytes: int, ecn: bool, rtt: int | None, trimmed: bool, lasthop: bool, now: int) -> None:
        """A NACK for an outstanding packet of ``nbytes`` (§4.1 ``on_nack``); it will be resent."""
        size = nbytes + self.overhead
        self._fed()
        self.counters["nacks"] += 1
        if trimmed:
            self.counters["trims"] += 1
        credit = self.cc_request
        for a in self.algorithms:
            a.on_nack(size, rtt, trimmed, lasthop, credit, now)

    def on_loss(self, nbytes: int, timeout: bool, now: int) -> None:
        """An inferred loss (§4.1 ``on_inferred_loss``): ``timeout`` for an RTO, else a SACK
        fast retransmit."""
        self.counters["timeouts" if timeout else "losses"] += 1
        size = nbytes + self.overhead
        for a in self.algorithms:
            a.on_inferred_loss(size, now)

    def on_discarded(self, nbytes: int) -> None:
        """A packet the target discarded unseen (ROD go-back-N, §2.13) is about to be resent:
        it leaves flight without a congestion signal of its own."""
        size = nbytes + self.overhead
        for a in self.algorithms:
            a.on_abandon(size)

    def on_done(self, npkts: int, nbytes: int = 0) -> None:
        """``npkts`` packets (``nbytes`` in all) left flight without an ACK (their PDC failed)."""
        self.inflight_pkts -= npkts
        size = nbytes + npkts * self.overhead
        for a in self.algorithms:
            a.on_abandon(size)

    def snapshot(self) -> dict[str, Any]:
        """Current figures (tools, tests, the event log)."""
        d: dict[str, Any] = {"inflight_pkts": self.inflight_pkts, **self.counters}
        for a in self.algorithms:
            d.update(a.snapshot())
        return d
