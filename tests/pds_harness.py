"""In-memory pair harness for PDS cores (aioquic-style client/server pair tests).

Two :class:`~uet.pds.core.PdsCore` objects joined by a simulated link with a fixed one-way delay,
optional seeded loss, duplication, reordering (random extra delay) and corruption, and a fake
clock that jumps to the next arrival or timer. Other tests may import it.

    pair = Pair(seed=1, loss=0.1)
    pair.a.submit(pair.b_addr, Mode.RUD, 3, ses, payload, token=1, som=True, eom=True, now=pair.now)
    pair.run_until(lambda: len(pair.a.acked()) == 1)
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

from uet.pds import Acked, Delivery, Failed, PdcClosed, PdcOpened, PdsConfig, PdsCore
from uet.pds.pdc import InitiatorPdc, TargetPdc
from uet.pds.states import InitiatorState, TargetState
from uet.wire import pds as pds_wire
from uet.wire import ses as ses_wire

A_ADDR = "10.0.0.1"
B_ADDR = "10.0.0.2"


def ses_small(length: int = 0, message_id: int = 0, som: bool = True, eom: bool = True) -> bytes:
    """A valid 20-byte SES small request header (next_hdr 1) for test payloads."""
    flags = (ses_wire.SesFlag.SOM if som else 0) | (ses_wire.SesFlag.EOM if eom else 0)
    return ses_wire.SMALL.encode(ses_wire.SMALL.make(flags=int(flags), request_length=length & 0x3FFF))


SES_NH = 1  # NextHeader.SMALL


class Side:
    """One end of the pair: the core plus everything it reported."""

    def __init__(self, core: PdsCore) -> None:
        self.core = core
        self.deliveries: list[Delivery] = []
        self.events: list[Any] = []
        self.respond: Callable[[Delivery], Any] | None = None
        core.on_deliver = self._deliver

    def _deliver(self, d: Delivery) -> Any:
        self.deliveries.append(d)
        return self.respond(d) if self.respond is not None else None

    def drain_events(self) -> None:
        while (ev := self.core.next_event()) is not None:
            self.events.append(ev)

    def acked(self) -> list[Acked]:
        return [e for e in self.events if isinstance(e, Acked)]

    def failed(self) -> list[Failed]:
        return [e for e in self.events if isinstance(e, Failed)]

    def closed(self) -> list[PdcClosed]:
        return [e for e in self.events if isinstance(e, PdcClosed)]

    def opened(self) -> list[PdcOpened]:
        return [e for e in self.events if isinstance(e, PdcOpened)]


class Pair:
    """Two cores A and B on a lossy in-memory link with a fake clock (integer ns)."""

    def __init__(
        self,
        config_a: PdsConfig | None = None,
        config_b: PdsConfig | None = None,
        *,
        seed: int = 0,
        loss: float = 0.0,
        dup: float = 0.0,
        reorder: float = 0.0,
        corrupt: float = 0.0,
        delay_ns: int = 10_000,
        log: bool = False,
        sdi: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.records: list[dict] = []
        lg = self.records.append if log else None
        self.a = Side(PdsCore(A_ADDR, config_a, rng=random.Random(seed * 2 + 1), log=lg))
        self.b = Side(PdsCore(B_ADDR, config_b or config_a, rng=random.Random(seed * 2 + 2), log=lg))
        self.loss = loss
        self.dup = dup
        self.reorder = reorder
        self.corrupt = corrupt
        self.delay_ns = delay_ns
        #: carry each datagram's SDI (datagrams_to_send(with_sdi=True) → receive_datagram(sdi=))
        self.sdi = sdi
        self.now = 0
        self._seq = 0
        self._flight: list[tuple[int, int, str, bytes, str, int, int | None]] = []
        #: optional hook: (data, src, dst) -> replacement list of datagrams (e.g. [] to drop)
        self.filter: Callable[[bytes, str, str], list[bytes]] | None = None
        #: every datagram handed out, as (time, src, dst, bytes), before loss
        self.wire: list[tuple[int, str, str, bytes]] = []
        #: compare the core's timer heap with a full scan of its PDCs at every step
        self.check_timers = False

    def side(self, addr: str) -> Side:
        return self.a if addr == A_ADDR else self.b

    def _collect(self) -> None:
        for src, side in ((A_ADDR, self.a), (B_ADDR, self.b)):
            for item in side.core.datagrams_to_send(self.now, with_sdi=self.sdi):
                data, dst, ent = item[:3]
                sdi = item[3] if self.sdi else None
                assert dst == (B_ADDR if src == A_ADDR else A_ADDR)
                assert 0 <= ent <= 0xFFFF
                self.wire.append((self.now, src, dst, data))
                outs = [data] if self.filter is None else self.filter(data, src, dst)
                for d in outs:
                    self._launch(d, src, dst, ent, sdi)

    def _launch(self, data: bytes, src: str, dst: str, ent: int, sdi: int | None = None) -> None:
        r = self.rng
        if self.loss and r.random() < self.loss:
            return
        copies = 2 if self.dup and r.random() < self.dup else 1
        for _ in range(copies):
            d = data
            if self.corrupt and r.random() < self.corrupt and d:
                b = bytearray(d)
                b[r.randrange(len(b))] ^= 1 << r.randrange(8)
                d = bytes(b)
            t = self.now + self.delay_ns
            if self.reorder and r.random() < self.reorder:
                t += r.randrange(1, 4 * self.delay_ns)
            self._seq += 1
            heapq.heappush(self._flight, (t, self._seq, dst, d, src, ent, sdi))

    def inject(self, dst_side: Side, data: bytes, src: str, **kw: Any) -> None:
        """Deliver ``data`` to a core at once (exact-packet tests)."""
        dst_side.core.receive_datagram(data, self.now, source=src, **kw)
        dst_side.drain_events()

    def take(self, side: Side) -> list[tuple[bytes, str, int]]:
        """What ``side`` wants to send now, removed from the link (exact-packet tests)."""
        out = side.core.datagrams_to_send(self.now)
        side.drain_events()
        return out

    def step(self) -> bool:
        """Move datagrams, then advance the clock to the next arrival or timer. False if idle."""
        self._collect()
        self.a.drain_events()
        self.b.drain_events()
        if self.check_timers:
            for s in (self.a, self.b):
                scan_timer_check(s.core)
        cands = []
        if self._flight:
            cands.append(self._flight[0][0])
        for s in (self.a, self.b):
            t = s.core.get_timer()
            if t is not None:
                cands.append(max(t, self.now))
        if not cands:
            return False
        self.now = max(self.now, min(cands))
        while self._flight and self._flight[0][0] <= self.now:
            _t, _s, dst, data, src, ent, sdi = heapq.heappop(self._flight)
            self.side(dst).core.receive_datagram(data, self.now, source=src, source_port=ent, sdi=sdi)
        for s in (self.a, self.b):
            t = s.core.get_timer()
            if t is not None and t <= self.now:
                s.core.handle_timer(self.now)
        self._collect()
        self.a.drain_events()
        self.b.drain_events()
        return True

    def run_until(self, cond: Callable[[], bool], max_ns: int = 10_000_000_000, max_steps: int = 200_000) -> bool:
        """Step until ``cond()`` holds; False if the time or step budget ran out or all idle."""
        end = self.now + max_ns
        for _ in range(max_steps):
            if cond():
                return True
            if self.now > end or not self.step():
                return cond()
        return cond()

    def run_idle(self, max_ns: int = 10_000_000_000, max_steps: int = 200_000) -> None:
        """Step until nothing is in flight and no timer is pending (or a budget runs out)."""
        end = self.now + max_ns
        for _ in range(max_steps):
            if self.now > end or not self.step():
                return


def only_initiator(core: PdsCore) -> InitiatorPdc:
    """The core's one PDC, an initiator."""
    (pdc,) = core.pdcs.values()
    assert isinstance(pdc, InitiatorPdc)
    return pdc


