"""Load balancing over equal-cost uplinks (rocev2-and-fabric.md §8.7): ECMP, flowlets, spraying,
adaptive; RoCE is never sprayed."""

from __future__ import annotations

import random
import zlib
from functools import cache

import pytest
from uet.fabric.model import Fabric, LbConfig, PortSpec, Switch, SwitchConfig
from uet.fabric.model.config import FabricError
from uet.fabric.model.frames import flow_crc, flow_key, flow_tuple, ipv4_frame, pfc_frame, seed_key
from uet.fabric.model.lb import mix32
from uet.fabric.topology import Topology

from uet.wire.net import UET_IP_PROTO, ip_bytes

GBPS = 1_000_000_000
SPINES = 4


def fabric(mode: str, **lb: object) -> Fabric:
    topo = Topology(spines=SPINES)
    topo.switch.lb = LbConfig(mode=mode, **lb)  # type: ignore[arg-type]
    return Fabric(topo, seed=5)


@cache
def frame(src: str, dst: str, sport: int, dport: int = 4793, dscp: int = 0) -> bytes:
    return ipv4_frame(src, dst, bytes(500), sport=sport, dport=dport, dscp=dscp, udp_checksum=False)


def per_spine(fab: Fabric) -> list[int]:
    return [sum(p.rx_frames for p in fab.switches[f"spine{s}"].ports) for s in range(SPINES)]


def send_flow(fab: Fabric, n: int, *, sport: int | None = 0x4242, dport: int = 4793, gap: int = 0) -> None:
    """n packets h0 → h4 (leaf0 → leaf1); sport None = a new entropy per packet."""
    src, dst = fab.host_ip(0), fab.host_ip(4)
    for k in range(n):
        fab.inject(0, frame(src, dst, k & 0xFFFF if sport is None else sport, dport), k * gap)
    fab.poll(10**12)


def test_ecmp_keeps_a_flow_on_one_spine() -> None:
    fab = fabric("ecmp")
    send_flow(fab, 400)
    counts = per_spine(fab)
    assert sorted(counts) == [0, 0, 0, 400]


def test_ecmp_hash_is_mixed_crc32_of_tuple_and_switch_id() -> None:
    fab = fabric("ecmp")
    src, dst = fab.host_ip(0), fab.host_ip(4)
    send_flow(fab, 1, sport=0x1234)
    tup = ip_bytes(src) + ip_bytes(dst) + b"\x11" + (0x1234).to_bytes(2, "big") + (4793).to_bytes(2, "big")
    leaf0 = fab.switches["leaf0"]
    idx = mix32(zlib.crc32(tup + leaf0.id.to_bytes(4, "big"))) % SPINES
    assert per_spine(fab)[idx] == 1


def test_mix32_is_murmur3_fmix32() -> None:
    assert [mix32(x) for x in (0, 1, 0xFFFFFFFF)] == [0, 0x514E28B7, 0x81F16F39]


def test_mix32_products_taken_in_halves_are_the_whole_products() -> None:
    """mix32 multiplies in 16-bit halves of its operands (machine integers in the compiled build):
    the same as the 64-bit products taken mod 2³², on random and edge inputs."""

    def fmix32(h: int) -> int:  # the finaliser as MurmurHash3 writes it
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        return h ^ (h >> 16)

    rng = random.Random(5)
    for x in [0, 1, 0xFFFF, 0x10000, 0xFFFFFFFF, *(rng.getrandbits(32) for _ in range(2000))]:
        assert mix32(x) == fmix32(x)


def test_flow_crc_is_the_crc_of_the_flow_tuple() -> None:
    """flow_crc streams the tuple's bytes from the frame: UDP, UET directly over IP, another
    protocol, an IPv4 header with options, a frame cut inside its ports."""
    udp = ipv4_frame("10.0.0.1", "10.0.1.2", bytes(40), sport=0xBEEF, dport=4793)
    other = bytearray(udp)
    other[14 + 9] = 6
    uet_ip = bytearray(udp)
    uet_ip[14 + 9] = UET_IP_PROTO
    opts = bytearray(udp[:14]) + bytes([0x46]) + udp[15:34] + bytes(4) + udp[34:]
    for frame in (udp, other, uet_ip, opts, udp[: 14 + 20 + 3], uet_ip[: 14 + 20 + 1]):
        assert flow_crc(frame, 14) == zlib.crc32(flow_tuple(frame, 14))


