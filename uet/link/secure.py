"""The secure link: a :class:`~uet.link.base.Link` facade over a FEP's TSS stage.

TSS itself is a stage of the FEP core (:mod:`uet.tss.stage`, sans-I/O, fed with ``now``). The
asyncio adapter (:class:`uet.Endpoint`) puts this facade between itself and a link that reports
the UDP ports its datagrams carry (the direct link), so that the link object the application
sees (``ep.link``) keeps its historical surface: plaintext datagrams go in through
:meth:`SecureLink.send` and come out sealed on the ``inner`` link; received datagrams are opened
before the endpoint sees them; counters (``tss_*``), the Start_PSN ``policy``, key rotation
(:meth:`install_key`, :meth:`activate`, :func:`rotate_keys`) and the event log are the stage's.
The facade decides nothing and reads no clock: its owner gives it one (``clock``, a callable
returning integer nanoseconds — the adapter's single clock function).

On the AAD entropy of the direct link and everything else TSS decides, see :mod:`uet.tss.stage`.
A link without ``port``/``peer_port`` is refused here (:class:`~uet.tss.errors.TssError`); such
links (the fabric link) carry TSS through the core's own sealing, with each datagram's entropy
and source port.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from uet.link.base import Link, ReceiveCallback
from uet.tss.domain import SecureDomainTable
from uet.tss.errors import TssError
from uet.tss.stage import SecurityConfig, Tamper, TssStage

if TYPE_CHECKING:
    from uet.link.impair import Impairment
    from uet.pds.core import PdsCore

__all__ = ["SecureLink", "rotate_keys"]


class SecureLink(Link):
    """A :class:`Link` that seals what it sends and opens what it receives through a
    :class:`~uet.tss.stage.TssStage` (module docstring)."""

    def __init__(
        self,
        inner: Link,
        config: SecurityConfig | SecureDomainTable,
        *,
        event_log: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], int] | None = None,
    ) -> None:
        port = inner.port
        peer_port = inner.peer_port
        if port is None or peer_port is None:
            raise TssError(
                f"{inner!r} does not report the UDP ports its datagrams carry; TSS needs them for the AAD "
                "(uet.tss.stage module docstring)"
            )
        self.inner = inner
        self._port: int = port
        self._peer_port: int = peer_port
        self.address = inner.address
        self.stage = TssStage(inner.address, config, tx_port=port, rx_port=peer_port, event_log=event_log)
        self.config = self.stage.config
        self.sdi = self.stage.sdi
        self.clock = clock
        self._callback: ReceiveCallback | None = None
        inner.set_receiver(self._on_batch)

    def __repr__(self) -> str:
        return f"SecureLink({self.inner!r}, sdi={self.sdi})"

    def _now(self) -> int:
        if self.clock is None:
            raise TssError("this SecureLink has no clock (its owner gives it one)")
        return self.clock()

    # -- pass-through attributes the endpoint, tools and tests read -------------------------------

    @property
    def port(self) -> int:  # type: ignore[override]
        return self._port

    @property
    def peer_port(self) -> int:  # type: ignore[override]
        return self._peer_port

    @property
    def impairment(self) -> Impairment | None:  # type: ignore[override]
        return self.inner.impairment

    @property
    def ctx(self) -> Any:
        return self.stage.ctx

    @property
    def policy(self) -> Any:
        return self.stage.policy

    @property
    def initiator_start(self) -> Any:
        return self.stage.initiator_start

    @property
    def tamper(self) -> Tamper | None:
        return self.stage.tamper

    @property
    def arrivals(self) -> set[bytes] | None:
        return self.stage.arrivals

    @property
    def event_log(self) -> Callable[[dict[str, Any]], None] | None:
        return self.stage.event_log

    @event_log.setter
    def event_log(self, log: Callable[[dict[str, Any]], None] | None) -> None:
        self.stage.event_log = log

    @property
    def counters(self) -> dict[str, int]:  # type: ignore[override]
        """The inner link's counters plus the stage's ``tss_*`` counters."""
        out = dict(self.inner.counters)
        out.update(self.stage.counters)
        return out

    def attach(self, core: PdsCore) -> None:
        """Give a PDS core the stage's secure establishment hooks (:meth:`TssStage.attach`)."""
        self.stage.attach(core)

    # -- datagrams ---------------------------------------------------------------------------------

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        """Seal ``datagram`` for ``dst`` (new TSC) and send it (unsealable ones are counted)."""
        sealed = self.stage.seal(datagram, dst, entropy, self._now())
        if sealed is not None:
            self.inner.send(sealed, dst, entropy, dscp, ecn)

    def send_marked(self, datagrams: Sequence[tuple[bytes, str, int]], tos: Sequence[int]) -> None:
        """The batch transmit of :meth:`uet.link.direct.DirectLink.send_marked`, sealed: datagram
        ``d`` goes with the TOS byte ``tos[d[0] >> 3]`` of its plaintext PDS type. Each one is
        sealed (one clock read for the batch) and the sealed ones go to the inner link in order,
        in runs of one TOS byte each (a sealed datagram starts with the security header, so the
        inner link is given a table that marks the whole run alike). The adapter's data path
        (:meth:`uet.endpoint.Endpoint._transmit`) thus needs no record or call per datagram."""
        sealed = self.stage.seal_packed(datagrams, self._now())
        inner_send = self.inner.send_marked
        run: list[tuple[bytes, str, int]] = []
        run_tos = -1
        for (data, _, _), rec in zip(datagrams, sealed, strict=True):
            if rec is None:
                continue
            t = tos[data[0] >> 3]
            if t != run_tos:
                if run:
                    inner_send(run, _uniform(run_tos))
                run = []
                run_tos = t
            run.append(rec)
        if run:
            inner_send(run, _uniform(run_tos))

    def set_receiver(self, callback: ReceiveCallback) -> None:
        self._callback = callback

    def _on_batch(self, batch: Sequence[tuple[bytes, str, int]]) -> None:
        out = self.stage.open_marked(batch, self._now())
        if out and self._callback is not None:
            self._callback(out)

    # -- key rotation (§5.7) -----------------------------------------------------------------------

    def install_key(self, an: int, key: bytes, *, epoch: int = 0) -> None:
        """SDME: install the next association's key in slot ``an`` (accepted on receive at once)."""
        self.stage.install_key(an, key, epoch=epoch)

    def activate(self, an: int, now_ns: int | None = None) -> None:
        """Switch this FEP's sender to slot ``an``; the old key is accepted for the grace period."""
        self.stage.activate(an, self._now() if now_ns is None else now_ns)

    @property
    def tx_an(self) -> int:
        """The AN this FEP's sender uses now."""
        return self.stage.tx_an

    def close(self) -> None:
        self.inner.close()


