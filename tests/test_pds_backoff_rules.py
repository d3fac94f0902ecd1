"""The back-off helpers on their own (spec/behaviour.md §2.9; uet/pds/backoff.py): the shift
bound and a retry budget counted from a first transmission that is not time zero."""

from __future__ import annotations

from uet.pds import PdsConfig
from uet.pds.backoff import MAX_SHIFT, next_shift, retries_spent, rto_for

MS = 1_000_000
CFG = PdsConfig(rto_ns=2 * MS, rto_max_ns=100 * MS, max_rto_retx=5, retry_time_ns=50 * MS)


def test_shift_grows_by_one_up_to_its_bound_of_16() -> None:
    assert MAX_SHIFT == 16
    assert [next_shift(s) for s in (0, 1, 15)] == [1, 2, 16]
    assert next_shift(16) == 16


def test_retry_budget_counts_time_from_the_first_transmission() -> None:
    first = 7_000 * MS
    assert not retries_spent(CFG, 5, first, first + 50 * MS - 1)
    assert retries_spent(CFG, 5, first, first + 50 * MS)
    assert not retries_spent(CFG, 4, first, first + 500 * MS)


def test_cap_below_the_initial_rto_means_no_back_off() -> None:
    low = PdsConfig(rto_ns=8 * MS, rto_max_ns=1 * MS)
    assert [rto_for(low, s) for s in (0, 1, 5)] == [8 * MS] * 3
    assert [rto_for(CFG, s) for s in (0, 5, 6, 16)] == [2 * MS, 64 * MS, 100 * MS, 100 * MS]
