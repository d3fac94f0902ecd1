"""Property tests: lossy/reordering/duplicating links and fuzzed input (spec/behaviour.md §2).

For any seed with up to 20 % loss, reordering and duplication: every submitted packet is Acked
exactly once and delivered exactly once (RUD/ROD; ROD in order), RUDI at least once, and every
PDC is reclaimed after close. Fuzz: random bytes and mutations of valid packets into a live core
never raise, and the pair still completes a transfer afterwards.
"""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, ses_small

from uet.pds import Acked, Failed, Mode, PdsConfig
from uet.wire import ses as ses_wire

CFG = PdsConfig(max_rto_retx=25, max_nack_retx=25, rto_ns=200_000, close_idle_ns=None, target_idle_ns=None)


def _submit_messages(pair: Pair, mode: Mode, sizes: list[int]) -> list[tuple[int, int]]:
    """Submit messages of ``sizes`` packets each; tokens are (message, index)."""
    tokens = []
    core = pair.a.core
    for m, n in enumerate(sizes):
        for i in range(n):
            tok = (m, i)
            tokens.append(tok)
            payload = bytes([m & 0xFF, i & 0xFF]) * 50
            core.submit(B_ADDR, mode, SES_NH, ses_small(), payload, token=tok, som=i == 0, eom=i == n - 1, now=pair.now)
    return tokens


RESP_DATA = ses_wire.RESPONSE_DATA.encode(ses_wire.RESPONSE_DATA.make(message_id=1, modified_length=24))

settings_fast = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@settings_fast
@given(
    seed=st.integers(0, 2**32 - 1),
    loss=st.floats(0, 0.2),
    dup=st.floats(0, 0.2),
    reorder=st.floats(0, 0.3),
    mode=st.sampled_from([Mode.RUD, Mode.ROD]),
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=6),
    rod_buffer=st.booleans(),
    ret=st.integers(0, 3),
)
@example(seed=1, loss=0.2, dup=0.2, reorder=0.3, mode=Mode.RUD, sizes=[6] * 6, rod_buffer=False, ret=0)
@example(seed=2, loss=0.2, dup=0.2, reorder=0.3, mode=Mode.ROD, sizes=[6] * 6, rod_buffer=False, ret=0)
@example(seed=2, loss=0.2, dup=0.2, reorder=0.3, mode=Mode.ROD, sizes=[6] * 6, rod_buffer=True, ret=2)
@example(seed=3, loss=0.2, dup=0.0, reorder=0.0, mode=Mode.ROD, sizes=[1, 5, 2, 6], rod_buffer=False, ret=3)
@example(seed=4, loss=0.2, dup=0.2, reorder=0.3, mode=Mode.RUD, sizes=[6] * 6, rod_buffer=False, ret=3)
def test_reliable_exactly_once(
    seed: int, loss: float, dup: float, reorder: float, mode: Mode, sizes: list[int], rod_buffer: bool, ret: int
) -> None:
    """Forward traffic plus, with ``ret`` > 0, ``ret`` return-direction packets (read data as
    requests, uet.pds.ret) for every forward packet delivered: both directions exactly once."""
    pair = Pair(replace(CFG, rod_buffer=rod_buffer), seed=seed, loss=loss, dup=dup, reorder=reorder)
    pair.check_timers = True
    ret_tokens: list[tuple] = []

    def respond(d):
        if d.next_hdr == 5:
            return None
        for i in range(ret):
            tok = ("ret", d.payload[0], d.payload[1], i)
            ret_tokens.append(tok)
            pair.b.core.submit_return(
                d.pdc, 5, RESP_DATA, bytes(tok[1:]) * 8, token=tok, som=i == 0, eom=i == ret - 1, now=pair.now
            )
        return None

    pair.b.respond = respond
    tokens = _submit_messages(pair, mode, sizes)
    n_ret = len(tokens) * ret
    assert pair.run_until(
        lambda: len(pair.a.acked()) + len(pair.a.failed()) >= len(tokens) and len(pair.b.acked()) >= n_ret,
        max_ns=5_000_000_000,
    )
    pair.run_until(lambda: False, max_ns=20_000_000)  # let stray duplicates and ACKs land
    acked = [e.token for e in pair.a.acked()]
    assert not pair.a.failed() and not pair.b.failed()
    assert sorted(acked) == sorted(tokens) and len(set(acked)) == len(tokens)
    got = [(d.payload[0], d.payload[1]) for d in pair.b.deliveries]
    assert sorted(got) == sorted(tokens) and len(set(got)) == len(got)
    if mode == Mode.ROD:
        assert got == tokens
    back = [tuple(d.payload[:3]) for d in pair.a.deliveries]
    assert all(d.next_hdr == 5 for d in pair.a.deliveries)
    assert sorted(back) == sorted(t[1:] for t in ret_tokens) and len(set(back)) == n_ret
    if mode == Mode.ROD:
        assert back == [t[1:] for t in ret_tokens]
    assert sorted(e.token for e in pair.b.acked()) == sorted(ret_tokens)
    # graceful close reclaims every PDC on both sides
    pair.a.core.close(pair.now)
    assert pair.run_until(lambda: pair.a.core.idle() and not pair.a.core.pdcs, max_ns=5_000_000_000)
    pair.run_until(lambda: not pair.b.core.pdcs, max_ns=5_000_000_000)
    assert not pair.b.core.pdcs and not pair.b.core.target_by_peer
    assert not pair.a.core.usable and not pair.a.core.gates


