"""RCCC (spec/behaviour.md §4.5) at the edges of its rules: the source's credit at 0 and 1 byte,
its target with and without NSCC's cap and backlog, repeated and capped grants, the smoothed
grant gap with unequal gaps; the receiver pacer on two ports, the grant it repeats, funded
retransmissions, senders that leave, core pull switched off. Numbers by hand from the defaults
of ``tests/test_cc_rccc.py`` (MaxWnd 225 000 B, MTU 4096, quanta of 256 B, a full grant of 64
quanta every 1323 ns). Each test was written against a mutant of ``uet/cc/rccc.py`` that the
older tests let through (``python -m uet.tools.mutate uet.cc.rccc``).
"""

from __future__ import annotations

from test_cc_rccc import _drain

from uet.cc import CcConfig, CreditScheduler, CreditSender
from uet.cc.rccc import diff24

CFG = CcConfig()


def blocked() -> CreditSender:
    """A source whose speculation ended with no credit left."""
    c = CreditSender(CFG)
    c.on_grant(0, 0)
    assert c.credit == 0 and not c.speculating
    return c


def test_serial_difference_of_24_bit_counters() -> None:
    assert diff24(0, 1) == -1 and diff24(0x800000, 0) == -0x800000 and diff24(0x7FFFFF, 0) == 0x7FFFFF


def test_a_grant_is_the_low_24_bits_of_the_credit_payload() -> None:
    c = blocked()
    c.on_grant(0x1000040, 1_000)  # a 32-bit CREDIT payload with a stray high bit
    assert c.pull == 0x40 and c.credit == 16_384


def test_credit_of_one_byte_may_send_none_may_not() -> None:
    c = blocked()
    assert not c.can_send()
    c.on_grant(1, 1_000)  # one quantum
    assert c.credit == 256 and c.granted_bytes == 256 and c.pull == 1
    c.on_send(255)
    assert c.can_send()
    c.on_send(1)
    assert not c.can_send()


def test_end_of_speculation_drops_even_one_byte_of_unused_credit() -> None:
    c = CreditSender(CFG)
    c.on_send(224_999)
    c.end_speculation()
    assert c.credit == 0 and not c.can_send()


def test_target_with_the_nscc_cap_advances_by_single_quanta() -> None:
    c = blocked()
    c.backlog = 1_000_000
    assert c.target(cwnd=10_000.0) == 56  # ceil((10 000 + 4096) / 256) = ceil(55.06)
    assert c.target(cwnd=10_256.0) == 57  # one quantum more: advertised
    assert c.target() == 879  # no cap but MaxWnd: ceil(225 000 / 256)


def test_no_backlog_no_demand_even_while_speculating() -> None:
    c = CreditSender(CFG)
    assert c.target() == 0
    c.backlog = 1
    assert c.target() == 16  # any backlog while speculating asks for at least one MTU
    c = blocked()
    c.rtx_backlog = 4_096  # only resends waiting
    assert c.target() == 16


def test_repeated_grant_is_no_grant_and_the_gap_is_smoothed_by_an_eighth() -> None:
    recs: list[dict] = []
    c = CreditSender(CFG, log=recs.append)
    c.on_grant(64, 10_000)
    c.on_grant(64, 30_000)  # the same cumulative grant again: nothing new
    assert c.last_grant == 10_000 and c.grant_gap == 0 and len(recs) == 1
    c.on_grant(128, 30_000)  # first gap: 20 000
    c.on_grant(192, 58_000)  # 28 000: 20 000 + (28 000 − 20 000) / 8
    assert c.grant_gap == 21_000
    assert recs[-1] == {"t": 58_000, "ev": "cc", "algo": "rccc", "credit": 3 * 16_384, "pull": 192}


def test_credit_never_exceeds_max_wnd() -> None:
    c = blocked()
    c.on_grant(1_000, 1)  # 256 000 bytes granted
    assert c.credit == 225_000 and c.granted_bytes == 256_000


