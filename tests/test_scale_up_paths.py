"""The scale-up path on both engines (issue 26): towards a GPU of the same server, UET's PDCs take
the window and CC parameters of the scale-up links, RoCEv2's queue pairs their rate. The
simulator wires them into its cores; the live engine hands them to each endpoint process as data
(:func:`uet.scenario.derive.scale_up_paths`) and the process rebuilds them. Before, the live
engine's endpoints ran every peer at the NIC path's settings, though its fabric process models the
same scale-up links (uet.fabric.model.scaleup) and its result's ``derived`` named a scale-up window."""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from typing import Any

import pytest

from uet.clock import DilatedClock
from uet.fep.core import FepCore
from uet.roce.core import RoceCore
from uet.scenario.derive import path_window_of, peer_config_of, scale_up_paths
from uet.scenario.read import Given, resolve

#: 2 servers of 4 GPUs placed server by server, the NIC path at 100 Gb/s, scale-up links faster
GIVEN = Given(
    run={"workload": "permutation", "endpoints": 8, "message_bytes": 4096, "messages": 1, "profile": "datacenter"},
    topology="rail",
    gpus_per_server=4,
    placement="server",
    endpoint=("pds.cc=nscc",),
)


def _simulated(monkeypatch: pytest.MonkeyPatch, transport: str) -> dict[str, Any]:
    """What the simulator hands each core: address → its ``path_window`` (UET) or the core
    itself (RoCEv2: :func:`_qp`)."""
    import uet.roce.core
    import uet.sim.scenario as sim

    seen: dict[str, Any] = {}

    class Fep(FepCore):
        def __init__(self, address: str, **kw: Any) -> None:
            seen[address] = kw.get("path_window")
            super().__init__(address, **kw)

    class Roce(RoceCore):
        def __init__(self, address: str, **kw: Any) -> None:
            super().__init__(address, **kw)
            seen[address] = self

    monkeypatch.setattr(sim, "FepCore", Fep)
    monkeypatch.setattr(uet.roce.core, "RoceCore", Roce)  # imported where a RoCEv2 run needs it
    s, topo, ep = resolve("sim", None, GIVEN).tables()
    assert sim.simulate({**s, "transport": transport}, topo or None, ep)["ok"]
    return seen


def _live_paths(transport: str) -> tuple[list[str], dict[str, Any]]:
    """The live engine's launcher: every rank's address and the ``paths`` its worker is handed."""
    from uet.fabric.model import Fabric

    from uet.live.launcher import Launcher
    from uet.scenario import Scenario

    s, topo, ep = resolve("live", None, GIVEN).tables()
    s = {**s, "transport": transport}
    launcher = Launcher(s, topo, ep)
    launcher.fabric_args(8)
    placed = Scenario("live", s, topo, ep).hosts(launcher.model_topology, 8)
    ips = [Fabric(launcher.model_topology).hosts[h].ip for h in placed]  # what the fabric process reports
    return ips, json.loads(json.dumps(launcher.worker_paths(placed, ips)))  # through the worker's argv


def test_live_uet_endpoints_get_the_simulators_scale_up_window(monkeypatch: pytest.MonkeyPatch) -> None:
    from uet.live.worker import _uet_endpoint

    sim = _simulated(monkeypatch, "uet")
    ips, paths = _live_paths("uet")

    async def live() -> dict[tuple[str, str], Any]:
        got = {}
        for rank, ip in enumerate(ips):
            spec = {"fa": ip, "rank": rank, "seed": 1, "rate_bps": 100_000_000_000, "paths": paths.get(ip)}
            ep = _uet_endpoint({**spec, "endpoint": {"pds": {"cc": "nscc"}}}, ("127.0.0.1", 9), DilatedClock())
            assert ep.fep.path_window is not None
            got.update({(ip, peer): ep.fep.path_window(peer) for peer in ips})
            ep.link.close()
        return got

    got = asyncio.run(live())
    assert got == {(ip, peer): sim[ip](peer) for ip in ips for peer in ips}
    # each GPU reaches the 3 others of its server over the scale-up links: a larger window, NSCC at
    # that rate (the window towards itself, never used, as the simulator's)
    assert sum(w is not None for w in got.values()) == 8 * 4
    window = got[ips[0], ips[1]]
    assert window is not None and window.cc_params is not None and window.cc_params.link_bps > 100e9


def _qp(core: RoceCore, peer: str) -> Any:
    """The configuration a queue pair of ``core`` towards ``peer`` takes."""
    return (core.peer_config(peer) if core.peer_config is not None else None) or core.config


def test_live_roce_queue_pairs_get_the_simulators_scale_up_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    from uet.live.worker import _roce_endpoint

    sim = _simulated(monkeypatch, "roce")
    ips, paths = _live_paths("roce")
    qp = json.loads(json.dumps(asdict(resolve("live", None, GIVEN).settings.qp)))  # as the launcher hands it

    async def live() -> dict[tuple[str, str], Any]:
        got = {}
        for rank, ip in enumerate(ips):
            spec = {"fa": ip, "rank": rank, "seed": 1, "rate_bps": 100_000_000_000, "paths": paths.get(ip), "qp": qp}
            ep = await _roce_endpoint({**spec, "cm_secret": "run"}, ("127.0.0.1", 9), DilatedClock())
            got.update({(ip, peer): _qp(ep.core, peer) for peer in ips})
            ep.link.close()
        return got

    got = asyncio.run(live())
    assert got == {(ip, peer): _qp(sim[ip], peer) for ip in ips for peer in ips}
    same, other = got[ips[0], ips[1]], got[ips[0], ips[4]]
    assert same.dcqcn is not None and other.dcqcn is not None and same.dcqcn.line_rate > other.dcqcn.line_rate


def test_the_path_record_gives_nothing_without_a_scale_up_domain() -> None:
    got = resolve("sim", None, Given(run={"endpoints": 4}))
    assert not got.fabric.has_scale_up
    ips = [f"10.0.0.{i}" for i in range(1, 5)]
    assert scale_up_paths(got.fabric, [0, 1, 2, 3], ips, got.settings, "uet") == {}
    assert scale_up_paths(got.fabric, [0, 1, 2, 3], ips, got.settings, "roce") == {}
    assert path_window_of(None) is None and peer_config_of(None) is None
