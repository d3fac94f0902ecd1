"""NSCC: Network Signal-based Congestion Control, one instance per CCC (spec/behaviour.md §4.3).

A sans-I/O window algorithm: the PDS tells it every send, ACK (newly received bytes from the
ACK_CC ``rcvd_bytes`` difference, ECN, an RTT sample without the target's service time, the
receiver window penalty), NACK and inferred loss; it answers ``can_send`` and ``ack_request``.
Sizes are nominal bytes (§4.2), times integer ns; ``cwnd`` is a float (the increases are
fractions of a byte per ACK).

The rules are §4.3.3–§4.3.5 and the receiver window penalty §4.4, written as the notes give them.
Choices where the notes leave room (inference):

- ``can_send`` uses the real packet size (the notes allow it) instead of the MTU.
- Delay filter: htsim's EWMA (weight 0.0125), and its rule that an ECN-free sample above target
  counts as ``0.25 × base_rtt`` (draining). Trim NACKs feed ``config_base_rtt`` as a marked
  sample (not replaced).
- An ACK without a valid RTT sample (§2.9 validity) still updates inflight, the received-bytes
  counters and the penalty, then stops (the spec's rule; htsim reuses the average instead).
- Optional pacing (``CcConfig.pacing``): first transmissions leave at most ``cwnd`` bytes per
  ``base_rtt``; :meth:`pacing_deadline` is the earliest time the next may go.
- Sub-packet windows (``CcConfig.min_cwnd`` below ``mtu``; off by default, the notes' minimum
  is one MTU): every clamp of §4.3.4–§4.4 ("``max(cwnd, MTU)``") uses ``min_cwnd`` instead, and
  a window below one MTU is kept as a *rate*: with ``cwnd < mtu`` a packet may go only when
  nothing is in flight and ``mtu × base_rtt / cwnd`` has passed since the previous one left,
  so ``cwnd = mtu / k`` sends one packet every ``k`` base RTTs. :meth:`pacing_deadline` gives
  that time to the PDS ``get_timer()``. Two rules change with it, both only below one MTU:
  the periodic ``eta`` is added per base RTT *elapsed* (an ACK arrives less than once per base
  RTT; per ACK the increase would grow with the rate, and with a decrease per ACK both ways
  would be multiplicative and never converge), and quick adapt never raises the window (the
  bytes achieved in one window are 0 or whole packets, not a rate).
  Why: at one MTU per sender, 127 senders into one port keep 127 packets in flight, more than
  one BDP on the wire plus one BDP of queue, so the fabric trims for the whole transfer
  whatever NSCC decides (issue 11's 127→1 incast: 83,455 retransmissions at ``min_cwnd = mtu``,
  about 16,000 at ``mtu / 16``). Not the default: it costs fairness (max/min 1.17 → 1.26–1.30
  there, 1.26 → 1.38 on 15→1), measured with ``uet-sim --suite cc``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from uet.cc.base import CcAlgorithm
from uet.cc.config import REF_BDP, REF_RTT_NS, CcConfig

#: htsim's EWMA weight of one delay sample (§4.3.5)
DELAY_EWMA: Final = 0.0125
#: "delay ≈ 0" for fast increase (htsim: < 1 µs, §4.3.1)
FAST_INCREASE_NS: Final = 1_000
GAMMA: Final = 0.8
MAX_MD_JUMP: Final = 0.5
QA_GATE: Final = 3


class Nscc(CcAlgorithm):
    """Per-CCC NSCC state and reactions (§4.3.2 state, §4.3.3–§4.3.5 rules).

    ``log(record)`` (optional) receives a ``{"ev": "cc", ...}`` record whenever cwnd, base RTT or
    the average delay change (uet.eventlog, qlog ``metrics_updated`` in spirit)."""

    name = "nscc"
    base_rtt_probe = True

    def __init__(self, cfg: CcConfig, now: int = 0, log: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.cfg = cfg
        self.mtu = cfg.mtu
        # read per packet (can_send, on_send, quick_adapt): kept here, where the compiled build
        # reads them natively (a field of the configuration is a generic look-up there)
        self.pacing = cfg.pacing
        self.quick_adapt_off = cfg.disable_quick_adapt
        self.config_base_rtt = cfg.base_rtt_ns
        self.link_Bpns = cfg.link_bps / 8e9  # bytes per ns
        bdp = cfg.bdp
        self.target_qdelay = int((0.75 if cfg.trimming else 1.0) * cfg.base_rtt_ns)
        scaling_a = bdp / REF_BDP
        scaling_b = self.target_qdelay / REF_RTT_NS
        #: proportional gain, bytes per ns of headroom (§4.3.1 ``alpha`` per second / 1e9)
        self.alpha = 4.0 * self.mtu * scaling_a * scaling_b / self.target_qdelay
        self.fi = 5.0 * self.mtu * scaling_a
        self.fi_scale = 0.25 * scaling_a
        self.eta = 0.15 * self.mtu * scaling_a
        self.qa_threshold: float = float(cfg.qa_threshold_ns) if cfg.qa_threshold_ns is not None else self._qa_default()
        self.adjust_period = cfg.base_rtt_ns
        self.adjust_bytes = 8 * self.mtu
        # §4.3.2 per-CCC state
        self.max_wnd = cfg.max_wnd
        #: the smallest window (§4.3.1 "minimum cwnd"; below ``mtu``: a sub-packet window)
        self.min_cwnd = float(cfg.min_cwnd if cfg.min_cwnd is not None else cfg.mtu)
        self.cwnd = self.max_wnd
        self.inflight = 0
        self.saved_cwnd = 0.0
        self.base_rtt = cfg.base_rtt_ns
        self.achieved_bytes = 0
        self.received_bytes = 0
        self.fi_count = 0
        self.trigger_qa = False
        self.qa_endtime = 0
        self.bytes_to_ignore = 0
        self.bytes_ignored = 0
        self.inc_bytes = 0.0
        self.last_adjust_time = now
        self.increase_mode = False
        self.last_dec_time = now
        self.avg_delay = 0.0
        # pacing (optional) and counters
        self.next_send = 0
        #: when the last packet left (sub-packet windows pace from it)
        self.last_tx: int | None = None
        self.stats = {"fair": 0, "prop": 0, "fast": 0, "md": 0, "qa": 0, "hold": 0, "penalty": 0}
        self._log = log
        self._logged: tuple[int, ...] = ()

    def _qa_default(self) -> float:
        """§4.3.1 ``qa_threshold``: ``4 × target_qdelay`` without trimming; with trimming the
        spec sets it very large, so delay never triggers quick adapt (trims still do). htsim
        keeps 4 × target with trimming; the notes win (measured on the 15→1 incast of
        ``uet-sim --suite cc``: no difference, delay alone never reached 4 × target there)."""
        return float(4 * self.target_qdelay) if not self.cfg.trimming else float("inf")

    # -- sending (§4.3.3) -------------------------------------------------------------------------

    def can_send(self, size: int, now: int) -> bool:
        """``inflight + size <= cwnd`` (and the pacer, when on). A packet is always allowed when
        nothing is in flight, so a cwnd of one MTU never blocks a larger packet forever; below
        one MTU (sub-packet window) only once :meth:`sub_packet_time` has come."""
        if self.inflight > 0 and self.inflight + size > self.cwnd:
            return False
        if self.cwnd < self.mtu and now < self.sub_packet_time():
            return False
        return not (self.pacing and now < self.next_send)

    def sub_packet_time(self) -> int:
        """With ``cwnd < mtu``: the earliest time the next packet may leave, ``mtu × base_rtt /
        cwnd`` after the previous one (0 before the first packet)."""
        if self.last_tx is None:
            return 0
        return self.last_tx + int(self.mtu * self.base_rtt / self.cwnd)

    def pacing_deadline(self, now: int) -> int | None:
        """When the pacer (or a sub-packet window with nothing in flight) lets the next packet
        go, or None: not pacing now, or only an ACK can open the window."""
        d = None
        if self.pacing and self.next_send > now:
            d = self.next_send
        if self.cwnd < self.mtu and self.inflight <= 0:
            t = self.sub_packet_time()
            if t > now and (d is None or t > d):
                d = t
        return d

    def deadline(self, now: int) -> int | None:
        return self.pacing_deadline(now)

    def window(self) -> float | None:
        return self.cwnd

    def on_send(self, size: int, now: int) -> None:
        self.inflight += size
        self.last_tx = now
        if self.pacing:
            gap = int(size * self.base_rtt / self.cwnd)
            self.next_send = max(self.next_send, now) + gap

    def ack_request(self, size: int = 0) -> bool:
        """Ask for an ACK now (§4.3.3): ``(cwnd − inflight) < MTU`` or a window under one ACK's
        worth of coalescing (``cwnd < ACK_Gen_Trigger``, 16384). ``size``: a packet about to be
        sent, counted as if already in flight."""
        return (self.cwnd - self.inflight - size) < self.mtu or self.cwnd < 16384

    # -- ACK (§4.3.4) ------------------------------------------------------------------------------

    def on_ack(
        self,
        newly_rcvd: int,
        ecn: bool,
        rtt: int | None,
        now: int,
        pend: int = 0,
        restore: bool = False,
    ) -> None:
        """One ACK: ``newly_rcvd`` nominal bytes newly delivered, ``ecn`` its ``m`` flag (or any
        marked bytes), ``rtt`` a valid sample with the service time removed (None if invalid).

        Once per ACK: the helpers that have nothing to do on most ACKs are called only when they
        do (no penalty and no restore: ``apply_cwnd_penalty`` is a no-op; an RTT no smaller than
        ``base_rtt``: so is ``update_base_rtt``; no event log: so is ``_changed``)."""
        self.inflight -= newly_rcvd
        self.bytes_ignored += newly_rcvd
        self.received_bytes += newly_rcvd
        self.achieved_bytes += newly_rcvd
        limited = self.apply_cwnd_penalty(pend, restore, newly_rcvd) if pend > 0 or restore else False
        log = self._log
        if rtt is None:
            self._clamp()  # a restored window may exceed a MaxWnd lowered since it was saved
            if log is not None:
                self._changed(now)
            return
        if rtt < self.base_rtt:
            self.update_base_rtt(rtt)
        delay = rtt - self.base_rtt
        self.update_delay(delay, ecn)
        if self.quick_adapt(False, ecn, delay, now):
            if log is not None:
                self._changed(now)
            return
        st = self.stats
        tq = self.target_qdelay
        if not ecn and not limited:
            if delay >= tq:
                st["fair"] += 1
                self.fair_increase(newly_rcvd)
            else:
                st["prop"] += 1
                self.proportional_increase(newly_rcvd, delay)
        elif ecn and delay >= tq:
            self.multiplicative_decrease(now)
        else:
            st["hold"] += 1
        if now - self.last_adjust_time >= self.adjust_period or self.received_bytes > self.adjust_bytes:
            self.fulfill_adjustment(now)
        self._clamp()
        if log is not None:
            self._changed(now)

    def update_base_rtt(self, rtt: int) -> None:
        """A smaller RTT lowers ``base_rtt`` and re-derives ``max_wnd`` (§4.3.4)."""
        if rtt < self.base_rtt:
            self.base_rtt = rtt
            self.max_wnd = 1.5 * self.link_Bpns * rtt
            if self.cwnd > self.max_wnd:
                self.cwnd = max(self.max_wnd, self.min_cwnd)

    def update_delay(self, delay: float, ecn: bool) -> None:
        """htsim's filter: an ECN-free sample above target counts as ``0.25 × base_rtt``."""
        if not ecn and delay > self.target_qdelay:
            delay = 0.25 * self.base_rtt
        self.avg_delay = DELAY_EWMA * delay + (1 - DELAY_EWMA) * self.avg_delay

    # -- internal functions (§4.3.5) --------------------------------------------------------------

    def fair_increase(self, n: int) -> None:
        self.inc_bytes += self.fi * n

    def proportional_increase(self, n: int, delay: int) -> None:
        self.fast_increase(n, delay)
        if self.increase_mode:
            return
        self.inc_bytes += self.alpha * n * (self.target_qdelay - delay)

    def fast_increase(self, n: int, delay: int) -> None:
        if delay < FAST_INCREASE_NS:
            self.fi_count += n
            if self.fi_count > self.cwnd or self.increase_mode:
                self.cwnd = min(self.cwnd + n * self.fi_scale, self.max_wnd)
                self.increase_mode = True
                self.stats["fast"] += 1
                return
        else:
            self.fi_count = 0
        self.increase_mode = False

    def multiplicative_decrease(self, now: int) -> None:
        """At most once per base RTT, by ``γ × (avg − target) / avg`` (never below 0.5 ×)."""
        self.increase_mode = False
        self.fi_count = 0
        avg = self.avg_delay
        tq = self.target_qdelay
        if avg > tq and now - self.last_dec_time > self.base_rtt:
            self.cwnd *= max(1 - GAMMA * (avg - tq) / avg, MAX_MD_JUMP)
            self.cwnd = max(self.cwnd, self.min_cwnd)
            self.last_dec_time = now
            self.stats["md"] += 1

    def fulfill_adjustment(self, now: int) -> None:
        """Apply the accumulated increase, and ``eta`` once per base RTT (§4.3.5). A sub-packet
        window hears an ACK less than once per base RTT, so it gets ``eta`` for every base RTT
        elapsed (at most ``mtu / min_cwnd`` of them): the periodic increase stays additive in
        time, as it is for larger windows, instead of growing with the ACK rate (which, with
        a decrease per ACK, would be multiplicative both ways and never converge to fairness)."""
        sub = self.cwnd < self.mtu
        self.cwnd += self.inc_bytes / self.cwnd
        elapsed = now - self.last_adjust_time
        if elapsed >= self.adjust_period:
            self.cwnd += self.eta * (min(elapsed / self.adjust_period, self.mtu / self.min_cwnd) if sub else 1)
            self.last_adjust_time = now
        self.cwnd = min(self.cwnd, self.max_wnd)
        self.inc_bytes = 0.0
        self.received_bytes = 0

    def quick_adapt(self, is_loss: bool, ecn: bool, qdelay: float, now: int) -> bool:
        """Collapse cwnd to the bytes achieved in the last window when congestion is severe."""
        if self.quick_adapt_off:
            return False
        done = False
        if self.bytes_ignored < self.bytes_to_ignore and ecn:
            done = True
        elif now >= self.qa_endtime:
            if (
                self.qa_endtime != 0
                and (self.trigger_qa or is_loss or qdelay > self.qa_threshold)
                and self.achieved_bytes < (int(self.max_wnd) >> QA_GATE)
            ):
                w = max(float(self.achieved_bytes), self.min_cwnd)
                # a sub-packet window achieves 0 or whole packets per window, not a rate: a
                # quick adapt may shrink it, never raise it
                self.cwnd = min(w, self.cwnd) if self.cwnd < self.mtu else w
                self.bytes_to_ignore = self.inflight
                self.bytes_ignored = 0
                self.trigger_qa = False
                done = True
                self.stats["qa"] += 1
            self.achieved_bytes = 0
            self.qa_endtime = now + self.base_rtt + self.target_qdelay
        if done:
            self.inc_bytes = 0.0
            self.received_bytes = 0
        return done

    def apply_cwnd_penalty(self, pend: int, restore: bool, n: int) -> bool:
        """Receiver window penalty (§4.4): ``pend`` 1..127 shrinks cwnd by ``pend × n / 128``."""
        if pend > 0:
            if self.saved_cwnd == 0:
                self.saved_cwnd = self.cwnd
            dec = (pend * n) >> 7
            self.cwnd = min(self.cwnd, float(self.inflight))
            self.cwnd = max(self.min_cwnd, self.cwnd - dec)
            self.stats["penalty"] += 1
        elif restore and self.saved_cwnd > 0:
            self.cwnd = self.saved_cwnd
            self.saved_cwnd = 0.0
        return pend > 0

    # -- NACK and loss (§4.3.5) --------------------------------------------------------------------

    def on_nack(self, size: int, rtt: int | None, trimmed: bool, lasthop: bool, credit: bool, now: int) -> None:
        """A NACK for a packet of ``size`` nominal bytes; ``trimmed``/``lasthop`` say which trim;
        with ``credit`` (RCCC runs too) a last-hop trim leaves the window alone (§4.5)."""
        adjust = False
        self.inflight -= size
        if rtt is not None:
            self.update_base_rtt(rtt)
        if trimmed:
            self.update_delay(self.config_base_rtt, True)
            self.bytes_ignored += size
            if not lasthop or not credit:
                adjust = True
                self.trigger_qa = True
                if self.quick_adapt(True, True, 0, now):
                    adjust = False
        if adjust:
            self.cwnd = max(self.cwnd - size, self.min_cwnd)
        self._changed(now)

    def on_inferred_loss(self, size: int, now: int) -> None:
        """RTO or SACK-inferred loss: shrink by the packet, stop counting it in flight."""
        self.cwnd = max(self.cwnd - size, self.min_cwnd)
        self.bytes_ignored += size
        self.inflight -= size
        self._changed(now)

    def on_abandon(self, size: int) -> None:
        """A packet left flight without any signal (its PDC failed): forget it."""
        self.inflight -= size

    def snapshot(self) -> dict[str, Any]:
        return {
            "cwnd": self.cwnd,
            "inflight": self.inflight,
            "base_rtt": self.base_rtt,
            "avg_delay": self.avg_delay,
            **self.stats,
        }

    # -- helpers -----------------------------------------------------------------------------------

    def _clamp(self) -> None:
        if self.cwnd < self.min_cwnd:
            self.cwnd = self.min_cwnd
        elif self.cwnd > self.max_wnd:
            self.cwnd = self.max_wnd

    def _changed(self, now: int) -> None:
        log = self._log
        if log is None:
            return
        cur = (int(self.cwnd), self.base_rtt, int(self.avg_delay))
        if cur != self._logged:
            self._logged = cur
            log(
                {
                    "t": now,
                    "ev": "cc",
                    "algo": "nscc",
                    "cwnd": cur[0],
                    "inflight": self.inflight,
                    "base_rtt": cur[1],
                    "avg_delay": cur[2],
                }
            )
