"""Key rotation (AN), epochs and TSC limits (behaviour.md §5.6, §5.7), in virtual time (ns)."""

from __future__ import annotations

import os
import random
from typing import Any

import pytest
from tss_support import A_IP, B_IP, pair, slot

from uet.tss import (
    CounterExhaustedError,
    DropReason,
    KeyRotationError,
    SdMode,
    SecureDomain,
    SlotState,
    TssConfig,
)
from uet.tss.domain import SERVER_TSC_BASE, TSC_INVOKE_FATAL
from uet.wire.tss import TSS

US = 1_000
MS = 1_000_000
GRACE = 2_000 * MS


def _cluster(**kw: Any) -> SecureDomain:
    return SecureDomain.with_key(3, SdMode.CLUSTER, os.urandom(32), **kw)


def test_rotation_mid_stream_loses_nothing_and_rejects_late_old_key_packets() -> None:
    a, b = pair(_cluster(), TssConfig(key_grace_ns=GRACE))
    rng = random.Random(5)
    new_key = os.urandom(32)
    in_flight: list[tuple[int, int, bytes]] = []  # (arrival ns, index, packet)
    held: list[tuple[int, bytes]] = []  # old-key packets a slow path delivers after the grace period
    sent_an = []
    for i in range(300):
        now = i * 10 * US
        if i == 150:
            # SDME: install the next key everywhere (receiver first: make-before-break), then the
            # sender switches; B switches its own sender a little later.
            b.install_key(3, 1, new_key)
            a.install_key(3, 1, new_key)
            a.activate(3, 1, now)
        pkt = a.seal(b"\x10\x00" + i.to_bytes(2, "big"), sdi=3, entropy=i, dst=B_IP)
        hdr = TSS.decode(pkt)
        sent_an.append((hdr.an, hdr.tsc))
        if i in (140, 145, 149):
            held.append((i, pkt))
        else:
            in_flight.append((now + rng.randrange(0, 500 * US), i, pkt))
    b.activate(3, 1, 1_600 * US)
    assert sent_an[149] == (0, 149) and sent_an[150] == (1, 0) and sent_an[299] == (1, 149)
    delivered = []
    for arrival, i, pkt in sorted(in_flight):
        got = b.open(pkt, src=A_IP, entropy=i, now_ns=arrival)
        assert got == b"\x10\x00" + i.to_bytes(2, "big"), i
        delivered.append(i)
    assert len(delivered) == 297 and b.dropped == 0
    # reordering across the key boundary really happened
    assert any(x > 150 > y for x, y in zip(delivered, delivered[1:], strict=False))
    assert b.get_timer() == 1_600 * US + GRACE
    i, pkt = held[0]
    assert b.open(pkt, src=A_IP, entropy=i, now_ns=1_600 * US + GRACE - 1) is not None  # still in grace
    for i, pkt in held[1:]:
        assert b.open(pkt, src=A_IP, entropy=i, now_ns=1_600 * US + GRACE) is None
    assert b.drops == {DropReason.RETIRED_KEY: 2}
    assert slot(b.table[3], 0).state is SlotState.RETIRED and slot(b.table[3], 0).key is None
    assert b.get_timer() is None


def test_old_key_replay_during_grace_is_still_caught() -> None:
    a, b = pair(_cluster())
    old = a.seal(b"\x10\x00", sdi=3, entropy=1, dst=B_IP)
    assert b.open(old, src=A_IP, entropy=1, now_ns=0) is not None
    an = b.rotate(3, k := os.urandom(32), now_ns=1)
    a.install_key(3, an, k)
    a.activate(3, an, 1)
    assert b.open(old, src=A_IP, entropy=1, now_ns=2) is None
    assert b.drops == {DropReason.REPLAY: 1}
    new = a.seal(b"\x10\x01", sdi=3, entropy=1, dst=B_IP)
    assert TSS.decode(new).an == 1 and TSS.decode(new).tsc == 0
    assert b.open(new, src=A_IP, entropy=1, now_ns=3) == b"\x10\x01"


