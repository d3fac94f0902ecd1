"""Secure PDC establishment policies (behaviour.md §2.3.2): the seam the PDS core will call."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from uet.tss.establish import (
    LIMIT_PSN_RANGE,
    Expected0RttStart,
    InitiatorStartPsn,
    Random1RttStart,
    StartPsnMethod,
    psn_range_exhausted,
    random_start_psn,
    start_psn_policy,
)

U32 = 0xFFFFFFFF


def test_expected_0rtt_accepts_then_rejects_replayed_start_psn() -> None:
    target = Expected0RttStart()
    assert target.expected_psn(1) == 0
    assert target.check_start_psn(1, 70_000) is None  # first PDC: 0-RTT
    assert target.on_close(1, 70_000) == 70_001
    # A replayed SYN of the closed PDC (same Start_PSN) is refused with NEW_START_PSN 70_001.
    assert target.check_start_psn(1, 70_000) == 70_001
    assert target.check_start_psn(1, 69_999) == 70_001
    assert target.check_start_psn(1, 70_001) is None
    assert target.check_start_psn(1, 2_000_000) is None
    assert target.check_start_psn(2, 5) is None  # per SDI
    # Expected_PSN only moves forward
    assert target.on_close(1, 10) == 70_001
    assert target.on_close(1, 2_000_000) == 2_000_001


def test_expected_0rtt_wraps_with_serial_arithmetic() -> None:
    target = Expected0RttStart()
    assert target.on_close(1, 0x7FFF_FFF0) == 0x7FFF_FFF1
    assert target.check_start_psn(1, 0xFFFF_FFE0) is None
    assert target.on_close(1, 0xFFFF_FFE0) == 0xFFFF_FFE1
    assert target.check_start_psn(1, 3) is None  # after the wrap: newer
    assert target.check_start_psn(1, U32 - 40) == 0xFFFF_FFE1
    assert target.on_close(1, U32) == 0
    assert target.on_close(1, 3) == 4
    assert target.check_start_psn(1, U32) == 4


def test_random_1rtt_mints_and_accepts_only_the_minted_value() -> None:
    target = Random1RttStart(random.Random(1))
    minted = target.check_start_psn(1, 70_000)
    assert minted is not None and (1 << 16) <= minted < (1 << 31)
    assert target.check_start_psn(1, 70_000, minted=minted) is not None  # the offered value is ignored
    assert target.check_start_psn(1, minted, minted=minted) is None
    assert target.check_start_psn(1, minted) is not None  # without the PENDING PDC's value: new mint
    target.on_close(1, minted)


def test_initiator_tracks_ini_start_psn() -> None:
    ini = InitiatorStartPsn(random.Random(2))
    first = ini.start_psn(4)
    assert (1 << 16) <= first < (1 << 31) and ini.ini_start_psn(4) == 0
    assert ini.on_new_start_psn(4, 123_456) == 123_456 and ini.ini_start_psn(4) == 0
    ini.on_close_ack(4, first + 1)
    assert ini.start_psn(4) == first + 1 == ini.start_psn(4)
    ini.on_close_ack(4, first - 100)  # older: ignored
    assert ini.ini_start_psn(4) == first + 1


def test_initiator_and_target_converge() -> None:
    """Initiator and target of the 0-RTT method in a loop: every PDC after a close is accepted 0-RTT
    and no Start_PSN is ever reused."""
    ini, target = InitiatorStartPsn(random.Random(3)), Expected0RttStart()
    used = []
    for _ in range(20):
        start = ini.start_psn(1)
        nack = target.check_start_psn(1, start)
        if nack is not None:
            start = ini.on_new_start_psn(1, nack)
            assert target.check_start_psn(1, start) is None
        used.append(start)
        ini.on_close_ack(1, target.on_close(1, start))
    assert len(set(used)) == len(used)


def test_policy_factory_and_range_limit() -> None:
    assert start_psn_policy(StartPsnMethod.EXPECTED_0RTT_START).method is StartPsnMethod.EXPECTED_0RTT_START
    assert start_psn_policy(StartPsnMethod.RANDOM_1RTT_START).method is StartPsnMethod.RANDOM_1RTT_START
    assert not psn_range_exhausted(100, 100 + LIMIT_PSN_RANGE - 1)
    assert psn_range_exhausted(100, 100 + LIMIT_PSN_RANGE)
    assert psn_range_exhausted(U32 - 5, (U32 - 5 + LIMIT_PSN_RANGE) & U32)


@settings(max_examples=200)
@given(st.integers(0, U32), st.integers(0, U32), st.integers(0, U32))
def test_0rtt_never_accepts_a_start_psn_at_or_before_a_closed_one(first: int, closed: int, offered: int) -> None:
    target = Expected0RttStart()
    target.on_close(9, first)
    if target.check_start_psn(9, closed) is not None:
        return  # that PDC would never have been accepted
    target.on_close(9, closed)
    verdict = target.check_start_psn(9, offered)
    if verdict is None:
        # accepted Start_PSNs lie in [closed + 1, closed + 2^31]: never the closed one or older
        assert 1 <= ((offered - closed) & U32) <= (1 << 31)
    else:
        assert verdict == target.expected_psn(9)


def test_random_start_psn_default_source() -> None:
    values = {random_start_psn() for _ in range(50)}
    assert len(values) > 40 and all((1 << 16) <= v < (1 << 31) for v in values)
