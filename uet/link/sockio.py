"""What every socket link does the same way (the direct UDP link and the IP-protocol-253 link):
its counters, its socket buffer sizes, the in-order backlog drained when the socket is writable
again, and closing. Pure plumbing: no protocol decision lives here."""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["close_socket", "drain_backlog", "link_counters", "size_buffers"]

#: the counters of a socket link (``Link.counters``)
_COUNTERS = ("tx_packets", "tx_bytes", "rx_packets", "rx_bytes", "tx_backlog", "tx_errors", "rx_errors", "rx_batches")


def link_counters() -> dict[str, int]:
    """A fresh counter table: packets/bytes each way, send-buffer stalls, errors, receive batches."""
    return dict.fromkeys(_COUNTERS, 0)


def size_buffers(sock: socket.socket, rcvbuf: int, sndbuf: int) -> None:
    """Ask for these socket buffer sizes (the kernel caps them at ``net.core.*mem_max``; never
    fatal)."""
    for opt, size in ((socket.SO_RCVBUF, rcvbuf), (socket.SO_SNDBUF, sndbuf)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, size)
        except OSError:  # pragma: no cover - limited by net.core.*mem_max
            pass


def drain_backlog(
    loop: asyncio.AbstractEventLoop,
    sock: socket.socket,
    backlog: deque[Any],
    counters: dict[str, int],
    send: Callable[[Any], int],
) -> None:
    """Send queued items in order with ``send(item)`` (returns the bytes sent) until the socket is
    full again; stop watching for writability once the backlog is empty. An item that fails for
    another reason is counted in ``tx_errors`` and dropped."""
    while backlog:
        try:
            n = send(backlog[0])
        except BlockingIOError:
            return
        except OSError:
            counters["tx_errors"] += 1
        else:
            counters["tx_packets"] += 1
            counters["tx_bytes"] += n
        backlog.popleft()
    loop.remove_writer(sock.fileno())


def close_socket(loop: asyncio.AbstractEventLoop, sock: socket.socket, backlog: deque[Any]) -> None:
    """Stop reading (and writing, with a backlog), discard the backlog, close the socket."""
    fd = sock.fileno()
    loop.remove_reader(fd)
    if backlog:
        loop.remove_writer(fd)
        backlog.clear()
    sock.close()
