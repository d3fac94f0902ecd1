"""The DCTCP-style window (uet.cc.dctcp): its rules on exact signals, and ``pds.cc = "dctcp"``
end to end in uet-sim (the third algorithm of issue 30 item 1: one file, one registration line)."""

from __future__ import annotations

import random

import pytest

from uet.cc import Ccc, CcConfig
from uet.cc.dctcp import GAIN, Dctcp
from uet.cc.registry import build

CFG = CcConfig(base_rtt_probe=False)
MTU = CFG.mtu


def test_the_registry_builds_it_by_name_and_composes_it_with_rccc() -> None:
    setup = build("dctcp", "default", CFG, 1024, random.Random(1))
    g = setup.gate_factory("10.0.0.2", 0)
    assert isinstance(g.get(Dctcp), Dctcp) and setup.receiver is None and not g.cc_request
    both = build("dctcp+rccc", "default", CFG, 1024, random.Random(1))
    g2 = both.gate_factory("10.0.0.2", 0)
    d = g2.get(Dctcp)
    assert d is not None and g2.cc_request and both.receiver is not None
    d.cwnd = 3 * MTU  # the credit target is capped by DCTCP's window plus one MTU (§4.5)
    assert g2.on_grant(0, 0)  # (a grant ends the speculative credit)
    g2.set_backlog(1, 100, MTU)
    assert g2.credit_target() == -(-(4 * MTU) // 256)


def test_unmarked_windows_grow_one_mtu_per_window_and_alpha_decays() -> None:
    d = Dctcp(CFG)
    d.cwnd = d.window_end = 10 * MTU
    for _ in range(10):
        d.on_send(MTU, 0)
    for _ in range(10):
        d.on_ack_bytes(MTU, 0, 1)
    assert d.inflight == 0
    assert d.cwnd == pytest.approx(11 * MTU, rel=0.01)  # +MTU²/cwnd per MTU acknowledged
    assert d.alpha == pytest.approx(1 - GAIN) and d.reductions == 0


def test_marks_cut_the_window_by_half_alpha_once_per_window() -> None:
    d = Dctcp(CFG)
    d.cwnd = d.window_end = 8 * MTU
    d.alpha = 0.5
    d.on_ack_bytes(MTU, MTU, 1)  # a marked packet: cwnd × (1 − α/2)
    assert d.cwnd == pytest.approx(8 * MTU * 0.75) and d.reductions == 1
    d.on_ack_bytes(MTU, MTU, 2)  # the same window: no second cut, and no growth
    assert d.cwnd == pytest.approx(6 * MTU) and d.reductions == 1
    for _ in range(6):  # the window completes: α moves toward the marked fraction 2/8
        d.on_ack_bytes(MTU, 0, 3)
    assert d.alpha == pytest.approx((1 - GAIN) * 0.5 + GAIN * 2 / 8)
    d.on_ack_bytes(MTU, MTU, 4)  # a new window: cut again with the new α
    assert d.reductions == 2 and d.cwnd == pytest.approx(6 * MTU * (1 - d.alpha / 2))


def test_trims_count_as_marks_and_losses_halve_within_bounds() -> None:
    d = Dctcp(CFG)
    d.alpha = 1.0
    d.on_send(MTU, 0)
    d.on_nack(MTU, None, True, False, False, 1)  # trimmed: out of flight, a marked window
    assert d.inflight == 0 and d.cwnd == pytest.approx(CFG.max_wnd / 2) and d.marked == MTU
    e = Dctcp(CFG)
    e.cwnd = 1.5 * MTU
    e.on_send(MTU, 0)
    e.on_inferred_loss(MTU, 1)
    assert e.inflight == 0 and e.cwnd == MTU  # never below min_cwnd (one MTU)


def test_the_window_gates_the_ccc() -> None:
    d = Dctcp(CFG)
    g = Ccc(CFG, [d], lb="default", rng=random.Random(1))
    d.cwnd = 2 * MTU
    size = MTU - g.overhead
    assert g.can_send(size, 0)
    g.on_send(size, False, 0)
    assert g.can_send(size, 0) and g.ack_request(size)  # the window's last packet asks for its ACK
    g.on_send(size, False, 0)
    assert not g.can_send(size, 0)
    g.on_ack(1, size, None, 0, None, 0, False, 5)  # a plain ACK: its nominal size left flight
    assert g.can_send(size, 5) and d.inflight == MTU


def test_uet_sim_runs_pds_cc_dctcp() -> None:
    """``pds.cc = "dctcp"`` in a uet-sim incast: every flow completes and the windows react."""
    from uet.sim.scenario import simulate

    ep = {"payload_size": 4096, "ecn_capable": True, "pds": {"cc": "dctcp"}}
    res = simulate(
        {"workload": "incast", "endpoints": 5, "message_bytes": 64 * 1024, "messages": 1}, None, ep, timeline=True
    )
    assert res["ok"] and res["cc"] == "dctcp" and res["fct"]["flows"] == 4
    recs = [r for r in res["cc_timeline"] if r.get("algo") == "dctcp"]
    assert {r["host"] for r in recs} == {1, 2, 3, 4}  # each sender cut its window
    assert max(r["cwnd"] for r in recs) < CFG.max_wnd
