"""The FEP's transmit scheduling across destinations (uet.fep.scheduler, issue 12's all-to-all
finding): destinations with packets ready are served round-robin, one packet each per turn,
each destination's packets keep their order, and a destination whose window is closed does not
hold back another. Exact packets from FEP cores on a fake clock, plus the rule itself as a
property of :func:`~uet.fep.scheduler.interleave`."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from fep_harness import decode, pds_of, ses_of
from hypothesis import given
from hypothesis import strategies as st
from uet.tools.roce_experiments import default_dir

from uet.fep import Datagram, FepConfig, FepCore, SendCompleted, Transmit
from uet.fep.events import Closed, WriteCompleted
from uet.fep.scheduler import interleave
from uet.pds import PdsConfig
from uet.sim.scenario import simulate
from uet.wire.pds import PdsType, ReqFlag
from uet.wire.ses import SesFlag

A, B, C = "10.0.0.1", "10.0.0.2", "10.0.0.3"
PAYLOAD = 4096
DELAY = 10_000  # one-way delay of the fake network, ns


class Net:
    """Three FEP cores on a fake clock; datagrams to an address in ``silent`` are lost."""

    def __init__(self, config: FepConfig | None = None) -> None:
        self.cores = {a: FepCore(a, job=7, pid=1, config=config, seed=i + 1) for i, a in enumerate((A, B, C))}
        self.now = 0
        self.silent: set[str] = set()
        #: every datagram A handed out: (time, Transmit)
        self.sent: list[tuple[int, Transmit]] = []
        self._flight: list[tuple[int, str, Datagram]] = []
        #: completion events by core and handle
        self.events: dict[str, dict[int, Any]] = {a: {} for a in self.cores}
        self.done = self.events[A]

    def flush(self) -> None:
        for addr, core in self.cores.items():
            for t in core.datagrams_to_send(self.now):
                if addr == A:
                    self.sent.append((self.now, t))
                if t.destination not in self.silent:
                    self._flight.append((self.now + DELAY, t.destination, Datagram(t.data, addr, t.ecn)))
            while (ev := core.next_event()) is not None:
                assert not isinstance(ev, (WriteCompleted, Closed))  # no WRITEs, no close here
                self.events[addr][ev.handle] = ev

    def step(self) -> None:
        """Deliver the next instant's datagrams and fire due timers."""
        self.flush()
        at = [t for t, _d, _g in self._flight]
        at += [t for c in self.cores.values() if (t := c.get_timer()) is not None]
        self.now = max(self.now, min(at))
        due = [f for f in self._flight if f[0] <= self.now]
        self._flight = [f for f in self._flight if f[0] > self.now]
        for dst in (A, B, C):
            batch = [g for _t, d, g in due if d == dst]
            if batch:
                self.cores[dst].receive_batch(batch, self.now)
        for c in self.cores.values():
            t = c.get_timer()
            if t is not None and t <= self.now:
                c.handle_timer(self.now)
        self.flush()

    def requests(self, dst: str | None = None) -> list[Transmit]:
        """A's first transmissions of request packets (to ``dst``, or to anyone)."""
        return [
            t
            for _at, t in self.sent
            if t.data[0] >> 3 == PdsType.RUD_REQ and (dst is None or t.destination == dst) and not _retx(t)
        ]


def _retx(t: Transmit) -> bool:
    return bool(pds_of(t).flags & ReqFlag.RETX)


def _psns(ts: list[Transmit]) -> list[int]:
    return [pds_of(t).psn for t in ts]


def test_two_destinations_messages_interleave_packet_by_packet_on_the_wire() -> None:
    net = Net()
    a = net.cores[A]
    recv = {d: net.cores[d].post_recv(None) for d in (B, C)}
    data = {B: bytes(range(256)) * 64, C: bytes(range(255, -1, -1)) * 64}  # 4 packets each
    hb = a.send(B, data[B])
    hc = a.send(C, data[C])
    out = a.datagrams_to_send(0)
    # one packet to B, one to C, ... (before the fix: B, B, B, B, C, C, C, C)
    assert [t.destination for t in out] == [B, C, B, C, B, C, B, C]
    for d in (B, C):
        mine = [t for t in out if t.destination == d]
        psn = _psns(mine)
        assert psn == [psn[0] + i for i in range(4)]  # each PDC's order untouched
        flags = [ses_of(t).flags & (SesFlag.SOM | SesFlag.EOM) for t in mine]
        assert flags == [SesFlag.SOM, 0, 0, SesFlag.EOM]
        assert b"".join(decode(t).payload for t in mine) == data[d]
    net.sent.extend((0, t) for t in out)
    net._flight.extend((DELAY, t.destination, Datagram(t.data, A, t.ecn)) for t in out)
    for _ in range(50):
        if hb in net.done and hc in net.done:
            break
        net.step()
    assert isinstance(net.done[hb], SendCompleted) and isinstance(net.done[hc], SendCompleted)
    for d in (B, C):
        assert bytes(net.events[d][recv[d]].message.data) == data[d]


