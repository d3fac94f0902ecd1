"""RCCC credit paced at the rate of the path a sender's data arrives on (issue 26): a GPU's
receiver paces the credit of a GPU of its own server, whose data comes over the scale-up links,
at the scale-up rate, and that of a GPU behind the fabric at its NIC's rate (uet.cc.rccc_paths).

The core tests feed one receiving PDS core exact packets at exact times and read the CREDIT
control packets it sends; the simulator test runs a 4-GPU all-reduce inside one server."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from pds_harness import control, hdr, request

from uet.cc import CcConfig, CreditScheduler
from uet.cc.rccc_paths import PathPacers
from uet.pds import PathWindow, PdsConfig, PdsCore
from uet.wire import pds as w

ME, NEAR, FAR = "10.0.0.1", "10.0.0.2", "10.0.1.1"  # the receiver; a GPU of its server; one behind the fabric
NIC = CcConfig(link_bps=100e9, base_rtt_ns=12_000)
SCALE_UP = CcConfig(link_bps=3.6e12, base_rtt_ns=1_000)
GRANT = 4 * 4096  # bytes per grant (grant_mtus × MTU)
#: the pacing interval of a grant on each path (§4.5: grant bytes × 8 / (link rate × 0.99))
STEP_NIC = int(GRANT / (100e9 * 0.99 / 8e9))  # 1,323 ns
STEP_SCALE_UP = int(GRANT / (3.6e12 * 0.99 / 8e9))  # 36 ns
TARGET = 10 * GRANT // 256  # a cumulative target of ten grants (256-byte quanta)


def _receiver(path: PathWindow | None) -> PdsCore:
    return PdsCore(ME, PdsConfig(cc="rccc", cc_params=NIC, start_psn=1000), path_window={NEAR: path}.get)


def _grants(core: PdsCore, until: int) -> dict[str, list[tuple[int, int]]]:
    """Open a PDC from NEAR and from FAR at t = 0 (a SYN with AR each), let both ask for TARGET in
    a CREDIT_REQ at t = 1,000 ns, run the core's timers until ``until``: the CREDITs to each, as
    (time, cumulative grant)."""
    lpdcid = {}
    for spdcid, peer in enumerate((NEAR, FAR), start=5):
        core.receive_datagram(request(1000, spdcid, syn_offset=0, flags=0x08), 0, source=peer)
        (ack,) = core.datagrams_to_send(0)
        lpdcid[peer] = (spdcid, hdr(ack[0]).spdcid)
    for peer, (spdcid, lp) in lpdcid.items():
        core.receive_datagram(control(int(w.ControlType.CREDIT_REQ), 0, spdcid, lp, payload=TARGET), 1000, source=peer)
    got: dict[str, list[tuple[int, int]]] = {NEAR: [], FAR: []}
    now = 1000
    while now <= until:
        core.handle_timer(now)
        for data, dest, _ent in core.datagrams_to_send(now):
            h = hdr(data)
            assert h.ctl_type == w.ControlType.CREDIT
            got[dest].append((now, h.payload))
        t = core.get_timer()
        if t is None:
            break
        now = max(t, now + 1)
    return got


def test_credit_to_a_gpu_of_the_same_server_is_paced_at_the_scale_up_rate() -> None:
    """NEAR's ten grants leave 36 ns apart (3.6 Tb/s), FAR's 1,323 ns apart (100 Gb/s), each
    pacer on its own: a fabric sender's grants never wait for a server neighbour's, nor the
    reverse. With one pacer at the NIC's rate (before), the two shared it: NEAR's grants left
    2 × 1,323 ns apart and its last at 24.8 µs."""
    got = _grants(_receiver(PathWindow(128, SCALE_UP)), 20_000)
    cumulative = [64 * (i + 1) for i in range(10)]
    assert got[NEAR] == [(1000 + i * STEP_SCALE_UP, g) for i, g in enumerate(cumulative)]
    assert got[FAR] == [(1000 + i * STEP_NIC, g) for i, g in enumerate(cumulative)]


def test_without_a_path_every_sender_shares_the_nics_pacer() -> None:
    """A peer whose path names no CC parameters (PathWindow without ``cc_params``) is paced with
    the FEP's own pacer: the two senders alternate at the NIC's rate, as before."""
    got = _grants(_receiver(PathWindow(128)), 30_000)
    times = sorted(t for peer in (NEAR, FAR) for t, _g in got[peer])
    assert len(times) == 20 and times == [1000 + i * STEP_NIC for i in range(20)]


def test_path_pacers_route_each_sender_to_its_paths_pacer() -> None:
    """One pacer per distinct path (built once), the FEP's own for the others; ``forget`` and a
    later target go to the same pacer; deadline/poll span every pacer."""
    built: list[CcConfig] = []

    def build(p: CcConfig) -> CreditScheduler:
        built.append(p)
        return CreditScheduler(p)

    own = CreditScheduler(NIC)
    pp = PathPacers(own, {NEAR: SCALE_UP, "10.0.0.3": SCALE_UP}.get, build)
    assert pp.pacer((FAR, 0)) is own and pp.pacer((NEAR, 0)) is pp.pacer(("10.0.0.3", 0)) is not own
    assert built == [SCALE_UP] and pp.deadline() is None
    pp.note_target((NEAR, 0), 128, 500)
    pp.note_target((FAR, 0), 128, 700)
    assert pp.deadline() == 500
    assert pp.poll(500) == [((NEAR, 0), None, 64)]
    assert pp.deadline() == 500 + STEP_SCALE_UP
    assert pp.poll(700) == [((FAR, 0), None, 64), ((NEAR, 0), None, 128)]
    pp.forget((NEAR, 0))
    assert (NEAR, 0) not in pp.pacer(("10.0.0.3", 0)).peers  # type: ignore[attr-defined]
    # a path without a pacer of its own (its build gives None) shares the FEP's
    assert PathPacers(own, {NEAR: SCALE_UP}.get, lambda p: None).pacer((NEAR, 0)) is own


def _drain(cs: CreditScheduler, until: int) -> list[tuple[int, object, int]]:
    """Every grant the pacer gives up to ``until``: (time, key, cumulative grant)."""
    out = []
    while (t := cs.deadline()) is not None and t <= until:
        out += [(t, key, g) for key, _route, g in cs.poll(t)]
    return out


def test_an_idle_sender_banks_one_maxwnd_of_credit() -> None:
    """``idle_credit``: a sender whose target is met keeps getting grants, at the pacer's rate,
    until it holds one MaxWnd (675,000 bytes at 3.6 Tb/s × 1 µs × 1.5) it has not used; data
    from it (spending that credit) brings more; a sender with demand goes first. Off (the
    default): the pacer stops once the target is met."""
    a, b = (NEAR, 0), (FAR, 0)
    off = CreditScheduler(SCALE_UP)
    off.note_target(a, 64, 0, "pdc")
    assert _drain(off, 10**6) == [(0, a, 64)] and off.deadline() is None

    cfg = CcConfig(link_bps=3.6e12, base_rtt_ns=1_000, idle_credit=True)
    cs = CreditScheduler(cfg)
    cs.note_target(a, 64, 0, "pdc")
    got = _drain(cs, 10**6)
    assert [t for t, _k, _g in got] == [i * STEP_SCALE_UP for i in range(len(got))]
    full, rest = divmod(int(cfg.max_wnd), GRANT)  # 41 whole grants and 12 quanta more
    assert len(got) == full + 1 and got[-1][2] == full * 64 + rest // 256 and cs.deadline() is None
    # 100,000 bytes of its data arrive (no new target): the pacer tops its credit up again
    cs.note_target(a, 64, 2_000_000, "pdc", rx=100_000)
    more = _drain(cs, 3_000_000)
    assert more[0][0] == 2_000_000 and (more[-1][2] - got[-1][2]) * 256 == pytest.approx(100_000, abs=256)
    # an idle sender waits while one with demand is served; then both idle, in turn
    cs.note_target(a, more[-1][2] - 64, 4_000_000, "pdc", rx=50 * GRANT)  # it spent 50 grants' worth
    cs.note_target(b, 3 * 64, 4_000_000, "pdc")
    order = [k for _t, k, _g in _drain(cs, 4_000_000 + 5 * STEP_SCALE_UP)]
    assert order == [b, b, b, a, b, a]


@functools.cache
def _allreduce(cc: str) -> float:
    from uet.sim.scenario import simulate

    topo = {"kind": "rail", "rails": 4, "groups": 1, "hosts_per_leaf": 2, "spines": 2}
    run: dict[str, Any] = {"workload": "collective", "endpoints": 4, "placement": "server"}
    run.update(message_bytes=1 << 20, transport="uet", workload_params={"check": False})
    res = simulate(run, topo, {"pds": {"cc": cc, "lb": "reps"}})
    assert res["ok"], res["errors"]
    return float(res["collective"]["rows"][0]["time_us"])


_RAIL = {"kind": "rail", "rails": 4, "groups": 1, "hosts_per_leaf": 2, "spines": 2}
_LOSSLESS = {"switch": {"tcs": {"0": {"lossless": True, "limit": None}}}}


def test_the_scale_up_path_grants_idle_senders_credit() -> None:
    """The derivation turns ``idle_credit`` on for the scale-up path (and records it); on the NIC
    path only where the rail fabric trims (the AI fabrics' CC, uet.scenario.derive)."""
    from uet.scenario import Scenario, derive

    run = {"workload": "collective", "endpoints": 4, "rate_bps": 100_000_000_000}
    s = derive(Scenario("sim", run, {**_RAIL, **_LOSSLESS}, {"pds": {"cc": "rccc"}}))
    assert s.scale_up is not None and s.scale_up.cc_params is not None and s.scale_up.cc_params.idle_credit
    assert s.record()["scale_up"]["cc_params"]["idle_credit"] is True
    assert "idle_credit" not in s.endpoint["pds"]["cc_params"]
    assert derive(Scenario("sim", run, _RAIL, {"pds": {"cc": "rccc"}})).endpoint["pds"]["cc_params"]["idle_credit"]


@pytest.mark.parametrize(
    ("topo", "endpoint", "cc"),
    [
        (_RAIL, {}, "rccc"),  # a rail AI fabric that trims: RCCC with idle credit
        ({**_RAIL, **_LOSSLESS}, {}, None),  # lossless data class: nothing trims, the fixed window
        ({"kind": "leaf_spine"}, {}, None),  # not a rail fabric
        (_RAIL, {"pds": {"cc": "none"}}, "none"),  # the user's choice wins
        (_RAIL, {"pds": {"cc": "nscc"}}, "nscc"),
    ],
)
def test_the_rail_ai_fabrics_derive_rccc_with_idle_credit(
    topo: dict[str, Any], endpoint: dict[str, Any], cc: str | None
) -> None:
    """uet.scenario.derive, "congestion control of the rail AI fabrics": RCCC with idle credit on
    the NIC path is the derived CC of a trimming rail fabric, a default (not a tuned key)."""
    from uet.scenario import Scenario, derive

    run = {"workload": "collective", "endpoints": 4, "rate_bps": 100_000_000_000}
    s = derive(Scenario("sim", run, topo, endpoint))
    assert s.endpoint["pds"].get("cc") == cc
    params = s.endpoint["pds"].get("cc_params") or {}
    assert params.get("idle_credit", False) is (cc == "rccc")
    assert s.tuned == (["pds.cc"] if endpoint else [])
    again = derive(Scenario("sim", run, topo, s.endpoint))  # a table derived once holds defaults only
    assert again.endpoint == s.endpoint and again.tuned == s.tuned


@pytest.mark.parametrize("cc", ["rccc", "nscc+rccc"])
def test_rccc_inside_a_server_is_as_fast_as_nscc(cc: str) -> None:
    """A 4-GPU 1 MiB ring all-reduce inside one server (every hop on the scale-up links) takes as
    long with RCCC as with NSCC (5.98 µs against 5.92). With the credit paced at the NIC's 100 Gb/s
    it took 99.8 µs; paced at the scale-up rate but granted only on demand, 11.7 µs: each slice of
    the ring waited one round trip for its target to reach the receiver and its credit to come
    back (``idle_credit``)."""
    took, nscc = _allreduce(cc), _allreduce("nscc")
    assert took <= 1.05 * nscc, (took, nscc)
