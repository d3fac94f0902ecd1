"""The target half of the SES message layer (sans-I/O): reassembly of the SES standard requests
:class:`uet.ses.segmenter.Segmenter` sends. :class:`uet.ses.fep.SesFep` runs :class:`Reassembler`
in ``decline`` mode as the unexpected (overflow) list for eager messages that arrive before a
receive is posted, handing every other request to :class:`uet.ses.target.SesTarget`.

The target side places each packet at ``message_offset`` in a buffer of
``request_length`` bytes and answers through the PDS core's ``on_deliver`` hook: nothing (a plain
ACK / default response) for packets that do not finish a message, and an SES ``RESPONSE`` with
``RC_OK`` and ``modified_length`` = bytes placed for the packet that completes it; errors are
answered with the return code the reference would use (§6.3, §6.9) and ``modified_length`` 0.
The response's ``list`` field says where the message went (behaviour.md §6.4): 0 when it was
placed into a posted receive (the expected list), 1 when it was buffered for a later receive (the
overflow list) — a guaranteed-delivery response, which PDS keeps until the initiator clears its
PSN (§2.7). A receive without a buffer (the endpoint's ``recv()``) that is waiting when the
message's first packet arrives counts as posted: ``admit`` reserves it for that message alone
(:class:`~uet.ses.message.Reserved`), the message is reassembled in this layer's buffer, reported
on the expected list and handed to that receive (``on_reserved``); choice: the application posted
the receive before the message came, only the buffer is the provider's.

Choices where the spec notes are silent (behaviour.md §6.1, §6.9):

* The completing ``RESPONSE`` is generated for the packet that completes the message, which is the
  EOM packet whenever packets arrive in order (always in ROD). In RUD the EOM packet may arrive
  before earlier packets; answering the EOM packet with ``RC_OK`` would then claim bytes that have
  not arrived, so the response travels with whichever packet completes the message. Initiators
  must not depend on seeing that explicit response either: an ACK carrying a non-guaranteed
  response may be lost and replaced by a cumulative ACK (behaviour.md §6.9, "implicit
  acknowledgement by CACK counts as success").
* Reassembly key is ``(source FA, message_id)``: message ids are unique among an initiator's
  outstanding messages across all of its PDCs (the reference allocates one 16-bit space per
  instance, §6.1), and RUDI requests have no PDC at all.
* Duplicates within a message being reassembled are recognised by their exact
  ``(message_offset, length)``; an overlapping packet with a different extent is an error
  (``RC_OP_VIOLATION``).
* Duplicates of a message already completed (issue 15, conformance finding SES-020): only what
  PDS lets through can be one. RUD and ROD remove duplicate packets by PSN before SES sees them
  (behaviour.md §2.6 step 5, "duplicates are never delivered to SES"), and every packet of a
  completed message has been delivered, so a RUD/ROD packet is **never** taken for a duplicate of
  a completed message: a new message reusing the id (on any PDC, after the 16-bit space wrapped)
  is always a new message. RUDI (at least once, §2.14) keeps a time-scoped memory of completed
  ``(source, message id)``s with the range of RUDI packet ids their packets carried
  (:mod:`uet.ses.replay`): a packet of such a message whose packet id lies in that range is a
  copy, answered again with the same response and not delivered twice; any other packet id is a
  new message reusing the id. UUD has no packet id: a UUD packet whose id completed within
  ``completed_ttl_ns`` is still taken for a copy (see uet.ses.replay for why).
* UUD is single-packet in the reference (§2.15); this layer also segments UUD messages (best
  effort: a message with a lost packet is never delivered and its partial buffer expires).
"""

from __future__ import annotations

import mmap
import sys
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from uet.pds.config import SesNack
from uet.ses import message as _message
from uet.ses.message import (
    _EXPECTED,
    _F_EOM,
    _F_HD,
    _F_IE_DC,
    _F_REL,
    _F_SOM,
    _MID_UNPACK,
    _MODE_UUD,
    _NH_RESPONSE,
    _OVERFLOW,
    _RC_DROPPED,
    _RC_OK,
    _SEND,
    _SOM_UNPACK,
    _TSEND,
    Declined,
    Message,
    MessageConfig,
    Reserved,
)
from uet.ses.packets import build_response
from uet.ses.replay import IdRange, is_copy, widen
from uet.ses.sink import ReceiveSink
from uet.wire.ses import RESPONSE, ResponseOpcode, ReturnCode

__all__ = ["Reassembler"]