_UNIFORM: dict[int, tuple[int, ...]] = {}


def _uniform(t: int) -> tuple[int, ...]:
    """A marking table giving every first byte (``>> 3``: 0–31) the TOS byte ``t``."""
    table = _UNIFORM.get(t)
    if table is None:
        table = _UNIFORM[t] = (t,) * 32
    return table


def rotate_keys(links: Sequence[Any], key: bytes | None = None, *, now_ns: int | None = None) -> int:
    """Rotate the key of the members' common secure domain, make-before-break (behaviour.md §5.7).

    ``links``: :class:`SecureLink` or :class:`~uet.tss.stage.TssStage` objects (anything with
    ``tx_an``, ``install_key`` and ``activate``). The SDME's two steps: first install ``key``
    (default: 32 fresh random bytes) in the inactive slot of every member, so each accepts the new
    association before anyone sends with it; then switch every member's sender to it. The old
    association stays accepted for ``TssConfig.key_grace_ns`` on each member. Returns the new AN.
    """
    if not links:
        raise ValueError("no links to rotate")
    new_key = os.urandom(32) if key is None else key
    an: int = links[0].tx_an ^ 1
    for link in links:
        if link.tx_an ^ 1 != an:
            raise TssError("the members do not use the same AN: rotate them separately")
        link.install_key(an, new_key)
    for link in links:
        if now_ns is None:
            link.activate(an)
        else:
            link.activate(an, now_ns)
    return an
