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


def test_every_api_example_checks_what_it_shows() -> None:
    """The examples assert their results (a wrong README result fails the test, not only an
    exception): each one checks several of the values it demonstrates."""
    for block in _blocks():
        assert block.count("assert ") >= 3, block[:200]


def _other_python_blocks() -> list[str]:
    text = README.read_text()
    start, end = text.index("<!-- api:start -->"), text.index("<!-- api:end -->")
    return re.findall(r"```python\n(.*?)```", text[:start] + text[end:], re.S)


def test_wire_layout_example_builds_a_working_codec() -> None:
    """The README's one-declaration example: both generated codecs agree on its bytes."""
    (block,) = [b for b in _other_python_blocks() if "Layout(" in b]
    ns: dict = {}
    exec(compile(block, "README.md layout example", "exec"), ns)
    uud = ns["UUD"]
    values = {"type": 5, "next_hdr": 3, "flags": 0x41}
    fast = uud.encode(tuple(values.values()))  # fast codec: a tuple of the fields in order
    assert len(fast) == 4
    assert fast == bytes([5 << 3 | 3 >> 1, (3 & 1) << 7 | 0x41, 0, 0])  # type:5 next_hdr:4 flags:7 R:16
    assert uud.build(tuple(values.values())) == fast  # construct builds the same bytes
    assert uud.parse(fast) == uud.decode(fast)  # and both decoders agree
    assert uud.unpack(fast) == tuple(values.values())
