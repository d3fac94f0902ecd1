"""ROD ordering and go-back-N, RUDI and UUD (spec/behaviour.md §2.13–§2.15)."""

from __future__ import annotations

from dataclasses import replace

from pds_harness import A_ADDR, B_ADDR, SES_NH, Pair, control, hdr, ses_small

from uet.pds import Acked, Delivery, Failed, Mode, PdsConfig
from uet.wire.chain import parse_uet
from uet.wire.pds import ControlType, NackCode, PdsType, ReqFlag, RudiFlag

START = 0x2000_0000
# exact packet sequences without the anti-amplification proof exchange (uet.pds.validation,
# tested in tests/test_pds_validation.py)
CFG = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None, amp_factor=0)


def test_rod_in_order_delivery_with_gap_and_go_back_n() -> None:
    pair = Pair(replace(CFG, rod_buffer=False))  # the spec's go-back-N (buffering is the default)
    for i in range(5):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), bytes([i]), token=i, som=True, eom=True, now=0)
    out = pair.take(pair.a)
    assert [hdr(d).type for d, _x, _y in out] == [PdsType.ROD_REQ] * 5
    assert len({e for _d, _x, e in out}) == 1  # single path: one entropy per PDC
    for i in (0, 2, 3, 1, 4):  # 2 and 3 overtake 1
        pair.inject(pair.b, out[i][0], A_ADDR)
    assert [d.payload for d in pair.b.deliveries] == [b"\x00", b"\x01"]  # 2, 3 discarded, 4 out of order
    replies = pair.take(pair.b)
    codes = [hdr(d).nack_code if hdr(d).type == PdsType.NACK else None for d, _x, _y in replies]
    # one ROD_OOO per gap: 2 opens the gap at 1 (NACK), 3 is discarded silently, 4 opens a new
    # gap at 2 once 1 arrived (NACK)
    assert codes.count(NackCode.ROD_OOO) == 2
    assert pair.b.core.counters["rod_ooo_discarded"] == 1
    for d, _x, _y in replies:
        pair.inject(pair.a, d, B_ADDR)
    re = pair.take(pair.a)
    # go-back-N from the PSN the first NACK says the target expects (PSN 1 was not yet ACKed
    # when it was sent); the second names a point inside the range just resent: ignored
    assert {START + 2, START + 3, START + 4} <= {hdr(d).psn for d, _x, _y in re}
    assert all(hdr(d).flags & ReqFlag.RETX for d, _x, _y in re)
    assert pair.a.core.counters["nack_gbn_stale"] >= 1
    for d, _x, _y in re:
        pair.inject(pair.b, d, A_ADDR)
    assert [d.payload[0] for d in pair.b.deliveries] == [0, 1, 2, 3, 4]
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert sorted(e.token for e in pair.a.acked()) == [0, 1, 2, 3, 4]


def test_rod_order_under_reordering_and_isrod_control() -> None:
    pair = Pair(CFG, seed=9, reorder=0.5, loss=0.05)
    n = 60
    for i in range(n):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), i.to_bytes(2, "big"), token=i, som=True, eom=True,
                           now=0)  # fmt: skip
    assert pair.run_until(lambda: len(pair.a.acked()) == n)
    assert [int.from_bytes(d.payload, "big") for d in pair.b.deliveries] == list(range(n))
    pair.a.core.close(pair.now)
    pair.run_until(lambda: any(hdr(w[3]).type == PdsType.CONTROL for w in pair.wire))
    cps = [hdr(w[3]) for w in pair.wire if hdr(w[3]).type == PdsType.CONTROL]
    assert cps[0].ctl_type == ControlType.CLOSE and cps[0].flags & ReqFlag.ISROD


def test_rod_and_rud_use_separate_pdcs() -> None:
    pair = Pair(CFG)
    pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), b"o", token="o", som=True, eom=True, now=0)
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"u", token="u", som=True, eom=True, now=0)
    pair.a.core.submit(B_ADDR, Mode.RUD, SES_NH, ses_small(), b"j", token="j", som=True, eom=True, now=0, job_id=7)
    assert pair.run_until(lambda: len(pair.a.acked()) == 3)
    assert len(pair.a.core.pdcs) == 3 and len(pair.b.core.pdcs) == 3
    assert {d.mode for d in pair.b.deliveries} == {Mode.ROD, Mode.RUD}