def test_a_long_message_to_one_peer_does_not_delay_a_later_one_to_another_by_its_window() -> None:
    """Sent in the same instant, C's one-packet message goes out second, not behind B's window."""
    a = Net().cores[A]
    a.send(B, bytes(40 * PAYLOAD))
    a.send(C, b"x" * 100)
    out = a.datagrams_to_send(0)
    assert [t.destination for t in out[:3]] == [B, C, B]
    assert len(out) == 41 and [t.destination for t in out[3:]] == [B] * 38


@pytest.mark.parametrize(
    "config",
    [
        FepConfig(max_inflight=4),  # the lane's flow control is full
        FepConfig(pds=PdsConfig(max_outstanding=4)),  # the PDC's window is full
    ],
    ids=["lane-limit", "pdc-window"],
)
def test_a_destination_with_its_window_closed_does_not_block_another(config: FepConfig) -> None:
    net = Net(config)
    a = net.cores[A]
    net.silent.add(B)  # B never answers: its window stays closed after 4 packets
    hb = a.send(B, bytes(16 * PAYLOAD))
    net.flush()
    assert len(net.requests(B)) == 4
    net.now = 1_000
    data = bytes(range(256)) * 128  # 8 packets to C
    r = net.cores[C].post_recv(None)
    hc = a.send(C, data)
    net.flush()
    assert [t.destination for t in net.requests()[4:]] == [C] * 4  # at once, B's backlog aside
    for _ in range(200):
        if hc in net.done:
            break
        net.step()
    assert isinstance(net.done[hc], SendCompleted)
    assert hb not in net.done  # B's message still waits for its window
    assert len(net.requests(B)) == 4 and len(net.requests(C)) == 8
    assert bytes(net.events[C][r].message.data) == data


def test_a_batch_to_one_destination_is_returned_as_it_is() -> None:
    batch = [(b"p%d" % i, B, i) for i in range(64)]
    assert interleave(batch) is batch


def test_two_datagrams_or_fewer_are_returned_as_they_are() -> None:
    """What lets ``FepCore.datagrams_to_send_packed`` skip the call for such a batch."""
    for batch in ([], [(b"p", B, 0)], [(b"p", B, 0), (b"q", C, 1)], [(b"p", C, 0), (b"q", B, 1)]):
        assert interleave(batch) is batch


_records = st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 99)), max_size=60)


@given(_records)
def test_interleave_is_round_robin_and_keeps_each_destinations_order(items: list[tuple[str, int]]) -> None:
    batch = [(n, d, i) for i, (d, n) in enumerate(items)]
    out = interleave(batch)
    assert sorted(out, key=lambda t: t[2]) == batch  # a permutation of the batch
    order = list(dict.fromkeys(t[1] for t in batch))  # destinations by first appearance
    for d in order:  # each destination's records in their order
        assert [t for t in out if t[1] == d] == [t for t in batch if t[1] == d]
    # round r serves, once each and in first-appearance order, the destinations with > r records
    count = {d: sum(1 for t in batch if t[1] == d) for d in order}
    expect = [d for r in range(max(count.values(), default=0)) for d in order if count[d] > r]
    assert [t[1] for t in out] == expect


def test_all_to_all_in_the_simulator_interleaves_every_sender_and_trims_nothing(monkeypatch) -> None:
    """Issue 12's finding at small scale: 8 hosts of the §9.2 all-to-all scenario (one leaf, 100
    Gb/s), each sending 32 KiB (8 packets) to every other. Every sender's first batch serves its
    7 destinations in turn, and with no sender bursting at one receiver nothing is trimmed
    (before: runs of 8 frames per destination, 95 trims, 40.2 µs against 25.9 µs now)."""
    scenario = tomllib.loads((Path(default_dir()) / "all_to_all.toml").read_text())
    first: dict[str, list[str]] = {}
    sent, sent_packed = FepCore.datagrams_to_send, FepCore.datagrams_to_send_packed

    def note(address: str, batch: list[tuple[bytes, str]]) -> None:
        if address not in first and batch:
            first[address] = [dst for data, dst in batch if data[0] >> 3 == PdsType.RUD_REQ]

    def record(self: FepCore, now: int, **kw: Any) -> list[Transmit]:
        out = sent(self, now, **kw)
        note(self.address, [(t.data, t.destination) for t in out])
        return out

    def record_packed(self: FepCore, now: int) -> list[tuple[bytes, str, int]]:
        out = sent_packed(self, now)
        note(self.address, [(data, dst) for data, dst, _entropy in out])
        return out

    # the simulator takes a core's batch in either form (packed where no TSS seals it)
    monkeypatch.setattr(FepCore, "datagrams_to_send", record)
    monkeypatch.setattr(FepCore, "datagrams_to_send_packed", record_packed)
    res = simulate({**scenario["run"], "transport": "uet", "endpoints": 8}, scenario["topology"], scenario["endpoint"])
    assert res["ok"] and len(first) == 8
    for src, dsts in first.items():
        order = list(dict.fromkeys(dsts))
        assert len(order) == 7 and src not in order
        assert dsts == order * (len(dsts) // 7)  # round-robin, whole rounds (8 packets each)
    assert res["fabric"]["trims"] == 0
