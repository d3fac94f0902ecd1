"""Congestion control and load balancing chosen by name (aioquic ``congestion/`` registry style).

``PdsConfig.cc`` names the algorithm set of every CCC — ``none`` (the fixed window),
``nscc``, ``rccc``, ``nscc+rccc`` — and ``PdsConfig.lb`` the path selector — ``default`` (the
PDS's own: rotating spraying for RUD, one EV for ROD), ``single``, ``oblivious``, ``reps``,
``bitmap`` (spec/behaviour.md §4, §4.6). :func:`install` plugs them into a PDS core: its
``gate_factory`` then builds one :class:`uet.cc.ccc.Ccc` per (peer, traffic class), and with
RCCC the core gets a :class:`uet.cc.rccc.CreditScheduler` (receiver side, one per FEP).
Scenario files and command lines map onto the same two names.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from uet.cc.ccc import Ccc
from uet.cc.config import CcConfig
from uet.cc.rccc import CreditScheduler

#: algorithm name → (NSCC on, RCCC on)
CC_ALGORITHMS: dict[str, tuple[bool, bool]] = {
    "none": (False, False),
    "nscc": (True, False),
    "rccc": (False, True),
    "nscc+rccc": (True, True),
}
LOAD_BALANCERS = ("default", "single", "oblivious", "reps", "bitmap")


def check_names(cc: str, lb: str) -> None:
    """Raise ValueError for an unknown algorithm or load-balancer name."""
    if cc not in CC_ALGORITHMS:
        raise ValueError(f"unknown cc {cc!r} (choose from {', '.join(CC_ALGORITHMS)})")
    if lb not in LOAD_BALANCERS:
        raise ValueError(f"unknown lb {lb!r} (choose from {', '.join(LOAD_BALANCERS)})")


def as_config(params: CcConfig | dict[str, Any] | None) -> CcConfig:
    """``PdsConfig.cc_params`` as a :class:`CcConfig`: None gives the defaults, a dict (a scenario
    file's ``[endpoint.pds.cc_params]`` table) names some of its fields. ValueError for an
    unknown field."""
    if params is None:
        return CcConfig()
    if isinstance(params, CcConfig):
        return params
    if not isinstance(params, dict):
        raise ValueError(f"pds.cc_params must be a table of CcConfig fields, not {params!r}")
    names = {f.name for f in dataclasses.fields(CcConfig)}
    bad = sorted(set(params) - names)
    if bad:
        raise ValueError(f"pds.cc_params: unknown key {bad[0]!r}; valid keys: {', '.join(sorted(names))}")
    return CcConfig(**params)


def install(core: Any, cc: str | None = None, lb: str | None = None, params: CcConfig | None = None) -> None:
    """Give PDS ``core`` the CCCs named ``cc``/``lb`` (default: its config's ``cc``, ``lb`` and
    ``cc_params``). ``none`` with ``default`` leaves the core's fixed window untouched."""
    pc = core.config
    cc = pc.cc if cc is None else cc
    lb = pc.lb if lb is None else lb
    check_names(cc, lb)
    cfg = as_config(params or pc.cc_params)
    nscc, rccc = CC_ALGORITHMS[cc]
    if cc == "none" and lb == "default":
        return
    log = core._log

    def factory(peer: str, tc: int) -> Ccc:
        clog = None
        if log is not None:

            def clog(rec: dict[str, Any], _peer: str = peer, _tc: int = tc) -> None:
                log({**rec, "peer": _peer, "tc": _tc})

        return Ccc(cfg, nscc=nscc, rccc=rccc, lb=lb, rng=core.rng, window=pc.cc_window, ccc_id=tc, log=clog)

    core.gate_factory = factory
    core.cc_params = cfg
    if rccc:
        core.credit_scheduler = CreditScheduler(cfg, log=log)
