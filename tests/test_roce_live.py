"""Live RoCEv2 endpoints (uet/roce_endpoint.py): RC over real UDP sockets on port 4791 with the
transport contract, connections set up by derived parameters (uet/roce/cm.py), and the workload
objects over them (rocev2-and-fabric.md §1.2, §6; issue 12 "a RoCE endpoint ... over the direct
UDP link")."""

from __future__ import annotations

import asyncio
import json

import pytest
from live_options import FAST

from uet.link.direct import DirectLink, loopback_addresses
from uet.roce.cm import ConnectionCollision, StaticCm
from uet.roce.config import QpConfig
from uet.roce.core import RoceCore
from uet.roce.errors import Flushed, RetryExceeded
from uet.roce_endpoint import RoceEndpoint
from uet.transport import OpResult, Transport, error_name, outcome
from uet.wire.roce import ROCE_UDP_PORT
from uet.wire.ses import AmoOp, AmoType
from uet.workloads import make

TIMEOUT = 60


async def test_send_write_read_atomic_over_udp_4791() -> None:
    a_ip, b_ip = loopback_addresses(2)
    a = await RoceEndpoint.open(a_ip, cm=StaticCm(7), seed=1)
    b = await RoceEndpoint.open(b_ip, cm=StaticCm(7), seed=2)
    try:
        assert isinstance(a, Transport) and isinstance(a.link, DirectLink) and a.link.port == ROCE_UDP_PORT
        data = bytes(range(256)) * 40  # 10 packets at PMTU 1024
        got = asyncio.ensure_future(b.recv(tag=9))
        await asyncio.wait_for(a.send(b.address, data, tag=9, header_data=5), TIMEOUT)
        m = await asyncio.wait_for(got, TIMEOUT)
        assert (bytes(m.data), m.source, m.tag, m.header_data) == (data, a.address, 9, 5)
        # the reverse direction uses the same connection, opened by b's first datagram from a
        back = asyncio.ensure_future(a.recv())
        await asyncio.wait_for(b.send(a.address, b"pong"), TIMEOUT)
        assert bytes((await asyncio.wait_for(back, TIMEOUT)).data) == b"pong"
        buf = bytearray(4096)
        mr = b.register(buf)
        await asyncio.wait_for(a.write(b.address, mr.key, 100, b"written"), TIMEOUT)
        assert bytes(buf[100:107]) == b"written"
        assert bytes(await asyncio.wait_for(a.read(b.address, mr.key, 100, 7), TIMEOUT)) == b"written"
        old = await asyncio.wait_for(a.atomic(b.address, mr.key, 8, AmoOp.SUM, AmoType.UINT64, 5, fetch=True), TIMEOUT)
        assert old == 0 and int.from_bytes(buf[8:16], "little") == 5
        assert len(a.core.qps) == len(b.core.qps) == 1
        c = a.counters
        assert c["messages_sent"] == 1 and c["link_tx_packets"] >= 10 and c.get("icrc_errors", 0) == 0
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_write_with_immediate_reaches_next_write_and_close_fails_what_waits() -> None:
    """The adapter's target-side path (uet/adapter.py): a WRITE with header data is an RDMA
    WRITE with immediate; the target's ``next_write`` returns it, one queued before anyone
    waits included, and a ``next_write`` still waiting when the endpoint closes fails."""
    from uet.fep.errors import EndpointClosed

    a_ip, b_ip = loopback_addresses(2)
    a = await RoceEndpoint.open(a_ip, cm=StaticCm(8), seed=1)
    b = await RoceEndpoint.open(b_ip, cm=StaticCm(8), seed=2)
    try:
        buf = bytearray(64)
        mr = b.register(buf)
        waiting = asyncio.ensure_future(b.next_write())
        await asyncio.wait_for(a.write(b.address, mr.key, 4, b"first", header_data=0x11), TIMEOUT)
        await asyncio.wait_for(a.write(b.address, mr.key, 16, b"second", header_data=0x22), TIMEOUT)
        w1 = await asyncio.wait_for(waiting, TIMEOUT)
        w2 = await asyncio.wait_for(b.next_write(), TIMEOUT)  # queued before it was asked for
        assert (w1.header_data, w2.header_data) == (0x11, 0x22)
        assert bytes(buf[4:9]) == b"first" and bytes(buf[16:22]) == b"second"
        late = asyncio.ensure_future(b.next_write())  # waits, or finds b closed: either way it fails
    finally:
        await asyncio.gather(a.close(), b.close())
    with pytest.raises(EndpointClosed):
        await asyncio.wait_for(late, TIMEOUT)
    with pytest.raises(EndpointClosed):
        await b.next_write()