def only_target(core: PdsCore) -> TargetPdc:
    """The core's one PDC, a target."""
    (pdc,) = core.pdcs.values()
    assert isinstance(pdc, TargetPdc)
    return pdc


def state(pdc: InitiatorPdc | TargetPdc) -> InitiatorState | TargetState:
    """``pdc.state`` read afresh: a type checker keeps an asserted ``pdc.state`` narrowed across
    the calls that move it, and would call the next state check impossible."""
    return pdc.state


def scan_timer_check(core: PdsCore) -> None:
    """The timer heap (``get_timer``) must never be later than the earliest deadline found by
    scanning every PDC (earlier is harmless: the timer runs, finds nothing due, re-arms)."""
    best = core._rudi_deadline()
    for pdc in core.pdcs.values():
        d = core._ipdc_deadline(pdc) if pdc.role == "initiator" else core._tpdc_deadline(pdc)
        if d is not None and (best is None or d < best):
            best = d
    got = core.get_timer()
    assert (got is None) == (best is None) or (best is None and got is not None), (got, best)
    if best is not None:
        assert got is not None and got <= best, (got, best)


# -- exact-packet helpers ------------------------------------------------------------------------


def hdr(data: bytes) -> Any:
    """Decode the PDS header at the start of ``data`` into its layout's named tuple."""
    t = data[0] >> 3
    flags = data[1] & 0x7F
    lay = pds_wire.pds_layout(t, flags, data[12] if len(data) > 12 else None)
    assert lay is not None, f"unknown PDS type {t}"
    return lay.decode(data)


def request(
    psn: int,
    spdcid: int,
    dpdcid: int = 0,
    *,
    syn_offset: int | None = None,
    flags: int = 0,
    cpo: int = -1,
    t: int = 2,
    nh: int = SES_NH,
    payload: bytes = b"data",
) -> bytes:
    """An exact RUD (t=2) / ROD (t=3) request with an SES small header and ``payload``."""
    if syn_offset is not None:
        h = pds_wire.REQUEST_SYN.encode((t, nh, flags | 0x04, cpo, psn, spdcid, 0, syn_offset))
    else:
        h = pds_wire.REQUEST.encode((t, nh, flags, cpo, psn, spdcid, dpdcid))
    return h + ses_small() + payload


def control(ctl: int, psn: int, spdcid: int, dpdcid: int, payload: int = 0, flags: int = 0, opaque: int = 0) -> bytes:
    """An exact control packet (SYN = 0)."""
    return pds_wire.CONTROL.encode((11, ctl, flags, opaque, psn, spdcid, dpdcid, payload))


def nack(code: int, psn: int, spdcid: int, dpdcid: int, payload: int = 0, flags: int = 0) -> bytes:
    """An exact NACK."""
    return pds_wire.NACK.encode((10, 0, flags, code, 0, psn, spdcid, dpdcid, payload))
