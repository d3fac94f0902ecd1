"""RoCEv2 in the virtual-time simulator: RoceCore behind the transport contract on the engine
(uet.sim), every workload intact, and DCQCN's two-flow convergence on a 100 Gb/s link
(spec/rocev2-and-fabric.md §7, §9; issue 12 "DCQCN in uet-sim")."""

from __future__ import annotations

import asyncio

import pytest
from host_link_tap import record_host_link
from uet.fabric.model import Fabric
from uet.fabric.profiles import load_topology

from uet.roce.core import RoceCore, config_for_link
from uet.sim import Engine, SimEndpoint, VirtualTimeLoop
from uet.sim.scenario import simulate
from uet.transport import Transport
from uet.wire.capture import parse_frame
from uet.workloads import WORKLOADS

pytestmark = pytest.mark.processes  # uet-sim children in virtual time, no network (tests/conftest.py)

G = 1e9
MS = 1_000_000


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_completes_intact_over_roce(name: str) -> None:
    res = simulate({"workload": name, "endpoints": 8, "message_bytes": 20_000, "messages": 2, "transport": "roce"})
    assert res["ok"], res["errors"]
    assert res["transport"] == "roce"
    assert all(f["intact"] and f["delivered"] == f["messages"] for f in res["flows"])
    c = res["endpoint_counters"]
    assert c["messages_received"] == sum(f["messages"] for f in res["flows"])
    assert c.get("icrc_errors", 0) == 0 and c.get("malformed", 0) == 0


def test_roce_frames_on_the_fabric_are_real_rocev2() -> None:
    topo = load_topology({"kind": "fat_tree", "hosts": 4}, profile="datacenter", rate_bps=100_000_000_000)
    fab = Fabric(topo, seed=1)
    eng = Engine(fab)
    cfg = config_for_link(100e9, topo.host_link.mtu)
    directory: dict[str, RoceCore] = {}
    eps = [
        SimEndpoint(eng, eng.attach(i, RoceCore(fab.hosts[i].ip, config=cfg, seed=i, directory=directory)))
        for i in range(4)
    ]
    assert all(isinstance(ep, Transport) for ep in eps)
    frames = record_host_link(fab, 0)  # what host 0 puts on its link

    async def main() -> bytes:
        t = asyncio.ensure_future(eps[3].recv(tag=5))
        await eps[0].send(eps[3].address, b"hello" * 2000, tag=5)
        m = await t
        return bytes(m.data)

    loop = VirtualTimeLoop(eng)
    try:
        assert loop.run_until_complete(main()) == b"hello" * 2000
    finally:
        loop.close()
    assert frames
    for f in frames:
        fr = parse_frame(f)
        assert fr.roce is not None and fr.dport == 4791 and fr.roce.icrc_ok and fr.dscp == 26, fr.to_dict()
        udp = fr.layer("udp")
        assert fr.kind == "roce" and udp is not None and udp.checksum == 0
    assert {r.opcode_name for f in frames if (r := parse_frame(f).roce)} >= {"SEND_FIRST", "SEND_LAST"}


def test_dcqcn_two_flows_converge_on_a_100g_link_in_the_simulator(tmp_path) -> None:
    """Hosts 0 and 1 write to host 2 under one leaf; host 1 starts 0.5 ms later
    (:func:`uet.experiments.dcqcn.converge`, the committed plot's run). Over 3-6 ms the two goodputs
    are within 10 % of half their sum, the sum is at least 85 % of the link, and no receiver QP
    sent two CNPs within the 50 us hold-off."""
    from uet.tools.dcqcn_plot import plot

    from uet.experiments.dcqcn import converge

    res = converge("paper")
    rate = res["goodput_3_6ms_gbps"]
    total = sum(rate)
    assert total >= 0.85 * 100, rate
    for r in rate:
        assert abs(r - total / 2) <= 0.1 * total / 2, rate
    cnps = res["cnps"]
    assert len(cnps) == 2 and all(len(t) > 3 for t in cnps.values())
    for times in cnps.values():
        assert all(b - a >= res["holdoff_ns"] for a, b in zip(times, times[1:], strict=False))
    # both reaction points cut their rate below the line rate and recovered towards the fair share
    for series in res["rates"]:
        assert min(r for _, r in series) < 50 * G < max(r for _, r in series)
    pytest.importorskip("matplotlib")
    out = plot(res, str(tmp_path / "dcqcn.png"))
    assert (tmp_path / "dcqcn.png").stat().st_size > 10_000 and out.endswith("dcqcn.png")


def test_uet_sim_transport_roce_cli() -> None:
    import json
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "uet.tools.sim",
        "--transport",
        "roce",
        "-w",
        "incast",
        "-n",
        "5",
        "--size",
        "64KiB",
        "--json",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["ok"] and res["transport"] == "roce" and len(res["flows"]) == 4
    assert res["endpoint_counters"]["messages_received"] == 16
    bad = subprocess.run([*cmd[:3], "--transport", "ib"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
