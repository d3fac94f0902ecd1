"""Is our ECMP as good as uniformly random at spreading single-path flows? (issue 11)

For ``--draws`` random permutations of ``--hosts`` hosts on the k-ary fat tree ``uet-sim`` builds
(the permutation workload's own derangement, seeds 1, 2, …), each flow gets one entropy drawn
uniformly from the range single-path PDCs use (``Single``: 0x4000–0xFFFF); the links of every flow
come from the switches' tables and hash without simulating anything
(:func:`uet.fabric.model.routes.ecmp_path`), and the most flows on one directed link is recorded.
The reference is the same permutations with every upward hop chosen uniformly at random
(:func:`uet.fabric.model.routes.uniform_fat_tree_max`). Printed: the distribution of the worst
link's flow count for both, their means with standard errors, and the difference.

Run: ``python -m uet.tools.ecmp_check --hosts 1024 --draws 400`` (``--json`` for one object).
Exit 0, or 2 on a usage error.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections.abc import Sequence
from typing import Any

from uet.tools.cli import ArgumentParser, int_arg, run_main

__all__ = ["check", "main"]


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


def _body(argv: Sequence[str] | None) -> int:
    p = ArgumentParser(prog="python -m uet.tools.ecmp_check", description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int_arg(2, 8192), default=1024, help="hosts (the fat tree is sized for them)")
    p.add_argument("--draws", type=int_arg(2, 100_000), default=400, help="random permutations (400)")
    p.add_argument("--seed", type=int_arg(0), default=1, help="first permutation seed and entropy seed (1)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = p.parse_args(argv)
    out = check(args.hosts, args.draws, args.seed)
    if args.json:
        sys.stdout.write(json.dumps(out, sort_keys=True) + "\n")
        return 0
    print(f"{out['hosts']} hosts, k = {out['k']} fat tree, {out['draws']} random permutations, one path per flow")
    print("most flows on one directed link:")
    keys = sorted({*out["ecmp"]["share"], *out["uniform"]["share"]}, key=int)
    for name in ("ecmp", "uniform"):
        s = out[name]
        shares = "  ".join(f"{k}: {100 * s['share'].get(k, 0):5.1f} %" for k in keys)
        print(f"  {name:8} mean {s['mean']:.3f} ± {s['stderr']:.3f}   {shares}")
    print(f"difference of the means: {out['mean_difference']:+.3f} ({out['difference_in_stderr']} standard errors)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: 0, or 2 for a usage error, 130 on Ctrl-C."""
    return run_main("ecmp-check", _body, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
