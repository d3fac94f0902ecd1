"""A target's close of a PDC the initiator still uses (issue 29, the live soak's failed sends).

The 10-minute live soak failed sends with ``CLOSING_IN_ERR`` and ``INV_DPDCID``: the target
closed a PDC in error while its initiator was alive, so the initiator's next packets met no PDC.
These tests feed exact packets through the in-memory pair (tests/fep_harness.py) in virtual time.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fep_harness import A_ADDR, B_ADDR, FepPair, decode

from uet.fep import FepConfig, OpFailed, Transmit
from uet.fep.config import with_config
from uet.wire.pds import ControlType, NackCode, PdsType

pytestmark = pytest.mark.in_memory  # the in-memory FEP pair; the word socket in a docstring


def _ctl(t: Transmit) -> int | None:
    p = decode(t).sections[0][1]
    return int(p.ctl_type) if p.type == PdsType.CONTROL else None


def _pair_with_a_first_message(seed: int) -> FepPair:
    """A FEP pair whose target closes an idle PDC in error soon (5 ms idle, 10 ms CLOSE_REQ), after
    one message ("first") went through."""
    a_cfg = with_config(FepConfig(), close_idle_ns=None)
    b_cfg = with_config(FepConfig(), target_idle_ns=5_000_000, close_req_ns=10_000_000)
    pair = FepPair(a_cfg, b_cfg, seed=seed, delay_ns=1_000_000)
    assert pair.complete(pair.a, pair.a.core.send(B_ADDR, b"first")) == [None]
    return pair


def _through_a_close_in_error(
    pair: FepPair, phase: dict[str, int], lose: Callable[[Transmit, str], list[bytes]], *, together: bool = False
) -> list[bytes]:
    """Send "second" and "third" through ``lose`` (phase 1: until the target delivered "second", or
    "third" when ``together``, both sent at once; phase 2: silence until the target closed the PDC
    in error; phase 3: until both complete); asserts neither failed and returns what the target
    delivered, in order."""
    pair.filter = lose
    got: list[bytes] = []

    def take() -> list[bytes]:
        while (m := pair.b.core.recv_nowait()) is not None:
            got.append(bytes(m.data))
        return got

    h1 = pair.a.core.send(B_ADDR, b"second")
    if together:
        h2 = pair.a.core.send(B_ADDR, b"third")
    pair.run_until(lambda: (b"third" if together else b"second") in take(), max_ns=20_000_000)
    phase["n"] = 2
    if not together:
        h2 = pair.a.core.send(B_ADDR, b"third")
    pair.run_until(lambda: pair.b.core.pds.counters.get("pdc_close_target_error", 0) == 1, max_ns=40_000_000)
    phase["n"] = 3
    pair.run_until(lambda: h1 in pair.a.done and h2 in pair.a.done, max_ns=3_000_000_000)
    pair.run_until(lambda: False, max_ns=200_000_000)
    take()
    assert [pair.a.done[h] for h in (h1, h2) if isinstance(pair.a.done[h], OpFailed)] == []
    return got


def test_close_req_outlives_a_round_trip_longer_than_its_retransmissions() -> None:
    """The target's idle close sends CLOSE_REQ and retransmits it on the (backed-off) RTO. Its
    retry budget was the count alone (5 retries, ~450 ms with the FEP's 50 ms RTO) while every
    other packet's budget is the count *and* ``retry_time_ns``: with a round trip past 450 ms (a
    loaded machine's socket queues) the target closed in error before the initiator's ACK of the
    CLOSE_REQ could arrive. Now the CLOSE_REQ has the same budget and the close is graceful."""
    a_cfg = with_config(FepConfig(), close_idle_ns=None)
    b_cfg = with_config(FepConfig(), target_idle_ns=100_000_000)
    pair = FepPair(a_cfg, b_cfg, seed=1, delay_ns=300_000_000)
    h = pair.a.core.send(B_ADDR, b"x" * 10)
    assert pair.complete(pair.a, h) == [None]
    pair.run_until(lambda: False, max_ns=4_000_000_000)
    tb, ta = pair.b.core.pds.counters, pair.a.core.pds.counters
    assert tb.get("target_idle_close", 0) == 1
    assert tb.get("pdc_close_target_error", 0) == 0, "closed in error while the initiator answered"
    assert tb.get("pdc_close_target", 0) == 1 and ta.get("pdc_close_initiator", 0) == 1
    nacks = [decode(t).sections[0][1] for t in pair.sent_by(pair.b)]
    assert not any(p.type == PdsType.NACK and p.nack_code == NackCode.CLOSING_IN_ERR for p in nacks)


def test_close_req_retries_while_the_initiator_is_heard() -> None:
    """Every CLOSE_REQ is lost for a second while the initiator keeps sending on the PDC (it never
    saw the request): the target does not give the close up while it hears the initiator (the
    retry budget's time runs from the initiator's last arrival, uet.pds.control), so no message
    meets a PDC closed under it, and every message is delivered exactly once."""
    a_cfg = with_config(FepConfig(payload_size=1024), close_idle_ns=None)
    b_cfg = with_config(FepConfig(payload_size=1024), target_idle_ns=20_000_000)
    pair = FepPair(a_cfg, b_cfg, seed=2, delay_ns=1_000_000)
    h0 = pair.a.core.send(B_ADDR, b"first")
    assert pair.complete(pair.a, h0) == [None]
    lose = {"on": True}

    def drop_close_req(t: Transmit, src: str) -> list[bytes]:
        if lose["on"] and src == B_ADDR and _ctl(t) == ControlType.REQ_CLOSE:
            return []
        return [t.data]

    pair.filter = drop_close_req
    pair.run_until(lambda: pair.b.core.pds.counters.get("target_idle_close", 0) == 1, max_ns=1_000_000_000)
    hs = []
    for i in range(40):  # one 8 KiB message every 25 ms: the PDC is never idle for the initiator
        hs.append(pair.a.core.send(B_ADDR, bytes([i]) * 8192))
        pair.run_until(lambda: False, max_ns=25_000_000)
    lose["on"] = False
    pair.run_until(lambda: all(h in pair.a.done for h in hs), max_ns=3_000_000_000)
    assert not [h for h in hs if isinstance(pair.a.done.get(h), OpFailed)]
    assert pair.b.core.pds.counters.get("pdc_close_target_error", 0) == 0
    got = []
    while (m := pair.b.core.recv_nowait()) is not None:
        got.append(bytes(m.data))
    assert sorted(got) == sorted([b"first"] + [bytes([i]) * 8192 for i in range(40)])


def test_no_retry_on_a_new_pdc_of_a_message_the_target_may_have_delivered() -> None:
    """A one-packet message is delivered, its ACK lost; the target then closes the PDC in error
    (the initiator fell silent past its CLOSE_REQ's budget) and answers the retransmission with
    ``INV_DPDCID``. The initiator used to resend every wholly unacknowledged message on a new PDC,
    counting on the target's SES to recognise a completed one; SES no longer remembers RUD/ROD
    messages (PDS removes their duplicates by PSN), so the message was delivered twice. Only a
    message the target cannot have assembled moves now (a packet of it never sent, or sent once
    and named by the NACK: tests/test_pds_fatal_nack.py); this one, retransmitted, fails (it may
    have been delivered) and is delivered once."""
    a_cfg = with_config(FepConfig(), close_idle_ns=None)
    b_cfg = with_config(FepConfig(), target_idle_ns=5_000_000, close_req_ns=10_000_000, retry_time_ns=0)
    pair = FepPair(a_cfg, b_cfg, seed=3, delay_ns=1_000_000)
    assert pair.complete(pair.a, pair.a.core.send(B_ADDR, b"first")) == [None]
    t0 = pair.now

    def lose(t: Transmit, src: str) -> list[bytes]:
        p = decode(t).sections[0][1]
        if src == B_ADDR and p.type in (PdsType.ACK, PdsType.ACK_CC):
            return []  # the second message's ACK (and the CLOSE_REQ's ACK below) never arrive
        if src == A_ADDR and pair.now < t0 + 30_000_000 and _ctl(t) is None and p.type != PdsType.RUD_REQ:
            return []
        return [t.data]

    pair.filter = lose
    h = pair.a.core.send(B_ADDR, b"second")
    pair.run_until(lambda: h in pair.a.done, max_ns=3_000_000_000)
    pair.run_until(lambda: False, max_ns=500_000_000)
    got = []
    while (m := pair.b.core.recv_nowait()) is not None:
        got.append(bytes(m.data))
    assert got == [b"first", b"second"]
    assert pair.b.core.pds.counters.get("pdc_close_target_error", 0) == 1
    assert isinstance(pair.a.done[h], OpFailed)


def test_a_target_that_closed_in_error_answers_for_what_it_delivered() -> None:
    """The stress test's failure (tests/test_api_stress.py, 1 run in 25 on a loaded machine):
    the four FEPs' process stalled past the target's idle close and ``Close_REQ_Time``, so the
    target closed a PDC in error whose initiator was only slow; the initiator's late
    retransmissions met ``INV_DPDCID`` and both a message the target had delivered (its ACK
    lost) and one it never saw failed, since the initiator cannot tell them apart. The target
    now remembers what the closed PDC delivered: it ACKs the delivered one, and its
    ``INV_DPDCID`` for the other names the first PSN it never delivered, so that message moves
    to a new PDC. Both complete, each delivered once."""
    pair = _pair_with_a_first_message(seed=4)
    phase = {"n": 1}

    def lose(t: Transmit, src: str) -> list[bytes]:
        p = decode(t).sections[0][1]
        if phase["n"] == 1 and src == B_ADDR and p.type in (PdsType.ACK, PdsType.ACK_CC):
            return []  # the second message arrives, its ACK does not
        if phase["n"] == 2:
            return []  # silence both ways: the target closes the PDC in error
        return [t.data]

    got = _through_a_close_in_error(pair, phase, lose)
    assert pair.b.core.pds.counters.get("pdc_close_target_error", 0) == 1
    assert got == [b"first", b"second", b"third"]


def test_a_closed_pdc_acknowledges_what_it_delivered_before_its_nack_closes_the_initiator() -> None:
    """The same, with the late copy of the delivered message lost: the copy of the other one
    draws the ``INV_DPDCID`` that closes the initiator's PDC first. The closed PDC's answer
    starts with its last cumulative ACK, so the delivered message is acknowledged before the
    NACK arrives, and the other moves to a new PDC."""
    pair = _pair_with_a_first_message(seed=5)
    phase = {"n": 1}
    second_psn: list[int] = []

    def lose(t: Transmit, src: str) -> list[bytes]:
        p = decode(t).sections[0][1]
        if phase["n"] == 1 and src == B_ADDR and p.type in (PdsType.ACK, PdsType.ACK_CC):
            return []
        if phase["n"] == 1 and src == A_ADDR and p.type == PdsType.RUD_REQ:
            second_psn.append(p.psn)
        if phase["n"] == 2 or (phase["n"] == 3 and src == A_ADDR and p.type == PdsType.RUD_REQ and p.psn in second_psn):
            return []  # silence; then every late copy of the delivered message is lost too
        return [t.data]

    got = _through_a_close_in_error(pair, phase, lose)
    assert pair.b.core.pds.counters.get("closed_pdc_nacks", 0) >= 1
    assert got == [b"first", b"second", b"third"]


def test_a_message_with_a_hole_the_closed_pdc_never_filled_moves_to_a_new_pdc() -> None:
    """...and a message whose packet the closed PDC never received, though it delivered later
    PSNs (a RUD hole), moves too: the ``INV_DPDCID`` naming that packet says it was not
    delivered, whatever its PSN and however often it was sent."""
    pair = _pair_with_a_first_message(seed=6)
    phase = {"n": 1}
    dropped: list[int] = []

    def lose(t: Transmit, src: str) -> list[bytes]:
        p = decode(t).sections[0][1]
        if phase["n"] == 1 and src == B_ADDR and p.type in (PdsType.ACK, PdsType.ACK_CC):
            return []
        if phase["n"] == 1 and src == A_ADDR and p.type == PdsType.RUD_REQ and not dropped:
            dropped.append(p.psn)  # the first copy of "second" is lost: a hole below "third"
            return []
        if phase["n"] == 2:
            return []
        return [t.data]

    got = _through_a_close_in_error(pair, phase, lose, together=True)
    assert got == [b"first", b"third", b"second"]
