"""Every shell command block of the README runs as written (issue 14), with small sizes.

Each ```sh block is run line by line, in order, in one scratch folder (so the decode examples
read the pcaps the fabric example wrote), except a block preceded by an ``<!-- illustrative
... -->`` comment or by a section marker ``<!-- NAME:start -->`` (a block run as a whole script
by its own test, e.g. the conformance section's in tests/test_conformance.py). The commands that
run in virtual time alone (:func:`virtual`) are a test of their own, run in order beside the serial
unit (tests/conftest.py), in a scratch folder of their own. A command is run
as written, ``.venv/bin/`` resolved to this interpreter's scripts, with options appended that
only make it smaller (the last occurrence of an option wins in argparse) and fresh loopback
addresses for the two-process tools. Its comment may state the exit status (``exit status 1``,
default 0) or that it ``runs until Ctrl-C`` (it is interrupted once it said it is ready, and must
exit 0). Every command must print something, ``--json`` output must be JSON, and no command may
print a Python traceback.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from live_options import FAST

from uet.link import loopback_addresses

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent

#: options appended to make a command small (prefix of the command → extra arguments)
SMALL = [
    # live runs undilated (tests/live_options.py), except the main job (MAIN_JOB), which keeps the
    # automatic factor it is run with
    ("uet-run", ["--messages", "1", "--size", "16KiB", *FAST]),
    ("uet-bench pair", ["--size", "1MiB", "--rounds", "1", "--addresses", "{addr}"]),
    ("uet-bench rtt", ["--count", "50", "--addresses", "{addr}"]),
    ("uet-bench core", ["--packets", "500", "--repeat", "1"]),
    ("uet-bench codec", ["--number", "200", "--repeat", "1"]),
    ("uet-bench matrix", ["--seeds", "1", "--packets", "200"]),
    ("uet-bench sim", ["--hosts", "8", "--size", "16KiB", "--repeat", "1"]),
    ("uet-sim --suite", ["--size", "64KiB", "--max-hosts", "16"]),
    ("uet-sim", ["--size", "4KiB", "--messages", "1"]),
    ("uet-bench soak", ["--minutes", "0.03", "--every", "1"]),
    ("uet-demo", ["--size", "1MiB", "--addresses", "{addr}"]),
]


#: the README's first command (the main job): run with the automatic time-dilation factor, as written
MAIN_JOB = ".venv/bin/uet-run --transport both"


def commands() -> list[tuple[str, str]]:
    """(command, comment) of every line of every runnable ```sh block, in README order."""
    text = README.read_text()
    out = []
    for m in re.finditer(r"(<!--[^>]*-->\n)?```sh\n(.*?)```", text, re.S):
        marker = m.group(1) or ""
        if "illustrative" in marker or ":start -->" in marker:  # shown only / run by its own test
            continue
        for line in m.group(2).replace("\\\n", " ").splitlines():  # continuation lines joined
            cmd, _, comment = line.partition(" #")
            if cmd.strip():
                out.append((cmd.strip(), comment.strip()))
    return out


def _argv(cmd: str) -> list[str]:
    argv = shlex.split(cmd)
    argv[0] = str(BIN / Path(argv[0]).name)
    head = " ".join([Path(argv[0]).name, *argv[1:2]])
    addr = ",".join(loopback_addresses(2))
    for prefix, extra in SMALL:
        if head.startswith(prefix) or Path(argv[0]).name == prefix:
            if cmd == MAIN_JOB and extra[-len(FAST) :] == FAST:
                extra = extra[: -len(FAST)]
            argv += [x.replace("{addr}", addr) for x in extra]
            break
    if (
        Path(argv[0]).name == "uet-run" and "--hosts" in argv
    ):  # uet-run's ranks on loopback: fresh addresses, as many as written
        i = argv.index("--hosts") + 1
        argv[i] = ",".join(loopback_addresses(len(argv[i].split(","))))
    return argv


def test_every_long_command_is_made_small() -> None:
    """A README command of a subcommand that runs long by default has an entry in SMALL."""
    for cmd, _ in commands():
        argv = shlex.split(cmd)
        if Path(argv[0]).name == "uet-bench":
            assert any(f"uet-bench {argv[1]}" == p for p, _ in SMALL), f"add {argv[1]!r} to SMALL"


def test_readme_has_runnable_command_blocks() -> None:
    assert commands()[0][0] == MAIN_JOB and "--dilation" not in _argv(MAIN_JOB)
    assert _argv("uet-run")[-2:] == FAST
    names = {shlex.split(c)[0].rsplit("/", 1)[-1] for c, _ in commands()}
    assert {"uet-run", "uet-fabric", "uet-demo", "uet-bench", "uet-decode"} <= names
    assert all("..." not in c for c, _ in commands())  # no elided example


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("readme")
    (d / "tools").symlink_to(ROOT / "tools")  # the scenario example's relative path
    return d


def virtual(cmd: str) -> bool:
    """Whether a README command runs in virtual time alone: the simulator (uet-sim, ``--engine sim``,
    ``uet-bench sim``) and the decoding of its captures (caps/). No socket, no live engine: those run
    beside the serial unit (tests/conftest.py), in a scratch folder of their own on that worker."""
    argv = shlex.split(cmd)
    tool = Path(argv[0]).name
    if tool == "uet-decode":
        return any(a.startswith("caps/") for a in argv)
    sim = tool == "uet-sim" or (tool == "uet-bench" and argv[1:2] == ["sim"])
    return sim or (tool == "uet-run" and "--engine sim" in " ".join(argv))


def _indices(live: bool) -> list[int]:
    return [i for i, (c, _) in enumerate(commands()) if virtual(c) != live]


@pytest.mark.parametrize("index", _indices(live=True), ids=[commands()[i][0] for i in _indices(live=True)])
def test_readme_command_runs(index: int, scratch: Path) -> None:
    run_command(index, scratch)


@pytest.mark.processes
@pytest.mark.parametrize("index", _indices(live=False), ids=[commands()[i][0] for i in _indices(live=False)])
def test_readme_virtual_command_runs(index: int, scratch: Path) -> None:
    run_command(index, scratch)


def run_command(index: int, scratch: Path) -> None:
    """Run the README's command ``index`` as the module docstring says, in ``scratch``."""
    cmd, comment = commands()[index]
    argv = _argv(cmd)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    m = re.search(r"exit status (\d+)", comment)
    expect = int(m.group(1)) if m else 0
    if "until Ctrl-C" in comment:
        p = subprocess.Popen(argv, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout is not None
            first = p.stdout.readline()  # the ready line: the command is up
            p.send_signal(signal.SIGINT)
            rest, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        out = first + rest
        rc = p.returncode
    else:
        r = subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=300)
        out, err, rc = r.stdout, r.stderr, r.returncode
    assert "Traceback" not in err, err[-3000:]
    assert rc == expect, (cmd, rc, err[-2000:])
    assert out.strip(), (cmd, err[-2000:])
    if "--json" in argv:
        for line in out.splitlines():
            assert isinstance(json.loads(line), dict)
        first = json.loads(out.splitlines()[0])
        if argv[0].endswith("uet-run"):
            assert first["ok"] is True and first["flows"] and all(f["intact"] for f in first["flows"])
        if "pair" in argv:
            assert first["intact"] is True
