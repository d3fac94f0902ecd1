"""Secure establishment hooks of the PDS core (spec/behaviour.md §2.3.2, §1.4 ``tss_context``):
EXPECTED_0RTT_START and RANDOM_1RTT_START through ``start_psn_policy`` (the policy classes of
uet.tss.establish), PENDING → ESTABLISHED, New_PDC_Time, the EPSN closing ACK adopted by the
initiator hook, Limit_PSN_Range and per-PDC SDI."""

from __future__ import annotations

import random
from dataclasses import replace

from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, request, ses_small, state

from uet.pds import Mode, PdsConfig
from uet.pds.startpsn import PeerStartPsn
from uet.pds.states import TargetState
from uet.tss.establish import Expected0RttStart, InitiatorStartPsn, Random1RttStart
from uet.wire import pds as pds_wire

CFG = PdsConfig(close_idle_ns=None, target_idle_ns=None, rto_ns=200_000)
SDI = 7
M32 = 0xFFFFFFFF


def _send(pair: Pair, n: int, tag: str, sdi: int | None = SDI, mode: Mode = Mode.RUD) -> list[tuple[str, int]]:
    toks = [(tag, i) for i in range(n)]
    for i, tok in enumerate(toks):
        pair.a.core.submit(
            B_ADDR, mode, SES_NH, ses_small(), bytes([i]) * 16, token=tok, som=i == 0, eom=i == n - 1,
            now=pair.now, sdi=sdi,
        )  # fmt: skip
    return toks


def _close_all(pair: Pair) -> None:
    for pdcid, pdc in list(pair.a.core.pdcs.items()):
        if pdc.role == "initiator":
            pair.a.core.request_close(pdcid, pair.now)
    assert pair.run_until(lambda: not pair.a.core.pdcs)


def test_expected_0rtt_close_returns_epsn_and_initiator_adopts_it() -> None:
    pair = Pair(CFG, seed=1, sdi=True)
    pol = Expected0RttStart()
    hook = InitiatorStartPsn(random.Random(5))
    pair.b.core.start_psn_policy = pol
    pair.a.core.initiator_start_psn = hook
    toks = _send(pair, 3, "m1")
    assert pair.run_until(lambda: len(pair.a.acked()) == 3)
    [ipdc] = pair.a.core.pdcs.values()
    start = ipdc.start_psn
    assert ipdc.sdi == SDI and next(iter(pair.b.core.pdcs.values())).sdi == SDI
    assert len(pair.b.deliveries) == 3  # 0-RTT: accepted and delivered at once
    _close_all(pair)
    epsn_acks = [hdr(w[3]) for w in pair.wire if w[1] == B_ADDR and w[3][1] & pds_wire.AckFlag.EPSN]
    assert epsn_acks and epsn_acks[-1].type == pds_wire.PdsType.ACK
    assert epsn_acks[-1].expected_psn == (start + 1) & M32 == pol.expected_psn(SDI)
    assert hook.ini_start_psn(SDI) == (start + 1) & M32
    assert pair.a.core.counters["epsn_adopted"] == 1
    # the next PDC of this SDI starts at ini_start_psn and is accepted 0-RTT
    _send(pair, 2, "m2")
    assert pair.run_until(lambda: len(pair.a.acked()) == 5)
    [ipdc2] = pair.a.core.pdcs.values()
    assert ipdc2.start_psn == (start + 1) & M32
    assert pair.b.core.counters.get("pdc_pending", 0) == 0
    assert sorted(e.token for e in pair.a.acked()) == sorted(toks + [("m2", 0), ("m2", 1)])


