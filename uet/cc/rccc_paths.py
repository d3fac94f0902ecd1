"""RCCC receiver with one credit pacer per receiving path (spec/behaviour.md §4.5, issue 26).

The notes give the receiver "one pacer per receiving port set", pacing grants at (just under)
its link rate. A GPU in a server with a scale-up domain receives over two port sets: its NIC's
Ethernet port, for senders behind the fabric, and its scale-up link, for the GPUs of its own
server (uet.pds.config.PathWindow; the owner knows which peer is which). Data from a server
neighbour never crosses the NIC's port, so pacing its credit at the NIC's rate held traffic inside
a server to that rate: a 4-GPU 1 MiB all-reduce inside one server took 99.8 µs with RCCC against
5.9 µs with NSCC (which already takes the path's rate and RTT).

**Choice** (inference; the notes are silent on a receiver with more than one path):
:class:`PathPacers` keeps one :class:`~uet.cc.rccc.CreditScheduler` per path, each built from
that path's CC parameters (its link rate, base RTT and ``MaxWnd``; the PathWindow's
``cc_params``), and sends every sender's credit targets to the pacer of the path its data arrives
on. The pacers are independent, as the links are: a grant to a fabric sender never delays one to
a server neighbour, and neither path's senders share out the other's rate. A sender whose path
names no parameters of its own goes to the FEP's own pacer (the NIC path's), exactly as before;
without a path function the PDS keeps a single pacer and nothing changes.

(A single pacer giving each sender an interval at its own path's rate was the alternative; it was
rejected because one pacer's deadline is shared, so the two links' grants would still queue behind
each other.)

Paced at the scale-up rate, that all-reduce took 11.7 µs: each 128 KiB slice of the ring, only
0.3 µs on the link, waited one round trip for its credit target to reach the receiver and the
grants to come back. The scale-up path's parameters therefore turn on ``CcConfig.idle_credit``
(uet.scenario.derive): its pacer grants a sender whose demand is met credit ahead, up to one
``MaxWnd`` (uet.cc.rccc.CreditScheduler, "Idle senders"), and the all-reduce takes 5.98 µs.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from uet.cc.base import ReceiverCc
from uet.cc.config import CcConfig


class PathPacers(ReceiverCc):
    """A :class:`~uet.cc.base.ReceiverCc` that routes each sender to the credit pacer of its path
    (module docstring). Keys are ``(peer, CCC ID)`` as the PDS gives them; ``params_of(peer)`` names
    the CC parameters of the path from ``peer`` (None: the FEP's own, ``default``), and
    ``build(params)`` makes a pacer for a path (once per distinct parameter set: the peers of one
    path share its receiving link; None: that path's senders share ``default``)."""

    def __init__(
        self,
        default: ReceiverCc,
        params_of: Callable[[str], CcConfig | None],
        build: Callable[[CcConfig], ReceiverCc | None],
    ) -> None:
        self.default = default
        self._params_of = params_of
        self._build = build
        #: every pacer, the FEP's own first (the order ``poll`` serves them in)
        self.pacers: list[ReceiverCc] = [default]
        self._by_params: dict[CcConfig, ReceiverCc] = {}
        #: the pacer of each sender seen
        self._of: dict[Hashable, ReceiverCc] = {}

    def pacer(self, key: Hashable) -> ReceiverCc:
        """The pacer of sender ``key`` = ``(peer, CCC ID)``."""
        cs = self._of.get(key)
        if cs is None:
            peer = key[0] if isinstance(key, tuple) else key
            params = self._params_of(str(peer))
            if params is None:
                cs = self.default
            else:
                cs = self._by_params.get(params)
                if cs is None:
                    cs = self._by_params[params] = self._build(params) or self.default
                    if cs is not self.default:
                        self.pacers.append(cs)
            self._of[key] = cs
        return cs

    def note_target(
        self, key: Hashable, target: int, now: int, route: object = None, rx: int = 0, blocked: bool = False
    ) -> int | None:
        return self.pacer(key).note_target(key, target, now, route, rx, blocked)

    def note_arrival(self, key: Hashable, core_trim: bool, now: int, ce: bool = False) -> None:
        self.pacer(key).note_arrival(key, core_trim, now, ce)

    def add_demand(self, key: Hashable, nbytes: int, now: int) -> None:
        self.pacer(key).add_demand(key, nbytes, now)

    def forget(self, key: Hashable) -> None:
        cs = self._of.pop(key, None)
        if cs is not None:
            cs.forget(key)

    def deadline(self) -> int | None:
        best = None
        for cs in self.pacers:
            d = cs.deadline()
            if d is not None and (best is None or d < best):
                best = d
        return best

    def poll(self, now: int) -> list[tuple[Hashable, object, int]]:
        out: list[tuple[Hashable, object, int]] = []
        for cs in self.pacers:
            d = cs.deadline()
            if d is not None and d <= now:
                out += cs.poll(now)
        return out
