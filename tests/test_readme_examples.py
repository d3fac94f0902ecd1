"""The README's API examples run (issue 4 item 5): every ```python block between the
``<!-- api:start -->`` and ``<!-- api:end -->`` markers is executed as it is written, except that
the fixed demo addresses 127.0.0.2 / 127.0.0.3 are replaced by fresh loopback addresses so the
test never collides with other FEPs on this machine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from uet.link import loopback_addresses

README = Path(__file__).resolve().parent.parent / "README.md"


def _blocks() -> list[str]:
    text = README.read_text()
    start, end = text.index("<!-- api:start -->"), text.index("<!-- api:end -->")
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


def test_readme_has_api_examples() -> None:
    blocks = _blocks()
    assert len(blocks) >= 2
    joined = "\n".join(blocks)
    for name in ("Endpoint.open", "register", ".send(", ".recv(", ".write(", ".read(", ".atomic("):
        assert name in joined


@pytest.mark.parametrize("index", range(len(_blocks())))
def test_readme_example_runs(index: int) -> None:
    code = _blocks()[index]
    a, b = loopback_addresses(2)
    code = code.replace("127.0.0.2", a).replace("127.0.0.3", b)
    exec(compile(code, f"README.md api example {index + 1}", "exec"), {"__name__": "readme_example"})