def test_a_source_waiting_only_to_resend_asks_at_once() -> None:
    c = blocked()
    assert c.request_deadline() is None  # nothing to send
    c.rtx_backlog = 4_096
    d = c.request_deadline()
    assert d is not None and d < 0  # never sent a target nor heard a grant: no wait
    c.target()  # the CREDIT_REQ carried the target
    c.on_request_sent(5_000)
    assert c.request_deadline() == 17_000
    c.rtx_backlog, c.backlog = 0, 1  # one byte to send is something to send
    assert c.request_deadline() == 17_000
    c.on_grant(1, 6_000)
    c.on_send(255)  # one byte of credit left: not blocked
    assert c.request_deadline() is None


def test_two_ports_grant_twice_as_often() -> None:
    s = CreditScheduler(CFG, ports=2)  # 24.75 B/ns: int(16 384 / 24.75) = 661 ns per grant
    s.note_target("A", 1_000, 0)
    assert len(s.poll(5_000)) == 8  # at 0, 661, …, 4627
    assert s.deadline() == 8 * 661


def test_the_grant_repeated_for_a_target_already_granted() -> None:
    z = CreditScheduler(CFG)
    z.note_target("Z", 0x1000028, 0)  # only the low 24 bits are the target
    assert z.peers["Z"].target == 40
    s = CreditScheduler(CFG)
    assert s.note_target("B", 0, 0) is None  # never granted, asks for nothing
    assert s.note_target("A", 40, 0, route="r", rx=4_160) is None
    assert s.poll(0) == [("A", "r", 40)]
    assert s.note_target("A", 40, 100, rx=4_160) == 40  # its CREDIT was lost: repeat it
    assert s.note_target("A", 39, 200) == 40  # an older target: the same
    assert s.peers["A"].rx == 8_320
    assert s.note_target("A", 50, 300) is None  # new demand: the pacer grants it
    assert s.poll(1_323) == [("A", "r", 50)]  # the route is kept


def test_funded_retransmission_builds_on_the_grant_or_the_target() -> None:
    s = CreditScheduler(CFG)
    s.add_demand("X", 4_096, 0)  # unknown sender: nothing
    assert "X" not in s.peers and s.deadline() is None
    s.note_target("A", 40, 0)
    s.poll(0)  # A granted its whole target
    s.add_demand("A", 4_096, 100)  # granted 40 + 16
    assert s.peers["A"].target == 56
    s.note_target("B", 200, 100)
    s.add_demand("B", 1_000, 200)  # target 200 not yet granted: 200 + ceil(1000 / 256)
    assert s.peers["B"].target == 204


def test_a_sender_that_leaves_is_no_longer_served() -> None:
    s = CreditScheduler(CFG)
    s.note_target("A", 1_000, 0)
    s.note_target("B", 1_000, 0)
    s.note_target("C", 40, 0)
    s.forget("A")
    s.forget("nobody")
    assert [k for k, _r, _g in s.poll(3 * 1_323)] == ["B", "C", "B", "B"]
    s.forget("C")  # already inactive (its target met)
    assert "C" not in s.peers and s.active == ["B"]


def core_trimmed(s: CreditScheduler, key: str) -> None:
    """Known to ``s`` but not active; its packets trimmed in the core for two epochs of 18 µs:
    share 1 → 0.5 → 0.25 (uet.cc.pullrate), a new epoch opened at 36 µs."""
    s.note_target(key, 0, 0)
    for t in (*range(0, 8_000, 1_000), 18_000):
        s.note_arrival(key, True, t)
    s.note_arrival(key, False, 36_000)


def test_core_trims_change_nothing_with_core_pull_off() -> None:
    for on, rate in ((False, 1.0), (True, 0.25)):
        s = CreditScheduler(CcConfig(core_pull=on))
        s.note_arrival("nobody", True, 0)  # an unknown sender: ignored
        core_trimmed(s, "A")
        assert "nobody" not in s.peers and s.peers["A"].pace.rate == rate
    s.note_arrival("A", False, 54_000)  # an epoch with no trim and no CE mark: × 1.5 (not + 0.03)
    assert s.peers["A"].pace.rate == 0.375