def test_flow_crc_of_udp_without_options_is_the_crc_of_the_flow_tuple() -> None:
    """Issue 28: a UDP packet without IP options has its tuple read in one unpack (bytes or
    bytearray, any addresses and ports, any offset of the IPv4 header)."""
    import random

    rng = random.Random(5)
    for _ in range(200):
        a, b = (".".join(str(rng.randrange(256)) for _ in range(4)) for _ in range(2))
        f = ipv4_frame(a, b, bytes(rng.randrange(0, 64)), sport=rng.randrange(1 << 16), dport=rng.randrange(1 << 16))
        tagged = f[:12] + bytes((0x81, 0, 0, 5)) + f[12:]  # an 802.1Q tag: the header at 18
        for frame, ip in ((f, 14), (bytearray(f), 14), (bytearray(tagged), 18)):
            assert flow_crc(frame, ip) == zlib.crc32(flow_tuple(frame, ip))


def test_flow_key_xor_seed_key_is_the_crc_of_tuple_and_seed() -> None:
    """Issue 28: a packet keeps its tuple's key (frames.flow_key) and each switch hashes it with
    one XOR of its seed's key, where it continued a CRC over its seed: the same CRC-32 of the
    tuple and the seed, for UDP without options (the table path: any addresses and ports, bytes
    or bytearray, any header offset), and for UDP with options, UET directly over IP, another
    protocol and frames cut inside their ports (the fallback), under random and edge seeds."""
    rng = random.Random(11)
    seeds = [bytes(4), b"\xff" * 4, *(rng.getrandbits(32).to_bytes(4, "big") for _ in range(30))]
    frames: list[tuple[bytes | bytearray, int]] = []
    for _ in range(300):
        a, b = (".".join(str(rng.randrange(256)) for _ in range(4)) for _ in range(2))
        f = ipv4_frame(a, b, bytes(rng.randrange(0, 64)), sport=rng.randrange(1 << 16), dport=rng.randrange(1 << 16))
        tagged = bytearray(f[:12] + bytes((0x81, 0, 0, 5)) + f[12:])
        frames += [(f, 14), (bytearray(f), 14), (tagged, 18)]
    udp = ipv4_frame("10.0.0.1", "10.0.1.2", bytes(40), sport=0xBEEF, dport=4793)
    other = bytearray(udp)
    other[14 + 9] = 6
    uet_ip = bytearray(udp)
    uet_ip[14 + 9] = UET_IP_PROTO
    opts = bytearray(udp[:14]) + bytes([0x46]) + udp[15:34] + bytes(4) + udp[34:]
    frames += [(g, 14) for g in (other, uet_ip, opts, udp[: 14 + 20 + 3], uet_ip[: 14 + 20 + 1])]
    for fr, ip in frames:
        key = flow_key(fr, ip)
        tup = flow_tuple(fr, ip)
        for seed in rng.sample(seeds, 4):
            assert key ^ seed_key(seed) == zlib.crc32(tup + seed)
    with pytest.raises(ValueError):
        seed_key(b"\0\0\0")


def test_a_port_rewrites_macs_from_a_bytearray() -> None:
    """Issue 28: the 12 bytes a switch writes into a frame it hands a host are a bytearray (a
    bytes value assigned to a slice of a bytearray is first copied into a new one), equal to the
    peer's MAC and the port's own, and a delivered frame carries them."""
    fab = fabric("ecmp")
    send_flow(fab, 1)
    leaf = fab.switches["leaf1"]
    port = leaf.ports[0]
    assert type(port.l2_rewrite) is bytearray
    assert port.l2_rewrite == port.peer_mac + port.mac
    fab2 = fabric("ecmp")
    src, dst = fab2.host_ip(0), fab2.host_ip(4)
    fab2.inject(0, frame(src, dst, 0x4242), 0)
    ((host, got),) = fab2.poll(10**12)
    down = fab2.switches[fab2.hosts[host].switch].ports
    assert any(got[:12] == p.peer_mac + p.mac for p in down)


