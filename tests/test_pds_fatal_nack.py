"""Fatal NACKs of the "retry on a new PDC" class and abandoned open messages (spec/behaviour.md
§2.10, §2.12; uet.pds.closing). Regression tests for issue 15 items 1 and 9: each failed before
the fix."""

from __future__ import annotations

import pytest
from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, hdr, nack, ses_small

from uet.pds import Mode, PdsConfig, PdsError
from uet.wire.pds import NackCode, ReqFlag

CFG = PdsConfig(start_psn=0x1000, close_idle_ns=None, target_idle_ns=None)


def _msg(pair: Pair, n: int, tag: str, *, eom_last: bool = True, msg_id: object = None) -> list:
    toks = [(tag, i) for i in range(n)]
    for i, tok in enumerate(toks):
        pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), bytes([i]) * 32, token=tok, som=i == 0,
                           eom=eom_last and i == n - 1, now=pair.now, msg_id=msg_id)  # fmt: skip
    return toks


def _established(pair: Pair):  # noqa: ANN202
    _msg(pair, 1, "est")
    assert pair.run_until(lambda: len(pair.a.acked()) == 1)
    (ipdc,) = [p for p in pair.a.core.pdcs.values() if p.role == "initiator"]
    return ipdc


@pytest.mark.parametrize("code", [NackCode.INV_DPDCID, NackCode.PDC_HDR_MISMATCH, NackCode.CLOSING])
def test_fatal_nack_retries_unacknowledged_message_on_new_pdc(code: NackCode) -> None:
    """Item 9: the PDC closes and the message (nothing of it acknowledged) is sent again from its
    first packet on a new PDC, instead of failing (before: Failed for every packet)."""
    pair = Pair(CFG)
    ipdc = _established(pair)
    toks = _msg(pair, 3, "m")
    sent = pair.take(pair.a)  # the three requests vanish
    assert [hdr(d).psn for d, _x, _e in sent] == [0x1001, 0x1002, 0x1003]
    pair.inject(pair.a, nack(code, 0x1001, ipdc.rpdcid, ipdc.lpdcid), B_ADDR)
    assert ipdc.lpdcid not in pair.a.core.pdcs and not pair.a.failed()
    again = pair.take(pair.a)
    assert len(again) == 3
    hs = [hdr(d) for d, _x, _e in again]
    assert all(h.flags & ReqFlag.SYN for h in hs) and len({h.spdcid for h in hs}) == 1
    assert hs[0].spdcid != ipdc.lpdcid
    assert [d[-32:] for d, _x, _e in again] == [bytes([i]) * 32 for i in range(3)]
    for d, _x, _e in again:
        pair.inject(pair.b, d, A_ADDR)
    assert pair.run_until(lambda: len(pair.a.acked()) == 4)
    assert sorted(e.token for e in pair.a.acked() if e.token[0] == "m") == toks
    assert not pair.a.failed()
    assert pair.a.core.counters["messages_retried_new_pdc"] == 1


def test_partly_acknowledged_message_still_fails() -> None:
    pair = Pair(CFG)
    ipdc = _established(pair)
    _msg(pair, 3, "m")
    sent = pair.take(pair.a)
    pair.inject(pair.b, sent[0][0], A_ADDR)  # the first packet arrives and is ACKed
    for d, _x, _e in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    pair.run_until(lambda: bool(pair.a.acked()) and len(pair.a.acked()) >= 2, max_ns=1_000_000)
    pair.inject(pair.a, nack(NackCode.INV_DPDCID, 0x1002, ipdc.rpdcid, ipdc.lpdcid), B_ADDR)
    assert sorted((e.token for e in pair.a.failed()), key=repr) == [("m", 1), ("m", 2)]


def test_fatal_close_nack_fails_without_retry() -> None:
    pair = Pair(CFG)
    ipdc = _established(pair)
    _msg(pair, 2, "m")
    pair.take(pair.a)
    pair.inject(pair.a, nack(NackCode.CLOSING_IN_ERR, 0x1001, ipdc.rpdcid, ipdc.lpdcid), B_ADDR)
    assert sorted((e.token for e in pair.a.failed()), key=repr) == [("m", 0), ("m", 1)]
    assert not pair.take(pair.a)


def test_open_message_of_failed_pdc_does_not_block_the_key() -> None:
    """Item 1: a message whose PDC failed before its EOM was submitted left its open-message
    entry behind; every later multi-packet message of that key raised "SOM for message None …
    while it is still open"."""
    pair = Pair(CFG)
    pair.filter = lambda data, src, dst: []
    _msg(pair, 2, "big", eom_last=False)  # the owner stops submitting when the message fails
    assert pair.run_until(lambda: len(pair.a.failed()) == 2)
    pair.filter = None
    toks = _msg(pair, 3, "next")
    assert pair.run_until(lambda: len(pair.a.acked()) == 3)
    assert [e.token for e in pair.a.acked()] == toks
    # a message whose PDC is alive still refuses a second SOM on the same key
    _msg(pair, 2, "open", eom_last=False)
    with pytest.raises(PdsError, match="still open"):
        _msg(pair, 2, "clash", eom_last=False)


def test_a_packet_waiting_for_its_trim_resend_moves_to_a_new_pdc_as_a_fresh_packet() -> None:
    """A trimmed packet waiting for the ACK clock (uet.pds.trimwait) when a fatal NACK moves its
    message to a new PDC must arrive there without its old PDC's waiting mark: before, it kept
    ``rtx_wait``, so a trim on the new PDC was taken for a NACK of an older copy and ignored,
    and its RTO only re-armed it — the message never completed."""
    pair = Pair(CFG)
    ipdc = _established(pair)
    toks = _msg(pair, 2, "m")
    (p0, _x, _e), (p1, _x1, _e1) = pair.take(pair.a)
    pair.inject(pair.b, p0, A_ADDR, trimmed=True)  # p0 cut by a switch: its TRIMMED NACK
    for d, _x, _e in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert pair.a.core.counters["trim_rtx_wait"] == 1 and not pair.take(pair.a)  # p1 still out
    pair.inject(pair.a, nack(NackCode.INV_DPDCID, 0x1002, ipdc.rpdcid, ipdc.lpdcid), B_ADDR)
    again = pair.take(pair.a)
    assert len(again) == 2 and pair.a.core.counters["messages_retried_new_pdc"] == 1
    # on the new PDC the first packet is trimmed again, the second arrives
    pair.inject(pair.b, again[0][0], A_ADDR, trimmed=True)
    pair.inject(pair.b, again[1][0], A_ADDR)
    for d, _x, _e in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert pair.a.core.counters["trim_rtx_wait"] == 2
    assert pair.run_until(lambda: len(pair.a.acked()) == 3, max_ns=1_000_000_000)
    assert sorted(e.token for e in pair.a.acked() if e.token[0] == "m") == toks
    assert not pair.a.failed()
