"""Two PDCs to one peer under every congestion control (issue 29 item 3).

With RCCC a PDC opened while another PDC of the same CCC (same peer and traffic class) had spent
its credit sent no packet at all: a CREDIT_REQ needs an established PDC and only a packet of its
own carries its credit target, so no grant ever came (and the next send on the first PDC queued
behind it). Every CC × mode × mode: a message in one mode, then one in the other, then the first
again, each long enough to spend the speculative credit. Each completes, and the first message
of each mode puts its first request on the wire at once.
"""

from __future__ import annotations

import itertools

import pytest
from fep_harness import A_ADDR, B_ADDR, FepPair, decode

from uet.fep import FepConfig
from uet.fep.config import with_config
from uet.pds import Mode
from uet.wire.pds import PdsType

CCS = ("none", "nscc", "rccc", "nscc+rccc")
MODES = (Mode.RUD, Mode.ROD, Mode.RUDI, Mode.UUD)
#: PDS types of a mode's requests (the CC request types under a CC that sends its state)
TYPES = {
    Mode.RUD: {PdsType.RUD_REQ, PdsType.RUD_CC_REQ},
    Mode.ROD: {PdsType.ROD_REQ, PdsType.ROD_CC_REQ},
    Mode.RUDI: {PdsType.RUDI_REQ},
    Mode.UUD: {PdsType.UUD_REQ},
}
SIZE = 240_000  # > MaxWnd (225,000 bytes at the default 100 Gb/s, 12 µs): speculation is spent


@pytest.mark.parametrize(
    ("cc", "first", "second"), list(itertools.product(CCS, MODES, MODES)), ids=lambda v: getattr(v, "name", v)
)
def test_second_mode_to_the_same_peer_sends_at_once(cc: str, first: Mode, second: Mode) -> None:
    pair = FepPair(with_config(FepConfig(), cc=cc), seed=1)
    data = bytes(SIZE)
    for n, mode in enumerate((first, second, first)):
        mark = len(pair.wire)
        h = pair.a.core.send(B_ADDR, data, mode=mode)
        pair.step()
        out = {decode(t).sections[0][1].type for _at, src, t in pair.wire[mark:] if src == A_ADDR}
        if mode not in (first, second)[:n]:  # its first message: a new PDC (RUD, ROD) or none
            assert out & TYPES[mode], f"send {n} ({mode.name}) sent no request at once: {out}"
        assert pair.complete(pair.a, h, max_ns=2_000_000_000) == [None], f"send {n} ({mode.name})"
