"""UET packet trimming in the switch (rocev2-and-fabric.md §8.4, behaviour.md §3.2)."""

from __future__ import annotations

from functools import cache

from uet.fabric.model import Fabric, PortSpec, Switch, SwitchConfig, Telemetry
from uet.fabric.model.frames import ipv4_checksum_ok, ipv4_frame
from uet.fabric.model.telemetry import Trimmed
from uet.fabric.topology import Topology

from uet.wire import pds, ses
from uet.wire.net import ETHERNET, IPV4, UDP, EtherType, inet_checksum, ip_bytes

GBPS = 1_000_000_000
SRC, DST = "10.0.0.1", "10.0.1.2"


def uet_upper(psn: int, payload: int = 1000) -> bytes:
    p = pds.REQUEST.encode(pds.REQUEST.make(psn=psn, spdcid=1, dpdcid=2, flags=pds.ReqFlag.AR))
    s = ses.STANDARD[(1, "none")]
    return p + s.encode(s.make(message_id=psn, job_id=7, request_length=payload)) + bytes(payload)


@cache
def uet_frame(psn: int, dscp: int = 0, dport: int = 4793) -> bytes:
    return ipv4_frame(SRC, DST, uet_upper(psn), sport=0x4242, dport=dport, dscp=dscp, ecn=2)


def switch(cfg: SwitchConfig | None = None, faces_host: bool = True, telemetry: Telemetry | None = None) -> Switch:
    ports = [PortSpec(100 * GBPS), PortSpec(GBPS, faces_host=faces_host)]
    sw = Switch("sw", 1, ports, cfg, telemetry=telemetry)
    sw.add_route("10.0.1.0/24", [1])
    return sw


def run(sw: Switch) -> list:
    while (t := sw.next_deadline()) is not None:
        sw.advance(t)
    return sw.take_transmissions()


def expected_trimmed(sw: Switch, psn: int, dscp: int) -> bytes:
    """Built independently from the layouts: what §8.4 says must leave the switch."""
    port = sw.ports[1]
    eth = ETHERNET.encode(ETHERNET.make(dst=port.peer_mac, src=port.mac, ethertype=EtherType.IPV4))
    ip = bytearray(
        IPV4.encode(IPV4.make(dscp=dscp, ecn=2, total_length=84, ttl=63, src=ip_bytes(SRC), dst=ip_bytes(DST)))
    )
    ip[10:12] = inet_checksum(ip).to_bytes(2, "big")
    udp = UDP.encode(UDP.make(src_port=0x4242, dst_port=4793, length=64, checksum=0))
    return eth + bytes(ip) + udp + uet_upper(psn)[:56]


def test_trimmed_packet_has_exactly_the_prescribed_bytes_and_jumps_the_queue() -> None:
    tel = Telemetry()
    sw = switch(telemetry=tel)
    n = 40
    for psn in range(n):
        sw.receive(0, uet_frame(psn), 0)
    tx = run(sw)
    # TC0 limit 32 KB: the first frame leaves at once, 29 more fit (29 × 1098 ≤ 32768), 10 are trimmed
    full = [x for x in tx if len(x.frame) == 1098]
    stubs = [x for x in tx if len(x.frame) != 1098]
    assert len(full) == 30 and len(stubs) == 10
    assert sw.counters[("trim", "sw", 1)] == 10 and sw.counters.total("drop") == 0
    for k, x in enumerate(stubs):
        assert x.frame == expected_trimmed(sw, 30 + k, dscp=5)  # last hop: DSCP 5
        assert ipv4_checksum_ok(x.frame, 14)
    # strict priority: every stub leaves right after the frame in flight when it was trimmed
    assert [tx.index(x) for x in stubs] == list(range(1, 11))
    recs = tel.of(Trimmed)
    assert [(r.size, r.trimmed, r.dscp) for r in recs] == [(1098, 98, 5)] * 10


def test_fabric_facing_port_uses_dscp_7_and_configured_length() -> None:
    cfg = SwitchConfig()
    cfg.trim.trim_bytes = 128
    sw = switch(cfg, faces_host=False)
    for psn in range(40):
        sw.receive(0, uet_frame(psn), 0)
    stubs = [x.frame for x in run(sw) if len(x.frame) != 1098]
    assert len(stubs) == 10
    for f in stubs:
        ip = IPV4.decode(f, 14)
        assert (ip.dscp, ip.total_length, len(f)) == (7, 128, 14 + 128)
        assert UDP.decode(f, 34).length == 108 and ipv4_checksum_ok(f, 14)


def test_only_uet_data_is_trimmed() -> None:
    sw = switch()
    for psn in range(40):
        sw.receive(0, uet_frame(psn, dport=4791), 0)  # RoCE port on the data class: dropped
    for psn in range(20):
        sw.receive(0, uet_frame(100 + psn, dscp=46), 0)  # UET control class (16 KB limit): dropped
    tx = run(sw)
    assert all(len(x.frame) == 1098 for x in tx)
    assert sw.counters.total("trim") == 0
    assert sw.counters[("drop", "sw", "queue_limit")] == 10 + 6


def test_disabled_trimming_drops_and_full_trim_queue_drops() -> None:
    cfg = SwitchConfig()
    cfg.trim.enabled = False
    sw = switch(cfg)
    for psn in range(40):
        sw.receive(0, uet_frame(psn), 0)
    assert len(run(sw)) == 30 and sw.counters[("drop", "sw", "queue_limit")] == 10
    cfg = SwitchConfig()
    cfg.tcs[7].limit = 3 * 98
    sw = switch(cfg)
    for psn in range(40):
        sw.receive(0, uet_frame(psn), 0)
    tx = run(sw)
    assert sum(len(x.frame) == 98 for x in tx) == 3  # all arrive while the link is busy
    assert sw.counters[("drop", "sw", "trim_queue_full")] == 7


def test_uet_incast_is_trimmed_not_dropped_in_a_fabric() -> None:
    """8:1 UET incast across the fabric: every packet reaches the receiver, whole or trimmed."""
    fab = Fabric(Topology(leaves=3, hosts_per_leaf=4))
    frames = {s: ipv4_frame(fab.host_ip(s), fab.host_ip(0), uet_upper(s), sport=0x100 + s, ecn=2) for s in range(4, 12)}
    for s, f in frames.items():
        for _ in range(40):
            fab.inject(s, f, 0)
    got = fab.poll(10**10)
    assert len(got) == 8 * 40
    trimmed = [f for _, f in got if IPV4.decode(f, 14).dscp in (5, 7)]
    assert trimmed and all(len(f) == 14 + 84 for f in trimmed)
    assert fab.counters.total("drop") == 0
    assert fab.counters.total("trim") == len(trimmed)
