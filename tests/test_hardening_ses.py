"""Hardening: the SES of one FEP fed hostile requests through the PDS ``on_deliver`` hook.

Standard under test (architecture.md "Principles" 5; behaviour.md §6.3, §6.5, §6.9): whatever the
PDS hands over — a next-header value of any kind, an SES header truncated, extended or with any
field at any value, a payload of any length, in any mode, from any peer — the SES answers with a
response or asks for a NACK (:class:`uet.pds.SesNack`, a transient shortage), and nothing else
escapes; RMA and atomics never touch memory outside the registered region; the engines' timers
and event queues keep working; and a genuine message afterwards is delivered intact.

The FEP is configured as :class:`uet.endpoint.Endpoint` configures it (fast path, default
resource, read data in ACKs), with one region registered for every remote access. Requests are
built from the wire layouts (``STANDARD`` SOM/non-SOM headers with hypothesis-chosen fields, most
of them aimed at the real JobID / PIDonFEP / key so they get past the first checks) and then
mutated (bytes overwritten, header cut or extended).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uet.pds import Mode, SesNack
from uet.pds.events import Delivery
from uet.ses import SesFep
from uet.ses.initiator import InitiatorConfig
from uet.ses.memory import Access
from uet.ses.message import MessageConfig
from uet.ses.target import TargetConfig
from uet.wire.pds import NextHeader
from uet.wire.ses import STANDARD, SesFlag, SesOpcode

pytestmark = pytest.mark.in_memory  # SES cores in memory; uet.endpoint only named in the docstring

JOB, PID, RI = 0x42, 3, 0
KEY = 0x0000_1111_2222_3333
REGION = 4096
GUARD = 512
PEERS = ["10.0.0.1", "10.0.0.3", "10.0.0.4"]
GOOD_PEER, GOOD_INIT = "10.9.9.9", 0x0A090909


def _fep() -> tuple[SesFep, bytearray]:
    fep = SesFep(
        "10.0.0.2",
        initiator=InitiatorConfig(initiator_id=0x0A000002, max_payload=1024, local_pid=PID, local_index=RI),
        target=TargetConfig(max_payload=1024, max_ack_data=1024),
        rng=random.Random(1),
        fast=MessageConfig(payload_size=1024, max_partial=8, max_partial_bytes=1 << 20, reassembly_timeout_ns=10**6),
        default=(PID, RI, JOB),
    )
    mem = bytearray(b"\xa5" * GUARD + bytes(REGION) + b"\x5a" * GUARD)
    fep.memory.register(memoryview(mem)[GUARD : GUARD + REGION], Access.ALL | Access.IDEMPOTENT_SAFE, key=KEY)
    return fep, mem


_u = st.integers
_OPS = [int(o) for o in SesOpcode] + [18, 31, 63]


@st.composite
def _request(draw: st.DrawFn) -> tuple[str, int, int, bytes, bytes]:
    """(peer, mode, next_hdr, ses header, payload) of one hostile request."""
    som = draw(st.booleans())
    fields = {
        "opcode": draw(st.sampled_from(_OPS)),
        "version": draw(st.sampled_from([0, 0, 0, 1, 3])),
        "flags": draw(_u(0, 63)),
        "message_id": draw(_u(0, 3)),
        "ri_generation": draw(st.sampled_from([0, 0, 1, 255])),
        "job_id": draw(st.sampled_from([JOB, JOB, 0, 0xFFFFFF])),
        "pid_on_fep": draw(st.sampled_from([PID, PID, 0, 0xFFF])),
        "resource_index": draw(st.sampled_from([RI, RI, 1, 0xFFF])),
        "buffer_offset": draw(st.sampled_from([0, 8, REGION - 8, REGION - 1, REGION, REGION + 8, 2**63, 2**64 - 8])),
        "initiator": draw(st.sampled_from([0x0A000001, 0, 0xFFFFFFFF])),
        "match_bits": draw(st.sampled_from([KEY, KEY, 0, 7, 2**64 - 1])),
        "request_length": draw(st.sampled_from([0, 1, 8, 100, 1024, 1025, 4096, 2**32 - 1])),
    }
    if som:
        fields["header_data"] = draw(_u(0, 2**64 - 1))
        fields["flags"] |= SesFlag.SOM
    else:
        fields["flags"] &= ~SesFlag.SOM
        fields["payload_length"] = draw(st.sampled_from([0, 1, 8, 100, 1024, 16383]))
        fields["message_offset"] = draw(st.sampled_from([0, 1, 8, 1024, 4096, 2**32 - 1]))
    layout = STANDARD[(int(som), "none")]
    ses = bytearray(layout.encode(layout.make(**fields)))
    for i, v in draw(st.lists(st.tuples(_u(0, len(ses) - 1), _u(0, 255)), max_size=2)):
        ses[i] = v
    shape = draw(_u(0, 9))
    if shape == 0:
        ses = ses[: draw(_u(0, len(ses) - 1))]
    elif shape == 1:
        ses += draw(st.binary(min_size=1, max_size=40))  # extension-sized junk (atomic, rendezvous...)
    nh = draw(st.sampled_from([int(NextHeader.STANDARD)] * 6 + [int(n) for n in NextHeader] + [7, 15]))
    payload = draw(st.sampled_from([b"", b"\x01" * 8, b"\x02" * 100, b"\x03" * 1024, b"\x04" * 1500]))
    mode = draw(st.sampled_from([Mode.RUD, Mode.ROD, Mode.RUDI, Mode.UUD]))
    return draw(st.sampled_from(PEERS)), int(mode), nh, bytes(ses), payload


@pytest.mark.unit_each  # long: a unit of work of its own, started early (tests/conftest.py)
@settings(max_examples=100)
@given(st.lists(_request(), min_size=1, max_size=25), st.booleans())
def test_hostile_requests_answer_or_nack_and_memory_stays_in_bounds(reqs, post_first: bool) -> None:
    fep, mem = _fep()
    posted = []
    if post_first:
        posted.append(fep.post_recv(bytearray(64), tagged=False))
        posted.append(fep.post_recv(bytearray(2048), tagged=True, tag=0, ignore=2**64 - 1))
    now = 1_000
    for psn, (peer, mode, nh, ses, payload) in enumerate(reqs):
        fep.now = now
        d = Delivery(peer, Mode(mode), 7, psn, nh, ses, payload, 0, False)
        try:
            r = fep.on_deliver(d)
        except SesNack:
            r = None
        assert r is None or (isinstance(r, tuple) and isinstance(r[0], int) and isinstance(r[1], (bytes, bytearray)))
        now += 100_000
    while fep.next_event() is not None:
        pass
    fep.packets_to_send()
    fep.handle_timer(now + 10**10)  # every reassembly expires
    fep.expire(now + 10**10)
    while fep.next_event() is not None:
        pass
    assert mem[:GUARD] == b"\xa5" * GUARD and mem[-GUARD:] == b"\x5a" * GUARD  # nothing outside the region

    # A genuine single-packet message from a peer the fuzz never used still arrives intact (on
    # the unexpected list: the receives posted at the start are withdrawn if still there).
    for p in posted:
        fep.cancel_recv(p)
    fep.now = now + 2 * 10**10
    hdr = STANDARD[(1, "none")].make(
        opcode=SesOpcode.SEND, flags=SesFlag.SOM | SesFlag.EOM | SesFlag.REL, message_id=9, job_id=JOB,
        pid_on_fep=PID, resource_index=RI, initiator=GOOD_INIT, request_length=5,
    )  # fmt: skip
    before = len(fep.unexpected_messages)
    d = Delivery(
        GOOD_PEER, Mode.RUD, 8, 0, int(NextHeader.STANDARD), STANDARD[(1, "none")].encode(hdr), b"hello", 0, False
    )
    r = fep.on_deliver(d)
    assert r is not None
    got = [m for m in fep.unexpected_messages if m.source == GOOD_PEER]
    assert len(fep.unexpected_messages) == before + 1 and len(got) == 1 and bytes(got[0].data) == b"hello"