def test_expected_0rtt_rejects_stale_start_then_establishes() -> None:
    """A Start_PSN before the SDI's Expected_PSN is refused: PENDING + NEW_START_PSN carrying
    Expected_PSN; nothing is delivered until the SYN re-arrives with it (→ ESTABLISHED)."""
    pair = Pair(CFG, seed=2, sdi=True)
    pol = Expected0RttStart()
    pol._expected[SDI] = 0x4000_0000
    pair.b.core.start_psn_policy = pol
    pair.a.core.config = replace(CFG, start_psn=0x3000_0000)
    toks = _send(pair, 4, "x")
    [(syn, _, _, sdi)] = pair.a.core.datagrams_to_send(0, with_sdi=True)[:1]
    assert sdi == SDI and hdr(syn).flags & pds_wire.ReqFlag.SYN
    pair.inject(pair.b, syn, A_ADDR, sdi=SDI)
    [tp] = pair.b.core.pdcs.values()
    assert tp.state is TargetState.PENDING and not pair.b.deliveries
    [(nk, _, _)] = pair.take(pair.b)
    n = hdr(nk)
    assert n.nack_code == pds_wire.NackCode.NEW_START_PSN and n.payload == 0x4000_0000
    pair.inject(pair.a, nk, B_ADDR, sdi=SDI)
    resent = pair.take(pair.a)
    assert {hdr(d).psn for d, _, _ in resent} == {0x4000_0000 + i for i in range(4)}
    pair.inject(pair.b, resent[0][0], A_ADDR, sdi=SDI)
    assert state(tp) is TargetState.ESTABLISHED and len(pair.b.deliveries) == 1
    for d, _, _ in resent[1:]:
        pair.inject(pair.b, d, A_ADDR, sdi=SDI)
    assert pair.run_until(lambda: len(pair.a.acked()) == 4)
    assert sorted(e.token for e in pair.a.acked()) == toks and len(pair.b.deliveries) == 4


def test_random_1rtt_pending_until_minted_start() -> None:
    pair = Pair(CFG, seed=3, sdi=True, loss=0.1)
    pair.b.core.start_psn_policy = Random1RttStart(random.Random(9))
    toks = _send(pair, 5, "r")
    assert pair.run_until(lambda: len(pair.a.acked()) + len(pair.a.failed()) == 5)
    assert sorted(e.token for e in pair.a.acked()) == toks
    got = [d.payload[0] for d in pair.b.deliveries]
    assert sorted(got) == list(range(5)) and len(got) == 5  # exactly once, nothing before ESTABLISHED
    [ipdc] = pair.a.core.pdcs.values()
    [tp] = pair.b.core.pdcs.values()
    assert tp.start_psn == ipdc.start_psn and pair.b.core.counters["pdc_pending"] >= 1
    nacks = [hdr(w[3]) for w in pair.wire if w[1] == B_ADDR and w[3][0] >> 3 == pds_wire.PdsType.NACK]
    assert any(x.nack_code == pds_wire.NackCode.NEW_START_PSN and x.payload == tp.start_psn for x in nacks)


def test_new_pdc_time_frees_pending_silently() -> None:
    pair = Pair(replace(CFG, new_pdc_ns=3_000_000))
    pair.b.core.start_psn_policy = Random1RttStart(random.Random(1))
    pair.inject(pair.b, request(100, spdcid=0x55, syn_offset=0), A_ADDR)
    [tp] = pair.b.core.pdcs.values()
    assert tp.state is TargetState.PENDING
    assert len(pair.take(pair.b)) == 1  # the NEW_START_PSN NACK
    assert pair.b.core.get_timer() == 3_000_000
    pair.now = 2_999_999
    pair.b.core.handle_timer(pair.now)
    assert pair.b.core.pdcs
    pair.now = 3_000_000
    pair.b.core.handle_timer(pair.now)
    assert not pair.b.core.pdcs and not pair.b.core.target_by_peer
    assert pair.take(pair.b) == [] and pair.b.core.counters["pdc_pending_expired"] == 1
    pair.b.drain_events()
    assert not pair.b.closed()  # never reported open, so not reported closed


def test_a_re_driven_syn_50_ms_late_still_establishes_by_default() -> None:
    """New_PDC_Time is 250 ms by default (was the mirror's 5 ms): an initiator stalled 50 ms
    (a loaded host) before re-driving its SYN from the minted Start_PSN still finds the PENDING
    PDC, instead of being told a new Start_PSN again (test_tss_secure_pdc failed under load)."""
    pair = Pair(PdsConfig(close_idle_ns=None, target_idle_ns=None))
    pair.b.core.start_psn_policy = Random1RttStart(random.Random(1))
    pair.inject(pair.b, request(100, spdcid=0x55, syn_offset=0), A_ADDR)
    (nack,) = pair.take(pair.b)
    minted = hdr(nack[0]).payload
    pair.now = 50_000_000
    if (t := pair.b.core.get_timer()) is not None and t <= pair.now:
        pair.b.core.handle_timer(pair.now)
    pair.inject(pair.b, request(minted, spdcid=0x55, syn_offset=0), A_ADDR)
    [tp] = pair.b.core.pdcs.values()
    assert tp.state is TargetState.ESTABLISHED and tp.start_psn == minted
    assert [hdr(d).type for d, _x, _y in pair.take(pair.b)] == [pds_wire.PdsType.ACK_CC]
    assert "pdc_pending_expired" not in pair.b.core.counters


