"""``uet-peer``'s receive loops keep serving after a receive fails (uet/conformance/peer.py)."""

from __future__ import annotations

import asyncio
import random

from uet.tools import peer as peer_tool

from uet.conformance.peer import Peer
from uet.conformance.profile import default_profile
from uet.endpoint import Endpoint
from uet.ses.errors import TooLong


async def test_an_echo_peer_keeps_echoing_after_receives_fail(monkeypatch) -> None:
    """A buffer-less receive that fails (TOO_LONG, DROPPED, ...) used to end one of the peer's
    receive tasks with "Task exception was never retrieved"; after a few, nothing was echoed."""
    rng = random.Random()
    base = f"127.{rng.randrange(1, 255)}.{rng.randrange(256)}."
    a = f"{base}{rng.randrange(2, 250, 2)}"
    b = a.rsplit(".", 1)[0] + "." + str(int(a.rsplit(".", 1)[1]) + 1)
    port = rng.randrange(20000, 40000)
    args = peer_tool.build_parser().parse_args([a, "--mode", "echo", "--port", str(port)])
    p = Peer(peer_tool.settings_from(args), default_profile(args.job))
    failures = {"left": 8}  # more than the peer's receive tasks: every one of them fails at least once
    real_recv = Endpoint.recv

    async def recv(self, *a, **kw):  # the first receives of the peer's endpoint fail
        if self is p.ep and failures["left"] > 0:
            failures["left"] -= 1
            raise TooLong("injected")
        return await real_recv(self, *a, **kw)

    monkeypatch.setattr(Endpoint, "recv", recv)
    await p.open()
    assert p.ep is not None
    client = await Endpoint.open(b, args.job, args.pid, port=port)
    try:
        for _ in range(20):  # let every receive task take its failure
            await asyncio.sleep(0)
        assert failures["left"] == 0
        await client.send(a, b"ping")
        echo = await asyncio.wait_for(real_recv(client, source=a), 10)
        assert bytes(echo.data) == b"ping"
    finally:
        await client.close()
        stats = await p.close()
    assert stats["receive_failed"] == 8
