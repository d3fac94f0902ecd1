"""Per-link flow accounting (uet.fabric.model.linkload): exact counts on a k = 4 fat tree in
virtual time, and the route bound against a simulated permutation."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
from uet.fabric.model import Fabric
from uet.fabric.model.config import FabricError
from uet.fabric.model.frames import ipv4_frame
from uet.fabric.profiles import load_topology

from uet.sim.scenario import simulate
from uet.wire import pds, ses

pytestmark = pytest.mark.processes  # uet-ecmp-check children, no network (tests/conftest.py)

PAYLOAD = 1000


def data(src: str, dst: str, psn: int, *, sport: int = 0x4242, spdcid: int = 1, payload: int = PAYLOAD) -> bytes:
    """A RUD request (wire-format.md §5.1) with a standard SES header and ``payload`` bytes."""
    p = pds.REQUEST.encode(pds.REQUEST.make(psn=psn, spdcid=spdcid, dpdcid=2))
    s = ses.STANDARD[(1, "none")]
    upper = p + s.encode(s.make(message_id=1, job_id=7, request_length=payload)) + bytes(payload)
    return ipv4_frame(src, dst, upper, sport=sport, ecn=2)


def ack(src: str, dst: str, psn: int) -> bytes:
    return ipv4_frame(src, dst, pds.ACK.encode(pds.ACK.make(cack_psn=psn, spdcid=2, dpdcid=1)), ecn=2)


def fabric(**over: object) -> Fabric:
    topo = load_topology("fat_tree", profile="datacenter", rate_bps=100_000_000_000, overrides=dict(over))
    return Fabric(topo, link_load=True)


def run(fab: Fabric) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    while (t := fab.next_deadline()) is not None:
        got += fab.poll(t)
    return got


def wire(frame: bytes) -> int:
    return max(len(frame), 60) + 24


def test_one_flow_charges_its_data_once_to_each_link_of_its_path() -> None:
    fab = fabric()
    a, b = fab.host_ip(0), fab.host_ip(15)
    frames = [data(a, b, psn) for psn in (100, 101, 102)]
    for t, f in enumerate([*frames, frames[1]]):  # and a duplicate of PSN 101
        fab.inject(0, f, t * 1_000)
    fab.inject(15, ack(b, a, 102), 5_000)  # an ACK back: not data
    assert len(run(fab)) == 5
    s = fab.link_load.summary()  # type: ignore[union-attr]
    assert s["histogram"] == {"1": 6}  # host, leaf, spine, core, spine, leaf: six links one way
    names = [n for n, _, _ in s["links"]]
    assert names[0] == "h0>pod0-leaf0" and sum(n.endswith(">h15") for n in names) == 1
    assert all(nbytes == 3 * wire(frames[0]) for _, _, nbytes in s["links"])
    assert s["max_flows"] == 1 and s["bottleneck"]["flows"] == 1


def test_deliver_with_the_source_the_first_switch_read_counts_as_reading_it() -> None:
    """Issue 28: the first switch keeps the source of a UDP packet to the UET port without IP
    options (Packet.uet_src) and LinkLoad.deliver takes it instead of reading the frame again:
    the same charges as reading it, for data, duplicates, ACKs and other ports; a RoCE packet
    or a tagged frame is not marked (-1) and is read."""
    from uet.fabric.model.linkload import LinkLoad
    from uet.fabric.model.port import Packet

    fab = fabric()
    a, b = fab.host_ip(0), fab.host_ip(15)
    held: list[Packet] = []
    leaf = fab.switches[fab.hosts[0].switch]

    def enqueue(pkt: Packet, out: int, now: int, held: list[Packet] = held) -> None:
        held.append(pkt)

    leaf._enqueue = enqueue  # type: ignore[method-assign]  # (looks inside: the suite runs pure Python)
    d = data(a, b, 7)
    frames = [d, d, data(a, b, 8, spdcid=3), ack(a, b, 7), ipv4_frame(a, b, bytes(64), sport=9, dport=4791)]
    frames.append(d[:12] + bytes((0x81, 0, 0, 0)) + d[12:])
    for t, f in enumerate(frames):
        fab.inject(0, f, t * 10_000)
    run(fab)
    srcs = [p.uet_src for p in held]
    src = int.from_bytes(bytes(int(x) for x in a.split(".")), "big")
    assert srcs == [src, src, src, src, -1, -1]
    known, read = LinkLoad(), LinkLoad()
    dst = int.from_bytes(bytes(int(x) for x in b.split(".")), "big")
    for p in held:
        known.deliver(p.frame, p.ip, 5, 24, dst, p.uet_src)
        read.deliver(p.frame, p.ip, 5, 24, dst)
    assert known._paths == read._paths and len(known._paths) == 1
    assert list(known._paths.values()) == [[2 * wire(d), 2, wire(d)]]  # PSN 7 (once) and 8


def test_flows_sharing_a_link_are_counted_each_and_the_bound_is_their_sum() -> None:
    fab = fabric()
    dst = fab.host_ip(15)
    senders = (0, 4, 8)  # three pods, one destination: its downlink carries all three
    f0 = data(fab.host_ip(0), dst, 5)
    for i, h in enumerate(senders):
        for psn in range(4):
            fab.inject(h, data(fab.host_ip(h), dst, 1000 * i + psn, spdcid=7), 0)
    run(fab)
    load = fab.link_load
    assert load is not None
    s = load.summary()
    down = [(n, k, nb) for n, k, nb in s["links"] if n.endswith(">h15")]
    assert down == [(down[0][0], 3, 12 * wire(f0))]
    assert s["max_flows"] == 3
    # the bound: 12 frames on the 100 Gb/s downlink, then the least time after them on a 6-link
    # path: 6 × (2 µs of propagation + an 84-byte ACK) + 5 store-and-forward of one frame
    ser = wire(f0) * 8 / 100  # ns per frame at 100 Gb/s
    expect = 12 * ser + 6 * (2_000 + 84 * 8 / 100) + 5 * ser
    assert s["route_bound_us"] == pytest.approx(expect / 1e3, abs=1e-3)
    assert s["bottleneck"]["link"] == down[0][0]


def test_trimmed_copies_count_nothing_and_their_resends_count_once() -> None:
    # one host link of 1 Gb/s, the rest 100 Gb/s: 60 frames at once overflow the last hop's queue
    fab = fabric()
    hp = fab.hosts[15]
    fab.switches[hp.switch].ports[hp.port].rate_bps = 1_000_000_000
    a, b = fab.host_ip(0), fab.host_ip(15)
    for psn in range(60):
        fab.inject(0, data(a, b, psn, payload=4000), 0)
    got = run(fab)
    full = sorted(int.from_bytes(f[46:50], "big") for _, f in got if len(f) > 1000)
    trimmed = sorted(int.from_bytes(f[46:50], "big") for _, f in got if len(f) <= 1000)
    assert trimmed and len(full) + len(trimmed) == 60
    w = wire(data(a, b, 0, payload=4000))
    by_name = {n: nb for n, _, nb in fab.link_load.summary()["links"]}  # type: ignore[union-attr]
    assert by_name["h0>pod0-leaf0"] == len(full) * w  # charged only once delivered
    for psn in trimmed + full[:3]:  # the resends of the trimmed ones, and three duplicates
        fab.inject(0, data(a, b, psn, payload=4000), fab.now)
        run(fab)
    by_name = {n: nb for n, _, nb in fab.link_load.summary()["links"]}  # type: ignore[union-attr]
    assert set(by_name.values()) == {60 * w}


def test_pdcs_of_one_source_and_spdcid_to_two_destinations_are_counted_apart() -> None:
    """A PDC is (source, destination, SPDCID): the accounting keys it by source and SPDCID with
    the destination beside (a machine-sized key), so a second destination under the same key must
    still be told apart, not taken for duplicates of the first one's PSNs."""
    fab = fabric()
    a = fab.host_ip(0)
    for dst in (15, 14, 15):  # the third frame: a duplicate of the first
        fab.inject(0, data(a, fab.host_ip(dst), 9, spdcid=3), fab.now)
        run(fab)
    by_name = {n: nb for n, _, nb in fab.link_load.summary()["links"]}  # type: ignore[union-attr]
    w = wire(data(a, fab.host_ip(15), 9))
    assert by_name["h0>pod0-leaf0"] == 2 * w
    assert by_name["pod3-leaf1:1>h15"] == w and by_name["pod3-leaf1:0>h14"] == w


