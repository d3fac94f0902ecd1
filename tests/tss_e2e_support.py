"""Helpers for the end-to-end TSS tests: secure endpoint pairs on loopback and a wire tap.

Both FEPs run in this process on the running event loop, on random 127.x.y.z addresses (so
parallel test runs do not collide), each with its own copy (``provision``) of one secure domain.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from uet.endpoint import Endpoint, EndpointConfig
from uet.link import loopback_addresses
from uet.link.base import Link
from uet.link.secure import SecureLink
from uet.pds import PdsConfig
from uet.tss import SdMode, SecureDomain, SecureDomainTable
from uet.tss.establish import StartPsnMethod
from uet.tss.stage import SecurityConfig

SDI = 0x51


def domain(mode: SdMode = SdMode.CLUSTER, sdi: int = SDI) -> SecureDomain:
    return SecureDomain.generate(sdi, mode)


def security(
    sd: SecureDomain, method: StartPsnMethod = StartPsnMethod.EXPECTED_0RTT_START, **kw: Any
) -> SecurityConfig:
    """A member FEP's security configuration: its own copy of ``sd``."""
    return SecurityConfig(SecureDomainTable([sd.provision()]), method=method, **kw)


def config(seed: int = 1, **kw: Any) -> EndpointConfig:
    """An endpoint configuration; PDS fields (``rto_ns``...) may be given by name."""
    base = EndpointConfig(payload_size=kw.pop("payload_size", 4096), seed=seed)
    pds_kw = {k: kw.pop(k) for k in list(kw) if k in PdsConfig.__dataclass_fields__}
    return replace(base, pds=replace(base.pds, **pds_kw), **kw)


async def pair(
    sec_a: SecurityConfig | None,
    sec_b: SecurityConfig | None,
    *,
    seed: int = 1,
    log: list[dict] | None = None,
    **cfg: Any,
) -> tuple[Endpoint, Endpoint]:
    a, b = loopback_addresses(2, seed=random.getrandbits(32))
    port = 20000 + random.randrange(20000)
    sink = log.append if log is not None else None
    ea = await Endpoint.open(a, port=port, config=config(seed, **cfg), security=sec_a, event_log=sink)
    eb = await Endpoint.open(b, port=port, config=config(seed + 1, **cfg), security=sec_b, event_log=sink)
    return ea, eb


def slink(ep: Endpoint) -> SecureLink:
    link = ep.link
    assert isinstance(link, SecureLink)
    return link


class Tap:
    """Records every datagram a link puts on the wire (after TSS sealing): ``(dst, bytes)``."""

    def __init__(self, link: Link, on_send: Callable[[bytes, str], None] | None = None) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self._inner = link
        self._send = link.send
        self._on_send = on_send
        link.send = self._tap  # type: ignore[method-assign]
        self._send_marked = link.send_marked  # the batch transmit (Link.send_marked)
        link.send_marked = self._tap_marked  # type: ignore[method-assign]

    def _tap_marked(self, datagrams: Sequence[tuple[bytes, str, int]], tos: Sequence[int]) -> None:
        for datagram, dst, _entropy in datagrams:
            self.sent.append((dst, datagram))
            if self._on_send is not None:
                self._on_send(datagram, dst)
        self._send_marked(datagrams, tos)

    def _tap(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        self.sent.append((dst, datagram))
        if self._on_send is not None:
            self._on_send(datagram, dst)
        self._send(datagram, dst, entropy, dscp, ecn)


def inner(ep: Endpoint) -> Link:
    """The link under the secure link (where sealed bytes go)."""
    return slink(ep).inner


async def transfer(ea: Endpoint, eb: Endpoint, data: bytes, *, timeout: float = 30.0) -> bytes:
    """Send ``data`` from ``ea`` to ``eb`` as one message and return what ``eb`` received."""
    fut = ea.send_nowait(eb.address, data)
    msg = await asyncio.wait_for(eb.recv(), timeout)
    await asyncio.wait_for(fut, timeout)
    return bytes(msg.data)


def payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n) if n < (1 << 16) else os.urandom(n)
