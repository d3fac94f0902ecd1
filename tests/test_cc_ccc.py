"""The CCC gate (uet.cc.ccc): what it tells every algorithm it composes, in nominal bytes, and how it
answers the PDS — the algorithm-less packet window (``cc = "none"`` with a load balancer), every
ACK ECN-marked, ``ack_request``, ``on_done``, credit targets and deadlines. An algorithm here is a
registered kind like any other (uet.cc.base.CcAlgorithm) that writes down the signals it gets."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, ses_small

from uet.cc import Ccc, CcConfig, CreditSender, Nscc
from uet.cc.base import CcAlgorithm, ResendPolicy
from uet.cc.ccc import OVERHEAD_CC_REQ, OVERHEAD_REQ
from uet.cc.entropy import SELECTORS
from uet.pds import Mode, PdsConfig

CFG = CcConfig(base_rtt_probe=False)


class Recorder(CcAlgorithm):
    """Answers as told and records every signal (name, arguments) in order."""

    name = "recorder"

    def __init__(
        self,
        *,
        allow: bool = True,
        credit_based: bool = False,
        window: float | None = None,
        ar: bool = False,
        deadline: int | None = None,
        target: int = 0,
        due: bool = False,
        probe: bool = False,
    ) -> None:
        super().__init__(CFG)
        self.allow, self.credit_based, self._window, self.ar = allow, credit_based, window, ar
        self._deadline, self.target, self.due, self.base_rtt_probe = deadline, target, due, probe
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def _rec(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))

    def can_send(self, size: int, now: int) -> bool:
        self._rec("can_send", size, now)
        return self.allow

    def on_send(self, size: int, now: int) -> None:
        self._rec("on_send", size, now)

    def ack_request(self, size: int = 0) -> bool:
        self._rec("ack_request", size)
        return self.ar

    def deadline(self, now: int) -> int | None:
        return self._deadline

    def window(self) -> float | None:
        return self._window

    def on_ack(
        self, newly_rcvd: int, ecn: bool, rtt: int | None, now: int, pend: int = 0, restore: bool = False
    ) -> None:
        self._rec("on_ack", newly_rcvd, ecn, rtt, now, pend, restore)

    def on_ack_bytes(self, newly_rcvd: int, ecn_bytes: int, now: int) -> None:
        self._rec("on_ack_bytes", newly_rcvd, ecn_bytes, now)

    def on_nack(self, size: int, rtt: int | None, trimmed: bool, lasthop: bool, credit: bool, now: int) -> None:
        self._rec("on_nack", size, rtt, trimmed, lasthop, credit, now)

    def on_inferred_loss(self, size: int, now: int) -> None:
        self._rec("on_inferred_loss", size, now)

    def on_abandon(self, size: int) -> None:
        self._rec("on_abandon", size)

    def set_backlog(self, nbytes: int) -> None:
        self._rec("set_backlog", nbytes)

    def credit_target(self, cwnd: float | None) -> int:
        self._rec("credit_target", cwnd)
        return self.target

    def credit_request_due(self, now: int) -> bool:
        return self.due

    def on_request_sent(self, now: int) -> None:
        self._rec("on_request_sent", now)

    def on_grant(self, grant: int, now: int) -> None:
        self._rec("on_grant", grant, now)

    def snapshot(self) -> dict[str, Any]:
        return {"recorded": len(self.calls)}

    def take(self) -> list[tuple[str, tuple[Any, ...]]]:
        out, self.calls = self.calls, []
        return out


def ccc(*algos: CcAlgorithm, window: int = 1024, lb: str = "default", cfg: CcConfig = CFG) -> Ccc:
    return Ccc(cfg, list(algos), lb=lb, rng=random.Random(1), window=window, ccc_id=0x1FF)


# -- no algorithm: the packet window ----------------------------------------------------------------------


def test_without_algorithms_the_gate_is_a_window_of_first_transmissions_in_packets() -> None:
    g = ccc(window=3)
    assert g.algorithms == [] and not g.cc_request and g.overhead == OVERHEAD_REQ and g.ccc_id == 0xFF
    for k in range(3):
        assert g.can_send(10**6, 0), k  # the size does not matter, only the count
        g.on_send(100, False, 0)
    assert not g.can_send(1, 0) and g.inflight_pkts == 3
    g.on_send(100, True, 0)  # a resend is not a new packet in flight
    assert g.inflight_pkts == 3
    g.on_ack(2, 200, None, 0, None, 0, False, 5)
    assert g.inflight_pkts == 1 and g.can_send(1, 5)
    g.on_done(1, 100)  # its PDC failed: it left flight unanswered
    assert g.inflight_pkts == 0
    assert not g.ack_request(100) and g.deadline(0) is None and g.credit_target() == 0
    assert not g.on_grant(5, 0) and not g.may_open(100, 0) and not g.credit_request_due(0)
    assert g.quota(0) == -1 and g.entropy is None and not g.take_probe()
    with pytest.raises(NotImplementedError):
        g.on_send_many(2, 200, 0)


@pytest.mark.parametrize("lb", sorted(SELECTORS))
def test_without_algorithms_a_load_balancer_still_gets_a_shared_selector(lb: str) -> None:
    g = ccc(lb=lb)
    assert g.entropy is not None and type(g.entropy) is type(SELECTORS[lb](random.Random(1), CFG))


def test_cc_none_with_a_load_balancer_keeps_the_packet_window_on_the_wire() -> None:
    """``cc = "none"`` and ``lb = "reps"``: the PDS builds an algorithm-less CCC for the shared path
    selector, and that CCC keeps the ``cc_window`` packet window: of 10 packets 4 go, then one more
    per packet acknowledged."""
    pair = Pair(PdsConfig(cc="none", lb="reps", cc_window=4))
    for i in range(10):
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), bytes([i]) * 64, token=i, som=True, eom=True, now=0)
    out = pair.take(pair.a)
    assert len(out) == 4
    ((gate, _pdcs),) = pair.a.core.gates.values()
    assert isinstance(gate, Ccc) and gate.algorithms == [] and gate.inflight_pkts == 4
    assert gate.resend is ResendPolicy.ACK_CLOCKED
    pair.inject(pair.b, out[0][0], A_ADDR)
    for d, _x, _e in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert gate.inflight_pkts == 3 and len(pair.take(pair.a)) == 1  # one ACK, one more packet


@pytest.mark.parametrize("seed", [1, 3])
def test_cc_none_with_a_load_balancer_recovers_a_window_of_lost_packets(seed: int) -> None:
    """Regression: the algorithm-less CCC made its resends wait for its packet window, which
    counts first transmissions and so never fell while they were lost: the PDC stalled (its RTOs
    waiting for ever, then closed by the target in error, the next PDC never sent). It resends
    as the fixed window does, and completes exactly when the ``lb = "default"`` run does."""
    done = {}
    for lb in ("default", "reps"):
        pair = Pair(PdsConfig(cc="none", lb=lb, cc_window=4), seed=seed, loss=0.3)
        for i in range(10):
            pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), bytes([i]) * 64, token=i, som=True, eom=True,
                               now=0)  # fmt: skip
        assert pair.run_until(lambda: len(pair.a.acked()) == 10), (lb, pair.a.core.counters)  # noqa: B023
        assert sorted(d.payload[0] for d in pair.b.deliveries) == list(range(10)) and not pair.a.failed()
        done[lb] = pair.now
    assert done["reps"] == done["default"]


# -- sizes and signals reach every algorithm ------------------------------------------------------------


def test_sends_reach_every_algorithm_in_nominal_bytes_and_all_must_allow() -> None:
    a, b = Recorder(), Recorder(allow=False)
    g = ccc(a, b)
    assert g.overhead == OVERHEAD_REQ == 60
    assert not g.can_send(1000, 7)  # the AND of every algorithm
    assert a.take() == [("can_send", (1060, 7))]
    b.allow = True
    assert g.can_send(1000, 8)
    g.on_send(1000, False, 9)
    g.on_send(1000, True, 10)  # a resend spends window like new data (§4.1)
    assert a.take()[1:] == [("on_send", (1060, 9)), ("on_send", (1060, 10))]
    assert b.take()[-2:] == [("on_send", (1060, 9)), ("on_send", (1060, 10))]
    assert g.inflight_pkts == 1


def test_every_ack_ecn_marked_tells_every_algorithm_so() -> None:
    r = Recorder()
    g = ccc(r)
    for k in range(3):
        g.on_ack(2, 2000, None, 500, 9_000, 0, False, 100 + k)
    assert g.counters["acks"] == 3 and g.counters["ecn_acks"] == 3
    assert g.counters["ecn_bytes"] == 3 * (500 + OVERHEAD_REQ)
    want = [("on_ack", (2000 + 2 * OVERHEAD_REQ, True, 9_000, 100 + k, 0, False)) for k in range(3)]
    calls = r.take()
    assert [c for c in calls if c[0] == "on_ack"] == want
    assert [c for c in calls if c[0] == "on_ack_bytes"] == [
        ("on_ack_bytes", (2000 + 2 * OVERHEAD_REQ, 500, 100 + k)) for k in range(3)
    ]
    g.on_ack(1, 1000, 4096, 0, None, 3, True, 200)  # unmarked; ACK_CC's newly received bytes
    assert r.take() == [("on_ack", (4096, False, None, 200, 3, True)), ("on_ack_bytes", (4096, 0, 200))]
    assert g.counters["ecn_acks"] == 3 and g.counters["acks"] == 4


def test_nscc_told_every_ack_was_marked_shrinks_its_window_where_clean_acks_do_not() -> None:
    cfg = CcConfig(base_rtt_probe=False)
    windows = {}
    for marked in (False, True):
        n = Nscc(cfg)
        g = ccc(n, cfg=cfg)
        now = 0
        for _ in range(40):
            for _ in range(4):
                g.on_send(4000, False, now)
            now += 2 * cfg.base_rtt_ns
            for _ in range(4):
                g.on_ack(1, 4000, None, 4000 if marked else 0, cfg.base_rtt_ns + 20_000, 0, False, now)
        windows[marked] = n.cwnd
        assert n.inflight == 0 and g.inflight_pkts == 0
    assert windows[True] < windows[False] / 2, windows


def test_nacks_losses_discards_and_failed_packets_reach_every_algorithm() -> None:
    r = Recorder()
    g = ccc(r)
    g.on_nack(3, True, 5)  # a NACK not yet tied to a packet: nothing happens
    assert r.take() == [] and g.counters["nacks"] == 0
    g.on_nack_packet(1000, True, 7_000, False, False, 6)
    g.on_nack_packet(1000, False, None, True, True, 7)
    assert r.take() == [
        ("on_nack", (1060, 7_000, False, False, False, 6)),
        ("on_nack", (1060, None, True, True, False, 7)),
    ]
    assert g.counters["nacks"] == 2 and g.counters["trims"] == 1
    g.on_loss(500, True, 8)
    g.on_loss(500, False, 9)
    g.on_loss(500, False, 10)
    assert r.take() == [("on_inferred_loss", (560, t)) for t in (8, 9, 10)]
    assert g.counters["timeouts"] == 1 and g.counters["losses"] == 2
    g.on_discarded(700)
    assert r.take() == [("on_abandon", (760,))]


def test_on_done_takes_the_packets_out_of_flight_in_every_algorithm() -> None:
    n, r = Nscc(CFG), Recorder()
    g = ccc(n, r)
    for _ in range(3):
        g.on_send(1000, False, 0)
    assert g.inflight_pkts == 3 and n.inflight == 3 * 1060
    r.take()
    g.on_done(2, 2000)
    assert g.inflight_pkts == 1 and n.inflight == 1060
    assert r.take() == [("on_abandon", (2000 + 2 * OVERHEAD_REQ,))]
    g.on_done(1)  # the size unknown: the overhead alone
    assert g.inflight_pkts == 0 and r.take() == [("on_abandon", (OVERHEAD_REQ,))]


def test_ack_request_asks_every_algorithm_with_the_nominal_size() -> None:
    a, b = Recorder(), Recorder()
    g = ccc(a, b)
    assert not g.ack_request(1000)
    assert a.take() == [("ack_request", (1060,))] and b.take() == [("ack_request", (1060,))]
    b.ar = True
    assert g.ack_request(1000)


def test_ack_request_of_rccc_is_set_on_the_packet_that_spends_the_last_credit() -> None:
    c = CreditSender(CFG)
    g = ccc(c)
    assert g.cc_request and g.overhead == OVERHEAD_CC_REQ == 64
    c.credit = 3000
    assert not g.ack_request(3000 - 65)  # 2999 nominal: 1 byte of credit left
    assert g.ack_request(3000 - 64)  # exactly the last of it
    assert g.ack_request(3000)


def test_ack_request_of_nscc_near_a_full_window() -> None:
    n = Nscc(CFG)
    g = ccc(n)
    n.cwnd = 100_000.0
    assert not g.ack_request(1000)
    n.inflight = 100_000 - CFG.mtu - 1060
    assert not g.ack_request(1000)  # exactly an MTU of window left after it
    n.inflight += 1
    assert g.ack_request(1000)


# -- credit ------------------------------------------------------------------------------------------------


def test_credit_target_is_capped_by_the_smallest_window_and_comes_from_the_credit_algorithm() -> None:
    w1, w2, cred = Recorder(window=9000.0), Recorder(window=5000.0), Recorder(credit_based=True, target=777)
    g = ccc(w1, w2, cred)
    assert g.cc_request and g.overhead == OVERHEAD_CC_REQ
    assert g.credit_target() == 777
    assert cred.take() == [("credit_target", (5000.0,))]
    assert ccc(Recorder(), Recorder(credit_based=True, target=5)).credit_target() == 5
    alone = Recorder(credit_based=True, target=9)
    assert ccc(alone).credit_target() == 9 and alone.take() == [("credit_target", (None,))]
    assert ccc(Recorder(window=100.0)).credit_target() == 0  # no credit algorithm: no target


def test_backlogs_are_summed_over_pdcs_for_a_credit_algorithm() -> None:
    cred = Recorder(credit_based=True)
    g = ccc(cred)
    g.set_backlog(1, 2, 1000)
    g.set_backlog(2, 1, 500)
    g.set_backlog(1, 0, 1000)  # PDC 1 drained
    assert g.backlogs == {2: 564}
    assert cred.take() == [("set_backlog", (2 * 1064,)), ("set_backlog", (2 * 1064 + 564,)), ("set_backlog", (564,))]
    g.set_backlog(3, 0, 10)  # nothing queued on an unknown PDC: nothing to forget
    assert g.backlogs == {2: 564}
    w = Recorder()
    h = ccc(w)  # no credit algorithm: backlogs are kept but nobody is told
    h.set_backlog(1, 1, 100)
    assert h.backlogs == {1: 160} and w.take() == []


def test_the_backlog_total_follows_every_change_of_a_pdcs_backlog() -> None:
    """The total told to the credit algorithm is the sum of ``backlogs`` after every report: a
    report of the same backlog, a grown and a shrunk one, a drained PDC and a PDC back again."""
    cred = Recorder(credit_based=True)
    g = ccc(cred)
    for pdcid, n, nb in ((1, 2, 1000), (2, 1, 500), (1, 2, 1000), (2, 4, 500), (1, 1, 200), (2, 0, 0), (2, 3, 10)):
        g.set_backlog(pdcid, n, nb)
        assert cred.take()[-1] == ("set_backlog", (sum(g.backlogs.values()),))
    assert g.backlogs == {1: 264, 2: 3 * 74}


def test_grants_requests_and_may_open() -> None:
    cred, win = Recorder(credit_based=True, allow=False), Recorder(allow=True)
    g = ccc(cred, win)
    assert g.on_grant(4096, 3) and cred.take() == [("on_grant", (4096, 3))] and win.take() == [("on_grant", (4096, 3))]
    assert g.may_open(1000, 0)  # only credit holds it back
    assert win.take() == [("can_send", (1064, 0))]
    win.allow = False
    assert not g.may_open(1000, 0)
    assert not g.credit_request_due(0)
    cred.due = True
    assert g.credit_request_due(0)
    g.on_credit_request(11)
    assert cred.take() == [("on_request_sent", (11,))] and win.take()[-1] == ("on_request_sent", (11,))


def test_the_deadline_is_the_earliest_of_the_algorithms() -> None:
    assert ccc(Recorder(deadline=50), Recorder(deadline=None), Recorder(deadline=20)).deadline(0) == 20
    assert ccc(Recorder(deadline=None), Recorder(deadline=30)).deadline(0) == 30
    assert ccc(Recorder(deadline=30), Recorder(deadline=30)).deadline(0) == 30
    assert ccc(Recorder(deadline=None)).deadline(0) is None


def test_the_probe_is_wanted_once_after_the_first_feedback() -> None:
    cfg = CcConfig(base_rtt_probe=True)
    g = Ccc(cfg, [Recorder(probe=True)], lb="default", rng=random.Random(1))
    assert not g.take_probe()
    g.on_nack_packet(100, False, None, False, False, 0)
    assert g.take_probe() and not g.take_probe()
    g.on_ack(1, 100, None, 0, None, 0, False, 1)
    assert not g.take_probe()  # once per CCC
    h = Ccc(cfg, [Recorder(probe=True)], lb="default", rng=random.Random(1))
    h.on_ack(1, 100, None, 0, None, 0, False, 1)
    h.on_ack(1, 100, None, 0, None, 0, False, 2)
    assert h.take_probe() and not h.take_probe()
    assert not Ccc(cfg, [Recorder()], lb="default", rng=random.Random(1))._probe  # nobody asks
    off = Ccc(CcConfig(base_rtt_probe=False), [Recorder(probe=True)], lb="default", rng=random.Random(1))
    off.on_ack(1, 100, None, 0, None, 0, False, 1)
    assert not off.take_probe()


def test_get_and_snapshot() -> None:
    n, r = Nscc(CFG), Recorder()
    g = ccc(n, r)
    assert g.get(Nscc) is n and g.get(Recorder) is r and g.get(CreditSender) is None
    g.on_send(100, False, 0)
    snap = g.snapshot()
    assert snap["inflight_pkts"] == 1 and snap["acks"] == 0 and snap["recorded"] == 1 and "cwnd" in snap


def test_defaults_the_config_and_a_one_byte_mark() -> None:
    cfg = CcConfig(base_rtt_probe=False)
    g = Ccc(cfg, [], lb="default", rng=random.Random(1))
    assert g.cfg is cfg and g.ccc_id == 0 and g.window == 1024
    for _ in range(1023):
        g.on_send(10, False, 0)
    assert g.can_send(10, 0)
    g.on_send(10, False, 0)
    assert not g.can_send(10, 0)
    assert g.take_probe() is False
    r = Recorder()
    h = ccc(r)
    h.on_ack(1, 100, None, 1, None, 0, False, 3)  # one ECN-marked byte is a marked ACK
    assert r.take()[0] == ("on_ack", (100 + OVERHEAD_REQ, True, None, 3, 0, False))
    assert h.counters["ecn_acks"] == 1 and h.counters["ecn_bytes"] == 1 + OVERHEAD_REQ
