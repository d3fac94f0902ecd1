"""A switch's trim mark on a plain UDP or IP link (behaviour.md §3.2–§3.3): the DSCP of a received
packet (7 trimmed in the fabric, 5 at the last hop, uet.wire.frame) reaches the core as the
``ECN_TRIMMED`` / ``ECN_LASTHOP`` marks, as the fabric link's do; every other DSCP leaves only
the ECN bits. End to end (the NACK a target answers) it is ``uet-conformance`` NAK-016/NAK-017."""

from __future__ import annotations

import socket

from test_link_direct import Sink

from uet.fep.core import ECN_LASTHOP, ECN_TRIMMED
from uet.fep.events import Datagram
from uet.fep.marking import RX_ECN
from uet.link import DirectLink
from uet.link.direct import loopback_addresses
from uet.link.ip import IpLink
from uet.wire.frame import DSCP_TRIM_FABRIC, DSCP_TRIM_LASTHOP


def test_only_the_two_trim_dscps_mark_a_packet_trimmed() -> None:
    for tos in range(256):
        dscp, ecn = tos >> 2, tos & 3
        trimmed = ECN_TRIMMED if dscp in (DSCP_TRIM_FABRIC, DSCP_TRIM_LASTHOP) else 0
        assert RX_ECN[tos] == ecn | trimmed | (ECN_LASTHOP if dscp == DSCP_TRIM_LASTHOP else 0), tos


def test_the_ip_link_hands_up_the_trim_marks() -> None:
    link = IpLink.__new__(IpLink)
    link.v6 = False
    link.counters = {"rx_errors": 0}
    ip = bytes([0x45, DSCP_TRIM_LASTHOP << 2 | 3]) + bytes(18)
    assert link.parse(ip + b"\x00\x07\x00\x00cut", "1.2.3.4", 0) == Datagram(b"cut", "1.2.3.4", 3, True, True, 7)
    ip = bytes([0x45, DSCP_TRIM_FABRIC << 2]) + bytes(18)
    assert link.parse(ip + b"\x00\x07\x00\x00cut", "1.2.3.4", 0) == Datagram(b"cut", "1.2.3.4", 0, True, False, 7)


async def test_the_direct_link_hands_up_the_trim_marks() -> None:
    a, b = loopback_addresses(2)
    rx = DirectLink(b, 0)
    sink = Sink()
    rx.set_receiver(sink)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind((a, 0))
    try:
        for tos in (DSCP_TRIM_FABRIC << 2 | 3, DSCP_TRIM_LASTHOP << 2, 46 << 2 | 3):
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            tx.sendto(b"x", (b, rx.port))
        await sink.wait(3)
        assert [e for _d, _s, e in sink.items] == [3 | ECN_TRIMMED, ECN_TRIMMED | ECN_LASTHOP, 3]
    finally:
        tx.close()
        rx.close()
