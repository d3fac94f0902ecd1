"""Congestion control and load balancing chosen by name (aioquic ``congestion/`` registry style).

``PdsConfig.cc`` names the algorithms of every CCC: ``none`` (the fixed window) or registered
names joined by ``+`` — ``nscc``, ``rccc``, ``nscc+rccc``, ``dctcp`` — and ``PdsConfig.lb`` the
path selector: ``default`` (the PDS's own: rotating spraying for RUD, one EV for ROD),
``single``, ``oblivious``, ``reps``, ``bitmap`` (spec/behaviour.md §4, §4.6). A new algorithm is
a :class:`uet.cc.base.CcAlgorithm` subclass in a module of its own plus one :func:`register`
line below (docs/architecture.md "Walkthrough: a new congestion control algorithm"). :func:`build` gives a PDS core its
per-CCC gate factory (one :class:`uet.cc.ccc.Ccc` per peer and traffic class) and, when an
algorithm has a receiver side (RCCC), the receiver's :class:`uet.cc.rccc.CreditScheduler`.
"""

from __future__ import annotations

import dataclasses
import importlib
import random
from collections.abc import Callable
from typing import Any

from uet.cc.base import AlgorithmFactory, CcAlgorithm, Log, ReceiverCc
from uet.cc.ccc import Ccc
from uet.cc.config import CcConfig
from uet.cc.nscc import Nscc
from uet.cc.rccc import CreditScheduler, CreditSender

LOAD_BALANCERS = ("default", "single", "oblivious", "reps", "bitmap")

#: algorithm name → its class (or ``"module:Class"``, imported when first used)
_ALGORITHMS: dict[str, AlgorithmFactory | str] = {}
#: algorithm name → its receiver side (RCCC's credit pacer), for those that have one
_RECEIVERS: dict[str, Callable[[CcConfig, Log | None], ReceiverCc]] = {}


def register(
    name: str,
    factory: AlgorithmFactory | str,
    *,
    receiver: Callable[[CcConfig, Log | None], ReceiverCc] | None = None,
) -> None:
    """Make algorithm ``name`` available to ``PdsConfig.cc``: ``factory(cfg, now, log)`` builds
    one instance per CCC (a :class:`CcAlgorithm` subclass, or ``"module:Class"`` naming one);
    ``receiver(cfg, log)`` its receiver side, one per FEP (RCCC)."""
    if not name or "+" in name or name == "none":
        raise ValueError(f"invalid algorithm name {name!r}")
    _ALGORITHMS[name] = factory
    if receiver is not None:
        _RECEIVERS[name] = receiver


def algorithm_names() -> list[str]:
    """The registered algorithm names (``none`` and ``+`` combinations not listed)."""
    return list(_ALGORITHMS)


def _factory(name: str) -> AlgorithmFactory:
    f = _ALGORITHMS[name]
    if isinstance(f, str):
        mod, _, attr = f.partition(":")
        f = _ALGORITHMS[name] = getattr(importlib.import_module(mod), attr)
    return f


def split_names(cc: str) -> list[str]:
    """``"nscc+rccc"`` → ``["nscc", "rccc"]``, ``"none"`` → ``[]``; ValueError for an unknown
    or repeated name."""
    if cc == "none":
        return []
    names = cc.split("+")
    for n in names:
        if n not in _ALGORITHMS:
            raise ValueError(f"unknown cc {n!r} (choose from none, {', '.join(_ALGORITHMS)} or a+b)")
    if len(set(names)) != len(names):
        raise ValueError(f"cc {cc!r} names an algorithm twice")
    return names


def check_names(cc: str, lb: str) -> None:
    """Raise ValueError for an unknown algorithm or load-balancer name."""
    split_names(cc)
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


@dataclasses.dataclass(frozen=True)
class CcSetup:
    """What a PDS core gets from :func:`build`."""

    #: ``gate_factory(peer, tc)``: a new CCC
    gate_factory: Callable[[str, int], Ccc]
    params: CcConfig
    #: the receiver side of a credit algorithm (one per FEP), or None
    receiver: ReceiverCc | None


def build(
    cc: str, lb: str, params: CcConfig | None, window: int, rng: random.Random, log: Log | None = None
) -> CcSetup:
    """The CCCs named ``cc``/``lb`` with ``params`` (None: defaults) for a PDS core whose
    random source is ``rng``; ``window`` is the packet window of an algorithm-less CCC."""
    check_names(cc, lb)
    cfg = as_config(params)
    names = split_names(cc)
    factories = [_factory(n) for n in names]

    def gate_factory(peer: str, tc: int) -> Ccc:
        clog = None
        if log is not None:

            def clog(rec: dict[str, Any], _peer: str = peer, _tc: int = tc) -> None:
                log({**rec, "peer": _peer, "tc": _tc})

        algos: list[CcAlgorithm] = [f(cfg, 0, clog) for f in factories]
        return Ccc(cfg, algos, lb=lb, rng=rng, window=window, ccc_id=tc)

    rx = [_RECEIVERS[n] for n in names if n in _RECEIVERS]
    return CcSetup(gate_factory, cfg, rx[0](cfg, log) if rx else None)


register("nscc", Nscc)
register("rccc", CreditSender, receiver=lambda cfg, log: CreditScheduler(cfg, log=log))
register("dctcp", "uet.cc.dctcp:Dctcp")
