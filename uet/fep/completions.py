"""How a :class:`~uet.fep.core.FepCore` turns what PDS and SES report into completions.

PDS events first: an eager packet's plain ``Acked`` (or a run of them, ``AckedRun``) takes an
inlined fast path; a response, a ``Failed`` packet and everything else go through
:func:`uet.fep.lanes.apply_response` / :func:`uet.fep.lanes.failed` (the sender's completion rule)
or to the SES initiator engine. Then the SES engines' completions become the core's events, and
waiting buffer-less receives are served from the unexpected lists (:mod:`uet.fep.receives`).
"""

from __future__ import annotations

from typing import Any, Final

from uet.fep.errors import DeliveryError
from uet.fep.events import MessageReceived, OpCompleted, OpFailed, SendCompleted, WriteCompleted
from uet.fep.lanes import OutMessage, apply_response, failed, unconfirmed
from uet.fep.receives import Waiter, _Posted
from uet.fep.state import FepState
from uet.pds import Acked, AckedRun, Failed, Mode, NackReceived, PdcClosed, PdcOpened
from uet.ses import events as ses_events
from uet.ses.errors import error_for
from uet.ses.initiator import SesAddress
from uet.ses.message import Message
from uet.wire.ses import ReturnCode

__all__ = ["Completions"]

_tnew: Final = tuple.__new__  # (Final: a C static in the compiled build, not a globals look-up)
_RC_OK: Final = int(ReturnCode.OK)
_SEND_KINDS: Final = frozenset({"send", "deferrable", "rendezvous"})
_MISSING: Any = object()
#: the PDS event classes of the drain loop (uet.pds.events is interpreted: a name imported from it
#: is a look-up in this module's globals at every use in the compiled build, a Final one a C static)
_ACKED: Final = Acked
_ACKED_RUN: Final = AckedRun