def test_plain_callable_policy_still_supported() -> None:
    pair = Pair(CFG, seed=4)
    pair.b.core.start_psn_policy = PeerStartPsn(lambda peer, start: 0x1234_5678 if peer == A_ADDR else None)
    toks = _send(pair, 2, "c", sdi=None)
    assert pair.run_until(lambda: len(pair.a.acked()) == 2)
    assert [e.token for e in pair.a.acked()] == toks
    assert next(iter(pair.a.core.pdcs.values())).start_psn == 0x1234_5678


def test_limit_psn_range_closes_secure_pdc_and_reestablishes() -> None:
    pair = Pair(replace(CFG, psn_range_limit=8), seed=5, sdi=True)
    pair.b.core.start_psn_policy = Expected0RttStart()
    pair.a.core.initiator_start_psn = InitiatorStartPsn(random.Random(2))
    toks = []
    for m in range(4):  # 4 messages of 3 packets: the 4th message starts past 8 PSNs → new PDC
        toks += _send(pair, 3, f"m{m}")
        want = len(toks)
        assert pair.run_until(lambda: len(pair.a.acked()) == want)  # noqa: B023 - called in this iteration
    assert pair.run_until(lambda: pair.a.core.counters.get("pdc_close_initiator", 0) == 1)
    pair.run_idle(max_ns=50_000_000)
    assert pair.a.core.counters["pdc_open_initiator"] == 2
    assert sorted(e.token for e in pair.a.acked()) == sorted(toks) and len(pair.b.deliveries) == 12
    # the second PDC adopted the EPSN of the first one's closing ACK
    [ipdc] = [p for p in pair.a.core.pdcs.values()]
    assert pair.a.core.initiator_start_psn.ini_start_psn(SDI) == ipdc.start_psn
    # PDCs without an SDI are not limited
    pair2 = Pair(replace(CFG, psn_range_limit=8), seed=5)
    toks2 = []
    for m in range(4):
        toks2 += _send(pair2, 3, f"n{m}", sdi=None)
    assert pair2.run_until(lambda: len(pair2.a.acked()) == 12)
    assert pair2.a.core.counters["pdc_open_initiator"] == 1


def test_sdi_keys_pdcs_and_mismatched_sdi_is_dropped() -> None:
    pair = Pair(CFG, seed=6, sdi=True)
    _send(pair, 1, "s7", sdi=7)
    _send(pair, 1, "s8", sdi=8)
    out = pair.a.core.datagrams_to_send(0, with_sdi=True)
    assert sorted(x[3] for x in out) == [7, 8] and len(pair.a.core.pdcs) == 2
    for d, _dst, _e, sdi in out:
        pair.inject(pair.b, d, A_ADDR, sdi=sdi)
    acks = pair.b.core.datagrams_to_send(0, with_sdi=True)
    assert sorted(x[3] for x in acks) == [7, 8]
    # an ACK opened under the wrong SDI is dropped; under the right one it is accepted
    d, _dst, _e, sdi = acks[0]
    pair.inject(pair.a, d, B_ADDR, sdi=99)
    assert pair.a.core.counters["drop_sdi_mismatch"] == 1 and not pair.a.acked()
    pair.inject(pair.a, d, B_ADDR, sdi=sdi)
    assert len(pair.a.acked()) == 1
    # default datagrams_to_send keeps 3-tuples
    _send(pair, 1, "s7b", sdi=7)
    assert all(len(x) == 3 for x in pair.a.core.datagrams_to_send(0))


def _replay_after_restart(method) -> tuple[int, int]:  # noqa: ANN001
    """An honest secure exchange is captured; the target restarts (fresh core, fresh policy of
    ``method``); the captured SYN packets are replayed: (deliveries before, deliveries after)."""
    from uet.tss.establish import start_psn_policy

    # the whole first flight carries SYN (``secure_syn_window`` would send one SYN, then the
    # rest after the ACK, without SYN: a replay would then re-deliver only the first)
    pair = Pair(replace(CFG, secure_syn_window=0), seed=4, sdi=True)
    pair.b.core.start_psn_policy = start_psn_policy(method, random.Random(1))
    _send(pair, 2, "m")
    assert pair.run_until(lambda: len(pair.a.acked()) == 2)
    before = len(pair.b.deliveries)
    captured = [
        (w[3]) for w in pair.wire if w[1] == A_ADDR and hdr(w[3]).type == pds_wire.PdsType.RUD_REQ
    ]  # fmt: skip
    restarted = Pair(CFG, seed=5, sdi=True)
    restarted.b.core.start_psn_policy = start_psn_policy(method, random.Random(2))
    for data in captured:
        restarted.inject(restarted.b, data, A_ADDR, sdi=SDI)
    return before, len(restarted.b.deliveries)


