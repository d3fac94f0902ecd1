"""``uet-bench sim --against-htsim``: rows, htsim's command lines, the checkout lookup, measuring."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from uet.tools.bench import main
from uet.tools.bench.htsim import HTSIM_ROWS, find_htsim, htsim_command, measure, select_rows
from uet.tools.cc_suite import SUITES
from uet.tools.cli import UsageError


def test_every_cc_row_with_an_htsim_counterpart_has_its_command() -> None:
    stems = {p.stem for p in SUITES["cc"].glob("*.toml")}
    assert set(HTSIM_ROWS) <= stems
    assert stems - set(HTSIM_ROWS) == {"incast127_nscc_subpacket"}  # beyond htsim's configuration
    cmd = htsim_command(Path("/x/htsim_uec"), "perm1024_1path_rccc")
    assert cmd == ["/x/htsim_uec", "-tm", "connection_matrices/perm_1024n_1024c_0u_2000000b.cm"] + [
        "-receiver_cc_only",
        "-paths",
        "1",
        "-end",
        "3000",
    ]


def test_rows_are_chosen_by_glob() -> None:
    assert select_rows("incast15_*") == ["incast15_nscc", "incast15_rccc", "incast15_nscc_rccc"]
    assert select_rows(None) == list(HTSIM_ROWS)
    with pytest.raises(UsageError, match="no row matches"):
        select_rows("nothing*")


def test_a_checkout_without_the_binary_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim = tmp_path / "htsim" / "sim"
    (sim / "datacenter" / "connection_matrices").mkdir(parents=True)
    with pytest.raises(UsageError, match="no htsim_uec"):
        find_htsim(str(tmp_path))
    binary = sim / "build" / "datacenter" / "htsim_uec"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert find_htsim(str(tmp_path)) == (binary, sim / "datacenter")
    assert find_htsim(str(binary)) == (binary, sim / "datacenter")
    assert main(["sim", "--against-htsim", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.startswith("uet-bench: error: --against-htsim:")


def test_measure_takes_cpu_and_rss_of_the_child() -> None:
    m = measure([sys.executable, "-c", "b = bytearray(64 << 20); print(sum(range(10**6)))"])
    assert m.rc == 0 and m.out.strip() == str(sum(range(10**6))).encode()
    assert m.rss_mb >= 64 and m.cpu_s > 0


def test_measure_takes_cpu_time_finer_than_hundredths() -> None:
    # GNU time prints CPU time in steps of 10 ms; htsim's small rows take 30-50 ms in all, so the
    # figure must come from the kernel's microseconds: five short children all landing on a
    # hundredth would be a coincidence of about 1e-20
    runs = [measure([sys.executable, "-c", "sum(range(2 * 10**5))"]).cpu_s for _ in range(5)]
    assert all(c > 0 for c in runs)
    assert any(abs(c * 100 - round(c * 100)) > 1e-6 for c in runs), runs


def test_the_table_shows_the_compiled_column_only_when_measured() -> None:
    import io

    from uet.tools.bench.htsim import _figures, render

    row = {
        "row": "incast15_nscc",
        "htsim_cpu_s": 0.05,
        "ours_cpu_s": 3.5,
        "ratio": 70.0,
        "target": 15.0,
        "htsim_rss_mb": 5.0,
        "ours_rss_mb": 80.0,
        "htsim_tail_us": 2478.5,
        "ours_tail_us": 2490.1,
        "htsim_ok": True,
        "ours_ok": True,
    }
    plain, both = io.StringIO(), io.StringIO()
    render([row], file=plain, width=200)
    render([{**row, "compiled_cpu_s": 2.5, "compiled_ratio": 50.0, "compiled_ok": False}], file=both, width=200)
    assert "compiled" not in plain.getvalue() and "70.0×" in plain.getvalue()
    assert "50.0×" in both.getvalue() and "(failed)" in both.getvalue()
    # the compiled run must give the same figures: only what was measured may differ
    assert _figures(b'{"fct": 1, "elapsed_s": 3, "timing": {}}') == _figures(b'{"fct": 1, "elapsed_s": 4}')
    assert _figures(b'{"fct": 1}') != _figures(b'{"fct": 2}')
    assert _figures(b"not json") is None
    # piped (pytest's stdout is not a terminal) and no width given: not rich's 80 columns, which
    # cut the row names short and wrapped every cell
    piped = io.StringIO()
    render(
        [{**row, "row": "incast127_nscc_rccc", "compiled_cpu_s": 10.1, "compiled_ratio": 17.2, "compiled_ok": True}],
        file=piped,
    )
    lines = piped.getvalue().splitlines()
    assert any("incast127_nscc_rccc" in line and "17.2×" in line for line in lines), piped.getvalue()


def test_each_build_s_ratio_is_held_to_the_row_s_target(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A row's record says for the pure and for the compiled run whether its ratio to htsim meets
    the row's target (a CC row: 15x), from the least CPU of the rounds."""
    import uet.tools.bench.htsim as bh

    cpu = {"htsim": [0.010, 0.005], "0": [0.30, 0.25], "1": [0.08, 0.07]}
    out = b'{"ok": true, "elapsed_s": 1.0}'

    def fake_measure(cmd: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> bh.Measured:
        who = "htsim" if env is None else env["UET_COMPILED"]
        return bh.Measured(cpu[who].pop(0), 10.0, 0, out)

    monkeypatch.setattr(bh, "find_htsim", lambda path: (tmp_path / "htsim_uec", tmp_path))
    monkeypatch.setattr(bh, "byte_compile", lambda: None)
    monkeypatch.setattr(bh, "measure", fake_measure)
    (rec,) = bh.run_rows("checkout", ["one_flow_nscc"], 2, compiled=True)
    assert rec["target"] == 15.0
    assert (rec["htsim_cpu_s"], rec["ours_cpu_s"], rec["compiled_cpu_s"]) == (0.005, 0.25, 0.07)
    assert (rec["ratio"], rec["meets_target"]) == (50.0, False)
    assert (rec["compiled_ratio"], rec["compiled_meets_target"]) == (14.0, True)
    assert rec["compiled_ok"]