class Completions(FepState):
    """The completion half of :class:`~uet.fep.core.FepCore` (a mixin: the state is the core's,
    declared in :class:`~uet.fep.state.FepState`)."""

    def _drain_events(self, now: int) -> None:
        """Handle every pending PDS event (an eager packet's plain Acked takes an inlined fast
        path), then the SES engines' completions."""
        if not self.pds._events:  # nothing from PDS (most calls of a request/response exchange)
            if self._wq or self.ses.has_events():  # else _drain_ses has nothing to do
                self._drain_ses()
            return
        pds = self.pds
        dirty = self._dirty
        acked = 0
        # Events are dispatched on ``type(ev)`` kept in a local (one call per event on the data
        # path); mypy cannot narrow through that alias, so they are typed Any here, and the
        # message of a plain Acked is read through a typed name (``om``: the compiled build then
        # reads its fields natively, not through Python's generic attribute lookup). They are
        # taken off the PDS queue one by one (``take_events`` would give a new queue per drain,
        # the old one freed: about 1 k instructions a drain, one per ACK, in the compiled
        # build); an event a handler queued would be handled after them, as a second
        # ``take_events`` would (none does today).
        evs = pds._events
        om: OutMessage
        while evs:
            ev: Any = evs.popleft()
            t = type(ev)
            if t is _ACKED_RUN:  # (pds.acked_runs) packets of one token, implicitly Acked
                msg = ev[0]
                cnt: int = ev[1]
                if type(msg) is OutMessage:
                    om = msg
                    om.done += cnt
                    lane = om.lane
                    lane.inflight -= cnt
                    dirty[lane] = None
                    acked += cnt
                    if om.done >= om.submitted:
                        self._maybe_finish(om)
                    continue
                for _ in range(cnt):
                    self._on_event(_tnew(_ACKED, (msg, 0, b"")), now)
                continue
            if t is _ACKED:
                msg = ev[0]
                if not ev[1] and type(msg) is OutMessage:
                    om = msg
                    om.done += 1
                    lane = om.lane
                    lane.inflight -= 1
                    dirty[lane] = None
                    acked += 1
                    if om.done >= om.submitted:
                        self._maybe_finish(om)
                    continue
            self._on_event(ev, now)
        self._n_acked += acked
        self._drain_ses()

    def _on_event(self, ev: Any, now: int) -> None:
        t = type(ev)
        if t is Acked:
            msg = ev.token
            if type(msg) is not OutMessage:
                self._stats["packets_acked"] += 1
                self.ses.on_ack(msg, ev.response_next_hdr, ev.response, now)
                return
            self._packet_done(msg)
            apply_response(msg, ev.response_next_hdr, ev.response)
            self._maybe_finish(msg)
        elif t is Failed:
            msg = ev.token
            if type(msg) is not OutMessage:
                self.ses.on_failed(msg, ev.reason, ev.nack_code, now)
                return
            self._packet_done(msg)
            failed(msg, ev.reason, ev.nack_code)
            self._maybe_finish(msg)
        elif t is PdcOpened:
            self._stats["pdcs_opened"] += 1
        elif t is PdcClosed:
            self._stats["pdcs_closed"] += 1
            if ev.error:
                self._stats["pdcs_closed_in_error"] += 1
        elif t is NackReceived:
            self._stats["nacks_received"] += 1

    def _packet_done(self, msg: OutMessage) -> None:
        msg.done += 1
        self._stats["packets_acked"] += 1
        lane = msg.lane
        lane.inflight -= 1
        self._dirty[lane] = None

    def _maybe_finish(self, msg: OutMessage) -> None:
        if msg.finished or not msg.complete():
            return
        msg.finished = True
        self._unfinished.pop(msg.handle, None)
        if msg.regen is not None and msg.regen != msg.generation:
            self._resend_adopted(msg, msg.regen)
            return
        if unconfirmed(msg):
            msg.error = DeliveryError("RUDI: no response confirmed the whole message (the target lost its start)")
        if msg.abandoned and msg.error is None:  # pragma: no cover - abandon always sets an error
            msg.error = DeliveryError("message abandoned")
        elapsed = self._now - msg.t0
        st = self._stats
        if msg.error is not None:
            st["messages_failed"] += 1
            self._log("msg_fail", peer=msg.peer, msg_id=msg.mid, reason=str(msg.error), ns=elapsed)
            self._events.append(OpFailed(msg.handle, msg.error))
        else:
            st["messages_sent"] += 1
            st["bytes_sent"] += msg.length
            if self.event_log is not None:
                self._log("msg_done", peer=msg.peer, msg_id=msg.mid, bytes=msg.length, ns=elapsed)
            self._events.append(SendCompleted(msg.handle))
        msg.data = memoryview(b"")  # release the caller's buffer

    def _resend_adopted(self, msg: OutMessage, generation: int) -> None:
        """The target answered BAD_GENERATION with its current generation: nothing was executed,
        so the send adopts it and goes again at once, as every other operation does (§6.4; the
        SES initiator engine's rule, which takes the operation over with its retry budget)."""
        dest = SesAddress(msg.peer, msg.pid, msg.ri, generation, msg.job, msg.relative)
        self.ses.initiator.send(
            dest, msg.data, tag=msg.tag, header_data=msg.header_data, protocol="eager", mode=int(msg.mode),
            context=msg.handle,
        )  # fmt: skip
        self._ops[msg.handle] = None
        self.ses.initiator.counters["retries"] += 1

    # -- SES completions ----------------------------------------------------------------------------

    def _drain_ses(self) -> None:
        ses = self.ses
        if ses.has_events():
            out = self._events
            st = self._stats
            ev: Any = ses.next_event()  # dispatched on type(ev), as above
            while ev is not None:
                t = type(ev)
                if t is ses_events.RecvCompleted:
                    self._on_recv_completed(ev)
                elif t is ses_events.OpCompleted:
                    h = ev.context
                    st["ops_completed"] += 1
                    if h in self._ops:
                        into = self._ops.pop(h)
                        if ev.kind in _SEND_KINDS:
                            st["messages_sent"] += 1
                            out.append(SendCompleted(h))
                        else:
                            out.append(OpCompleted(h, ev.result if into is None else into))
                elif t is ses_events.OpFailed:
                    h = ev.context
                    st["ops_failed"] += 1
                    if self._ops.pop(h, _MISSING) is not _MISSING:
                        out.append(OpFailed(h, ev.error))
                elif t is WriteCompleted:
                    out.append(ev)
                ev = ses.next_event()
        if self._wq and ses.has_unexpected():
            self.waiters.serve()

    def _on_recv_completed(self, ev: ses_events.RecvCompleted) -> None:
        ctx = ev.context
        if type(ctx) is _Posted:
            if self._recvs.pop(ctx.handle, None) is None:
                return
            if ev.return_code != _RC_OK:
                self._events.append(OpFailed(ctx.handle, error_for(ev.return_code, "receive")))
                return
            tagged = ctx.posted is not None and ctx.posted.tagged
            m = Message(
                ctx.buffer[: ev.length], ev.source, 0, 0, 0, ev.initiator, ev.header_data,
                tag=ev.tag if tagged else None, message_length=ev.message_length,
            )  # fmt: skip
            self._events.append(MessageReceived(ctx.handle, self._delivered(m)))
        elif type(ctx) is Waiter:
            w = ctx
            posted = w.posted
            assert posted is not None and isinstance(posted.buffer, memoryview)  # (sized by Waiters.serve)
            m = Message(
                bytes(posted.buffer[: ev.length]), ev.source, 0, 0, 0, ev.initiator, ev.header_data,
                tag=ev.tag if w.tagged else None, message_length=ev.message_length,
            )  # fmt: skip
            waiters = self.waiters
            if w.cancelled or w.handle not in waiters.by_handle:
                # the receive was withdrawn: the message goes to the next receive
                if ev.return_code == _RC_OK:
                    self.ses.unexpected_messages.appendleft(m)
                return
            if ev.return_code != _RC_OK:
                # the message failed (expired, its deferral's restart never came...): the
                # recv() waits for the next one, as on the fast path (Waiters.give_back)
                waiters.give_back(w)
                return
            del waiters.by_handle[w.handle]
            self._events.append(MessageReceived(w.handle, self._delivered(m)))

    def _waiter_got(self, w: Waiter, m: Message) -> None:
        self._events.append(MessageReceived(w.handle, self._delivered(m)))

    def _delivered(self, m: Message) -> Message:
        st = self._stats
        st["messages_received"] += 1
        st["bytes_received"] += m.nbytes
        if self.event_log is not None:
            self._log("msg_rx", peer=m.source, msg_id=m.message_id, bytes=m.nbytes, mode=Mode(m.mode).name)
        return m