@settings_fast
@given(
    seed=st.integers(0, 2**32 - 1),
    loss=st.floats(0, 0.2),
    dup=st.floats(0, 0.2),
    reorder=st.floats(0, 0.3),
    n=st.integers(1, 20),
)
def test_rudi_at_least_once(seed: int, loss: float, dup: float, reorder: float, n: int) -> None:
    pair = Pair(CFG, seed=seed, loss=loss, dup=dup, reorder=reorder)
    pair.b.respond = lambda d: (4, bytes([0, 1]) + d.payload[:10])
    for i in range(n):
        pair.a.core.submit(B_ADDR, Mode.RUDI, SES_NH, ses_small(), bytes([i]) * 20, token=i, som=True, eom=True, now=0)
    assert pair.run_until(lambda: len(pair.a.acked()) + len(pair.a.failed()) >= n, max_ns=5_000_000_000)
    acked = pair.a.acked()
    assert sorted(e.token for e in acked) == list(range(n))
    for e in acked:
        assert e.response_next_hdr == 4 and e.response[2:] == bytes([e.token]) * 10
    got = {d.payload[0] for d in pair.b.deliveries}
    assert got == set(range(n))
    assert not pair.b.core.pdcs


# -- fuzzing -------------------------------------------------------------------------------------


def _valid_packets() -> list[bytes]:
    """Real packets of every kind, captured from a short lossy exchange in both directions."""
    pair = Pair(PdsConfig(ack_per_pkt=True), seed=7)

    def respond(d):  # return-direction traffic too (uet.pds.ret)
        if d.next_hdr != 5 and d.pdc and d.mode == Mode.RUD:
            pair.b.core.submit_return(d.pdc, 5, RESP_DATA, b"back", token="ret", som=True, eom=True, now=pair.now)
        return None

    pair.b.respond = respond
    _submit_messages(pair, Mode.RUD, [3])
    pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), b"r" * 30, token="rod", som=True, eom=True, now=0)
    pair.a.core.submit(B_ADDR, Mode.RUDI, SES_NH, ses_small(), b"i" * 30, token="rudi", som=True, eom=True, now=0)
    pair.a.core.submit(B_ADDR, Mode.UUD, SES_NH, ses_small(), b"u" * 30, token="uud", som=True, eom=True, now=0)
    pair.run_until(lambda: len(pair.a.acked()) >= 6)
    pdc = next(iter(pair.a.core.pdcs))
    pair.a.core.send_probe(pdc, 7, pair.now)
    pair.a.core.close(pair.now)
    pair.run_until(lambda: not pair.a.core.pdcs)
    return [w[3] for w in pair.wire]


VALID = _valid_packets()


