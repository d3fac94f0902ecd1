"""The per-packet fast paths of the simulator's engine and of the message layer, each against the
general path it stands for: the same inputs through both give the same answers and the same state.

- :meth:`uet.ses.reassembly.Reassembler.deliver` places a middle packet whose SES header bytes
  0–33 equal those its message's last checked middle packet had without checking them again
  (``_continue``); here every packet also goes to a twin whose fast path always declines.
- :meth:`uet.sim.engine.Engine._deliver_one` hands an instant's only frame to its core without the
  per-host batch of :meth:`~uet.sim.engine.Engine._deliver_many`; here whole runs (UET, whose core
  takes the packed tuples, and TSS, which takes records) are repeated with every frame going
  through the general path, and their results compared.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from uet.ses.message import MessageConfig
from uet.ses.reassembly import Reassembler
from uet.ses.segmenter import Segmenter
from uet.sim import scenario
from uet.sim.engine import Engine

pytestmark = pytest.mark.in_memory  # the engine runs on the virtual-time loop (a socketpair)

A, B = "10.0.0.1", "10.0.0.2"
PAYLOAD = 512


def _packets(peer: str, mid: int, data: bytes) -> list[tuple[str, bytes, bytes]]:
    seg = Segmenter(job_id=0, initiator=1, payload_size=PAYLOAD)
    return [(peer, bytes(ses), bytes(pl)) for ses, pl, _som, _eom in seg.packets(data, mid)]


def _state(ra: Reassembler) -> tuple[Any, ...]:
    return (
        ra.counters,
        ra.partial_count,
        [(m.source, m.message_id, bytes(m.data)) for m in ra.completed],
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("inplace", [True, False])
def test_reassembly_fast_path_equals_the_general_path(seed: int, inplace: bool) -> None:
    rng = random.Random(seed)
    cfg = MessageConfig(payload_size=PAYLOAD, inplace_threshold=2048 if inplace else 1 << 30)
    fast, slow = Reassembler(config=cfg), Reassembler(config=cfg)
    slow._continue = lambda *a: False  # type: ignore[method-assign]
    taken = 0
    real = fast._continue

    def counted(*a: Any) -> bool:
        nonlocal taken
        ok = real(*a)
        taken += ok
        return ok

    fast._continue = counted  # type: ignore[method-assign,assignment]
    # two peers' messages with the same message id, a second message of one peer, interleaved
    msgs = [(A, 7, PAYLOAD * 9 + 5), (B, 7, PAYLOAD * 12), (A, 8, PAYLOAD * 6)]
    pkts = [p for peer, mid, n in msgs for p in _packets(peer, mid, rng.randbytes(n))]
    order = sorted(range(len(pkts)), key=lambda i: i + rng.uniform(-4, 4))  # local reordering
    sent: list[tuple[str, bytes, bytes]] = []
    for i in order:
        peer, ses, pl = pkts[i]
        sent.append((peer, ses, pl))
        r = rng.random()
        if r < 0.1:  # a duplicate
            sent.append((peer, ses, pl))
        elif r < 0.13:  # a packet whose header changed in bytes 0-33 (match bits): the general path
            sent.append((peer, ses[:30] + bytes([ses[30] ^ 1]) + ses[31:], pl))
        elif r < 0.16:  # a payload shorter than its payload_length
            sent.append((peer, ses, pl[:-1]))
    for peer, ses, pl in sent:
        # the PDS core hands views (payload_views, the FEP core's setting) or bytes
        args = (memoryview(ses), memoryview(pl)) if rng.random() < 0.7 else (ses, pl)
        assert fast.deliver(peer, 0, 3, *args) == slow.deliver(peer, 0, 3, *args)
        assert _state(fast) == _state(slow)
    assert taken > 0 if inplace else taken == 0  # in place only: segments are kept as bytes
    assert fast.counters["messages"] >= 1


class _General(Engine):
    """The engine with every frame delivered through the general path."""

    def _deliver_one(self, hi: int, frame: bytearray, now: int) -> None:
        self._deliver_many([(now, hi, frame)], now)


def _run(**run: Any) -> dict[str, Any]:
    res = scenario.simulate({"endpoints": 4, "message_bytes": 24 * 1024, "messages": 2, "seed": 3, **run})
    res.pop("timing", None)
    return res


@pytest.mark.parametrize("tss", [False, True])
def test_a_run_gives_the_same_results_without_the_one_frame_delivery(tss: bool, monkeypatch: Any) -> None:
    fast = _run(tss=tss)
    monkeypatch.setattr(scenario, "Engine", _General)
    general = _run(tss=tss)
    assert fast["ok"] and fast == general
