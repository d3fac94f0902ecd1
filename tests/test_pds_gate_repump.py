"""Issue 10 item 7: a PDC the shared congestion gate refused is pumped again when another PDC's
ACK frees the gate (behaviour.md §2.5: one CCC per (peer, traffic class), shared by its PDCs).

Two PDCs from A to B in the same traffic class (two JobIDs) share one fixed-window gate of 4
packets. PDC 1 fills the window; PDC 2's SYN packet is refused and stays pending in SYN_SENT.
When B's ACK for PDC 1 frees the window, PDC 2 must send at once — before the fix it stayed
pending for good and the pair went idle."""

from __future__ import annotations

from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, ses_small

from uet.pds import Mode, PdsConfig
from uet.pds.pdc import InitiatorPdc
from uet.pds.states import InitiatorState
from uet.wire.chain import parse_uet
from uet.wire.pds import REQUEST_SYN, PdsType


def _syn_requests(out: list) -> list:
    """The SYN requests among ``out`` (decoded with the SYN layout)."""
    pkts = [parse_uet(d) for d, _dst, _e in out]
    return [k.pds for k in pkts if k.pds_layout is REQUEST_SYN]


def test_refused_pdc_is_pumped_when_a_sibling_ack_frees_the_shared_gate() -> None:
    # exact packet sequences without the anti-amplification proof exchange (uet.pds.validation,
    # tested in tests/test_pds_validation.py)
    cfg = PdsConfig(cc_window=4, start_psn=1000, amp_factor=0)
    p = Pair(cfg, seed=3)
    a, b = p.a, p.b
    for i in range(4):
        a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"x", token=("j1", i), som=True, eom=True, now=0, job_id=1)
    first = p.take(a)
    assert len(first) == 4
    a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"y", token=("j2", 0), som=True, eom=True, now=0, job_id=2)
    assert p.take(a) == []  # the gate (4 in flight) refuses PDC 2's first packet
    pdc2 = next(pdc for pdc in a.core.pdcs.values() if isinstance(pdc, InitiatorPdc) and pdc.key[1] == 2)
    assert pdc2.state is InitiatorState.SYN_SENT and len(pdc2.pending) == 1
    # B receives PDC 1's four requests and ACKs them
    for d, _dst, _e in first:
        p.inject(b, d, A_ADDR)
    acks = p.take(b)
    assert acks and all(d[0] >> 3 in (PdsType.ACK, PdsType.ACK_CC) for d, _dst, _e in acks)
    for d, _dst, _e in acks:
        p.inject(a, d, B_ADDR)
    assert len(a.acked()) == 4
    out = p.take(a)
    # exactly PDC 2's pending packet leaves now, as a SYN request from PDC 2 with its Start_PSN
    assert len(out) == 1
    (req,) = _syn_requests(out)
    assert req.spdcid == pdc2.lpdcid and req.psn == pdc2.start_psn
    assert not pdc2.pending
    # and the whole exchange completes
    assert p.run_until(lambda: len(a.acked()) == 5)
