"""Receivers of the simulated workloads keep a digest, not the message (uet.ses.sink): the data is
still checked end to end — a payload byte corrupted in flight makes its flow not intact — and a
sprayed, reordered message is placed straight into the sink, never into a reassembly buffer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from host_link_tap import Forward, tap_host_link
from uet.fabric.model import Fabric
from uet.fabric.profiles import load_topology

from uet.fep import FepConfig, FepCore
from uet.pds import PdsConfig
from uet.ses.sink import DigestSink
from uet.sim import Engine, SimEndpoint, VirtualTimeLoop
from uet.wire.crc import crc32c
from uet.workloads import Permutation, RankReport
from uet.workloads.report import summarize

pytestmark = pytest.mark.in_memory  # the simulator in virtual time (SimEndpoint, no socket)


def _net(hosts: int) -> tuple[Engine, list[SimEndpoint]]:
    topo = load_topology({"kind": "fat_tree", "hosts": hosts}, profile="datacenter", rate_bps=100_000_000_000)
    fab = Fabric(topo, seed=1)
    eng = Engine(fab)
    conf = FepConfig(payload_size=4096, pds=PdsConfig(lb="oblivious"))
    eps = [
        SimEndpoint(eng, eng.attach(i, FepCore(fab.hosts[i].ip, job=0, pid=0, config=conf, seed=i)))
        for i in range(hosts)
    ]
    return eng, eps


def _run(eng: Engine, coro: object) -> object:
    loop = VirtualTimeLoop(eng)
    try:
        return loop.run_until_complete(coro)  # type: ignore[arg-type]
    finally:
        loop.close()


def _permutation(corrupt_frame: int | None) -> dict[str, Any]:
    """A 4-host permutation of 256 KiB flows; ``corrupt_frame``: the index of host 0's data frame
    whose last payload byte is flipped on host 0's link."""
    eng, eps = _net(4)
    wl = Permutation(4, message_bytes=256 << 10, seed=3)
    seen = [0]

    def tap(frame: bytearray, forward: Forward) -> None:
        if len(frame) > 1024:  # a data frame (ACKs, CLEARs are smaller)
            if seen[0] == corrupt_frame:
                frame[-1] ^= 0x40
            seen[0] += 1
        forward(frame)

    tap_host_link(eng.fabric, 0, tap)
    addresses = [ep.address for ep in eps]
    reports = [RankReport() for _ in eps]

    async def main() -> None:
        await asyncio.gather(*(wl.run(i, ep, addresses, reports[i]) for i, ep in enumerate(eps)))

    _run(eng, main())
    return summarize(wl, addresses, reports)


def test_a_payload_byte_corrupted_in_flight_is_caught_by_the_receivers_digest() -> None:
    clean = _permutation(None)
    assert clean["ok"] and all(f["intact"] for f in clean["flows"])
    bad = _permutation(20)  # a data frame of host 0's flow, well inside its message
    flows = {f["src"]: f for f in bad["flows"]}
    assert not bad["ok"]
    assert flows["10.0.0.1"]["delivered"] == 1 and not flows["10.0.0.1"]["intact"]
    assert all(f["intact"] for src, f in flows.items() if src != "10.0.0.1")


def test_a_sprayed_message_goes_into_the_sink_not_into_a_reassembly_buffer() -> None:
    eng, eps = _net(16)
    data = bytes(range(256)) * (4 << 10)  # 1 MiB: at the in-place reassembly threshold
    a, b = eps[0], eps[15]
    core = b.core
    assert isinstance(core, FepCore) and core.ses.fast is not None
    fast = core.ses.fast
    held: list[int] = []

    class Watched(DigestSink):
        __slots__ = ()

        def place(self, offset: int, piece: bytes | memoryview) -> None:
            super().place(offset, piece)
            held.append(self.held)
            assert all(p.buf is None for p in fast._partial.values())  # no mmap of the message

    sink = Watched(len(data))
    # frames 5 and 6 of the sender reach the far end with frame 12, behind it: their packets
    # arrive behind later ones
    count, late = [0], []

    def reorder(frame: bytearray, forward: Forward) -> None:
        count[0] += 1
        if count[0] in (5, 6):
            late.append(frame)
            return
        forward(frame)
        if count[0] == 12:
            for f in late:
                forward(f)

    tap_host_link(eng.fabric, 0, reorder)

    async def main() -> object:
        got, _ = await asyncio.gather(b.recv_into(sink, source=a.address), a.send(b.address, data))
        return got

    m = _run(eng, main())
    assert m.nbytes == len(data) and m.data is sink  # type: ignore[attr-defined]
    assert sink.digest() == crc32c(data)
    assert len(held) == len(data) // 4096 and 0 < max(held) <= 8 * 4096  # only the pieces ahead of the gap
