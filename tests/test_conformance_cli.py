"""``uet-conformance``'s verdict and its first words (issue 23 item 4): a ``-k`` that matches no
case is a usage error, an unreachable target is found by one probe before the first case, MUST
cases skipped for a missing precondition are not a pass, and responses carrying another JobID
are pointed out."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

from test_conformance import peer
from uet.tools import conformance


def test_k_matching_no_case_is_a_usage_error() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "uet.tools.conformance", "--target", "127.0.0.1", "-k", "NO-SUCH-CASE"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
    assert r.stderr.startswith("uet-conformance: error: -k NO-SUCH-CASE matched no case") and r.stderr.count("\n") == 1


def test_unreachable_target_is_one_probe_and_exit_1() -> None:
    """Nothing listens at the target: one probe (0.2 s), not 150 cases each waiting their timeout."""
    r = subprocess.run(
        [sys.executable, "-m", "uet.tools.conformance", "--target", "127.0.9.2", "--port", "29871",
         "--timeout", "0.2"],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert r.stderr.startswith("uet-conformance: failed: the target 127.0.9.2 port 29871") and "liveness" in r.stderr


def _run(p, *args: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = conformance.main(["--target", p.addr, "--port", str(p.port), "--local", p.local, "--json", *args])
    return rc, json.loads(out.getvalue()), err.getvalue()


def test_skipped_must_cases_are_not_a_pass(tmp_path: Path) -> None:
    with peer(tmp_path) as p:
        rc, report, err = _run(p, "-k", "RMA-0", "-k", "TSS-001")
    skipped = [c for c in report["cases"] if c["outcome"] == "skip" and c["level"] == "MUST"]
    assert skipped and any(c["area"] != "tss" for c in skipped)
    assert rc == 1
    assert "MUST cases skipped for a missing precondition" in err and "--region" in err


def test_tss_cases_of_a_plaintext_target_alone_do_not_fail_the_run(tmp_path: Path) -> None:
    with peer(tmp_path) as p:
        rc, report, err = _run(p, "--identity", str(p.ident_path), "-k", "TSS-00")
    assert {c["outcome"] for c in report["cases"]} == {"skip"}
    assert rc == 0 and err == ""


def test_responses_with_another_job_id_are_pointed_out(tmp_path: Path) -> None:
    with peer(tmp_path, "--fault", "wrong-job-echo") as p:
        rc, _report, err = _run(p, "--identity", str(p.ident_path), "-k", "SES-004", "--timeout", "3")
    assert rc == 1
    assert "responses carried JobID" in err and f"not --job {p.identity['job']:#x}" in err


def test_the_tester_defaults_to_the_loopback_address_next_to_the_target() -> None:
    from uet.conformance.session import default_local

    assert default_local("127.0.0.5") == "127.0.0.6"
    assert default_local("127.3.2.250") == "127.3.2.249"  # no .251: the neighbour below
