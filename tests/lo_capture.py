"""A real capture of the loopback device for tests: the frames the kernel itself puts on ``lo``,
read through an ``AF_PACKET`` socket (root or CAP_NET_RAW), as ``tcpdump -i lo`` would see them.

Only the outgoing copy of each frame is kept (``lo`` shows every frame twice, once leaving and
once arriving), and only frames between the test's own addresses, so traffic of other processes
on the machine does not enter the test.
"""

from __future__ import annotations

import socket
from pathlib import Path

from uet.pcap import PcapWriter

__all__ = ["LoCapture", "capture_error"]

_ETH_P_ALL = 0x0003
_PACKET_OUTGOING = 4


def capture_error() -> str | None:
    """None when this process may capture on ``lo``, else the reason (for ``skipif``)."""
    af_packet = getattr(socket, "AF_PACKET", None)
    if af_packet is None:
        return "no AF_PACKET sockets on this system"
    try:
        socket.socket(af_packet, socket.SOCK_RAW, socket.htons(_ETH_P_ALL)).close()
    except PermissionError:
        return "capturing on lo needs root or CAP_NET_RAW"
    return None


class LoCapture:
    """Frames leaving ``lo`` whose IPv4 source and destination are both in ``addresses``."""

    def __init__(self, addresses: list[str]) -> None:
        self.want = {socket.inet_aton(a) for a in addresses}
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind(("lo", 0))
        self.sock.setblocking(False)
        self.frames: list[bytes] = []

    def drain(self) -> list[bytes]:
        """Every frame captured so far (also kept in :attr:`frames`)."""
        while True:
            try:
                data, addr = self.sock.recvfrom(1 << 16)
            except BlockingIOError:
                return self.frames
            if addr[2] != _PACKET_OUTGOING or len(data) < 34 or data[12:14] != b"\x08\x00":
                continue
            if data[26:30] in self.want and data[30:34] in self.want:
                self.frames.append(data)

    def write(self, path: Path) -> Path:
        """The captured frames as a pcap file (Ethernet link type, the order of capture)."""
        with PcapWriter(str(path)) as w:
            for i, f in enumerate(self.drain()):
                w.write(f, timestamp_ns=1_000_000_000 + i * 1000)
        return path

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> LoCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
