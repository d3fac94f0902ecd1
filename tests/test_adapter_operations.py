"""The operations the three adapters share (uet.adapter.CoreOperations) and the link surface they
read (uet.link.base.Link): each operation is declared once, an adapter reads its link's declared
attributes and methods instead of probing for them, and the shared operations behave alike over
the FEP core and the RoCE core."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from uet.fabric.model import Fabric
from uet.fabric.profiles import load_topology

from uet.adapter import CoreOperations, Receive
from uet.endpoint import Endpoint
from uet.fep import FepConfig, FepCore
from uet.fep.events import Datagram
from uet.link.base import Link, ReceiveCallback
from uet.link.tap import TapLink
from uet.pds import Mode
from uet.roce.core import RoceCore, UnsupportedAtomic, config_for_link
from uet.roce_endpoint import RoceEndpoint
from uet.ses.errors import Cancelled
from uet.ses.memory import Access
from uet.sim import Engine, SimEndpoint
from uet.sim.loop import run
from uet.wire.net import UET_UDP_PORT
from uet.wire.ses import AmoOp, AmoType

ROOT = Path(__file__).resolve().parents[1]

#: every operation of the transport contract and the UET extras the adapters share
OPERATIONS = (
    "register",
    "deregister",
    "send",
    "send_nowait",
    "write",
    "read",
    "atomic",
    "compare_swap",
    "recv",
    "recv_nowait",
    "recv_into",
    "post_recv",
    "cancel",
)


@pytest.mark.parametrize("adapter", [Endpoint, RoceEndpoint, SimEndpoint])
def test_each_operation_is_declared_once_in_core_operations(adapter: type) -> None:
    """The live endpoint, the RoCE endpoint and the simulator's endpoint take every operation from
    CoreOperations; what differs between them is a hook (``_start``, ``_posted``, ``_collect``)."""
    assert issubclass(adapter, CoreOperations)
    assert [op for op in OPERATIONS if op not in CoreOperations.__dict__] == []
    assert [op for op in OPERATIONS if op in adapter.__dict__] == []


#: the adapters: no getattr/hasattr at all (what they read of a link, a core or a clock is declared)
ADAPTERS = ("adapter.py", "endpoint.py", "roce_endpoint.py", "sim/endpoint.py")


def _probes(pattern: str, files: list[Path]) -> list[str]:
    probe = re.compile(pattern)
    return [
        f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
        for p in files
        for text in [p.read_text()]
        for m in probe.finditer(text)  # over the whole text: a call may break its line after "("
    ]


def test_no_adapter_probes_its_link_its_core_or_its_clock() -> None:
    """The adapters read what :class:`Link` declares (``send_marked``, ``counters``,
    ``peer_port``...), what their core's protocol declares and what the clock's type has, instead
    of probing with getattr/hasattr; the links (and their wrappers) do not probe a link or a
    received item either (the platform's socket constants aside)."""
    assert _probes(r"\b(getattr|hasattr)\(", [ROOT / "uet" / f for f in ADAPTERS]) == []
    links = sorted((ROOT / "uet" / "link").glob("*.py"))
    assert _probes(r"\b(getattr|hasattr)\(\s*(self\.)?_?(link|inner|item)\b", links) == []


class _Recorder(Link):
    """A link without a batch method of its own: records what :meth:`send` is given."""

    def __init__(self) -> None:
        self.address = "10.0.0.1"
        self.counters = {}
        self.sent: list[tuple[bytes, str, int, int, int]] = []
        self.callback: ReceiveCallback | None = None

    def send(self, datagram: bytes, dst: str, entropy: int, dscp: int, ecn: int = 0) -> None:
        self.sent.append((datagram, dst, entropy, dscp, ecn))

    def set_receiver(self, callback: ReceiveCallback) -> None:
        self.callback = callback

    def close(self) -> None:
        pass


def test_the_default_batch_transmit_sends_each_datagram_with_its_marking() -> None:
    """``Link.send_marked`` (the base class's): in order, datagram ``d`` with the DSCP and ECN of
    the TOS byte ``tos[d[0] >> 3]``."""
    link = _Recorder()
    tos = [0] * 32
    tos[2] = 26 << 2 | 2  # a RUD request: DSCP 26, ECT(0)
    tos[8] = 46 << 2  # an ACK: DSCP 46 (EF), not ECN-capable
    batch: Sequence[tuple[bytes, str, int]] = [
        (bytes([2 << 3, 1]), "10.0.0.2", 0x1111),
        (bytes([8 << 3, 2]), "10.0.0.3", 0x2222),
        (bytes([2 << 3, 3]), "10.0.0.2", 0x3333),
    ]
    link.send_marked(batch, tos)
    assert link.sent == [
        (bytes([2 << 3, 1]), "10.0.0.2", 0x1111, 26, 2),
        (bytes([8 << 3, 2]), "10.0.0.3", 0x2222, 46, 0),
        (bytes([2 << 3, 3]), "10.0.0.2", 0x3333, 26, 2),
    ]


class _Taps:
    """What :class:`TapLink` writes to: the frames, in order."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, name: str, port: object, frame: bytes, t: int) -> None:
        self.frames.append(bytes(frame))


def test_a_tap_shows_the_source_port_a_received_record_carried() -> None:
    """A link handing up :class:`~uet.fep.events.Datagram` records (the fabric link) gives each
    one's UDP source port, which the tap's frame shows; a ``(datagram, source, ecn)`` triple has
    none, and the frame shows 4793."""
    inner = _Recorder()
    taps = _Taps()
    tap = TapLink(inner, taps, clock=lambda: 0)
    got: list[Any] = []
    tap.set_receiver(got.extend)
    assert inner.callback is not None
    pkt = bytes([2 << 3]) + bytes(40)
    batch: list[Any] = [Datagram(pkt, "10.0.0.2", 0, source_port=0xBEEF), (pkt, "10.0.0.3", 0)]  # records or triples
    inner.callback(batch)
    assert len(got) == 2
    # Ethernet (14 bytes), IPv4 (20), then the UDP source port
    assert [int.from_bytes(f[34:36], "big") for f in taps.frames] == [0xBEEF, UET_UDP_PORT]


def _sim_pair(roce: bool = False) -> tuple[Engine, SimEndpoint, SimEndpoint]:
    """Two simulated endpoints on a 2-host fat tree, with FEP cores or RoCE cores."""
    eng, (a, b) = sim_endpoints(2, roce)
    return eng, a, b


def sim_endpoints(hosts: int, roce: bool = False) -> tuple[Engine, list[SimEndpoint]]:
    """Simulated endpoints on a fat tree of ``hosts`` hosts (100 Gb/s), with FEP cores (4 KiB
    payloads) or RoCE cores."""
    topo = load_topology({"kind": "fat_tree", "hosts": hosts}, profile="datacenter", rate_bps=100_000_000_000)
    fab = Fabric(topo, seed=1)
    eng = Engine(fab)
    conf = FepConfig(payload_size=4096)
    rconf = config_for_link(100e9, topo.host_link.mtu)
    directory: dict[str, RoceCore] = {}

    def core(i: int) -> FepCore | RoceCore:
        ip = fab.hosts[i].ip
        if roce:
            return RoceCore(ip, config=rconf, seed=i, directory=directory)
        return FepCore(ip, job=0, pid=0, config=conf, seed=i)

    return eng, [SimEndpoint(eng, eng.attach(i, core(i))) for i in range(hosts)]


def test_a_simulated_fep_takes_the_uet_options_and_posted_receives() -> None:
    """The simulator's endpoint has the live endpoint's operations: delivery modes, a forced
    protocol, ``send_nowait``, ``post_recv`` and its cancel, ``compare_swap`` of another op."""
    eng, a, b = _sim_pair()

    async def main() -> None:
        mem = bytearray(64)
        mr = b.register(mem, Access.ALL)
        withdrawn = b.post_recv(None, tag=9)
        assert isinstance(withdrawn, Receive) and withdrawn.cancel()
        r = b.post_recv(bytearray(16), tag=5)
        sent = a.send_nowait(b.address, b"rendezvous", tag=5, protocol="rendezvous", mode=Mode.ROD)
        got = await r
        await sent
        assert bytes(got.data) == b"rendezvous" and got.tag == 5
        await a.write(b.address, mr.key, 0, b"ordered", mode=Mode.ROD)
        assert bytes(await a.read(b.address, mr.key, 0, 7, mode=Mode.ROD)) == b"ordered"
        mem[8:16] = (7).to_bytes(8, "little")
        old = await a.compare_swap(b.address, mr.key, 8, AmoType.UINT64, 7, 1, op=AmoOp.CSWAP_NE)
        assert old == 7 and mem[8:16] == (7).to_bytes(8, "little")  # equal: CSWAP_NE does not swap
        with pytest.raises(Cancelled):
            await withdrawn

    run(eng, main())


def test_the_roce_core_refuses_a_compare_swap_it_does_not_have() -> None:
    """RoCE has plain CSWAP only: another op of the family fails with UnsupportedAtomic. (Before,
    the RoCE core dropped ``op`` with the UET-only options and swapped as CSWAP would.)"""
    eng, a, b = _sim_pair(roce=True)

    async def main() -> None:
        mem = bytearray(16)
        mr = b.register(mem, Access.ALL)
        mem[0:8] = (3).to_bytes(8, "little")
        with pytest.raises(UnsupportedAtomic):
            await a.compare_swap(b.address, mr.key, 0, AmoType.UINT64, 3, 9, op=AmoOp.CSWAP_NE)
        assert mem[0:8] == (3).to_bytes(8, "little")
        assert await a.compare_swap(b.address, mr.key, 0, AmoType.UINT64, 3, 9) == 3
        assert mem[0:8] == (9).to_bytes(8, "little")

    run(eng, main())