@pytest.mark.parametrize("hosts", [1024, 8192])
def test_a_packed_path_stays_a_machine_sized_int_at_scale(hosts: int) -> None:
    """Issue 28: the path a packet carries across a fat tree's 6 links fits in 62 bits (the
    compiled build's native ints), which one link id per hop did not (13 bits each at 1,024
    hosts: 78 in all; 16 at 8,192: 96), and it unpacks to the links the frame crossed."""
    fab = fabric(hosts=hosts)
    load = fab.link_load
    assert load is not None
    last = hosts - 1
    fab.inject(0, data(fab.host_ip(0), fab.host_ip(last), 1), 0)
    assert len(run(fab)) == 1
    ((_, path),) = load._paths
    assert path.bit_length() <= 62
    links = load.unpack(path)
    names = [load.links[li - 1].name for li in links]
    assert len(names) == 6 and names[0] == "h0>pod0-leaf0" and names[-1].endswith(f">h{last}")
    for a, b in pairwise(names):  # each link leaves the node the one before it reached
        assert b.startswith(a.split(">")[1] + ":")
    assert load.pack(links) == path
    assert [n for n, _, _ in load.summary()["links"]] == sorted(names, key=lambda n: links[names.index(n)])


def test_no_accounting_where_switches_re_parse_frames() -> None:
    with pytest.raises(FabricError):
        fabric(**{"switch.latency_ns": 100})


