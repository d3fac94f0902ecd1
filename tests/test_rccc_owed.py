"""The RCCC receiver's bound on the credit a sender holds unspent (``CcConfig.idle_credit``;
uet.cc.rccc.CreditScheduler, "Credit outstanding per sender"). Numbers by hand from the defaults:
100 Gb/s and 12 µs, a BDP of 150,000 B; a grant of 64 quanta (16,384 B) every 1,323 ns; a sender
is skipped once it holds more than 150,000 − 16,384 = 133,616 B unspent, i.e. after 9 grants
(147,456 B) with nothing arrived from it."""

from __future__ import annotations

from uet.cc import CcConfig, CreditScheduler

GRANT = 16_384
STEP = 1_323


def _two_senders(cfg: CcConfig) -> tuple[CreditScheduler, list[str]]:
    """A and B each ask for 1,000 quanta (256,000 B) at 0 and send nothing; the grants of 40 µs."""
    s = CreditScheduler(cfg)
    s.note_target("A", 1_000, 0, route="a")
    s.note_target("B", 1_000, 0, route="b")
    return s, [str(k) for k, _r, _g in s.poll(40_000)]


def test_a_sender_holding_a_bdp_of_unspent_credit_is_skipped_until_its_data_arrives() -> None:
    s, keys = _two_senders(CcConfig(idle_credit=True))
    assert keys == ["A", "B"] * 9  # 9 grants each, then both at the bound: the pacer stops
    assert s.peers["A"].owed == 9 * GRANT and s.deadline() is None and s.held
    s.note_target("A", 1_000, 50_000, rx=4_096)  # one packet of A arrives: still above 133,616 B
    assert s.poll(60_000) == []
    s.note_target("A", 1_000, 61_000, rx=12_288)  # A spent a grant's worth: one more for A only
    assert s.deadline() == 61_000
    assert s.poll(70_000) == [("A", "a", 10 * 64)]
    assert s.peers["A"].owed == 9 * GRANT and s.peers["B"].owed == 9 * GRANT


def test_a_trim_spends_credit_and_a_credit_request_clears_the_count() -> None:
    s, _ = _two_senders(CcConfig(idle_credit=True))
    s.add_demand("B", 4_096, 41_000)  # a trimmed packet of B spent 4 KiB (and funds its resend)
    assert s.peers["B"].owed == 9 * GRANT - 4_096
    # B says in a CREDIT_REQ it holds no credit (its packets may have been lost unseen)
    s.note_target("B", s.peers["B"].target, 42_000, blocked=True)
    assert s.peers["B"].owed == 0
    # served again, up to its target: 1,000 + 16 quanta less the 9 × 64 granted, in 7 grants
    assert [(k, g) for k, _r, g in s.poll(42_000 + 8 * STEP)] == [("B", 576 + 64 * i) for i in range(1, 7)] + [
        ("B", 1_016)
    ]


def test_without_idle_credit_the_pacer_never_stops_for_unspent_credit() -> None:
    s, keys = _two_senders(CcConfig())
    assert len(keys) == 2 * 15 + 1 and s.deadline() is not None and not s.held  # 40,000 // 1,323 + 1
