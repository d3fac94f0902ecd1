"""uet.tuning: the allocator setting the endpoint applies (process-wide, once, opt-out)."""

from __future__ import annotations

import asyncio
import sys

import pytest

import uet.endpoint as endpoint_mod
from uet.endpoint import Endpoint, EndpointConfig
from uet.link import loopback_addresses
from uet.tuning import tune_allocator


def test_tune_allocator_is_idempotent_and_never_raises() -> None:
    first = tune_allocator()
    assert tune_allocator() is first  # remembered per value
    assert isinstance(tune_allocator(64 << 20), bool)
    if sys.platform.startswith("linux") and "glibc" in __import__("platform").libc_ver()[0]:
        assert first is True


@pytest.mark.parametrize("enabled", [True, False])
def test_endpoint_applies_it_only_when_configured(monkeypatch, enabled: bool) -> None:
    calls: list[int] = []

    def tune() -> bool:
        calls.append(1)
        return True

    monkeypatch.setattr(endpoint_mod, "tune_allocator", tune)

    async def main() -> None:
        (a,) = loopback_addresses(1)
        ep = await Endpoint.open(a, port=0, config=EndpointConfig(tune_allocator=enabled))
        await ep.close()

    asyncio.run(main())
    assert calls == ([1] if enabled else [])
