"""The workloads' end-to-end check (uet.workloads.report.summarize): a flow is intact only when
each of its messages was received exactly once with the digest of the bytes its sender sent — a
message changed in one byte, received twice or not at all shows."""

from __future__ import annotations

from typing import Any

from uet.ses.sink import DigestSink, digest
from uet.workloads import make
from uet.workloads.base import message_data
from uet.workloads.report import summarize

SIZE = 3000


def _reports(received: list[tuple[int, bytes]]) -> dict[str, Any]:
    """The summary of a 2-rank pairs run of two messages whose receiver reports ``received``
    (index, bytes as they arrived, placed into a sink in packets of 1,000 bytes)."""
    wl = make("pairs", 2, message_bytes=SIZE, messages=2, seed=4)
    (f,) = [f for f in wl.flows() if f.src == 0]
    sent = [message_data(4, f.id, i, SIZE) for i in range(2)]
    rx = []
    for index, data in received:
        sink = DigestSink(len(data))
        for at in range(0, len(data), 1000):
            sink[at : at + 1000] = data[at : at + 1000]
        rx.append({"flow": f.id, "index": index, "src": "a", "bytes": len(data), "crc32": sink.digest(), "t": 0.1})
    flow = {"flow": f.id, "crc32": [digest(d) for d in sent], "error": None, "completion_s": 0.1}
    flow.update(bytes=2 * SIZE, messages=2, retransmits=0)
    reports = [{"flows": [flow], "rx": [], "error": None, "check": None}, {"flows": [], "rx": rx, "error": None}]
    res = summarize(wl, ["a", "b"], reports)
    return next(r for r in res["flows"] if r["flow"] == f.id)


def test_a_flow_is_intact_only_with_each_message_once_and_unchanged() -> None:
    good = [bytes(message_data(4, 0, i, SIZE)) for i in range(2)]
    assert _reports([(0, good[0]), (1, good[1])])["intact"]
    changed = bytearray(good[1])
    changed[1234] ^= 0x01
    assert not _reports([(0, good[0]), (1, bytes(changed))])["intact"]
    assert not _reports([(0, good[0]), (1, good[1]), (1, good[1])])["intact"]  # a message twice
    missing = _reports([(0, good[0])])
    assert not missing["intact"] and missing["delivered"] == 1
    swapped = good[1][1000:2000] + good[1][:1000] + good[1][2000:]  # two packets in each other's place
    assert not _reports([(0, good[0]), (1, swapped)])["intact"]
    assert not _reports([(0, good[1]), (1, good[0])])["intact"]  # each message under the other's index
