"""The congestion-control seam (uet.cc.base, uet.cc.registry; issue 30 item 1): algorithms by
name, ``cc_params`` typed once, and the PDS talking to CC only through ``SenderCc``."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from uet.cc import Ccc, CcConfig, CreditSender, Nscc
from uet.cc.base import CcAlgorithm
from uet.cc.registry import algorithm_names, build, check_names, register, split_names
from uet.pds import PdsConfig, PdsCore

PDS = Path(__file__).resolve().parent.parent / "uet" / "pds"


def test_names_split_on_plus_in_order_and_bad_ones_are_refused() -> None:
    assert split_names("none") == [] and split_names("nscc+rccc") == ["nscc", "rccc"]
    assert {"nscc", "rccc"} <= set(algorithm_names())
    for bad, msg in (("bbr", "unknown cc 'bbr'"), ("nscc+nscc", "twice"), ("nscc+", "unknown cc ''")):
        with pytest.raises(ValueError, match=msg):
            check_names(bad, "default")
    with pytest.raises(ValueError, match="unknown lb"):
        check_names("nscc", "ecmp")
    with pytest.raises(ValueError, match="invalid algorithm name"):
        register("a+b", Nscc)


def test_a_registered_algorithm_is_composed_in_order_with_the_others() -> None:
    class Hold(CcAlgorithm):
        """Refuses everything: the CCC's AND must hold the sender back."""

        name = "hold"

        def can_send(self, size: int, now: int) -> bool:
            return False

    register("test-hold", Hold)
    try:
        setup = build("nscc+test-hold", "default", CcConfig(), 1024, random.Random(1))
        g = setup.gate_factory("x", 3)
        assert [type(a) for a in g.algorithms] == [Nscc, Hold] and g.ccc_id == 3
        assert not g.can_send(1000, 0) and setup.receiver is None
        rx = build("rccc", "default", None, 1024, random.Random(1))
        assert rx.receiver is not None and rx.params == CcConfig()
        assert isinstance(rx.gate_factory("x", 0).get(CreditSender), CreditSender)
    finally:
        from uet.cc import registry

        del registry._ALGORITHMS["test-hold"]


def test_no_algorithm_is_the_packet_window_and_signals_reach_every_algorithm() -> None:
    cfg = CcConfig(base_rtt_probe=False)
    g = Ccc(cfg, [], lb="reps", rng=random.Random(1), window=2)
    g.on_send(100, False, 0)
    g.on_send(100, False, 0)
    assert not g.can_send(100, 0) and g.entropy is not None
    g.on_ack(1, 100, None, 0, None, 0, False, 1)
    assert g.can_send(100, 1)
    n, c = Nscc(cfg), CreditSender(cfg)
    both = Ccc(cfg, [n, c], lb="default", rng=random.Random(1))
    both.on_send(1000, False, 0)
    assert n.inflight == 1000 + both.overhead and c.credit == cfg.max_wnd - 1000 - both.overhead
    both.on_ack(1, 1000, None, 1000, 20_000, 0, False, 30_000)  # ECN-marked: NSCC cuts, RCCC stops speculating
    assert n.inflight == 0 and not c.speculating and both.counters["ecn_acks"] == 1


def test_cc_params_table_is_typed_once_in_the_config() -> None:
    pc = PdsConfig(cc="nscc", cc_params={"mtu": 8192})  # type: ignore[arg-type]  # a scenario table
    assert pc.cc_params == CcConfig(mtu=8192)
    core = PdsCore("10.0.0.1", pc)
    assert core.cc_params == CcConfig(mtu=8192)
    with pytest.raises(ValueError, match="unknown key 'mtuu'"):
        PdsConfig(cc="nscc", cc_params={"mtuu": 1})  # type: ignore[arg-type]


def test_the_pds_reaches_cc_only_through_the_declared_protocol() -> None:
    """No probing of undeclared gate attributes and no reach into a CCC's algorithms."""
    bad = re.compile(r"cc_signals|getattr\([^)]*gate|gate\.(credit|nscc|overhead|algorithms)\b|hasattr\(")
    hits = [
        f"{p.name}:{i}"
        for p in PDS.glob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if bad.search(line)
    ]
    assert hits == []
