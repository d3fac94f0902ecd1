"""Every console script's ``--help`` (and each subcommand's) reads as terminal text: no reST
markup (double backquotes, ``:func:``-style roles) and no source paths or module names, which the
descriptions taken from module docstrings used to carry (issue 23 item 4)."""

from __future__ import annotations

import contextlib
import io
import re
import tomllib
from importlib import import_module
from pathlib import Path

import pytest

SCRIPTS = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())["project"]["scripts"]
#: what a help text must not show: reST literals and roles, source paths, dotted module names
MARKUP = re.compile(
    r"``|:(?:func|class|mod|meth|data|attr|obj):`|\b(?:tools|uet|fabric|tests)/[\w/]+\.py\b|\buet\.[a-z_]+\.[a-z_.]+"
)


def help_text(module: str, argv: list[str]) -> str:
    """What ``tool ARGV`` prints (stdout), run through the tool's own entry point."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            rc = import_module(module).main(argv)
        except SystemExit as e:
            rc = e.code
    assert rc == 0, (module, argv, rc)
    return out.getvalue()


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_has_no_markup_or_source_paths(script: str) -> None:
    module = SCRIPTS[script].split(":")[0]
    text = help_text(module, ["--help"])
    assert text.startswith(f"usage: {script}"), text[:200]
    pages = {script: text}
    subs = re.search(r"positional arguments:\n\s+\{([\w,-]+)\}", text)  # a tool with subcommands
    for sub in subs.group(1).split(",") if subs else ():
        pages[f"{script} {sub}"] = help_text(module, [sub, "--help"])
    bad = [f"{name}: {m.group(0)!r} in {line.strip()!r}" for name, page in pages.items() for line in page.splitlines()
           for m in MARKUP.finditer(line)]  # fmt: skip
    assert not bad, "\n".join(bad)


def test_plain_text_strips_rest_markup() -> None:
    from uet.tools.cli import plain_text

    assert plain_text("``uet-sim``: run a ``uet-run`` scenario (:func:`uet.x.y` and :mod:`~a.b`)") == (
        "uet-sim: run a uet-run scenario (uet.x.y and a.b)"
    )
