"""Posted / unexpected lists, tag masks, directed receives, cancel (behaviour.md §6.4)."""

from __future__ import annotations

from collections import deque

import pytest

from uet.ses.errors import BadJobId
from uet.ses.matching import Matcher, MatchLimits, PostedReceive, Unexpected


def _recv(**kw: object) -> PostedReceive:
    return PostedReceive(memoryview(bytearray(8)), **kw)  # type: ignore[arg-type]


def test_untagged_first_in_post_order() -> None:
    m = Matcher()
    a, b = _recv(), _recv()
    m.post(a)
    m.post(b)
    assert m.match(tagged=False, tag=0, initiator=1, job=0) is a
    assert m.match(tagged=False, tag=0, initiator=1, job=0) is b
    assert m.match(tagged=False, tag=0, initiator=1, job=0) is None


def test_tagged_and_untagged_lists_are_separate() -> None:
    m = Matcher()
    u = _recv()
    t = _recv(tagged=True, tag=5)
    m.post(u)
    m.post(t)
    assert m.match(tagged=True, tag=5, initiator=0, job=0) is t
    assert m.match(tagged=True, tag=5, initiator=0, job=0) is None
    assert m.posted(False) == [u]


def test_tag_ignore_mask_first_match_wins() -> None:
    m = Matcher()
    exact = _recv(tagged=True, tag=0x1234)
    wild = _recv(tagged=True, tag=0x1200, ignore=0xFF)
    m.post(wild)
    m.post(exact)
    # both accept 0x1234; wild was posted first
    assert m.match(tagged=True, tag=0x1234, initiator=0, job=0) is wild
    assert m.match(tagged=True, tag=0x12FF, initiator=0, job=0) is None
    assert m.match(tagged=True, tag=0x1234, initiator=0, job=0) is exact


def test_full_wildcard_and_high_bits() -> None:
    m = Matcher()
    r = _recv(tagged=True, tag=0, ignore=(1 << 64) - 1)
    m.post(r)
    assert m.match(tagged=True, tag=(1 << 64) - 1, initiator=0, job=0) is r
    r2 = _recv(tagged=True, tag=1 << 63)
    m.post(r2)
    assert m.match(tagged=True, tag=1, initiator=0, job=0) is None
    assert m.match(tagged=True, tag=0, initiator=0, job=0) is None  # differs in bit 63 alone
    assert m.match(tagged=True, tag=1 << 63, initiator=0, job=0) is r2


def test_tag_bit_63_alone_decides_a_match() -> None:
    """Bit 63 is a match bit like any other: neither masked off nor sign-extended."""
    low = _recv(tagged=True, tag=0x5)
    assert not low.accepts(True, (1 << 63) | 0x5, 0)
    assert not _recv(tagged=True, tag=(1 << 63) | 0x5).accepts(True, 0x5, 0)
    assert _recv(tagged=True, tag=0x5, ignore=1 << 63).accepts(True, (1 << 63) | 0x5, 0)
    assert not _recv(tagged=True, tag=0x5, ignore=(1 << 63) - 1).accepts(True, (1 << 63) | 0x5, 0)


def test_directed_receive() -> None:
    m = Matcher()
    d = _recv(initiator=7)
    anyone = _recv()
    m.post(d)
    m.post(anyone)
    assert m.match(tagged=False, tag=0, initiator=9, job=0) is anyone
    assert m.match(tagged=False, tag=0, initiator=9, job=0) is None
    assert m.match(tagged=False, tag=0, initiator=7, job=0) is d


def test_job_restricted_receive_refuses_with_bad_job_id() -> None:
    m = Matcher()
    r = _recv(job=0x42)
    m.post(r)
    with pytest.raises(BadJobId):
        m.match(tagged=False, tag=0, initiator=0, job=0x43)
    assert m.posted(False) == [r]  # stays posted
    assert m.match(tagged=False, tag=0, initiator=0, job=0x42) is r


def test_cancel() -> None:
    m = Matcher()
    a, b = _recv(), _recv(tagged=True, tag=1)
    m.post(a)
    m.post(b)
    assert m.cancel(b) is True and m.cancel(b) is False
    assert m.cancel(a.id)
    assert m.match(tagged=False, tag=0, initiator=0, job=0) is None


def test_unexpected_searched_in_arrival_order_on_post() -> None:
    m = Matcher()
    u1 = Unexpected("eager", True, 0x10, 1, 0, 4, nbytes=4)
    u2 = Unexpected("eager", True, 0x11, 2, 0, 4, nbytes=4)
    u3 = Unexpected("eager", False, 0, 1, 0, 4, nbytes=4)
    for u in (u1, u2, u3):
        m.add_unexpected(u)
    assert m.unexpected_bytes == 12
    assert m.post(_recv(tagged=True, tag=0x10, ignore=1, initiator=2)) is u2
    assert m.post(_recv(tagged=True, tag=0x11, ignore=1)) is u1
    assert m.post(_recv(job=5)) is None  # job restriction: does not take u3
    assert m.post(_recv()) is u3
    assert m.unexpected_bytes == 0 and not m.unexpected


