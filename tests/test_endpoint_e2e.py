"""End to end between two OS processes over real UDP on loopback (the uet-bench pair transfer).

The receiver runs in a spawned process with its own Endpoint; both FEPs impair what they
transmit (loss, reordering, duplication), so data and ACKs are hit in both directions.
"""

from __future__ import annotations

import pytest
from uet.tools.bench import PairOptions, run_pair

from uet.link import loopback_addresses

MiB = 1 << 20


def _run(mode: str, size: int, **kw) -> dict:
    a, b = loopback_addresses(2)
    opts = PairOptions(size=size, payload=8192, mode=mode, addresses=(a, b), raw=False, timeout=120.0, **kw)
    return run_pair(opts)


@pytest.mark.parametrize("mode,receive", [("rud", "posted"), ("rod", "posted"), ("rud", "unexpected")])
def test_32mib_with_loss_reorder_dup_arrives_intact_once(mode: str, receive: str) -> None:
    """``posted``: tagged receives into a registered buffer (the expected list); ``unexpected``:
    ``recv()`` and reassembly on the overflow path."""
    rec = _run(mode, 32 * MiB, loss=0.05, reorder=0.05, dup=0.05, seed=3, receive=receive)
    assert rec["error"] is None
    assert rec["intact"] and rec["delivered_bytes"] == 32 * MiB
    assert rec["duplicates"] == 0
    assert rec["impaired"] > 0  # the impairment really dropped packets...
    assert rec["retransmits"] > 0  # ...and PDS really recovered them


def test_rudi_with_loss_and_dup_delivers_each_message_once() -> None:
    rec = _run("rudi", 4 * MiB, loss=0.03, reorder=0.03, dup=0.05, message_size=256 * 1024, seed=4)
    assert rec["error"] is None
    assert rec["intact"] and rec["messages_delivered"] == rec["messages"] == 16
    assert rec["duplicates"] == 0
    assert rec["retransmits"] > 0


def test_uud_best_effort() -> None:
    clean = _run("uud", 2 * MiB, seed=5)
    assert clean["error"] is None and clean["duplicates"] == 0
    # On an idle loopback nothing is lost, but UUD has no flow control: a slow receiver may drop.
    assert 0 < clean["delivered_bytes"] <= 2 * MiB
    lossy = _run("uud", 2 * MiB, loss=0.2, dup=0.1, seed=6)
    assert lossy["error"] is None and lossy["duplicates"] == 0
    assert lossy["delivered_bytes"] < 2 * MiB and not lossy["intact"]
    assert lossy["retransmits"] == 0
