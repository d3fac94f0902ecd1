"""A sweep of bad files and out-of-range values across every tool that reads a scenario or
topology file (issue 29 item 14): each answer is one ``tool: error:`` line and exit status 2,
never a traceback; a device such as ``/dev/zero`` is read no further than the size limit
(uet.config_file). Each case stops before any run starts; the tools run in this
process (their ``main``), as a user's command line would call them."""

from __future__ import annotations

from pathlib import Path

import pytest

#: file name -> contents (bytes); every one of them is a mistake
CORPUS: dict[str, bytes] = {
    "non-utf8.toml": b'[run]\nworkload = "incast"\n# \xff\xfe\n',
    "binary.toml": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)),
    "nul.toml": b"[run]\x00\n",
    "deep.toml": b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "bad-toml.toml": b"[run\n",
    "too-large.toml": b"# " + b"x" * (1 << 20) + b"\n",
    "zero-rate.toml": b"[run]\nrate_bps = 0\n",
    "huge-size.toml": b"[run]\nmessage_bytes = 100000000000000\n",
    "inf-seed.toml": b"[run]\nseed = inf\n",
    "many-messages.toml": b"[run]\nmessages = 1000000000000\n",
    "negative-endpoints.toml": b"[run]\nendpoints = -3\n",
    "topology-binary.toml": b"[topology]\nkind = \xff\n",
}

#: how each tool is handed a file: as its scenario, or as its topology
TOOLS = [("run", []), ("run", ["--engine", "sim"]), ("sim", [])]


def _run(name: str, *args: str):
    """The tool's ``main`` in this process (an uncaught exception, the traceback of a real run,
    fails the test by itself): ``(exit status, stdout, stderr)``."""
    import contextlib
    import importlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = importlib.import_module(f"uet.tools.{name}").main(list(args))
    return code, out.getvalue(), err.getvalue()


def _check(r: tuple[int, str, str], name: str) -> None:
    code, _out, err = r
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    assert err.count("\n") == 1 and err.startswith(f"uet-{name}: error: "), err


@pytest.mark.parametrize("key", sorted(CORPUS))
def test_bad_scenario_files_are_one_line_and_exit_2(tmp_path: Path, key: str) -> None:
    f = tmp_path / key
    f.write_bytes(CORPUS[key])
    for name, extra in TOOLS:
        _check(_run(name, str(f), *extra), name)


@pytest.mark.parametrize("key", ["non-utf8.toml", "binary.toml", "deep.toml", "too-large.toml"])
def test_bad_topology_files_are_one_line_and_exit_2(tmp_path: Path, key: str) -> None:
    f = tmp_path / key
    f.write_bytes(CORPUS[key])
    for name, extra in [("run", ["--topology", str(f)]), ("sim", ["--topology", str(f)]),
                        ("fabric", ["--topology", str(f)])]:  # fmt: skip
        _check(_run(name, *extra), name)


def test_a_device_is_read_no_further_than_the_limit() -> None:
    """``/dev/zero`` as a scenario: read without limit before (5.4 GB in 90 s)."""
    from uet.config_file import MAX_CONFIG_BYTES, ConfigFileError, read_toml

    with pytest.raises(ConfigFileError, match=f"larger than {MAX_CONFIG_BYTES:,} bytes"):
        read_toml("/dev/zero")
    _check(_run("sim", "/dev/zero"), "sim")


@pytest.mark.parametrize("argv", [["--messages", "1000000000000"], ["--size", "100TB"]])
def test_out_of_range_options_are_refused(argv: list[str]) -> None:
    _check(_run("sim", *argv), "sim")
