"""DCQCN's two-flow convergence in virtual time, as a plot (rocev2-and-fabric.md §7; issue 12
"two flows into one 100 Gb/s link converge to within 10 % of the fair share, with a plot").

Run: ``python -m uet.tools.dcqcn_plot docs/dcqcn.png`` (``--profile nvidia``, ``--json``). Hosts 0
and 1 of a 4-host fat tree at 100 Gb/s (datacenter profile) RDMA-WRITE 64 KiB messages, 16
outstanding each, to host 2 under the same leaf; host 1 starts 0.5 ms after host 0. The plot shows
each reaction point's current rate Rc (every change it recorded), and each flow's delivered
goodput per 250 µs window; the JSON has the goodput of each flow over 3–6 ms and the CNPs each
receiver QP sent (the run: :func:`uet.experiments.dcqcn.converge`). Needs matplotlib for the PNG.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from uet.tools.cli import ArgumentParser, UsageError, run_main

from uet.experiments.dcqcn import MSG, converge

__all__ = ["main", "plot"]


def plot(res: dict[str, Any], path: str, window_ns: int = 250_000) -> str:
    """Both flows' Rc and goodput per ``window_ns`` over time, as a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    end = res["until_ns"]
    for i, (series, done, color) in enumerate(zip(res["rates"], res["done"], ("tab:blue", "tab:orange"), strict=True)):
        if series:
            ts = [t / 1e6 for t, _ in series] + [end / 1e6]
            rs = [r / 1e9 for _, r in series] + [series[-1][1] / 1e9]
            ax.step(ts, rs, where="post", color=color, lw=1, alpha=0.6, label=f"flow {i}: DCQCN rate Rc")
        bins = range(0, end, window_ns)
        good = [sum(b <= t < b + window_ns for t in done) * MSG * 8 / (window_ns / 1e9) / 1e9 for b in bins]
        ax.plot([(b + window_ns / 2) / 1e6 for b in bins], good, color=color, lw=2, label=f"flow {i}: goodput")
    ax.axhline(50, color="grey", ls="--", lw=1, label="fair share (50 Gb/s)")
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("Gb/s")
    ax.set_ylim(0, 105)
    ax.set_xlim(0, end / 1e6)
    ax.set_title(f"DCQCN ({res['profile']} profile): two flows into one 100 Gb/s link")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _body(argv: Sequence[str] | None) -> int:
    p = ArgumentParser(prog="python -m uet.tools.dcqcn_plot", description=__doc__.split("\n\n")[0])
    p.add_argument("png", nargs="?", help="where to write the plot (needs matplotlib)")
    p.add_argument("--profile", choices=("paper", "nvidia"), default="paper", help="DCQCN profile (paper)")
    p.add_argument("--json", action="store_true", help="print the goodputs and CNP counts as JSON")
    args = p.parse_args(argv)
    if not args.png and not args.json:
        raise UsageError("give a PNG path, --json, or both")
    if args.png:
        from uet.tools.fabric import require_matplotlib

        require_matplotlib("a PNG")
    res = converge(args.profile)
    if args.png:
        plot(res, args.png)
    summary = {
        "profile": args.profile,
        "goodput_3_6ms_gbps": res["goodput_3_6ms_gbps"],
        "cnps_per_qp": {str(k): len(v) for k, v in res["cnps"].items()},
        "min_cnp_gap_ns": min(
            (b - a for times in res["cnps"].values() for a, b in zip(times, times[1:], strict=False)), default=None
        ),
        "holdoff_ns": res["holdoff_ns"],
        "png": args.png,
    }
    if args.json:
        sys.stdout.write(json.dumps(summary) + "\n")
    else:
        g = summary["goodput_3_6ms_gbps"]
        sys.stdout.write(f"goodput over 3-6 ms: {g[0]} and {g[1]} Gb/s; plot written: {args.png}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: 0, or 2 for a usage error."""
    return run_main("dcqcn-plot", _body, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
