"""The fault-schedule options every fabric-driving tool shares (``uet-sim``, ``uet-run``, ``uet-fabric``).

``--fail LINK@T[..T2]``, ``--degrade LINK=F[@T[..T2]]``, ``--lossy LINK=P[@T[..T2]]``,
``--flap LINK@T..T2/PERIOD``, ``--fail-switch SWITCH@T[..T2]``, ``--fault-seed N``,
``--detect T``, ``--holddown T``, on top of a scenario's ``[faults]`` table
(:mod:`uet.fabric.model.faults`). LINK is a topology link name (``leaf3-spine1``, ``h0-leaf0``)
or ``uplinks:N``; times take a unit (``150us``, ``2ms``).
"""

from __future__ import annotations

import argparse
from typing import Any

from uet.fabric.model.config import FabricError
from uet.fabric.model.faults import OPTIONS, FaultConfig, parse_ns
from uet.tools.cli import UsageError, int_arg, table_console

__all__ = ["add_fault_options", "fault_argv", "faults_from", "render_faults"]

_HELP = {
    "fail": "LINK@T[..T2]: the link fails at T (and comes back at T2), e.g. leaf3-spine1@200us",
    "degrade": "LINK=F[@T[..T2]]: the link runs at F × its rate, e.g. uplinks:4=0.25",
    "lossy": "LINK=P[@T[..T2]]: each frame crossing the link is lost with probability P",
    "flap": "LINK@T..T2/PERIOD: down for the first half of every PERIOD between T and T2",
    "fail_switch": "SWITCH@T[..T2]: every link of the switch fails at T",
}


def add_fault_options(p: argparse.ArgumentParser) -> None:
    """Add the fault options (module docstring) to ``p``."""
    g = p.add_argument_group("faults (LINK: a topology link such as leaf3-spine1, or uplinks:N)")
    for opt, text in _HELP.items():
        g.add_argument(f"--{opt.replace('_', '-')}", dest=f"fault_{opt}", action="append", default=[], help=text)
    g.add_argument("--fault-seed", type=int_arg(0), help="seed of uplinks:N and lossy links (default: the run seed)")
    g.add_argument("--detect", help="routing excludes a failed link after this long (100us)")
    g.add_argument("--holddown", help="and takes a restored link back after this long (1ms)")


def faults_from(args: argparse.Namespace, table: dict[str, Any] | None, seed: int) -> FaultConfig | None:
    """The schedule of a ``[faults]`` table and the options; None when there is no event.
    :class:`UsageError` (one line) for any mistake."""
    try:
        cfg = FaultConfig.from_dict(table, seed=seed)
        for opt in OPTIONS:
            for text in getattr(args, f"fault_{opt}", None) or []:
                cfg = cfg.with_option(opt, text)
        if getattr(args, "fault_seed", None) is not None:
            cfg.seed = args.fault_seed
        for name in ("detect", "holddown"):
            v = getattr(args, name, None)
            if v is not None:
                setattr(cfg, f"{name}_ns", parse_ns(v, f"--{name}"))
    except FabricError as e:
        raise UsageError(str(e)) from None
    return cfg if cfg.events else None


def fault_argv(args: argparse.Namespace) -> list[str]:
    """The fault options of ``args`` again, as command-line words (``uet-run`` hands them to the
    ``uet-fabric`` process it starts)."""
    out: list[str] = []
    for opt in OPTIONS:
        for text in getattr(args, f"fault_{opt}", None) or []:
            out += [f"--{opt.replace('_', '-')}", text]
    for name in ("fault_seed", "detect", "holddown"):
        v = getattr(args, name, None)
        if v is not None:
            out += [f"--{name.replace('_', '-')}", str(v)]
    return out


def render_faults(res: dict[str, Any]) -> None:
    """The fault part of a run's result as a few lines of text (after the run's tables)."""

    f = res.get("faults")
    if not f:
        return
    con = table_console(120)
    for e in f["events"]:
        con.print(f"fault: {e['t_ns'] / 1e3:,.1f} µs  {e['what']}  {e['event']}")
    lost = f["lost_packets"]
    resent = f.get("resent_packets", sum(int(fl.get("retransmits") or 0) for fl in res.get("flows", [])))
    con.print(
        f"fault: lost {lost['link_down']:,} packets on failed links and {lost['link_loss']:,} on lossy ones "
        f"({f['lost_bytes']:,} bytes), {f['no_route_drops']:,} without a route, {resent:,} resent; "
        f"{f['route_updates']:,} routing-table updates, {f['pfc_released']:,} PFC states released"
    )
    for a in f.get("around", []):
        con.print(
            f"fault at {a['t_ns'] / 1e3:,.1f} µs: {a['active_flows']:,} flows active, longest stall "
            f"{a['stall_max_us']:,.1f} µs (p99 {a['stall_p99_us']:,.1f}), all receiving again "
            f"{a['recovered_after_us']:,.1f} µs after"
        )
