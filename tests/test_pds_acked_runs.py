"""``PdsCore.acked_runs`` (owner opt-in): implicitly acknowledged packets come as one
``AckedRun(token, count)`` per run of the same token, exactly equivalent to ``count`` events
``Acked(token, 0, b"")``. Two twin initiators get the same ACKs through loss, duplication and
reordering; expanding the runs of one must give the other's event sequence."""

from __future__ import annotations

import random

from hypothesis import example, given, settings
from hypothesis import strategies as st

from uet.pds import Acked, AckedRun, Failed, Mode, PdsConfig, PdsCore

A, B = "10.0.0.1", "10.0.0.2"


def expand(events: list[object]) -> list[object]:
    out: list[object] = []
    for ev in events:
        if type(ev) is AckedRun:
            assert ev.count >= 1
            out.extend(Acked(ev.token, 0, b"") for _ in range(ev.count))
        else:
            out.append(ev)
    return out


def drain(core: PdsCore) -> list:
    evs = []
    while (ev := core.next_event()) is not None:
        evs.append(ev)
    return evs


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), loss=st.sampled_from([0.0, 0.05, 0.2]), mode=st.sampled_from([Mode.RUD, Mode.ROD])
)
@example(seed=134217728, loss=0.2, mode=Mode.ROD)
def test_acked_runs_expand_to_the_plain_event_sequence(seed: int, loss: float, mode: Mode) -> None:
    rng = random.Random(seed)
    cfg = PdsConfig(rto_ns=1_000_000, ack_gen_trigger=8192)
    runs, plain = (PdsCore(A, cfg, rng=random.Random(seed)) for _ in range(2))
    runs.acked_runs = True
    rcv = PdsCore(B, cfg, rng=random.Random(seed + 1))
    tokens = [rng.choice(["m1", "m2", "m3"]) for _ in range(120)]
    now = 0
    for core in (runs, plain):
        for tok in tokens:
            core.submit(B, mode, 1, b"\x00" * 20, b"p" * 200, token=tok, som=True, eom=True, now=now)
    got_runs, got_plain = [], []
    # up to 2 s of virtual time: at 20 % loss both ways a tail packet whose retransmissions or
    # ACKs are lost several times in a row waits out backed-off RTOs (seed 134217728, ROD with
    # target buffering: 228 ms)
    for _ in range(20_000):
        now += 100_000
        a, b = runs.datagrams_to_send(now), plain.datagrams_to_send(now)
        assert a == b
        for d, _dst, _e in a:
            if rng.random() >= loss:
                rcv.receive_datagram(d, now, source=A)
        acks = rcv.datagrams_to_send(now)
        rng.shuffle(acks)
        for d, _dst, _e in acks:
            if rng.random() >= loss:
                for core in (runs, plain):
                    core.receive_datagram(d, now, source=B)
        for core in (runs, plain, rcv):
            if (t := core.get_timer()) is not None and t <= now:
                core.handle_timer(now)
        got_runs += drain(runs)
        got_plain += drain(plain)
        drain(rcv)
        if sum(1 for e in got_plain if type(e) in (Acked, Failed)) == len(tokens):
            break
    assert expand(got_runs) == got_plain
    # every packet ends exactly once, Acked or (retries exhausted at 20 % loss) Failed
    assert sum(1 for e in got_plain if type(e) in (Acked, Failed)) == len(tokens)
    if loss == 0.0:
        assert any(type(e) is AckedRun and e.count > 1 for e in got_runs)
