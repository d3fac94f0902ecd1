"""The eager-send lanes: segmentation, flow control and the sender's completion rule.

**Why lanes.** A plain eager send (no DC, under the rendezvous/deferrable thresholds) is
segmented here, with the SES standard header, into exactly the packets
:class:`~uet.ses.initiator.SesInitiator` would build (wire-identical), because that path carries
bulk data and costs a fraction of the general engine's CPU per packet. Messages toward one
``(peer, mode, traffic class, job)`` form a *lane*; a lane submits the packets of one message at
a time (PDS requires all packets of a message on one PDC and no interleaving on a PDC,
behaviour.md §1.4) and keeps at most ``FepConfig.max_inflight`` packets (or its peer's path window,
:class:`~uet.pds.config.PathWindow`) submitted but not yet Acked/Failed, so memory stays bounded
for 64 MiB messages. Payloads are zero-copy slices of the caller's buffer.

**Completion rule** (behaviour.md §6.9 "initiator rules"): the message is delivered when every
packet is Acked and no SES response reported an error (an ACK carrying the target's
non-guaranteed response may be lost and replaced by a cumulative ACK: implicit success). RUDI
packets are Acked by their RUDI responses, and a RUDI message also needs one response with
``RC_OK`` (the target's completing response, which every copy of a packet sent after completion
repeats): without it the target never assembled the message — a receiver restarted mid-message
answered the later packets of a message it did not know — and the send fails with
:class:`~uet.fep.errors.DeliveryError` (issue 15 item 2; inference, §2.14 leaves it open).
UUD packets are Acked when handed to the link (best effort, §2.15). A return code other than OK
in a response fails the message with its ``SesError`` subclass; a response whose modified length
exceeds the message is an ``OP_VIOLATION``; a packet PDS gave up on fails it with
:class:`~uet.fep.errors.DeliveryError` (with the NACK code). The eager path does not retry
``NO_MATCH`` (the engine path retries per §6.4).

RUDI and UUD packets are submitted to PDS as SOM+EOM each (no PDC, so no message framing at the
PDS level) while their SES headers carry the message's real SOM/EOM.
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any, Final

from uet.errors import UetError
from uet.fep.errors import DeliveryError
from uet.pds import Mode, PdsCore
from uet.ses.errors import error_for
from uet.ses.segmenter import Segmenter
from uet.wire.pds import NextHeader
from uet.wire.ses import RESPONSE, ReturnCode

__all__ = ["Lane", "OutMessage", "apply_response", "failed", "refill", "unconfirmed"]

_NH_STANDARD: Final = int(NextHeader.STANDARD)
_NH_RESPONSE: Final = int(NextHeader.RESPONSE)
_RC_OK: Final = int(ReturnCode.OK)
_RC_GOOD: Final = (int(ReturnCode.NULL), _RC_OK)
_RC_BAD_GENERATION: Final = int(ReturnCode.BAD_GENERATION)
_WHOLE: Final = (Mode.RUDI, Mode.UUD)
_RUDI: Final = Mode.RUDI  # (an Enum class attribute lookup costs ~0.2 µs: once per message here)
_RESP_UNPACK: Final = RESPONSE.unpack  # parse_response's decoder of a plain RESPONSE header (§11.1)


class OutMessage:
    """An eager message being sent on a lane: its packets' progress and the operation's handle."""

    __slots__ = (
        "peer", "mode", "data", "length", "mid", "npkts", "it", "submitted", "done", "eom_submitted",
        "abandoned", "error", "handle", "pid", "ri", "job", "generation", "relative", "tag",
        "header_data", "t0", "lane", "finished", "confirmed", "regen",
    )  # fmt: skip

    #: the lane it is queued on, set by ``Operations.send`` right after construction
    lane: Lane

    def __init__(self, peer: str, mode: Mode, data: memoryview, mid: int, npkts: int, handle: int) -> None:
        self.peer = peer
        self.mode = mode
        self.data = data
        self.length = len(data)
        self.mid = mid
        self.npkts = npkts
        self.it: Any = None
        self.submitted = 0
        self.done = 0
        self.eom_submitted = False
        self.abandoned = False
        self.error: UetError | None = None
        self.handle = handle
        self.pid = 0
        self.ri = 0
        self.job = 0
        self.generation = 0
        self.relative = True
        self.tag: int | None = None
        self.header_data: int | None = None
        self.t0 = 0
        self.finished = False
        #: a response said RC_OK for the whole message (the RUDI completion rule, module doc)
        self.confirmed = False
        #: the target's current RI generation from a BAD_GENERATION response (adopted, §6.4)
        self.regen: int | None = None

    def complete(self) -> bool:
        """Every submitted packet is Acked/Failed, and the message is fully submitted or given up."""
        return self.done >= self.submitted and (self.eom_submitted or self.abandoned)


class Lane:
    """Eager messages toward one (peer, mode, tc, job), submitted one message at a time."""

    __slots__ = ("key", "queue", "active", "inflight", "job_id", "tc", "limit")

    def __init__(self, key: tuple[str, Mode, int, int], job_id: int, tc: int, limit: int) -> None:
        self.key = key
        #: packets submitted and not yet Acked/Failed at most: ``FepConfig.max_inflight``, or the
        #: window of the peer's path (``FepCore(path_window=...)``, uet.pds.config.PathWindow)
        self.limit = limit
        self.queue: deque[OutMessage] = deque()
        self.active: OutMessage | None = None
        self.inflight = 0
        self.job_id = job_id
        self.tc = tc

    def busy(self) -> bool:
        """Messages queued, being submitted or with packets in flight."""
        return bool(self.queue) or self.active is not None or self.inflight > 0


def refill(lane: Lane, core: PdsCore, seg: Segmenter, limit: int, now: int, sdi: int | None) -> list[OutMessage]:
    """Submit the lane's packets to the PDS core until ``limit`` are outstanding; returns the
    messages abandoned on the way (PDS refused a packet), for the caller to finish.

    A RUD/ROD message's SOM packet goes through ``submit`` (it picks the PDC), the rest in runs
    through ``submit_run`` (one call per refill); its segmenter resumes where the last call
    stopped. (The core's methods are called on it, not kept bound: most calls find the lane full
    and submit nothing, and the compiled build makes a bound method as a new object and calls it
    generically, parsing its keyword arguments, where a call on the typed core is native.)"""
    peer, mode, tc, _job = lane.key
    job_id = lane.job_id
    whole = mode in _WHOLE
    dropped: list[OutMessage] = []
    while lane.inflight < limit:
        msg = lane.active
        if msg is None:
            if not lane.queue:
                break
            msg = lane.active = lane.queue.popleft()
            if msg.npkts > 1 or whole:  # (a one-packet RUD/ROD message: Segmenter.single below)
                msg.it = seg.packets(
                    msg.data, msg.mid, pid_on_fep=msg.pid, resource_index=msg.ri, header_data=msg.header_data,
                    tag=msg.tag, job_id=msg.job, generation=msg.generation, relative=msg.relative,
                )  # fmt: skip
        if msg.abandoned:
            lane.active = None
            dropped.append(msg)
            continue
        room = limit - lane.inflight
        n = 0
        done = True  # the message is fully submitted (EOM) or failed
        try:
            if whole:
                for ses, payload, _som, eom in msg.it:
                    core.submit(
                        peer, mode, _NH_STANDARD, ses, payload, token=msg, som=True, eom=True, now=now,
                        job_id=job_id, tc=tc, sdi=sdi,
                    )  # fmt: skip
                    n += 1
                    if eom:
                        msg.eom_submitted = True
                        break
                    if n >= room:
                        done = False
                        break
            else:
                if not msg.submitted:  # the SOM packet opens the message on a PDC
                    if msg.it is None:
                        ses, payload = seg.single(
                            msg.data, msg.mid, pid_on_fep=msg.pid, resource_index=msg.ri,
                            header_data=msg.header_data, tag=msg.tag, job_id=msg.job, generation=msg.generation,
                            relative=msg.relative,
                        )  # fmt: skip
                        som = eom = True
                    else:
                        ses, payload, som, eom = next(msg.it)
                    core.submit(
                        peer, mode, _NH_STANDARD, ses, payload, token=msg, som=som, eom=eom, now=now,
                        job_id=job_id, tc=tc, sdi=sdi,
                    )  # fmt: skip
                    n = 1
                    msg.eom_submitted = eom
                if not msg.eom_submitted:
                    if n < room:  # the rest of the message, up to the room, in one call
                        n += core.submit_run(
                            peer, mode, _NH_STANDARD, islice(msg.it, room - n), token=msg, now=now,
                            job_id=job_id, tc=tc, sdi=sdi,
                        )  # fmt: skip
                    if msg.submitted + n >= msg.npkts:
                        msg.eom_submitted = True
                    else:
                        done = False
        except UetError as e:
            msg.abandoned = True
            msg.error = msg.error or DeliveryError(f"PDS refused the packet: {e}")
            done = True
        msg.submitted += n
        lane.inflight += n
        if done:
            lane.active = None
            if msg.abandoned:
                dropped.append(msg)
    return dropped


def apply_response(msg: OutMessage, response_next_hdr: int, response: bytes) -> None:
    """The SES response an ACK carried for one of ``msg``'s packets (§6.9): an error return code
    or an over-long modified length fails the message."""
    if response_next_hdr != _NH_RESPONSE or not response or msg.error is not None:
        return
    _lst, _op, _ver, rc, _mid, gen, _job, mlen = _RESP_UNPACK(response)
    if rc not in _RC_GOOD:
        msg.error = error_for(rc, f"send of {msg.length} bytes to {msg.peer}")
        msg.abandoned = True
        if rc == _RC_BAD_GENERATION:
            msg.regen = gen
    elif rc == _RC_OK and mlen > msg.length:
        msg.error = error_for(ReturnCode.OP_VIOLATION, f"target placed {mlen} of {msg.length} bytes")
        msg.abandoned = True
    elif rc == _RC_OK:
        msg.confirmed = True


def unconfirmed(msg: OutMessage) -> bool:
    """A RUDI message all of whose packets were answered, none with the target's completing
    ``RC_OK``: the target does not hold the whole message (it lost the start, e.g. it restarted
    in the middle, and answered the later packets of a message it no longer knows). RUDI
    targets are stateless and answer every copy (behaviour.md §2.14), and the packet that
    completes a message — or any copy of a packet after that — carries the completing response
    (uet.ses.reassembly, uet.ses.target), so its absence means the message was not delivered."""
    return msg.mode == _RUDI and not msg.confirmed and msg.error is None and not msg.abandoned


def failed(msg: OutMessage, reason: str, nack_code: int | None) -> None:
    """PDS gave up on one of ``msg``'s packets: the message fails (first error wins)."""
    if msg.error is None:
        msg.error = DeliveryError(f"packet failed: {reason}", nack_code=nack_code)
    msg.abandoned = True