def test_rudi_request_response_and_duplicates() -> None:
    pair = Pair(CFG)
    pair.b.respond = lambda d: (4, bytes([0x01, 0x01]) + d.payload)
    pair.a.core.submit(B_ADDR, Mode.RUDI, SES_NH, ses_small(), b"idem", token="r", som=True, eom=True, now=0)
    (req, dst, _e), = pair.take(pair.a)  # fmt: skip
    h = hdr(req)
    assert h.type == PdsType.RUDI_REQ and h.next_hdr == SES_NH and len(req) == 8 + 20 + 4
    pid = h.pkt_id
    pair.inject(pair.b, req, A_ADDR, ecn=3)
    pair.inject(pair.b, req, A_ADDR)  # duplicate: delivered again, answered again
    assert [d.psn for d in pair.b.deliveries] == [pid, pid] and pair.b.deliveries[0].mode == Mode.RUDI
    assert not pair.b.core.pdcs  # no state at the target
    resp = pair.take(pair.b)
    assert len(resp) == 2
    r0 = hdr(resp[0][0])
    assert r0.type == PdsType.RUDI_RESP and r0.pkt_id == pid and r0.next_hdr == 4 and r0.flags & RudiFlag.M
    assert resp[0][0][8:] == bytes([1, 1]) + b"idem"
    pair.inject(pair.a, resp[0][0], B_ADDR)
    pair.inject(pair.a, resp[1][0], B_ADDR)  # late duplicate response: dropped
    assert pair.a.acked() == [Acked("r", 4, bytes([1, 1]) + b"idem")]
    assert pair.a.core.counters["drop_rudi_late_response"] == 1


def test_rudi_retransmits_until_response_then_fails() -> None:
    pair = Pair(CFG)
    pair.a.core.submit(B_ADDR, Mode.RUDI, SES_NH, ses_small(), b"x", token="x", som=True, eom=True, now=0)
    (req, _d, _e), = pair.take(pair.a)  # fmt: skip
    pair.now = CFG.rto_ns
    pair.a.core.handle_timer(pair.now)
    (re, _d, _e), = pair.take(pair.a)  # fmt: skip
    assert hdr(re).pkt_id == hdr(req).pkt_id and hdr(re).flags & RudiFlag.RETX and re[8:] == req[8:]
    pair.inject(pair.b, re, A_ADDR)
    assert pair.b.deliveries[0].retx
    pair.filter = lambda d, s, t: []
    pair.a.core.submit(B_ADDR, Mode.RUDI, SES_NH, ses_small(), b"y", token="y", som=True, eom=True, now=pair.now)
    assert pair.run_until(lambda: len([e for e in pair.a.events if isinstance(e, Failed)]) == 2)
    assert {e.token for e in pair.a.failed()} == {"x", "y"} and not pair.a.core._rudi_out


def test_rudi_none_response_and_trim() -> None:
    pair = Pair(CFG)
    pair.a.core.submit(B_ADDR, Mode.RUDI, SES_NH, ses_small(), b"x" * 100, token="x", som=True, eom=True, now=0)
    (req, _d, _e), = pair.take(pair.a)  # fmt: skip
    pair.inject(pair.b, req[:30], A_ADDR, trimmed=True)
    (n, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(n).nack_code == NackCode.TRIMMED and hdr(n).flags & 0x08 and hdr(n).nack_psn == hdr(req).pkt_id
    pair.inject(pair.b, req, A_ADDR)
    (r, _d, _e), = pair.take(pair.b)  # fmt: skip
    # SES said nothing (None): the core regenerates the default SES response, never next_hdr
    # NONE (behaviour.md §2.14, §6.9): DEFAULT_RESPONSE, RC_NULL, modified length 100
    assert hdr(r).type == PdsType.RUDI_RESP and hdr(r).next_hdr == 4
    assert r[8:] == bytes([0x00, 0x00]) + bytes(2) + bytes(4) + (100).to_bytes(4, "big")
    parse_uet(r)  # the project's own decoder accepts it


def test_uud_best_effort() -> None:
    pair = Pair(CFG)
    pair.a.core.submit(B_ADDR, Mode.UUD, SES_NH, ses_small(), b"dgram", token="u", som=True, eom=True, now=0)
    assert pair.a.core.next_event() is None  # acked only when handed out
    (d, dst, _e), = pair.take(pair.a)  # fmt: skip
    assert hdr(d).type == PdsType.UUD_REQ and len(d) == 4 + 20 + 5 and dst == B_ADDR
    assert pair.a.acked() == [Acked("u", 0, b"")]
    pair.inject(pair.b, d, A_ADDR)
    (dl,) = pair.b.deliveries
    assert isinstance(dl, Delivery) and dl.mode == Mode.UUD and dl.payload == b"dgram" and dl.ses == ses_small()
    assert pair.take(pair.b) == [] and not pair.b.core.pdcs and pair.a.core.get_timer() is None
    pair.inject(pair.b, d, A_ADDR, trimmed=True)
    assert pair.b.core.counters["drop_uud_trimmed"] == 1


def test_rod_buffering_option_and_rcvd_ses_procg() -> None:
    cfg = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None, rod_buffer=True)
    pair = Pair(cfg)
    for i in range(4):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), bytes([i]), token=i, som=True, eom=True, now=0)
    out = pair.take(pair.a)
    pair.inject(pair.b, out[0][0], A_ADDR)
    pair.take(pair.b)
    pair.inject(pair.b, out[2][0], A_ADDR)  # 1 is late: 2 is buffered, not delivered
    (ack, _d, _e), = pair.take(pair.b)  # fmt: skip
    h = hdr(ack)
    assert h.type == PdsType.ACK_CC and h.cack_psn == START and h.ack_psn_offset == 0
    assert h.sack_bitmap == 0b10 and h.sack_psn_offset == 1  # PSN 2 reported received
    assert [d.payload for d in pair.b.deliveries] == [b"\x00"]
    (tp,) = pair.b.core.pdcs.values()
    (ip,) = pair.a.core.pdcs.values()
    pair.inject(pair.b, control(ControlType.ACK_REQ, START + 2, ip.lpdcid, tp.lpdcid), A_ADDR)
    (n, _d, _e), = pair.take(pair.b)  # fmt: skip
    assert hdr(n).nack_code == NackCode.RCVD_SES_PROCG and hdr(n).nack_psn == START + 2
    pair.inject(pair.b, out[1][0], A_ADDR)  # gap fills: 1 and the buffered 2 are delivered in order
    pair.inject(pair.b, out[3][0], A_ADDR)
    assert [d.payload[0] for d in pair.b.deliveries] == [0, 1, 2, 3]
    assert pair.b.core.counters["rod_buffered"] == 1 and "nack_tx_ROD_OOO" not in pair.b.core.counters
    for d, _x, _y in pair.take(pair.b):
        pair.inject(pair.a, d, B_ADDR)
    assert sorted(e.token for e in pair.a.acked()) == [0, 1, 2, 3]