@pytest.mark.parametrize("k", [4, 8])
def test_ecmp_sprays_one_flow_over_every_core_switch_of_a_fat_tree(k: int) -> None:
    """No hash polarisation (issue 11): a CRC is affine, so with the bare CRC a pod spine re-picked
    the bits its leaf had picked and one sprayed flow crossed only k/2 of the (k/2)² core
    switches ([2048, 0, 0, 2048] at k = 4), halving a permutation's core bandwidth."""
    topo = Topology(kind="fat_tree", k=k)
    topo.switch.lb = LbConfig(mode="ecmp")
    fab = Fabric(topo, seed=5)
    src, dst = fab.host_ip(0), fab.host_ip(k**3 // 4 - 1)
    n = 4096
    for s in range(n):
        fab.inject(0, frame(src, dst, s), s * 100)
    fab.poll(10**12)
    core = [sum(p.rx_frames for p in sw.ports) for name, sw in fab.switches.items() if name.startswith("ss")]
    fair = n / len(core)
    assert len(core) == (k // 2) ** 2
    assert all(abs(c - fair) <= 0.25 * fair for c in core), core


def test_sender_entropy_spreads_flows_through_ecmp() -> None:
    fab = fabric("ecmp")
    send_flow(fab, 1024, sport=None)
    counts = per_spine(fab)
    assert all(abs(c - 256) <= 0.2 * 256 for c in counts), counts


def test_spray_rr_spreads_one_flow_evenly() -> None:
    fab = fabric("spray_rr")
    send_flow(fab, 400)
    assert per_spine(fab) == [100] * SPINES


def test_spray_random_spreads_one_flow_within_ten_percent() -> None:
    fab = fabric("spray_random")
    send_flow(fab, 2000)
    counts = per_spine(fab)
    assert all(abs(c - 500) <= 50 for c in counts), counts
    assert fab.counters.total("drop") == 0


def test_roce_is_never_sprayed() -> None:
    for mode in ("spray_rr", "spray_random", "adaptive", "flowlet"):
        fab = fabric(mode)
        send_flow(fab, 200, dport=4791, gap=100_000)
        assert sorted(per_spine(fab)) == [0, 0, 0, 200], mode


def test_spray_all_sprays_roce_too_the_negative_control() -> None:
    """§9.2 experiment 2's negative control: ``spray_all`` puts RoCE through the per-packet mode."""
    fab = fabric("spray_rr", spray_all=True)
    send_flow(fab, 200, dport=4791, gap=100_000)
    assert per_spine(fab) == [50, 50, 50, 50]


def test_flowlets_stay_on_one_path_and_move_between_gaps() -> None:
    fab = fabric("flowlet", flowlet_ns=50_000)
    src, dst = fab.host_ip(0), fab.host_ip(4)
    leaf0 = fab.switches["leaf0"]
    uplinks = leaf0.ports[4:]
    paths = []
    for b in range(24):
        t0 = b * 500_000  # gaps of ~460 µs between bursts, far above δ
        before = [p.tx_frames for p in uplinks]
        for _ in range(5):  # back to back: 8.5 µs apart, below δ
            fab.inject(0, frame(src, dst, 0x4242), t0)
        fab.poll(t0 + 400_000)
        used = [i for i, p in enumerate(uplinks) if p.tx_frames != before[i]]
        assert len(used) == 1  # one flowlet, one path
        paths.append(used[0])
    assert len(set(paths)) >= 3  # new flowlets are re-hashed


def test_adaptive_avoids_the_loaded_uplink() -> None:
    cfg = SwitchConfig(lb=LbConfig(mode="adaptive"))
    sw = Switch("sw", 1, [PortSpec(100 * GBPS), PortSpec(GBPS), PortSpec(100 * GBPS)], cfg)
    sw.add_route("10.0.1.0/24", [1, 2])
    sw.receive(1, pfc_frame(b"\x02\0\0\0\0\x09", {0: 0xFFFF}), 0)  # uplink 1 stuck: its queue grows
    for k in range(50):
        sw.receive(0, frame("10.0.0.1", "10.0.1.2", k), 1_000 * (k + 1))
    # ties (both queues under one maximum frame, 1518 bytes) are broken at random; once the
    # paused uplink holds 3 frames of 542 bytes it is never chosen again
    assert sw.ports[1].qbytes[0] <= 3 * 542
    assert sw.ports[2].tx_frames >= 47


def test_per_tc_mode() -> None:
    fab = fabric("ecmp", per_tc={0: "spray_rr"})
    send_flow(fab, 400)
    assert per_spine(fab) == [100] * SPINES
    src, dst = fab.host_ip(0), fab.host_ip(4)
    t = fab.now
    for _ in range(100):  # UET control class (DSCP 46) keeps ECMP
        fab.inject(0, frame(src, dst, 0x999, dscp=46), t)
    fab.poll(t + 10**9)
    after = per_spine(fab)
    assert sorted(a - 100 for a in after) == [0, 0, 0, 100]


def test_the_switch_hashes_a_forwarded_packet_as_choose_pkt_does() -> None:
    """Switch._arrive inlines LoadBalancer.choose_pkt's ECMP for a packet from another switch:
    for many flows, over groups of 2 to 5 ports, the same egress port."""
    from uet.fabric.model.lb import LoadBalancer
    from uet.fabric.model.port import Packet

    dst = int.from_bytes(ip_bytes("10.0.1.2"), "big")
    used = set()
    for n in range(2, 6):
        sw = Switch("sw", 7, [PortSpec() for _ in range(6)])
        group = tuple(range(1, n + 1))
        sw.add_route("10.0.1.0/24", group)
        lb = LoadBalancer(SwitchConfig().lb, 7, sw.rng)
        for k, sport in enumerate(range(0, 4000, 37)):
            f = frame("10.0.0.1", "10.0.1.2", sport)
            sw._arrive(0, Packet(bytearray(f), 0, 0, 14, 0, dst), k * 100_000)  # every port idle again
            (tx,) = sw.take_transmissions()
            assert tx.port == lb.choose_pkt(group, sw.ports, Packet(bytearray(f), 0, 0, 14, 0, dst), 0, 0)
            used.add(tx.port)
    assert used == {1, 2, 3, 4, 5}


def test_the_switch_hashes_a_frame_from_a_host_as_choose_pkt_does() -> None:
    """Issue 28: Switch._process hashes an untagged UDP packet without IP options from the fields
    its one unpack read (frames.flow_key_udp), and hands others to LoadBalancer.choose_pkt: for
    many flows, over groups of 2 to 5 ports, untagged and 802.1Q-tagged, the port the bare rule
    (mix32 of the CRC-32 of tuple and seed) gives, and the packet keeps its tuple's key."""
    from uet.fabric.model.port import Packet

    used = set()
    for n in range(2, 6):
        sw = Switch("sw", 9, [PortSpec() for _ in range(6)])
        group = tuple(range(1, n + 1))
        sw.add_route("10.0.1.0/24", group)
        seed = (9).to_bytes(4, "big")
        held: list[Packet] = []

        def enqueue(pkt: Packet, out: int, now: int, held: list[Packet] = held, sw: Switch = sw) -> None:
            held.append(pkt)
            Switch._enqueue(sw, pkt, out, now)

        sw._enqueue = enqueue  # type: ignore[method-assign]  # (looks inside: the suite runs pure Python)
        for k, sport in enumerate(range(0, 4000, 37)):
            f = frame("10.0.0.1", "10.0.1.2", sport)
            tagged = f[:12] + bytes((0x81, 0, 0, 5)) + f[12:]
            want = group[mix32(zlib.crc32(flow_tuple(f, 14) + seed)) % n]
            for g in (f, tagged):
                sw.receive(0, g, 2 * k * 100_000 + (len(g) - len(f)) * 25_000)  # every port idle again
                (tx,) = sw.take_transmissions()
                assert tx.port == want
                assert held.pop().fcrc == flow_key(f, 14)
            used.add(tx.port)
    assert used == {1, 2, 3, 4, 5}


def test_routes_added_at_once_give_the_table_added_one_by_one() -> None:
    """Issue 28: Switch.add_routes builds the table once (a Fabric's switches take their routes
    so): the same static routes, in the same order, and the same look-ups as add_route called
    for each; a bad route raises and adds nothing."""
    rng = random.Random(3)
    routes = []
    for _ in range(60):
        plen = rng.choice((8, 16, 24, 32, 24))
        addr = ".".join(str(rng.randrange(256)) for _ in range(4))
        routes.append((f"{addr}/{plen}", tuple(rng.sample(range(6), rng.randint(1, 3)))))
    one, many = (Switch("sw", 1, [PortSpec() for _ in range(6)]) for _ in range(2))
    for prefix, ports in routes:
        one.add_route(prefix, ports)
    many.add_routes(routes)
    assert one.static_routes() == many.static_routes()
    for _ in range(500):
        key = rng.getrandbits(32)
        assert one.route(key) == many.route(key)
    with pytest.raises(FabricError):
        many.add_routes([("10.9.0.0/16", (1,)), ("10.8.0.0/16", (9,))])
    assert one.static_routes() == many.static_routes()


def test_choose_pkt_sprays_round_robin_as_choose_for_does() -> None:
    """LoadBalancer.choose_pkt writes out choose_for → choose's spray_rr for a sprayed packet: from
    random round-robin states, for UET and RoCE packets (RoCE is hashed, not sprayed) with and
    without spray_all, over groups of 1 to 5 ports, the same port and the same state after."""
    import random

    from uet.fabric.model.lb import LoadBalancer
    from uet.fabric.model.port import Packet

    rng = random.Random(5)
    ports = Switch("sw", 3, [PortSpec() for _ in range(6)]).ports
    for spray_all in (False, True):
        cfg = LbConfig(mode="spray_rr", spray_all=spray_all)
        fast, slow = LoadBalancer(cfg, 3, random.Random(1)), LoadBalancer(cfg, 3, random.Random(1))
        for _ in range(300):
            group = tuple(rng.sample(range(6), rng.randint(1, 5)))
            start = rng.randrange(len(group))
            fast._rr[group] = slow._rr[group] = start
            f = bytearray(frame("10.0.0.1", "10.0.1.2", rng.randrange(65536), dport=rng.choice((4793, 4791))))
            got = fast.choose_pkt(group, ports, Packet(f, 0, 0, 14, 0), 0, 0)
            assert got == slow.choose_for(group, ports, f, 14, 0, 0)
            assert fast._rr == slow._rr
