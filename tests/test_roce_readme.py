"""The README's RoCEv2 example runs as written and completes both operations at both ends."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_roce_example_runs() -> None:
    text = README.read_text()
    section = text[text.index("## RoCEv2 comparison mode") :]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m is not None
    code = m.group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})  # noqa: S102
    printed = out.getvalue()
    assert "MessageReceived(handle=1, data=b'hello'" in printed and "imm=7, write_length=4" in printed
    assert "SendCompleted(handle=1), WriteCompleted(handle=2)" in printed
