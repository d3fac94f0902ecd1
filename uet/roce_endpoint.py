"""The RoCEv2 endpoint for asyncio: a thin adapter over a :class:`~uet.roce.core.RoceCore`, the
third implementation of the transport contract (:mod:`uet.transport`) after :class:`uet.Endpoint`
and the simulator's endpoint.

Like :class:`uet.Endpoint` it decides nothing about packets: it feeds the core every datagram its
link reads (with the time and the ECN bits, so the core's notification point sees CE), sends what
the core hands out, maps operation handles to futures and re-arms one timer from ``get_timer()``
(go-back-N's ACK timeout, RNR waits and DCQCN's rate limiter and timers). Two links carry it:

* **direct** (:meth:`RoceEndpoint.open`): a :class:`~uet.link.direct.DirectLink` bound to UDP port
  **4791** (rocev2-and-fabric.md §1.2) on the endpoint's IP address; the kernel builds IP/UDP, so
  the UDP source port is the bound port, not the QPN fold. The ICRC covers the bytes that actually
  leave: the core computes it with the link's ports (``RoceCore.link_ports``), and the link sets DF,
  with which Linux sends IP ID 0 (``dont_fragment``), the ID the ICRC is computed for. No raw
  socket, so no root: an ordinary UDP socket, checked by Scapy's ICRC on a capture in the tests;
* **fabric** (:meth:`RoceEndpoint.over_fabric`): a :class:`~uet.link.fabric.FabricLink` whose
  frames carry UDP 4791 with checksum 0 and the QPN fold as source port, DSCP 26 / ECT(0) for data
  and ACKs and DSCP 48 for CNPs, so the switch puts RoCE on its lossless class and CNPs on the
  strict-priority one (§1.4, §8.1); PFC frames from the leaf pause the link's TC3.

Connections between processes use derived parameters (:class:`~uet.roce.cm.StaticCm`): every
endpoint of a run must use the same ``cm`` secret.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from uet.adapter import CoreDriver, CoreOperations
from uet.clock import DilatedClock
from uet.fep.errors import EndpointClosed
from uet.link.base import Link
from uet.roce.cm import StaticCm
from uet.roce.config import QpConfig
from uet.roce.core import RoceCore, timeout_for_rtt
from uet.wire.roce import ROCE_UDP_PORT

if TYPE_CHECKING:
    from uet.transport import Transport

__all__ = ["RoceEndpoint", "RoceOptions", "LIVE_RTT_NS"]

#: The round trip the ACK timeout of a live endpoint is scaled for when no ``config`` is given:
#: an asyncio loop's scheduling delay, not a fabric's (the real-time profile's effective 1 ms,
#: :func:`~uet.roce.core.timeout_for_rtt`: code 15, 134 ms). The reference code 8 (1.05 ms) is
#: shorter than one turn of a loaded or traced loop: go-back-N then rewound every message before
#: its last packet (the only one asking for an ACK) was sent, until ``retry_cnt`` ran out (issue 12).
LIVE_RTT_NS = 1_000_000


class RoceOptions(TypedDict, total=False):
    """The keyword arguments :meth:`RoceEndpoint.open` and :meth:`RoceEndpoint.over_fabric` pass
    on to the constructor (documented there)."""

    config: QpConfig | None
    cm: StaticCm | None
    seed: int | None
    log: Callable[[dict[str, Any]], None] | None
    clock: Callable[[], int]
    peer_config: Callable[[str], QpConfig | None] | None


class RoceEndpoint(CoreOperations[str], CoreDriver):
    """One RoCE host (every RC connection of one address) on one link; see the module docstring.
    The operations are :class:`~uet.adapter.CoreOperations`' and the pump, the timer and the
    futures :class:`~uet.adapter.CoreDriver`'s, as the simulator's endpoint's and
    :class:`uet.Endpoint`'s are.

    Operations are those of :class:`uet.transport.Transport` (typed and documented in
    :class:`~uet.adapter.CoreOperations`; the UET-only options are ignored); ``atomic`` supports
    what RoCE has (64-bit fetch-add and compare-swap, :class:`~uet.roce.core.UnsupportedAtomic`
    otherwise).
    """

    core: RoceCore

    def __init__(
        self,
        link: Link,
        *,
        config: QpConfig | None = None,
        cm: StaticCm | None = None,
        seed: int | None = None,
        log: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        peer_config: Callable[[str], QpConfig | None] | None = None,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.link = link
        self.address = link.address
        self.clock = clock
        config = config or QpConfig(timeout=timeout_for_rtt(LIVE_RTT_NS))
        # without a shared cm, a secret of this endpoint's own: only peers given the same cm connect
        cm = cm or StaticCm(secrets.token_bytes(16))
        # peer_config: towards a GPU of the same server (uet.scenario.derive.scale_up_paths)
        self.core = RoceCore(self.address, config=config, seed=seed, cm=cm, log=log, peer_config=peer_config)
        self._opcore = self.core
        self._init_driver(self.core)
        link.set_receiver(self._on_batch)

    @classmethod
    async def open(
        cls, address: str, *, port: int = ROCE_UDP_PORT, peer_port: int | None = None, **kw: Unpack[RoceOptions]
    ) -> RoceEndpoint:
        """Over the direct link: UDP ``port`` (4791) on ``address``; peers listen on ``peer_port``
        (default the same). ``kw``: the constructor's (:class:`RoceOptions`)."""
        from uet.link.direct import DirectLink

        ep = cls(DirectLink(address, port, peer_port=peer_port, read_ecn=True, dont_fragment=True), **kw)
        ep.core.link_ports = ep.link  # the ICRC covers the ports the socket really sends from and to
        return ep

    @classmethod
    async def over_fabric(
        cls, address: str, switch: tuple[str, int], *, rate_bps: int = 100_000_000, **kw: Unpack[RoceOptions]
    ) -> RoceEndpoint:
        """Over the fabric link to the switch port ``switch`` (``uet-fabric``'s UDP socket for this
        host), with the host link's ``rate_bps`` for PFC pause quanta. A ``clock`` in ``kw`` (a
        :class:`uet.clock.DilatedClock`) is the link's and the endpoint's."""
        from uet.link.fabric import FabricLink

        clock = kw.get("clock")
        link = FabricLink(
            address, switch, rate_bps=rate_bps, udp_port=ROCE_UDP_PORT, udp_checksum=False,
            clock=clock if isinstance(clock, DilatedClock) else None,
        )  # fmt: skip
        return cls(link, **kw)

    def __repr__(self) -> str:
        return f"RoceEndpoint({self.address!r})"

    async def __aenter__(self) -> RoceEndpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the transport contract ----------------------------------------------------------------

    def _start(self) -> RoceCore:
        if self._closed or self.core.closing:
            raise EndpointClosed(f"{self} closed")
        self.core.tick(self.clock())
        return self.core

    async def close(self) -> None:
        """Finish what is queued (the core's close), then release the link."""
        await self._close_driven(self.core.close)

    @property
    def counters(self) -> dict[str, int]:
        """The core's counters and the link's (``link_`` prefix)."""
        out = dict(self.core.counters())
        for k, v in self.link.counters.items():
            out["link_" + k] = v
        return out

    # -- driving the core ------------------------------------------------------------------------

    def _on_batch(self, batch: Sequence[Any]) -> None:
        if self._closed:
            return
        now = self.clock()
        receive = self.core.receive_datagram
        for data, source, ecn in batch:
            receive(data, now, source=source, ecn=ecn & 3)
        self._transmit(now)

    def _transmit(self, now: int) -> None:
        """Send what the core hands out, complete futures from its events, re-arm the timer."""
        send = self.link.send
        for t in self.core.datagrams_to_send(now):
            send(t.data, t.destination, t.entropy, t.dscp, t.ecn)
        self._dispatch()
        if not self._closed:
            self._arm(self.core.get_timer(), now)


if TYPE_CHECKING:  # mypy checks the adapter against the transport contract (uet.transport)
    _CONTRACT: type[Transport] = RoceEndpoint
