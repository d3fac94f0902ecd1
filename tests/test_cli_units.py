"""The one size parser and the one rate parser every tool uses (tools/cli.py)."""

from __future__ import annotations

import pytest
from uet.tools.cli import format_rate, parse_rate, parse_size


@pytest.mark.parametrize(
    "text,n",
    [
        ("64MiB", 64 << 20),
        ("1MiB", 1 << 20),
        ("512k", 512_000),
        ("512KiB", 512 << 10),
        ("1G", 10**9),
        ("1GiB", 1 << 30),
        ("64MB", 64_000_000),
        ("1000", 1000),
        ("1.5k", 1500),
        ("0", 0),
    ],
)
def test_sizes(text: str, n: int) -> None:
    assert parse_size(text) == n


@pytest.mark.parametrize("text", ["", "lots", "-5", "1.5", "1e-1", "5 parsecs", "1.0001k", "0x10"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="size|whole number"):
        parse_size(text)


@pytest.mark.parametrize(
    "text,bps",
    [
        ("100M", 100_000_000),
        ("1G", 10**9),
        ("100G", 100 * 10**9),
        ("25Gbit", 25 * 10**9),
        ("25Gbit/s", 25 * 10**9),
        ("10Gbps", 10 * 10**9),
        ("10e6", 10_000_000),
        ("100000000", 100_000_000),
        ("2.5G", 2_500_000_000),
    ],
)
def test_rates(text: str, bps: int) -> None:
    assert parse_rate(text) == bps


@pytest.mark.parametrize("text", ["", "fast", "-1G", "1GiB", "10 Mb/s/s"])
def test_bad_rates(text: str) -> None:
    with pytest.raises(ValueError, match="not a rate"):
        parse_rate(text)


def test_format_rate() -> None:
    assert format_rate(100_000_000) == "100 Mbit/s" and format_rate(25e9) == "25 Gbit/s"
