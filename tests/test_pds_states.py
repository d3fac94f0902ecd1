"""PDC state tables (spec/behaviour.md §2.2): the tables themselves, illegal moves raising, and
scenarios that drive every listed transition of both roles through the real core."""

from __future__ import annotations

import enum
import itertools
from collections.abc import Mapping
from typing import TypeVar

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, nack, request, ses_small

import uet.pds.closing
import uet.pds.control
import uet.pds.feedback
import uet.pds.initiator
import uet.pds.target
from uet.pds import (
    INITIATOR_TRANSITIONS,
    TARGET_TRANSITIONS,
    InitiatorState,
    Mode,
    PdcStateError,
    PdsConfig,
    TargetState,
    transition,
)
from uet.pds.pdc import InitiatorPdc
from uet.pds.startpsn import PeerStartPsn
from uet.wire.pds import CONTROL, ControlType, NackCode

S = TypeVar("S", bound=enum.Enum)
CFG = PdsConfig(start_psn=1000, close_idle_ns=None, target_idle_ns=None)


def _check_table(table: Mapping[S, Mapping[S, str]], states: type[S]) -> None:
    assert set(table) == set(states)
    for old, new in itertools.product(states, states):
        if new in table.get(old, {}):
            assert transition(table, old, new) is new
        else:
            with pytest.raises(PdcStateError):
                transition(table, old, new)


def test_tables_cover_every_state_and_reject_illegal_moves() -> None:
    _check_table(INITIATOR_TRANSITIONS, InitiatorState)
    _check_table(TARGET_TRANSITIONS, TargetState)
    # a freed PDC never comes back to life
    with pytest.raises(PdcStateError):
        transition(TARGET_TRANSITIONS, TargetState.CLOSED, TargetState.CLOSING)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> set:
    """Record every transition the core performs (both roles)."""
    rec: set = set()

    def spy(table, old, new):
        rec.add((old, new))
        return transition(table, old, new)

    for mod in (uet.pds.initiator, uet.pds.feedback, uet.pds.closing, uet.pds.target, uet.pds.control):
        monkeypatch.setattr(mod, "transition", spy)
    return rec


def _send(pair: Pair, tok: str, som: bool = True, eom: bool = True, msg: object = None) -> None:
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x", token=tok, som=som, eom=eom, now=pair.now,
                       msg_id=msg)  # fmt: skip


def _scenarios() -> None:
    # normal life: open, transfer, close handshake, linger, free
    p = Pair(CFG)
    _send(p, "a")
    p.run_until(lambda: len(p.a.acked()) == 1)
    p.a.core.close(p.now)
    p.run_idle()
    # target-initiated close (ESTABLISHED -> CLOSE_WAIT -> CLOSING)
    p = Pair(CFG)
    _send(p, "a")
    p.run_until(lambda: len(p.a.acked()) == 1)
    (tp,) = p.b.core.pdcs.values()
    p.b.core.request_close(tp.lpdcid, p.now)
    p.run_idle()
    # CLOSE_REQ never answered: CLOSE_WAIT -> CLOSED
    p = Pair(CFG)
    _send(p, "a")
    p.run_until(lambda: len(p.a.acked()) == 1)
    (tp,) = p.b.core.pdcs.values()
    p.filter = lambda d, s, t: []
    p.b.core.request_close(tp.lpdcid, p.now)
    p.run_idle()
    # retry exhaustion in SYN_SENT; NEW_START_PSN loop in SYN_SENT; PENDING both ways
    p = Pair(CFG)
    p.filter = lambda d, s, t: []
    _send(p, "a")
    p.run_idle()
    p = Pair(CFG)
    p.b.core.start_psn_policy = PeerStartPsn(lambda peer, start: 5000 if start != 5000 else None)
    _send(p, "a")
    p.run_until(lambda: len(p.a.acked()) == 1)
    p = Pair(CFG)
    p.b.core.start_psn_policy = PeerStartPsn(lambda peer, start: 5000)
    p.inject(p.b, request(1, 9, syn_offset=0), A_ADDR)
    p.run_idle()
    # fatal NACK while ESTABLISHED
    p = Pair(CFG)
    _send(p, "a")
    p.run_until(lambda: len(p.a.acked()) == 1)
    (ip,) = p.a.core.pdcs.values()
    assert isinstance(ip, InitiatorPdc)
    p.filter = lambda d, s, t: []
    _send(p, "b")
    p.step()
    p.inject(p.a, nack(NackCode.UNEXP_EVENT, ip.next_psn - 1, 0, ip.lpdcid), B_ADDR)
    assert ip.state is InitiatorState.CLOSED
    # close in error from QUIESCE (message still open) and from ACK_WAIT (packets unacked)
    for open_msg in (True, False):
        q = Pair(CFG)
        _send(q, "a")
        q.run_until(lambda: len(q.a.acked()) == 1)  # noqa: B023 - called in this iteration
        (ip,) = q.a.core.pdcs.values()
        _send(q, "b", eom=not open_msg, msg="m")
        p = q
        p.filter = lambda d, s, t: []
        p.step()
        p.a.core.request_close(ip.lpdcid, p.now)
        p.run_idle()
    # target closes in error when the initiator reports a fatal condition (NACK to a target PDC)
    p = Pair(CFG)
    _send(p, "a")
    p.run_until(lambda: len(p.a.acked()) == 1)
    (tp,) = p.b.core.pdcs.values()
    p.inject(p.b, nack(NackCode.UNEXP_EVENT, 0, tp.rpdcid, tp.lpdcid), A_ADDR)
    # CLOSE retries exhausted in CLOSE_ACK_WAIT
    p = Pair(CFG)
    _send(p, "a")
    p.run_until(lambda: len(p.a.acked()) == 1)
    p.filter = lambda d, s, t: []
    p.a.core.close(p.now)
    p.run_idle()


def test_every_transition_is_exercised(seen: set) -> None:
    _scenarios()
    want = {(o, n) for table in (INITIATOR_TRANSITIONS, TARGET_TRANSITIONS) for o, ns in table.items() for n in ns}
    assert want - seen == set()


def test_target_cp_on_pending_pdc_is_unexpected() -> None:
    p = Pair(CFG)
    p.b.core.start_psn_policy = PeerStartPsn(lambda peer, start: 5000)
    p.inject(p.b, request(1, 9, syn_offset=0), A_ADDR)
    p.take(p.b)
    (tp,) = p.b.core.pdcs.values()
    assert tp.state is TargetState.PENDING
    p.inject(p.b, CONTROL.encode((11, ControlType.PROBE, 0, 1, 0, 9, tp.lpdcid, 0)), A_ADDR)
    assert hdr(p.take(p.b)[0][0]).nack_code == NackCode.UNEXP_EVENT