def test_rod_buffering_under_loss_and_reordering() -> None:
    cfg = PdsConfig(start_psn=START, close_idle_ns=None, target_idle_ns=None, rod_buffer=True, rto_ns=200_000)
    for seed in range(5):
        pair = Pair(cfg, seed=seed, reorder=0.4, loss=0.1, dup=0.1)
        for i in range(80):
            pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), i.to_bytes(2, "big"), token=i, som=True,
                               eom=True, now=0)  # fmt: skip
        assert pair.run_until(lambda: len(pair.a.acked()) == 80)  # noqa: B023 - called in this iteration
        assert [int.from_bytes(d.payload, "big") for d in pair.b.deliveries] == list(range(80))
        assert not pair.a.failed()


def _rod_lossy(rod_buffer: bool, seed: int = 11) -> Pair:
    cfg = PdsConfig(close_idle_ns=None, target_idle_ns=None, rto_ns=1_000_000, rod_buffer=rod_buffer)
    drops = []
    pair = Pair(cfg, seed=seed)
    rng = __import__("random").Random(seed)

    def filt(data: bytes, src: str, dst: str) -> list[bytes]:
        if src == A_ADDR and data[0] >> 3 == PdsType.ROD_REQ and rng.random() < 0.02:
            drops.append(data)
            return []
        return [data]

    pair.filter = filt
    n = 1500
    for i in range(n):
        pair.a.core.submit(B_ADDR, Mode.ROD, SES_NH, ses_small(), i.to_bytes(2, "big") * 64, token=i, som=True,
                           eom=True, now=0)  # fmt: skip
    assert pair.run_until(lambda: len(pair.a.acked()) == n, max_ns=20_000_000_000)
    assert [int.from_bytes(d.payload[:2], "big") for d in pair.b.deliveries] == list(range(n))
    pair.drops = drops  # type: ignore[attr-defined]
    return pair


def test_rod_go_back_n_one_nack_per_loss_and_bounded_resends() -> None:
    """2 % data loss on a 1500-packet ROD transfer: about one ROD_OOO NACK per loss (not one per
    packet in flight behind it) and at most (losses × window) retransmissions."""
    pair = _rod_lossy(False)
    losses = len(pair.drops)  # type: ignore[attr-defined]
    nacks = pair.b.core.counters.get("nack_tx_ROD_OOO", 0)
    retx = pair.a.core.counters.get("retransmits", 0)
    assert losses > 10
    assert nacks <= 2 * losses
    assert retx <= losses * CFG.max_outstanding
    assert pair.b.core.counters["rod_ooo_discarded"] > nacks  # the flight behind a loss: silent


def test_rod_buffer_option_resends_only_losses() -> None:
    pair = _rod_lossy(True)
    losses = len(pair.drops)  # type: ignore[attr-defined]
    assert pair.a.core.counters.get("retransmits", 0) <= 3 * losses
