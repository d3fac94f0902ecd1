"""Endpoint API with two FEPs in one event loop over real loopback UDP (fast checks)."""

from __future__ import annotations

import asyncio
import io
import json
import os

import pytest

from uet.endpoint import (
    DeliveryError,
    Endpoint,
    EndpointClosed,
    EndpointConfig,
    Mode,
    install_uvloop,
    run,
    with_config,
)
from uet.eventlog import EventLog, read_events
from uet.link import DirectLink, ImpairmentConfig, loopback_addresses
from uet.ses.errors import SesError
from uet.wire.ses import ReturnCode

T = 30.0


async def _pair(config: EndpointConfig | None = None, imp: ImpairmentConfig | None = None, **kw):
    a, b = loopback_addresses(2)
    ea = await Endpoint.open(a, port=0, config=config, impairment=imp, **kw)
    la = ea.link
    assert isinstance(la, DirectLink)
    eb = await Endpoint.open(b, port=0, peer_port=la.port, config=config, impairment=imp)
    lb = eb.link
    assert isinstance(lb, DirectLink)
    la.peer_port = lb.port
    return ea, eb


@pytest.mark.parametrize("mode", list(Mode))
async def test_send_recv_each_mode(mode: Mode) -> None:
    ea, eb = await _pair()
    async with ea, eb:
        sizes = [0, 1, 4095, 4096, 4097, 50_000] if mode != Mode.UUD else [0, 1, 4096]
        datas = [os.urandom(n) for n in sizes]
        for i, d in enumerate(datas):
            await asyncio.wait_for(ea.send(eb.address, d, mode=mode, header_data=i), T)
        got = [await asyncio.wait_for(eb.recv(), T) for _ in datas]
        assert sorted((m.header_data, m.data) for m in got) == list(enumerate(datas))
        assert all(m.source == ea.address and m.mode == mode for m in got)
        assert eb.counters["messages_received"] == len(datas)
        assert ea.counters["messages_sent"] == len(datas)


async def test_concurrent_messages_both_directions() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        da = [os.urandom(20_000 + i) for i in range(10)]
        db = [os.urandom(30_000 + i) for i in range(10)]
        fa = [ea.send_nowait(eb.address, d, mode=Mode.RUD, header_data=i) for i, d in enumerate(da)]
        fb = [eb.send_nowait(ea.address, d, mode=Mode.ROD, header_data=i) for i, d in enumerate(db)]
        await asyncio.wait_for(asyncio.gather(*fa, *fb), T)
        ra = [await eb.recv() for _ in da]
        rb = [await ea.recv() for _ in db]
        assert {m.header_data: m.data for m in ra} == dict(enumerate(da))
        assert [m.data for m in rb] == db  # one ROD lane: messages arrive in order


async def test_large_message_with_impairment_and_bounded_inflight() -> None:
    cfg = EndpointConfig(payload_size=8192, max_inflight=64)
    imp = ImpairmentConfig(loss=0.03, reorder=0.03, dup=0.03, seed=5)
    ea, eb = await _pair(cfg, imp)
    async with ea, eb:
        data = os.urandom(4 << 20)
        peak = 0
        orig = ea.core.submit

        def submit(*a, **k):
            nonlocal peak
            orig(*a, **k)
            peak = max(peak, max(lane.inflight for lane in ea._lanes.values()) + 1)

        ea.core.submit = submit
        await asyncio.wait_for(ea.send(eb.address, data), T)
        m = await asyncio.wait_for(eb.recv(), T)
        assert m.data == data
        assert peak <= 64
        c = ea.counters
        assert c["impair_dropped"] > 0 and c["messages_sent"] == 1


async def test_target_error_raises_delivery_error() -> None:
    ea, eb = await _pair()
    async with ea, eb:
        with pytest.raises(SesError) as ei:
            await asyncio.wait_for(ea.send(eb.address, b"x" * 10_000, pid=99), T)
        assert ei.value.return_code == ReturnCode.BAD_PID  # relative addressing, unknown PIDonFEP
        assert eb.pending_messages == 0
        # the endpoint keeps working afterwards
        await asyncio.wait_for(ea.send(eb.address, b"ok"), T)
        assert (await asyncio.wait_for(eb.recv(), T)).data == b"ok"