def test_default_establishment_refuses_replay_after_restart() -> None:
    """Issue 15 item 13: with the former default (EXPECTED_0RTT_START) a restarted target accepts
    captured SYN packets again and re-delivers the message; the default is now RANDOM_1RTT_START,
    which answers the replay with NEW_START_PSN and delivers nothing."""
    from uet.tss.establish import StartPsnMethod
    from uet.tss.stage import SecurityConfig

    assert _replay_after_restart(StartPsnMethod.EXPECTED_0RTT_START) == (2, 2)  # the hole
    default = SecurityConfig.__dataclass_fields__["method"].default
    assert default is StartPsnMethod.RANDOM_1RTT_START
    assert _replay_after_restart(default) == (2, 0)


def test_a_1rtt_target_draws_one_syn_not_the_whole_first_flight() -> None:
    """``secure_syn_window`` (uet.pds.config): a RANDOM_1RTT_START target refuses every new
    PDC's first flight with NEW_START_PSN. The initiator sent the whole window (here 20 packets)
    and resent all of it under the minted Start_PSN: 20 retransmissions with no loss (128 per
    PDC in ``uet-bench pair --tss``). Now one SYN goes, the NACK answers it as fast, and that one
    is resent with the other 19 first-sent under the new Start_PSN at once: 1 retransmission."""
    pair = Pair(CFG, seed=3, sdi=True)
    pair.b.core.start_psn_policy = Random1RttStart(random.Random(4))
    pair.a.core.initiator_start_psn = InitiatorStartPsn(random.Random(5))
    toks = _send(pair, 20, "s")
    first = pair.take(pair.a)
    assert len(first) == 1  # the first flight: one SYN
    for d, _dst, _e in first:
        pair.inject(pair.b, d, A_ADDR, sdi=SDI)
    (nack,) = [d for d, _dst, _e in pair.take(pair.b)]
    assert hdr(nack).nack_code == pds_wire.NackCode.NEW_START_PSN
    pair.inject(pair.a, nack, B_ADDR, sdi=SDI)
    raw = [d for d, _dst, _e in pair.take(pair.a)]
    again = [hdr(d) for d in raw]
    assert len(again) == 20 and {(h.psn - h.psn_offset) & M32 for h in again} == {hdr(nack).payload}
    assert sum(bool(h.flags & pds_wire.ReqFlag.RETX) for h in again) == 1
    for d in raw:
        pair.inject(pair.b, d, A_ADDR, sdi=SDI)
    assert pair.run_until(lambda: len(pair.a.acked()) == 20)
    assert sorted(e.token for e in pair.a.acked()) == toks
    assert pair.a.core.counters["retransmits"] == 1


def test_a_known_0rtt_start_sends_the_whole_first_flight() -> None:
    """With an ``ini_start_psn`` for the SDI (a 0-RTT target's EPSN), the Start_PSN will be
    accepted: the first flight is the whole window, as before; with none, one SYN; and
    ``secure_syn_window = 0`` restores the whole window."""
    for cfg, known, n_first in ((CFG, True, 20), (CFG, False, 1), (replace(CFG, secure_syn_window=0), False, 20)):
        pair = Pair(cfg, seed=6, sdi=True)
        pair.b.core.start_psn_policy = Expected0RttStart()
        hook = InitiatorStartPsn(random.Random(7))
        if known:
            hook.on_close_ack(SDI, 0x2000_0000)
        pair.a.core.initiator_start_psn = hook
        _send(pair, 20, "z")
        assert len(pair.take(pair.a)) == n_first


def test_the_pds_calls_its_seams_without_probing_them() -> None:
    """The secure establishment seams are declared (uet.pds.startpsn) and always present: nothing
    in uet/pds asks an object whether it has an attribute (``getattr``/``hasattr``)."""
    import ast
    from pathlib import Path

    import uet.pds

    probes = [
        f"{path.name}:{node.lineno}"
        for path in sorted(Path(uet.pds.__file__).parent.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
    ]
    assert probes == []
    pair = Pair(CFG, seed=3)
    assert pair.b.core.start_psn_policy.offer(A_ADDR, 0, 0x5000) is None  # the default accepts every offer
    assert pair.b.core.start_psn_policy.on_close(0, 0x5000) is None
