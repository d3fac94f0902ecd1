"""The NIC's PFC behaviour in the sans-I/O model (fabric/model/nic.py), exact bytes and exact
times: the rule the simulator's host NICs and the live fabric link (uet/link/fabric.py) share.
A pause lasts quanta × 512 bit times at the link rate rounded up, as the switch model's ports
round; held frames leave in order when the pause ends or an XON comes; a classic PAUSE stops
every class; MAC-control frames are parsed by the one codec (frames.parse_pause)."""

from __future__ import annotations

import struct

from uet.fabric.model.config import SwitchConfig, default_dscp_map
from uet.fabric.model.events import EventQueue
from uet.fabric.model.frames import pfc_frame
from uet.fabric.model.nic import HostNic, PfcTransmit
from uet.fabric.model.port import Port
from uet.fabric.model.telemetry import Counters, Telemetry

from uet.wire.build import build_ethernet, build_ip_packet

MAC = b"\x02\0\0\0\0\x09"
RATE = 300_000_000  # one quantum = 512 bit times = 1706.67 ns: rounding shows
ONE_QUANTUM_NS = 1707  # rounded up, as Port.pause_ns (the switch model) rounds


def _frame(tag: bytes, dscp: int = 0) -> bytes:
    return build_ethernet(build_ip_packet(tag.ljust(20, b"\0"), "10.0.0.1", "10.0.0.2", entropy=1, dscp=dscp))


def _model() -> PfcTransmit:
    return PfcTransmit(RATE, default_dscp_map())


def test_pause_lasts_quanta_rounded_up_and_held_frames_leave_in_order() -> None:
    m = _model()
    assert m.receive(pfc_frame(MAC, {0: 1}), 14, 1_000)
    a, b = _frame(b"a"), _frame(b"b")
    assert not m.send(a, 0, 1_000) and not m.send(b, 0, 2_000)
    assert m.held == 2 and m.counters["tx_held"] == 2 and m.counters["pfc_rx_xoff"] == 1
    assert m.next_deadline(2_000) == 1_000 + ONE_QUANTUM_NS
    assert m.due(1_000 + ONE_QUANTUM_NS - 1) == []  # floor division would release it here
    assert m.due(1_000 + ONE_QUANTUM_NS) == [a, b]
    assert m.held == 0 and m.next_deadline(3_000) is None
    assert m.send(_frame(b"c"), 0, 3_000)  # the class runs again


def test_xon_resumes_at_once_and_other_classes_are_not_held() -> None:
    m = _model()
    m.receive(pfc_frame(MAC, {0: 0xFFFF}), 14, 0)
    held = _frame(b"d")
    assert not m.send(held, 0, 10)
    assert m.send(_frame(b"ctrl", 46), 46, 10)  # DSCP 46 → TC 6: not paused
    assert m.paused_until(10)[0] == m.port.pause_ns(0xFFFF) and m.paused_until(10)[6] == 0
    assert m.receive(pfc_frame(MAC, {0: 0}), 14, 500)
    assert m.counters["pfc_rx_xon"] == 1 and m.due(500) == [held] and m.paused_until(500)[0] == 0


def test_a_frame_after_the_pause_ran_out_waits_behind_the_held_ones() -> None:
    m = _model()
    m.receive(pfc_frame(MAC, {0: 1}), 14, 0)
    first, late = _frame(b"first"), _frame(b"late")
    m.send(first, 0, 0)
    assert not m.send(late, 0, 5_000)  # pause over, but "first" not yet released: order kept
    assert m.due(5_000) == [first, late]


def test_classic_pause_stops_every_class_and_other_mac_control_is_refused() -> None:
    m = _model()
    classic = b"\x01\x80\xc2\x00\x00\x01" + MAC + b"\x88\x08" + struct.pack("!HH", 0x0001, 2) + bytes(42)
    assert m.receive(classic, 14, 0)
    assert m.counters["pfc_rx_xoff"] == 8
    assert not m.send(_frame(b"x"), 0, 1) and not m.send(_frame(b"y", 46), 46, 1)
    assert m.next_deadline(1) == 3_414  # 2 quanta = 3413.33 ns, rounded up
    other = b"\x01\x80\xc2\x00\x00\x01" + MAC + b"\x88\x08" + struct.pack("!HH", 0x0002, 0) + bytes(42)
    assert not m.receive(other, 14, 0) and not m.receive(b"\x01" * 15, 14, 0)


