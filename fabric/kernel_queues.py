"""The switch process's one unmodelled buffer: the kernel's receive queue of each host socket.

A frame a host sends waits in the receive queue of its host-port socket until the switch process
reads it; only then does the model (:mod:`uet.fabric.model`) see it, time-stamp it and queue it.
While the process keeps up, that wait is a few microseconds. When it is starved of CPU — many
endpoint processes on few cores — the socket queue grows to megabytes and round trips to hundreds
of milliseconds, and a full queue drops frames, yet the model counts no queueing, mark, trim or
drop, because it never saw those frames. This module makes that buffer visible.

Linux reports, per UDP socket, the bytes waiting in its receive queue and the datagrams the kernel
dropped because the queue was full, in ``/proc/net/udp`` (columns ``rx_queue`` and ``drops``; the
``SO_RXQ_OVFL`` socket option gives the same count but per received datagram, which would cost the
data path a ``recvmsg`` with ancillary data for every frame). Reading the table costs nothing per
frame; the switch process reads it on its sampling grid and once before it closes its sockets.
Elsewhere (no ``/proc``), :func:`read_udp_queues` returns an empty mapping and the figures are
absent rather than zero.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["KernelQueue", "parse_proc_net_udp", "read_udp_queues"]

PROC_NET_UDP = "/proc/net/udp"
_WILDCARD = socket.inet_ntoa(bytes(4))  # a socket bound to every address


@dataclass(frozen=True, slots=True)
class KernelQueue:
    """One socket's line of ``/proc/net/udp``: bytes waiting to be read (``rx_bytes``, which
    counts the kernel's buffer charge of each datagram, not only its payload) and datagrams
    dropped since the socket was created (``drops``)."""

    rx_bytes: int
    drops: int


def _local_address(field: str) -> tuple[str, int]:
    """``0100007F:1F90`` → ``("127.0.0.1", 8080)``: the address is the kernel's 32-bit word
    printed in host byte order, the port big-endian."""
    addr, port = field.split(":")
    ip = socket.inet_ntoa(struct.pack("=I", int(addr, 16)))
    return ip, int(port, 16)


def parse_proc_net_udp(text: str, wanted: Iterable[tuple[str, int]]) -> dict[tuple[str, int], KernelQueue]:
    """The :class:`KernelQueue` of every socket in ``text`` (``/proc/net/udp``'s format) bound to
    one of ``wanted``'s ``(ip, port)``; a socket bound to ``0.0.0.0`` matches any IP of its port.
    Malformed lines are skipped."""
    want = set(wanted)
    any_ip = {port: ip for ip, port in want}
    out: dict[tuple[str, int], KernelQueue] = {}
    lines = text.splitlines()
    for line in lines[1:]:
        cols = line.split()
        if len(cols) < 13:
            continue
        try:
            ip, port = _local_address(cols[1])
            rx = int(cols[4].split(":")[1], 16)
            drops = int(cols[-1])
        except (ValueError, IndexError, OSError, struct.error):
            continue
        key = (ip, port)
        if key not in want:
            if ip != _WILDCARD or port not in any_ip:
                continue
            key = (any_ip[port], port)
        out[key] = KernelQueue(rx, drops)
    return out


def read_udp_queues(wanted: Iterable[tuple[str, int]], path: str = PROC_NET_UDP) -> dict[tuple[str, int], KernelQueue]:
    """:func:`parse_proc_net_udp` of the running kernel's table; empty where there is none."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    return parse_proc_net_udp(text, wanted)
