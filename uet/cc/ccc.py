"""One congestion control context (CCC) as the PDS sees it: the gate of spec/behaviour.md §4.1.

A :class:`Ccc` combines the enabled algorithms of one (local FEP, peer, traffic class): NSCC
(:mod:`uet.cc.nscc`), the RCCC source (:mod:`uet.cc.rccc`), or neither (the ``none`` fixed
window, counted in packets), and owns the path selector every RUD PDC of the CCC shares (§4.6:
feedback is per CCC). It implements the ``CongestionGate`` seam of :mod:`uet.pds.seams` and,
because ``cc_signals`` is true, the PDS gives it the full signals: nominal sizes, newly received
bytes from the ACK_CC state, RTT samples without the service time, the receiver window penalty,
trims (last hop or not) apart from other NACKs, timeouts apart from SACK-inferred losses.

``can_send`` is the AND of every enabled algorithm (§4.1 ``update_state``). The PDS sizes are
``TxPkt.nbytes`` (SES header + payload); the CCC adds ``overhead`` to get the nominal size the
target counts (§4.2: UDP length + 40 = PDS header + nbytes + 48).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from uet.cc.config import CcConfig
from uet.cc.entropy import SELECTORS
from uet.cc.nscc import Nscc
from uet.cc.rccc import CreditSender

#: nominal size − ``TxPkt.nbytes``: UDP (8) + 40, plus the PDS request header (12, CC request 16)
OVERHEAD_REQ = 12 + 48
OVERHEAD_CC_REQ = 16 + 48


class Ccc:
    """Per-CCC gate (see the module docstring)."""

    cc_signals = True

    def __init__(
        self,
        cfg: CcConfig,
        *,
        nscc: bool,
        rccc: bool,
        lb: str,
        rng: random.Random,
        window: int = 1024,
        now: int = 0,
        ccc_id: int = 0,
        log: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.nscc = Nscc(cfg, now, log) if nscc else None
        self.credit = CreditSender(cfg, now, log) if rccc else None
        #: RUD path selector shared by the CCC's PDCs (None: each PDC gets the PDS default)
        self.entropy = SELECTORS[lb](rng, cfg) if lb in SELECTORS else None
        self.window = window
        self.inflight_pkts = 0
        self.ccc_id = ccc_id & 0xFF
        self.overhead = OVERHEAD_CC_REQ if rccc else OVERHEAD_REQ
        #: RCCC: the PDS sends data as CC requests carrying a credit target (wire-format.md §5.2)
        self.cc_request = rccc
        #: backlog (nominal bytes) per PDC that uses this CCC, for the credit target (§4.5)
        self.backlogs: dict[int, int] = {}
        self.counters = {"acks": 0, "ecn_acks": 0, "nacks": 0, "trims": 0, "timeouts": 0, "losses": 0}
        #: §4.3.6: a PROBE CP is wanted after the first ACK or NACK (NSCC only); the PDS sends it
        #: on the PDC that got that feedback and clears the flag (:meth:`take_probe`)
        self._probe = 0 if self.nscc is None or not cfg.base_rtt_probe else 1

    def take_probe(self) -> bool:
        """True once, after the CCC's first ACK or NACK, when it wants its base-RTT PROBE."""
        if self._probe == 2:
            self._probe = 0
            return True
        return False

    # -- sending -----------------------------------------------------------------------------------

    def can_send(self, nbytes: int, now: int) -> bool:
        n = self.nscc
        c = self.credit
        if n is None and c is None:
            return self.inflight_pkts < self.window
        if n is not None and not n.can_send(nbytes + self.overhead, now):
            return False
        return c is None or c.can_send()

    def may_open(self, nbytes: int, now: int) -> bool:
        """May the first packet of a new PDC go although the gate refuses it? Yes when only RCCC
        credit holds it back (NSCC's window and pacing still apply). A new PDC that shares this
        CCC with another (two modes to one peer, or a PDC opened while the previous one closes)
        finds the credit spent by the other; a CREDIT_REQ needs an established PDC, and only a
        packet of its own carries its credit target to the receiver, so without this it would
        wait for a grant nobody knows to send (issue 29 item 3). Inference (§4.5 is silent on a
        CCC's second PDC): one packet per new PDC, like the speculative start of a new CCC."""
        if self.credit is None:
            return False
        n = self.nscc
        return n is None or n.can_send(nbytes + self.overhead, now)

    def deadline(self, now: int) -> int | None:
        """When a sender blocked now could go again without any packet arriving: the NSCC
        pacer, or the next CREDIT_REQ of a source blocked without credit (§4.5). None: only an
        ACK or a grant can unblock it."""
        d = None
        if self.nscc is not None:
            d = self.nscc.pacing_deadline(now)
        c = self.credit
        if c is not None:
            r = c.request_deadline()
            if r is not None:
                r = max(r, now)
                if d is None or r < d:
                    d = r
        return d

    def on_send(self, nbytes: int, retx: bool, now: int) -> None:
        size = nbytes + self.overhead
        if not retx:
            self.inflight_pkts += 1
        if self.nscc is not None:
            self.nscc.on_send(size, now)
        if self.credit is not None:
            self.credit.on_send(size, now)

    def ack_request(self, nbytes: int) -> bool:
        """Set AR on the packet of ``nbytes`` about to go (§4.3.3 ``ack_request``, evaluated as
        if it were already in flight; RCCC: it spends the last of the credit)."""
        size = nbytes + self.overhead
        n = self.nscc
        if n is not None and n.ack_request(size):
            return True
        c = self.credit
        return c is not None and c.credit - size <= 0

    def set_backlog(self, pdcid: int, nbytes: int) -> None:
        """The PDS reports a PDC's queued bytes (``len(pending) × nominal size``, an estimate)."""
        if nbytes:
            self.backlogs[pdcid] = nbytes
        else:
            self.backlogs.pop(pdcid, None)
        if self.credit is not None:
            self.credit.backlog = sum(self.backlogs.values())

    def credit_target(self) -> int:
        """Cumulative 24-bit credit target for the next CC request or CREDIT_REQ (§4.5)."""
        c = self.credit
        if c is None:
            return 0
        return c.target(self.nscc.cwnd if self.nscc is not None else None)

    def on_grant(self, grant: int, now: int) -> None:
        if self.credit is not None:
            self.credit.on_grant(grant, now)

    # -- feedback ----------------------------------------------------------------------------------

    def on_ack_cc(
        self, npkts: int, newly_rcvd: int, ecn_bytes: int, rtt: int | None, pend: int, restore: bool, now: int
    ) -> None:
        """An ACK: ``npkts`` first-time acknowledged packets, ``newly_rcvd`` nominal bytes the
        target newly received (ACK_CC ``rcvd_bytes`` difference), ``ecn_bytes`` the bytes it
        reports ECN-CE marked (the named packet when ``m`` is set), ``rtt`` a valid sample less
        the service time (or None), the receiver window penalty (§4.4)."""
        self.inflight_pkts -= npkts
        if self._probe == 1:
            self._probe = 2
        c = self.counters
        c["acks"] += 1
        if ecn_bytes:
            c["ecn_acks"] += 1
            c["ecn_bytes"] = c.get("ecn_bytes", 0) + ecn_bytes + self.overhead
        if self.nscc is not None:
            self.nscc.on_ack(newly_rcvd, ecn_bytes > 0, rtt, now, pend, restore)
        if self.credit is not None:
            self.credit.end_speculation()

    def on_ack(self, npkts: int, nbytes: int, ecn: bool, rtt_ns: int | None, now: int) -> None:
        """Plain-ACK form of the seam: newly received = what the ACK acknowledged."""
        self.on_ack_cc(npkts, nbytes + npkts * self.overhead, nbytes if ecn else 0, rtt_ns, 0, False, now)

    def on_nack_cc(self, nbytes: int, ecn: bool, rtt: int | None, trimmed: bool, lasthop: bool, now: int) -> None:
        """A NACK for an outstanding packet of ``nbytes`` (§4.1 ``on_nack``); it will be resent."""
        size = nbytes + self.overhead
        if self._probe == 1:
            self._probe = 2
        self.counters["nacks"] += 1
        if trimmed:
            self.counters["trims"] += 1
        if self.nscc is not None:
            self.nscc.on_nack(size, rtt, trimmed, lasthop, self.credit is not None, now)
        if self.credit is not None:
            self.credit.end_speculation()

    def on_nack(self, code: int, ecn: bool, now: int) -> None:
        """Seam form for NACKs the PDS does not attribute to a packet: nothing to do."""

    def on_loss(self, nbytes: int, timeout: bool, now: int) -> None:
        """An inferred loss (§4.1 ``on_inferred_loss``): ``timeout`` for an RTO, else a SACK
        fast retransmit."""
        self.counters["timeouts" if timeout else "losses"] += 1
        if self.nscc is not None:
            self.nscc.on_inferred_loss(nbytes + self.overhead, now)

    def on_discarded(self, nbytes: int) -> None:
        """A packet the target discarded unseen (ROD go-back-N, §2.13) is about to be resent:
        it leaves flight without a congestion signal of its own."""
        if self.nscc is not None:
            self.nscc.on_abandon(nbytes + self.overhead)

    def on_done(self, npkts: int, nbytes: int = 0) -> None:
        """``npkts`` packets (``nbytes`` in all) left flight without an ACK (their PDC failed)."""
        self.inflight_pkts -= npkts
        if self.nscc is not None:
            self.nscc.on_abandon(nbytes + npkts * self.overhead)

    def snapshot(self) -> dict[str, Any]:
        """Current figures (tools, tests, the event log)."""
        d: dict[str, Any] = {"inflight_pkts": self.inflight_pkts, **self.counters}
        n = self.nscc
        if n is not None:
            d.update(cwnd=n.cwnd, inflight=n.inflight, base_rtt=n.base_rtt, avg_delay=n.avg_delay, **n.stats)
        c = self.credit
        if c is not None:
            d.update(credit=c.credit, pull=c.pull, granted=c.granted_bytes, speculating=c.speculating)
        return d
