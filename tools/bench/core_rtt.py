"""``uet-bench core --rtt``: the CPU cost of a small-message round trip through two FEP cores in
memory, per side, with no sockets and no event loop (issue 17 item 6's per-message path).

Two :class:`uet.fep.FepCore` objects ping-pong ``--size``-byte RUD messages, driven exactly in
the order :class:`uet.Endpoint` drives its core in a live ``uet-bench rtt``:

* ping: ``send`` and a buffer-less ``post_recv``, then the flush (``datagrams_to_send_packed``,
  the events drained, ``get_timer`` for the timer re-arm);
* echo (a receive posted before the ping arrives, as the live echo does): the batch in
  (``receive_marked``), the events drained, the next receive posted, the reply sent, the flush;
* ping: the batch in (the reply and the ACK of the ping), the events drained.

Time is ``time.thread_time_ns`` around each side's own calls (the clock reads are inside the
figure: about 0.6 µs each, three per side), reported as µs per round trip and per side, the best
(minimum) of ``--repeat`` runs. Virtual time advances 5 µs per hop, so no timer ever fires
(``get_timer`` is asked, as the adapter asks it after every flush). The first tenth of the trips
warm up and are not timed.

Also counted per round trip (the :func:`run_core_rtt` result, ``--json``): datagrams each way,
core events each side, the changes of ``get_timer()`` each side (a live driver re-arms its timer
only when the deadline moves earlier, uet.adapter), and — in a separate, untimed pass under
``sys.setprofile`` — Python function calls and C calls (the driver's own included: four helper
calls, six clock reads, the list building).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from uet.fep import FepConfig, FepCore, MessageReceived
from uet.pds import Mode

__all__ = ["count_calls", "run_core_rtt"]

PING = "10.0.0.1"
ECHO = "10.0.0.2"
HOP_NS = 5_000


def _cores(config: FepConfig | None) -> tuple[FepCore, FepCore]:
    cfg = config or FepConfig(seed=1)
    return FepCore(PING, job=1, pid=1, config=cfg, seed=1), FepCore(ECHO, job=1, pid=1, config=cfg, seed=2)


def _flush(core: FepCore, now: int) -> tuple[list[tuple[bytes, str, int]], int, int | None]:
    """The driver's flush after an input (uet.Endpoint._transmit): the datagrams, the number of
    events drained, the timer deadline."""
    out = core.datagrams_to_send_packed(now)
    n = 0
    ev = core.next_event()
    while ev is not None:
        n += 1
        ev = core.next_event()
    return out, n, core.get_timer()


def _take(core: FepCore, wire: list[tuple[bytes, str, int]], now: int, handle: int) -> tuple[Any, int]:
    """A batch in (uet.Endpoint._on_batch), its events drained: the message that completed the
    receive ``handle`` (None if none did) and the number of events."""
    core.receive_marked(wire, now, opened=True)
    got = None
    n = 0
    ev = core.next_event()
    while ev is not None:
        n += 1
        if type(ev) is MessageReceived and ev.handle == handle:
            got = ev.message
        ev = core.next_event()
    return got, n


class _Side:
    """What one side's flushes added up: events, datagrams sent, changes of ``get_timer()``."""

    __slots__ = ("events", "datagrams", "timer_changes", "timer")

    def __init__(self) -> None:
        self.events = self.datagrams = self.timer_changes = 0
        self.timer: int | None = None

    def flushed(self, out: list[tuple[bytes, str, int]], timer: int | None) -> None:
        self.datagrams += len(out)
        if timer != self.timer:
            self.timer_changes += 1
            self.timer = timer


def _trips(a: FepCore, b: FepCore, size: int, trips: int, stats: Counter[str] | None = None) -> tuple[int, int]:
    """``trips`` round trips (module docstring); CPU ns of the ping and the echo side. ``stats``
    (when given) adds up datagrams, events and timer changes."""
    clock = time.thread_time_ns
    msg = bytes(size)
    now = a.now
    ta = tb = 0
    pa, pb = _Side(), _Side()
    rb = b.post_recv(None)
    for _ in range(trips):
        now += HOP_NS
        t0 = clock()
        a.tick(now)
        a.send(ECHO, msg, mode=Mode.RUD)
        hr = a.post_recv(None)
        out, k, at = _flush(a, now)
        t1 = clock()
        pa.events += k
        pa.flushed(out, at)
        wire = [(d, PING, 0) for d, _dst, _e in out]
        now += HOP_NS
        t2 = clock()
        got, k = _take(b, wire, now, rb)
        if got is None:
            raise RuntimeError("the ping did not complete the echo's receive")
        rb = b.post_recv(None)
        b.send(PING, got.data, mode=Mode.RUD)
        out, k2, bt = _flush(b, now)
        t3 = clock()
        pb.events += k + k2
        pb.flushed(out, bt)
        wire = [(d, ECHO, 0) for d, _dst, _e in out]
        now += HOP_NS
        t4 = clock()
        got, k = _take(a, wire, now, hr)
        t5 = clock()
        pa.events += k
        if got is None:
            raise RuntimeError("the reply did not complete the ping's receive in one round trip")
        ta += (t1 - t0) + (t5 - t4)
        tb += t3 - t2
    if stats is not None:
        for name, side, way in (("ping", pa, "ping_to_echo"), ("echo", pb, "echo_to_ping")):
            stats["datagrams_" + way] += side.datagrams
            stats["events_" + name] += side.events
            stats["timer_changes_" + name] += side.timer_changes
    b.cancel(rb)  # the receive posted for the next ping: withdrawn, its completion drained
    while b.next_event() is not None:
        pass
    return ta, tb


def count_calls(size: int = 64, trips: int = 200, config: FepConfig | None = None) -> dict[str, float]:
    """Python function calls and C calls per round trip (``sys.setprofile``, untimed)."""
    a, b = _cores(config)
    _trips(a, b, size, 20)
    calls = Counter[str]()

    def prof(_frame: Any, event: str, _arg: Any) -> None:
        calls[event] += 1

    sys.setprofile(prof)
    try:
        _trips(a, b, size, trips)
    finally:
        sys.setprofile(None)
    return {"py_calls_per_rt": calls["call"] / trips, "c_calls_per_rt": calls["c_call"] / trips}


def run_core_rtt(
    size: int = 64, trips: int = 5000, repeat: int = 3, config: FepConfig | None = None, calls: bool = True
) -> dict[str, Any]:
    """Best of ``repeat`` runs of ``trips`` timed round trips (module docstring)."""
    best: tuple[int, int] | None = None
    stats = Counter[str]()
    for _ in range(repeat):
        a, b = _cores(config)
        _trips(a, b, size, max(1, trips // 10))
        st = Counter[str]()
        ta, tb = _trips(a, b, size, trips, st)
        if best is None or ta + tb < sum(best):
            best, stats = (ta, tb), st
    assert best is not None
    ta, tb = best
    res: dict[str, Any] = {
        "size": size,
        "trips": trips,
        "us_per_rt": round((ta + tb) / trips / 1e3, 2),
        "ping_us_per_rt": round(ta / trips / 1e3, 2),
        "echo_us_per_rt": round(tb / trips / 1e3, 2),
    }
    res.update({k: round(v / trips, 3) for k, v in sorted(stats.items())})
    if calls:
        res.update({k: round(v, 1) for k, v in count_calls(size, min(trips, 500), config).items()})
    return res