def test_limits() -> None:
    m = Matcher(MatchLimits(max_unexpected=2, max_unexpected_bytes=10, max_deferred=1))
    assert m.can_buffer("eager", 10) and not m.can_buffer("eager", 11)
    m.add_unexpected(Unexpected("eager", False, 0, 0, 0, 6, nbytes=6))
    assert not m.can_buffer("eager", 5)
    assert m.can_buffer("deferred", 0)
    m.add_unexpected(Unexpected("deferred", False, 0, 0, 0, 100))
    assert not m.can_buffer("deferred", 0)
    assert not m.can_buffer("eager", 1)  # two entries: list full


def test_repost_front() -> None:
    m = Matcher()
    a, b = _recv(), _recv()
    assert m.post(a) is None
    assert m.posted(False) == [a]
    m.repost_front(b)
    assert m.posted(False) == [b, a]
    assert m.match(tagged=False, tag=0, initiator=0, job=0) is b
    assert m.match(tagged=False, tag=0, initiator=0, job=0) is a
    assert m.match(tagged=False, tag=0, initiator=0, job=0) is None
    t = _recv(tagged=True, tag=3)
    m.repost_front(t)  # back on its own list
    assert m.posted(False) == [] and m.posted(True) == [t]


def test_default_limits_at_their_edges() -> None:
    """The documented defaults (MatchLimits docstring; max_deferred = the reference's 8, §6.7)."""
    m = Matcher()
    assert m.can_buffer("eager", 64 << 20) and not m.can_buffer("eager", (64 << 20) + 1)
    for _ in range(1023):
        m.add_unexpected(Unexpected("eager", False, 0, 0, 0, 1, nbytes=1))
    assert m.can_buffer("eager", 1)
    m.add_unexpected(Unexpected("eager", False, 0, 0, 0, 1, nbytes=1))
    assert not m.can_buffer("eager", 0)  # 1,024 entries: full
    d = Matcher()
    for _ in range(7):
        d.add_unexpected(Unexpected("deferred", False, 0, 0, 0, 100))
    assert d.can_buffer("deferred", 0)
    d.add_unexpected(Unexpected("deferred", False, 0, 0, 0, 100))
    assert not d.can_buffer("deferred", 0)
    assert d.can_buffer("eager", 1)  # deferrals do not count against eager bytes
    assert d.unexpected_bytes == 0  # an entry buffers no bytes unless it says so


def test_unexpected_bytes_follow_entries_in_and_out() -> None:
    m = Matcher(MatchLimits(max_unexpected_bytes=10))
    m.add_unexpected(Unexpected("eager", True, 7, 1, 0, 6, nbytes=6))
    assert m.unexpected_bytes == 6 and not m.can_buffer("eager", 5) and m.can_buffer("eager", 4)
    assert m.post(_recv(tagged=True, tag=7)) is not None
    assert m.unexpected_bytes == 0 and m.can_buffer("eager", 10)


def test_receive_ids_are_unique() -> None:
    ids = {_recv().id for _ in range(50)}
    assert len(ids) == 50 and all(i > 0 for i in ids)


def test_tag_bit_0_alone_decides_a_match() -> None:
    assert not _recv(tagged=True, tag=0x4).accepts(True, 0x5, 0)
    assert _recv(tagged=True, tag=0x4, ignore=1).accepts(True, 0x5, 0)


def test_a_receive_never_takes_an_unexpected_entry_of_the_other_kind() -> None:
    m = Matcher()
    plain = Unexpected("eager", False, 0, 1, 0, 4, nbytes=4)
    tagged = Unexpected("eager", True, 0, 1, 0, 4, nbytes=4)
    m.add_unexpected(plain)
    assert m.post(_recv(tagged=True, tag=0)) is None  # queued: the untagged entry is not for it
    m.add_unexpected(tagged)
    assert m.post(_recv()) is plain
    assert m.unexpected == deque([tagged])


def test_default_receive_is_untagged_exact_and_does_not_truncate() -> None:
    r = _recv()
    assert r.accepts(False, 0, 9) and not r.accepts(True, 0, 9)
    assert r.truncate is False and r.initiator is None and r.job is None
    t = _recv(tagged=True)  # tag 0, nothing ignored
    assert t.accepts(True, 0, 9) and not t.accepts(True, 1, 9)