def _fresh_transfer_ok(pair: Pair, tag: str) -> None:
    """After the fuzz, a new transfer between the same cores still completes."""
    base = len(pair.a.acked())
    toks = [(tag, i) for i in range(3)]
    for i, tok in enumerate(toks):
        pair.a.core.submit(
            B_ADDR, Mode.RUD, SES_NH, ses_small(), b"z" * 40, token=tok, som=i == 0, eom=i == 2, now=pair.now
        )
    pair.run_until(lambda: any(isinstance(e, Failed) and e.token in toks for e in pair.a.events)
                   or sum(1 for e in pair.a.acked() if e.token in toks) == 3, max_ns=5_000_000_000)  # fmt: skip
    done = {e.token for e in pair.a.events[base:] if isinstance(e, Acked)}
    failed = {e.token for e in pair.a.events if isinstance(e, Failed) and e.token in toks}
    if failed:  # a fuzzed packet may legitimately kill the PDC (fatal NACK); a retry must work
        pair.run_until(lambda: False, max_ns=50_000_000)
        _fresh_transfer_ok(pair, tag + "'")
        return
    assert done >= set(toks)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    junk=st.lists(st.binary(min_size=0, max_size=80), min_size=1, max_size=8),
    mutations=st.lists(
        st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 200), st.integers(0, 255), st.booleans()),
        min_size=1,
        max_size=12,
    ),
)
def test_fuzz_never_raises_and_pair_recovers(junk: list[bytes], mutations: list[tuple[int, int, int, bool]]) -> None:
    pair = Pair(PdsConfig(rto_ns=200_000, max_rto_retx=8), seed=3)
    _submit_messages(pair, Mode.RUD, [2])
    pair.run_until(lambda: len(pair.a.acked()) == 2)
    before = dict(pair.b.core.counters)
    for side, src in ((pair.a, B_ADDR), (pair.b, A_ADDR)):
        for j in junk:
            side.core.receive_datagram(j, pair.now, source=src, ecn=len(j) & 3, trimmed=len(j) % 5 == 0)
        for idx, pos, val, trunc in mutations:
            b = bytearray(VALID[idx])
            if b:
                b[pos % len(b)] = val
            data = bytes(b[: pos % (len(b) + 1)]) if trunc else bytes(b)
            side.core.receive_datagram(data, pair.now, source=src)
            side.core.receive_datagram(data, pair.now, source=src, trimmed=True, last_hop=trunc)
    # Every datagram B was given left a trace: read (``rx``) or dropped as too short, and the junk
    # was answered by drops or NACKs (§2.6), not silently swallowed.
    delta = {k: v - before.get(k, 0) for k, v in pair.b.core.counters.items()}
    assert delta.get("rx", 0) + delta.get("drop_short", 0) == len(junk) + 2 * len(mutations)
    assert sum(v for k, v in delta.items() if k.startswith(("drop_", "nack_tx_"))) > 0
    _fresh_transfer_ok(pair, "after")


def test_random_bytes_counted_as_drops() -> None:
    pair = Pair()
    r = random.Random(5)
    for _ in range(500):
        n = r.randrange(0, 64)
        pair.b.core.receive_datagram(bytes(r.randrange(256) for _ in range(n)), 0, source=A_ADDR)
    c = pair.b.core.counters
    drops = sum(v for k, v in c.items() if k.startswith("drop_"))
    nacks = sum(v for k, v in c.items() if k.startswith("nack_tx_"))
    assert drops + nacks + c.get("delivered", 0) + c.get("rudi_delivered", 0) + c.get("uud_delivered", 0) > 0
    assert drops > 100


@settings_fast
@given(
    seed=st.integers(0, 2**32 - 1),
    corrupt=st.floats(0, 0.1),
    loss=st.floats(0, 0.1),
    mode=st.sampled_from([Mode.RUD, Mode.ROD]),
    sizes=st.lists(st.integers(1, 5), min_size=1, max_size=5),
)
def test_corruption_every_token_completes_exactly_once(
    seed: int, corrupt: float, loss: float, mode: Mode, sizes: list[int]
) -> None:
    """Bit flips (no CRC trailer here) may kill a PDC with a fatal NACK, but every packet still
    ends in exactly one Acked or Failed, and nothing raises."""
    cfg = PdsConfig(max_rto_retx=10, rto_ns=200_000, close_idle_ns=None, target_idle_ns=None)
    pair = Pair(cfg, seed=seed, loss=loss, corrupt=corrupt)
    tokens = _submit_messages(pair, mode, sizes)
    assert pair.run_until(lambda: len(pair.a.acked()) + len(pair.a.failed()) >= len(tokens), max_ns=5_000_000_000)
    pair.run_until(lambda: False, max_ns=20_000_000)
    done = [e.token for e in pair.a.events if isinstance(e, (Acked, Failed))]
    assert sorted(done, key=repr) == sorted(tokens, key=repr)
