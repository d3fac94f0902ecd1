"""Is our ECMP as good as uniformly random at spreading single-path flows? (issue 11)

For ``--draws`` random permutations of ``--hosts`` hosts on the k-ary fat tree ``uet-sim`` builds
(the permutation workload's own derangement, seeds 1, 2, …), each flow gets one entropy drawn
uniformly from the range single-path PDCs use (``Single``: 0x4000–0xFFFF); the links of every flow
come from the switches' tables and hash without simulating anything
(:func:`uet.fabric.model.routes.ecmp_path`), and the most flows on one directed link is recorded.
The reference is the same permutations with every upward hop chosen uniformly at random
(:func:`uet.fabric.model.routes.uniform_fat_tree_max`). Printed: the distribution of the worst
link's flow count for both, their means with standard errors, and the difference.

Run: ``python -m uet.tools.ecmp_check --hosts 1024 --draws 400`` (``--json`` for one object;
the command is tools/ecmp_check.py).
"""

from __future__ import annotations

import math
import random
from typing import Any

__all__ = ["check"]


def _stats(values: list[int]) -> dict[str, Any]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    dist: dict[int, int] = {}
    for v in values:
        dist[v] = dist.get(v, 0) + 1
    return {
        "mean": round(mean, 4),
        "stderr": round(math.sqrt(var / n), 4),
        "distribution": {str(k): dist[k] for k in sorted(dist)},
        "share": {str(k): round(dist[k] / n, 4) for k in sorted(dist)},
    }


def check(hosts: int, draws: int, seed: int = 1) -> dict[str, Any]:
    """The comparison of the module docstring, as one JSON-ready dict."""
    from uet.fabric.model import Fabric
    from uet.fabric.model.routes import link_flows, uniform_fat_tree_max
    from uet.fabric.profiles import load_topology
    from uet.workloads import make

    topo = load_topology({"kind": "fat_tree", "hosts": hosts}, profile="datacenter", rate_bps=100_000_000_000)
    fabric = Fabric(topo)
    k = topo.fat_k
    rng = random.Random(f"ecmp_check/{seed}")
    ours: list[int] = []
    uniform: list[int] = []
    for d in range(draws):
        pairs = make("permutation", hosts, seed=seed + d).pairs()
        flows = [(s, t, rng.randrange(0x4000, 0x10000)) for s, t in pairs]
        ours.append(max(link_flows(fabric, flows).values()))
        uniform.append(uniform_fat_tree_max(k, pairs, rng))
    a, b = _stats(ours), _stats(uniform)
    diff = a["mean"] - b["mean"]
    se = math.hypot(a["stderr"], b["stderr"])
    return {
        "hosts": len(fabric.hosts),
        "k": k,
        "draws": draws,
        "ecmp": a,
        "uniform": b,
        "mean_difference": round(diff, 4),
        "difference_in_stderr": round(diff / se, 2) if se else None,
    }
