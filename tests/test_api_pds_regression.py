"""Regression found by the SES API stress test (tests/test_api_stress.py): a PDS initiator must
never treat an unacknowledged packet as implicitly acknowledged.

When packets are acknowledged one by one (their responses are guaranteed, so the target holds its
CACK back until they are cleared, behaviour.md §2.7), the initiator's ``tx_base`` runs ahead of
the CACK it has seen. A later (or reordered) ACK whose CACK is newer than the last one but still
behind ``tx_base`` used to make the CACK walk start at ``tx_base`` and never meet CACK + 1, so it
"acknowledged" every outstanding packet up to the next PSN: reads and fetching atomics then
completed without their data. Exact packets, no timing.
"""

from __future__ import annotations

from pds_harness import hdr, ses_small

from uet.pds import Acked, Mode, PdsCore
from uet.wire import pds as pds_wire

A, B = "10.0.0.1", "10.0.0.2"
B_PDC = 77


def _ack(psn: int, cack: int, dpdcid: int) -> bytes:
    return pds_wire.ACK.encode((7, 0, 0, (psn - cack) & 0xFFFF, cack, B_PDC, dpdcid))


def test_cack_behind_tx_base_acknowledges_nothing_new() -> None:
    core = PdsCore(A)
    for i in range(6):
        core.submit(B, Mode.RUD, 1, ses_small(), b"x", token=i, som=True, eom=True, now=0)
    out = core.datagrams_to_send(0)
    assert len(out) == 6
    first = hdr(out[0][0])
    start, mine = first.psn, first.spdcid
    # packets 0..3 acknowledged individually; the target's CACK stays before packet 0
    for i in range(4):
        core.receive_datagram(_ack(start + i, start - 1, mine), 10 + i, source=B)
    # a reordered ACK for packet 1 carrying CACK = packet 1 (newer than any CACK seen so far)
    core.receive_datagram(_ack(start + 1, start + 1, mine), 20, source=B)
    acked = []
    while (ev := core.next_event()) is not None:
        if isinstance(ev, Acked):
            acked.append(ev.token)
    assert sorted(acked) == [0, 1, 2, 3]  # packets 4 and 5 are still outstanding
    assert not core.idle()