def test_a_vlan_tagged_pause_is_read_after_the_tag() -> None:
    m = _model()
    plain = pfc_frame(MAC, {3: 4})
    tagged = plain[:12] + b"\x81\x00\x60\x00" + plain[12:]
    assert m.receive(tagged, 18, 0) and m.paused_until(0)[3] == m.port.pause_ns(4)


def test_the_host_nic_tells_pfc_frames_by_their_whole_ethertype() -> None:
    """Issue 28: HostNic.ingress reads the EtherType's second byte only when the first is MAC
    control's: a PFC frame is applied and flagged, frames whose EtherType shares either byte with
    0x8808 (0x8847, 0x0808, IPv4 0x0800) are not."""
    events = EventQueue()
    nic = HostNic(0, "h0", Port(0, RATE, 0), SwitchConfig(), events, Telemetry(), Counters())
    got: list[bool] = []
    nic.on_deliver = lambda _h, _f, _now, is_pfc: got.append(is_pfc)
    nic.ingress(0, bytearray(pfc_frame(MAC, {0: 1})), 1_000)
    assert got == [True] and nic.port.paused_until[0] > 1_000
    for et in (b"\x88\x47", b"\x08\x08", b"\x08\x00"):
        f = bytearray(_frame(b"a"))
        f[12:14] = et
        nic.ingress(0, f, 2_000)
    assert got == [True, False, False, False]


def test_the_simulated_host_nic_resumes_at_the_same_time() -> None:
    """A HostNic (simulator) paused by the same frame starts its held frame exactly when the
    live link's model releases it."""
    events = EventQueue()
    port = Port(0, RATE, 0)
    nic = HostNic(0, "h0", port, SwitchConfig(), events, Telemetry(), Counters())
    starts: list[int] = []
    nic.on_transmit = lambda _nic, _p, _frame, start, _end: starts.append(start)
    nic.ingress(0, bytearray(pfc_frame(MAC, {0: 1})), 1_000)
    nic.send(_frame(b"a"), 1_000)
    events.run_until(10_000)
    assert starts == [1_000 + ONE_QUANTUM_NS]
    m = _model()
    m.receive(pfc_frame(MAC, {0: 1}), 14, 1_000)
    m.send(_frame(b"a"), 0, 1_000)
    assert m.next_deadline(1_000) == starts[0]


def test_send_ipv4_keeps_the_frame_it_is_handed_and_queues_as_send_does() -> None:
    """Issue 28: ``HostNic.send_ipv4`` (the simulator's frames: untagged IPv4, TOS byte known)
    queues and starts frames exactly as ``send`` does, but keeps the very bytearray it is handed
    (no copy); the frames leave in the same order at the same times with the same classes."""
    out = []
    for owned in (False, True):
        ev = EventQueue()
        cfg = SwitchConfig()
        nic = HostNic(0, "h0", Port(0, 10**9, 1000), cfg, ev, Telemetry(), Counters())
        sent: list[tuple[bytearray, int, int]] = []
        nic.on_transmit = lambda node, port, frame, start, end, sent=sent: sent.append((frame, start, end))
        frames = []
        for k, dscp in enumerate((0, 26, 46, 0, 26)):
            f = bytearray(build_ethernet(build_ip_packet(bytes(100 + k), "10.0.0.1", "10.0.0.2", entropy=k, dscp=dscp)))
            frames.append(f)
            if owned:
                nic.send_ipv4(f, dscp << 2, k * 10)
            else:
                nic.send(f, k * 10)
        ev.run_until(10**9)
        assert len(sent) == 5
        if owned:
            assert all(any(fr is f for f in frames) for fr, _, _ in sent)
        else:
            assert not any(fr is f for fr, _, _ in sent for f in frames)
        out.append([(bytes(fr), start, end) for fr, start, end in sent])
    assert out[0] == out[1]