async def test_send_to_absent_peer_fails_after_retries() -> None:
    # the retry budget's time part (retry_time_ns, 2 s by default) cut short: the count still applies
    cfg = with_config(EndpointConfig(), retry_time_ns=200_000_000)
    (a, nobody) = loopback_addresses(2)
    ea = await Endpoint.open(a, port=0, config=cfg)
    async with ea:
        with pytest.raises(DeliveryError):
            await asyncio.wait_for(ea.send(nobody, b"hello"), T)
        assert ea.counters["messages_failed"] == 1


async def test_too_large_message_refused_up_front() -> None:
    cfg = EndpointConfig(max_message=1000)
    ea, eb = await _pair(cfg)
    async with ea, eb:
        with pytest.raises(DeliveryError):
            await ea.send(eb.address, b"x" * 1001)


async def test_close_is_graceful_and_final() -> None:
    ea, eb = await _pair()
    await ea.send(eb.address, b"x" * 100_000)
    await ea.close()
    assert ea.core.idle()
    with pytest.raises(EndpointClosed):
        await ea.send(eb.address, b"late")
    waiter = asyncio.ensure_future(eb.recv())
    await eb.recv()  # the 100 kB message
    await eb.close()
    with pytest.raises(EndpointClosed):
        await waiter  # a recv() pending at close is woken with an error
    await ea.close()  # idempotent


async def test_event_log_records_core_and_endpoint_events(tmp_path) -> None:
    path = tmp_path / "a.jsonl"
    log = EventLog(path)
    stream = io.StringIO()
    a, b = loopback_addresses(2)
    ea = await Endpoint.open(a, port=0, event_log=log)
    la = ea.link
    assert isinstance(la, DirectLink)
    eb = await Endpoint.open(b, port=0, peer_port=la.port, event_log=EventLog(stream))
    lb = eb.link
    assert isinstance(lb, DirectLink)
    la.peer_port = lb.port
    async with ea, eb:
        await ea.send(eb.address, b"y" * 10_000)
        await eb.recv()
    log.close()
    evs = read_events(path)
    kinds = {e["ev"] for e in evs}
    assert {"open", "msg_tx", "msg_done", "close"} <= kinds
    assert all("t" in e for e in evs)
    assert "tx" in kinds  # records from the PDS core
    rx = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(e["ev"] == "msg_rx" and e["bytes"] == 10_000 for e in rx)


def test_run_uses_uvloop_when_installed() -> None:
    async def which() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert run(which()).startswith("uvloop")
    assert not run(which(), use_uvloop=False).startswith("uvloop")
    assert install_uvloop() in (True, False)
    asyncio.set_event_loop_policy(None)


async def test_close_fails_sends_that_cannot_finish() -> None:
    cfg = EndpointConfig(close_timeout_s=0.2)
    (a, nobody) = loopback_addresses(2)
    ea = await Endpoint.open(a, port=0, config=cfg)
    fut = ea.send_nowait(nobody, b"z" * 100_000)
    await asyncio.sleep(0)  # let the first packets go out (no peer will ever answer)
    await ea.close()
    with pytest.raises((EndpointClosed, DeliveryError)):
        await fut
    assert ea.counters["messages_failed"] == 1


def test_event_log_fields_append_and_non_json_values(tmp_path) -> None:
    path = tmp_path / "x.jsonl"
    with EventLog(path, fep="10.0.0.1") as log:
        log.write(5, "tx", pdc=3, mode=Mode.ROD, raw=b"\x01\x02", s={1})
    with EventLog(path, append=True) as log:
        log({"t": 6, "ev": "rx"})
    evs = read_events(path)
    assert evs == [
        {"t": 5, "ev": "tx", "pdc": 3, "mode": 1, "raw": "0102", "s": [1], "fep": "10.0.0.1"},
        {"t": 6, "ev": "rx"},
    ]
