"""The optional compiled build of the switch model (uet.fabric.model.compiled): opt-in, refused when
stale, and the same figures as the pure-Python reference.

The comparison runs one small simulation twice in child processes, pure Python and compiled, and
wants the same results byte for byte. It needs a build (``.ci/build-compiled``: mypyc and a C
compiler, a few CPU-minutes): with ``UET_HEAVY_TESTS=1`` a missing or stale one is built first;
otherwise the test skips when none is current.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest
from uet.fabric.model import compiled

pytestmark = pytest.mark.processes  # a Python child that simulates in virtual time, no network (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
_PROBE = (
    "import json, sys; import uet.fabric.model as m; from uet.sim.scenario import simulate; "
    "r = simulate({'workload': 'incast', 'endpoints': 5, 'message_bytes': 65536, 'messages': 2, 'seed': 3}, "
    "{'kind': 'fat_tree'}); r.pop('timing', None); r.pop('elapsed_s', None); "
    "print(json.dumps({'compiled': m.COMPILED, 'switch': m.switch.__file__, 'result': r}, sort_keys=True))"
)


def test_pure_python_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compiled.ENV, raising=False)
    path: list[str] = ["pkg"]
    assert compiled.enable(path) is False
    assert path == ["pkg"]
    monkeypatch.setenv(compiled.ENV, "0")
    assert compiled.enable(path) is False
    assert path == ["pkg"]


def _fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, digest: str | None) -> list[str]:
    monkeypatch.setattr(compiled, "COMPILED_DIR", tmp_path)
    monkeypatch.setenv(compiled.ENV, "1")
    if digest is not None:
        (tmp_path / compiled.DIGEST_FILE).write_text(digest + "\n")
    return ["pkg"]


def test_a_current_build_goes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _fake_build(tmp_path, monkeypatch, compiled.sources_digest())
    for m in compiled.MODULES:
        (tmp_path / f"{m}{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    assert compiled.enable(path) is True
    assert path == [str(tmp_path), "pkg"]


def test_a_build_for_another_python_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _fake_build(tmp_path, monkeypatch, compiled.sources_digest())
    for m in compiled.MODULES:
        (tmp_path / f"{m}.cpython-399-x86_64-linux-gnu.so").write_bytes(b"")
    with pytest.warns(UserWarning, match="another Python"):
        assert compiled.enable(path) is False
    assert path == ["pkg"]


def test_a_stale_build_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _fake_build(tmp_path, monkeypatch, "0" * 64)
    with pytest.warns(UserWarning, match="stale"):
        assert compiled.enable(path) is False
    assert path == ["pkg"]


def test_a_missing_build_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _fake_build(tmp_path, monkeypatch, None)
    with pytest.warns(UserWarning, match="no compiled build"):
        assert compiled.enable(path) is False
    assert path == ["pkg"]


def test_the_digest_follows_every_compiled_source() -> None:
    names = [p.name for p in compiled.sources()]
    assert "switch.py" in names and "port.py" in names and "compiled.py" not in names
    assert all(p.is_file() for p in compiled.sources())
    assert len(compiled.sources_digest()) == 64


def _current() -> bool:
    """A build from the current sources for this interpreter is there."""
    path: list[str] = []
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        mp.setenv(compiled.ENV, "1")
        warnings.simplefilter("ignore")
        return compiled.enable(path)


def _run(flag: str) -> dict[str, object]:
    env = {**os.environ, compiled.ENV: flag}
    out = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", _PROBE],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    res: dict[str, object] = json.loads(out)
    return res


@pytest.mark.after_compiled_build  # CI builds beside the tests: this waits for it (tests/conftest.py)
def test_compiled_build_gives_the_same_run() -> None:
    if not _current():
        if not os.environ.get("UET_HEAVY_TESTS"):
            pytest.skip("no current compiled build (.ci/build-compiled; UET_HEAVY_TESTS=1 builds it)")
        if shutil.which("cc") is None:
            pytest.skip("no C compiler")
        env = {**os.environ, "PYTHON": sys.executable}  # built for the Python running the tests
        subprocess.run([str(ROOT / ".ci" / "build-compiled")], env=env, check=True, timeout=1800)
    pure, native = _run("0"), _run("1")
    assert pure["compiled"] is False and str(pure["switch"]).endswith(".py")
    assert native["compiled"] is True and str(native["switch"]).endswith(".so")
    assert json.dumps(native["result"], sort_keys=True) == json.dumps(pure["result"], sort_keys=True)
