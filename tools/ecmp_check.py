"""Is our ECMP as good as uniformly random at spreading single-path flows? (issue 11)

The comparison is :func:`uet.experiments.ecmp.check` (its docstring says what is drawn and
compared); this command prints it.

Run: ``python -m uet.tools.ecmp_check --hosts 1024 --draws 400`` (``--json`` for one object).
Exit 0, or 2 on a usage error.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from uet.tools.cli import ArgumentParser, int_arg, run_main

from uet.experiments.ecmp import check

__all__ = ["main"]


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
