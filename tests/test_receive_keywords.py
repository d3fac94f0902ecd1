"""The sans-I/O cores take a received datagram with one keyword convention: the fields of
:class:`uet.fep.events.Datagram` (``source``, ``ecn``, ``trimmed``, ``last_hop``,
``source_port``) after ``(data, now)``. ``PdsCore`` echoes ``source_port`` (the request's
entropy) in its ACK and still accepts the old name ``entropy=`` with a DeprecationWarning."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pds_harness import ses_small

from uet.fep import FepCore
from uet.fep.events import Datagram
from uet.pds import Mode, PdsCore

A, B = "10.0.0.1", "10.0.0.2"
PORT = 0x5A5A


def _keywords(fn: Callable[..., Any]) -> list[str]:
    return [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]


@pytest.mark.parametrize("core", [PdsCore, FepCore])
def test_receive_datagram_takes_the_datagram_fields_by_name(core: type[PdsCore] | type[FepCore]) -> None:
    params = list(inspect.signature(core.receive_datagram).parameters)
    assert params[1:3] == ["data", "now"]
    assert _keywords(core.receive_datagram)[:5] == [f for f in Datagram._fields if f != "data"]


def _request() -> bytes:
    a = PdsCore(A)
    a.submit(B, Mode.RUD, 1, ses_small(), b"x", token=0, som=True, eom=True, now=0)
    ((data, dst, _ent),) = a.datagrams_to_send(0)
    assert dst == B
    return data


def _ack_entropy(**kw: Any) -> int:
    b = PdsCore(B)
    b.receive_datagram(_request(), 10, source=A, **kw)
    out = b.datagrams_to_send(10)  # a single-packet message: its ACK is due at once
    assert len(out) == 1 and out[0][1] == A
    return out[0][2]


def test_pds_echoes_source_port_in_its_ack() -> None:
    assert _ack_entropy(source_port=PORT) == PORT
    assert _ack_entropy() == PdsCore(B).config.control_entropy


def test_pds_old_entropy_keyword_warns_and_still_works() -> None:
    with pytest.deprecated_call(match="source_port"):
        assert _ack_entropy(entropy=PORT) == PORT
