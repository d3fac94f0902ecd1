"""Is a RUDI packet for a finished message a replayed copy or a new message? (behaviour.md §2.14)

RUDI is delivered at least once: a retransmission reaches SES again, with the same 32-bit packet
id as the copy that was answered (§2.14 "retransmit with retx = 1 and the same packet id"). The
message id alone cannot tell such a copy from a new message that reuses the id (16-bit ids wrap
after 65,536 messages to one peer), so the SES layers remember, with each finished RUDI message,
the range of packet ids its packets carried (serial-number arithmetic, wire-format.md §15): a
packet whose id lies in that range is a copy and gets the remembered answer again; any other id
starts a new message (issue 15: a new message reusing an id used to be taken for a duplicate for
``completed_ttl_ns`` and lost).

Choice (inference): the range is exact for an initiator that allocates packet ids from a counter
(the reference's and this project's, uet.pds.rudi); with random ids (allowed: ids need only be
unique among outstanding requests) it is exact for single-packet messages and may mistake a new
multi-packet message for a copy only when its ids land inside an old message's range.

UUD (§2.15) has no packet id, so no exact rule exists: a UUD packet whose message id finished
within the remembered time is still taken for a copy (``pkt_id`` None). Choice: UUD is best
effort, so wrongly dropping a new message that reuses an id is a loss its contract allows, while
delivering a network duplicate twice is not something it ever promised to do (``uet-demo`` counts
UUD duplicates as a failure).
"""

from __future__ import annotations

from uet.wire.pds import psn_diff

#: a finished message's packet ids: (lowest, highest), or None when none were seen
IdRange = tuple[int, int] | None


def widen(ids: IdRange, pkt_id: int | None) -> IdRange:
    """``ids`` grown to include ``pkt_id`` (unchanged for None)."""
    if pkt_id is None:
        return ids
    if ids is None:
        return (pkt_id, pkt_id)
    lo, hi = ids
    if psn_diff(pkt_id, lo) < 0:
        return (pkt_id, hi)
    if psn_diff(pkt_id, hi) > 0:
        return (lo, pkt_id)
    return ids


def is_copy(ids: IdRange, pkt_id: int | None) -> bool:
    """Whether a packet with ``pkt_id`` is a copy of the finished message that used ``ids``.
    A packet without an id (UUD, or a caller that passes none) is taken for a copy, as before; a
    RUDI packet never copies a message that carried no ids (a RUD/ROD message with the same id,
    finished: the RUDI packet starts a new message reusing the id)."""
    if pkt_id is None:
        return True
    if ids is None:
        return False
    return psn_diff(pkt_id, ids[0]) >= 0 and psn_diff(ids[1], pkt_id) >= 0
