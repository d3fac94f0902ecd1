"""``uet-bench pair --tss`` (two OS processes, real UDP on loopback): integrity, the exact
accounting of tampered datagrams, and key rotation during a 64 MiB transfer (issue 5 items 4, 8).
"""

from __future__ import annotations

import random

from uet.tools.bench import PairOptions, run_pair

from uet.link import loopback_addresses

MiB = 1 << 20


def _run(size: int, **kw) -> dict:
    a, b = loopback_addresses(2, seed=random.getrandbits(32))
    opts = PairOptions(
        size=size, addresses=(a, b), port=20000 + random.randrange(20000), raw=False, timeout=120.0, tss=True, **kw
    )
    return run_pair(opts)


def test_tamper_is_detected_and_counted_exactly() -> None:
    """Two rounds, each a plaintext transfer then a secure one: the accounting adds up over both."""
    rec = _run(4 * MiB, tamper=0.02, seed=3, rounds=2)
    assert rec["error"] is None and rec["intact"] and rec["secure_intact"]
    # The top-level figures are the plaintext transfer's, as without --tss; the secure one's own
    # are under "secure" (issue 14: the figures used to switch meaning with --tss).
    assert rec["delivered_bytes"] == 4 * MiB and rec["secure"]["delivered_bytes"] == 4 * MiB
    assert rec["secure"]["intact"] is True and "plaintext" not in rec
    assert rec["tampered"] > 10
    # Every tampered datagram a receiver read was rejected, and nothing else was.
    assert rec["auth_failures"] == rec["tampered_reached_receiver"] > 0
    assert rec["auth_failures_match"] is True
    assert rec["auth_failures_bad_tag"] <= rec["auth_failures"]
    assert rec["tampered_reached_receiver"] + rec["tampered_lost"] == rec["tampered"]
    assert rec["secure"]["retransmits"] > 0  # the tampered requests were repaired by PDS
    assert rec["ratio_vs_plaintext"] is not None and rec["ratio_vs_plaintext"] > 0
    per_round = rec["secure"]["rounds"]  # each round's secure goodput over the same round's plaintext
    assert len(per_round) == len(rec["rounds"]) == 2
    for sec, plain in zip(per_round, rec["rounds"], strict=True):
        assert sec["ratio_vs_plaintext"] == round(sec["goodput_gbps"] / plain["goodput_gbps"], 3)
    assert rec["ratio_vs_plaintext"] == round(sum(r["ratio_vs_plaintext"] for r in per_round) / 2, 3)


def test_key_rotation_mid_64mib_transfer_loses_nothing() -> None:
    """Both FEPs switch to a new key half-way through a 64 MiB message (the next key was
    installed beforehand: make-before-break); every byte arrives and no datagram is rejected."""
    rec = _run(64 * MiB, rotate=True, seed=4)
    assert rec["error"] is None and rec["intact"] and rec["secure"]["delivered_bytes"] == 64 * MiB
    assert rec["rotations"] == 2  # both FEPs switched their sender to the new key
    assert rec["auth_failures"] == 0 and rec["tss_drops"] == {}  # nothing rejected, nothing lost