#: the message layer's constants its per-packet paths read, as this module's own ``Final`` names:
#: a name imported from an interpreted module (uet.ses.message is one) is a look-up in the module's
#: globals at every use in the compiled build, a ``Final`` one of a compiled module a C static
#: (about six look-ups a packet: issue 28)
_DATA_END: Final = _message._DATA_END
_DATA_LENGTHS: Final = _message._DATA_LENGTHS
_MID_LENGTHS: Final = _message._MID_LENGTHS
_MID_PREFIX: Final = _message._MID_PREFIX
_MODE_RUDI: Final = _message._MODE_RUDI
_NH_STANDARD: Final = _message._NH_STANDARD
_SES_SIZE: Final = _message._SES_SIZE
MAX_WIRE_PAYLOAD: Final = _message.MAX_WIRE_PAYLOAD
DECLINED: Final = _message.DECLINED
#: a CC request's PDS header is this much longer than a request's (wire-format.md §5.2)
_CC_SHIFT: Final = 4


#: ``madvise(MADV_POPULATE_WRITE)`` (Linux ≥ 5.14): fault a range of a reassembly buffer in with
#: one system call instead of one page fault per 4 KiB page while packets are copied in.
_MADV_POPULATE_WRITE: Final = getattr(mmap, "MADV_POPULATE_WRITE", 23 if sys.platform == "linux" else None)
#: Bytes of a reassembly buffer populated ahead at a time (one transparent huge page).
_POPULATE_CHUNK: Final = 2 << 20
#: the least a populate step covers (a message's first step: see ``Reassembler._populate``)
_POPULATE_MIN: Final = 64 << 10
_MADV_HUGEPAGE: Final = getattr(mmap, "MADV_HUGEPAGE", None)
_MADV_NOHUGEPAGE: Final = getattr(mmap, "MADV_NOHUGEPAGE", None)


def _advise(buf: mmap.mmap, advice: int | None) -> None:
    """``madvise`` the whole buffer where the platform has ``advice`` (THP hints)."""
    if advice is not None:
        try:
            buf.madvise(advice)
        except OSError:  # pragma: no cover - THP disabled
            pass


_MAP_FLAGS: Final = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
#: ``build_response`` of a plain RESPONSE without its keyword call (the one-packet message's path)
_RESP_ENCODE: Final = RESPONSE.encode
_RESP_OP: Final = int(ResponseOpcode.RESPONSE)


@dataclass
class _Partial:
    """A message being reassembled.

    Packets are kept as the ``bytes`` objects PDS delivered, by message offset, and joined once
    when the application reads :attr:`Message.data`: one copy into memory that is never
    zero-filled, instead of zero-filling a ``bytearray(request_length)`` up front and copying each
    packet into it (measured 23 ms vs 33 ms of CPU for 32 MiB in 8 KiB packets on the project
    machine), and none of it inside ``on_deliver``.
    """

    live: bool
    length: int
    mode: int
    job_id: int
    initiator: int
    last_ns: int
    received: int = 0
    #: message offset → the packet's bytes (segmented) or its length (in place)
    segments: dict[int, Any] = field(default_factory=dict)
    header_data: int | None = None
    error: int = 0
    tag: int | None = None
    #: in-place reassembly (``MessageConfig.inplace_threshold``): the buffer, a writable view of
    #: it (or the posted receive's memory: a view of its buffer or a receive sink, uet.ses.sink),
    #: and how far its pages are populated
    buf: mmap.mmap | None = None
    view: memoryview | ReceiveSink | None = None
    ahead: int = 0
    #: bytes this message has charged to ``Reassembler._partial_bytes`` (MessageConfig.max_partial_bytes)
    charged: int = 0
    #: the posted receive (:class:`uet.ses.matching.PostedReceive`) whose buffer the message is
    #: placed into, when it matched one (expected list); None on the overflow path
    recv: Any = None
    #: the response's ``list`` field for this message: 1 overflow, 0 expected (a receive waited)
    list_: int = 1
    #: the token of the buffer-less receive reserved for this message (:class:`Reserved`), or None
    reserved: Any = None
    #: its in-place buffer was advised to use 2 MiB pages (after a chunk arrived)
    huge: bool = False
    #: RUDI: the range of packet ids its packets carried (uet.ses.replay)
    ids: IdRange = None
    #: SES header bytes 0–33 of the last middle packet accepted, with the resource generation
    #: then (:meth:`Reassembler.deliver`'s fast path; b"": none yet)
    prefix: bytes = b""
    gen: int = 0


#: the builtin, bound once (see uet.pds.target ``_memoryview``)
_memoryview: Final = memoryview


