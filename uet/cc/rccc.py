"""RCCC: Receiver Credit-based Congestion Control (spec/behaviour.md §4.5).

Two sans-I/O halves:

- :class:`CreditSender`, per CCC at the source: credit in bytes, the cumulative grant ``pull``
  seen so far, speculative start with ``MaxWnd`` of credit, the credit target it advertises on
  every CC request (RUD/ROD CC request ``credit_target``) or CREDIT_REQ, and when to repeat a
  CREDIT_REQ while it is blocked.
- :class:`CreditScheduler`, one per receiving FEP: the pacer that serves active senders, least
  served first (round robin among equals), each grant ``grant_mtus × MTU`` of credit but never
  beyond the sender's advertised target, spaced by ``grant_bytes × 8 / (link_bps × pull_rate)``
  (§4.5 "Receiver pacer"). Its deadline goes into the PDS ``get_timer()``;
  :meth:`CreditScheduler.poll` returns the grants due.

Credit travels in 256-byte quanta; targets and grants are cumulative 24-bit counters (the width
of ``credit_target`` in the CC request and of ``credit`` in the credit ACK state, wire-format.md
§5.2, §5.4), compared with serial arithmetic. Inference where the notes are silent:

- A grant travels in a CREDIT control packet whose 32-bit payload carries the 24-bit cumulative
  grant; a CREDIT_REQ's payload carries the 24-bit cumulative target.
- Idle senders get no "slow" unsolicited grants (optional in htsim) unless
  ``CcConfig.idle_credit`` asks for them (the scale-up path of a server does: see
  :class:`CreditScheduler`): a sender with new demand advertises it, and a blocked one restates
  it in a CREDIT_REQ when a grant is overdue (:meth:`CreditSender.request_deadline`).
- On a trim the receiver adds one MTU to the sender's target (it "puts the source back on the
  active list to fund the retransmission").
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Final

from uet.cc.base import CcAlgorithm, ReceiverCc
from uet.cc.config import CcConfig
from uet.cc.pullrate import PullRate

QUANTUM: Final = 256
M24: Final = 0xFFFFFF


def diff24(a: int, b: int) -> int:
    """Signed serial difference ``a − b`` of two 24-bit counters."""
    d = (a - b) & M24
    return d - 0x1000000 if d & 0x800000 else d


class CreditSender(CcAlgorithm):
    """Source half of RCCC for one CCC (§4.5 "Source")."""

    name = "rccc"
    credit_based = True

    def __init__(self, cfg: CcConfig, now: int = 0, log: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.cfg = cfg
        self.max_wnd = cfg.max_wnd
        self.mtu = cfg.mtu
        #: bytes it may send now; starts at MaxWnd while speculating
        self.credit = float(self.max_wnd)
        self.speculating = True
        #: highest cumulative grant seen (24-bit quanta)
        self.pull = 0
        #: last target advertised (24-bit quanta) and when a CREDIT_REQ last went
        self.advertised = 0
        self.last_req = -(1 << 62)
        self.req_interval = cfg.credit_req_ns if cfg.credit_req_ns is not None else cfg.base_rtt_ns
        #: when the receiver last heard from us (a CC request carrying the target) or we from it
        #: (a grant), and the smoothed time between grants (1/8 gain)
        self.last_heard = -(1 << 62)
        self.last_grant: int | None = None
        self.grant_gap = 0.0
        #: bytes waiting to be sent / resent (set by the owner before asking for a target)
        self.backlog = 0
        self.rtx_backlog = 0
        self.granted_bytes = 0
        self._log = log

    def can_send(self, size: int = 0, now: int = 0) -> bool:
        return self.credit > 0

    def ack_request(self, size: int = 0) -> bool:
        """AR on the packet that spends the last of the credit."""
        return self.credit - size <= 0

    def deadline(self, now: int) -> int | None:
        r = self.request_deadline()
        return None if r is None else max(r, now)

    def on_ack(
        self, newly_rcvd: int, ecn: bool, rtt: int | None, now: int, pend: int = 0, restore: bool = False
    ) -> None:
        self.end_speculation()

    def on_nack(self, size: int, rtt: int | None, trimmed: bool, lasthop: bool, credit: bool, now: int) -> None:
        self.end_speculation()

    def set_backlog(self, nbytes: int) -> None:
        self.backlog = nbytes

    def credit_target(self, cwnd: float | None) -> int:
        return self.target(cwnd)

    def credit_request_due(self, now: int) -> bool:
        rd = self.request_deadline()
        return rd is not None and rd <= now

    def snapshot(self) -> dict[str, Any]:
        return {
            "credit": self.credit,
            "pull": self.pull,
            "granted": self.granted_bytes,
            "speculating": self.speculating,
        }

    def on_send(self, size: int, now: int | None = None) -> None:
        """A packet of nominal ``size`` went; at ``now`` (when given) it carried our target."""
        self.credit -= size
        if now is not None:
            self.last_heard = now

    def end_speculation(self) -> None:
        """The first grant, ACK or NACK ends speculation; unused speculative credit is
        discarded (``credit = min(credit, 0)``)."""
        if self.speculating:
            self.speculating = False
            if self.credit > 0:
                self.credit = 0.0

    def target(self, cwnd: float | None = None) -> int:
        """The cumulative credit target to advertise (24-bit quanta, §4.5 "Credit target"):
        ``backlog + rtx_backlog``, capped at ``cwnd + MTU`` (NSCC also running) and at MaxWnd,
        minus current credit, at least one MTU while speculating with backlog, plus ``pull``."""
        want = float(self.backlog + self.rtx_backlog)
        if cwnd is not None:
            want = min(want, cwnd + self.mtu)
        want = min(want, self.max_wnd) - max(self.credit, 0.0)
        if self.speculating and self.backlog > 0:
            want = max(want, float(self.mtu))
        q = -(-int(max(want, 0.0)) // QUANTUM)
        t = (self.pull + q) & M24
        if diff24(t, self.advertised) > 0:
            self.advertised = t
        return self.advertised

    def on_grant(self, grant: int, now: int) -> None:
        """A cumulative grant arrived (CREDIT CP payload or credit ACK state)."""
        grant &= M24
        d = diff24(grant, self.pull)
        self.end_speculation()
        if d <= 0:
            return
        self.credit = min(self.credit + QUANTUM * d, self.max_wnd)
        self.granted_bytes += QUANTUM * d
        self.pull = grant
        lg = self.last_grant
        if lg is not None:
            gap = now - lg
            self.grant_gap = float(gap) if not self.grant_gap else self.grant_gap + (gap - self.grant_gap) / 8
        self.last_grant = self.last_heard = now
        if self._log is not None:
            self._log({"t": now, "ev": "cc", "algo": "rccc", "credit": int(self.credit), "pull": grant})

    def request_deadline(self) -> int | None:
        """When a CREDIT_REQ is due: only while blocked (no credit, not speculating, backlog),
        once the receiver looks to have lost track of us (§4.5 "Timeout with no credit"):
        ``credit_req_ns`` plus twice the usual time between grants after it last heard our
        target or we last heard a grant, and at most once per ``credit_req_ns``. Inference: the
        notes give only the rate limit; a blocked source in an N→1 incast waits about N grant
        times by design, and a request per RTT of that wait (htsim sends its RTS only on a
        retransmission timeout) was control traffic on the receiver's link — about one per
        grant in the 15→1 incast.

        New demand is due at once: blocked with backlog while the receiver has granted every
        target we advertised (``pull`` reached ``advertised``), the receiver cannot know of it,
        so the backlog the owner just reported is announced in a CREDIT_REQ now (§4.1
        ``on_new_data`` → RCCC; §4.5: the target travels "in a CREDIT_REQ CP when no data is
        going"). At most one per grant: the request raises ``advertised`` above ``pull``, and one
        that could not go (the PDC not yet established) waits for the timeout unless a grant or a
        data packet comes first (``last_req < last_heard``), never a retry at the same instant. Before,
        a message queued behind a spent grant waited for the timeout above, whose smoothed gap
        between grants includes the idle time between messages (~100 µs per message of the
        double binary tree on 4 ranks)."""
        if self.credit > 0 or self.speculating or self.backlog + self.rtx_backlog <= 0:
            return None
        if diff24(self.advertised, self.pull) <= 0 and self.last_req < self.last_heard:
            return self.last_heard  # new demand the receiver has not heard of: due now
        heard = self.last_heard + int(2 * self.grant_gap)
        return max(self.last_req, heard) + self.req_interval

    def on_request_sent(self, now: int) -> None:
        self.last_req = now


class _Peer:
    __slots__ = ("target", "granted", "active", "route", "served", "rx", "pace", "ready", "given", "idle", "owed")

    def __init__(self) -> None:
        self.target = 0
        self.granted = 0
        self.active = False
        self.route: object = None
        #: service account (bytes): grants given plus data delivered beyond them, raised on
        #: activation to the fair floor; the pacer's key is ``max(served, rx)``
        self.served = 0
        #: nominal bytes of its untrimmed data that reached this receiver (speculative included)
        self.rx = 0
        #: its share of the pull rate (uet.cc.pullrate) and when that share allows its next grant
        self.pace = PullRate()
        self.ready = 0
        #: bytes granted in all (not wrapped), and whether it waits for unsolicited credit
        #: (``CcConfig.idle_credit``)
        self.given = 0
        self.idle = False
        #: credit granted it that none of its packets has spent yet, by this receiver's count
        #: (``CcConfig.idle_credit``: :class:`CreditScheduler`, "Credit outstanding per sender")
        self.owed = 0


class CreditScheduler(ReceiverCc):
    """Receiver pacer of one FEP (§4.5 "Receiver pacer"), keyed by sender (any hashable key).

    ``note_target(key, target, now, route, rx)`` records a sender's cumulative target (and where
    to send its grants, ``route``, opaque to the scheduler) and the nominal bytes of the data
    packet that carried it (0 when trimmed); ``deadline()`` is the next grant time (None when the
    pacer has stopped); ``poll(now)`` returns ``[(key, route, cumulative grant)]`` for the grants
    due, at most one per pacing interval elapsed.

    **Order of service** (inference; the notes say "served round-robin"): the next grant goes to
    the active sender that has had the least service, ``max(granted bytes, data bytes received)``,
    ties in round-robin order — start-time fair queueing over the receiver's link. With every
    sender always active it is plain round robin. It differs where plain round robin is unfair:

    - data a sender delivered without a grant (its speculative start, §4.5) counts as service, so
      the sender nearest the receiver, whose speculative window arrives first and untrimmed, does
      not keep that lead over senders whose speculative packets were trimmed;
    - a sender that drops out of the active list between grants (its window, NSCC's ``cwnd +
      MTU`` cap on the target, holds it back for an RTT) keeps its place instead of losing its
      turns, so a long-RTT sender is not starved by a short-RTT one.

    A sender (re)joining the active list cannot bank service while it was idle: its account is
    raised to the least account among the active senders (or, with none active, the last one
    served) less one ``MaxWnd``, so a newcomer catches up at most one speculative window ahead
    of the others. ``uet-sim --suite cc --only incast15_rccc``: max/min 1.08 → 1.02 (tail 2,512 →
    2,513 µs).

    **A sender trimmed in the core** (``note_arrival``, :mod:`uet.cc.pullrate`) gets its grants
    no closer than ``pacing interval / its share``: while it waits for its share the pacer serves
    the others, and with no one else to serve it waits for that sender's time.

    **Idle senders** (``CcConfig.idle_credit``; §4.5: senders with no demand "may receive 'slow'
    unsolicited grants up to one MaxWnd of speculative credit"): a sender whose target is met
    joins an idle list and, in the time no active sender needs (the pacer serves them first),
    gets unsolicited grants, at the pacer's rate and in turn, until the credit it has not used
    — bytes granted less data received from it, by this receiver's count — reaches one
    ``MaxWnd``; a sender whose data then arrives, spending it, rejoins the list. Its next burst
    then goes at once instead of one round trip (its target reaching us, our grants reaching it)
    later. Inference: the notes do not say how slow; a grant only in spare time keeps the
    receiver's link within its rate, and a sender keeps at most ``MaxWnd`` of credit (as at its
    speculative start), so ``k`` idle senders can burst at most ``k × MaxWnd``. A sender being
    trimmed in the core (its pull-rate share below 1) gets none.

    **Credit outstanding per sender** (with ``CcConfig.idle_credit``; inference, the notes are
    silent): the pacer skips, in its turn, a sender that holds one bandwidth-delay product of
    credit it has not spent — bytes granted less the data (or trimmed packets) that arrived from
    it since, :attr:`_Peer.owed` — and serves the others; with every active sender at that bound
    it waits for data to arrive. One BDP of credit in flight is what a sender needs to send at
    the receiver's full rate, so the bound never slows a sender that spends its credit; it stops
    credit from piling up at a sender whose own link is busy towards other receivers, which
    another sender of this receiver could have used at once and which that sender later bursts
    into this receiver's link on top of the paced grants. (A three-to-one convergence of the
    double binary tree on a trimming fabric: docs/collectives.md.) A CREDIT_REQ says that its
    sender holds no credit: its count restarts at zero, so a packet lost without a trim (which
    the count never sees arrive) cannot hold a sender back for good."""

    def __init__(self, cfg: CcConfig, ports: int = 1, log: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.cfg = cfg
        #: ``cfg.core_pull``, read per data packet (a field of the interpreted CcConfig is a
        #: generic look-up in the compiled build)
        self._core_pull = cfg.core_pull
        self.grant_bytes = cfg.grant_mtus * cfg.mtu
        self.rate_Bpns = cfg.link_bps * ports * cfg.pull_rate / 8e9
        self.allowance = int(cfg.max_wnd)
        self.peers: dict[Hashable, _Peer] = {}
        #: active senders in round-robin order (the least served goes first, ties in this order)
        self.active: list[Hashable] = []
        self.next_time: int | None = None
        self.grants = 0
        #: the service account of the sender granted last (the floor when none is active)
        self.vtime = 0
        #: idle senders waiting for unsolicited credit, in turn (``CcConfig.idle_credit``)
        self.idle_credit = cfg.idle_credit
        self.idle: list[Hashable] = []
        #: the most credit a sender may hold unspent before the pacer skips it (0: no bound), and
        #: whether the pacer stopped because every active sender is at that bound
        self.cap = int(cfg.bdp) if cfg.idle_credit else 0
        self.held = False
        self._log = log

    def note_target(
        self, key: Hashable, target: int, now: int, route: object = None, rx: int = 0, blocked: bool = False
    ) -> int | None:
        """Record a cumulative target and ``rx`` nominal bytes of data received from ``key``;
        ``blocked``: the target came in a CREDIT_REQ (the sender holds no credit). Returns the
        cumulative grant to repeat when the sender asks for nothing beyond what it was granted
        (its CREDIT must have been lost), else None."""
        p = self.peers.get(key)
        if p is None:
            p = self.peers[key] = _Peer()
        if route is not None:
            p.route = route
        p.rx += rx
        if rx or blocked:
            self._spent(p, p.owed if blocked else rx, now)
        target &= M24
        if diff24(target, p.target) > 0:
            p.target = target
        self._activate(key, p, now)
        if not p.active and self.idle_credit:
            self._make_idle(key, p, now)
        if not p.active and p.granted and diff24(target, p.granted) <= 0:
            return p.granted
        return None

    def note_arrival(self, key: Hashable, core_trim: bool, now: int, ce: bool = False) -> None:
        """A data packet of ``key`` arrived; ``core_trim``: a switch before the last hop
        trimmed it (its DSCP says which, §3.2). Adjusts the sender's share of the pull rate
        (:mod:`uet.cc.pullrate`) when ``core_pull`` is on."""
        if self._core_pull:
            p = self.peers.get(key)
            if p is not None:
                p.pace.on_data(core_trim, now, self.cfg, ce)

    def add_demand(self, key: Hashable, nbytes: int, now: int) -> None:
        """Fund a retransmission (trim NACK sent to ``key``): raise its target by ``nbytes``."""
        p = self.peers.get(key)
        if p is None:
            return
        self._spent(p, nbytes, now)  # the trimmed packet spent its credit
        base = p.target if diff24(p.target, p.granted) > 0 else p.granted
        p.target = (base + -(-nbytes // QUANTUM)) & M24
        self._activate(key, p, now)

    def forget(self, key: Hashable) -> None:
        """The sender went away (its PDC closed)."""
        p = self.peers.pop(key, None)
        if p is not None and p.active:
            self.active.remove(key)
        if p is not None and p.idle:
            self.idle.remove(key)

    def _spent(self, p: _Peer, nbytes: int, now: int) -> None:
        """``nbytes`` of the credit ``p`` holds were spent (its packets arrived, whole or
        trimmed); a pacer that stopped with every sender at the bound goes again."""
        p.owed = p.owed - nbytes if p.owed > nbytes else 0
        if self.held:
            self.held = False
            if self.next_time is None and self.active:
                self.next_time = now

    def _activate(self, key: Hashable, p: _Peer, now: int) -> None:
        if not p.active and diff24(p.target, p.granted) > 0:
            peers = self.peers
            floor = min((max(peers[k].served, peers[k].rx) for k in self.active), default=self.vtime)
            floor -= self.allowance
            if p.served < floor:
                p.served = floor
            if p.idle:
                p.idle = False
                self.idle.remove(key)
            p.active = True
            self.active.append(key)
            if self.next_time is None:
                self.next_time = now

    def _make_idle(self, key: Hashable, p: _Peer, now: int) -> None:
        """Put an inactive sender on the idle list when it holds less than a ``MaxWnd`` of
        unused credit (class docstring, "Idle senders")."""
        if p.idle or p.route is None or p.pace.rate < 1.0:
            return
        if p.given < p.rx:  # it sent more than we granted (its speculative start): none unused
            p.given = p.rx
        if p.given - p.rx + QUANTUM > self.allowance:
            return
        p.idle = True
        self.idle.append(key)
        if self.next_time is None:
            self.next_time = now

    def _grant_idle(self) -> tuple[Hashable, _Peer, int] | None:
        """The next unsolicited grant to an idle sender: (key, peer, quanta), or None."""
        idle = self.idle
        peers = self.peers
        while idle:
            key = idle.pop(0)
            p = peers[key]
            room = self.allowance - (p.given - p.rx)
            if room < QUANTUM or p.pace.rate < 1.0:
                p.idle = False
                continue
            q = min(self.grant_bytes, room) // QUANTUM
            p.granted = (p.granted + q) & M24
            p.given += q * QUANTUM
            p.owed += q * QUANTUM
            if room - q * QUANTUM >= QUANTUM:
                idle.append(key)
            else:
                p.idle = False
            return key, p, q
        return None

    def deadline(self) -> int | None:
        return self.next_time

    def _pick(self, t: int) -> int:
        """Index in ``active`` of the least served sender (the first of equals) whose share of
        the pull rate allows a grant at ``t`` and who holds less than the bound of unspent
        credit (class docstring); -1 when none does."""
        peers = self.peers
        best = -1
        low = -1
        cap = self.cap - self.grant_bytes if self.cap else 0
        for i, k in enumerate(self.active):
            p = peers[k]
            if p.ready > t or (cap and p.owed > cap):
                continue
            s = p.served if p.served > p.rx else p.rx
            if low < 0 or s < low:
                best, low = i, s
        return best

    def poll(self, now: int) -> list[tuple[Hashable, object, int]]:
        out: list[tuple[Hashable, object, int]] = []
        nt = self.next_time
        active = self.active
        while nt is not None and nt <= now:
            if not active:
                idle = self._grant_idle() if self.idle else None
                if idle is None:
                    nt = None
                    break
                key, p, q = idle
                out.append((key, p.route, p.granted))
                self.grants += 1
                nt += max(1, int(q * QUANTUM / self.rate_Bpns))
                continue
            i = self._pick(nt)
            if i < 0:  # every active sender waits for its share (so does the pacer) or is at the bound
                ready = [r for r in (self.peers[k].ready for k in active) if r > nt]
                if ready:
                    nt = min(ready)
                    continue
                self.held = True  # until data arrives (_spent)
                nt = None
                break
            key = active.pop(i)
            p = self.peers[key]
            want = diff24(p.target, p.granted) * QUANTUM
            g = min(self.grant_bytes, want)
            q = -(-g // QUANTUM)
            p.granted = (p.granted + q) & M24
            p.given += q * QUANTUM
            p.owed += q * QUANTUM
            # data it delivered beyond its grants (its speculative window) is service too
            p.served = (p.served if p.served > p.rx else p.rx) + q * QUANTUM
            self.vtime = p.served
            out.append((key, p.route, p.granted))
            self.grants += 1
            if diff24(p.target, p.granted) > 0:
                active.append(key)
            else:
                p.active = False
                if self.idle_credit:
                    self._make_idle(key, p, nt)
            step = max(1, int(q * QUANTUM / self.rate_Bpns))
            r = p.pace.rate
            if r < 1.0:
                p.ready = nt + int(step / r)
            nt += step
        if nt is not None and not active and not self.idle and nt <= now:
            nt = None
        self.next_time = nt
        if out and self._log is not None:
            self._log({"t": now, "ev": "cc", "algo": "rccc_rx", "grants": len(out), "active": len(active)})
        return out
