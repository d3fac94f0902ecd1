"""Remembered deferrals (deferrable sends, behaviour.md §6.7) expire on the target.

A deferrable send that finds no posted receive is remembered on the target engine's unexpected
list (at most ``MatchLimits.max_deferred``, reference 8) until a receive takes it and sends the
RTR. Its initiator waits for that RTR only for its idle limit (reference 5 s) and then fails the
send; a stranger's deferral has no initiator at all. The entry used to stay for good: eight dead
entries (eight packets from anyone) refused every later deferrable send with ``NO_MATCH``, and a
receive posted later took a dead entry and sent an RTR nobody would answer. Now an entry whose
message expired before its truncation packet goes with it (``reassembly_timeout_ns``), and one
that was never taken goes after twice that (``deferrals_expired``).

A buffer-less ``recv()`` bound to a target-engine message that then fails (expired, or a
deferral whose restart never came) waits again, as it does on the fast path: ``recv()`` returns
the next *message*, and a message that never arrived whole is nobody's.

The SES core is fed exact packets at exact (virtual) times, the FEP cores exact datagrams."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_adapter_operations import sim_endpoints
from test_ses_target import EOM, REL, defer_hdr
from test_ses_waiting_recv import _check_message, _data, _Net

from uet.fep import FepConfig, SendCompleted
from uet.pds import Mode
from uet.pds.events import Delivery
from uet.ses import SesFep
from uet.ses.message import MessageConfig
from uet.ses.target import TargetConfig
from uet.sim.loop import run
from uet.wire.pds import NextHeader
from uet.wire.ses import RESPONSE, STANDARD, ReturnCode, SesOpcode

A, B, C = "10.0.0.1", "10.0.0.2", "10.0.0.3"
JOB_T, PID, RI = 0x42, 3, 0
SECOND = 1_000_000_000


def _fep() -> SesFep:
    return SesFep(
        B,
        target=TargetConfig(max_payload=64, reassembly_timeout_ns=SECOND),
        fast=MessageConfig(payload_size=64, max_message=4096),
        default=(PID, RI, JOB_T),
    )


def _deliver(f: SesFep, now: int, ses: bytes, payload: bytes, peer: str, pdc: int = 5) -> Any:
    f.now = now
    return f.on_deliver(Delivery(peer, Mode.RUD, pdc, 0, NextHeader.STANDARD, ses, payload, 0, False))


def _deferred(r: Any) -> bool:
    """The "deferred" signal: RC_OK on the overflow list with modified length 0 (§6.7)."""
    if r is None:
        return False
    lst, _op, _z, rc, _mid, _gen, _job, ml = RESPONSE.unpack(r[1])
    return lst == 1 and rc == ReturnCode.OK and ml == 0


def _run_timers(f: SesFep, until: int) -> None:
    while (at := f.get_timer()) is not None and at <= until:
        f.handle_timer(at)


def test_dead_deferrals_expire_and_free_the_limit() -> None:
    """A stranger fills the eight deferral slots with single packets: four followed by their
    truncation packet (complete, remembered), four not (partial messages). A's deferrable send is
    refused while they stand; the partial ones go with their message after the reassembly
    timeout, the others after twice it, and then A's send is deferred and a posted receive sends
    its RTR to A, not to the stranger."""
    f = _fep()
    for mid in range(1, 9):
        assert _deferred(_deliver(f, 0, defer_hdr(1, REL, mid, 1 << 20, 0x20 + mid, 0), b"x" * 64, C, pdc=9))
        if mid <= 4:  # the truncation packet: EOM, no payload, the next offset
            _deliver(f, 0, defer_hdr(0, REL | EOM, mid, 1 << 20, 0x20 + mid, 0, 0, 64), b"", C, pdc=9)
    refused = _deliver(f, 10, defer_hdr(1, REL, 1, 256, 0x41, 0), b"a" * 64, A)
    assert refused is not None and RESPONSE.unpack(refused[1])[3] == ReturnCode.NO_MATCH  # the limit holds
    matcher = f.default.matcher  # type: ignore[union-attr]
    _run_timers(f, SECOND)
    assert len(matcher.unexpected) == 4  # the partial messages' entries went with them
    _run_timers(f, 2 * SECOND)
    assert not matcher.unexpected and f.target.counters["deferrals_expired"] == 8
    assert f.get_timer() is None
    assert _deferred(_deliver(f, 2 * SECOND + 10, defer_hdr(1, REL, 2, 256, 0x42, 0), b"a" * 64, A))
    f.post_recv(bytearray(256))
    [rtr] = f.packets_to_send()
    assert rtr.peer == A and STANDARD[(1, "match")].decode(rtr.ses).opcode == SesOpcode.DEFERRABLE_RTR


def test_a_deferral_taken_in_time_is_not_expired() -> None:
    """A receive posted within the limit takes the deferral (the RTR goes out); the expiry sweep
    later finds nothing to remove and counts nothing."""
    f = _fep()
    assert _deferred(_deliver(f, 0, defer_hdr(1, REL, 1, 256, 0x21, 0), b"a" * 64, A))
    _deliver(f, 0, defer_hdr(0, REL | EOM, 1, 256, 0x21, 0, 0, 64), b"", A)
    f.now = SECOND
    f.post_recv(bytearray(256))
    [rtr] = f.packets_to_send()
    assert rtr.peer == A
    _run_timers(f, 3 * SECOND)
    assert f.target.counters["deferrals_expired"] == 0


# -- a recv() bound to an engine entry that fails waits again, as on the fast path ------------------


def test_a_recv_bound_to_an_engine_message_that_expires_waits_again() -> None:
    """C's delivery-complete send (the target engine's path) takes the waiting ``recv()`` with its
    first packet (a sized receive is posted for the engine's entry), then C goes silent. A's
    message waits on the overflow list. When C's partial message expires the ``recv()`` waits
    again and takes A's message, as it does when the fast path's reservation expires (before, it
    failed with DROPPED: one stranger's first packet failed the application's receive)."""
    net = _Net(FepConfig(payload_size=1024, reassembly_timeout_ns=2_000_000, housekeeping_s=0.001))
    w = net.recv()
    net.c.core.send(B, _data(4, 2000), dc=True)
    da = _data(5, 500)
    sa = net.a.core.send(B, da)
    rc, ra = net.out(net.c), net.out(net.a)
    net.arrive(net.c, rc[0])
    assert net.b.core.waiters.by_handle[w].posted is not None  # bound to the engine's entry
    net.arrive(net.a, ra[0])
    assert net.b.result(w) is None and net.b.core.pending_messages == 1
    net.settle(max_ns=20_000_000, cut=frozenset({C}))
    _check_message(net.b.result(w), da)
    c = net.b.core.counters()
    assert c["ses_tgt_expired"] == 1 and c["recvs_given_back"] == 1
    assert isinstance(net.a.result(sa), SendCompleted) and net.b.core.pending_messages == 0


def test_abandoned_deferrals_do_not_refuse_later_deferrable_sends_simulated() -> None:
    """The public API on the simulator: eight deferrable sends nobody receives each fail after
    their RTR wait (5 s); their remembered deferrals, dead now, used to fill B's eight places for
    good, so a later deferrable send was refused (NO_MATCH, retried, failed). Now they expire and
    the later send is deferred, then received whole when B calls ``recv()``."""
    eng, (a, b) = sim_endpoints(2)
    size = 16_384  # above the deferrable threshold (8 KiB)

    async def main() -> bytes:
        sends = [asyncio.ensure_future(a.send(b.address, _data(i, size), protocol="deferrable")) for i in range(8)]
        for s in sends:
            with pytest.raises(Exception) as exc:
                await s
            assert type(exc.value).__name__ == "Dropped", repr(exc.value)
        await asyncio.sleep(6.0)  # past twice B's reassembly timeout after the deferrals
        data = _data(9, size)
        sent = asyncio.ensure_future(a.send(b.address, data, protocol="deferrable"))
        await asyncio.sleep(0.5)  # deferred, not refused: it waits for its RTR
        assert (b.counters["ses_tgt_deferred"], a.counters["ses_init_retries"]) == (9, 0)
        got = await asyncio.wait_for(b.recv(), 1.0)
        await sent
        assert b.counters["ses_tgt_deferrals_expired"] == 8
        return bytes(got.data)

    assert run(eng, main()) == _data(9, size)
