"""The raw-UDP references of ``uet-bench`` (tools/bench/raw.py): every candidate moves every byte,
ends on the end marker or on silence, and none pays a Python socket timeout per call."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import pytest
from uet.tools.bench import raw as bench_raw
from uet.tools.bench.raw import BLAST_CANDIDATES, RTT_CANDIDATES, blast_receive, blast_send, ping_pong, pong, raw_socket

from uet.link import loopback_addresses


def _in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    return t, out


@pytest.mark.parametrize("kind", BLAST_CANDIDATES)
def test_every_blast_candidate_receives_every_byte(kind: str, monkeypatch) -> None:
    a, b = loopback_addresses(2)
    payload = 1000
    data = memoryview(bytes(range(256)) * 1000)  # 256 datagrams, the last one short
    rx = raw_socket(b)
    tx = raw_socket(a)
    monkeypatch.setattr(bench_raw, "raw_window", lambda _p: 40)  # several credit round trips
    t, got = _in_thread(blast_receive, rx, payload, kind, asyncio.run)
    snd = blast_send(tx, rx.getsockname(), data, payload)
    t.join(15)
    rx.close()
    tx.close()
    rcv = got[0]
    assert snd["packets"] == rcv["packets"] == 256 and rcv["bytes"] == len(data)
    assert snd["stalls"] == 0 and rcv["last_ns"] > snd["t0_ns"]


@pytest.mark.parametrize("kind", BLAST_CANDIDATES)
def test_a_receiver_whose_sender_goes_silent_returns_what_it_got(kind: str, monkeypatch) -> None:
    """The end marker lost: the receiver gives up after IDLE_WAIT of silence, with its counts."""
    monkeypatch.setattr(bench_raw, "IDLE_WAIT", 0.2)
    a, b = loopback_addresses(2)
    rx = raw_socket(b)
    tx = raw_socket(a)
    t, got = _in_thread(blast_receive, rx, 1000, kind, asyncio.run)
    for _ in range(5):
        tx.sendto(bytes(1000), rx.getsockname())
    t.join(10)
    rx.close()
    tx.close()
    assert not t.is_alive() and got[0]["packets"] == 5 and got[0]["bytes"] == 5000


def test_the_blast_sender_uses_no_python_timeout_and_reopens_a_window_on_a_lost_credit(monkeypatch) -> None:
    """Nobody sends credits: the sender blocks in the kernel (SO_RCVTIMEO), never in poll()."""
    monkeypatch.setattr(bench_raw, "CREDIT_WAIT", 0.01)
    monkeypatch.setattr(bench_raw, "raw_window", lambda _p: 16)
    a, b = loopback_addresses(2)
    sink = raw_socket(b)
    tx = raw_socket(a)
    snd = blast_send(tx, sink.getsockname(), memoryview(bytes(64 * 100)), 64)  # window 16 -> 6 stalls
    assert tx.gettimeout() is None and snd["stalls"] == 6 and snd["packets"] == 100
    tx.close()
    sink.close()


@pytest.mark.parametrize("kind", RTT_CANDIDATES)
def test_every_ping_pong_candidate_times_every_trip(kind: str) -> None:
    a, b = loopback_addresses(2)
    rx = raw_socket(b)
    tx = raw_socket(a)
    t, _ = _in_thread(pong, rx, kind, asyncio.run)
    trips = ping_pong(tx, rx.getsockname(), 64, 50, kind, asyncio.run)
    t.join(10)
    assert not t.is_alive() and len(trips) == 50 and all(x > 0 for x in trips)
    assert kind in ("asyncio", "spin") or tx.gettimeout() is None
    rx.close()
    tx.close()


def test_spin_pong_gives_up_after_the_idle_wait_and_a_lost_trip_is_left_out(monkeypatch) -> None:
    """``spin`` never blocks in the kernel: a receive that finds nothing retries until the idle
    wait has passed, then the pong ends and the pinger leaves the trip out."""
    monkeypatch.setattr(bench_raw, "IDLE_WAIT", 0.05)
    buf = bytearray(16)
    s = raw_socket("127.0.0.1")
    s.setblocking(False)
    assert bench_raw._spin_recv(s.recv_into, buf, 0.01) == -1
    s.close()
    a, b = loopback_addresses(2)
    rx = raw_socket(b)
    tx = raw_socket(a)
    t, _ = _in_thread(pong, rx, "spin", asyncio.run)
    tx.sendto(b"x" * 5, rx.getsockname())  # the pong's first datagram: echoed, then it spins
    assert tx.recv(64) == b"xxxxx"
    t.join(10)  # ends after the idle wait with nothing more
    assert not t.is_alive()
    # a peer that never answers: every trip times out and is left out
    assert ping_pong(tx, rx.getsockname(), 8, 3, "spin", asyncio.run) == []
    rx.close()
    tx.close()


def test_raw_socket_family_follows_the_address() -> None:
    s = raw_socket("127.0.0.1")
    assert s.family == socket.AF_INET and s.gettimeout() is None
    s.close()
