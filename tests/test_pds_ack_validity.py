"""An ACK is applied only when it acknowledges PSNs its PDC sent, within the window (issue 29
item 5): a spoofed ACK that also claims one unsent PSN — or a CACK behind the window — is dropped
whole, so none of the in-flight packets it covers is reported delivered. (An ACK from the peer's
address with the PDC's IDs for PSNs in flight only TSS can tell from the target's: README "What
protects what".)"""

from __future__ import annotations

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, ses_small

from uet.pds import Acked, Mode, PdsConfig, PdsCore
from uet.wire import pds as w

START = 5000
ACK = w.ACK_CC[(False, "nscc")]


def _sent(n: int) -> tuple[PdsCore, int]:
    """A core that sent ``n`` one-packet messages to B at time 0 (none arrived): (core, PDCID)."""
    core = PdsCore(A_ADDR, PdsConfig(start_psn=START))
    for i in range(n):
        core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(8), b"x" * 8, token=i, som=True, eom=True, now=0)
    pkts = core.datagrams_to_send(0)
    assert len(pkts) == n
    return core, (pkts[0][0][8] << 8) | pkts[0][0][9]


def _ack(lp: int, cack: int, off: int = 0, sack_off: int = 0, bitmap: int = 0) -> bytes:
    return ACK.encode(
        ACK.make(ack_psn_offset=off, cack_psn=cack, spdcid=77, dpdcid=lp, mpr=1, sack_psn_offset=sack_off,
                 sack_bitmap=bitmap)
    )  # fmt: skip


def _acked(core: PdsCore) -> list[int]:
    out = []
    while (ev := core.next_event()) is not None:
        if isinstance(ev, Acked):
            assert isinstance(ev.token, int)
            out.append(ev.token)
    return out


@pytest.mark.parametrize(
    ("what", "cack", "off", "sack_off", "bitmap"),
    [
        ("SACK bit for an unsent PSN", START + 1, 0, 1, 1 | 1 << 10),  # PSN START+12 was never sent
        ("ACK PSN never sent", START + 1, 7, 0, 0),
        ("CACK behind the window", START - 1000, 1002, 0, 0),
    ],
)
def test_spoofed_ack_claiming_unsent_psns_is_dropped_whole(
    what: str, cack: int, off: int, sack_off: int, bitmap: int
) -> None:
    core, lp = _sent(4)
    core.receive_datagram(_ack(lp, cack, off, sack_off, bitmap), 1_000, source=B_ADDR)
    assert _acked(core) == [], what
    assert core.counters["drop_ack_cack_ahead"] == 1
    # the real target's ACK for the same in-flight packets is applied
    core.receive_datagram(_ack(lp, START + 3), 2_000, source=B_ADDR)
    assert sorted(_acked(core)) == [0, 1, 2, 3]


def test_ack_from_another_address_is_dropped() -> None:
    core, lp = _sent(2)
    core.receive_datagram(_ack(lp, START + 1), 1_000, source="10.0.0.66")
    assert _acked(core) == []
