"""``uet-peer --config`` and ``uet-conformance --config`` read a peer profile through the bounded
reader every tool uses (uet.config_file, issue 29 item 14): a bad file or value is one
``tool: error:`` line and exit status 2, never a traceback, and a device is read no further than
the size limit. The tools run in this process (their ``main``) and stop before any socket opens."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bad_files import CORPUS, _check, _run

pytestmark = pytest.mark.in_memory  # the tools stop at the bad file, before any socket opens

#: profile-specific mistakes on top of the shared corpus of bad files
PROFILE_CORPUS: dict[str, bytes] = {
    **{
        k: v
        for k, v in CORPUS.items()
        if k in ("non-utf8.toml", "binary.toml", "nul.toml", "deep.toml", "bad-toml.toml", "too-large.toml")
    },  # fmt: skip
    "size-string.toml": b'[[region]]\nkey = 1\nsize = "big"\n',
    "size-huge.toml": b"[[region]]\nkey = 1\nsize = 100000000000000\n",
    "key-negative.toml": b"[[region]]\nkey = -1\nsize = 16\n",
    "key-float.toml": b"[[region]]\nkey = 1.5\nsize = 16\n",
    "region-not-array.toml": b"region = 3\n",
    "receive-tag-string.toml": b'[[receive]]\nsize = 16\ntag = "x"\n',
    "receive-size-list.toml": b"[[receive]]\nsize = [1]\n",
    "receive-truncate-int.toml": b"[[receive]]\nsize = 16\ntruncate = 7\n",
}

TOOLS = [("peer", ["127.0.0.1"]), ("conformance", ["--target", "127.0.0.1"])]


@pytest.mark.parametrize("key", sorted(PROFILE_CORPUS))
def test_bad_profile_files_are_one_line_and_exit_2(tmp_path: Path, key: str) -> None:
    f = tmp_path / key
    f.write_bytes(PROFILE_CORPUS[key])
    for name, extra in TOOLS:
        _check(_run(name, *extra, "--config", str(f)), name)


def test_a_device_as_profile_is_read_no_further_than_the_limit() -> None:
    for name, extra in TOOLS:
        code, _out, err = _run(name, *extra, "--config", "/dev/zero")
        assert code == 2 and "larger than" in err, err
