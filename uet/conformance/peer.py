"""``uet-peer``'s endpoint: one Fabric Endpoint that registers a peer profile's memory regions,
keeps its receives posted and sinks or echoes what arrives, until it is closed.

:class:`PeerSettings` says what to serve (its identity, TSS keys, the link, TEST-ONLY faults of
:mod:`uet.conformance.faults`); :class:`Peer` opens it, reports its identity (the JSON line
``uet-conformance --identity`` reads) and on :meth:`Peer.close` its counters. The command line
(``uet-peer``) parses the settings, prints the lines and stops the peer on a signal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from uet.conformance.faults import FAULTS, FaultLink
from uet.conformance.profile import Profile, register_regions
from uet.endpoint import Endpoint, EndpointClosed, EndpointConfig
from uet.enums import StrEnum
from uet.errors import UetError
from uet.link.base import Link
from uet.tss.establish import StartPsnMethod
from uet.wire.net import UET_IP_PROTO

__all__ = ["Peer", "PeerMode", "PeerSettings"]


class PeerMode(StrEnum):
    """What the peer does with an untagged message."""

    SINK = "sink"  #: receive and drop it
    ECHO = "echo"  #: send it back to its source


@dataclass(frozen=True)
class PeerSettings:
    """What one peer serves. ``config`` is the endpoint's configuration as the caller chose it
    (seed, data protection, payload size); ``fabric`` the UDP address of a ``uet-fabric`` switch
    port to serve through (``rate``: that NIC's link rate), else ``link`` (``direct`` UDP or
    ``ip``, protocol ``ip_proto``) on ``port``; ``keys`` a TSS key file (``sdi``; ``start_psn``: how a
    new PDC's Start PSN is agreed); ``faults`` names in :data:`uet.conformance.faults.FAULTS`."""

    address: str
    job: int
    pid: int = 0
    ri: int = 0
    port: int = 4793
    mode: PeerMode = PeerMode.SINK
    config: EndpointConfig = field(default_factory=EndpointConfig)
    keys: str | None = None
    sdi: int | None = None
    start_psn: StartPsnMethod = StartPsnMethod.RANDOM_1RTT_START
    faults: Sequence[str] = ()
    fabric: tuple[str, int] | None = None
    rate: int | None = None
    link: str = "direct"
    ip_proto: int = UET_IP_PROTO


def _no_captures() -> tuple[Any, Any]:
    return None, None


class Peer:
    """The running peer: the endpoint, its regions and the receive/echo loops. ``captures`` makes
    the packet taps (for :class:`uet.link.tap.TapLink`) and the event log, either None, once the
    link is chosen; :meth:`close` closes them."""

    def __init__(
        self, settings: PeerSettings, profile: Profile, captures: Callable[[], tuple[Any, Any]] = _no_captures
    ) -> None:
        self.settings = settings
        self.captures = captures
        self.profile = profile
        self.ep: Endpoint | None = None
        self.buffers: list[bytearray] = []
        self.stats = dict.fromkeys(
            ("messages", "bytes", "echoed", "echo_failed", "receives_posted", "receive_failed"), 0
        )
        self.tasks: list[asyncio.Task[None]] = []
        self.taps: Any = None
        self.log: Any = None

    async def open(self) -> None:
        a = self.settings
        security = None
        if a.keys:
            from uet.keyfile import load_key_file
            from uet.tss.context import TssConfig
            from uet.tss.stage import SecurityConfig

            tss = TssConfig(replay_window=0) if "answer-replay" in a.faults else TssConfig()
            # seeded from the clock: a restarted peer must not repeat the IVs of its last run (§5.6)
            table = load_key_file(a.keys, wall_ns=time.time_ns())
            security = SecurityConfig(table, sdi=a.sdi, tss=tss, method=a.start_psn)
        link: Link | None = None
        rewriters = [f for f in a.faults if FAULTS[f][0] is not None]
        if a.fabric is not None:
            from uet.link.fabric import FabricLink

            if a.rate is None:  # the fabric link's default rate
                link = FabricLink(a.address, a.fabric, deliver_trimmed=True)
            else:
                link = FabricLink(a.address, a.fabric, deliver_trimmed=True, rate_bps=a.rate)
        if rewriters:
            from uet.link.direct import DirectLink

            link = FaultLink(DirectLink(a.address, a.port, read_ecn=True), rewriters)
        cfg = a.config
        if a.fabric is None and link is None and a.link != "direct":
            from uet.link.select import open_link

            link = open_link(a.link, a.address, config=cfg, proto=a.ip_proto)
        self.taps, self.log = self.captures()
        if self.taps is not None:  # --pcap: frames built at the link (uet.link.tap)
            from uet.link.select import open_link
            from uet.link.tap import TapLink

            link = TapLink(link or open_link("direct", a.address, config=cfg, port=a.port), self.taps)
        self.ep = await Endpoint.open(
            a.address,
            a.job,
            a.pid,
            port=a.port,
            resource_index=a.ri,
            config=cfg,
            link=link,
            security=security,
            event_log=self.log,
        )
        self.buffers = register_regions(self.ep, self.profile)
        for rcv in self.profile.receives:
            self.tasks.append(asyncio.ensure_future(self._posted(rcv.size, rcv.tag, rcv.truncate)))
        # several waiting receives: a deferred send whose initiator never restarts (§6.7) holds one
        self.tasks += [asyncio.ensure_future(self._untagged()) for _ in range(4)]
        self.tasks.append(asyncio.ensure_future(self._sweep_tagged()))

    def identity(self) -> dict[str, Any]:
        ep = self.ep
        assert ep is not None
        a = self.settings
        sdi = getattr(ep.link, "sdi", None)
        return {
            "uet_peer": 1, "address": ep.address, "port": a.port, "job": a.job, "pid": a.pid, "ri": a.ri,
            "fabric": None if a.fabric is None else f"{a.fabric[0]}:{a.fabric[1]}",
            "mode": str(a.mode), "tss_sdi": sdi, "faults": list(a.faults),
            "link": a.link if a.fabric is None else "fabric",
            "data_protect": ep.config.data_protect if sdi is None else "tss", **self.profile.as_json(),
        }  # fmt: skip

    async def _posted(self, size: int, tag: int | None, truncate: bool) -> None:
        ep = self.ep
        assert ep is not None
        while True:
            buf = bytearray(size)
            self.stats["receives_posted"] += 1
            try:
                h = ep.post_recv(buf, tag=tag, truncate=truncate)
            except EndpointClosed:
                return
            # a receive failed at shutdown has nobody left to read its error
            h.future.add_done_callback(lambda f: f.cancelled() or f.exception())
            try:
                m = await h
                self._count(m.nbytes)
            except EndpointClosed:
                return
            except UetError:
                pass  # TOO_LONG and friends: the initiator was told; post again

    async def _untagged(self) -> None:
        ep = self.ep
        assert ep is not None
        while True:
            try:
                m = await ep.recv()
            except EndpointClosed:
                return
            except UetError:  # e.g. TOO_LONG, DROPPED: the initiator was told; this receiver keeps serving
                self.stats["receive_failed"] += 1
                continue
            self._count(m.nbytes)
            if self.settings.mode == PeerMode.ECHO:
                self.tasks.append(asyncio.ensure_future(self._echo(m.source, bytes(m.data))))
                self.tasks = [t for t in self.tasks if not t.done()]

    async def _echo(self, source: str, data: bytes) -> None:
        assert self.ep is not None
        try:
            await self.ep.send(source, data)
            self.stats["echoed"] += 1
        except (UetError, OSError):
            self.stats["echo_failed"] += 1

    async def _sweep_tagged(self) -> None:
        """Tagged messages no posted receive wanted wait on the unexpected list; a sink drops them
        once a second so the list stays bounded."""
        ep = self.ep
        assert ep is not None
        while True:
            await asyncio.sleep(1.0)
            while (m := ep.recv_nowait(tag=0, ignore=(1 << 64) - 1)) is not None:
                self._count(m.nbytes)

    def _count(self, n: int) -> None:
        self.stats["messages"] += 1
        self.stats["bytes"] += n

    async def close(self) -> dict[str, Any]:
        for t in self.tasks:
            t.cancel()
        out: dict[str, Any] = {"stopped": True, **self.stats}
        if self.ep is not None:
            out["counters"] = self.ep.counters
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ep.close(), 3.0)
        for c in (self.taps, self.log):
            if c is not None:
                c.close()
        return out
