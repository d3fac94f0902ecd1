"""One FEP's SES: memory table, resources, initiator and target engines wired together.

This is the object the endpoint drives (sans-I/O, like the PDS core): it gives the PDS core its
``on_deliver`` hook, takes the PDS ``Acked``/``Failed`` events, and hands out every request packet
either engine wants sent. The initiator and target share the memory table (a rendezvous send
registers its buffer there) and the target calls the initiator for rendezvous reads and RTRs, and
routes read-return data and RTRs that arrive as requests back to it (behaviour.md §6.5–§6.7).

**Unexpected-message fast path** (optional, ``fast=MessageConfig(...)``; the endpoint uses it).
The full target engine costs several times the per-packet CPU of the minimal message layer
(:mod:`uet.ses.segmenter`, :mod:`uet.ses.reassembly`), and bulk eager sends that arrive before a
receive is posted are the common case (``Endpoint.recv()`` posts no buffer). Such a message goes to the overflow
(unexpected) list anyway (§6.4), so the fast path *is* that list for eager sends:

* A packet is offered to the :class:`~uet.ses.reassembly.Reassembler` (``decline`` mode) first. It
  takes SEND/TAGGED_SEND packets with the standard header, version 0, no IE/DC, buffer offset 0,
  addressed to the default resource ``(pid, index)`` with its generation (and its JobID under
  relative addressing); everything else — and every message whose first-arriving packet finds a
  matching posted receive — is declined and handled by :class:`~uet.ses.target.SesTarget`. The
  decision is made once per message (``(source FA, message id)``) and remembered.
* A new message that finds no posted receive but a waiting receive without a buffer (the
  owner's ``recv()``, asked through :attr:`SesFep.reserve`) *reserves* that receive: one receive,
  one message, matched on the message's first-arriving packet as a posted buffer is (§6.3 step 5).
  It is reported on the expected list and handed to that receive when whole
  (:attr:`SesFep.on_reserved`); a reservation whose message is refused, fails or expires is given
  back. Every other new message is unexpected, within the byte limit below.
* A message completed on the fast path is bound at once (in ``on_deliver``) to the first posted
  receive that matches it (a receive posted while it was arriving); the copy into that buffer
  happens when the owner polls :meth:`next_event` (a :class:`RecvCompleted` with
  ``unexpected=True``). Otherwise it waits in :attr:`SesFep.unexpected_messages` for
  :meth:`take_unexpected` / :meth:`post_recv`.
* Its completing response is the message layer's ``RESPONSE``/``RC_OK`` with modified length =
  message length (the overflow list holds the whole message, so nothing is truncated here).

The fast-path unexpected list is bounded like the target engine's (``MatchLimits``): when the
messages waiting on it (each counted as its bytes plus :data:`ENTRY_OVERHEAD`) and a new message's
claimed length would pass ``max_unexpected_bytes``, the new message's first-arriving packet raises
:class:`uet.pds.SesNack`: PDS answers NACK ``NO_SES_MSG_AVAIL``, the transient shortage §2.6 step 7
prescribes, and the initiator resends it later — by then the application may have received some
(issue 15 item 15: 40,000 unreceived 4 KiB messages took 180 MB before). The check is made for
each new message against the messages already whole on the list; messages still arriving are
bounded by the reassembly budget (``MessageConfig.max_partial_bytes``) until they join it, so the
list holds at most ``max_unexpected_bytes`` plus what was in progress when it filled, which is at
most ``max_partial_bytes`` (messages that begin together each pass the check). Choice: in-progress
bytes are not charged to the list. Charging claimed lengths would let one stranger's packet
claiming a huge length hold the list for a reassembly timeout; charging each packet's bytes as it
arrives would NACK the rest of messages that began together, none of which could then complete
and make room (they would starve one another until they expire). The reassembly budget already
charges what arrived, per packet, so the total memory is bounded by the two limits together. A
message
that reserved a ``recv()`` is not unexpected and is not checked: if that receive is cancelled
before the message is whole, the message joins the list as it is (it cannot be refused any more).

Choices: arrival order is kept within each list; between a fast-path message and a message on
the target engine's own unexpected list (deferrable, rendezvous, medium-header, DC sends), a
receive takes the fast-path one first. Message ids of both initiator paths come from one space
(:meth:`alloc_message_id`), so ``(source, message id)`` never names two live messages.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from uet.pds.config import Mode, SesNack
from uet.ses.addressing import Resource, ResourceTable
from uet.ses.errors import SesError
from uet.ses.events import OpCompleted, OpFailed, OutPacket, RecvCompleted, WriteCompleted
from uet.ses.initiator import InitiatorConfig, SesInitiator
from uet.ses.matching import MatchLimits, PostedReceive, tag_matches
from uet.ses.memory import MemoryTable
from uet.ses.message import DECLINED, Message, MessageConfig, Reserved
from uet.ses.reassembly import Reassembler
from uet.ses.sink import ReceiveSink, receive_view
from uet.ses.target import SesTarget, TargetConfig
from uet.ses.unexpected import ENTRY_OVERHEAD, UnexpectedList
from uet.wire.ses import ReturnCode

_MODE_RUDI: Final = Mode.RUDI

__all__ = ["ENTRY_OVERHEAD", "SesFep"]

_RC_OK: Final = int(ReturnCode.OK)
_RC_TOO_LONG: Final = int(ReturnCode.TOO_LONG)


class SesFep:
    """SES for one Fabric Endpoint: ``initiator``, ``target``, ``memory``, ``resources``.

    With ``fast`` (a :class:`MessageConfig`) and ``default`` = ``(pid, index, job)``, the default
    resource is configured and the unexpected-message fast path (module docstring) is on; the
    owner sets :attr:`now` (ns) before feeding packets.
    """

    def __init__(
        self,
        address: str,
        *,
        initiator: InitiatorConfig | None = None,
        target: TargetConfig | None = None,
        limits: MatchLimits | None = None,
        rng: random.Random | None = None,
        fast: MessageConfig | None = None,
        default: tuple[int, int, int] | None = None,
    ) -> None:
        self.address = address
        rng = rng or random.Random()
        self.memory = MemoryTable(rng=rng)
        self.resources = ResourceTable(limits)
        self.initiator = SesInitiator(initiator, memory=self.memory, rng=rng)
        self.target = SesTarget(
            resources=self.resources, memory=self.memory, initiator=self.initiator, config=target, rng=rng
        )
        # the engines' completion queues and what they have in progress (each made once, never
        # replaced), held here too: the engines are interpreted classes, each attribute of theirs
        # a generic look-up in the compiled build, and :meth:`has_events` and :meth:`get_timer`
        # run at every pump (issue 28: 1.5 % of a 128-host permutation's instructions)
        self._ini_events = self.initiator._events
        self._tgt_events = self.target._events
        self._ini_ops: dict[int, Any] = self.initiator._ops
        self._tgt_recs: dict[Any, Any] = self.target._recs
        self._tgt_reserved: dict[int, list[Any]] = self.target._reserved_at
        self._tgt_deferrals: deque[Any] = self.target._deferrals
        #: the target's sync groups (the same dict: ``handle_timer`` tests it at every PDS timer,
        #: two generic look-ups through the interpreted engine otherwise)
        self._tgt_sync: dict[Any, Any] = self.target.sync._groups
        # and their packets ready to go, for :meth:`has_packets` (twice per endpoint flush)
        self._ini_ready: deque[Any] = self.initiator._ready
        self._tgt_out: deque[Any] = self.target._out
        #: current time (ns) for the target engine's reassembly bookkeeping; set by the owner
        self.now = 0
        self.default: Resource | None = None
        self.fast: Reassembler | None = None
        #: fast-path messages no receive has taken yet, in arrival order
        self.unexpected_messages: UnexpectedList = UnexpectedList()
        self._limits = limits or MatchLimits()
        self._bound: deque[tuple[Message, PostedReceive]] = deque()
        #: optional hook offered each completed fast-path message no posted receive took (the
        #: endpoint's waiting buffer-less receives); True = taken, else it joins the list
        self.on_unexpected: Callable[[Message], bool] | None = None
        #: optional hook asked ``(tagged, tag, initiator, source FA)`` when a new message finds no
        #: posted receive: the token of the oldest matching receive without a buffer, now
        #: *reserved* for this message alone (it waits for nothing else), or None. The message is
        #: then on the expected list (uet.ses.message.Reserved) and goes to that receive
        #: (:attr:`on_reserved`); with None it is unexpected
        self.reserve: Callable[[bool, int, int, str], Any] | None = None
        #: hook told what became of a reservation: ``(token, message)`` when its message is whole
        #: — True when the receive took it, False when it was withdrawn meanwhile (the message is
        #: then handled as any unexpected one) —, ``(token, None)`` when the message will never
        #: be whole (refused, failed, expired): the receive waits again
        self.on_reserved: Callable[[Any, Message | None], bool] | None = None
        #: optional hook called when the target engine has put a new entry on the default
        #: resource's unexpected list (a deferral, a rendezvous descriptor, a buffered DC or
        #: medium-header send): the owner serves its waiting receives without a buffer at once
        #: (:meth:`take_unexpected`), so they take messages in arrival order whichever path a
        #: message took, not the engine's entry after the fast-path messages of the same batch
        self.on_engine_unexpected: Callable[[], None] | None = None
        self._events: deque[RecvCompleted] = deque()
        #: first packets refused because the unexpected list was full (NACKed NO_SES_MSG_AVAIL)
        self.unexpected_full = 0
        #: whole messages the fast path took on the overflow (unexpected) list, and on the
        #: expected list for a waiting receive without a buffer (a reservation, :attr:`reserve`)
        self.unexpected_count = 0
        self.expected_waiting = 0
        if default is not None:
            pid, index, job = default
            self.default = self.resources.add(pid, index, job)
            if fast is not None:
                self.fast = Reassembler(
                    job_id=job, pid_on_fep=pid, resource_index=index, config=fast, decline=True, admit=self._admit
                )
                self.fast.on_reserved = self._reserved_done

    # -- PDS side ---------------------------------------------------------------------------------

    def on_deliver(self, delivery: Any) -> tuple[int, bytes] | tuple[int, bytes, bool] | None:
        """The PDS core's ``on_deliver`` hook: fast path first, then the target engine."""
        peer, mode, pdc, psn, nh, ses, pl, _ecn, retx = delivery
        pkt_id = psn if mode == _MODE_RUDI else None  # a RUDI request's packet id (uet.ses.replay)
        fast = self.fast
        if fast is not None:
            fast.now = self.now
            r = fast.deliver(peer, mode, nh, ses, pl, retx, pkt_id)
            if r is not DECLINED:
                if fast.completed or fast.receives:
                    self._settle_fast()
                return r
        if type(pl) is memoryview:  # the core's payload_views: the engine keeps bytes
            pl = pl.tobytes()
        res = self.default
        queued = len(res.matcher.unexpected) if res is not None else 0
        r2 = self.target.handle(peer, nh, ses, pl, mode=int(mode), pdc=pdc, now=self.now, retx=retx, pkt_id=pkt_id)
        if res is not None and len(res.matcher.unexpected) > queued and self.on_engine_unexpected is not None:
            self.on_engine_unexpected()
        return None if r2 is None else (r2.next_hdr, r2.data, r2.guaranteed)

    def on_ack(self, token: Any, response_next_hdr: int, response: bytes, now: int = 0) -> None:
        """PDS ``Acked`` for a packet from :meth:`packets_to_send` (read-return packets included)."""
        self.initiator.on_ack(token, response_next_hdr, response, now)

    def on_failed(self, token: Any, reason: str, nack_code: int | None = None, now: int = 0) -> None:
        """PDS ``Failed`` for a packet."""
        self.initiator.on_failed(token, reason, nack_code, now)

    def packets_to_send(self) -> list[OutPacket]:
        """Every request packet ready: the initiator's, then the target's read-return data."""
        return self.initiator.packets_to_send() + self.target.packets_to_send()

    def has_packets(self) -> bool:
        """Whether :meth:`packets_to_send` would return anything (cheap check for the owner)."""
        return bool(self._ini_ready or self._tgt_out)

    def alloc_message_id(self) -> int:
        """A message id from the initiator engine's space, for messages segmented outside it
        (the endpoint's eager fast path), so both never reuse a live id (§6.1)."""
        return self.initiator._alloc_msg_id()

    # -- receives ---------------------------------------------------------------------------------

    def post_recv(
        self,
        buffer: bytearray | memoryview | ReceiveSink,
        *,
        tagged: bool = False,
        tag: int = 0,
        ignore: int = 0,
        initiator: int | None = None,
        truncate: bool = False,
        context: Any = None,
        resource: Resource | None = None,
        source: str | None = None,
    ) -> PostedReceive:
        """Post a receive on ``resource`` (default: the default resource). A matching fast-path
        message is taken first (its :class:`RecvCompleted` is queued at once); else the target
        engine posts it (its own unexpected list is searched there). ``source``: a directed
        receive's Fabric Address, checked as well as ``initiator`` (:func:`_accepts`)."""
        res = resource or self.default
        if res is None:
            raise ValueError("no resource to post on")
        if res is self.default:
            for m in self.unexpected_messages:
                if _accepts(tagged, tag, ignore, initiator, m, source):
                    self.unexpected_messages.remove(m)
                    recv = PostedReceive(
                        receive_view(buffer), tagged, tag, ignore, initiator, None, truncate, context, source
                    )
                    self._fill(m, recv)
                    return recv
        return self.target.post_recv(
            res, buffer, tagged=tagged, tag=tag, ignore=ignore, initiator=initiator, truncate=truncate, context=context,
            source=source,
        )  # fmt: skip

    def cancel_recv(self, recv: PostedReceive, resource: Resource | None = None) -> bool:
        """Cancel a posted receive (a ``CANCELLED`` completion follows); False if already taken."""
        res = resource or self.default
        return res is not None and self.target.cancel_recv(res, recv)

    def take_unexpected(
        self,
        *,
        tagged: bool,
        tag: int = 0,
        ignore: int = 0,
        initiator: int | None = None,
        context: Any = None,
        source: str | None = None,
    ) -> Message | PostedReceive | None:
        """A receive without a buffer (the endpoint's ``recv()``): the first matching fast-path
        message (returned), else the first matching entry of the target engine's unexpected list,
        for which a receive of exactly its length is posted (returned; its completion follows as a
        :class:`RecvCompleted`), else None. ``source`` (a Fabric Address) restricts both to
        messages that arrived from it (see :func:`_accepts`).

        The memory of a receive without a buffer is the endpoint's, bounded as the fast path's
        reassembly is (``MessageConfig.max_message``): an engine entry claiming more (a deferral
        or a rendezvous descriptor costs the target nothing until a receive takes it) is left for
        a receive posted with a buffer that holds it, so one packet claiming 4 GiB cannot make a
        ``recv()`` allocate 4 GiB (choice: the notes set no limit; the deferral then waits as it
        would with no receive at all)."""
        for m in self.unexpected_messages:
            if _accepts(tagged, tag, ignore, initiator, m, source):
                self.unexpected_messages.remove(m)
                return m
        res = self.default
        if res is None:
            return None
        most = self.fast.config.max_message if self.fast is not None else MessageConfig.max_message
        for u in res.matcher.unexpected:
            if u.length > most or (source is not None and u.source != source):
                continue
            if u.tagged == tagged and (not tagged or tag_matches(tag, u.tag, ignore)):
                if initiator is None or initiator == u.initiator:
                    # exact tag and source: the matcher binds this very entry (the first one so)
                    return self.target.post_recv(
                        res, bytearray(u.length), tagged=tagged, tag=u.tag, initiator=u.initiator, context=context
                    )
        return None

    def has_unexpected(self) -> bool:
        """Whether either unexpected list holds anything (for the owner's no-buffer receives)."""
        return bool(self.unexpected_messages) or (self.default is not None and bool(self.default.matcher.unexpected))

    # -- events and timers --------------------------------------------------------------------------

    def next_event(self) -> OpCompleted | OpFailed | RecvCompleted | WriteCompleted | None:
        """Initiator completions first, then fast-path receive completions, then the target's."""
        ev = self.initiator.next_event()
        if ev is not None:
            return ev
        while self._bound:
            m, recv = self._bound.popleft()
            self._fill(m, recv)
        if self._events:
            return self._events.popleft()
        return self.target.next_event()

    def has_events(self) -> bool:
        """Whether :meth:`next_event` would return something (cheap check for the owner's pump)."""
        return bool(self._ini_events or self._bound or self._events or self._tgt_events)

    def get_timer(self) -> int | None:
        """Earliest deadline of either engine (retry backoff, RTR wait, reassembly expiry, a
        remembered deferral's expiry)."""
        if not self._ini_ops and not self._tgt_recs and not self._tgt_reserved and not self._tgt_deferrals:
            return None  # nothing in progress: skip the scans (called once per endpoint pump)
        ts = [t for t in (self.initiator.get_timer(), self.target.get_timer()) if t is not None]
        return min(ts) if ts else None

    def handle_timer(self, now: int) -> None:
        """Fire due timers of both engines (the fast path is swept by :meth:`expire`). With
        nothing in progress in either (no operation, message, reservation, deferral or sync
        group) both would do nothing: they are not called (the FEP core calls this at every
        timer of the PDS, thousands per run, and the engines are interpreted code)."""
        tgt = self.target
        if (
            not self._ini_ops
            and not self._tgt_recs
            and not self._tgt_reserved
            and not self._tgt_deferrals
            and not self._tgt_sync
        ):
            return
        self.initiator.handle_timer(now)
        tgt.handle_timer(now)

    def expire(self, now: int) -> None:
        """Housekeeping: drop idle partial fast-path messages (reassembly timeout, §6.1)."""
        fast = self.fast
        if fast is not None:
            fast.expire(now)
            if fast.receives:
                self._settle_fast()

    @property
    def counters(self) -> dict[str, int]:
        """Initiator (``init_``), target (``tgt_``) and fast-path (``fast_``) counters."""
        out = {"init_" + k: v for k, v in self.initiator.counters.items()}
        out.update({"tgt_" + k: v for k, v in self.target.counters.items()})
        if self.fast is not None:
            out.update({"fast_" + k: v for k, v in self.fast.counters.items()})
            out["fast_unexpected_full"] = self.unexpected_full
            out["fast_unexpected"] = self.unexpected_count
            out["fast_expected_waiting"] = self.expected_waiting
            out["fast_unexpected_bytes"] = self.unexpected_messages.nbytes
        return out

    # -- internals ----------------------------------------------------------------------------------

    def _admit(self, tagged: bool, tag: int, initiator: int, job: int, length: int, peer: str) -> Any:
        """Where a new message on the default resource goes (asked at its first-arriving packet):

        * no posted receive matches it → a :class:`~uet.ses.message.Reserved` when
          :attr:`reserve` reserved a waiting receive without a buffer for it (reassembled as on
          the overflow path, reported on the expected list, handed to that receive); else True:
          the overflow (unexpected) fast path, within ``max_unexpected_bytes`` (beyond it
          :class:`~uet.pds.SesNack`);
        * the first matching receive has room for the whole message → that receive, consumed
          from the posted list: the fast path places the message straight into its buffer
          (expected list, §6.4);
        * otherwise (a receive that would truncate or is too short, or one restricted to another
          job) → False: the target engine handles the whole message and its errors."""
        res = self.default
        assert res is not None
        first = res.matcher.first_posted(tagged, tag, initiator, peer)
        if first is None:
            reserve = self.reserve
            if reserve is not None:
                token = reserve(tagged, tag, initiator, peer)
                if token is not None:
                    return Reserved(token)
            if self.unexpected_messages.nbytes + length + ENTRY_OVERHEAD > self._limits.max_unexpected_bytes:
                self.unexpected_full += 1
                raise SesNack(f"unexpected list full ({self.unexpected_messages.nbytes} bytes)")
            return True
        if len(first.buffer) < length or (first.job is not None and first.job != job):
            return False
        recv = res.matcher.match(tagged=tagged, tag=tag, initiator=initiator, job=job, source=peer)
        assert recv is first
        return recv

    def _settle_fast(self) -> None:
        """Completed fast-path messages: bind to a matching posted receive, else keep unexpected."""
        fast = self.fast
        res = self.default
        assert fast is not None and res is not None
        while fast.receives:
            recv, rc, m = fast.receives.popleft()
            self._events.append(
                RecvCompleted(recv.id, recv.context, rc, m.nbytes, m.message_length, m.source, m.initiator,
                              m.tag or 0, m.header_data, False)
            )  # fmt: skip
        while fast.completed:
            self.unexpected_count += 1
            self._arrived(fast.completed.popleft())

    def _arrived(self, m: Message) -> None:
        """A whole fast-path message no receive was reserved for: the first matching posted
        receive (one posted while it arrived), else a waiting receive without a buffer, else the
        unexpected list."""
        res = self.default
        assert res is not None
        try:
            recv = res.matcher.match(
                tagged=m.tag is not None, tag=m.tag or 0, initiator=m.initiator, job=m.job_id, source=m.source
            )
        except SesError:  # a receive restricted to another job: leave the message unexpected
            recv = None
        if recv is None:
            offer = self.on_unexpected
            if offer is None or not offer(m):
                self.unexpected_messages.append(m)
        else:
            self._bound.append((m, recv))

    def _reserved_done(self, token: Any, m: Message | None) -> None:
        """``Reassembler.on_reserved``: tell the owner (:attr:`on_reserved`); a whole message
        whose receive was withdrawn meanwhile is then handled as any unexpected one."""
        done = self.on_reserved
        assert done is not None  # (reservations come from the owner's reserve hook)
        if m is None:
            done(token, None)
        else:
            self.expected_waiting += 1
            if not done(token, m):
                self._arrived(m)

    def _fill(self, m: Message, recv: PostedReceive) -> None:
        """Copy a fast-path message into a receive buffer (truncation rules of §6.4)."""
        room = len(recv.buffer)
        n = m.nbytes
        if n > room and not recv.truncate:
            rc, placed = _RC_TOO_LONG, 0
        else:
            rc, placed = _RC_OK, min(n, room)
            if placed:
                recv.buffer[:placed] = memoryview(m.data)[:placed]
        self._events.append(
            RecvCompleted(recv.id, recv.context, rc, placed, n, m.source, m.initiator, m.tag or 0, m.header_data, True)
        )


def _accepts(tagged: bool, tag: int, ignore: int, initiator: int | None, m: Message, source: str | None = None) -> bool:
    """Whether fast-path message ``m`` matches a receive. A directed receive names its source
    twice: the SES ``initiator`` ID (§6.4) and, when given, the Fabric Address the message really
    came from (its PDC's peer). The ID is only a claim in the header, so a copy of A's packet sent
    by another FEP carries A's ID; the address is what PDS established, and both must agree."""
    if (m.tag is not None) != tagged:
        return False
    if tagged and not tag_matches(tag, m.tag or 0, ignore):
        return False
    if source is not None and m.source != source:
        return False
    return initiator is None or initiator == m.initiator
