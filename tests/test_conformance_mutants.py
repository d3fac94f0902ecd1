"""``python -m uet.tools.conformance_mutants`` (uet/conformance/mutants.py): the catalogue of
deliberate core breakages still applies to the cores, and one breakage runs end to end (a broken
peer from a scratch copy, the suite against it, the verdict). The full run is CPU-heavy and made by hand (README)."""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from pathlib import Path

import pytest
from uet.tools import conformance_mutants as cm

from uet.conformance import mutants
from uet.conformance.breakages import BREAKAGES


def test_the_catalogue_applies_and_covers_every_area() -> None:
    assert len(BREAKAGES) >= 60 and len({b.id for b in BREAKAGES}) == len(BREAKAGES)
    sending = {f"initiator-{a}" for a in ("retx", "nack", "pdc", "ack", "clear", "close", "trim", "ses")}
    assert {"establish", "window", "ack", "clear", "control", "close", "rod", "rudi", "ses-rc", "ses-match",
            "ses-rma", "atomic", "tss", "trim", *sending} <= {b.area for b in BREAKAGES}  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cm.main(["--check"]) == 0
    assert f"{len(BREAKAGES)} breakages apply" in out.getvalue()


def test_apply_changes_only_the_copy(tmp_path: Path) -> None:
    b = next(x for x in BREAKAGES if x.id == "amo-mswap")
    original = (mutants.package_roots()["uet"] / "ses" / "atomics.py").read_text()
    root = mutants.apply(b, tmp_path / "pkg")
    copy = (root / b.path).read_text()
    assert b.new in copy and b.old not in copy
    assert (mutants.package_roots()["uet"] / "ses" / "atomics.py").read_text() == original
    assert (root / "uet" / "tools" / "peer.py").exists()  # uet.tools mapped into the copy


def test_one_breakage_is_caught_end_to_end() -> None:
    v = mutants.run_one(next(x for x in BREAKAGES if x.id == "clr-ignore-cp"), timeout=3.0, seed=5, cases=["CLR-"])
    assert v.outcome == "must" and v.failed == ["CLR-003"], v


def test_usage_errors() -> None:
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert cm.main(["-k", "no-such-breakage"]) == 2
    assert "selects no breakage" in err.getvalue()


def test_a_stale_breakage_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A breakage whose text no longer occurs as often as the catalogue says raises the library's error, and the
    command's ``--check`` prints it as one usage-error line."""
    stale = replace(next(x for x in BREAKAGES if x.id == "amo-mswap"), old="no such text in the core")
    with pytest.raises(mutants.BreakageError, match="occurs 0 times in uet/ses/atomics.py"):
        mutants.check(stale)
    with pytest.raises(mutants.BreakageError, match="occurs 0 times"):
        mutants.apply(stale, tmp_path / "pkg")
    monkeypatch.setattr(cm, "BREAKAGES", [stale])
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert cm.main(["--check"]) == 2
    assert err.getvalue() == (
        "uet-conformance-mutants: error: breakage amo-mswap: the text to change occurs 0 times in uet/ses/atomics.py,"
        " not 1\n"
    )


def test_a_rule_written_twice_is_broken_in_both_copies(tmp_path: Path) -> None:
    """A rule the PDS also writes in its in-order ACK fast path (the catalogue's ``copies``) is broken
    in every copy, so the mutant cannot pass by taking the path that still has the rule; one copy
    fewer than the catalogue says is refused."""
    b = next(x for x in BREAKAGES if x.id == "ini-req-clear")
    assert b.copies == 2
    text = (mutants.apply(b, tmp_path / "pkg") / b.path).read_text()
    assert text.count(b.old) == 0 and text.count(b.new) == 2
    with pytest.raises(mutants.BreakageError, match="occurs 2 times in uet/pds/feedback.py, not 1"):
        mutants.check(replace(b, copies=1))
