"""A window per path (issue 26): UET's PDCs towards a GPU of the same server follow the scale-up
path's rate and RTT, not the NIC path's the endpoint's configuration was derived from.

The core test feeds one FEP core two large sends and counts what leaves before any ACK; the
scenario tests check the derivation and the 4-GPU all-reduce inside a server against RoCEv2."""

from __future__ import annotations

from typing import Any

import pytest

from uet.cc import CcConfig
from uet.fep import FepConfig, FepCore
from uet.fep.config import with_config
from uet.pds import PathWindow
from uet.scenario import Scenario
from uet.wire.chain import parse_uet

NEAR, FAR = "10.0.0.2", "10.0.1.1"  # a GPU of the same server; a GPU behind the fabric
#: the NIC path the endpoint is configured for: 100 Gb/s, 12 µs (MaxWnd 225 kB ≈ 53 packets)
NIC = CcConfig(link_bps=100e9, base_rtt_ns=12_000)
#: the scale-up path: 3.6 Tb/s, 1 µs (MaxWnd 675 kB: the PDC's 128 packets cap it)
SCALE_UP = CcConfig(link_bps=3.6e12, base_rtt_ns=1_000)


def _first_flight(cfg: FepConfig, path: PathWindow | None) -> dict[str, int]:
    """Data packets a core sends to each peer at t = 0, before any ACK, when it sends 1 MiB to
    both and its window towards NEAR is ``path``."""
    core = FepCore("10.0.0.1", job=1, pid=1, config=cfg, seed=1, path_window={NEAR: path}.get)
    for peer in (NEAR, FAR):
        core.send(peer, bytes(1 << 20))
    sent = {NEAR: 0, FAR: 0}
    for t in core.datagrams_to_send(0):
        if parse_uet(t.data).ses is not None:
            sent[t.destination] += 1
    return sent


def test_the_lane_takes_the_paths_window() -> None:
    """``max_inflight`` 4 for the endpoint, 16 on the path to NEAR: 16 packets leave towards NEAR
    and 4 towards FAR. Without the path's window both got 4."""
    cfg = FepConfig(max_inflight=4)
    assert _first_flight(cfg, PathWindow(16)) == {NEAR: 16, FAR: 4}
    assert _first_flight(cfg, None) == {NEAR: 4, FAR: 4}


def test_the_ccc_takes_the_paths_cc_parameters() -> None:
    """With NSCC, a CCC towards NEAR starts at the scale-up path's MaxWnd (capped by the PDC's
    128-packet window), one towards FAR at the NIC path's; without the path's parameters NEAR got
    FAR's window too (and NSCC, once it measured the 1 µs RTT, cut it to 1.5 × 100 Gb/s × 1 µs)."""
    cfg = with_config(FepConfig(max_inflight=1024), cc="nscc", cc_params=NIC)
    nic = _first_flight(cfg, None)
    assert nic[NEAR] == nic[FAR] and 40 < nic[FAR] < 64
    got = _first_flight(cfg, PathWindow(1024, SCALE_UP))
    assert got == {NEAR: cfg.pds.max_outstanding, FAR: nic[FAR]}


def test_a_path_window_is_at_least_one_packet() -> None:
    with pytest.raises(ValueError, match="max_inflight"):
        PathWindow(0)


def _scenario(kind: str, endpoint: dict[str, Any]) -> Scenario:
    run: dict[str, Any] = {"workload": "collective", "endpoints": 4, "rate_bps": 100_000_000_000}
    topo = {"kind": kind, "rails": 4, "groups": 1, "hosts_per_leaf": 2, "spines": 2} if kind == "rail" else {}
    return Scenario("sim", run, topo, endpoint)


def test_the_derivation_gives_the_scale_up_path_its_own_window() -> None:
    """On a rail fabric with scale-up: the scale-up path's RTT (two 3.6 Tb/s links of 250 ns),
    its BDP window and NSCC parameters; what the user tuned (``max_inflight``) wins there too, the
    NIC path's derived defaults do not leak in. Without a scale-up domain: none, and the record
    is as before (no ``scale_up`` key)."""
    from uet.scenario import derive
    from uet.scenario.derive import Physics, bdp_window

    nscc = {"pds": {"cc": "nscc"}}
    s = derive(_scenario("rail", nscc))
    su = s.scale_up
    assert su is not None and su.cc_params is not None
    path = Physics.scale_up(_scenario("rail", nscc).fabric_topology())
    assert path is not None and path.links == 2 and path.rate_bps == 3_600_000_000_000
    assert s.scale_up_rtt_ns == round(path.path_rtt_ns(4096 + 146)) and 1000 < s.scale_up_rtt_ns < 1100
    assert su.cc_params.link_bps == 3.6e12 and su.cc_params.base_rtt_ns == s.scale_up_rtt_ns
    assert su.max_inflight == bdp_window(path, 4096, s.scale_up_rtt_ns, 32768) > s.endpoint["max_inflight"]
    assert s.record()["scale_up"]["cc_params"]["link_bps"] == 3_600_000_000_000
    # the derivation run again on its own table (as the tools do) gives the same path window
    again = derive(_scenario("rail", s.endpoint))
    assert again.scale_up == su
    tuned = derive(_scenario("rail", {**nscc, "max_inflight": 1024}))
    assert tuned.scale_up is not None and tuned.scale_up.max_inflight == 1024
    plain = derive(_scenario("leaf_spine", nscc))
    assert plain.scale_up is None and "scale_up" not in plain.record()


def test_uet_with_nscc_inside_a_server_keeps_up_with_roce() -> None:
    """A 4-GPU ring all-reduce inside one server (every hop on the scale-up links), UET with NSCC
    as a UET NIC runs it: as fast as RoCEv2 (whose QPs are paced at the scale-up rate). With NSCC
    configured for the 100 Gb/s NIC path it took 15 times as long (89 µs against 5.8 µs at 1 MiB):
    seeing the 1 µs RTT, NSCC re-derived MaxWnd as 1.5 × 100 Gb/s × 1 µs, about 4 packets."""
    from uet.sim.scenario import simulate

    topo = {"kind": "rail", "rails": 4, "groups": 1, "hosts_per_leaf": 2, "spines": 2}
    run = {"workload": "collective", "endpoints": 4, "placement": "server", "message_bytes": 256 * 1024}
    run["workload_params"] = {"check": False}
    took = {}
    for transport, endpoint in (("uet", {"pds": {"cc": "nscc", "lb": "reps"}}), ("roce", {})):
        res = simulate({**run, "transport": transport}, topo, endpoint)
        assert res["ok"], res["errors"]
        took[transport] = res["collective"]["rows"][0]["time_us"]
    assert took["uet"] == pytest.approx(took["roce"], rel=0.05), took