def test_handle_timer_retires_without_traffic() -> None:
    a, b = pair(_cluster(), TssConfig(key_grace_ns=5 * MS))
    old = a.seal(b"\x10\x00", sdi=3, entropy=1, dst=B_IP)
    b.rotate(3, os.urandom(32), now_ns=10 * MS)
    assert b.get_timer() == 15 * MS
    b.handle_timer(15 * MS - 1)
    assert slot(b.table[3], 0).state is SlotState.RETIRING
    b.handle_timer(15 * MS)
    assert b.get_timer() is None
    assert b.open(old, src=A_IP, entropy=1) is None
    assert b.drops == {DropReason.RETIRED_KEY: 1}


def test_slot_rules() -> None:
    sd = _cluster()
    with pytest.raises(KeyRotationError):
        sd.install(0, os.urandom(32))  # the active slot
    with pytest.raises(KeyRotationError):
        sd.activate(1, 0, GRACE)  # nothing installed
    with pytest.raises(KeyRotationError):
        sd.install(1, os.urandom(16))  # wrong size
    sd.install(1, os.urandom(32))
    sd.activate(1, 0, GRACE)
    assert sd.tx_an == 1 and slot(sd, 0).state is SlotState.RETIRING
    # A new key over a retiring slot ends its grace early (documented in SecureDomain.install).
    sd.install(0, os.urandom(32))
    assert slot(sd, 0).state is SlotState.STANDBY and sd.next_deadline() is None


def test_epoch_lifetime() -> None:
    a, b = pair(_cluster(), TssConfig(max_epoch_lifetime=16))
    old = [a.seal(b"\x10\x00", sdi=3, entropy=1, dst=B_IP) for _ in range(2)]
    for _ in range(16):
        b.table[3].advance_epoch()
    assert b.open(old[0], src=A_IP, entropy=1) is not None  # 16 epochs old: still accepted
    b.table[3].advance_epoch()
    assert b.open(old[1], src=A_IP, entropy=1) is None
    assert b.drops == {DropReason.BAD_EPOCH: 1}
    # A sender ahead of the receiver is fine (the SDME may reach it first).
    for _ in range(20):
        a.table[3].advance_epoch()
    got = b.unseal(a.seal(b"\x10\x02", sdi=3, entropy=1, dst=B_IP), src=A_IP, entropy=1)
    assert got is not None and got.epoch == 20


def test_tsc_strictly_increases_and_stops_at_the_invoke_fatal_threshold() -> None:
    a, b = pair(SecureDomain.with_key(4, SdMode.DIRECT, os.urandom(32)))
    tscs = [TSS.decode(a.seal(b"\x10\x00", sdi=4, entropy=1, dst=B_IP)).tsc for _ in range(50)]
    assert tscs == list(range(50))
    slot(a.table[4], 0).next_tsc = TSC_INVOKE_FATAL - 1
    last = a.seal(b"\x10\x00", sdi=4, entropy=1, dst=B_IP)
    assert TSS.decode(last).tsc == TSC_INVOKE_FATAL - 1
    assert b.open(last, src=A_IP, entropy=1) == b"\x10\x00"
    with pytest.raises(CounterExhaustedError):
        a.seal(b"\x10\x00", sdi=4, entropy=1, dst=B_IP)
    assert a.stats["out_invoke_fail"] == 1
    a.rotate(4, os.urandom(32), now_ns=0)
    assert TSS.decode(a.seal(b"\x10\x00", sdi=4, entropy=1, dst=B_IP)).tsc == 0


def test_server_and_client_use_disjoint_tsc_halves() -> None:
    srv = SecureDomain.with_key(6, SdMode.SERVER, os.urandom(32), use_ssi=True)
    client = SecureDomain.client_of(srv, address=bytes([10, 0, 0, 1]), ssi=9)
    assert slot(srv, 0).next_tsc == SERVER_TSC_BASE and slot(client, 0).next_tsc == 0
    assert client.tsc_limit == SERVER_TSC_BASE and srv.tsc_limit == TSC_INVOKE_FATAL
    with pytest.raises(KeyRotationError):
        client.advance_epoch()  # a client key is bound to its epoch
