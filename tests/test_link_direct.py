"""Direct UDP link on loopback: batches, TOS/ECN, impairment on the real socket path."""

from __future__ import annotations

import asyncio
import socket

import pytest

from uet.link import DSCP_CONTROL, DSCP_DATA, DirectLink, Impairment, ImpairmentConfig, LinkError
from uet.link.direct import loopback_addresses

TIMEOUT = 10.0


class Sink:
    """Collects received batches and wakes a waiter when ``n`` datagrams have arrived."""

    def __init__(self) -> None:
        self.items: list[tuple[bytes, str, int]] = []
        self.batches = 0
        self.event = asyncio.Event()
        self.want = 0

    def __call__(self, batch) -> None:
        self.batches += 1
        self.items.extend(batch)
        if len(self.items) >= self.want:
            self.event.set()

    async def wait(self, n: int) -> None:
        self.want = n
        if len(self.items) < n:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), TIMEOUT)


def _pair(**kw) -> tuple[DirectLink, DirectLink]:
    a, b = loopback_addresses(2)
    la = DirectLink(a, 0, **kw)
    lb = DirectLink(b, 0, peer_port=la.port)
    la.peer_port = lb.port
    return la, lb


async def test_send_receive_batch_and_counters() -> None:
    la, lb = _pair()
    sink = Sink()
    lb.set_receiver(sink)
    try:
        for i in range(200):
            la.send(i.to_bytes(4, "big") * 100, lb.address, entropy=i, dscp=DSCP_DATA)
        await sink.wait(200)
        assert [int.from_bytes(d[:4], "big") for d, _s, _e in sink.items] == list(range(200))
        assert all(src == la.address and ecn == 0 for _d, src, ecn in sink.items)
        assert la.counters["tx_packets"] == 200 and lb.counters["rx_packets"] == 200
        assert lb.counters["rx_bytes"] == 200 * 400
        assert sink.batches <= 200
    finally:
        la.close()
        lb.close()


async def test_ecn_bits_travel_and_are_read_with_recvtos() -> None:
    la, lb = _pair()
    sink = Sink()
    lb.set_receiver(sink)
    try:
        for ecn in (0, 1, 2, 3):
            la.send(bytes([ecn]), lb.address, 0, DSCP_DATA, ecn=ecn)
            la.send(bytes([ecn]), lb.address, 0, DSCP_CONTROL, ecn=ecn)
        await sink.wait(8)
        assert sorted((d[0], e) for d, _s, e in sink.items) == sorted([(e, e) for e in range(4)] * 2)
    finally:
        la.close()
        lb.close()


async def test_without_read_ecn_datagrams_arrive_with_ecn_zero() -> None:
    (a, b) = loopback_addresses(2)
    la = DirectLink(a, 0)
    lb = DirectLink(b, 0, read_ecn=False)
    la.peer_port, lb.peer_port = lb.port, la.port
    sink = Sink()
    lb.set_receiver(sink)
    try:
        for ecn in (0, 1, 2, 3):
            la.send(bytes([ecn]) * 100, lb.address, 0, DSCP_DATA, ecn=ecn)
        await sink.wait(4)
        assert sorted(d[0] for d, _s, _e in sink.items) == [0, 1, 2, 3]
        assert all(src == a and e == 0 and len(d) == 100 for d, src, e in sink.items)
        assert lb.counters["rx_packets"] == 4 and lb.counters["rx_bytes"] == 400
    finally:
        la.close()
        lb.close()


async def test_endpoint_reads_ecn_when_it_is_ecn_capable_or_told_to() -> None:
    from uet.endpoint import Endpoint, EndpointConfig

    for cfg, want in (
        (EndpointConfig(), False),
        (EndpointConfig(ecn_capable=True), True),
        (EndpointConfig(ecn_feedback=True), True),
        (EndpointConfig(ecn_capable=True, ecn_feedback=False), False),
    ):
        (a,) = loopback_addresses(1)
        ep = await Endpoint.open(a, port=0, config=cfg)
        try:
            assert isinstance(ep.link, DirectLink) and ep.link.read_ecn is want
        finally:
            await ep.close()


async def test_dscp_per_packet_class_in_tos_byte() -> None:
    (a, b) = loopback_addresses(2)
    la = DirectLink(a, 0)
    raw = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    raw.bind((b, 0))
    raw.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    raw.settimeout(TIMEOUT)
    la.peer_port = raw.getsockname()[1]
    try:
        la.send(b"data", b, 0, DSCP_DATA)
        la.send(b"ack", b, 0, DSCP_CONTROL)
        got = {}
        for _ in range(2):
            data, anc, _f, _src = await asyncio.to_thread(raw.recvmsg, 100, 64)
            got[data] = anc[0][2][0]
        assert got == {b"data": 0x00, b"ack": 0xB8}
    finally:
        la.close()
        raw.close()


async def test_impaired_link_loses_duplicates_and_reorders_exactly_as_counted() -> None:
    imp = Impairment(ImpairmentConfig(loss=0.1, dup=0.1, reorder=0.2, reorder_delay_s=0.002, seed=7))
    la, lb = _pair(impairment=imp)
    sink = Sink()
    lb.set_receiver(sink)
    n = 2000
    try:
        for i in range(n):
            la.send(i.to_bytes(4, "big"), lb.address, 0, DSCP_DATA)
        expect = n - imp.counters["dropped"] + imp.counters["duplicated"]
        await sink.wait(expect)
        got = [int.from_bytes(d, "big") for d, _s, _e in sink.items]
        assert len(got) == expect
        assert 0.05 * n < imp.counters["dropped"] < 0.15 * n
        assert len(got) - len(set(got)) == imp.counters["duplicated"]
        assert got != sorted(got)  # reordered
    finally:
        la.close()
        lb.close()


async def test_bind_conflict_is_a_clear_error() -> None:
    (a,) = loopback_addresses(1)
    la = DirectLink(a, 0)
    try:
        with pytest.raises(LinkError):
            DirectLink(a, la.port)
    finally:
        la.close()


async def test_closed_link_drops_delayed_datagrams() -> None:
    la, lb = _pair(impairment=Impairment(ImpairmentConfig(delay_s=0.001)))
    sink = Sink()
    lb.set_receiver(sink)
    la.send(b"late", lb.address, 0, DSCP_DATA)  # held for 1 ms, then must be discarded
    la.close()
    la.send(b"after", lb.address, 0, DSCP_DATA)
    # The marker is held longer, so its timer fires after the discarded one: no wall-clock wait.
    la2 = DirectLink(la.address, 0, peer_port=lb.port, impairment=Impairment(ImpairmentConfig(delay_s=0.002)))
    la2.send(b"marker", lb.address, 0, DSCP_DATA)
    try:
        await sink.wait(1)
        assert [d for d, _s, _e in sink.items] == [b"marker"]
        assert la.counters["tx_packets"] == 0
    finally:
        la2.close()
        lb.close()
