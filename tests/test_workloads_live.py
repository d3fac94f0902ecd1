"""Workload objects on live asyncio endpoints over UDP on 127.0.0.0/8 (one loop, many FEPs)."""

from __future__ import annotations

import asyncio

import pytest

from uet.endpoint import Endpoint, EndpointConfig
from uet.stats import percentile
from uet.transport import Transport
from uet.wire.crc import crc32c
from uet.workloads import WORKLOADS, FlowReport, RankReport, make, message_data
from uet.workloads.report import summarize

BASE = 61


async def run_live(name: str, n: int, *, message_bytes: int, messages: int = 1, seed: int = 3, base: int = BASE):
    wl = make(name, n, message_bytes=message_bytes, messages=messages, seed=seed)
    addrs = [f"127.0.{base}.{i + 1}" for i in range(n)]
    eps = [await Endpoint.open(a, config=EndpointConfig(seed=seed)) for a in addrs]
    try:
        assert all(isinstance(ep, Transport) for ep in eps)
        reports = await asyncio.wait_for(asyncio.gather(*(wl.run(i, ep, addrs) for i, ep in enumerate(eps))), 60)
    finally:
        for ep in eps:
            await ep.close()
    return wl, addrs, reports


@pytest.mark.parametrize("name", sorted(WORKLOADS))
async def test_every_workload_completes_intact_live(name: str) -> None:
    n = 4
    base = BASE + sorted(WORKLOADS).index(name)
    wl, addrs, reports = await run_live(name, n, message_bytes=5000, messages=2, base=base)
    res = summarize(wl, addrs, reports)
    assert res["ok"], res
    assert len(res["flows"]) == len(wl.flows())
    assert all(f["delivered"] == f["messages"] for f in res["flows"])
    if name == "allreduce":
        assert all(r.check for r in reports)


def test_patterns() -> None:
    assert [(f.src, f.dst) for f in make("incast", 4).flows()] == [(1, 0), (2, 0), (3, 0)]
    assert [(f.src, f.dst) for f in make("pairs", 4).flows()] == [(0, 2), (1, 3)]
    assert [(f.src, f.dst) for f in make("incast_victim", 5).flows()] == [(1, 4), (2, 0), (3, 0), (4, 0)]
    perm = make("permutation", 16, seed=5).flows()
    assert sorted(f.dst for f in perm) == list(range(16)) and all(f.src != f.dst for f in perm)
    assert len(make("all_to_all", 5).flows()) == 20
    ar = make("allreduce", 4, message_bytes=1000)
    # the pipelined ring: 2(n - 1) steps on each of the 2 default channels, one flow per rank
    assert [(f.src, f.dst, f.messages) for f in ar.flows()] == [(0, 1, 12), (1, 2, 12), (2, 3, 12), (3, 0, 12)]
    with pytest.raises(ValueError):
        make("pairs", 3)
    with pytest.raises(ValueError):
        make("nope", 3)


def test_message_data_is_reproducible_and_distinct() -> None:
    a = message_data(1, 2, 3, 3_000_000)
    assert a == message_data(1, 2, 3, 3_000_000) and len(a) == 3_000_000
    assert a != message_data(1, 2, 4, 3_000_000) and a != message_data(2, 2, 3, 3_000_000)
    b = message_data(1, 2, 3, 50_000)  # below VIEW_BYTES: the seed/flow/index head, then the pool
    assert message_data(1, 2, 3, 5) == b[:5] and b != message_data(1, 3, 3, 50_000)


def test_large_messages_share_one_buffer_at_distinct_offsets() -> None:
    """Senders of a big simulation hold views of one buffer, not a copy each (message_data)."""
    views = [message_data(1, f, 0, 2 << 20) for f in range(1024)]
    objs = [v.obj for v in views if isinstance(v, memoryview)]
    # the first flow's message is a view of the part drawn first (uet.workloads.base._Drawn), every
    # other one of the whole buffer
    assert len(objs) == 1024 and len({id(o) for o in objs}) == 2 and all(o is objs[1] for o in objs[1:])
    assert len({bytes(v[:64]) for v in views}) == 1024  # 1,024 flows, 1,024 different messages


