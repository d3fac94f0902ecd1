"""The operations of a :class:`~uet.fep.core.FepCore`: memory registration, sends, RMA, atomics
and receives. Each returns an int handle; its completion comes back as an event
(:mod:`uet.fep.events`). Operations take no ``now``: they use the latest time the core was given.

The send protocol is the SES initiator's rule (:meth:`~uet.ses.initiator.SesInitiator.protocol_for`);
a plain eager send (no DC) goes on a lane (:mod:`uet.fep.lanes`), everything else through the SES
initiator engine, with message ids from one space.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from uet.fep.completions import Completions
from uet.fep.errors import DeliveryError, EndpointClosed
from uet.fep.events import OpFailed
from uet.fep.lanes import Lane, OutMessage
from uet.fep.peer import Peer
from uet.fep.receives import Waiter, _Posted, matches
from uet.pds import Mode
from uet.ses.errors import error_for
from uet.ses.memory import Access, MemoryRegion, byte_view
from uet.ses.message import Message, initiator_id
from uet.ses.sink import ReceiveSink, receive_view
from uet.wire.ses import CSWAP_OPS, AmoOp, AmoType, ReturnCode

__all__ = ["Operations"]

#: ``register``'s default job: this FEP's (an int, not a sentinel object: the compiled build,
#: uet.compiled, checks the type of a default; Job IDs are never negative)
_OWN: Final = -1


class Operations(Completions):
    """The operations half of :class:`~uet.fep.core.FepCore` (a mixin: the state is the core's,
    declared in :class:`~uet.fep.state.FepState`)."""

    # -- memory -------------------------------------------------------------------------------------

    def register(
        self, buffer: Any, access: Access | int = Access.ALL, *, key: int | None = None, job: int | None = _OWN
    ) -> MemoryRegion:
        """Register ``buffer`` for remote access (``job``: default this FEP's job; None = any job;
        other jobs get ``BAD_MKEY``, §6.5). Raises :class:`~uet.ses.errors.RegistrationError`."""
        return self.ses.memory.register(buffer, access, key=key, job=self.job if job == _OWN else job)

    def deregister(self, region: MemoryRegion | int) -> None:
        """Remove a registration (a region or its key); later requests get ``BAD_MKEY``."""
        self.ses.memory.deregister(region)

    # -- operations ---------------------------------------------------------------------------------

    def _admit(self) -> None:
        if self._closing:
            raise EndpointClosed(f"{self} is closed")

    def send(
        self,
        peer: Peer | str,
        data: bytes | bytearray | memoryview,
        *,
        tag: int | None = None,
        mode: Mode = Mode.RUD,
        header_data: int | None = None,
        dc: bool = False,
        protocol: str | None = None,
        pid: int | None = None,
        resource_index: int | None = None,
        tc: int = 0,
    ) -> int:
        """Send ``data`` as one message (tagged with ``tag`` when given); returns the handle of
        its :class:`SendCompleted` / :class:`OpFailed`. ``data`` must not change until then
        (packets are zero-copy slices). ``protocol`` forces ``"eager"``, ``"rendezvous"`` or
        ``"deferrable"`` (default: the SES initiator's rule). Raises :class:`EndpointClosed`
        while closing and :class:`DeliveryError` for a message over ``max_message``."""
        self._admit()
        dest = self.peers.dest(peer, pid, resource_index)
        if type(mode) is not Mode:
            mode = Mode(mode)
        view = byte_view(data)
        n = len(view)
        cfg = self.config
        if n > cfg.max_message:
            raise DeliveryError(f"message of {n} bytes exceeds max_message {cfg.max_message}")
        if protocol is None:
            protocol = self.ses.initiator.protocol_for(n)
        h = self._handle()
        if protocol != "eager" or dc:
            self.ses.initiator.send(
                dest, view, tag=tag, header_data=header_data, dc=dc, protocol=protocol, mode=int(mode), context=h
            )
            self._ops[h] = None
            return h
        msg = OutMessage(dest.fa, mode, view, self.ses.alloc_message_id(), self.segmenter.count(n), h)
        msg.pid, msg.ri, msg.job, msg.generation, msg.relative = (
            dest.pid_on_fep, dest.resource_index, dest.job_id, dest.ri_generation, dest.relative,
        )  # fmt: skip
        msg.tag = tag
        msg.header_data = header_data
        msg.t0 = self._now
        key = (dest.fa, mode, tc, dest.job_id)
        lane = self.lanes.get(key)
        if lane is None:
            pw = self.path_window(dest.fa) if self.path_window is not None else None
            limit = self.config.max_inflight if pw is None else pw.max_inflight
            lane = self.lanes[key] = Lane(key, dest.job_id, tc, limit)
        msg.lane = lane
        self._unfinished[h] = msg
        lane.queue.append(msg)
        self._dirty[lane] = None
        if self.event_log is not None:
            self._log("msg_tx", peer=dest.fa, mode=mode.name, msg_id=msg.mid, bytes=n, pkts=msg.npkts)
        return h

    def _engine(self, start: Callable[[int], Any], into: memoryview | None = None) -> int:
        self._admit()
        h = self._handle()
        start(h)
        self._ops[h] = into
        return h

    def write(
        self,
        peer: Peer | str,
        key: int,
        offset: int,
        data: bytes | bytearray | memoryview,
        *,
        header_data: int | None = None,
        dc: bool = False,
        mode: Mode = Mode.RUD,
        sync: tuple[int, int] | None = None,
    ) -> int:
        """RMA write of ``data`` at ``offset`` of the peer's region ``key`` (§6.5); with
        ``header_data`` the target sees a :class:`WriteCompleted`. ``sync = (group, count)``:
        a SYNC_WRITE of that sync group (:mod:`uet.ses.sync`; with ``header_data`` the group's
        terminating write)."""
        dest = self.peers.dest(peer)
        view = byte_view(data)
        return self._engine(
            lambda h: self.ses.initiator.write(
                dest, key, offset, view, header_data=header_data, dc=dc, mode=int(mode), context=h, sync=sync
            )
        )

    def read(
        self,
        peer: Peer | str,
        key: int,
        offset: int,
        length: int,
        *,
        into: bytearray | memoryview | None = None,
        mode: Mode = Mode.RUD,
    ) -> int:
        """RMA read of ``length`` bytes at ``offset`` of the peer's region ``key`` (§6.5); the
        :class:`OpCompleted` value is the bytes (or a view of ``into``, filled)."""
        dest = self.peers.dest(peer)
        out = byte_view(into) if into is not None else None
        return self._engine(
            lambda h: self.ses.initiator.read(dest, key, offset, length, into=out, mode=int(mode), context=h),
            None if out is None else out[:length],
        )

    def atomic(
        self,
        peer: Peer | str,
        key: int,
        offset: int,
        op: AmoOp | int,
        datatype: AmoType | int,
        operand: Any = None,
        *,
        fetch: bool = False,
        compare: int | float = 0,
        swap: int | float = 0,
        mode: Mode = Mode.RUD,
        sync: tuple[int, int] | None = None,
        tagged: bool = False,
    ) -> int:
        """Atomic ``op`` on ``datatype`` at ``offset`` of the peer's region ``key`` (§6.5, §10):
        ``operand`` one value or a sequence (MSWAP: ``[value, mask]`` pairs; READ needs none; raw
        bytes as they are); the value is the prior value with ``fetch`` (a tuple for several
        elements), else None. ``sync = (group, count)``: SYNC_ATOMIC, the terminating operation
        of that sync group (:mod:`uet.ses.sync`). ``tagged``: TSEND_ATOMIC /
        TSEND_FETCH_ATOMIC, ``key`` is the tag of the peer's posted receive it applies to."""
        dest = self.peers.dest(peer)
        if operand is None:
            operands: Any = [] if op in CSWAP_OPS else [0]
        elif isinstance(operand, bytes | bytearray | list | tuple):
            operands = operand
        else:
            operands = [operand]
        return self._engine(
            lambda h: self.ses.initiator.atomic(
                dest,
                key,
                offset,
                int(op),
                int(datatype),
                operands,
                compare=compare,
                swap=swap,
                fetch=fetch,
                mode=int(mode),
                context=h,
                sync=sync,
                tagged=tagged,
            )  # fmt: skip
        )

    def compare_swap(
        self,
        peer: Peer | str,
        key: int,
        offset: int,
        datatype: AmoType | int,
        compare: int | float,
        swap: int | float,
        *,
        op: AmoOp | int = AmoOp.CSWAP,
        fetch: bool = True,
        mode: Mode = Mode.RUD,
    ) -> int:
        """Compare-and-swap (or another ``op`` of the family) of one element; the value is the
        prior value when ``fetch`` (success is ``value == compare`` for plain CSWAP)."""
        if op not in CSWAP_OPS:
            raise ValueError(f"{op!r} is not a compare-and-swap operation")
        return self.atomic(peer, key, offset, op, datatype, None, fetch=fetch, compare=compare, swap=swap, mode=mode)

    # -- receives -----------------------------------------------------------------------------------

    def post_recv(
        self,
        buffer: bytearray | memoryview | ReceiveSink | None,
        *,
        tag: int | None = None,
        ignore: int = 0,
        source: str | None = None,
        truncate: bool = False,
    ) -> int:
        """Post a receive; returns the handle of its :class:`MessageReceived` / :class:`OpFailed`.

        Untagged when ``tag`` is None, else a tagged message whose match bits equal ``tag``
        outside the ``ignore`` mask; from ``source`` only (its Fabric Address and its initiator
        ID), or any source. With a ``buffer`` it goes on the expected list (§6.4; a longer message
        is truncated with ``truncate``, else ``TOO_LONG``) and the message's ``data`` is a view of
        the buffer; with None it takes the first matching message (:mod:`uet.fep.receives`)."""
        if self._closed:
            raise EndpointClosed(f"{self} is closed")
        init = None if source is None else initiator_id(source)
        h = self._handle()
        if buffer is None:
            w = Waiter(h, tag is not None, tag or 0, ignore, init, source)
            self.waiters.add(w)
            if self.ses.has_unexpected():
                self.waiters.serve()
            return h
        view = receive_view(buffer)
        rec = self._recvs[h] = _Posted(h, view)
        rec.posted = self.ses.post_recv(
            view, tagged=tag is not None, tag=tag or 0, ignore=ignore, initiator=init, truncate=truncate, context=rec,
            source=source,
        )  # fmt: skip
        if self.ses.has_events():
            self._drain_ses()
        return h

    def recv_nowait(self, tag: int | None = None, ignore: int = 0, *, source: str | None = None) -> Message | None:
        """A matching message already on the unexpected list (fast path), or None."""
        init = None if source is None else initiator_id(source)
        for m in self.ses.unexpected_messages:
            if matches(m, tag, ignore, init, source):
                self.ses.unexpected_messages.remove(m)
                return self._delivered(m)
        return None

    def cancel(self, handle: int) -> bool:
        """Withdraw a receive: True if it was still waiting (it then fails with ``CANCELLED``),
        False when a message already took it (or the handle is unknown)."""
        rec = self._recvs.get(handle)
        if rec is not None:
            return rec.posted is not None and self.ses.cancel_recv(rec.posted)
        w = self.waiters.by_handle.get(handle)
        if w is None:
            return False
        if w.posted is not None:  # a sized receive is bound: its message goes back unexpected
            w.cancelled = True
            self.waiters.by_handle.pop(handle, None)
        else:
            self.waiters.remove(w)
        self._events.append(OpFailed(handle, error_for(ReturnCode.CANCELLED, "receive cancelled")))
        return True
