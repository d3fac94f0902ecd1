"""Seams for congestion control and multipath: the entropy strategy and the congestion gate.

architecture.md "Congestion control seam": the PDS asks a per-CCC object before each
transmission and tells it every ACK, NACK, trim, ECN mark and timeout. The default gate is a
fixed window (the ``none`` algorithm) and the default entropy a rotating set (RUD spraying,
spec/behaviour.md §4.6 "a randomly initialised modular counter is acceptable") or one value per
PDC (ROD single path, §2.13). :mod:`uet.cc` replaces them from ``PdsConfig.cc`` / ``lb`` (or an
owner sets ``PdsCore.gate_factory`` / ``PdsCore.entropy_factory``).

Every gate is a :class:`uet.cc.base.SenderCc` and gets the full signals of §4.1 through it
(the PDS makes no other assumption about it); its path selector hears about every packet an
ACK covers.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from uet.cc.base import PathSelector, ReceiverCc, ResendPolicy, SenderCc
from uet.cc.config import CcConfig
from uet.cc.rccc_paths import PathPacers
from uet.pds.config import Mode, PathWindow

#: a gate factory: ``(peer, traffic class) → a new CCC`` (``PdsCore.gate_factory``)
GateFactory = Callable[[str, int], SenderCc]


#: chooses the entropy value (UDP source port) of each packet of one PDC (declared in
#: :mod:`uet.cc.base`)
EntropyStrategy = PathSelector


class RotatingEntropy(PathSelector):
    """Oblivious spraying over ``paths`` consecutive values from a random base (§4.6)."""

    __slots__ = ("_base", "_paths", "_i")

    def __init__(self, rng: random.Random, paths: int) -> None:
        self._paths = max(1, paths)
        self._base = rng.randrange(0x4000, 0x10000 - self._paths)
        self._i = rng.randrange(self._paths)

    def next_entropy(self) -> int:
        i = self._i + 1
        if i == self._paths:
            i = 0
        self._i = i
        return self._base + i

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        """Oblivious: feedback is ignored (REPS uses it, uet.cc.entropy)."""


class SingleEntropy(PathSelector):
    """One entropy value for the PDC's life: ROD single path (§2.13)."""

    __slots__ = ("value",)

    def __init__(self, rng: random.Random, paths: int = 1) -> None:
        self.value = rng.randrange(0x4000, 0x10000)

    def next_entropy(self) -> int:
        return self.value

    def feedback(self, entropy: int, event: str, now: int = 0) -> None:
        """Single path: nothing to learn."""


def default_entropy(mode: Mode, rng: random.Random, paths: int) -> EntropyStrategy:
    """RUD sprays over a rotating set; ROD (and everything else) uses one value."""
    return RotatingEntropy(rng, paths) if mode == Mode.RUD else SingleEntropy(rng)


#: the per-CCC gate the PDS asks and tells (declared in :mod:`uet.cc.base`)
CongestionGate = SenderCc


class FixedWindowGate(SenderCc):
    """The ``none`` algorithm: at most ``window`` first transmissions in flight per CCC, asked
    once per burst (:meth:`quota`); resends go at once, trimmed ones on the ACK clock
    (:attr:`ResendPolicy.ACK_CLOCKED`, uet.pds.trimwait). The other signals are ignored."""

    __slots__ = ("window", "inflight", "overhead", "entropy", "resend", "cc_request", "ccc_id")

    def __init__(self, window: int) -> None:
        self.window = window
        self.cc_request = False
        self.ccc_id = 0
        self.inflight = 0
        self.overhead = 0  # counts packets, not bytes
        #: no path selector of its own; resends on the ACK clock (instance attributes: the compiled
        #: build, uet.compiled, takes no class-level default of these types)
        self.entropy = None
        self.resend = ResendPolicy.ACK_CLOCKED

    def quota(self, now: int) -> int:
        q = self.window - self.inflight
        return q if q > 0 else 0

    def can_send(self, nbytes: int, now: int) -> bool:
        return self.inflight < self.window

    def may_open(self, nbytes: int, now: int) -> bool:
        return False

    def on_send(self, nbytes: int, retx: bool, now: int) -> None:
        if not retx:
            self.inflight += 1

    def on_send_many(self, npkts: int, nbytes: int, now: int) -> None:
        self.inflight += npkts

    def ack_request(self, nbytes: int) -> bool:
        return False

    def deadline(self, now: int) -> int | None:
        return None

    def take_probe(self) -> bool:
        return False

    def set_backlog(self, pdcid: int, npkts: int, nbytes: int) -> None:
        pass

    def credit_target(self) -> int:
        return 0

    def credit_request_due(self, now: int) -> bool:
        return False

    def on_credit_request(self, now: int) -> None:
        pass

    def on_grant(self, grant: int, now: int) -> bool:
        return False

    def on_ack(
        self,
        npkts: int,
        nbytes: int,
        newly_rcvd: int | None,
        ecn_bytes: int,
        rtt: int | None,
        pend: int,
        restore: bool,
        now: int,
    ) -> None:
        self.inflight -= npkts

    def on_nack(self, code: int, ecn: bool, now: int) -> None:
        pass

    def on_nack_packet(self, nbytes: int, ecn: bool, rtt: int | None, trimmed: bool, lasthop: bool, now: int) -> None:
        pass

    def on_loss(self, nbytes: int, timeout: bool, now: int) -> None:
        pass

    def on_discarded(self, nbytes: int) -> None:
        pass

    def on_done(self, npkts: int, nbytes: int = 0) -> None:
        self.inflight -= npkts

    def snapshot(self) -> dict[str, Any]:
        return {"inflight_pkts": self.inflight}


def per_path_gates(
    default: GateFactory,
    path_window: Callable[[str], PathWindow | None],
    build: Callable[[CcConfig], GateFactory],
) -> GateFactory:
    """A gate factory giving a CCC towards ``peer`` the CC parameters of its path: ``default``'s
    CCC when ``path_window(peer)`` is None or names no ``cc_params``, else one from
    ``build(cc_params)`` (built once per distinct parameter set). A CCC is per (peer, traffic
    class), so every PDC to that peer shares it (behaviour.md §4: CC state per destination)."""
    by_params: dict[CcConfig, GateFactory] = {}
    params_of = path_params(path_window)

    def gate(peer: str, tc: int) -> SenderCc:
        params = params_of(peer)
        if params is None:
            return default(peer, tc)
        f = by_params.get(params)
        if f is None:
            f = by_params[params] = build(params)
        return f(peer, tc)

    return gate


def per_path_credit(
    default: ReceiverCc,
    path_window: Callable[[str], PathWindow | None],
    build: Callable[[CcConfig], ReceiverCc | None],
) -> ReceiverCc:
    """The RCCC receiver of a FEP whose peers arrive over different paths: one credit pacer per
    path, each at that path's rate (uet.cc.rccc_paths), ``default`` for the peers whose
    ``path_window`` names no ``cc_params``; ``build(cc_params)`` makes a path's pacer."""
    return PathPacers(default, path_params(path_window), build)


def path_params(path_window: Callable[[str], PathWindow | None]) -> Callable[[str], CcConfig | None]:
    """``peer`` → the CC parameters of the path to it, None for the FEP's own (PathWindow)."""

    def params(peer: str) -> CcConfig | None:
        pw = path_window(peer)
        return None if pw is None else pw.cc_params

    return params