def test_message_buffers_are_drawn_only_as_far_as_messages_read(monkeypatch) -> None:
    """A one-flow run's 2 MB message reads 2 MB of its 3 MiB buffer: only the pieces up to there
    are made, and the bytes are those of the whole buffer made at once, before and after the rest
    is made."""
    import random

    import uet.workloads.base as base

    monkeypatch.setattr(base, "_views", {})
    monkeypatch.setattr(base, "_pools", {})
    whole = base._Drawn("uet-workload/7/2097152", (1 << 20) + (2 << 20)).upto(1 << 30)
    assert len(whole) == (1 << 20) + (2 << 20)
    first = base.message_data(7, 0, 0, 2_000_001)  # starts at 0
    assert len(base._views[(7, 2 << 20)].data) == 31 * base._BLOCK  # whole pieces, up to the end read
    assert bytes(first) == whole[:2_000_001]
    other = base.message_data(7, 1, 0, 2_000_001)
    assert len(base._views[(7, 2 << 20)].data) == len(whole)
    start = (1 << 10) * 0x9E3779B1 & ((1 << 20) - 1)
    assert bytes(other) == whole[start : start + 2_000_001] and bytes(first) == whole[:2_000_001]

    pool = base._Drawn("uet-workload/7", 1 << 20).upto(1 << 20)
    small = base.message_data(7, 0, 0, 1000)
    at = random.Random("7/0/0").randrange(1 << 20)
    drawn = len(base._pools[7].data)
    assert small[16:] == pool[at : at + 984] and drawn == -(-(at + 984) // base._BLOCK) * base._BLOCK
    for i in range(1, 40):  # some of them wrap around the end of the pool: made whole
        m = base.message_data(7, 0, i, 60_000)
        at = random.Random(f"7/0/{i}").randrange(1 << 20)
        assert m[16:] == (pool + pool)[at : at + 60_000 - 16]
    assert len(base._pools[7].data) == 1 << 20


def test_message_pools_are_the_same_however_they_are_made() -> None:
    """A pool's bytes depend on its key only: made in one step, in two, or piece by piece, and in
    another process (pinned by their CRC-32: a change of the generator changes every run's
    payloads and must be said); other keys give other bytes, every piece its own."""
    import zlib

    import uet.workloads.base as base

    size = (1 << 20) + 2048  # not a whole number of pieces: the last one is cut
    whole = base._Drawn("k", size).upto(size)
    assert len(whole) == size
    steps = base._Drawn("k", size)
    assert steps.upto(1) == whole[: base._BLOCK] and steps.upto(size) == whole
    piecewise = base._Drawn("k", size)
    for end in range(base._BLOCK, size + base._BLOCK, base._BLOCK):
        got = piecewise.upto(end)
        assert got == whole[: len(got)] and len(got) >= min(end, size)
    assert base._Drawn("k2", size).upto(size) != whole
    pieces = {whole[at : at + 4096] for at in range(0, size, 4096)}
    assert len(pieces) == -(-size // 4096)  # no two 4 KiB packets alike
    assert zlib.crc32(bytes(message_data(1, 0, 0, 2_000_000))) == PAYLOAD_CRC
    assert zlib.crc32(message_data(1, 2, 3, 5_000)) == SMALL_PAYLOAD_CRC


#: CRC-32 of ``message_data(1, 0, 0, 2_000_000)`` and ``message_data(1, 2, 3, 5_000)``: the payload
#: generator of uet.workloads.base._Drawn
PAYLOAD_CRC = 2180436189
SMALL_PAYLOAD_CRC = 196726835


def test_summary_flags_a_lost_or_corrupted_message() -> None:
    wl = make("pairs", 2, message_bytes=10, messages=1)
    from uet.workloads.base import FlowReport, RankReport, RxReport

    good = FlowReport(0, "a", "b", 10, 1, 0.5, 0, [7])
    rep = [RankReport(flows=[good]), RankReport(rx=[RxReport(0, 0, "a", 10, 7, 0.4)])]
    assert summarize(wl, ["a", "b"], rep)["ok"]
    bad = [RankReport(flows=[good]), RankReport(rx=[RxReport(0, 0, "a", 10, 8, 0.4)])]
    assert not summarize(wl, ["a", "b"], bad)["ok"]
    dup = [RankReport(flows=[good]), RankReport(rx=[RxReport(0, 0, "a", 10, 7, 0.4)] * 2)]
    assert not summarize(wl, ["a", "b"], dup)["ok"]
    res = summarize(wl, ["a", "b"], rep, ideal_s=lambda f: 0.25)
    assert res["flows"][0]["slowdown"] == 2.0 and res["fct"]["slowdown_max"] == 2.0
    assert percentile([3, 1, 2, 4], 50) == 2 and percentile([], 99) == 0.0


async def test_an_unfinished_flow_reports_its_retransmissions() -> None:
    """Issue 10: a flow that timed out showed 0 retransmissions in ``uet-run``'s table while its
    endpoint had counted thousands. :meth:`Workload.unfinished` reports it with the timeout as
    error and the endpoint's retransmissions towards its destination so far."""
    from dataclasses import replace

    wl = make("pairs", 2, message_bytes=3000, messages=2, seed=5)
    addrs = ["127.0.90.1", "127.0.90.2"]  # nobody listens on the second: every packet is resent
    cfg = EndpointConfig(seed=5)
    cfg = replace(cfg, pds=replace(cfg.pds, rto_ns=5_000_000, rto_max_ns=5_000_000))
    ep = await Endpoint.open(addrs[0], config=cfg)
    try:
        report = RankReport()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(wl.run(0, ep, addrs, report), 0.3)
        assert report.flows == []
        (f,) = wl.unfinished(0, ep, addrs, report, 0.3)
        assert f.error == "timeout" and f.dst == addrs[1] and f.completion_s == 0.3
        assert f.retransmits == ep.counters["retransmits_to:" + addrs[1]] > 0
        assert f.crc32 == [crc32c(message_data(5, 0, i, 3000)) for i in range(2)]
        res = summarize(wl, addrs, [report_with(report, f), RankReport()])
        (row,) = res["flows"]
        assert row["retransmits"] == f.retransmits and not row["intact"] and row["delivered"] == 0
        assert wl.unfinished(1, ep, addrs, RankReport(), 0.3) == []  # rank 1 sends nothing
    finally:
        await ep.close()


def report_with(report: RankReport, flow: FlowReport) -> RankReport:
    return RankReport(flows=[*report.flows, flow], rx=list(report.rx))