async def test_every_workload_runs_over_live_roce() -> None:
    addrs = loopback_addresses(4)
    eps = [await RoceEndpoint.open(ip, cm=StaticCm(3), seed=i) for i, ip in enumerate(addrs)]
    try:
        for name in ("incast", "all_to_all", "allreduce"):
            wl = make(name, 4, message_bytes=8192, messages=2, seed=1)
            reports = await asyncio.wait_for(
                asyncio.gather(*(wl.run(i, ep, addrs) for i, ep in enumerate(eps))), TIMEOUT
            )
            assert all(f.error is None for r in reports for f in r.flows), name
            assert sum(len(r.rx) for r in reports) == sum(wl.expected(i) for i in range(4)), name
            assert all(r.check is not False for r in reports), name
    finally:
        await asyncio.gather(*(ep.close() for ep in eps))


def test_derived_connection_parameters_agree_and_collisions_are_refused() -> None:
    cm = StaticCm(11)
    a = RoceCore("10.0.0.1", cm=cm, seed=1)
    b = RoceCore("10.0.0.2", cm=cm, seed=2)
    qa = a.connect_static(b.address)
    qb = b.connect_static(a.address)
    assert (qa.qpn, qa.remote_qpn) == (qb.remote_qpn, qb.qpn) and qa.start_psn == cm.start_psn(a.address, b.address)
    assert qb.responder.epsn == qa.start_psn and qa.responder.epsn == qb.start_psn
    # a peer whose derived QPN is taken is refused, never mixed up with the other connection
    a._by_qpn[cm.qpn(a.address, "10.0.0.3")] = qa
    with pytest.raises(ConnectionCollision):
        a.connect_static("10.0.0.3")


def test_uet_run_live_over_roce_through_the_fabric(capsys: pytest.CaptureFixture[str]) -> None:
    """``uet-run --transport roce``: endpoint processes with RoceEndpoint on the fabric link, the
    switch process classifying their frames to the lossless class (no trim, no drop)."""
    from uet.tools.run import main

    rc = main([*FAST, "--transport", "roce", "-w", "incast", "-n", "3", "--size", "8KiB", "--messages", "1", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["ok"] and out["transport"] == "roce" and out["settings"]["transport"] == "roce"
    assert len(out["flows"]) == 2 and all(f["intact"] for f in out["flows"])
    assert out["fabric"]["trims"] == 0 and out["fabric"]["drops"] == 0
    assert sum(c["messages_sent"] for c in out["endpoint_counters"]) == 2


async def test_roce_failures_have_the_contracts_return_code_names() -> None:
    """RoCE errors report SES return-code names through the transport contract (uet/roce/errors.py)."""
    a_ip, b_ip = loopback_addresses(2)
    a = await RoceEndpoint.open(a_ip, cm=StaticCm(5), seed=1)
    b = await RoceEndpoint.open(b_ip, cm=StaticCm(5), seed=2)
    try:
        mr = b.register(bytearray(64))
        r = await asyncio.wait_for(outcome(a.atomic(b.address, mr.key, 0, AmoOp.MIN, AmoType.UINT64, 1)), TIMEOUT)
        assert r == OpResult(False, None, "AMO_UNSUPPORTED_OP")
        r = await asyncio.wait_for(outcome(a.write(b.address, mr.key, 60, b"too far")), TIMEOUT)
        assert r == OpResult(False, None, "PERM_VIOLATION")  # NAK 0x62: bounds, keys and rights alike
        # the access error moved the RC connection to the error state: what follows is refused,
        # as for any dead connection (uet/roce/core.py), the endpoint itself staying open
        r = await asyncio.wait_for(outcome(a.send(b.address, b"x")), TIMEOUT)
        assert r == OpResult(False, None, "UNDELIVERABLE")
    finally:
        await asyncio.gather(a.close(), b.close())
    assert error_name(RetryExceeded()) == "UNDELIVERABLE" and error_name(Flushed()) == "CANCELLED"


async def test_a_workload_with_a_dead_peer_fails_instead_of_hanging() -> None:
    """Issue 12: a rank whose peer never answers ends its run with errors (its flow to the peer
    UNDELIVERABLE after the retry budget, the receive of the peer's flow failed with it) instead
    of waiting forever for messages the failed connection cannot bring."""
    addrs = loopback_addresses(3)  # rank 2 has no endpoint
    cfg = QpConfig(timeout=10, retry_cnt=1)  # 4.2 ms ACK timeout, two tries
    eps = [await RoceEndpoint.open(ip, cm=StaticCm(9), seed=i, config=cfg) for i, ip in enumerate(addrs[:2])]
    try:
        wl = make("all_to_all", 3, message_bytes=2048, messages=1, seed=1)
        reports = await asyncio.wait_for(asyncio.gather(*(wl.run(i, ep, addrs) for i, ep in enumerate(eps))), TIMEOUT)
        for r in reports:
            errors = {f.dst: f.error for f in r.flows}
            assert errors == {a: None if a in addrs[:2] else "UNDELIVERABLE" for a in addrs if a in errors}
            assert errors[addrs[2]] == "UNDELIVERABLE" and r.error == "UNDELIVERABLE" and len(r.rx) == 1
    finally:
        await asyncio.gather(*(ep.close() for ep in eps))
