"""The optional compiled build of the simulator's per-packet path (uet.compiled: the switch model
and the endpoint side): opt-in, refused when stale, and the same figures as the pure-Python
reference.

The comparison runs a few small simulations (the CC algorithms, the RUD fast paths, TSS, RoCEv2)
twice in child processes, pure Python and compiled, and wants the same results byte for byte. It
needs a build (``.ci/build-compiled``: mypyc and a C compiler, a few CPU-minutes): with
``UET_HEAVY_TESTS=1`` a missing or stale one is built first; otherwise the test skips when none is
current.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

import pytest
from compiled_child import have_current_build, run_child

from uet import compiled

pytestmark = pytest.mark.processes  # a Python child that simulates in virtual time, no network (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
_PROBE = """
import json
import uet.fabric.model as m, uet.pds.core as pds
from uet.sim.scenario import simulate
run = {'workload': 'incast', 'endpoints': 5, 'message_bytes': 65536, 'messages': 2, 'seed': 3}
out = {'compiled': m.COMPILED, 'switch': m.switch.__file__, 'pds': pds.__file__, 'results': []}
for settings, endpoint in (
    ({}, {}),
    ({}, {'pds': {'cc': 'nscc', 'lb': 'reps'}}),
    ({}, {'pds': {'cc': 'rccc'}}),
    ({'transport': 'roce'}, {}),
    ({'tss': True}, {}),
    # 1 MiB messages are reassembled in place (a memoryview as Message.data), and an incast's
    # second message arrives before its receive is posted: the fast path copies it from that view
    ({'endpoints': 3, 'message_bytes': 1 << 20}, {}),
):
    r = simulate({**run, **settings}, {'kind': 'fat_tree'}, endpoint)
    r.pop('timing', None)
    r.pop('elapsed_s', None)
    out['results'].append(r)
# a fault schedule (uet.fabric.model.failover, imported by the compiled Fabric when it has faults)
# and the timeline's records (uet.fabric.model.records, imported where the compiled switch and NIC
# build one)
from uet.fabric.model.faults import FaultConfig
faults = FaultConfig(seed=3).with_option('degrade', 'uplinks:2=0.25')
r = simulate({**run, 'workload': 'permutation', 'endpoints': 8, 'messages': 1}, {'kind': 'fat_tree'}, {},
             faults=faults, timeline=True)
r.pop('timing', None)
r.pop('elapsed_s', None)
out['results'].append(r)
print(json.dumps(out, sort_keys=True))
"""


def test_pure_python_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compiled.ENV, raising=False)
    meta = list(sys.meta_path)
    assert compiled.enable() is False
    monkeypatch.setenv(compiled.ENV, "0")
    assert compiled.enable() is False
    assert sys.meta_path == meta and not compiled.active()


def _fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, digest: str | None, suffix: str) -> None:
    monkeypatch.setattr(compiled, "COMPILED_DIR", tmp_path)
    tmp_path.mkdir(exist_ok=True)
    if digest is not None:
        (tmp_path / compiled.DIGEST_FILE).write_text(digest + "\n")
    for m in (*compiled.MODULES, compiled.GROUP + "__mypyc"):
        f = compiled.extension(m, suffix)
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")


def test_a_current_build_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_build(tmp_path, monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    files = compiled.current()
    assert files is not None
    assert Path(files["uet.pds.core"]) == tmp_path / "uet" / "pds" / f"core{EXTENSION_SUFFIXES[0]}"
    assert Path(files["uet.fabric.model.switch"]).is_file() and Path(files["uet.native__mypyc"]).is_file()


def test_a_build_for_another_python_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_build(tmp_path, monkeypatch, compiled.sources_digest(), ".cpython-399-x86_64-linux-gnu.so")
    with pytest.warns(UserWarning, match="another Python"):
        assert compiled.current() is None


def test_a_stale_build_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_build(tmp_path, monkeypatch, "0" * 64, EXTENSION_SUFFIXES[0])
    with pytest.warns(UserWarning, match="stale"):
        assert compiled.current() is None


def _own_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Copies of the compiled modules' sources in ``tmp_path``, which :mod:`uet.compiled` reads
    from now on."""
    copies = {}
    for m in compiled.covered():
        copies[m] = tmp_path / "src" / (m + ".py")
        copies[m].parent.mkdir(exist_ok=True)
        shutil.copyfile(compiled.source(m), copies[m])
    absent = tmp_path / "absent"
    monkeypatch.setattr(compiled, "_source_file", lambda m: str(copies.get(m, absent / (m + ".py"))))
    assert compiled.source("uet.pds.core") == copies["uet.pds.core"]
    assert compiled.covered() == sorted(copies)
    return copies


