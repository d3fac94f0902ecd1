"""The hand-written codecs of :mod:`uet.wire.pdsfast` against the generic codecs of their layouts
(:mod:`uet.wire.layout`), field for field: the same bytes for every value that fits, the same
:class:`EncodeError` (message included) for every integer that does not, the same tuple from any
bytes, bytearray or memoryview, and the same :class:`DecodeError` for a short buffer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_strategies import layout_values

from uet.errors import DecodeError, EncodeError
from uet.wire import pdsfast
from uet.wire.layout import Layout
from uet.wire.pds import ACK_CC, ACK_CCX, CC_REQUEST, CONTROL, REQUEST

ENCODERS: list[tuple[Callable[..., bytes], Layout]] = [
    (pdsfast.request, REQUEST),
    (pdsfast.cc_request, CC_REQUEST),
    (pdsfast.ack_cc_nscc, ACK_CC[(False, "nscc")]),
    (pdsfast.ack_ccx_nscc, ACK_CCX[(False, "nscc")]),
    (pdsfast.control, CONTROL),
]
DECODERS: list[tuple[Callable[..., tuple[int, ...]], Layout]] = [
    (pdsfast.unpack_cc_request, CC_REQUEST),
    (pdsfast.unpack_ack_cc_raw, ACK_CC[(False, "raw")]),
    (pdsfast.unpack_control, CONTROL),
]
by_encoder = pytest.mark.parametrize(("fast", "layout"), ENCODERS, ids=[lay.name for _, lay in ENCODERS])
by_decoder = pytest.mark.parametrize(("fast", "layout"), DECODERS, ids=[lay.name for _, lay in DECODERS])

#: integers of every size a caller could pass: in range, one past, negative, beyond 64 bits
hostile = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([-1, 0, 1, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, -0x8001, 0xFFFF, 0x10000]),
    st.sampled_from([0xFFFFFF, 0x1000000, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 2**64, -(2**63) - 1]),
)


def outcome(f: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """What ``f(*args)`` gives: its value, or the error's type and message."""
    try:
        return ("ok", f(*args))
    except (EncodeError, DecodeError) as e:
        return (type(e).__name__, str(e))


@by_encoder
@settings(max_examples=200)
@given(data=st.data())
def test_encoder_equals_layout_on_valid_values(fast: Callable[..., bytes], layout: Layout, data: st.DataObject) -> None:
    values = data.draw(layout_values(layout))
    assert fast(*values) == layout.encode(tuple(values))


@by_encoder
@settings(max_examples=300)
@given(data=st.data())
def test_encoder_equals_layout_on_hostile_integers(
    fast: Callable[..., bytes], layout: Layout, data: st.DataObject
) -> None:
    """Sub-word fields are masked, whole-word ones range-checked by ``struct``: both codecs alike."""
    values = tuple(data.draw(hostile) for _ in layout.field_names)
    got = outcome(fast, *values)
    assert got == outcome(layout.encode, values)


@by_encoder
def test_encoder_error_names_the_field(fast: Callable[..., bytes], layout: Layout) -> None:
    values = list(layout.make())
    values[3] = -(2**40)  # the word after the prologue: a whole struct field in every layout
    with pytest.raises(EncodeError) as e:
        fast(*values)
    assert e.value.field == layout.field_names[3]


@by_decoder
@settings(max_examples=300)
@given(blob=st.binary(min_size=0, max_size=80), kind=st.sampled_from([bytes, bytearray, memoryview]))
def test_decoder_equals_layout(fast: Callable[..., tuple[int, ...]], layout: Layout, blob: bytes, kind: type) -> None:
    """Any bytes (short ones included: the layout's DecodeError), as any buffer type."""
    buf = kind(blob)
    got = outcome(fast, buf)
    want = outcome(layout.unpack, buf)
    assert got == want
    if len(blob) >= layout.size:
        assert got[0] == "ok" and got[1] == tuple(layout.decode(bytes(blob)))


@by_decoder
@settings(max_examples=100)
@given(data=st.data())
def test_decoder_round_trip(fast: Callable[..., tuple[int, ...]], layout: Layout, data: st.DataObject) -> None:
    values = data.draw(layout_values(layout))
    assert fast(layout.encode(tuple(values))) == tuple(values)


def test_every_hot_codec_is_compared() -> None:
    """A codec added to the module gets its comparison here."""
    named = {f.__name__ for f, _ in ENCODERS + DECODERS}
    assert named == set(pdsfast.__all__)


_CHILD = """
import json, random
from uet.wire import pdsfast
from uet.wire.pds import ACK_CC, ACK_CCX, CC_REQUEST, CONTROL, REQUEST
from uet.errors import DecodeError, EncodeError
enc = [(pdsfast.request, REQUEST), (pdsfast.cc_request, CC_REQUEST), (pdsfast.ack_cc_nscc, ACK_CC[(False, "nscc")]),
       (pdsfast.ack_ccx_nscc, ACK_CCX[(False, "nscc")]), (pdsfast.control, CONTROL)]
dec = [(pdsfast.unpack_cc_request, CC_REQUEST), (pdsfast.unpack_ack_cc_raw, ACK_CC[(False, "raw")]),
       (pdsfast.unpack_control, CONTROL)]
def outcome(f, *a):
    try:
        r = f(*a)
        return r.hex() if isinstance(r, bytes) else list(r)
    except (EncodeError, DecodeError) as e:
        return type(e).__name__ + ": " + str(e)
rng = random.Random(28)
widths = [8, 16, 24, 31, 32, 33, 63, 64, 65, 70]
out = {"compiled": type(pdsfast.cc_request).__name__, "checks": []}
for f, lay in enc:
    for _ in range(300):
        v = tuple(rng.choice([1, -1, 1]) * rng.getrandbits(rng.choice(widths)) for _ in lay.field_names)
        out["checks"].append([outcome(f, *v), outcome(lay.encode, v)])
for f, lay in dec:
    for n in range(lay.size + 8):
        b = rng.randbytes(n)
        out["checks"].append([outcome(f, b), outcome(lay.unpack, b)])
        out["checks"].append([outcome(f, bytearray(b)), outcome(f, memoryview(b))])
print(json.dumps(out))
"""


@pytest.mark.processes  # a Python child, no network (tests/conftest.py)
@pytest.mark.after_compiled_build  # CI builds beside the tests: this waits for it (tests/conftest.py)
def test_compiled_codecs_equal_the_layouts() -> None:
    """The compiled module (what a run with ``UET_COMPILED=1`` calls) against the generic codecs,
    and against itself run as Python."""
    from compiled_child import have_current_build, run_child

    if not have_current_build():
        pytest.skip("no current compiled build (.ci/build-compiled)")

    pure, native = run_child(_CHILD, "0", 300), run_child(_CHILD, "1", 300)
    assert pure["compiled"] == "function" and native["compiled"] != "function"
    assert all(a == b for a, b in native["checks"])
    assert native["checks"] == pure["checks"]