class Reassembler:
    """Target half of the message layer: the ``on_deliver`` logic for SES standard requests.

    Feed every delivered packet to :meth:`deliver` (the PDS core calls it through the endpoint's
    ``on_deliver`` hook); completed messages queue on :attr:`completed`. Set :attr:`now` (ns)
    before feeding packets and call :meth:`expire` from time to time so idle partial messages are
    dropped. Counters say what was dropped and why.
    """

    def __init__(
        self,
        *,
        job_id: int = 0,
        pid_on_fep: int = 0,
        resource_index: int = 0,
        config: MessageConfig | None = None,
        decline: bool = False,
        admit: Callable[[bool, int, int, int, int, str], Any] | None = None,
    ) -> None:
        self.config = config or MessageConfig()
        #: fast-path mode (:class:`uet.ses.fep.SesFep`): packets this layer does not handle are
        #: answered :data:`DECLINED` instead of an error, so the full SES target can take them
        self.decline = decline
        #: asked ``(tagged, tag, initiator, job, request_length, peer)`` for the first packet of a
        #: new message in ``decline`` mode: True takes it on the overflow path, a
        #: :class:`Reserved` the same way but reported on the expected list and handed to the
        #: reserved receive without a buffer (:attr:`on_reserved`), False declines the whole
        #: message, and a posted receive (already removed from its list) places it straight into
        #: that receive's buffer (see :attr:`receives`)
        self.admit = admit
        #: told ``(token, message)`` when a message that reserved a receive (:class:`Reserved`)
        #: is whole, instead of queuing it on :attr:`completed`; ``(token, None)`` when it never
        #: will be (its first packet refused, the message failed or expired): the receive is
        #: free again. Set whenever ``admit`` may answer :class:`Reserved`.
        self.on_reserved: Callable[[Any, Message | None], None] | None = None
        #: the resource generation requests must carry (others are declined, §6.3 step 4)
        self.generation = 0
        self._slow: OrderedDict[tuple[str, int], None] = OrderedDict()
        self.job_id = job_id
        self.pid_on_fep = pid_on_fep
        self.resource_index = resource_index
        self.now = 0
        self.completed: deque[Message] = deque()
        #: posted receives this layer finished, in order: ``(receive, return code, message)``;
        #: the message's ``data`` is a view of the receive's buffer (empty on an error) and its
        #: ``message_length`` the sender's length
        self.receives: deque[tuple[Any, int, Message]] = deque()
        self._partial: dict[tuple[str, int], _Partial] = {}
        self._partial_bytes = 0
        #: completed messages: (return code, modified length, JobID, time, list, RUDI packet ids)
        self._done: OrderedDict[tuple[str, int], tuple[int, int, int, int, int, IdRange]] = OrderedDict()
        self._packets = 0
        #: payload bytes placed (duplicates not counted): progress as packets arrive
        self._bytes = 0
        #: the fast path's one-entry cache (:meth:`deliver`): the last non-SOM packet's message
        self._last_rec: _Partial | None = None
        self._last_peer = ""
        self._last_prefix = b""
        self._last_gen = 0
        self._counters: dict[str, int] = {
            "messages": 0,
            "duplicate_packets": 0,
            "duplicate_after_complete": 0,
            "errors": 0,
            "expired": 0,
        }

    # -- the hot path --------------------------------------------------------------------------

    def deliver(
        self,
        peer: str,
        mode: int,
        next_hdr: int,
        ses: bytes | memoryview,
        payload: bytes | memoryview,
        retx: bool = False,
        pkt_id: int | None = None,
    ) -> tuple[int, bytes] | Declined | None:
        """Place one packet; return the SES response for the PDS core (None = default), or
        :data:`DECLINED` in ``decline`` mode for a packet the full SES target must handle. Every
        check of the header is made, in the target's order (the bulk of a message usually
        arrives through :meth:`deliver_datagram` instead). ``retx`` is the PDS ``retx`` flag;
        ``pkt_id`` the RUDI packet id (a RUDI copy of a completed message is told from a new
        message reusing its id by it, see the module docstring).

        Fast path (:meth:`_continue`): a middle packet of a message whose last accepted middle
        packet had the same SES header bytes 0–33 is placed without the checks of those bytes."""
        self._packets += 1
        if next_hdr == _NH_STANDARD and mode != _MODE_RUDI and len(ses) == _SES_SIZE:
            rec = self._partial.get((peer, (ses[2] << 8) | ses[3]))  # (peer, message_id)
            if (
                rec is not None
                and rec.live
                and rec.gen == self.generation
                and ses[:_MID_PREFIX] == rec.prefix
                and self._continue(rec, ses, _MID_PREFIX, payload, self.now)
            ):
                return None
        return self._deliver(peer, mode, next_hdr, ses, payload, retx, pkt_id)

    def _continue(self, rec: _Partial, hdr: bytes | memoryview, at: int, payload: bytes | memoryview, now: int) -> bool:
        """Place a packet of message ``rec`` (same peer and message id) whose SES header equals the
        last middle packet :meth:`_deliver` accepted for it in bytes 0–33 (``rec.prefix``:
        everything but ``payload_length``, ``message_offset`` and ``request_length``, whose
        checks passed for it), not RUDI (no packet ids to widen), the resource generation
        unchanged (``rec.gen``), when it is what :meth:`_place`
        would place without a branch: lengths that agree, in bounds, on bytes not yet received,
        near the in-order front of an in-place buffer or receive memory, not completing the
        message. Then it changes exactly what :meth:`_deliver` would (placed bytes, segment,
        received count, time ``now``, byte counter) and returns True; otherwise False, having
        changed nothing (the general path follows). The header's length fields are read from
        ``hdr`` at ``at`` (the SES header, or :meth:`deliver_datagram`'s whole datagram, which
        takes the same rule); ``tests/test_sim_fastpaths.py`` and ``tests/test_pds_receive_batch.py``
        check both callers against the general path."""
        lens: tuple[int, int, int] = _MID_LENGTHS(hdr, at)  # (typed: native ints when compiled)
        plen, off, length = lens
        n = len(payload)
        view = rec.view
        end = off + n
        if (
            (plen == n or (n > MAX_WIRE_PAYLOAD and not plen))
            and length == rec.length
            and view is not None
            and rec.received + n < length
            and end <= length
            and off not in rec.segments
        ):
            ahead = rec.ahead
            if end > ahead:
                if off > ahead + _POPULATE_CHUNK:
                    return False  # far ahead of the in-order front: the general path
                self._populate(rec, end)
            if isinstance(view, ReceiveSink):  # its write without a slice object: end <= length == len(view)
                if n:
                    view.place(off, payload)
            else:
                view[off:end] = payload
            rec.segments[off] = n
            rec.received += n
            rec.last_ns = now
            self._bytes += n
            return True
        return False

    def deliver_datagram(self, peer: str, next_hdr: int, data: bytes, ses_end: int, now: int) -> Any:
        """The PDS core's lean hook (``PdsCore.on_data``): one in-order packet of a predicted run,
        or any request a PDC accepted (offered first, before :meth:`deliver`), as the whole
        datagram (SES header at bytes 12 to ``ses_end``, then the payload).

        It places the packet only when it is the expected continuation of the message the last
        accepted middle packet belonged to: its SES header bytes 0–33 (everything but
        ``payload_length``, ``message_offset`` and ``request_length``) equal that packet's, which
        passed every header check; it comes from the same peer, the resource generation is
        unchanged, its length fields agree, it lands in bounds on bytes not yet received, near the
        in-order front of an in-place buffer, and does not complete the message. Then it returns
        None (default response). Anything else returns :data:`DECLINED` having changed nothing,
        and the packet comes back through :meth:`deliver`. ``SesNack`` (reassembly memory
        exhausted) is raised before anything changes."""
        return self._deliver_at(peer, next_hdr, data, ses_end, now, 0)

    def deliver_cc_datagram(self, peer: str, next_hdr: int, data: bytes, ses_end: int, now: int) -> Any:
        """:meth:`deliver_datagram` of a request with CC state (``PdsCore.on_cc_data``): the
        SES header at bytes 16 to ``ses_end`` (the CC request's 16-byte PDS header before it)."""
        return self._deliver_at(peer, next_hdr, data, ses_end, now, _CC_SHIFT)

    def _deliver_at(self, peer: str, next_hdr: int, data: bytes, ses_end: int, now: int, shift: int) -> Any:
        """:meth:`deliver_datagram` with the SES header ``shift`` bytes after byte 12."""
        rec = self._last_rec
        end = _DATA_END + shift
        if (
            rec is not None
            and rec.live
            and ses_end == end
            and next_hdr == _NH_STANDARD
            and data.startswith(self._last_prefix, 12 + shift)
            and peer == self._last_peer
            and self.generation == self._last_gen
            and self._continue(
                rec,
                data,
                _DATA_LENGTHS + shift,
                # receive memory that digests (uet.ses.sink) copies what it is given to bytes:
                # a slice of the datagram is that copy, without a view first (issue 28)
                data[end:] if isinstance(rec.view, ReceiveSink) else _memoryview(data)[end:],
                now,
            )
        ):
            self._packets += 1
            return None
        return DECLINED

    def _deliver(
        self,
        peer: str,
        mode: int,
        next_hdr: int,
        ses: bytes | memoryview,
        payload: bytes | memoryview,
        retx: bool = False,
        pkt_id: int | None = None,
    ) -> tuple[int, bytes] | Declined | None:
        """The general path of :meth:`deliver`: every check of the header, in the target's order."""
        if next_hdr != _NH_STANDARD or len(ses) < _SES_SIZE:
            if self.decline:
                return DECLINED
            return self._error(ReturnCode.UNSUPPORTED_OP, 0, 0, "bad_header")
        n = len(payload)
        som = ses[1] & _F_SOM
        if som:
            op, ver, flags, mid, gen, job, pid, ri, bo, init, mb, hdata, length = _SOM_UNPACK(ses)
            off = 0
        else:
            op, ver, flags, mid, gen, job, pid, ri, bo, init, mb, plen, off, length = _MID_UNPACK(ses)
        if self.decline and (
            (op != _SEND and op != _TSEND)
            or ver
            or bo
            or flags & _F_IE_DC
            or gen != self.generation
            or pid != self.pid_on_fep
            or ri != self.resource_index
            or (flags & _F_REL and job != self.job_id)
        ):
            rec = self._partial.get((peer, mid))
            if rec is None:
                return DECLINED
            return self._fail((peer, mid), rec, ReturnCode.OP_VIOLATION, "changed_header")
        if not som and plen != n and (n <= MAX_WIRE_PAYLOAD or plen):
            return self._fail_key(peer, mid, job, ReturnCode.OP_VIOLATION, "bad_payload_length")
        if (
            (op != _SEND and op != _TSEND)
            or ver
            or (flags & _F_REL and (pid != self.pid_on_fep or ri != self.resource_index or job != self.job_id))
        ):
            return self._bad_request(op, ver, pid, ri, job, mid)
        key = (peer, mid)
        rec = self._partial.get(key)
        if rec is None:
            done = self._done.get(key) if mode == _MODE_RUDI or mode == _MODE_UUD else None
            if done is not None and is_copy(done[5], pkt_id):
                # A copy of a packet of a message already delivered (RUDI retransmission, UUD
                # duplicate: no packet id, ``pkt_id`` None): answer it again; RUD/ROD never get
                # here (PDS removed duplicates by PSN).
                self._counters["duplicate_after_complete"] += 1
                return _NH_RESPONSE, build_response(
                    done[0], message_id=mid, job_id=job, modified_length=done[1], list_=done[4]
                )
            lst = _OVERFLOW
            reserved = None
            if self.decline:
                slow = self._slow
                if key in slow:
                    return DECLINED
                admit = self.admit
                if admit is not None:
                    took = admit(op == _TSEND, mb, init, job, length, peer)
                    if type(took) is Reserved:
                        lst = _EXPECTED
                        reserved = took.token
                        took = True
                    if not took:
                        slow[key] = None
                        if len(slow) > self.config.completed_max:
                            slow.popitem(last=False)
                        return DECLINED
                    if took is not True:
                        # expected list: a posted receive with room for the whole message; its
                        # buffer is the application's, so no reassembly budget is charged
                        rec = _Partial(True, length, mode, job, init, self.now, tag=mb if op == _TSEND else None)
                        rec.recv = took
                        rec.view = took.buffer[:length]
                        rec.ahead = length
                        self._partial[key] = rec
                        if mode == _MODE_RUDI:
                            rec.ids = widen(None, pkt_id)
                        if som and flags & _F_EOM and length == n:
                            if n:
                                rec.view[:n] = payload
                            if flags & _F_HD:
                                rec.header_data = hdata
                            return self._complete(key, rec, mid, None)
        if rec is None:
            if length > self.config.max_message:
                self._unreserve(reserved)
                return self._fail_key(peer, mid, job, ReturnCode.TOO_LONG, "too_long", length)
            cap = self.config.max_partial_bytes
            if len(self._partial) >= self.config.max_partial or length > cap or self._partial_bytes + n > cap:
                # Transient shortage: ask PDS to NACK (NO_SES_MSG_AVAIL) so the packet is resent
                # later instead of failing the message (behaviour.md §2.6 step 7, §6.9).
                self._count("no_reassembly_slot")
                self._unreserve(reserved)
                raise SesNack(f"no reassembly slot for message {mid} from {peer}")
            if length == n and som and flags & _F_EOM:
                # One-packet message: no buffer, no bookkeeping beyond the duplicate memory.
                return self._complete_single(
                    key, payload, mode, job, init, hdata if flags & _F_HD else None, mb if op == _TSEND else None,
                    lst, widen(None, pkt_id) if mode == _MODE_RUDI else None, reserved,
                )  # fmt: skip
            rec = _Partial(True, length, mode, job, init, self.now, tag=mb if op == _TSEND else None)
            rec.list_ = lst
            rec.reserved = reserved
            if length >= self.config.inplace_threshold:
                rec.buf = mmap.mmap(-1, length, flags=_MAP_FLAGS) if _MAP_FLAGS else mmap.mmap(-1, length)
                # 4 KiB pages until the message has delivered a chunk (``_populate`` then asks for
                # 2 MiB pages): under THP "always" a first packet would fault in 2 MiB at once
                _advise(rec.buf, _MADV_NOHUGEPAGE)
                rec.view = memoryview(rec.buf)
            self._partial[key] = rec
        elif rec.error:
            return _NH_RESPONSE, build_response(rec.error, message_id=mid, job_id=job, modified_length=0)
        elif length != rec.length:
            return self._fail(key, rec, ReturnCode.OP_VIOLATION, "length_changed")
        if not som and not flags & _F_EOM:  # the checked header, for the next packets
            prefix = ses[:_MID_PREFIX] if type(ses) is bytes else bytes(ses[:_MID_PREFIX])
            rec.prefix = prefix  # (:meth:`deliver`'s fast path)
            rec.gen = self.generation
            if type(ses) is bytes:  # (:meth:`deliver_datagram`'s one-entry cache)
                self._last_rec = rec
                self._last_peer = peer
                self._last_prefix = prefix
                self._last_gen = self.generation
        if mode == _MODE_RUDI:
            rec.ids = widen(rec.ids, pkt_id)
        return self._place(key, rec, off, n, payload, som, flags, hdata if som else 0)

    def _place(
        self,
        key: tuple[str, int],
        rec: _Partial,
        off: int,
        n: int,
        payload: bytes | memoryview,
        som: int,
        flags: int,
        hdata: int,
    ) -> tuple[int, bytes] | None:
        """Place a checked packet of a message being reassembled (duplicates, bounds, EOM at the
        end) and complete the message when it is whole."""
        length = rec.length
        rec.last_ns = self.now
        seg = rec.segments
        have = seg.get(off)
        if have is not None:
            if (have if type(have) is int else len(have)) == n:
                self._counters["duplicate_packets"] += 1
                return None
            return self._fail(key, rec, ReturnCode.OP_VIOLATION, "overlap")
        end = off + n
        if end > length or (som and n == 0):
            return self._fail(key, rec, ReturnCode.OP_VIOLATION, "out_of_bounds")
        if flags & _F_EOM and end != length:
            return self._fail(key, rec, ReturnCode.OP_VIOLATION, "eom_not_at_end")
        view = rec.view
        if view is not None:
            if end > rec.ahead:
                if off <= rec.ahead + _POPULATE_CHUNK:
                    self._populate(rec, end)
                else:  # a packet far ahead of the in-order front faults its own pages: charge them
                    self._charge(rec, n)
            view[off:end] = payload
            seg[off] = n
        else:
            total = self._partial_bytes + n
            if total > self.config.max_partial_bytes:
                self._charge(rec, n)  # raises SesNack
            self._partial_bytes = total  # (:meth:`_charge` inlined)
            rec.charged += n
            seg[off] = payload if type(payload) is bytes else bytes(payload)
        if som and flags & _F_HD:
            rec.header_data = hdata
        received = rec.received = rec.received + n
        self._bytes += n
        if received < length:
            return None
        if received > length:
            return self._fail(key, rec, ReturnCode.OP_VIOLATION, "overlap")
        order = sorted(seg)
        pos = 0
        if view is not None:
            for o in order:
                if o != pos:  # overlapping extents with a gap: inconsistent offsets
                    return self._fail(key, rec, ReturnCode.OP_VIOLATION, "overlap")
                pos += seg[o]
            return self._complete(key, rec, key[1], None)
        for o in order:
            if o != pos:
                return self._fail(key, rec, ReturnCode.OP_VIOLATION, "overlap")
            pos += len(seg[o])
        return self._complete(key, rec, key[1], [seg[o] for o in order])

    def _charge(self, rec: _Partial, n: int) -> None:
        """Charge ``n`` more committed bytes to ``rec``, or raise :class:`SesNack` (nothing
        changed) when that would exceed ``max_partial_bytes`` (a transient shortage)."""
        total = self._partial_bytes + n
        if total > self.config.max_partial_bytes:
            self._count("no_reassembly_room")
            raise SesNack("reassembly memory exhausted")
        self._partial_bytes = total
        rec.charged += n

    def _release(self, rec: _Partial) -> None:
        """Return everything ``rec`` charged (its buffer is being dropped)."""
        self._partial_bytes -= rec.charged
        rec.charged = 0

    def _populate(self, rec: _Partial, end: int) -> None:
        """Populate the buffer's pages in ``_POPULATE_CHUNK`` steps up to ``end`` (one system call
        per 2 MiB instead of a page fault per page), charging the populated bytes; where the kernel
        lacks the call, the copy faults the pages in itself (they are charged all the same). Near
        the memory budget it populates (and charges) only up to ``end``; past it, :class:`SesNack`
        before anything changes."""
        buf = rec.buf
        assert buf is not None
        ahead = rec.ahead
        # ahead of the packet by at most what the message has delivered so far (at least 64 KiB,
        # at most one chunk): a first packet claiming a huge length commits 64 KiB, not 2 MiB, so
        # memory follows the bytes that arrived (issue 15 item 4); an honest stream reaches
        # 2 MiB steps after a few doublings
        step = min(_POPULATE_CHUNK, max(rec.received, _POPULATE_MIN))
        if step == _POPULATE_CHUNK and not rec.huge and rec.length >= _POPULATE_CHUNK:
            rec.huge = True  # a message that delivered a chunk: 2 MiB pages from here on
            _advise(buf, _MADV_HUGEPAGE)
        want = min(rec.length, max(end, ahead + step))
        if self._partial_bytes + want - ahead > self.config.max_partial_bytes:
            want = end  # near the budget: only what this packet needs
        self._charge(rec, want - ahead)
        if _MADV_POPULATE_WRITE is not None:
            try:
                while ahead < want:
                    n = min(_POPULATE_CHUNK, want - ahead)
                    buf.madvise(_MADV_POPULATE_WRITE, ahead, n)
                    ahead += n
            except (OSError, ValueError):  # pragma: no cover - kernel without MADV_POPULATE_WRITE
                pass
        rec.ahead = want

    def _bad_request(self, op: int, ver: int, pid: int, ri: int, job: int, mid: int) -> tuple[int, bytes]:
        """Classify a request the fast path refused (target processing order, behaviour.md §6.3)."""
        if ver != 0:
            return self._error(ReturnCode.UNCOR, mid, job, "bad_version")
        if op != _SEND and op != _TSEND:
            return self._error(ReturnCode.UNSUPPORTED_OP, mid, job, "bad_opcode")
        if pid != self.pid_on_fep or ri != self.resource_index:
            return self._error(ReturnCode.UNDELIVERABLE, mid, job, "undeliverable")
        return self._error(ReturnCode.BAD_JOB_ID, mid, job, "bad_job_id")

    # -- helpers -------------------------------------------------------------------------------

    def _complete_single(
        self,
        key: tuple[str, int],
        payload: bytes | memoryview,
        mode: int,
        job: int,
        init: int,
        hdata: int | None,
        tag: int | None,
        lst: int = _OVERFLOW,
        ids: IdRange = None,
        reserved: Any = None,
    ) -> tuple[int, bytes]:
        n = len(payload)
        m = Message(bytes(payload), key[0], mode, key[1], job, init, hdata, tag=tag)
        if reserved is None:
            self.completed.append(m)
        else:
            self._hand_over(reserved, m)
        if mode == _MODE_RUDI or mode == _MODE_UUD:  # (RUD/ROD copies never reach SES: _remember)
            self._remember(key, _RC_OK, n, job, lst, ids)
        self._counters["messages"] += 1
        return _NH_RESPONSE, _RESP_ENCODE((lst, _RESP_OP, 0, _RC_OK, key[1], 0, job, n))

    def _complete(self, key: tuple[str, int], rec: _Partial, mid: int, parts: list[bytes] | None) -> tuple[int, bytes]:
        del self._partial[key]
        self._release(rec)
        rec.live = False
        rec.segments = {}
        recv = rec.recv
        lst = _EXPECTED if recv is not None else rec.list_
        if recv is not None:  # expected list: the data is already in the receive's buffer
            rec.recv = None
            m = Message(rec.view, key[0], rec.mode, mid, rec.job_id, rec.initiator, rec.header_data, tag=rec.tag)
            rec.view = None
            self.receives.append((recv, _RC_OK, m))
        else:
            data = None
            view = rec.view
            if view is not None:
                assert isinstance(view, memoryview)  # the in-place buffer (a receive's memory has recv)
                data = view.toreadonly()
                rec.view = rec.buf = None
            m = Message(
                data, key[0], rec.mode, mid, rec.job_id, rec.initiator, rec.header_data, parts=parts, tag=rec.tag
            )
            reserved = rec.reserved
            if reserved is None:
                self.completed.append(m)
            else:
                rec.reserved = None
                self._hand_over(reserved, m)
        if rec.mode == _MODE_RUDI or rec.mode == _MODE_UUD:
            self._remember(key, _RC_OK, rec.length, rec.job_id, lst, rec.ids)
        self._counters["messages"] += 1
        return _NH_RESPONSE, build_response(
            _RC_OK, message_id=mid, job_id=rec.job_id, modified_length=rec.length, list_=lst
        )

    def _remember(
        self, key: tuple[str, int], rc: int, length: int, job: int, lst: int = 0, ids: IdRange = None
    ) -> None:
        """Keep a completed message's response for copies of its packets: a RUDI retransmission
        or a UUD duplicate is answered again (:meth:`_deliver`). A successful RUD/ROD message is
        not kept: PDS removes its duplicates by PSN, so its entry would never be read (it only
        kept the FEP's reassembly sweep armed)."""
        done = self._done
        done[key] = (rc, length, job, self.now, lst, ids)
        done.move_to_end(key)
        while len(done) > self.config.completed_max:
            done.popitem(last=False)

    @property
    def counters(self) -> dict[str, int]:
        """Packets seen, messages completed, duplicates, errors by reason, expired partials."""
        return {"packets": self._packets, "payload_bytes_received": self._bytes, **self._counters}

    def _count(self, reason: str) -> None:
        c = self._counters
        c["errors"] += 1
        k = "error_" + reason
        c[k] = c.get(k, 0) + 1

    def _error(self, rc: int, mid: int, job: int, reason: str) -> tuple[int, bytes]:
        self._count(reason)
        return _NH_RESPONSE, build_response(int(rc), message_id=mid, job_id=job, modified_length=0)

    def _fail(self, key: tuple[str, int], rec: _Partial, rc: int, reason: str) -> tuple[int, bytes]:
        """Put a message in error: free its buffer, answer this and every later packet with ``rc``."""
        if rec.live:
            self._release(rec)
            rec.live = False
        rec.error = int(rc)
        rec.segments.clear()
        rec.view = rec.buf = None
        rec.last_ns = self.now
        self._fail_receive(key, rec, int(rc))
        return self._error(rc, key[1], rec.job_id, reason)

    def _hand_over(self, token: Any, m: Message) -> None:
        """A message that reserved a receive is whole: it goes to that receive (:class:`Reserved`)."""
        on_reserved = self.on_reserved
        assert on_reserved is not None  # (set whenever admit may answer Reserved)
        on_reserved(token, m)

    def _unreserve(self, token: Any) -> None:
        """The message that reserved the receive ``token`` (if any) will not complete it: give it back."""
        if token is not None:
            on_reserved = self.on_reserved
            assert on_reserved is not None
            on_reserved(token, None)

    def _fail_receive(self, key: tuple[str, int], rec: _Partial, rc: int) -> None:
        """A message bound to a posted receive failed: complete that receive with ``rc`` (once).
        A receive without a buffer reserved for it is given back instead: it waits for the next
        message (a message that never became whole is nobody's message)."""
        reserved = rec.reserved
        if reserved is not None:
            rec.reserved = None
            self._unreserve(reserved)
        recv = rec.recv
        if recv is not None:
            rec.recv = None
            m = Message(b"", key[0], rec.mode, key[1], rec.job_id, rec.initiator, rec.header_data, tag=rec.tag,
                        message_length=rec.length)  # fmt: skip
            self.receives.append((recv, rc, m))

    def _fail_key(self, peer: str, mid: int, job: int, rc: int, reason: str, length: int = 0) -> tuple[int, bytes]:
        key = (peer, mid)
        rec = self._partial.get(key)
        if rec is None:
            rec = _Partial(False, length, 0, job, 0, self.now)
            self._partial[key] = rec
        return self._fail(key, rec, rc, reason)

    def expire(self, now: int) -> int:
        """Drop partial messages idle for ``reassembly_timeout_ns`` and forget completed ids older
        than ``completed_ttl_ns``. Returns the number of partial messages dropped."""
        self.now = now
        limit = now - self.config.reassembly_timeout_ns
        stale = [k for k, r in self._partial.items() if r.last_ns <= limit]
        for k in stale:
            rec = self._partial.pop(k)
            if rec.live:
                self._release(rec)
                self._counters["expired"] += 1
                rec.live = False
                rec.view = rec.buf = None
                self._fail_receive(k, rec, _RC_DROPPED)
        ttl = now - self.config.completed_ttl_ns
        done = self._done
        while done:
            k, v = next(iter(done.items()))
            if v[3] > ttl:
                break
            done.popitem(last=False)
        return len(stale)

    @property
    def partial_count(self) -> int:
        """Messages currently being reassembled (including ones held in error)."""
        return len(self._partial)