def test_a_sender_waiting_for_its_share_lets_the_others_go() -> None:
    """A's share 0.25: after a grant it waits 1323 / 0.25 = 5292 ns, while B is served."""
    s = CreditScheduler(CFG)
    core_trimmed(s, "A")
    s.note_target("A", 0xFFFFF, 40_000)
    s.note_target("B", 0xFFFFF, 40_000)
    assert _drain(s, 45_292) == ["A", "B", "B", "B", "A"]


def test_the_pacer_waits_for_a_lone_sender_share_within_one_poll() -> None:
    s = CreditScheduler(CFG)
    core_trimmed(s, "A")
    s.note_target("A", 0xFFFFF, 40_000)
    assert len(s.poll(40_000)) == 1  # next allowed at 45 292
    assert [g for _k, _r, g in s.poll(50_000)] == [128]  # granted at 45 292, next at 50 584
    assert s.deadline() == 50_584


def test_the_least_served_goes_first_by_a_single_byte() -> None:
    s = CreditScheduler(CFG)
    s.note_target("B", 1_000, 0, rx=1)
    s.note_target("A", 1_000, 0)
    assert [k for k, _r, _g in s.poll(0)] == ["A"]


def test_funded_retransmission_on_top_of_one_quantum_not_yet_granted() -> None:
    s = CreditScheduler(CFG)
    s.note_target("A", 40, 0)
    s.poll(0)
    s.note_target("A", 41, 10)
    s.add_demand("A", 4_096, 20)
    assert s.peers["A"].target == 57


def test_one_quantum_left_keeps_a_sender_active() -> None:
    s = CreditScheduler(CFG)
    s.note_target("A", 65, 0)
    assert [g for _k, _r, g in s.poll(1_323)] == [64, 65]


def test_grants_are_at_least_one_nanosecond_apart() -> None:
    s = CreditScheduler(CFG, ports=100)  # 1237.5 B/ns: one quantum takes 0.2 ns
    s.note_target("A", 1, 0)
    s.note_target("B", 1, 0)
    assert len(s.poll(0)) == 1 and s.deadline() == 1


def test_a_newcomer_after_everyone_stopped_starts_near_the_last_served() -> None:
    """With no active sender the floor is the last account served (A's 100 grants, 1 638 400 B)
    less one MaxWnd: C gets 14 grants in a row, as when A stays active."""
    s = CreditScheduler(CFG)
    s.note_target("A", 6_400, 0)
    _drain(s, 99 * 1_323)  # 100 grants: A's target met, nobody active
    assert s.active == []
    s.note_target("C", 0xFFFFF, 100 * 1_323)
    s.note_target("A", 0xFFFFF, 100 * 1_323)
    assert _drain(s, 100 * 1_323 + 15 * 1_323) == ["C"] * 14 + ["A", "C"]


def test_each_poll_with_grants_is_logged() -> None:
    recs: list[dict] = []
    s = CreditScheduler(CFG, log=recs.append)
    s.note_target("A", 64, 0)
    s.note_target("B", 64, 0)
    s.poll(1_323)
    s.poll(5_000)  # nothing due: no record
    assert recs == [{"t": 1_323, "ev": "cc", "algo": "rccc_rx", "grants": 2, "active": 0}]


def test_new_demand_request_that_could_not_go_is_not_retried_at_once() -> None:
    """New demand is announced at once (``request_deadline`` due now), but a request that could
    not go (its PDC not yet established: no target went) falls back to the no-credit timeout
    instead of being due again at the same instant, which spun a 16→1 incast."""
    c = blocked()
    c.backlog = 4_096
    c.on_send(0, 1_000)  # the receiver last heard from us at 1 µs
    assert c.request_deadline() == 1_000  # due at once
    c.on_request_sent(2_000)  # attempted; no target advertised
    assert c.request_deadline() == 2_000 + 12_000
    c.on_grant(1, 3_000)  # a grant: new demand beyond it is due at once again
    c.on_send(300, 3_000)
    assert c.credit < 0 and c.request_deadline() == 3_000
