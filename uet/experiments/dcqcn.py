"""DCQCN's two-flow convergence in virtual time (rocev2-and-fabric.md §7; issue 12 "two flows
into one 100 Gb/s link converge to within 10 % of the fair share"): hosts 0 and 1 of a 4-host
fat tree at 100 Gb/s (datacenter profile) RDMA-WRITE 64 KiB messages, 16 outstanding each, to
host 2 under the same leaf; host 1 starts ``start_b_ns`` after host 0. ``python -m
uet.tools.dcqcn_plot`` plots it.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["MS", "MSG", "converge"]

MS = 1_000_000
MSG = 64 * 1024


def converge(profile: str = "paper", until_ns: int = 6 * MS, start_b_ns: int = MS // 2) -> dict[str, Any]:
    """Run the two flows (module docstring): ``{"rates": [[(t_ns, Rc bit/s)...] x 2],
    "done": [[t_ns...] x 2], "cnps": {qpn: [t_ns...]}, "holdoff_ns", "goodput_3_6ms_gbps"}``."""
    from uet.fabric.model import Fabric
    from uet.fabric.profiles import load_topology
    from uet.roce.core import RoceCore, config_for_link
    from uet.sim import Engine, SimEndpoint, VirtualTimeLoop

    topo = load_topology({"kind": "fat_tree", "hosts": 4}, profile="datacenter", rate_bps=100_000_000_000)
    fab = Fabric(topo, seed=1)
    eng = Engine(fab)
    cfg = config_for_link(100e9, topo.host_link.mtu, dcqcn=profile)
    directory: dict[str, RoceCore] = {}
    recs: list[dict[str, Any]] = []
    cores = [
        RoceCore(fab.hosts[i].ip, config=cfg, seed=i, directory=directory, log=recs.append if i == 2 else None)
        for i in range(3)
    ]
    eps = [SimEndpoint(eng, eng.attach(i, c)) for i, c in enumerate(cores)]
    region = eps[2].register(bytearray(MSG))
    done: list[list[int]] = [[], []]

    async def flow(i: int, start_ns: int) -> None:
        await asyncio.sleep(start_ns / 1e9)

        async def one() -> None:
            while eng.now < until_ns:
                await eps[i].write(eps[2].address, region.key, 0, bytes(MSG))
                done[i].append(eng.now)

        await asyncio.gather(*(one() for _ in range(16)))

    async def both() -> None:
        await asyncio.gather(flow(0, 0), flow(1, start_b_ns))

    loop = VirtualTimeLoop(eng)
    try:
        loop.run_until_complete(both())
    finally:
        loop.close()
    rates: list[list[tuple[int, float]]] = []
    for i in (0, 1):  # each reaction point's Rc: the line rate, then every change it recorded
        rp = cores[i].qps[cores[2].address].rp
        assert rp is not None
        rates.append([(start_b_ns if i else 0, cfg.dcqcn.line_rate), *rp.history] if cfg.dcqcn else [])
    cnps: dict[int, list[int]] = {}
    for r in recs:
        if r["ev"] == "tx" and r["op"] == 0x81:
            cnps.setdefault(r["qpn"], []).append(r["t"])
    t0, t1 = 3 * MS, min(6 * MS, until_ns)
    good = [round(sum(t0 <= t < t1 for t in d) * MSG * 8 / ((t1 - t0) / 1e9) / 1e9, 3) for d in done]
    assert cfg.dcqcn is not None
    return {
        "profile": profile,
        "until_ns": until_ns,
        "rates": rates,
        "done": done,
        "cnps": cnps,
        "holdoff_ns": cfg.dcqcn.cnp_holdoff_ns,
        "goodput_3_6ms_gbps": good,
    }
