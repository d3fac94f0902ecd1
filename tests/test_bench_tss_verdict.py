"""``uet-bench pair --tss --corrupt`` (issue 29 item 15): the verdict and exit status are the
secure transfer's, and the plaintext companion run (there for the ratio) is corrupted like it, so
it runs with the CRC-32C trailer instead of delivering wrong bytes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from uet.tools.bench.options import PairOptions, data_protect, pair_notes
from uet.tools.bench.tss import PHASE_KEYS, tss_fields


def test_the_plaintext_companion_of_a_corrupted_tss_run_carries_the_crc_trailer() -> None:
    opts = PairOptions(tss=True, corrupt=0.01)
    assert data_protect(replace(opts, secure=False)) == "crc"  # was "none": corruption delivered
    assert data_protect(replace(opts, secure=True)) == "none"  # TSS authenticates
    assert data_protect(PairOptions(tss=True)) == "none"
    assert "integrity_note" not in pair_notes(opts)  # the note is about --corrupt *without* --tss


def _run(intact: bool) -> dict[str, Any]:
    side = {"drops": {}, "arrivals": [], "tamper_fps": [], "tampered": 0, "rotations": 0, "sealed": 10}
    return {"tss": side, "rx_tss": side, "intact": intact}


def _figures(intact: bool) -> dict[str, Any]:
    f: dict[str, Any] = dict.fromkeys(PHASE_KEYS, 1.0)
    f.update(intact=intact, error=None if intact else "wrong bytes", retransmits=0, delivered_bytes=8)
    return f


def test_the_verdict_is_the_secure_transfers() -> None:
    opts = PairOptions(tss=True, corrupt=0.01)
    for secure_ok, plain_ok in ((True, False), (False, True), (True, True)):
        out = tss_fields([(_run(secure_ok), _figures(secure_ok))], [_figures(plain_ok)], opts)
        assert out["intact"] is secure_ok and out["secure_intact"] is secure_ok
        assert out["plaintext_intact"] is plain_ok