def test_a_recorded_build_is_not_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sources that still show the size, times, inode and device recorded when they last matched
    the digest are taken as those sources, without hashing them (uet.compiled's stat record)."""
    _own_sources(tmp_path, monkeypatch)
    _fake_build(tmp_path / "build", monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    monkeypatch.setattr(compiled, "SETTLE_NS", -(10**12))  # the copies were just made: settled anyway
    assert compiled.current() is not None
    assert (tmp_path / "build" / compiled.STAT_FILE).is_file()

    def no_hash() -> str:
        raise AssertionError("hashed")

    monkeypatch.setattr(compiled, "sources_digest", no_hash)
    assert compiled.current() is not None


@pytest.mark.parametrize("keep_mtime", [False, True])
def test_a_stale_build_is_refused_after_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_mtime: bool
) -> None:
    """A source changed after the stat record was written (same size, even with its modification
    time set back) is hashed again, and the build is refused as stale."""
    copies = _own_sources(tmp_path, monkeypatch)
    _fake_build(tmp_path / "build", monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    monkeypatch.setattr(compiled, "SETTLE_NS", -(10**12))
    assert compiled.current() is not None
    f = copies["uet.pds.core"]
    st = f.stat()
    text = f.read_bytes()
    f.write_bytes(text.replace(b"def ", b"def_", 1))  # same size, other content
    if keep_mtime:
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.warns(UserWarning, match="stale"):
        assert compiled.current() is None


@pytest.mark.parametrize("module", ["uet.ses.message", "uet.pds.__init__"])
def test_a_build_is_stale_when_a_module_it_was_compiled_against_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    """A module the compiled ones import but that is not compiled itself (``Message``'s
    annotations are checked by the compiled SES when it reads them) is covered by the digest and
    by the stat record: a build older than a change to it is refused as stale."""
    assert module not in compiled.MODULES and module in compiled.covered()
    copies = _own_sources(tmp_path, monkeypatch)
    _fake_build(tmp_path / "build", monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    monkeypatch.setattr(compiled, "SETTLE_NS", -(10**12))
    assert compiled.current() is not None
    assert str(copies[module]).encode() in (tmp_path / "build" / compiled.STAT_FILE).read_bytes()
    f = copies[module]
    f.write_text(f.read_text() + "\n# changed\n")
    with pytest.warns(UserWarning, match="stale"):
        assert compiled.current() is None


def test_a_module_newly_imported_by_a_compiled_one_is_covered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copies = _own_sources(tmp_path, monkeypatch)
    before = compiled.sources_digest()
    assert "uet.tools.cli" not in copies
    extra = tmp_path / "src" / "uet.newmod.py"
    extra.write_text("X = 1\n")
    copies["uet.newmod"] = extra
    f = copies["uet.wire.pds"]
    f.write_text(f.read_text() + "\nfrom uet.newmod import X  # noqa\n")
    assert "uet.newmod" in compiled.covered()
    changed = compiled.sources_digest()
    extra.write_text("X = 2\n")
    assert len({before, changed, compiled.sources_digest()}) == 3


def test_sources_just_changed_are_not_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A source changed less than SETTLE_NS ago could change again within the same tick of the
    filesystem's clock and keep its times: no record is written, the next start hashes again.
    (The window is made wide here: copying and hashing the sources can take longer than
    SETTLE_NS on a loaded machine, which let a record be written.)"""
    _own_sources(tmp_path, monkeypatch)
    _fake_build(tmp_path / "build", monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    monkeypatch.setattr(compiled, "SETTLE_NS", 3600 * 10**9)  # changed within the hour: just now
    assert compiled.current() is not None
    assert not (tmp_path / "build" / compiled.STAT_FILE).exists()


def test_the_start_check_works_on_plain_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check at every start joins and tests plain strings (os.path; a pathlib.Path costs
    several µs to make): a build folder given as a string works throughout, the stat record
    included."""
    _own_sources(tmp_path, monkeypatch)
    _fake_build(tmp_path / "build", monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    monkeypatch.setattr(compiled, "COMPILED_DIR", str(tmp_path / "build"))
    monkeypatch.setattr(compiled, "SETTLE_NS", -(10**12))
    for _ in range(2):  # the second from the stat record
        files = compiled.current()
        assert files is not None and files["uet.pds.core"] == str(compiled.extension("uet.pds.core"))
    assert (tmp_path / "build" / compiled.STAT_FILE).is_file()


def test_a_record_is_used_only_for_its_build_folder_and_suffix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stat record names the build's files for one build folder and one interpreter's suffix:
    under another suffix (another Python reading the same build) the start checks the build's
    files again and refuses them, as it did before there was a record."""
    _own_sources(tmp_path, monkeypatch)
    _fake_build(tmp_path / "build", monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    monkeypatch.setattr(compiled, "SETTLE_NS", -(10**12))
    assert compiled.current() is not None
    assert (tmp_path / "build" / compiled.STAT_FILE).is_file()
    monkeypatch.setattr(compiled, "EXTENSION_SUFFIXES", [".cpython-399-x86_64-linux-gnu.so"])
    monkeypatch.setattr(compiled._extension_file, "__defaults__", (".cpython-399-x86_64-linux-gnu.so",))
    with pytest.warns(UserWarning, match="another Python"):
        assert compiled.current() is None


def test_the_finder_makes_the_spec_file_locations_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled modules' specs are made directly, and are what
    ``importlib.util.spec_from_file_location`` makes of the same files."""
    import importlib.util

    _fake_build(tmp_path, monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    files = compiled.current()
    assert files is not None
    finder = compiled._Finder(files)
    assert finder.find_spec("uet.pds.nope", None) is None
    for name in ("uet.pds.core", "uet.fabric.model.switch", compiled.GROUP + "__mypyc"):
        got = finder.find_spec(name, None)
        want = importlib.util.spec_from_file_location(name, files[name])
        assert got is not None and want is not None and type(got.loader) is type(want.loader)

        def seen(s: Any) -> tuple[Any, ...]:
            return (s.name, s.origin, s.loader.name, s.loader.path, s.has_location, s.cached, s.parent)

        assert seen(got) == seen(want)
        assert got.submodule_search_locations is want.submodule_search_locations is None


def test_a_read_only_build_is_still_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _own_sources(tmp_path, monkeypatch)
    _fake_build(tmp_path / "build", monkeypatch, compiled.sources_digest(), EXTENSION_SUFFIXES[0])
    monkeypatch.setattr(compiled, "SETTLE_NS", -(10**12))
    real_replace = os.replace

    def refuse(src: object, dst: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(os, "replace", refuse)
    assert compiled.current() is not None
    monkeypatch.setattr(os, "replace", real_replace)
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == sorted(["uet", compiled.DIGEST_FILE])


def test_a_missing_build_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compiled, "COMPILED_DIR", tmp_path)
    with pytest.warns(UserWarning, match="no compiled build"):
        assert compiled.current() is None


def test_the_digest_follows_every_compiled_source() -> None:
    names = [str(p.relative_to(ROOT)) for p in compiled.sources()]
    assert "fabric/model/switch.py" in names and "uet/pds/core.py" in names and "uet/sim/engine.py" in names
    assert all(p.is_file() for p in compiled.sources())
    assert len(compiled.sources_digest()) == 64


@pytest.mark.after_compiled_build  # CI builds beside the tests: this waits for it (tests/conftest.py)
def test_compiled_build_gives_the_same_run() -> None:
    if not have_current_build():
        if not os.environ.get("UET_HEAVY_TESTS"):
            pytest.skip("no current compiled build (.ci/build-compiled; UET_HEAVY_TESTS=1 builds it)")
        if shutil.which("cc") is None:
            pytest.skip("no C compiler")
        env = {**os.environ, "PYTHON": sys.executable}  # built for the Python running the tests
        subprocess.run([str(ROOT / ".ci" / "build-compiled")], env=env, check=True, timeout=1800)
    pure, native = run_child(_PROBE, "0", 600), run_child(_PROBE, "1", 600)
    assert pure["compiled"] is False and str(pure["switch"]).endswith(".py") and str(pure["pds"]).endswith(".py")
    assert native["compiled"] is True and str(native["switch"]).endswith(".so") and str(native["pds"]).endswith(".so")
    assert all(r["ok"] for r in pure["results"]), [r.get("errors") for r in pure["results"]]
    assert json.dumps(native["results"], sort_keys=True) == json.dumps(pure["results"], sort_keys=True)
