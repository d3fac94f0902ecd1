"""Impairment shim: seeded decisions with the configured probabilities."""

from __future__ import annotations

import pytest

from uet.link.impair import Impairment, ImpairmentConfig

pytestmark = pytest.mark.in_memory  # the seeded impairment decision alone, no link opened

N = 20000


def _within(count: int, p: float, n: int = N) -> bool:
    """Binomial count within 5 standard deviations of its mean."""
    mean = n * p
    sd = (n * p * (1 - p)) ** 0.5
    return abs(count - mean) <= 5 * sd + 1


def test_perfect_link_passes_everything_unchanged() -> None:
    imp = Impairment()
    assert not imp.config.active
    for i in range(100):
        d = bytes([i]) * 10
        assert imp.apply(d) == [(d, 0.0)]


@pytest.mark.parametrize("p", [0.01, 0.05, 0.3])
def test_loss_rate(p: float) -> None:
    imp = Impairment(ImpairmentConfig(loss=p, seed=1))
    sent = sum(len(imp.apply(b"x" * 32)) for _ in range(N))
    assert imp.counters["dropped"] == N - sent
    assert _within(imp.counters["dropped"], p)


def test_duplicate_gives_two_identical_copies() -> None:
    imp = Impairment(ImpairmentConfig(dup=0.1, seed=2))
    outs = [imp.apply(b"abc") for _ in range(N)]
    twos = [o for o in outs if len(o) == 2]
    assert len(twos) == imp.counters["duplicated"] and _within(len(twos), 0.1)
    assert all(a == b == (b"abc", 0.0) for a, b in twos)


def test_corrupt_flips_exactly_one_bit_within_span() -> None:
    imp = Impairment(ImpairmentConfig(corrupt=0.5, corrupt_span=4, seed=3))
    data = bytes(range(64))
    changed = 0
    for _ in range(2000):
        ((out, _d),) = imp.apply(data)
        diff = [i for i in range(64) if out[i] != data[i]]
        if diff:
            changed += 1
            assert len(diff) == 1 and diff[0] < 4
            assert bin(out[diff[0]] ^ data[diff[0]]).count("1") == 1
    assert changed == imp.counters["corrupted"] and _within(changed, 0.5, 2000)


def test_reorder_delays_are_bounded_and_fixed_delay_added() -> None:
    imp = Impairment(ImpairmentConfig(reorder=0.2, reorder_delay_s=0.004, delay_s=0.001, seed=4))
    delays = [imp.apply(b"z")[0][1] for _ in range(N)]
    held = [d for d in delays if d > 0.001]
    assert len(held) == imp.counters["reordered"] and _within(len(held), 0.2)
    assert all(0.001 < d <= 0.005 + 1e-12 for d in held)
    assert all(d == 0.001 for d in delays if d <= 0.001)


def test_same_seed_same_decisions() -> None:
    cfg = ImpairmentConfig(loss=0.1, dup=0.1, corrupt=0.1, reorder=0.1, seed=9)
    a, b = Impairment(cfg), Impairment(cfg)
    data = bytes(100)
    assert [a.apply(data) for _ in range(500)] == [b.apply(data) for _ in range(500)]


def test_bad_probability_rejected() -> None:
    with pytest.raises(ValueError):
        ImpairmentConfig(loss=1.5)
    with pytest.raises(ValueError):
        ImpairmentConfig(delay_s=-1)