SIM_EP: dict[str, Any] = {
    "payload_size": 4096,
    "ecn_capable": True,
    "max_inflight": 1024,
    "pds": {"max_nack_retx": 1 << 30, "fast_retx_threshold": 0, "cc": "nscc"},
}


@pytest.mark.parametrize("lb", ["single", "oblivious"])
def test_a_simulated_permutation_reports_every_flow_once_and_a_bound_below_its_tail(lb: str) -> None:
    ep = {**SIM_EP, "pds": {**SIM_EP["pds"], "lb": lb}}
    run_ = {"workload": "permutation", "endpoints": 16, "message_bytes": 131072, "messages": 1, "seed": 3}
    res = simulate(run_, None, ep)
    assert res["ok"]
    s = res["links"]
    frame = 4096 + 44 + 12 + 8 + 20 + 14 + 24
    per_flow = 32 * frame
    # every host's uplink and downlink carry exactly one flow's data
    ups = [nb for n, k, nb in s["links"] if n.startswith("h")]
    downs = [nb for n, k, nb in s["links"] if ">h" in n]
    assert ups == [per_flow] * 16 and downs == [per_flow] * 16
    if lb == "single":  # one path each: every link carries whole flows
        assert all(nb == k * per_flow for _, k, nb in s["links"])
    else:
        assert s["max_flows"] > 1 and any(nb % per_flow for _, _, nb in s["links"])
    assert s["route_bound_us"] <= res["fct"]["max_s"] * 1e6
    assert s["bottleneck_fct"]["flows"] == s["bottleneck"]["flows"]


def test_static_ecmp_paths_are_the_paths_frames_take() -> None:
    """uet.fabric.model.routes walks the same tables and hash as the data path: for 40 flows of
    a k = 4 fat tree the links the accounting saw are exactly the computed ones."""
    from uet.fabric.model.routes import ecmp_path, link_flows

    fab = fabric()
    flows = [(s, (s * 7 + 3) % 16, 0x4000 + 977 * s) for s in range(16) if (s * 7 + 3) % 16 != s]
    flows += [(s, 15 - s, 0x9000 + s) for s in range(8)]
    for s, d, sport in flows:
        fab.inject(s, data(fab.host_ip(s), fab.host_ip(d), sport, sport=sport, spdcid=sport), fab.now)
    run(fab)
    seen = {n: k for n, k, _ in fab.link_load.summary()["links"]}  # type: ignore[union-attr]
    assert link_flows(fab, flows) == seen
    assert len(ecmp_path(fab, 0, 15, 0x4000)) == 6 and len(ecmp_path(fab, 0, 1, 0x4000)) == 2


def test_uniform_reference_counts_links_by_hand() -> None:
    import random

    from uet.fabric.model.routes import uniform_fat_tree_max

    rng = random.Random(1)
    # k = 4: hosts 0, 1 share edge switch 0; two flows into host 1's downlink from the same edge
    assert uniform_fat_tree_max(4, [(0, 1), (1, 0)], rng) == 1
    assert uniform_fat_tree_max(4, [(0, 2), (1, 3), (2, 0)], rng) in (1, 2)  # the two up from edge 0: 2 aggs
    assert uniform_fat_tree_max(4, [(0, 4), (0, 5)], rng) == 2  # both leave host 0's uplink


def test_ecmp_check_cli_json() -> None:
    import json
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "uet.tools.ecmp_check", "--hosts", "16", "--draws", "5", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["k"] == 4 and out["draws"] == 5
    assert sum(out["ecmp"]["distribution"].values()) == 5 == sum(out["uniform"]["distribution"].values())
    bad = subprocess.run([sys.executable, "-m", "uet.tools.ecmp_check", "--draws", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
